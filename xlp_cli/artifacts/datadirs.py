"""Several `--data` folders: which of them are outputs of a given stage, and a one-line refusal where a stage
reads only one (docs/architecture.md, "Several --data folders").

    given_outputs(data, "prepare")        -> the distinct folders among `data` that are `xlp prepare` outputs
    only_one(data, "bpe-apply", "xlp pretrain")   BadInput when `data` names two or more of them

Only the folders named on the command line count (and the bpe/ids folders that `xlp prepare --bpe-codes` links
from its manifest), never the folders their `upstream` links lead to: `--data IDS --data VOCAB` names one `bpe apply`
output, VOCAB's upstream link to IDS notwithstanding.
"""

from __future__ import annotations

from pathlib import Path

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.manifest import try_read_manifest
from xlp_cli.artifacts.shards import MANIFEST
from xlp_cli.core.errors import BadInput


def _stage_of(folder: Path) -> str | None:
    m = try_read_manifest(folder)
    return m.get("stage") if m else None


def given_outputs(data: list[Path], stage: str) -> list[Path]:
    found: list[Path] = []
    for d in data:
        m = try_read_manifest(d)
        if m is None:
            continue
        hits = [Path(d)] if m.get("stage") == stage else []
        outputs = m.get("outputs") if isinstance(m.get("outputs"), dict) else {}
        for key in ("ids", "bpe"):
            if not hits and isinstance(outputs.get(key), str):
                inner = layout.linked_folder(Path(d), outputs[key], f"outputs.{key}", Path(d) / MANIFEST)
                hits = [inner] if _stage_of(inner) == stage else []
        for h in hits:
            if h.resolve() not in [f.resolve() for f in found]:
                found.append(h)
    return found


def only_one(data: list[Path], stage: str, command: str) -> None:
    given = given_outputs(data, stage)
    if len(given) > 1:
        raise BadInput(f"--data names {len(given)} `xlp {stage}` outputs ({', '.join(map(str, given))}); {command} "
                       "reads one of them: give one", path="--data")
