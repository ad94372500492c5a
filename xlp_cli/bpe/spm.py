"""SentencePiece (XLM-R style): learn a unigram or BPE model on raw, untokenized text and apply it.

The model's own ids are not used downstream: pieces are mapped through an XLM-layout `Dictionary`
(specials 0..13, then pieces by their count on the learning corpus, then never-seen pieces in model order),
so every later stage reads one kind of dictionary whatever the tokenizer.
"""

from __future__ import annotations

import io
import os
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator

from xlp_cli.artifacts.files import atomic_path
from xlp_cli.core.errors import BadInput, WorkFailed


def learn(lines: Iterable[str], model_path: Path, *, vocab_size: int, model_type: str, character_coverage: float,
          seed: int) -> None:
    import sentencepiece as spm

    buf = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=buf, vocab_size=vocab_size, model_type=model_type,
            character_coverage=character_coverage, num_threads=max(1, min(8, os.cpu_count() or 1)),
            minloglevel=2, hard_vocab_limit=False,
            unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1,
        )
    except RuntimeError as e:
        raise WorkFailed(f"SentencePiece training failed: {str(e).splitlines()[0]}") from None
    with atomic_path(model_path) as tmp:
        tmp.write_bytes(buf.getvalue())


class SpmCodec:
    def __init__(self, model_path: Path):
        import sentencepiece as spm

        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise BadInput("no such SentencePiece model", path=model_path)
        self.sp = spm.SentencePieceProcessor()
        try:
            self.sp.load(str(self.model_path))
        except (OSError, RuntimeError) as e:
            raise BadInput(f"not a SentencePiece model ({str(e).splitlines()[0]})", path=model_path) from None

    def pieces(self) -> list[str]:
        """The model's normal pieces, in model order (control/unknown pieces left out)."""
        sp = self.sp
        return [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                if not (sp.is_control(i) or sp.is_unknown(i))]

    def apply_lines(self, lines: list[str]) -> list[str]:
        return [" ".join(p) for p in self.sp.encode(lines, out_type=str)]


def piece_counts(codec: SpmCodec, batches: Iterator[list[str]]) -> list[tuple[str, int]]:
    """Pieces by count on the learning corpus (desc, then model order), then unseen pieces (count 0)."""
    counts: Counter[str] = Counter()
    for lines in batches:
        for pieces in codec.sp.encode(lines, out_type=str):
            counts.update(pieces)
    order = {p: i for i, p in enumerate(codec.pieces())}
    seen = sorted((p for p in counts if p in order), key=lambda p: (-counts[p], order[p]))
    unseen = [p for p in order if p not in counts]
    return [(p, counts[p]) for p in seen] + [(p, 0) for p in unseen]
