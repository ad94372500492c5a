"""Pre-training data: streams over real Parquet id shards, TLM pairs, language sampling, masking statistics."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from pretrain_helpers import synthetic

from xlp_cli.artifacts.shards import shard_paths
from xlp_cli.artifacts.special_ids import EOS as EOS_INDEX, MASK as MASK_INDEX, N_SPECIAL, PAD as PAD_INDEX
from xlp_cli.core.errors import BadInput
from xlp_cli.train.data import PretrainData
from xlp_cli.train.masking import mask_scores, mask_tokens
from xlp_cli.train.streams import MonoStream, sampling_probs


def _sentences(ids_dir, lang):
    out = []
    for p in shard_paths(ids_dir / "train" / lang):
        out.extend(pq.read_table(p, columns=["ids"]).column("ids").to_pylist())
    return out


def test_stream_is_xlm_concatenation_in_order_without_shuffle(tmp_path) -> None:
    ids = synthetic(tmp_path / "ids", n_sent=120, rows_per_shard=50, row_group_size=20)
    paths = shard_paths(ids / "train" / "en")
    s = MonoStream(paths, "en", 0, 16, 0, 10_000, shuffle=False)
    assert len(s.groups) == 7  # 3 shards of 50, 50, 20 rows in row groups of 20: read one group at a time
    got = s.next_windows(10_000, max_epochs=1).reshape(-1).tolist()
    expect = [EOS_INDEX]
    for sent in _sentences(ids, "en"):
        expect += sent + [EOS_INDEX]
    assert got == expect[: len(got)] and len(expect) - len(got) < 16


def test_stream_shuffled_covers_everything_once_per_epoch_and_resumes(tmp_path) -> None:
    ids = synthetic(tmp_path / "ids", n_sent=200, row_group_size=30)
    paths = shard_paths(ids / "train" / "fr")
    a = MonoStream(paths, "fr", 1, 8, 3, 10_000)
    first = a.next_windows(5)
    state = a.state()
    rest = [a.next_windows(7) for _ in range(40)]
    b = MonoStream(paths, "fr", 1, 8, 3, 10_000)
    b.load_state(state)
    assert all(np.array_equal(x, b.next_windows(7)) for x in rest)
    c = MonoStream(paths, "fr", 1, 8, 3, 10_000)
    assert np.array_equal(c.next_windows(5), first)  # deterministic for a seed
    d = MonoStream(paths, "fr", 1, 8, 4, 10_000)
    assert not np.array_equal(d.next_windows(5), first)  # and the seed matters
    # one epoch of the shuffled stream holds the same tokens as the ordered one
    e = MonoStream(paths, "fr", 1, 8, 3, 10_000)
    o = MonoStream(paths, "fr", 1, 8, 3, 10_000, shuffle=False)
    n_tok = sum(len(x) + 1 for x in _sentences(ids, "fr")) + 1
    win = n_tok // 8 - 3  # tails carried between row groups may cost a few windows
    assert abs(np.bincount(e.next_windows(win).ravel(), minlength=300)
               - np.bincount(o.next_windows(win).ravel(), minlength=300)).sum() < 8 * 8


def test_tlm_batches_restart_positions_and_carry_both_languages(tmp_path) -> None:
    ids = synthetic(tmp_path / "ids", pairs=True)
    data = PretrainData(ids, ["en", "fr"], "tlm", 32, 0, 10_000, 0.7)
    b = data.next_batch(0, 0, 8)
    assert b.name == "en-fr" and b.positions is not None and b.pad_mask is not None
    for i in range(8):
        n = int((~b.pad_mask[i]).sum())
        ids_i, pos, lg = b.ids[i, :n], b.positions[i, :n], b.langs[i, :n]
        starts = (pos == 0).nonzero().flatten().tolist()
        assert len(starts) == 2 and starts[0] == 0  # positions restart at the second segment
        k = starts[1]
        assert ids_i[0] == ids_i[k - 1] == ids_i[k] == ids_i[-1] == EOS_INDEX
        assert len(set(lg[:k].tolist())) == 1 and len(set(lg[k:].tolist())) == 1 and lg[0] != lg[k]
        assert n <= 32 and torch.all(b.ids[i, n:] == PAD_INDEX)
    data2 = PretrainData(ids, ["en", "fr"], "tlm", 32, 0, 10_000, 0.7)
    assert torch.equal(data2.next_batch(0, 0, 8).ids, b.ids)  # deterministic
    firsts = data2.next_batch(1, 0, 64).langs[:, 0]
    assert 10 < int(firsts.sum()) < 54  # a seeded coin per pair decides which side comes first


def test_language_sampling_smoothing_and_per_step_choice(tmp_path) -> None:
    p = sampling_probs([1000, 10], 0.7)
    expect = np.array([1000 ** 0.7, 10 ** 0.7])
    assert np.allclose(p, expect / expect.sum())
    assert np.allclose(sampling_probs([5, 5, 10], 0.0), [1 / 3] * 3)
    ids = synthetic(tmp_path / "ids", langs=("en", "fr"), n_sent=300)
    data = PretrainData(ids, ["en", "fr"], "mlm", 16, 0, 10_000, 0.7)
    names = [data.next_batch(s, 0, 1).name for s in range(400)]
    assert 150 < names.count("en") < 250  # equal sizes: about half each


def test_missing_language_data_is_bad_input(tmp_path) -> None:
    ids = synthetic(tmp_path / "ids")
    with pytest.raises(BadInput, match="'de' has no train data"):
        PretrainData(ids, ["en", "de"], "mlm", 16, 0, 10_000, 0.7)
    with pytest.raises(BadInput, match="parallel data"):
        PretrainData(ids, ["en", "fr"], "tlm", 16, 0, 10_000, 0.7)


def test_masking_statistics() -> None:
    g = torch.Generator().manual_seed(0)
    V = 5000
    ids = torch.randint(N_SPECIAL, V, (64, 256), generator=g)
    pad = torch.zeros_like(ids, dtype=torch.bool)
    pad[:, 200:] = True
    inputs, targets, pred = mask_tokens(ids, pad, g, V)
    assert torch.equal(targets, ids)
    real = int((~pad).sum())
    assert abs(int(pred.sum()) / real - 0.15) < 0.01
    assert not bool((pred & pad).any())  # padding is never predicted
    assert torch.equal(inputs[~pred], ids[~pred])  # only predicted tokens change
    n = int(pred.sum())
    masked = (inputs[pred] == MASK_INDEX).sum().item() / n
    kept = (inputs[pred] == ids[pred]).sum().item() / n
    rand = 1 - masked - kept
    assert abs(masked - 0.8) < 0.02 and abs(kept - 0.1) < 0.02 and abs(rand - 0.1) < 0.02
    assert int(inputs[pred & (inputs != MASK_INDEX)].min()) >= N_SPECIAL  # random words are never specials


def test_frequency_smoothed_masking_prefers_rare_tokens() -> None:
    counts = np.zeros(N_SPECIAL + 2, dtype=np.int64)
    counts[N_SPECIAL], counts[N_SPECIAL + 1] = 10_000, 10  # a frequent and a rare word
    scores = mask_scores(counts, 0.5)
    assert scores[:N_SPECIAL].sum() == 0
    g = torch.Generator().manual_seed(1)
    ids = torch.full((32, 64), N_SPECIAL)
    ids[:, ::2] = N_SPECIAL + 1  # half rare, half frequent
    ids[:, 0] = EOS_INDEX
    _, _, pred = mask_tokens(ids, None, g, len(counts), scores=scores)
    n = int(pred.sum())
    assert n == int(np.ceil(0.15 * ids.numel()))  # XLM: exactly ceil(15%) targets
    rare = int((pred & (ids == N_SPECIAL + 1)).sum())
    assert rare / n > 0.8  # weights 10^-0.5 vs 10000^-0.5: rare tokens ~10x more likely
    assert not bool((pred & (ids == EOS_INDEX)).any())  # specials are never chosen
