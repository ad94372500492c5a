"""`xlp evaluate`: XNLI tables and transfer gap, lexicon cosine, analysis figures, BLEU, the report."""
