"""Zero-shot POS tagging (XTREME's UD-POS): a token classifier trained on English UD, tested on every UD language."""
