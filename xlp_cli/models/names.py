"""The names of the language encodings and encoder presets, without importing torch.

Config modules (and so `xlp --help`) need the names for their choices; the classes live in
`encodings.py` and `encoder.py`, and a test keeps these tuples equal to their tables.
"""

ENCODING_NAMES = ("none", "additive", "attaching", "xlp", "vle")
ENCODER_PRESETS = ("tiny", "small", "xlm15")
