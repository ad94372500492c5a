"""xlp: raw multilingual text -> pretrained multilingual Transformers, with switchable language encodings."""

__version__ = "0.1.0"
