"""`xlp evaluate --task analysis`: the papers' analysis figures for pre-trained runs, as PNG + numbers.

    fig4  XLP Figure 4: for each English word of --words, its subword rows encoded with every language's
          encoding (see embeddings.py), averaged, then the L x L cosine matrix (15 x 15 for the XNLI
          languages). Summary number: mean off-diagonal cosine (XLM: "surprisingly high"; XLP: diverse).
    fig5  XLP Figure 5: the --topic-words encoded into English, their cosine matrix. Summary numbers:
          mean cosine within topics (groups of three, in order) and across topics.
    fig2  XLP Figure 2 / Eq. 3 (runs with a language-embedding table: additive, attaching): for each
          subword w_i of --sentence and the English language vector l, on head --head of the first layer,
              word->language  (w_i W_Q)(l W_K)^T / sqrt(d_head)
              language->word  (l W_Q)(w_i W_K)^T / sqrt(d_head)
          on the raw embeddings, as in the paper (no positions, no embedding LayerNorm, no biases).
    vle   VLE Figure 2 (vle runs): the histogram of the feature contributions sigmoid(W_l E_Voc_l) over all
          languages and dimensions; numbers: the share above 0.8 and below 0.2.
Output: `analysis_<run>_<fig>.png` and `results.json` (every matrix and value). Heat-maps use a colour scale
from the smallest to the largest off-diagonal value (recorded as `color_scale`): cosines of 0.95-1.00 on a
-1..1 scale would all look the same. Every run is loaded and checked before anything is written.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xlp_cli.artifacts.files import write_json_atomic, write_text_atomic
from xlp_cli.core import ui
from xlp_cli.core.errors import BadInput
from xlp_cli.reporting.embeddings import cosine_matrix, load_run, subword_ids, word_vectors
from xlp_cli.reporting.figures import pyplot, save_png
from xlp_cli.reporting.render import order_langs
from xlp_cli.tasks.evaluate_configs import AnalysisConfig  # noqa: F401 (the config: its home is evaluate_configs.py)

if TYPE_CHECKING:  # torch is imported when a figure is made, not when the CLI lists the task's flags
    from xlp_cli.reporting.embeddings import LoadedRun


def _no_grad(fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        import torch

        with torch.no_grad():
            return fn(*args, **kwargs)
    return wrapped



def color_scale(matrix: np.ndarray) -> tuple[float, float]:
    """(vmin, vmax) of a heat-map: the range of the off-diagonal cells (the diagonal is 1 by construction),
    widened to at least 0.01 so that equal values do not divide by zero."""
    m = np.asarray(matrix, dtype=float)
    off = m[~np.eye(len(m), dtype=bool)] if len(m) > 1 else m.ravel()
    lo, hi = float(np.nanmin(off)), float(np.nanmax(off))
    if hi - lo < 0.01:
        mid = (hi + lo) / 2
        lo, hi = mid - 0.005, mid + 0.005
    return lo, hi


def text_color(rgba: tuple[float, ...]) -> str:
    """Black on light cells, white on dark ones (relative luminance of the cell's colour)."""
    r, g, b = rgba[:3]
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "white"


def _heatmap(matrix: np.ndarray, labels: list[str], title: str, path: Path) -> tuple[Path, tuple[float, float]]:
    plt = pyplot()
    n = len(labels)
    lo, hi = color_scale(matrix)
    digits = 3 if hi - lo < 0.1 else 2
    fig, ax = plt.subplots(figsize=(max(4.5, 0.62 * n + 2.5), max(4.0, 0.55 * n + 1.8)), dpi=120)
    im = ax.imshow(matrix, vmin=lo, vmax=hi, cmap="viridis")
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xticklabels(labels, rotation=90, fontsize=9)
    ax.set_yticklabels(labels, fontsize=9)
    if n <= 16:
        for i in range(n):
            for j in range(n):
                rgba = im.cmap(im.norm(matrix[i, j]))
                ax.text(j, i, f"{matrix[i, j]:.{digits}f}", ha="center", va="center", fontsize=7 if n > 10 else 8,
                        color=text_color(rgba))
    bar = fig.colorbar(im, ax=ax, fraction=0.046)
    bar.set_label(f"cosine (colours span {lo:.3f} to {hi:.3f}: the off-diagonal range)", fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    save_png(fig, path)
    return path, (lo, hi)


def fig4(run: LoadedRun, words: list[str], out: Path) -> dict[str, Any]:
    langs = order_langs(run.langs)
    res: dict[str, Any] = {"langs": langs, "words": {}}
    first_png = None
    for w in words:
        vecs = []
        for lang in langs:
            v, cov = word_vectors(run, [w], "en", kind="encoded", encode_as=lang)
            if not cov[0]:
                break
            vecs.append(v[0])
        if len(vecs) != len(langs):
            ui.warn(f"analysis: '{w}' has an <unk> subword in {run.name}; skipped")
            continue
        m = cosine_matrix(np.stack(vecs), np.stack(vecs))
        off = m[~np.eye(len(langs), dtype=bool)]
        res["words"][w] = {"matrix": m.round(4).tolist(), "mean_offdiag": float(off.mean()) if off.size else math.nan}
        if first_png is None:
            first_png, res["color_scale"] = _heatmap(m, langs, f"{run.name}: '{w}' encoded per language (XLP Fig. 4)",
                                                     out / f"analysis_{run.name}_fig4.png")
    if res["words"]:
        res["mean_offdiag"] = float(np.mean([v["mean_offdiag"] for v in res["words"].values()]))
    res["png"] = first_png.name if first_png else None
    return res


def fig5(run: LoadedRun, words: list[str], out: Path) -> dict[str, Any]:
    v, cov = word_vectors(run, words, "en", kind="encoded", encode_as="en")
    keep = [i for i, c in enumerate(cov) if c]
    if len(keep) < 2:
        return {"skipped": "fewer than two topic words without <unk> subwords"}
    kw = [words[i] for i in keep]
    m = cosine_matrix(v[keep], v[keep])
    topic = {w: i // 3 for i, w in enumerate(words)}  # groups of three, in order
    within, across = [], []
    for a in range(len(kw)):
        for b in range(a + 1, len(kw)):
            (within if topic[kw[a]] == topic[kw[b]] else across).append(m[a, b])
    png, scale = _heatmap(m, kw, f"{run.name}: topic words in English (XLP Fig. 5)", out / f"analysis_{run.name}_fig5.png")
    return {"words": kw, "matrix": m.round(4).tolist(), "within_topic": float(np.mean(within)) if within else math.nan,
            "across_topic": float(np.mean(across)) if across else math.nan, "png": png.name, "color_scale": scale}


@_no_grad
def fig2(run: LoadedRun, sentence: str, head: int, out: Path) -> dict[str, Any]:
    import torch

    enc = run.model.lang_encoding
    lang_table = getattr(enc, "lang_emb", None)
    if lang_table is None:
        return {"skipped": f"{run.encoding} has no language-embedding table (Eq. 3 is about additive embeddings)"}
    model = run.model
    d, h = model.config.d_model, model.config.n_heads
    if not 0 <= head < h:
        raise BadInput(f"--head must be in 0..{h - 1}")
    dh = d // h
    ids = torch.from_numpy(subword_ids(run, [sentence], "en")[0])
    toks = run.text_encoder.dictionary.decode(int(i) for i in ids)
    w = model.embed(ids)                                        # [n, d]
    l = lang_table.weight[run.lang_index("en")][None]           # [1, d]
    qkv = model.layers[0].attn.qkv.weight                       # [3d, d] (nn.Linear: y = x W^T)
    wq, wk = qkv[:d], qkv[d:2 * d]
    sl = slice(head * dh, (head + 1) * dh)
    q_w, k_w = (w @ wq.T)[:, sl], (w @ wk.T)[:, sl]
    q_l, k_l = (l @ wq.T)[:, sl], (l @ wk.T)[:, sl]
    w2l = (q_w @ k_l.T)[:, 0] / math.sqrt(dh)
    l2w = (q_l @ k_w.T)[0] / math.sqrt(dh)
    plt = pyplot()
    fig, axes = plt.subplots(2, 1, figsize=(max(5.0, 0.5 * len(toks) + 1), 5), dpi=110, sharex=True)
    axes[0].bar(range(len(toks)), w2l.numpy())
    axes[0].set_ylabel("word → language")
    axes[1].bar(range(len(toks)), l2w.numpy(), color="tab:orange")
    axes[1].set_ylabel("language → word")
    axes[1].set_xticks(range(len(toks)))
    axes[1].set_xticklabels(toks, rotation=60)
    axes[0].set_title(f"{run.name}: word-language terms of Eq. 3, layer 1 head {head} (XLP Fig. 2)", fontsize=9)
    fig.tight_layout()
    path = out / f"analysis_{run.name}_fig2.png"
    save_png(fig, path)
    return {"tokens": toks, "word_to_language": w2l.tolist(), "language_to_word": l2w.tolist(), "head": head,
            "png": path.name}


@_no_grad
def vle_contributions(run: LoadedRun, out: Path) -> dict[str, Any]:
    gates = getattr(run.model.lang_encoding, "feature_gates", None)
    if gates is None:
        return {"skipped": f"{run.encoding} has no feature gates (VLE Fig. 2 applies to vle)"}
    gate = gates(run.model.embed).numpy()   # [L, d]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=110)
    ax.hist(gate.ravel(), bins=20, range=(0, 1))
    ax.set_xlabel("sigmoid(W_l E_Voc_l) per feature")
    ax.set_ylabel("features (all languages)")
    ax.set_title(f"{run.name}: VLE feature contributions (VLE Fig. 2)", fontsize=9)
    fig.tight_layout()
    path = out / f"analysis_{run.name}_vle.png"
    save_png(fig, path)
    hist, edges = np.histogram(gate.ravel(), bins=10, range=(0, 1))
    return {"share_above_0.8": float((gate > 0.8).mean()), "share_below_0.2": float((gate < 0.2).mean()),
            "histogram": hist.tolist(), "edges": edges.round(2).tolist(),
            "per_language_mean": {l: float(g.mean()) for l, g in zip(run.langs, gate)}, "png": path.name}


def run(cfg: AnalysisConfig) -> dict[str, Any]:
    import torch

    names = cfg.name or []
    runs = []
    for i, folder in enumerate(cfg.data):  # every run is loaded and checked before anything is written
        run = load_run(Path(folder), "", cfg.which)
        run.name = names[i] if names else run.encoding
        if run.name in {r.name for r in runs}:
            raise BadInput("two runs have the same name; give --name for each --data")
        run.lang_index("en")  # the words and the sentence are English
        if not 0 <= cfg.head < run.model.config.n_heads:
            raise BadInput(f"--head must be in 0..{run.model.config.n_heads - 1} ({run.name} has "
                           f"{run.model.config.n_heads} heads)")
        runs.append(run)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"task": "analysis", "runs": {}}
    pngs: list[str] = []
    with ui.progress() as bar, torch.no_grad():
        task = bar.add_task("analysis", total=4 * len(runs))
        for run in runs:
            r: dict[str, Any] = {"encoding": run.encoding, "folder": str(run.folder)}
            for key, make in (("fig4", lambda: fig4(run, cfg.words, out)), ("fig5", lambda: fig5(run, cfg.topic_words, out)),
                              ("fig2", lambda: fig2(run, cfg.sentence, cfg.head, out)),
                              ("vle", lambda: vle_contributions(run, out))):
                r[key] = make()
                bar.update(task, advance=1, info=f"{run.name} {key}")
            results["runs"][run.name] = r
            pngs += [v["png"] for v in r.values() if isinstance(v, dict) and v.get("png")]
    results["plots"] = pngs
    write_json_atomic(out / "results.json", results)
    write_text_atomic(out / "report.md", markdown(results))
    summary: dict[str, Any] = {"task": "analysis", "out": str(out), "results": str(out / "results.json"),
                               "report_md": str(out / "report.md"), "plots": [str(out / p) for p in pngs]}
    for name, r in results["runs"].items():
        summary[f"{name} fig4 mean off-diagonal cos"] = round(r["fig4"].get("mean_offdiag", math.nan), 4)
        summary[f"{name} fig5 within/across topic cos"] = (f"{r['fig5'].get('within_topic', math.nan):.3f} / "
                                                           f"{r['fig5'].get('across_topic', math.nan):.3f}")
        if "share_above_0.8" in r["vle"]:
            summary[f"{name} vle share >0.8 / <0.2"] = f"{r['vle']['share_above_0.8']:.2f} / {r['vle']['share_below_0.2']:.2f}"
    return summary


def markdown(results: dict[str, Any]) -> str:
    """report.md: each run's summary numbers and its figures (every matrix is in results.json)."""
    lines = ["# Analysis figures (XLP Fig. 2/4/5, VLE Fig. 2)", ""]
    for name, r in results["runs"].items():
        lines += [f"## {name} (`{r['folder']}`)", ""]
        f4, f5, vle = r["fig4"], r["fig5"], r["vle"]
        if "mean_offdiag" in f4:
            lines.append(f"- Fig. 4: mean off-diagonal cosine {f4['mean_offdiag']:.3f} over {len(f4['words'])} word(s) "
                         f"and {len(f4['langs'])} languages (XLM: close to 1; XLP: lower, more diverse)")
        if "within_topic" in f5:
            lines.append(f"- Fig. 5: cosine within topics {f5['within_topic']:.3f}, across topics {f5['across_topic']:.3f}")
        for key in ("fig2", "vle"):
            if r[key].get("skipped"):
                lines.append(f"- {key}: not applicable ({r[key]['skipped']})")
        if "share_above_0.8" in vle:
            lines.append(f"- VLE Fig. 2: share of feature gates > 0.8: {vle['share_above_0.8']:.2f}, < 0.2: "
                         f"{vle['share_below_0.2']:.2f}")
        lines += [""] + [f"![{name} {k}]({r[k]['png']})" for k in ("fig4", "fig5", "fig2", "vle") if r[k].get("png")] + [""]
    return "\n".join(lines)
