"""Text processing shared by prepare (to build the data) and finetune/evaluate (to process new raw text
exactly as the training data was processed). Start from `TextPipeline` in pipeline.py.

Imported lazily, so that `xlp_cli.text.langs` (used to check flags) does not load the tokenizers.
"""

from typing import Any

__all__ = ["TextPipeline"]


def __getattr__(name: str) -> Any:
    if name == "TextPipeline":
        from xlp_cli.text.pipeline import TextPipeline

        return TextPipeline
    raise AttributeError(name)
