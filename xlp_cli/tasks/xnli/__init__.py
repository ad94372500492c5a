"""XNLI (XLP paper 4.1): fine-tuning a classifier on a pre-trained encoder, and scoring its predictions."""
