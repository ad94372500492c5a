"""The one checkpoint layout of xlp, for every kind of model, and its one reader/writer. Nothing here unpickles.

    CKPT/model.safetensors   the weights (a tensor shared by two modules is stored once)
    CKPT/model.json          {"kind": "encoder" | "seq2seq" | "classifier" | "veco-classifier" | "tagger",
                             ...the model's config}
    CKPT/state.pt            optimizer, LR-scheduler and grad-scaler state: tensors and numbers only, read with
                             torch.load(weights_only=True); absent in `best` checkpoints (weights only)
    CKPT/meta.json           format_version, step, tokens, best {score, step, metrics}, objective (its data
                             position), rng, world_size, and the sha256 of model.safetensors and state.pt

    save(CKPT, model, meta, state=None)         written whole into a temporary sibling, then renamed into place
    read_meta(CKPT) -> dict | None              None when there is no complete checkpoint
    load_model(CKPT) -> nn.Module               the model model.json names, with its weights (hash checked)
    load_weights(model, CKPT)                   into an existing model; a key or shape mismatch is BadInput
    load_state(CKPT) -> dict                    state.pt (hash checked)
    load_pretrained(RUN, which="best")          the encoder of an `xlp pretrain` run folder, in eval mode

Checkpoints of xlp 0.1 still load: model.json without "kind", XNLI's `classifier.safetensors`, translation
models with separate q/k/v projections (`legacy.py` renames their tensors), and the older meta.json keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_model as st_save_model

from xlp_cli.artifacts.files import atomic_folder, honour_umask, sha256_file, write_json_atomic
from xlp_cli.core.config import STEPS_MAX, Range
from xlp_cli.core.errors import BadInput
from xlp_cli.core.textfile import json_file, json_object
from xlp_cli.models import legacy
from xlp_cli.models.encoder import ModelConfig, TransformerEncoder
from xlp_cli.models.factory import build_seq2seq
from xlp_cli.models.heads import (ClassifierConfig, PlugInClassifier, SequenceClassifier, SpanExtractor,
                                  TokenClassifier)
from xlp_cli.models.seq2seq import Seq2SeqConfig

FORMAT_VERSION = 2
STEP_RANGE = Range(lo=0, hi=STEPS_MAX)  # a checkpoint's step: what --max-steps allows
WEIGHTS, CONFIG, STATE, META = "model.safetensors", "model.json", "state.pt", "meta.json"
LEGACY_WEIGHTS = "classifier.safetensors"  # XNLI checkpoints of xlp 0.1


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The plain model under DDP / torch.compile wrappers."""
    model = getattr(model, "module", model)
    return getattr(model, "_orig_mod", model)


def model_json(model: torch.nn.Module) -> dict[str, Any]:
    model = unwrap(model)
    return {"kind": model.KIND, **model.config.to_dict()}


def _kinds() -> dict[str, Callable[[dict[str, Any]], torch.nn.Module]]:
    """How each model kind is rebuilt from its model.json (a new kind of model is one line here)."""

    return {
        "encoder": lambda d: TransformerEncoder(ModelConfig.from_dict(d)),
        "seq2seq": lambda d: build_seq2seq(Seq2SeqConfig.from_dict(d)),
        "classifier": lambda d: SequenceClassifier.from_config(ClassifierConfig.from_dict(d)),
        "veco-classifier": lambda d: PlugInClassifier.from_config(ClassifierConfig.from_dict(d)),
        "tagger": lambda d: TokenClassifier.from_config(ClassifierConfig.from_dict(d)),
        "span": lambda d: SpanExtractor.from_config(ClassifierConfig.from_dict(d)),
    }


# ---------------------------------------------------------------- writing
def save(folder: str | Path, model: torch.nn.Module, meta: dict[str, Any] | None = None,
         state: dict[str, Any] | None = None) -> Path:
    """Write a complete checkpoint folder atomically; the sha256 of each file goes into meta.json."""
    folder = Path(folder)
    model = unwrap(model)
    with atomic_folder(folder) as tmp:
        st_save_model(model, str(tmp / WEIGHTS), metadata={"format": "pt"})
        _sort_metadata(tmp / WEIGHTS)
        honour_umask(tmp / WEIGHTS)  # safetensors writes 0600 whatever the umask
        write_json_atomic(tmp / CONFIG, model_json(model))
        sums = {WEIGHTS: sha256_file(tmp / WEIGHTS)}
        if state is not None:
            torch.save(state, tmp / STATE)
            sums[STATE] = sha256_file(tmp / STATE)
        write_json_atomic(tmp / META, {"format_version": FORMAT_VERSION, "step": 0, **(meta or {}),
                                       "sha256": sums})
    return folder


def _sort_metadata(path: Path) -> None:
    """Same weights, same bytes: safetensors writes its header's `__metadata__` (here "format" and, for a tensor
    shared by two modules, the name it was stored under) in a per-process random order; sort it in place. (The
    kill sweep of UNMT fine-tuning found resumed checkpoints differing from clean ones by this order alone.)"""
    with open(path, "r+b") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        if len(header.get("__metadata__") or {}) < 2:
            return
        header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
        raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        if len(raw) <= n:  # (the same length: the data offsets stay as they are)
            f.seek(8)
            f.write(raw + b" " * (n - len(raw)))


# ---------------------------------------------------------------- reading
def _weights_path(folder: Path) -> Path | None:
    for name in (WEIGHTS, LEGACY_WEIGHTS):
        if (folder / name).is_file():
            return folder / name
    return None


def read_meta(folder: str | Path) -> dict[str, Any] | None:
    """meta.json of a complete checkpoint (older layouts normalised), or None if there is none."""
    folder = Path(folder)
    path = folder / META
    if not path.is_file() or _weights_path(folder) is None:
        return None
    try:
        meta = json_file(path)
    except BadInput as e:
        raise BadInput(f"corrupt checkpoint meta.json ({e.message}); delete the checkpoint folder or rerun with --force",
                       path=path) from None
    if not isinstance(meta, dict) or not isinstance(meta.get("step"), int) or isinstance(meta["step"], bool):
        raise BadInput("checkpoint meta.json has no integer 'step'; delete the checkpoint folder or rerun with --force",
                       path=path)
    if not STEP_RANGE.allows(meta["step"]):
        raise BadInput(f"checkpoint meta.json: 'step' {meta['step']} is outside its range ({STEP_RANGE.text()}); "
                       "delete the checkpoint folder or rerun with --force", path=path)
    return legacy.normalize_meta(meta)


def _check_hash(folder: Path, name: str) -> None:
    meta_path = folder / META
    if not meta_path.is_file():
        return
    try:
        want = (json_file(meta_path).get("sha256") or {}).get(name)
    except (BadInput, AttributeError):
        return  # read_meta reports a corrupt meta.json
    if want and sha256_file(folder / name) != want:
        raise BadInput(f"corrupt {name}: its sha256 differs from the one recorded in meta.json (damaged or partly "
                       "copied); restore the folder or rerun with --force", path=folder / name)


def read_config(folder: str | Path) -> dict[str, Any]:
    """model.json with its "kind" (inferred for xlp 0.1 files)."""
    folder = Path(folder)
    path = folder / CONFIG
    if not path.is_file():
        raise BadInput("model config not found", path=path)
    d = json_object(path)
    return d if "kind" in d else legacy.infer_kind(d, folder)


def _tensors(path: Path, device: str | torch.device) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(path), device=str(device))
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise BadInput(f"corrupt or unreadable safetensors file ({str(e).splitlines()[0] if str(e) else e})",
                       path=path) from None


def load_weights(model: torch.nn.Module, folder: str | Path, device: str | torch.device = "cpu") -> None:
    """Load a checkpoint's weights into `model`; any missing/unexpected tensor or shape mismatch is BadInput."""
    folder = Path(folder)
    path = _weights_path(folder)
    if path is None:
        raise BadInput("weights not found", path=folder / WEIGHTS)
    _check_hash(folder, path.name)
    target = unwrap(model)
    state = legacy.rename_tensors(_tensors(path, device), target)
    own = target.state_dict()
    aliases = _tied_aliases(own)
    for name, canonical in aliases.items():  # a tensor shared by two modules is stored under one name
        if name not in state and canonical in state:
            state[name] = state[canonical]
        elif canonical not in state and name in state:
            state[canonical] = state[name]
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        raise BadInput(f"weights do not match the model (missing {missing[:3]}, unexpected {unexpected[:3]})", path=path)
    for k, v in state.items():
        if own[k].shape != v.shape:
            raise BadInput(f"weights do not match the model: {k} has shape {tuple(v.shape)}, "
                           f"model expects {tuple(own[k].shape)}", path=path)
    target.load_state_dict(state, strict=True)


def _tied_aliases(state: dict[str, torch.Tensor]) -> dict[str, str]:
    """{name: first name} for the entries of a state dict that share storage with an earlier entry."""
    first: dict[tuple[int, tuple[int, ...]], str] = {}
    out = {}
    for k, v in state.items():
        key = (v.data_ptr(), tuple(v.shape))
        if v.numel() and key in first:
            out[k] = first[key]
        else:
            first.setdefault(key, k)
    return out


def load_model(folder: str | Path, device: str | torch.device = "cpu") -> torch.nn.Module:
    """The model of a checkpoint folder (kind from model.json), with its weights, on `device`."""
    folder = Path(folder)
    d = read_config(folder)
    kinds = _kinds()
    if d["kind"] not in kinds:
        raise BadInput(f"unknown model kind {d['kind']!r} (known: {', '.join(kinds)})", path=folder / CONFIG)
    try:
        model = kinds[d["kind"]]({k: v for k, v in d.items() if k != "kind"})
    except (TypeError, KeyError, ValueError) as e:
        raise BadInput(f"model config does not describe a {d['kind']} ({e})", path=folder / CONFIG) from None
    except BadInput as e:  # a value outside its declared range
        raise BadInput(e.message, path=folder / CONFIG) from None
    load_weights(model, folder, device)
    return model.to(device)


def load_state(folder: str | Path, device: str | torch.device = "cpu") -> dict[str, Any]:
    """state.pt (optimizer/scheduler/scaler), loaded with weights_only=True: a pickle payload is refused."""
    path = Path(folder) / STATE
    if not path.is_file():
        raise BadInput("checkpoint has no optimizer state (state.pt)", path=path)
    _check_hash(Path(folder), STATE)
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unreadable state is a corrupt checkpoint
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise BadInput(f"corrupt or unsafe optimizer state, refused ({first[:200]}); rerun with --force",
                       path=path) from None
    if not isinstance(state, dict) or "optimizer" not in state:
        raise BadInput("optimizer state has no 'optimizer' entry; rerun with --force", path=path)
    return state


def checkpoint_dir(run: str | Path, which: str = "best") -> Path:
    run = Path(run)
    if _weights_path(run) is not None:  # already a checkpoint folder
        return run
    folder = run / "checkpoints" / which
    if _weights_path(folder) is None:
        raise BadInput(f"no '{which}' checkpoint (expected {folder / WEIGHTS})", path=run)
    return folder


def load_pretrained(run: str | Path, which: str = "best", device: str | torch.device = "cpu") -> torch.nn.Module:
    """The pre-trained encoder of a `xlp pretrain` run folder (or of a checkpoint folder), in eval mode."""
    folder = checkpoint_dir(run, which)
    model = load_model(folder, device)
    if getattr(model, "KIND", "") != "encoder":
        raise BadInput(f"not a pre-trained encoder (a {model.KIND} checkpoint)", path=folder)
    return model.eval()
