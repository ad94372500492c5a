"""Sentence retrieval without fine-tuning (XTREME's Tatoeba task, and the 10-way parallel UD PUD sentences)."""
