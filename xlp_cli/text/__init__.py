"""Text processing shared by prepare (to build the data) and finetune/evaluate (to process new raw text
exactly as the training data was processed). Start from `TextPipeline` in pipeline.py."""

from xlp_cli.text.pipeline import TextPipeline

__all__ = ["TextPipeline"]
