"""`xlp export --format hf RUN OUT`: a pre-trained xlp encoder as a Hugging Face model folder (docs/export.md).

    config.py        ExportConfig (the stage's flags)
    run.py           the stage: read the run, pick the folder kind, write it (manifest last)
    hf_xlm.py        encodings the stock `XLMWithLMHeadModel` can express: config.json + renamed weights
    hf_remote.py     the others: xlp's own weights + `modeling_xlp.py` for `trust_remote_code=True`
    modeling_xlp.py  that modeling file (torch + transformers only; copied into the export, never imported by xlp)
    hf_tokenizer.py  the tokenizer files: XLMTokenizer's (vocab.json, merges.txt) and tokenizer_config.json
    tokenization_xlp.py  XlpTokenizer, xlp's exact text pipeline (copied into the export; imports xlp_cli)
"""
