"""`xlp export --format hf RUN OUT`: a pre-trained xlp encoder as a Hugging Face model folder (docs/export.md).

    config.py        ExportConfig (the stage's flags)
    run.py           the stage: read the run, pick the folder kind, write it (manifest last)
    hf_xlm.py        encodings the stock `XLMWithLMHeadModel` can express: config.json + renamed weights
    hf_remote.py     the others: xlp's own weights + `modeling_xlp.py` for `trust_remote_code=True`
    modeling_xlp.py  that modeling file (torch + transformers only; copied into the export, never imported by xlp)
    hf_tokenizer.py  tokenizer.json (BPE with XLM's vocabulary and special ids) from the run's tokenizer files
"""
