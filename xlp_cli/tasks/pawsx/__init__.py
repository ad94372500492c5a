"""PAWS-X paraphrase identification (XTREME): sentence pairs on XNLI's classifier and code path."""
