"""BUCC 2018 parallel-sentence mining (XTREME): margin-scored nearest neighbours of a pre-trained encoder, no
fine-tuning; F1 at the threshold that is best on the training part."""
