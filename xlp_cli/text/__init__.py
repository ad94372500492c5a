"""Text processing shared by prepare (to build the data) and finetune/evaluate (to process new raw text
exactly as the training data was processed). Start from `TextPipeline` in pipeline.py.

This file imports nothing: the stage configs import `xlp_cli.text.langs` to check flags at CLI start-up, and the
compiled pipeline (`_native`) is loaded on first use (native.py).
"""
