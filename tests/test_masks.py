"""runner/masks.py and the axes it serves: padded lengths, ALiBi slopes, kept score elements, and the float32
reference's window, padding, ALiBi and soft cap against jax's own implementation and against numpy."""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from runner import masks, memory, metrics
from runner.attention import Logits, real_tokens, reference_attention, scores_mask, visible
from runner.checks import rel_err
from runner.inputs import make_inputs, masks_lengths, reference
from runner.registry import VARIANTS, decline, load_all
from runner.machine import Device
from helpers import REPO, params

load_all()
CPU = Device(platform="cpu", kind="cpu", compute_capability=None, memory_bytes=None)


@pytest.mark.parametrize("batch, fill", [(1, 0.5), (2, 0.5), (8, 0.5), (8, 0.8), (5, 0.3), (64, 0.9)])
def test_padded_lengths_spread_evenly_around_the_fill(batch, fill):
    lengths = masks.lengths(batch, 4096, fill)
    assert len(lengths) == batch and all(1 <= n <= 4096 for n in lengths)
    assert np.mean(lengths) == pytest.approx(fill * 4096, rel=1e-3)
    assert lengths == sorted(lengths) and lengths == masks.lengths(batch, 4096, fill)  # deterministic


def test_fill_half_spreads_from_one_token_to_the_whole_row_and_decode_keeps_its_query():
    assert masks.lengths(3, 100, 0.5) == [1, 50, 100]
    assert masks.lengths(3, 100, 0.8) == [60, 80, 100]
    assert masks.padded_lengths(params(batch=3, seq_len=1, kv_seq_len=100, fill=0.5)) == ([1, 1, 1], [1, 50, 100])
    assert masks.padded_lengths(params(fill=1.0)) is None


def test_alibi_slopes_are_the_papers_geometric_sequences():
    assert masks.alibi_slopes(8) == [2 ** -i for i in range(1, 9)]
    twelve = masks.alibi_slopes(12)
    assert twelve[:8] == masks.alibi_slopes(8) and twelve[8:] == [2 ** (-0.5 * i) for i in (1, 3, 5, 7)]


def _dense_count(p) -> int:
    """Brute force: the reference's own visibility mask, with padded query rows dropped, summed."""
    padded = masks.padded_lengths(p) or ([p.seq_len] * p.batch, [p.kv_seq_len] * p.batch)
    keep = visible(Logits.of(p), p.seq_len, p.kv_seq_len, 0, jnp.asarray(padded[1]))
    keep = np.broadcast_to(np.asarray(keep)[:, 0], (p.batch, p.seq_len, p.kv_seq_len))
    rows = np.arange(p.seq_len)[None, :, None] < np.asarray(padded[0])[:, None, None]
    return int((keep & rows).sum())


@pytest.mark.parametrize("shape", [
    dict(), dict(causal=True), dict(window=3), dict(window=3, causal=True), dict(batch=3, fill=0.5),
    dict(batch=4, fill=0.8, causal=True, window=4), dict(seq_len=5, kv_seq_len=9, causal=True, window=2),
    dict(seq_len=9, kv_seq_len=5, causal=True), dict(batch=3, seq_len=1, kv_seq_len=40, fill=0.7),
])
def test_kept_elements_match_the_reference_mask(shape):
    p = params(**shape)
    assert masks.kept_elements(p) == _dense_count(p)


def test_window_and_padding_cut_flops_below_the_whole_attention():
    plain = metrics.flops(params(seq_len=64, causal=True))
    assert metrics.flops(params(seq_len=64, causal=True, window=8)) < plain
    assert metrics.flops(params(seq_len=64, causal=True, fill=0.5)) < plain
    assert metrics.flops(params(seq_len=64, causal=True, softcap=50.0, bias="alibi")) == plain  # elementwise


def test_flops_count_q_k_and_v_widths_apart():
    p = params(head_dim=12, v_head_dim=8)
    assert metrics.flops(p) == 2 * p.batch * p.heads * (12 + 8) * p.seq_len * p.kv_seq_len


def _inputs(p, seed=0):
    return make_inputs(p, seed)


def _xla(p, q, k, v):
    """jax.nn.dot_product_attention(implementation='xla') with the cell's window, lengths and ALiBi: an
    independent implementation of the same semantics."""
    from runner.variants.jax_attention import alibi_bias, window_size

    padded = masks.padded_lengths(p)
    lengths = [jnp.asarray(x, jnp.int32) for x in padded] if padded else [None, None]
    bias = alibi_bias(p, jnp.float32) if p.bias == "alibi" else None
    return jax.nn.dot_product_attention(q, k, v, bias, is_causal=p.causal, implementation="xla",
                                        query_seq_lengths=lengths[0], key_value_seq_lengths=lengths[1],
                                        local_window_size=window_size(p))


@pytest.mark.parametrize("shape", [
    dict(window=3), dict(window=3, causal=True), dict(batch=3, fill=0.5), dict(batch=3, fill=0.8, causal=True),
    dict(bias="alibi"), dict(bias="alibi", causal=True), dict(batch=3, causal=True, window=4, fill=0.5, bias="alibi"),
    dict(heads=4, kv_heads=2, bias="alibi", causal=True), dict(batch=3, seq_len=1, kv_seq_len=32, fill=0.6),
])
def test_the_reference_agrees_with_jax_on_every_axis_jax_takes(shape):
    p = params(**shape)
    args = _inputs(p)
    expected = reference(p, args)[0]
    out = real = _xla(p, *args)
    if p.fill < 1:  # what a library writes at padded positions is not compared
        real = real_tokens((out,), *masks_lengths(p))[0]
    assert rel_err(real, expected) < 1e-5


def test_the_reference_soft_caps_the_logits_as_numpy_does():
    p = params(softcap=1.0, causal=True)
    q, k, v = (np.asarray(x, np.float64) for x in _inputs(p))
    scores = np.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(p.head_dim)
    scores = np.tanh(scores) + np.where(np.tri(p.seq_len, dtype=bool), 0, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    expected = np.einsum("bnts,bsnh->btnh", weights / weights.sum(-1, keepdims=True), v)
    out = reference(p, _inputs(p))[0]
    assert np.abs(np.asarray(out) - expected).max() < 1e-5
    assert rel_err(out, reference(params(causal=True), _inputs(p))[0]) > 0.05  # the cap bites


def test_reference_chunks_see_the_same_mask_as_the_whole(monkeypatch):
    p = params(seq_len=24, batch=2, causal=True, window=5, fill=0.8, bias="alibi", softcap=2.0, pass_="fwd_bwd")
    args = _inputs(p)
    whole = reference(p, args)
    monkeypatch.setattr(memory, "REFERENCE_CHUNK_BYTES", 1)  # one query row per chunk
    for part, full in zip(reference(p, args), whole):
        assert rel_err(part, full) < 1e-6


@pytest.mark.parametrize("variant, shape, words", [
    ("xla", dict(softcap=50.0), "takes no logit soft cap"),
    ("xla", dict(head_dim=12, v_head_dim=8), "V has K's shape"),
    ("pallas_triton", dict(window=4), "declines a sliding window"),
    ("cudnn_fp8", dict(fill=0.5), "declines a padded batch"),
    ("cudnn", dict(softcap=50.0), "takes no logit soft cap"),
])
def test_variants_decline_the_options_they_do_not_implement(variant, shape, words):
    gpu = Device(platform="gpu", kind="H200", compute_capability=9.0, memory_bytes=None)
    reason = decline(VARIANTS[variant], params(**{"dtype": "bfloat16", "head_dim": 16, **shape}), gpu)
    assert reason and words in reason


def test_te_declares_every_option_but_the_soft_cap():
    requires = VARIANTS["te"].requires
    assert set(requires.options) == {"window", "fill", "bias", "v_head_dim", "documents", "deterministic"}
    assert "no logit soft cap" in requires.why_not["softcap"]


@pytest.mark.parametrize("variant", ["naive", "xla", "auto"])
def test_cpu_variants_run_window_padding_and_alibi(variant):
    for shape in (dict(window=4), dict(batch=3, fill=0.5), dict(bias="alibi")):
        assert decline(VARIANTS[variant], params(**shape), CPU) is None
    assert (decline(VARIANTS[variant], params(softcap=1.0), CPU) is None) == (variant == "naive")


def test_cudnn_declines_a_window_without_a_causal_mask():
    gpu = Device(platform="gpu", kind="H200", compute_capability=9.0, memory_bytes=None)
    p = params(dtype="bfloat16", head_dim=16, window=4)
    assert "only with a causal mask" in decline(VARIANTS["cudnn"], p, gpu)
    assert decline(VARIANTS["cudnn"], params(dtype="bfloat16", head_dim=16, window=4, causal=True), gpu) is None


def test_naive_attention_applies_every_axis_like_the_reference():
    p = params(batch=3, seq_len=12, heads=4, kv_heads=2, head_dim=8, v_head_dim=4, causal=True, window=5,
               fill=0.5, bias="alibi", softcap=2.0)
    args = _inputs(p)
    out = jax.jit(VARIANTS["naive"].build(p))(*args)
    assert out.shape == (3, 12, 4, 4)
    assert rel_err(out, reference(p, args)[0]) < 1e-5


def test_a_tp_shard_runs_its_share_of_the_heads():
    p = params(heads=64, kv_heads=8, tp=8)
    assert (p.heads, p.kv_heads, p.tp) == (8, 1, 8)
    p = params(heads=64, kv_heads=8, tp=4)
    assert (p.heads, p.kv_heads) == (16, 2)
    alibi = Logits.of(params(heads=16, bias="alibi", tp=2)).slopes
    assert alibi == tuple(masks.alibi_slopes(16)[:8])  # the first shard's heads of the model's slopes


def test_reference_grads_are_zero_at_padded_positions():
    p = params(batch=3, seq_len=8, fill=0.5, causal=True, pass_="fwd_bwd")
    out, dq, dk, dv = reference(p, _inputs(p))
    q_len, kv_len = masks.padded_lengths(p)
    for b in range(3):
        assert not np.asarray(out[b, q_len[b]:]).any() and not np.asarray(dq[b, q_len[b]:]).any()
        assert not np.asarray(dk[b, kv_len[b]:]).any() and not np.asarray(dv[b, kv_len[b]:]).any()


def test_label_names_only_the_axes_a_cell_sets():
    assert params().label() == "B1 T8 N4 H8 float32 fwd"
    assert params(window=4, fill=0.5, bias="alibi", softcap=50.0, tp=2, head_dim=12, v_head_dim=8,
                  heads=4).label() == "B1 T8 N2 H12 Hv8 float32 fwd W4 fill0.5 alibi cap50 tp2"


@pytest.mark.slow
def test_the_masks_spec_on_a_cpu(tmp_path):
    """The issue's first "done when": on a CPU every naive / xla cell with a window, a padded batch, ALiBi or a soft
    cap is ok within tolerance (xla declines the cap: jax takes none), every GPU-only variant declines with its
    reason, and a window's or a padded batch's FLOPs are below its unmasked twin's."""
    import json

    from helpers import attnbench

    done = attnbench("run", REPO_SPEC, "--out", tmp_path, "--run-id", "masks-cpu", "--compile-cache", "off",
                     timeout=600)
    assert done.returncode == 0, done.stderr
    cells = [json.loads(line) for line in (tmp_path / "masks-cpu" / "cells.jsonl").read_text().splitlines()]
    set_axes = lambda p: p["window"] or p["fill"] < 1 or p["bias"] != "none" or p["softcap"]  # noqa: E731
    measured = [c for c in cells if c["variant"] in ("naive", "xla") and set_axes(c["params"])]
    for c in measured:
        if c["variant"] == "xla" and c["params"]["softcap"]:
            assert c["status"] == "skipped" and "takes no logit soft cap" in c["reason"]
        else:
            assert c["status"] == "ok", (c["experiment"], c["variant"], c["reason"])
            assert c["correctness"]["rel_err"] <= c["correctness"]["tolerance"]
    assert {c["experiment"] for c in measured if c["status"] == "ok"} >= {"window", "padded", "alibi", "softcap"}
    gpu_only = [c for c in cells if VARIANTS[c["variant"]].requires.gpu or VARIANTS[c["variant"]].requires.min_compute_capability]
    assert gpu_only and all(c["status"] == "skipped" and "needs an NVIDIA GPU" in c["reason"] for c in gpu_only)
    plain = {(c["params"]["causal"], c["params"]["pass"]): c["flops"] for c in cells
             if c["experiment"] in ("plain", "plain-grads")}
    assert len(plain) == 3
    for c in cells:
        if c["experiment"] in ("window", "window-grads", "padded", "padded-grads"):
            assert c["flops"] < plain[c["params"]["causal"], c["params"]["pass"]]


REPO_SPEC = REPO / "specs/masks.yaml"


@pytest.mark.slow
def test_a_library_that_computes_another_window_is_incorrect_and_the_record_says_which(tmp_path):
    import json

    import yaml

    from helpers import FAST_TIMING, TINY, attnbench

    spec = {"name": "misleading", "defaults": {**TINY, "seq_len": 16, "causal": True, "window": 4},
            "timing": FAST_TIMING,
            "experiments": [{"name": "w", "variants": ["naive", "test_ignores_window", "test_window_one_wider"]}]}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    variants = str(Path(__file__).with_name("variants"))
    done = attnbench("run", tmp_path / "spec.yaml", "--out", tmp_path, "--run-id", "m", "--compile-cache", "off",
                     ATTNBENCH_VARIANTS=variants)
    assert done.returncode == 0, done.stderr  # an incorrect cell is a result, not an error of the run
    cells = {c["variant"]: c for c in map(json.loads, (tmp_path / "m" / "cells.jsonl").read_text().splitlines())}
    assert cells["naive"]["status"] == "ok"
    assert cells["test_ignores_window"]["status"] == "incorrect"
    assert cells["test_ignores_window"]["reason"].endswith("the output matches the float32 reference with the "
                                                           "window ignored")
    assert cells["test_window_one_wider"]["status"] == "incorrect"
    assert "a window of 5 keys, not 4" in cells["test_window_one_wider"]["reason"]


def test_a_row_that_keeps_no_key_is_zeros_and_a_causal_row_the_plain_softmax():
    """The reference's two softmax paths: a window past the last key (T > S) empties rows, which come out zero, not
    NaN; a causal row without window or padding takes jax.nn.softmax over the masked scores, as before models."""
    q, k, v = (jax.random.normal(jax.random.key(i), (1, n, 2, 8)) for i, n in ((0, 12), (1, 4), (2, 4)))
    out = reference_attention(q, k, v, causal=True, logits=Logits(True, window=2))
    assert bool(jnp.all(jnp.isfinite(out))) and bool(jnp.all(out[:, 5:] == 0))  # rows 5.. see keys > 3: none
    plain = reference_attention(q[:, :4], k, v, causal=True)
    scores = jnp.einsum("btnh,bsnh->bnts", q[:, :4], k, precision="highest") / jnp.sqrt(8.0)
    weights = jax.nn.softmax(jnp.where(scores_mask(4, 4), scores, -jnp.inf), axis=-1)
    expected = jnp.einsum("bnts,bsnh->btnh", weights, v, precision="highest")
    assert float(jnp.max(jnp.abs(plain - expected))) < 1e-6


def test_packed_documents_grow_with_their_index_only_where_they_are_long_as_docs_specs_says():
    assert masks.document_lengths(8192, 4) == [1489, 1862, 2234, 2607]
    assert masks.document_lengths(20, 10) == [1, 2, 2, 1, 2, 2, 3, 2, 2, 3]  # the rounding decides
    assert all(min(masks.document_lengths(t, d)) >= 1 for d in range(2, 40) for t in range(2 * d, 4 * d))
