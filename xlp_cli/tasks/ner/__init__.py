"""Zero-shot NER (XTREME's WikiANN / PAN-X): a BIO token classifier trained on English, tested on every language."""
