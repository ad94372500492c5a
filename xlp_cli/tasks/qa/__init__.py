"""Zero-shot extractive QA (XTREME's XQuAD, MLQA, TyDiQA-GoldP): a span head trained on English, tested on every language."""
