"""`xlp finetune --task translation`: train a multilingual translation model on parallel id shards.

    xlp finetune --task translation --data IDS --out FT --lang-encoding xlp --preset small --seeds 1,2,3

Defaults follow the XLP paper (4.2, appendix B.2, Table 7): label-smoothed cross-entropy (0.1), Adam
(0.9, 0.98, eps 1e-8) with decoupled weight decay 1e-4, peak lr 5e-4 with 4k warm-up steps then inverse
square root, dropout 0.3, batches of 4096 tokens, beam 5 and length penalty 1.2 when decoding.

Output (one sub-folder per seed; `xlp translate --model FT` picks the first seed unless told):
    FT/manifest.json                   stage "finetune", task "translation", directions, zero-shot, runs
    FT/dict.txt, FT/tokenizer/         dictionary, BPE codes and text-pipeline config (raw text <-> ids)
    FT/results.json                    BLEU per seed, split and direction
    FT/seed-<S>/model.json             Seq2SeqConfig
    FT/seed-<S>/checkpoints/{last,best}/model.safetensors, state.pt (weights_only), meta.json
    FT/seed-<S>/metrics.jsonl          train/valid events
    FT/seed-<S>/predictions/<split>.<src>-<tgt>.jsonl   id, source, hyp, hyp_tok, ref, ref_tok
    FT/seed-<S>/results.json           this seed's BLEU and training summary
A rerun with the same config resumes every seed from its `last` checkpoint (same batches, same dropout
masks: both are functions of seed and step) and skips finished seeds.

DDP: `torchrun --nproc_per_node N -m xlp_cli.cli finetune --task translation ...` (gloo on CPU, NCCL on GPUs,
through `xlp_cli.train.loop.init_distributed`, as `xlp pretrain`). A step trains N token batches, the next N
of the single global batch order, process r the r-th; gradients are averaged; only rank 0 validates, writes
checkpoints (the plain model's weights: loadable in one process), metrics, predictions and the manifest.
AMP (`--amp`): autocast to bf16 (or fp16 with a GradScaler, whose state is checkpointed) on GPUs; fp32 on CPU.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model as st_load_model
from safetensors.torch import save_model as st_save_model

from xlp_cli import artifacts, config as cfgmod, ui
from xlp_cli.bpe.dictionary import Dictionary
from xlp_cli.errors import BadInput, WorkFailed
from xlp_cli.finetune.mt_codec import TextCodec, find_tokenizer
from xlp_cli.finetune.mt_data import (MixedBatcher, Pairs, collate, read_pairs, serve, split_direction,
                                      token_batches, directions_for)
from xlp_cli.models.interlingua import LOSS_TERMS, interlingua_losses
from xlp_cli.models.search import beam_search, greedy
from xlp_cli.models.seq2seq import Seq2Seq, Seq2SeqConfig, build_model, label_smoothed_nll, targets
from xlp_cli.train.loop import (Dist, amp_dtype, autocast, barrier, fmt_time, init_distributed, lr_at, step_seed,
                                ui_text, wrap_ddp)

DEFAULT_LR = 5e-4
# keys that may change between a run and its resumption
RESUMABLE_KEYS = ("max-steps", "epochs", "valid-every", "log-every", "device", "threads", "force", "seeds",
                  "beam", "length-penalty", "max-eval-sentences")


# ----------------------------------------------------------------------------------------------- inputs
def check_config(cfg: Any) -> None:
    if not cfg.data:
        raise BadInput("translation needs --data: an `xlp bpe apply` output with parallel pair folders")
    if len(cfg.lr) > 1:
        raise BadInput("translation trains one learning rate per run; give a single --lr")
    if cfg.batch_size:
        raise BadInput("translation batches by tokens: use --max-tokens, not --batch-size")
    if cfg.max_tokens < 16:
        raise BadInput("--max-tokens must be at least 16")
    if not 0.0 <= cfg.label_smoothing < 1.0:
        raise BadInput("--label-smoothing must be in [0, 1)")
    if not 0.0 <= cfg.mt_dropout < 1.0:
        raise BadInput("--mt-dropout must be in [0, 1)")
    if cfg.temperature <= 0:
        raise BadInput("--temperature must be positive")
    if cfg.beam < 1:
        raise BadInput("--beam must be at least 1")
    if cfg.max_positions < 8:
        raise BadInput("--max-positions must be at least 8")
    bad = [t for t in cfg.intl_losses if t not in LOSS_TERMS]
    if bad:
        raise BadInput(f"unknown --intl-losses {bad} (choose from {', '.join(LOSS_TERMS)})")
    if cfg.arch == "interlingua" and "s2t" not in cfg.intl_losses and "t2s" not in cfg.intl_losses:
        raise BadInput("--intl-losses needs a translation term (s2t or t2s)")
    for d in list(cfg.directions) + list(cfg.zero_shot):
        split_direction(d)
    both = set(cfg.directions) & set(cfg.zero_shot)
    if both:
        raise BadInput(f"direction(s) {', '.join(sorted(both))} cannot be both trained and zero-shot")


def find_ids(data: list[Path]) -> tuple[Path, dict[str, Any]]:
    found = artifacts.find_upstream(list(data), "bpe-apply")
    if found is None:
        for d in data:  # a prepare folder that applied BPE itself (outputs.ids)
            m = artifacts.try_read_manifest(d) or {}
            ids = (m.get("outputs") or {}).get("ids")
            if m.get("stage") == "prepare" and ids:
                sub = Path(d) / ids
                found = (sub, artifacts.read_manifest(sub, stage="bpe-apply"))
                break
    if found is None:
        raise BadInput("no `xlp bpe apply` output among --data (nor a prepare run with --bpe-codes/--bpe-from)",
                       path=", ".join(map(str, data)))
    return found


def fit_lengths(pairs: Pairs, max_src: int, max_tgt: int, policy: str, where: str) -> int:
    """Truncate (or refuse) sentences longer than the model's positions. Returns how many were cut."""
    cut = 0
    for i in range(len(pairs)):
        for seqs, limit, side in ((pairs.src, max_src, pairs.src_lang), (pairs.tgt, max_tgt, pairs.tgt_lang)):
            if len(seqs[i]) > limit:
                if policy == "fail":
                    raise BadInput(f"sentence {pairs.ids[i]} ({side}) has {len(seqs[i])} subword tokens, more than "
                                   f"the {limit} the model's positions allow (--max-positions, or --overflow truncate)",
                                   path=where)
                seqs[i] = seqs[i][:limit]
                cut += 1
    return cut


class References:
    """Raw and tokenized reference text of the prepared pair shards, by id and language."""

    def __init__(self, prep_dir: Path | None, split: str):
        self.rows: dict[str, dict[str, tuple[str, str]]] = {}
        if prep_dir is None:
            return
        root = Path(prep_dir) / split
        if not root.is_dir():
            return
        for folder in sorted(p for p in root.iterdir() if p.is_dir() and "-" in p.name):
            l1, l2 = folder.name.split("-", 1)
            for shard in artifacts.shard_paths(folder):
                t = artifacts.read_shard(shard)
                if not {"id", "raw1", "raw2", "text1", "text2"} <= set(t.column_names):
                    continue
                c = t.to_pydict()
                for i, rid in enumerate(c["id"]):
                    row = self.rows.setdefault(rid, {})
                    row[l1] = (c["raw1"][i], c["text1"][i])
                    row[l2] = (c["raw2"][i], c["text2"][i])

    def get(self, rid: str, lang: str) -> tuple[str, str] | None:
        return self.rows.get(rid, {}).get(lang)


# ----------------------------------------------------------------------------------------------- checkpoints
def save_checkpoint(folder: Path, model: Seq2Seq, optimizer: torch.optim.Optimizer | None, meta: dict[str, Any],
                    scaler: torch.amp.GradScaler | None = None) -> None:
    """Weights (safetensors; the shared embedding stored once), optimizer (and fp16 loss-scaler) state, then
    meta.json last. `model` is the plain model, never its DDP wrapper: the checkpoint loads in one process."""
    folder.mkdir(parents=True, exist_ok=True)
    with artifacts.atomic_path(folder / "model.safetensors") as tmp:
        st_save_model(model, str(tmp))
    if optimizer is not None:
        state = {"optimizer": optimizer.state_dict()}
        if scaler is not None and scaler.is_enabled():
            state["scaler"] = scaler.state_dict()
        with artifacts.atomic_path(folder / "state.pt") as tmp:
            torch.save(state, tmp)
    artifacts.write_json_atomic(folder / "model.json", model.cfg.to_json())
    artifacts.write_json_atomic(folder / "meta.json", meta)


def read_meta(folder: Path) -> dict[str, Any] | None:
    p = folder / "meta.json"
    if not p.is_file() or not (folder / "model.safetensors").is_file():
        return None
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        raise BadInput("corrupt checkpoint meta.json; delete the folder or rerun with --force", path=p) from None


def load_weights(model: Seq2Seq, path: Path, device: str | torch.device = "cpu") -> None:
    if not path.is_file():
        raise BadInput("weights not found", path=path)
    try:
        missing, unexpected = st_load_model(model, str(path), strict=False, device=str(device))
    except Exception as e:  # safetensors raises several types for corrupt files / shape mismatches
        raise BadInput(f"cannot load weights ({str(e).splitlines()[0] if str(e) else type(e).__name__})", path=path) from None
    if missing or unexpected:
        raise BadInput(f"weights do not match the model (missing {list(missing)[:3]}, unexpected {list(unexpected)[:3]})",
                       path=path)


def load_translation_model(run: Path, which: str = "best", device: str | torch.device = "cpu") -> Seq2Seq:
    """A trained model from a seed folder (FT/seed-S) or a checkpoint folder."""
    run = Path(run)
    folder = run if (run / "model.safetensors").is_file() else run / "checkpoints" / which
    cfg_path = folder / "model.json"
    if not cfg_path.is_file():
        raise BadInput(f"no '{which}' checkpoint of a translation model here", path=run)
    try:
        mcfg = Seq2SeqConfig.from_json(json.loads(cfg_path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, TypeError) as e:
        raise BadInput(f"unreadable model.json ({e})", path=cfg_path) from None
    model = build_model(mcfg)
    load_weights(model, folder / "model.safetensors", device)
    return model.to(device).eval()


# ----------------------------------------------------------------------------------------------- steps
def batch_loss(model: Seq2Seq, arch: str, x: torch.Tensor, x_lang: torch.Tensor, y: torch.Tensor, y_lang: torch.Tensor,
               epsilon: float, intl_losses: list[str]) -> tuple[torch.Tensor, dict[str, float]]:
    """Training loss of a batch of pairs x -> y (ids without `</s>`), and numbers to log."""
    if arch == "interlingua":
        terms = interlingua_losses(model, x, x_lang, y, y_lang, intl_losses, epsilon)
        loss = sum(t["loss"] for t in terms.values())
        logs = {f"loss_{k}": float(v["loss"].detach()) for k, v in terms.items()}
        if "s2t" in terms:
            logs["nll"] = terms["s2t"]["nll"] / max(terms["s2t"]["n"], 1)
        return loss, logs  # type: ignore[return-value]
    logits = model(targets(x), x_lang, y, y_lang)
    loss, nll, n = label_smoothed_nll(logits, targets(y), epsilon)
    return loss / max(n, 1), {"nll": float(nll.detach()) / max(n, 1), "tokens": n}


class TrainingLoss(torch.nn.Module):
    """The model and its training loss as one forward: what DistributedDataParallel wraps, because the
    interlingua losses call the model's encode/decode (never its forward), which DDP would not see."""

    def __init__(self, model: Seq2Seq, arch: str, epsilon: float, intl_losses: list[str]):
        super().__init__()
        self.model, self.arch, self.epsilon, self.intl_losses = model, arch, epsilon, list(intl_losses)

    def forward(self, x: torch.Tensor, x_lang: torch.Tensor, y: torch.Tensor, y_lang: torch.Tensor
                ) -> tuple[torch.Tensor, dict[str, float]]:
        return batch_loss(self.model, self.arch, x, x_lang, y, y_lang, self.epsilon, self.intl_losses)


def dropout_seed(seed: int, step: int, rank: int) -> int:
    """Dropout masks of step `step` on process `rank`: rank 0 keeps the single-process seeds."""
    return seed * 1_000_003 + step if rank == 0 else step_seed(seed, step, rank, 7)


@torch.no_grad()
def valid_nll(model: Seq2Seq, data: dict[str, Pairs], langs: list[str], max_tokens: int, device: torch.device,
              amp: torch.dtype | None = None) -> dict[str, float]:
    """Per-token NLL of each direction's references (teacher forcing; autocast to `amp` on GPUs)."""
    model.eval()
    out = {}
    for d, pairs in data.items():
        s, t = split_direction(d)
        tot, n = 0.0, 0
        for b in token_batches(pairs, max_tokens):
            x = collate([pairs.src[i] for i in b]).to(device)
            y = collate([pairs.tgt[i] for i in b]).to(device)
            sl = torch.full((len(b),), langs.index(s), device=device)
            tl = torch.full((len(b),), langs.index(t), device=device)
            with autocast(amp):
                logits = model(targets(x), sl, y, tl)
            _, nll, k = label_smoothed_nll(logits, targets(y), 0.0)
            tot += float(nll)
            n += k
        out[d] = tot / max(n, 1)
    model.train()
    return out


def decode_pairs(model: Seq2Seq, pairs: Pairs, src_lang: int, tgt_lang: int, device: torch.device, *, beam: int,
                 length_penalty: float, max_tokens: int = 2048) -> list[list[int]]:
    """Hypothesis token ids for every source of `pairs`, in order (batched by length)."""
    out: list[list[int] | None] = [None] * len(pairs)
    lens = np.array([len(s) for s in pairs.src])
    order = np.argsort(lens, kind="stable")
    i = 0
    while i < len(order):
        n = 1  # sources sorted by length: the last one of a batch is its longest
        while i + n < len(order) and (int(lens[order[i + n]]) + 1) * (n + 1) * max(beam, 1) <= max_tokens:
            n += 1
        rows = order[i:i + n]
        src = targets(collate([pairs.src[j] for j in rows])).to(device)
        sl = torch.full((len(rows),), src_lang, device=device)
        tl = torch.full((len(rows),), tgt_lang, device=device)
        if beam <= 1:
            hyps = [h.tokens for h in greedy(model, src, sl, tl)]
        else:
            hyps = [h[0].tokens for h in beam_search(model, src, sl, tl, beam=beam, length_penalty=length_penalty)]
        for j, h in zip(rows, hyps):
            out[int(j)] = h
        i += n
    return out  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------------- one run
class Job:
    """Everything a seed's run needs, prepared once."""

    def __init__(self, cfg: Any):
        check_config(cfg)
        self.cfg = cfg
        self.ids_dir, self.ids_manifest = find_ids(cfg.data)
        prep = artifacts.find_upstream([self.ids_dir], "prepare")
        self.prep_dir, self.prep_manifest = (prep if prep else (None, {}))
        self.dico = Dictionary.read(self.ids_dir / "dict.txt")
        keep = set(cfgmod.parse_langs(cfg.lang)) or None
        train = read_pairs(self.ids_dir, "train", keep, max_rows=cfg.max_train_pairs)
        if not train:
            raise BadInput("no parallel training data: expected pair folders train/<l1>-<l2> with shards"
                           + (f" for languages {', '.join(sorted(keep))}" if keep else ""), path=self.ids_dir / "train")
        self.zero_shot = list(dict.fromkeys(cfg.zero_shot))
        self.directions = list(dict.fromkeys(cfg.directions)) or directions_for(train, cfg.mix, cfg.target_lang, set(self.zero_shot))
        if not self.directions:
            raise BadInput(f"no training direction: no pair folder has {cfg.target_lang!r} (--target-lang) on one side"
                           if cfg.mix == "many-to-one" else "no training direction", path=self.ids_dir / "train")
        have = ", ".join(train) or "none"
        self.train: dict[str, Pairs] = {}
        for d in self.directions:
            p = serve(train, d)
            if p is None:
                raise BadInput(f"direction {d} has no training data (pair folders here: {have})", path=self.ids_dir / "train")
            self.train[d] = p
        if cfg.arch == "interlingua":  # one orientation per pair: the losses train both directions
            seen, kept = set(), {}
            for d, p in self.train.items():
                key = frozenset(split_direction(d))
                if key not in seen:
                    seen.add(key)
                    kept[d] = p
            self.train = kept
        self.valid_all = read_pairs(self.ids_dir, "valid", keep)
        self.test_all = read_pairs(self.ids_dir, "test", keep)
        if cfg.arch == "interlingua" and "t2s" in cfg.intl_losses:  # t2s trains the reverse directions too
            for d in list(self.train):
                s, t = split_direction(d)
                if f"{t}-{s}" not in self.directions:
                    self.directions.append(f"{t}-{s}")
            clash = sorted(set(self.directions) & set(self.zero_shot))
            if clash:
                raise BadInput(f"zero-shot direction(s) {', '.join(clash)} would be trained by the t2s loss")
        self.eval_dirs = self.directions + [z for z in self.zero_shot if z not in self.directions]
        for z in self.zero_shot:
            if serve(self.test_all, z) is None and serve(self.valid_all, z) is None:
                raise BadInput(f"zero-shot direction {z} has no valid or test data to evaluate on", path=self.ids_dir)
        langs = sorted({l for d in self.eval_dirs for l in split_direction(d)})
        self.pretrained = None
        if cfg.init_encoder is not None:
            self._check_pretrained(langs)
            langs = list(self.pretrained.config.langs)
        self.langs = langs
        enc = self.pretrained.config if self.pretrained is not None else None
        self.model_cfg = Seq2SeqConfig.from_preset(
            cfg.preset, vocab_size=len(self.dico), langs=langs, arch=cfg.arch, lang_encoding=cfg.lang_encoding,
            dropout=cfg.mt_dropout, max_positions=cfg.max_positions, intl_positions=cfg.intl_positions,
            intl_layers=cfg.intl_layers,
            **({"d_model": enc.d_model, "encoder_kind": "xlm", "encoder_config": enc.to_dict(),
                "enc_layers": enc.n_layers} if enc is not None else {}))
        probe = build_model(self.model_cfg, self.pretrained)
        self.max_src = probe.max_source_len() - 1
        self.max_tgt = self.model_cfg.max_positions - probe.decoder_prefix() - 1
        del probe
        self.truncated = 0
        for d, p in self.train.items():
            self.truncated += fit_lengths(p, self.max_src, self.max_tgt, cfg.overflow, str(self.ids_dir / "train" / d))
        if self.truncated:
            ui.warn(f"{self.truncated} training sentences were longer than the model's positions and were truncated")
        kind, model_path, vocab_path = find_tokenizer(self.ids_dir, self.ids_manifest)
        self.codec = TextCodec(self.dico, kind, model_path, vocab_path, (self.prep_manifest or {}).get("config"))
        self.lowercased = str((self.prep_manifest.get("config") or {}).get("lowercase", "none")) != "none"

    def _check_pretrained(self, langs: list[str]) -> None:
        from xlp_cli.models.checkpoint import load_pretrained

        run = Path(self.cfg.init_encoder)
        self.pretrained = load_pretrained(run, self.cfg.which)
        missing = [l for l in langs if l not in self.pretrained.config.langs]
        if missing:
            raise BadInput(f"the pre-trained encoder has no language {', '.join(missing)} "
                           f"(its languages: {', '.join(self.pretrained.config.langs)})", path=run)
        if self.pretrained.config.vocab_size != len(self.dico):
            raise BadInput(f"the pre-trained encoder has {self.pretrained.config.vocab_size} token ids, the translation "
                           f"data's dictionary {len(self.dico)}: apply the pre-training BPE/dictionary to the parallel data",
                           path=run)
        if self.pretrained.config.lang_encoding != self.cfg.lang_encoding:
            raise BadInput(f"the pre-trained encoder uses --lang-encoding {self.pretrained.config.lang_encoding}, "
                           f"not {self.cfg.lang_encoding}", path=run)
        run_dict = run / "dict.txt"
        if run_dict.is_file() and artifacts.sha256_file(run_dict) != artifacts.sha256_file(self.ids_dir / "dict.txt"):
            raise BadInput("the pre-training dictionary differs from the translation data's dict.txt", path=run_dict)

    def lang_index(self, lang: str) -> int:
        return self.langs.index(lang)

    def new_model(self) -> Seq2Seq:
        enc = None
        if self.pretrained is not None:
            import copy

            enc = copy.deepcopy(self.pretrained)
        return build_model(self.model_cfg, enc)


def _device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise BadInput("--device cuda: no CUDA GPU is available")
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")


def may_leave_parameters_unused(job: Job) -> bool:
    """Whether a training step can leave some parameters without a gradient on some process (DDP must then
    look for them): processes may train different directions in one step, the interlingua calls encode/decode
    and skips switched-off terms, languages that are only evaluated (zero-shot) or only known to a
    pre-trained encoder are never trained, and a pre-trained encoder may carry parts seq2seq does not use.
    One direction of a plain encoder-decoder uses every parameter at every step (checked by DDP, which warns
    when the search finds nothing)."""
    trained = {l for d in job.train for l in split_direction(d)}
    return (job.cfg.arch == "interlingua" or len(job.train) > 1 or set(job.langs) != trained
            or job.pretrained is not None)


def _read_results(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except json.JSONDecodeError:
        raise BadInput("corrupt results.json; delete it or rerun with --force", path=path) from None


def train_one(job: Job, seed: int, run_dir: Path, device: torch.device, d: Dist | None = None) -> dict[str, Any]:
    """Train (or resume) one seed, then decode valid/test with its best checkpoint.

    Under DDP (`d.world > 1`) every process runs this; rank 0 alone validates, writes and decodes, and the
    others wait at a barrier and then read its results.json."""
    cfg = job.cfg
    d = d or Dist()
    batcher = MixedBatcher(job.train, cfg.max_tokens, cfg.temperature, seed)
    total = cfg.max_steps if cfg.max_steps > 0 else cfg.epochs * batcher.steps_per_epoch(d.world)
    done = run_dir / "results.json"
    res = _read_results(done)
    if res is not None and int(res.get("steps", 0)) >= total:
        if d.main:
            ui.info(f"seed {seed}: finished earlier, skipping ({run_dir})")
        return res
    barrier(d)  # every process has read results.json before rank 0 removes it
    if res is not None and d.main:
        done.unlink()  # asked for more steps: continue from `last`
    torch.manual_seed(seed)
    model = job.new_model().to(device)
    lr_peak = cfg.lr[0] if cfg.lr else DEFAULT_LR
    opt = torch.optim.AdamW(model.parameters(), lr=lr_peak, betas=(0.9, 0.98), eps=1e-8, weight_decay=cfg.mt_weight_decay)
    amp = amp_dtype(device, cfg.amp)
    scaler = torch.amp.GradScaler("cuda", enabled=amp == torch.float16)
    valid = {dr: p.take(cfg.max_eval_sentences) for dr in job.directions if (p := serve(job.valid_all, dr)) is not None}
    for dr, p in valid.items():
        fit_lengths(p, job.max_src, job.max_tgt, "truncate", dr)
    step, best = 0, {"valid_nll": math.inf, "step": 0}
    last = run_dir / "checkpoints" / "last"
    meta = read_meta(last)
    if meta is not None:  # every process loads the same checkpoint
        load_weights(model, last / "model.safetensors", device)
        if (last / "state.pt").is_file():
            state = torch.load(last / "state.pt", map_location=device, weights_only=True)
            opt.load_state_dict(state["optimizer"])
            if "scaler" in state and scaler.is_enabled():
                scaler.load_state_dict(state["scaler"])
        step, best = int(meta["step"]), meta["best"]
        batcher.state = meta["batcher"]
        if d.main:
            ui.info(f"seed {seed}: resuming from step {step}")
    net: torch.nn.Module = TrainingLoss(model, cfg.arch, cfg.label_smoothing, cfg.intl_losses)
    if d.world > 1:
        net = wrap_ddp(net, device, find_unused_parameters=may_leave_parameters_unused(job))
    metrics = None
    if d.main:
        artifacts.write_json_atomic(run_dir / "model.json", job.model_cfg.to_json())
        metrics = open(run_dir / "metrics.jsonl", "a", encoding="utf-8")
    li = {l: i for i, l in enumerate(job.langs)}

    def log(ev: dict[str, Any]) -> None:
        if metrics is not None:
            metrics.write(json.dumps(ev) + "\n")
            metrics.flush()

    def checkpoint() -> None:  # rank 0 only
        nonlocal best
        v = valid_nll(model, valid, job.langs, cfg.max_tokens, device, amp) if valid else {}
        mean = float(np.mean(list(v.values()))) if v else math.nan
        log({"event": "valid", "step": step, "valid_nll": mean, "per_direction": v, "time": time.time()})
        is_best = bool(v) and mean < best["valid_nll"] or not valid
        if is_best:
            best = {"valid_nll": mean if v else math.nan, "step": step}
        m = {"step": step, "best": best, "batcher": batcher.state, "seed": seed, "total": total, "world_size": d.world}
        save_checkpoint(last, model, opt, m, scaler)
        if is_best:
            save_checkpoint(run_dir / "checkpoints" / "best", model, None, m)

    model.train()
    t0, tokens, run_nll, start = time.time(), 0, [], step
    bar = ui.progress(ui_text("{task.fields[info]}")) if d.main else None
    try:
        with bar if bar is not None else contextlib.nullcontext():
            task = bar.add_task(f"seed {seed}", total=total, completed=step, info="") if bar is not None else None
            while step < total:
                step += 1
                torch.manual_seed(dropout_seed(seed, step, d.rank))  # dropout masks: a function of (seed, step, rank)
                dr, x, y = batcher.next(d.rank, d.world)
                s, t = split_direction(dr)
                x, y = x.to(device), y.to(device)
                xl = torch.full((x.size(0),), li[s], device=device)
                yl = torch.full((y.size(0),), li[t], device=device)
                lr = lr_at(step, lr_peak, cfg.warmup)
                for g in opt.param_groups:
                    g["lr"] = lr
                with autocast(amp):
                    loss, logs = net(x, xl, y, yl)
                if not torch.isfinite(loss):
                    raise WorkFailed(f"the loss became {float(loss)} at step {step} (lower --lr, raise --warmup"
                                     + (", or use --amp bf16/none)" if amp == torch.float16 else ")"))
                opt.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()  # DDP averages the gradients here
                scaler.unscale_(opt)
                if cfg.clip_norm > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
                scaler.step(opt)
                scaler.update()
                tokens += batcher.last_tokens  # every process's batch of this step
                run_nll.append(logs.get("nll", float(loss.detach())))
                if bar is not None:
                    elapsed = time.time() - t0
                    eta = (total - step) * elapsed / max(step - start, 1)
                    bar.update(task, completed=step, info=f"loss {float(np.mean(run_nll)):.3f} lr {lr:.2e} "
                                                          f"{tokens / max(elapsed, 1e-9):,.0f} tok/s ETA {fmt_time(eta)}")
                if step % cfg.log_every == 0 or step == total:
                    log({"event": "train", "step": step, "lr": lr, "loss": float(loss.detach()), "direction": dr,
                         "nll": float(np.mean(run_nll)), "tokens": batcher.last_tokens,
                         "tokens_per_s": tokens / max(time.time() - t0, 1e-9), "world_size": d.world,
                         **{k: v for k, v in logs.items() if k.startswith("loss_")}})
                    run_nll = []
                if step % cfg.valid_every == 0 or step == total:
                    if d.main:
                        checkpoint()
                    barrier(d)
    finally:
        if metrics is not None:
            metrics.close()
    if not d.main:
        barrier(d)  # rank 0 decodes
        res = _read_results(done)
        if res is None:
            raise WorkFailed("rank 0 wrote no results.json", path=done)
        return res
    try:
        return _decode_and_score(job, seed, run_dir, model, device, step, best, lr_peak, checkpoint)
    finally:
        barrier(d)


def _decode_and_score(job: Job, seed: int, run_dir: Path, model: Seq2Seq, device: torch.device, step: int,
                      best: dict[str, Any], lr_peak: float, checkpoint: Any) -> dict[str, Any]:
    """Decode valid and test with the best checkpoint; write predictions and results.json (rank 0)."""
    cfg = job.cfg
    li = {l: i for i, l in enumerate(job.langs)}
    done = run_dir / "results.json"
    best_dir = run_dir / "checkpoints" / "best"
    if not (best_dir / "model.safetensors").is_file():
        checkpoint()
        best = (read_meta(best_dir) or {"best": best})["best"]
    load_weights(model, best_dir / "model.safetensors", device)
    model.eval()
    results = {"seed": seed, "steps": step, "best_step": best["step"], "best_valid_nll": best["valid_nll"],
               "lr": lr_peak, "bleu": {}, "directions": job.directions, "zero_shot": job.zero_shot,
               "lowercased": job.lowercased}
    for split, corpus in (("valid", job.valid_all), ("test", job.test_all)):
        refs = References(job.prep_dir, split)
        for d in job.eval_dirs:
            pairs = serve(corpus, d)
            if pairs is None:
                continue
            pairs = pairs.take(cfg.max_eval_sentences)
            s, t = split_direction(d)
            src = [a[: job.max_src] for a in pairs.src]
            hyps = decode_pairs(model, Pairs(s, t, pairs.ids, src, pairs.tgt), li[s], li[t], device,
                                beam=cfg.beam, length_penalty=cfg.length_penalty)
            rows = prediction_rows(job.codec, pairs, hyps, refs)
            write_predictions(run_dir / "predictions" / f"{split}.{d}.jsonl", rows)
            results["bleu"].setdefault(split, {})[d] = quick_bleu(rows, job.lowercased)
    artifacts.write_json_atomic(done, results)
    return results


def prediction_rows(codec: TextCodec, pairs: Pairs, hyps: list[list[int]], refs: References) -> list[dict[str, Any]]:
    rows = []
    for rid, src, ref_ids, hyp in zip(pairs.ids, pairs.src, pairs.tgt, hyps):
        r = refs.get(rid, pairs.tgt_lang)
        s = refs.get(rid, pairs.src_lang)
        ref_tok = r[1] if r else codec.to_tokenized(list(ref_ids))
        ref_raw = r[0] if r else codec.to_text(list(ref_ids), pairs.tgt_lang)
        rows.append({"id": rid, "src_lang": pairs.src_lang, "tgt_lang": pairs.tgt_lang,
                     "source": s[0] if s else codec.to_text(list(src), pairs.src_lang),
                     "hyp": codec.to_text(hyp, pairs.tgt_lang), "hyp_tok": codec.to_tokenized(hyp),
                     "ref": ref_raw, "ref_tok": ref_tok})
    return rows


def write_predictions(path: Path, rows: list[dict[str, Any]]) -> None:
    artifacts.write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def quick_bleu(rows: list[dict[str, Any]], lowercase: bool) -> dict[str, float]:
    """Detokenized sacreBLEU (13a) and tokenized BLEU (tokenize=none) of prediction rows."""
    from sacrebleu.metrics import BLEU

    detok = BLEU(lowercase=lowercase).corpus_score([r["hyp"] for r in rows], [[r["ref"] for r in rows]])
    tok = BLEU(tokenize="none", force=True).corpus_score([r["hyp_tok"] for r in rows], [[r["ref_tok"] for r in rows]])
    return {"bleu": round(detok.score, 2), "tok_bleu": round(tok.score, 2), "n": len(rows)}


# ----------------------------------------------------------------------------------------------- stage
def run_translation(cfg: Any) -> dict[str, Any]:
    d, device = init_distributed(cfg.device)  # torchrun: one process per GPU (NCCL) or CPU share (gloo)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    job = Job(cfg)
    config = cfgmod.to_dict(cfg)
    guard = {k: v for k, v in config.items() if k not in RESUMABLE_KEYS}
    if d.main:
        artifacts.guard_out_dir(cfg.out, "finetune", guard, force=cfg.force)
        job.codec.save(cfg.out)
    barrier(d)
    amp = amp_dtype(device, cfg.amp)
    n_params = job.new_model().n_params()
    if d.main:
        ui.info(f"translation: {cfg.arch} / {cfg.lang_encoding}, {n_params / 1e6:.2f}M parameters, directions "
                f"{', '.join(job.directions)}" + (f", zero-shot {', '.join(job.zero_shot)}" if job.zero_shot else "")
                + f" on {device}" + (f" x {d.world} processes" if d.world > 1 else "")
                + (f", {str(amp).replace('torch.', '')} autocast" if amp is not None else ""))
    per_seed = {}
    for seed in cfg.seeds:
        per_seed[str(seed)] = train_one(job, seed, cfg.out / f"seed-{seed}", device, d)
    results = {"task": "translation", "arch": cfg.arch, "lang_encoding": cfg.lang_encoding,
               "directions": job.directions, "zero_shot": job.zero_shot, "seeds": per_seed}
    if d.main:
        _write_outputs(cfg, job, config, results, n_params)
    barrier(d)
    test = {s: r["bleu"].get("test", {}) for s, r in per_seed.items()}
    mean = {}
    for dr in job.eval_dirs:
        vals = [t[dr]["bleu"] for t in test.values() if dr in t]
        if vals:
            mean[dr] = round(float(np.mean(vals)), 2)
    return {"task": "translation", "out": str(cfg.out), "arch": cfg.arch, "lang_encoding": cfg.lang_encoding,
            "parameters": n_params, "directions": job.directions, "zero_shot": job.zero_shot,
            "test_bleu_mean": mean, "seeds": list(per_seed), "device": str(device), "world_size": d.world,
            "rank": d.rank, "amp": str(amp).replace("torch.", "") if amp is not None else "none"}


def _write_outputs(cfg: Any, job: Job, config: dict[str, Any], results: dict[str, Any], n_params: int) -> None:
    """results.json and the manifest (rank 0)."""
    artifacts.write_json_atomic(cfg.out / "results.json", results)
    manifest = artifacts.new_manifest(
        "finetune", config, task="translation",
        upstream=[{"path": str(job.ids_dir.resolve()), "stage": "bpe-apply", "config_hash": job.ids_manifest.get("config_hash")}]
        + ([{"path": str(Path(cfg.init_encoder).resolve()), "stage": "pretrain"}] if cfg.init_encoder else []))
    manifest["outputs"] = {"runs": [f"seed-{s}" for s in cfg.seeds], "results": "results.json", "dict": "dict.txt",
                           "tokenizer": "tokenizer"}
    manifest["counts"] = {"train": {d: len(p) for d, p in job.train.items()}, "parameters": n_params,
                          "truncated": job.truncated}
    manifest["model"] = job.model_cfg.to_json()
    manifest["directions"], manifest["zero_shot"], manifest["langs"] = job.directions, job.zero_shot, job.langs
    artifacts.write_manifest(cfg.out, manifest)


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    if summary.get("rank", 0) != 0:  # torchrun: one table, from rank 0 (`--json` prints every process's summary)
        return

    t = Table(title=f"xlp finetune --task translation ({summary['arch']}, {summary['lang_encoding']})")
    t.add_column("direction")
    t.add_column("test BLEU (detok, mean over seeds)", justify="right")
    for d, v in summary.get("test_bleu_mean", {}).items():
        t.add_row(d + (" (zero-shot)" if d in summary.get("zero_shot", []) else ""), f"{v:.2f}")
    ui.out.print(t)
    ui.out.print(f"run folder: {summary['out']}")
