"""Text processing shared by prepare (to build the data) and finetune/evaluate (to process new raw text
exactly as the training data was processed). Start from `TextPipeline` in pipeline.py.

The compiled pipeline (`_native`) is loaded on first use (native.py), so `xlp_cli.text.langs`, which the stage
configs import to check flags, stays cheap.
"""

from xlp_cli.text.pipeline import TextPipeline

__all__ = ["TextPipeline"]
