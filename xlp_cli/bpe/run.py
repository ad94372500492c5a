"""The `xlp bpe learn` and `xlp bpe apply` stages (also called by `xlp prepare --bpe-codes/--bpe-from`).

learn:  PREP/train/<lang> --(XLM language sampling)--> learning corpus --> codes + vocab + dict.txt
        (or spm.model + dict.txt).
apply:  PREP/<mono|pairs>/<split>/<folder> --> IDS/<mono|pairs>/<split>/<folder>/part-*.parquet (layout.shard_dir)
        with subword text and int32 ids.
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa

from xlp_cli.artifacts import datadirs, layout, outdir
from xlp_cli.artifacts.files import atomic_path, sha256_file
from xlp_cli.artifacts.manifest import find_upstream, new_manifest, read_manifest, write_manifest
from xlp_cli.artifacts.shards import read_shard, shard_entry
from xlp_cli.bpe import corpus, spm
from xlp_cli.bpe.codes import BpeCodec, learn_merges, subword_counts, write_codes, write_vocab
from xlp_cli.bpe.config import BpeApplyConfig, BpeLearnConfig
from xlp_cli.bpe.dictionary import Dictionary
from xlp_cli.bpe.filter import apply_filter
from xlp_cli.bpe.id_shards import (
    apply_shard as _apply_shard,  # (ray_apply.py runs it in its tasks)
    release_memory,
)
from xlp_cli.bpe.tokenizer import Tokenizer, column_of, load_tokenizer
from xlp_cli.core import ui
from xlp_cli.core.config import to_dict
from xlp_cli.core.errors import BadInput

LEARN_STAGE = "bpe-learn"
APPLY_STAGE = "bpe-apply"
# prepare config keys that change what `text`/`raw` hold; codes learned on one setting do not fit another
TEXT_KEYS = ("clean", "lowercase", "case", "tokenize", "tokenizer", "normalize", "accents", "remove_accents", "segmenter")


def _prepares(data: list[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """The `xlp prepare` outputs to read: every --data folder that is one (merged), else the one upstream of
    --data. Their text settings must agree (codes learned on one kind of `text` do not fit another)."""
    given = datadirs.given_outputs(data, "prepare")
    found = [find_upstream([d], "prepare") for d in given] or [find_upstream(data, "prepare")]
    if found[0] is None:
        for d in data:
            read_manifest(d)  # a missing folder / manifest gets its own precise message
        raise BadInput("no `xlp prepare` output among --data (nor upstream of it)", path=data[0])
    preps = [f for f in found if f is not None]
    first = _text_config(preps[0][1])
    for path, m in preps[1:]:
        clash = sorted(k for k in set(first) | set(_text_config(m)) if first.get(k) != _text_config(m).get(k))
        if clash:
            raise BadInput(f"prepared with other text settings than {preps[0][0]} ({', '.join(clash)}); "
                           "folders merged by --data must share them", path=path)
    return preps


def _text_config(prep_m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (prep_m.get("config") or {}).items() if k.replace("-", "_") in TEXT_KEYS}


def _upstream(path: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    return {"path": str(Path(path).resolve()), "stage": manifest.get("stage"), "config_hash": manifest.get("config_hash")}


def _finished(out: Path, previous: dict[str, Any] | None, files: list[str]) -> bool:
    return bool(previous) and previous.get("complete", False) and all((out / f).is_file() for f in files)


LEARN_OWNS = ("codes", "vocab", "dict.txt", "spm.model")
APPLY_OWNS = ("dict.txt", "codes", "vocab", "spm.model", "mono", "pairs", "train", "valid", "test")
TOKENIZER_FILES = {"codes": "codes", "vocab": "vocab", "model": "spm.model"}  # manifest key -> name in IDS


# ================================================================ learn
@outdir.scoped
def learn(cfg: BpeLearnConfig) -> dict[str, Any]:
    t0 = time.time()
    preps = _prepares(cfg.data)
    prep, prep_m = preps[0]
    config = to_dict(cfg)
    config.pop("force")
    out = Path(cfg.out)
    # check the input before touching --out, so that bad input leaves nothing behind
    column = column_of(cfg.tokenizer, cfg.spm_model_type)
    sources = corpus.merged_sources([p for p, _ in preps], cfg.split, cfg.lang, cfg.parallel, column)
    n = {lang: corpus.rows([s for s, _ in shards]) for lang, shards in sources.items()}
    empty = [l for l, k in n.items() if k == 0]
    if empty:
        raise BadInput(f"language(s) {', '.join(empty)} have no {cfg.split} sentences", path=prep / cfg.split)
    previous = outdir.guard_out_dir(out, LEARN_STAGE, config, force=cfg.force, owns=LEARN_OWNS)
    files = ["spm.model", "dict.txt"] if cfg.tokenizer == "sentencepiece" else ["codes", "vocab", "dict.txt"]
    if _finished(out, previous, files):
        ui.info(f"{out}: already learned with this config; nothing to do")
        return dict(previous["summary"], skipped=True)
    plan = corpus.sampling_plan(n, cfg.alpha, cfg.sample_sentences)
    warnings: list[str] = []

    if cfg.tokenizer == "fastbpe":
        tokenizer, dico, n_tokens, n_merges = _learn_fastbpe(cfg, sources, plan, out, warnings)
    else:
        tokenizer, dico, n_tokens, n_merges = _learn_spm(cfg, sources, plan, out)
    dico.write(out / "dict.txt")
    tokenizer["dict"] = "dict.txt"
    tokenizer["dict_sha256"] = sha256_file(out / "dict.txt")

    summary = {
        "out": str(out), "tokenizer": cfg.tokenizer, "languages": len(plan),
        "learning_sentences": sum(int(p["sampled"]) for p in plan.values()), "learning_words": n_tokens,
        "merges": n_merges, "dictionary_size": len(dico), "seconds": round(time.time() - t0, 2),
    }
    manifest = new_manifest(
        LEARN_STAGE, config, tokenizer=tokenizer, sampling=plan, upstream=[_upstream(p, m) for p, m in preps],
        warnings=warnings, summary=summary, complete=True, dictionary_layout=layout.dictionary_layout(),
        outputs={f: {"sha256": sha256_file(out / f)} for f in files},
        counts={"dictionary": len(dico), "skipped_dictionary_lines": dico.skipped},
        text_config=_text_config(prep_m),
    )
    write_manifest(out, manifest)
    return summary


def _learning_chunks(sources, plan, seed):
    for _lang, lines in corpus.sampled_lines(sources, plan, seed):
        yield ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")


def _learn_fastbpe(cfg, sources, plan, out: Path, warnings: list[str]):
    ui.info(f"learning {cfg.codes} BPE merges from {sum(int(p['sampled']) for p in plan.values())} sampled sentences")
    merges, words, n_tokens = learn_merges(_learning_chunks(sources, plan, cfg.seed), cfg.codes)
    if not merges:
        raise BadInput("the learning corpus has no pair of symbols to merge", path=Path(cfg.data[0]))
    if len(merges) < cfg.codes:
        msg = f"only {len(merges)} merges were possible (asked for {cfg.codes}): every word is already one symbol"
        warnings.append(msg)
        ui.warn(msg)
    write_codes(out / "codes", merges)
    codec = BpeCodec(out / "codes", None, check=False)
    vocab = subword_counts(words, codec)
    write_vocab(out / "vocab", vocab)
    dico = Dictionary.from_counts(vocab, max_vocab=cfg.max_vocab, min_count=cfg.min_count, where=str(out / "vocab"))
    tokenizer = {"kind": "fastbpe", "codes": "codes", "vocab": "vocab",
                 "codes_sha256": sha256_file(out / "codes"), "vocab_sha256": sha256_file(out / "vocab")}
    return tokenizer, dico, n_tokens, len(merges)


def _learn_spm(cfg, sources, plan, out: Path):
    def lines():
        for _lang, batch in corpus.sampled_lines(sources, plan, cfg.seed):
            yield from batch

    ui.info(f"learning a SentencePiece {cfg.spm_model_type} model of {cfg.spm_vocab_size} pieces")
    spm.learn(lines(), out / "spm.model", vocab_size=cfg.spm_vocab_size, model_type=cfg.spm_model_type,
              character_coverage=cfg.spm_character_coverage, seed=cfg.seed)
    codec = spm.SpmCodec(out / "spm.model")
    counts = spm.piece_counts(codec, (b for _l, b in corpus.sampled_lines(sources, plan, cfg.seed)))
    n_tokens = sum(c for _, c in counts)
    dico = Dictionary.from_counts(counts, max_vocab=cfg.max_vocab, min_count=cfg.min_count, where=str(out / "spm.model"))
    tokenizer = {"kind": "sentencepiece", "model": "spm.model", "model_type": cfg.spm_model_type,
                 "model_sha256": sha256_file(out / "spm.model")}
    return tokenizer, dico, n_tokens, 0


# ================================================================ apply
def vocab_of(codes: Path, vocab: Path | None) -> Path:
    """The vocab file of a codes file: `vocab`, else the one beside it (XLM ships codes_xnli_15 beside
    vocab_xnli_15; fastBPE folders hold codes + vocab); else a one-line BadInput."""
    if not codes.is_file():
        raise BadInput("no such codes file", path=codes)
    if vocab is None:
        sibling = codes.with_name(codes.name.replace("codes", "vocab"))
        if sibling != codes and sibling.is_file():
            return sibling
        raise BadInput("--codes needs --vocab (the token counts that give the dictionary ids); none found beside it",
                       path=codes)
    return vocab


def check_source(src: Path) -> None:
    """What `xlp prepare --bpe-from SRC` reads, checked before prepare writes its first file: a codes file with its
    vocab beside it, or a folder holding (or leading to) an `xlp bpe learn` output."""
    if src.is_dir():
        if find_upstream([src], LEARN_STAGE, verify=False) is None:
            raise BadInput("no `xlp bpe learn` output in this folder (give it, or a codes file with its vocab beside it)",
                           path=src)
    else:
        vocab_of(src, None)


def _resolve_tokenizer(cfg: BpeApplyConfig, out: Path) -> tuple[Tokenizer, dict[str, Any], list[dict[str, Any]], dict]:
    """(tokenizer, manifest entry with absolute paths, upstream entries, text_config of the learn run)."""
    if cfg.codes is not None:
        cfg.vocab = vocab_of(Path(cfg.codes), cfg.vocab)
        with ThreadPoolExecutor(1) as pool:  # the native loader (no GIL) reads and checks both files meanwhile
            codec = pool.submit(BpeCodec, cfg.codes, cfg.vocab)
            info: dict[str, Any] = {"kind": "fastbpe", "codes": str(Path(cfg.codes).resolve()),
                                    "codes_sha256": sha256_file(cfg.codes),
                                    "vocab": str(Path(cfg.vocab).resolve()), "vocab_sha256": sha256_file(cfg.vocab)}
            dico = Dictionary.read(cfg.vocab, max_vocab=cfg.max_vocab, min_count=cfg.min_count)
            return Tokenizer("fastbpe", dico, codec.result()), info, [], {}
    if cfg.spm_model is not None:
        raise BadInput("--spm-model alone has no dictionary; use the output folder of `xlp bpe learn --tokenizer sentencepiece`",
                       path=cfg.spm_model)
    found = find_upstream(cfg.data, LEARN_STAGE)
    if found is None:
        raise BadInput("no `xlp bpe learn` output among --data, and no --codes/--vocab given", path=cfg.data[0])
    bpe_dir, bpe_m = found
    info = dict(bpe_m["tokenizer"])
    tok = load_tokenizer(info, bpe_dir)
    for key in ("codes", "vocab", "dict", "model"):
        if key in info:
            info[key] = str((bpe_dir / info[key]).resolve())
    return tok, info, [_upstream(bpe_dir, bpe_m)], bpe_m.get("text_config") or {}


def load_early(cfg: BpeApplyConfig) -> Future:
    """`_resolve_tokenizer`'s result for `cfg`, made in a thread: `xlp prepare --bpe-from` starts it before its
    text step and passes it to `apply`, which raises its problem, if any, where it would have met it. The codes
    and the dictionary are read natively, without the GIL (~0.02 s of Python for XLM's: the text threads run on)."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="xlp-bpe-load")
    future = pool.submit(_resolve_tokenizer, cfg, Path(cfg.out))
    pool.shutdown(wait=False)
    return future


@outdir.scoped
def apply(cfg: BpeApplyConfig, runner: Any = None, loaded: Future | None = None, made: Any = None) -> dict[str, Any]:
    """`runner(tok, info, out, jobs)` yields `_apply_shard`'s result per job (args after `tok`), in order:
    `xlp prepare --engine ray` passes bpe/ray_apply.py's (Ray tasks, each loading `info` from `out`).
    `loaded`: `load_early`'s future of this cfg's tokenizer; `made`: bpe/alongside.py's id shards made while
    `xlp prepare` wrote the text (each is moved into place instead of being made again)."""
    if cfg.filter_mode:  # text lines in, subword lines out (bpe/filter.py)

        return apply_filter(cfg)
    t0 = time.time()
    release_memory()  # (inside `xlp prepare`: what the prepare step freed)
    pa.set_memory_pool(pa.system_memory_pool())  # malloc gives back what the batches free; mimalloc keeps it
    preps = _prepares(cfg.data)
    prep, prep_m = preps[0]
    config = to_dict(cfg)
    for key in ("force",) + BpeApplyConfig.FILTER_KEYS:
        config.pop(key.replace("_", "-"))
    out = Path(cfg.out)
    tok, info, ups, learned_text = loaded.result() if loaded is not None else _resolve_tokenizer(cfg, out)
    prep_text = _text_config(prep_m)
    clash = sorted(k for k in set(prep_text) & set(learned_text) if prep_text[k] != learned_text[k])
    if clash:
        raise BadInput(f"the BPE was learned on text prepared with other settings ({', '.join(clash)}): "
                       "shards of another tokenizer", path=prep)
    # several prepare inputs: the k-th one's shards are named part-in<k>-* (k >= 1), so none overwrites another
    folders = [(f, "" if k == 0 else f"in{k}-") for k, (p, _) in enumerate(preps)
               for f in corpus.list_folders(p, cfg.split or None)]
    folders = [(f, tag) for f, tag in folders if not cfg.lang or all(l in cfg.lang for l in f.langs)]
    if not folders:
        raise BadInput("no shards to apply to (check --split/--lang)", path=prep)
    missing = [l for l in cfg.lang if not any(l in f.langs for f, _ in folders)]
    if missing:
        raise BadInput(f"no data for language(s) {', '.join(missing)}", path=prep)
    previous = outdir.guard_out_dir(out, APPLY_STAGE, config, force=cfg.force, owns=APPLY_OWNS)
    if previous and previous.get("complete"):
        ui.info(f"{out}: already applied with this config; nothing to do")
        return dict(previous["summary"], skipped=True)
    info = _copy_tokenizer(info, out)
    tok.dico.write(out / "dict.txt")  # before the shards: the Ray tasks load the tokenizer from IDS

    shards_out: dict[str, Any] = {}
    counts: dict[str, dict[str, int]] = {}
    tokens: dict[str, dict[str, int]] = {}
    unks = 0
    entries = [(f, shard, Path(layout.shard_rel(f.split, f.name, shard.name.replace("part-", "part-" + tag, 1))))
               for f, tag in folders for shard in f.shards]
    jobs = [(shard, f.pair, cfg.batch_rows, out / rel, layout.partition_of(rel))
            for f, shard, rel in entries if not (out / rel).is_file()]  # resume: the others are complete
    todo = {job[3] for job in jobs}

    def local(tok: Tokenizer, _info: Any, _out: Path, jobs: list) -> Iterator[tuple[str, int, int, int]]:
        for job in jobs:
            found = made.take(job[3].relative_to(out).as_posix(), job[3]) if made is not None else None
            yield found if found is not None else _apply_shard(tok, *job, workers=cfg.workers)

    run = runner or local
    results = run(tok, dict(info, dict="dict.txt"), out, jobs)
    with ui.progress() as bar, contextlib.closing(results):  # (closing: a failure stops the Ray tasks)
        task = bar.add_task("bpe apply", total=len(entries))
        for f, shard, rel in entries:
            dest = out / rel
            if dest not in todo:
                table = read_shard(dest, columns=["ids1", "ids2"] if f.pair else ["ids"])
                shards_out[str(rel)] = shard_entry(dest, table.num_rows)
                n_tok, u, n_rows = sum(len(c.combine_chunks().values) for c in table.columns), 0, table.num_rows
            else:
                sha, n_rows, n_tok, u = next(results)
                shards_out[str(rel)] = shard_entry(dest, n_rows, sha)
            counts.setdefault(f.split, {}).setdefault(f.name, 0)
            counts[f.split][f.name] += n_rows
            tokens.setdefault(f.split, {}).setdefault(f.name, 0)
            tokens[f.split][f.name] += n_tok
            unks += u
            bar.advance(task)

    dict_sha = sha256_file(out / "dict.txt")
    info = dict(info, dict="dict.txt", dict_sha256=dict_sha)  # all relative to IDS
    total_tokens = sum(v for s in tokens.values() for v in s.values())
    summary = {"out": str(out), "tokenizer": tok.kind, "dictionary_size": len(tok.dico), "shards": len(shards_out),
               "sentences": sum(v for s in counts.values() for v in s.values()), "tokens": total_tokens,
               "unk_rate": round(unks / total_tokens, 6) if total_tokens else 0.0, "seconds": round(time.time() - t0, 2)}
    manifest = new_manifest(
        APPLY_STAGE, config, tokenizer=info, dictionary="dict.txt", dictionary_sha256=dict_sha,
        counts=counts, tokens=tokens, outputs={"shards": shards_out}, summary=summary, complete=True,
        upstream=[_upstream(p, m) for p, m in preps] + ups, text_config=prep_text,
        dictionary_layout=layout.dictionary_layout(),
    )
    write_manifest(out, manifest)
    return summary


def _copy_tokenizer(info: dict[str, Any], out: Path) -> dict[str, Any]:
    """Copy the tokenizer's files into IDS, so that the folder is self-contained and its manifest names only files
    inside it; the original paths are kept as `copied_from` (a record, never followed)."""
    import shutil

    info = dict(info)
    copied = {}
    for key, name in TOKENIZER_FILES.items():
        if info.get(key):
            src = Path(info[key])
            if src.resolve() != (out / name).resolve():
                with atomic_path(out / name) as tmp:
                    shutil.copyfile(src, tmp)
            copied[key], info[key] = str(src), name
    info["copied_from"] = copied
    return info
