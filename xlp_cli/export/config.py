"""Config of `xlp export` (every field is a flag)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xlp_cli.core.config import FORCE_HELP, opt
from xlp_cli.core.errors import BadInput


@dataclass
class ExportConfig:
    paths: list[str] = opt(factory=list, argument=True,
                           help="RUN OUT: the `xlp pretrain` run folder and the folder to write (or --data RUN --out OUT).")
    data: list[Path] = opt(factory=list, help="The `xlp pretrain` run folder (the same as the first argument).")
    out: Path | None = opt(None, "The folder to write (the same as the second argument).")
    format: str = opt("hf", "Output format: hf (a Hugging Face transformers model folder).", choices=("hf",))
    which: str = opt("best", "Which checkpoint of the run.", choices=("best", "last"))
    remote_code: bool = opt(False, "Always write the `trust_remote_code` folder (modeling_xlp.py), even when the "
                                   "stock XLMWithLMHeadModel can express the model.")
    force: bool = opt(False, help=FORCE_HELP, volatile=True)

    def validate(self) -> None:
        if len(self.paths) > 2:
            raise BadInput(f"give at most two paths (RUN OUT), got {len(self.paths)}")
        runs = [Path(p) for p in self.paths[:1]] + list(self.data)
        if len({str(r) for r in runs}) != 1:
            if not runs:
                raise BadInput("give the run folder: xlp export --format hf RUN OUT")
            raise BadInput("export reads one run: give RUN once (as the first argument or --data), not "
                           + ", ".join(map(str, runs)), path="--data")
        outs = [Path(p) for p in self.paths[1:]] + ([self.out] if self.out is not None else [])
        if len({str(o) for o in outs}) != 1:
            raise BadInput("give one output folder: xlp export --format hf RUN OUT (or --out OUT)", path="--out")
        self.data, self.out, self.paths = runs[:1], outs[0], []
