"""`xlp finetune`: XNLI classification (xnli.py) and multilingual translation (translation.py)."""
