"""Packed rows (the `documents` axis) and a deterministic backward (the `deterministic` axis): the cut of a row into
documents (runner/masks.py), the float32 reference and the FLOPs over them, which variants take them (cuDNN through
jax's private API: runner/variants/cudnn_packed.py), and the bit-for-bit check of a deterministic cell."""

from __future__ import annotations

import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from runner import compiler, masks, metrics
from runner.attention import Logits, reference_attention
from runner.checks import incorrect_reason, rel_err, same_bits
from runner.inputs import make_inputs, reference
from runner.machine import Device
from runner.record import Correctness, read_cell
from runner.registry import VARIANTS, decline, load_all
from runner.variants import cudnn_packed
from helpers import params

load_all()
CPU = Device(platform="cpu", kind="cpu", compute_capability=None, memory_bytes=None)
H200 = Device(platform="gpu", kind="H200", compute_capability=9.0, memory_bytes=None)


@pytest.mark.parametrize("length, documents", [(64, 2), (64, 4), (8192, 8), (33, 3), (16, 8), (4096, 7)])
def test_a_row_is_cut_into_documents_by_the_rule(length, documents):
    rows = [masks.document_lengths(length, documents, row) for row in range(documents + 1)]
    for row in rows:
        assert len(row) == documents and sum(row) == length and min(row) >= 1
    if length >= 16 * documents:  # weights D..2D-1: the longest about twice the shortest, rounding aside
        assert max(rows[0]) <= 2.1 * min(rows[0])
    assert rows[0] == sorted(rows[0]) and rows[1] == rows[0][1:] + rows[0][:1]  # rotated by the row
    assert rows[documents] == rows[0]  # the rotation comes round


def test_the_cut_is_the_documented_one():
    assert masks.document_lengths(100, 2) == [40, 60]  # weights 2, 3
    assert masks.document_lengths(100, 2, row=1) == [60, 40]
    assert masks.document_lengths(22, 4) == [4, 5, 6, 7]  # weights 4, 5, 6, 7 of 22
    assert masks.document_lengths(10, 4) == [2, 2, 3, 3]  # cuts at round(10 x 4 / 22) = 2, 4, 7
    ids = masks.segment_ids(params(batch=2, seq_len=10, documents=2))
    assert ids.tolist() == [[0] * 4 + [1] * 6, [0] * 6 + [1] * 4]
    assert masks.segment_ids(params(seq_len=10)) is None


def _dense_count(p) -> int:
    """Brute force: the reference's own visibility mask over packed rows, summed."""
    ids = jnp.asarray(masks.segment_ids(p))
    from runner.attention import visible

    keep = visible(Logits.of(p), p.seq_len, p.kv_seq_len, segments=(ids, ids))
    return int(np.broadcast_to(np.asarray(keep)[:, 0], (p.batch, p.seq_len, p.kv_seq_len)).sum())


@pytest.mark.parametrize("shape", [dict(documents=2), dict(documents=3, causal=True), dict(batch=3, documents=4,
                                   causal=True, window=3), dict(documents=4, window=2)])
def test_flops_count_only_the_pairs_inside_a_document(shape):
    p = params(seq_len=24, **shape)
    assert masks.kept_elements(p) == _dense_count(p)
    one = params(seq_len=24, **{**shape, "documents": 1})
    assert metrics.flops(p) < metrics.flops(one)
    assert metrics.bytes_min(p) == metrics.bytes_min(one)  # every token is a query and some query's key


def _per_document(p, q, k, v):
    """Attention of each document alone (plain causal or not, no packing), put back in its place: the definition."""
    rows = []
    for b, row in enumerate(masks.packed_lengths(p)):
        start, parts = 0, []
        for n in row:
            cut = slice(start, start + n)
            parts.append(reference_attention(q[b:b + 1, cut], k[b:b + 1, cut], v[b:b + 1, cut], p.causal,
                                             logits=Logits.of(p)))
            start += n
        rows.append(jnp.concatenate(parts, axis=1))
    return jnp.concatenate(rows, axis=0)


@pytest.mark.parametrize("shape", [dict(causal=True), dict(), dict(causal=True, window=4), dict(bias="alibi",
                                   causal=True), dict(softcap=1.0)])
def test_the_reference_over_packed_rows_is_each_document_alone(shape):
    p = params(batch=2, seq_len=20, heads=4, kv_heads=2, documents=2, **shape)
    q, k, v = make_inputs(p, 0)
    expected = _per_document(p, q, k, v) if p.bias == "none" else None
    out = reference(p, (q, k, v))[0]
    if expected is not None:
        assert rel_err(out, expected) < 1e-6
    assert rel_err(out, reference(params(**{**p.as_dict(), "documents": 1}), (q, k, v))[0]) > 0.05  # it bites


def test_the_reference_chunks_over_packed_rows_see_the_whole_row(monkeypatch):
    from runner import memory

    p = params(batch=2, seq_len=10, documents=3, causal=True, pass_="fwd_bwd")
    args = make_inputs(p, 0)
    whole = reference(p, args)
    monkeypatch.setattr(memory, "REFERENCE_CHUNK_BYTES", 1)  # one query row per chunk
    for part, full in zip(reference(p, args), whole):
        assert rel_err(part, full) < 1e-6


@pytest.mark.parametrize("name", ["naive", "xla", "auto"])
def test_the_xla_variants_mask_across_documents(name):
    p = params(batch=2, seq_len=32, heads=4, kv_heads=2, documents=4, causal=True)
    args = make_inputs(p, 0)
    assert decline(VARIANTS[name], p, CPU) is None
    assert rel_err(jax.jit(VARIANTS[name].build(p))(*args), reference(p, args)[0]) < 1e-5


@pytest.mark.parametrize("shape, words", [
    (dict(seq_len=16, kv_seq_len=32, documents=2), "S (32) must equal T (16)"),
    (dict(seq_len=16, documents=2, fill=0.5), "needs fill 1"),
    (dict(seq_len=16, documents=9), "at least 18 tokens"),
    (dict(seq_len=4, kv_seq_len=64, kv_lengths="uniform", documents=4), "a training row, not a serving batch"),
    (dict(deterministic=True), "needs pass fwd_bwd"),
])
def test_every_variant_declines_a_packed_or_deterministic_cell_that_cannot_be(shape, words):
    p = params(**shape)
    for name in ("naive", "xla"):
        assert words in decline(VARIANTS[name], p, CPU)


def test_a_row_of_two_tokens_a_document_is_the_shortest_packed():
    """T = 2 D is packed (every document keeps a token: test_masks), T = 2 D - 1 is not."""
    assert masks.packing_problem(params(seq_len=16, documents=8)) is None
    assert masks.packing_problem(params(seq_len=15, documents=8))[0] == "documents"


@pytest.mark.parametrize("variant, shape, words", [
    ("pallas_triton", dict(documents=2), "declines a packed row"),
    ("cudnn_fp8", dict(documents=2), "declines a packed row"),
    ("pallas_triton", dict(deterministic=True, pass_="fwd_bwd"), "declines a deterministic backward"),
    ("cudnn", dict(documents=2, bias="alibi"), "built without a bias"),
])
def test_variants_without_packing_or_determinism_decline_with_the_reason(variant, shape, words):
    reason = decline(VARIANTS[variant], params(**{"dtype": "bfloat16", "head_dim": 16, "seq_len": 16, **shape}), H200)
    assert reason and words in reason


def test_cudnn_hands_jax_each_documents_length_and_first_token():
    p = params(batch=2, seq_len=100, documents=2, causal=True)
    assert cudnn_packed.segments(p) == ([[40, 60], [60, 40]], [[0, 40, -1], [0, 60, -1]])


def _kept_inside(first, end) -> np.ndarray:
    """[B, T, S] bool: key s kept for query t when first[b, t] <= s < end[b, t]."""
    keys = np.arange(first.shape[1])
    return (keys >= np.asarray(first)[..., None]) & (keys < np.asarray(end)[..., None])


@pytest.mark.parametrize("batch, seq_len, documents", [(2, 10, 2), (3, 24, 4), (5, 33, 3), (2, 16, 8), (1, 7, 3)])
def test_each_librarys_form_of_a_packed_row_cuts_where_the_reference_mask_does(batch, seq_len, documents):
    from runner.attention import visible
    from runner.variants.tokamax_attention import document_ranges
    from runner.variants.transformer_engine import packed_segments

    p = params(batch=batch, seq_len=seq_len, documents=documents)
    bounds = masks.document_bounds(p)
    assert (bounds[:, 0] == 0).all() and (bounds[:, -1] == seq_len).all()
    assert np.diff(bounds).tolist() == masks.packed_lengths(p)  # the cut rule's lengths
    ids = jnp.asarray(masks.segment_ids(p))
    reference_mask = np.broadcast_to(np.asarray(visible(Logits.of(p), seq_len, seq_len, segments=(ids, ids)))[:, 0],
                                     (batch, seq_len, seq_len))
    assert (_kept_inside(*masks.document_spans(p)) == reference_mask).all()
    lengths, offsets = cudnn_packed.segments(p)  # cuDNN: each document's length and first token, -1 after
    assert all(row[-1] == -1 and len(row) == documents + 1 for row in offsets)
    starts = [np.repeat(row[:-1], n) for row, n in zip(offsets, lengths)]
    ends = [np.repeat(np.add(row[:-1], n), n) for row, n in zip(offsets, lengths)]
    assert (_kept_inside(np.stack(starts), np.stack(ends)) == reference_mask).all()
    k_start, k_end = document_ranges(p)  # tokamax: each query's [k_start, k_end), (B, 1, T)
    assert k_start.shape == (batch, 1, seq_len) and k_start.dtype == np.int32
    assert (_kept_inside(k_start[:, 0], k_end[:, 0]) == reference_mask).all()
    te_ids, positions = packed_segments(p)  # TE: ids from 1, each token's place in its document
    assert te_ids.min() == 1 and ((te_ids[:, :, None] == te_ids[:, None, :]) == reference_mask).all()
    first = np.arange(seq_len) - positions
    assert (_kept_inside(first, first + 1) <= reference_mask).all()  # its first token is in its document
    assert all(not reference_mask[b, t, f - 1] for b, t in np.ndindex(batch, seq_len) if (f := first[b, t]) > 0)


def test_cudnn_says_why_when_jax_has_no_packed_cudnn_path(monkeypatch):
    monkeypatch.setattr(cudnn_packed, "_private", lambda: None)
    assert "fused_attention_stablehlo" in cudnn_packed.missing()

    class Old:
        class MaskType:
            CAUSAL = 2

        @staticmethod
        def dot_product_attention(query, key, value, bias=None, mask=None, q_seqlen=None, kv_seqlen=None):
            return query

    monkeypatch.setattr(cudnn_packed, "_private", lambda: Old)
    assert "segment arguments" in cudnn_packed.missing()


@pytest.mark.parametrize("capability, packs", [(8.0, False), (8.9, False), (9.0, True), (10.0, True), (12.0, True)])
def test_cudnn_declines_packed_rows_before_hopper_in_its_plan(capability, packs):
    gpu = Device("gpu", "a GPU", capability)
    packed, plain = params(seq_len=16, documents=2, dtype="bfloat16"), params(seq_len=16, dtype="bfloat16")
    assert decline(VARIANTS["cudnn"], packed, gpu) == (None if packs else "jax's cuDNN path packs rows on Hopper or "
                                                       f"newer only; this GPU has compute capability {capability}")
    assert decline(VARIANTS["cudnn"], plain, gpu) is None and decline(VARIANTS["cudnn"], packed, CPU) == (
        "cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; the device here is cpu")  # a CPU: its Requires alone


def test_this_jax_has_the_packed_cudnn_path():
    assert cudnn_packed.missing() is None


def test_a_deterministic_cell_lowers_with_tes_variable_and_compiles_with_xlas_flag():
    seen = []

    def attend(x):
        seen.append(os.environ.get("NVTE_ALLOW_NONDETERMINISTIC_ALGO"))
        return x * 2

    args = (jnp.ones(4),)
    plain = compiler.lower_timed(attend, args)
    deterministic = compiler.lower_timed(lambda x: attend(x), args, True)  # traced anew (jit caches a traced fn)
    assert seen == [None, "0"] and "NVTE_ALLOW_NONDETERMINISTIC_ALGO" not in os.environ
    assert plain.options is None and deterministic.options == {"xla_gpu_deterministic_ops": True}
    assert plain.fingerprint != deterministic.fingerprint  # never shares a non-deterministic executable
    program = compiler.compile_lowered(deterministic)
    assert float(program.executable(*args)[0]) == 2.0


def test_same_bits_tells_a_last_bit_apart():
    x = jnp.linspace(0, 1, 64, dtype=jnp.bfloat16)
    nudged = x.at[7].set(jnp.nextafter(x[7], jnp.bfloat16(2)))
    assert same_bits((x, x * 1), (x, x))
    assert not same_bits((x, x), (x, nudged))
    nan = jnp.full(3, jnp.nan)
    assert same_bits((nan,), (nan,))  # equal bits, though NaN != NaN


def test_a_deterministic_cell_whose_bits_move_is_incorrect():
    close = dict(max_abs_err=0.0, rel_err=0.0, tolerance=1e-3)
    assert incorrect_reason(Correctness(**close, bitwise_repeat=True)) == ""
    assert "other bits" in incorrect_reason(Correctness(**close, bitwise_repeat=False))


def test_a_cell_written_before_schema_10_reads_as_one_document_and_the_backward_as_it_was():
    from runner.record import SCHEMA_VERSION

    old = params().as_dict()
    del old["documents"], old["deterministic"], old["tune"]  # as schema 9 wrote a cell's params
    cell = read_cell({"schema_version": 9, "key": "k", "run_id": "r", "experiment": "e", "variant": "xla",
                      "params": old, "status": "ok", "started_at": "t", "duration_s": 1.0, "flops": 1,
                      "bytes_min": 1, "kv_cache_bytes": 1})
    assert cell.schema_version == SCHEMA_VERSION
    assert cell.params.documents == 1 and cell.params.deterministic is False


@pytest.fixture
def wobbly():
    """A test variant whose output moves by a millionth on each call (a host counter): right, but not repeatable."""
    from runner.attention import naive_attention
    from runner.registry import variant

    calls = []

    def count(x):
        calls.append(1)
        return np.float32(len(calls) * 1e-6)

    @variant("test_wobbly", requires=VARIANTS["naive"].requires)
    def build(p):
        """naive, plus a microscopic amount that grows with every call: never the same output twice."""

        def attend(q, k, v):
            nudge = jax.pure_callback(count, jax.ShapeDtypeStruct((), jnp.float32),
                                   jax.lax.stop_gradient(q[0, 0, 0, 0]))
            return naive_attention(q, k, v, causal=p.causal) + jax.lax.stop_gradient(nudge)

        return attend

    try:
        yield "test_wobbly"
    finally:
        VARIANTS.pop("test_wobbly", None)


def _measure(name: str, **shape):
    from helpers import spec_data
    from runner.cells import Cell
    from runner.machine import current_device
    from runner.measure import Measurer
    from runner.spec import parse_spec
    from runner.timers import WallTimer

    measurer = Measurer(parse_spec(spec_data(), set(VARIANTS)), [WallTimer()], "test-run", current_device())
    return measurer.measure(Cell("t", name, params(**shape)))


def test_a_deterministic_cell_is_called_twice_and_its_bits_compared(wobbly):
    shape = dict(causal=True, pass_="fwd_bwd", deterministic=True)
    steady = _measure("naive", **shape)
    assert steady.status == "ok", steady.reason
    assert steady.correctness.bitwise_repeat is True
    moving = _measure(wobbly, **shape)
    assert moving.status == "incorrect" and "other bits" in moving.reason, moving.reason
    assert moving.correctness.bitwise_repeat is False and moving.correctness.rel_err < 1e-4  # close, not the same
    assert _measure(wobbly, causal=True, pass_="fwd_bwd").status == "ok"  # not asked: not checked


def test_te_packs_rows_by_segment_ids_from_one_and_positions_within_each_document(monkeypatch):
    from runner.variants.transformer_engine import packed_segments

    ids, positions = packed_segments(params(batch=2, seq_len=10, documents=2))
    assert ids.tolist() == [[1] * 4 + [2] * 6, [1] * 6 + [2] * 4]  # 0 would be padding to TE
    assert positions.tolist() == [[0, 1, 2, 3, 0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5, 0, 1, 2, 3]]
    real = importlib.util.find_spec  # TE counts as installed, so the cell rules speak
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "transformer_engine"
                        else real(name, *a))
    hopper = dict(dtype="bfloat16", head_dim=16, seq_len=16, documents=2)
    assert decline(VARIANTS["te"], params(**hopper, pass_="fwd_bwd", deterministic=True), H200) is None
    assert "built without a bias" in decline(VARIANTS["te"], params(**hopper, bias="alibi"), H200)
    assert "declines a packed row" in decline(VARIANTS["te_cp_ring"], params(**hopper), H200)


@pytest.mark.parametrize("name", ["te", "te_fp8", "te_cp_ring"])
def test_te_declines_before_hopper_what_its_backend_table_has_no_kernel_for(monkeypatch, name):
    """TE's fused-attention backend table (fused_attn.cpp, nvte_get_fused_attn_backend): the THD (packed) layout from
    sm90, head_dim past 128 in training on sm90 (and some shapes from sm100); an L4 (8.9) is told so in the plan."""
    real = importlib.util.find_spec  # TE counts as installed, so the cell rules speak
    monkeypatch.setattr(importlib.util, "find_spec", lambda found, *a: object() if found == "transformer_engine"
                        else real(found, *a))
    l4, te = Device("gpu", "NVIDIA L4", 8.9), VARIANTS[name]
    bf16 = dict(dtype="bfloat16", seq_len=16)
    wide, narrow = params(**bf16, head_dim=192, v_head_dim=128, pass_="fwd_bwd"), params(**bf16, head_dim=128,
                                                                                         pass_="fwd_bwd")
    assert decline(te, wide, l4) == ("TE's fused attention has no training kernel for H=192 / Hv=128 on compute "
                                     "capability 8.9")
    assert decline(te, wide, H200) is None and decline(te, narrow, l4) is None
    assert decline(te, params(**bf16, head_dim=192, v_head_dim=128), l4) is None  # the forward: TE has it (cuDNN 9.10.2)
    if name != "te_cp_ring":  # which takes no packed row on any device
        packed = params(**bf16, head_dim=16, documents=2)
        assert decline(te, packed, l4) == ("TE's fused attention packs rows (THD layout) on Hopper or newer only; "
                                           "this GPU has compute capability 8.9")
        assert decline(te, packed, H200) is None
    assert "packed rows on Hopper or newer" in te.info().requires or name == "te_cp_ring"


@pytest.mark.parametrize("capability, head_dim, v_head_dim, cell, trains", [
    (9.0, 256, 256, {}, True), (9.0, 192, 128, {}, True), (9.0, 256, 64, {}, True),  # cuDNN 9.5: sm90 to 256
    (9.0, 256, 128, {}, False), (9.0, 128, 192, {}, False),  # 9.11's exclusion on sm90: unequal, both >= 128
    (9.0, 264, 264, {}, False),  # past 256 on no GPU
    (10.0, 192, 128, {}, True), (12.0, 192, 128, {}, True),  # 9.11: 192 / 128 from sm100
    (10.0, 256, 256, {}, True), (10.0, 256, 256, dict(window=8, causal=True), True),  # 9.23: sm10x's 256 / 256
    (10.0, 256, 256, dict(bias="alibi"), False), (10.0, 256, 256, dict(window=8), False),  # not with these
    (10.0, 256, 128, {}, False), (10.0, 160, 160, {}, False), (12.0, 256, 256, {}, False),  # no kernel on sm100+
    (10.3, 256, 256, {}, True), (11.0, 256, 256, {}, False),  # 256 / 256 on all of sm10x, none past it
    (8.9, 192, 128, {}, False), (8.9, 256, 256, {}, False), (8.0, 136, 136, {}, False),  # none before Hopper
    (8.9, 128, 129, {}, False),  # V's head needs no multiple of 8: 129 is past 128
])
def test_te_trains_past_head_dim_128_the_shapes_its_backend_table_has_kernels_for(capability, head_dim, v_head_dim,
                                                                                  cell, trains):
    """nvte_get_fused_attn_backend, fused_attn.cpp lines 310-353 at TE v2.18.0 and main, with the image's cuDNN 9.28:
    the forward everywhere, the backward only these."""
    from runner.variants.transformer_engine import gpu_check

    shape = dict(dtype="bfloat16", seq_len=16, head_dim=head_dim, v_head_dim=v_head_dim, **cell)
    reason = gpu_check(params(**shape, pass_="fwd_bwd"), capability)
    assert (reason is None) == trains, reason
    assert trains or reason == (f"TE's fused attention has no training kernel for H={head_dim} / Hv={v_head_dim} on "
                                f"compute capability {capability:.1f}")
    assert gpu_check(params(**shape), capability) is None


def test_show_sets_each_deterministic_cell_beside_the_same_cell_without(capsys):
    from helpers import REPO, in_process
    from runner.report import determinism_rows
    from runner.store import read_run

    folder = REPO / "tests" / "fixtures" / "schema10-packed" / "schema10-packed-20261206-000000"
    rows = determinism_rows(read_run(folder).cells)  # the deterministic experiment's cells, the packed one's without
    assert [(r["variant"], r["shape"], r["bits repeat"]) for r in rows] == [
        (name, "B2 T32 N4 K2 H16 float32 causal fwd_bwd docs2", "yes") for name in ("naive", "xla")]
    result = in_process(capsys, "show", folder)
    assert result.code == 0 and "deterministic backward: its time beside the same cell's without" in result.out


def test_the_training_spec_runs_cudnn_in_each_experiment_it_lists_it_in_on_an_h200_and_declines_only_by_rule():
    """specs/training.yaml as the README runs it on an H200: cuDNN takes every cell of each experiment that lists it
    but the soft-capped ones (jax's API has no cap), and the other variants' declines are their package's absence
    here or a stated rule, never an unknown option."""
    from helpers import REPO
    from runner.cells import expand
    from runner.spec import load_spec

    cells = expand(load_spec(REPO / "specs" / "training.yaml", set(VARIANTS)))
    cudnn = [c for c in cells if c.variant == "cudnn"]
    assert {c.experiment for c in cudnn} >= {"fwd", "fwd-bwd", "packed", "deterministic", "packed-small", "axes"}
    assert all((decline(VARIANTS["cudnn"], c.params, H200) is None) == (c.params.softcap is None) for c in cudnn)
    assert any(c.params.documents > 1 for c in cudnn) and any(c.params.deterministic for c in cudnn)
    for c in cells:
        reason = decline(VARIANTS[c.variant], c.params, H200) or ""
        assert "implements none" not in reason, (c.label(), reason)  # every option a variant is given, it declares


def test_the_training_spec_tunes_mosaic_and_triton_at_every_length_and_runs_fp8_through_tritons_kernel(monkeypatch):
    """specs/training.yaml's `tuned` experiment: tokamax's Mosaic and Triton kernels, tune true, 4k-32k, forward and
    forward + backward, the same shapes as the untuned cells of fwd and fwd-bwd; its `fp8` experiment: the FP8
    variants beside their bf16 baselines' fwd cells, tokamax's Mosaic declining with its reason. On an H200 with
    tokamax installed (counted so here), nothing in either declines but that."""
    import importlib.util

    from helpers import REPO
    from runner.cells import expand
    from runner.spec import load_spec

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name in ("tokamax",
                        "transformer_engine") else real(name, *a))
    cells = expand(load_spec(REPO / "specs" / "training.yaml", set(VARIANTS)))
    lengths = [4096, 8192, 16384, 32768]
    tuned = [c for c in cells if c.experiment == "tuned"]
    assert sorted((c.variant, c.params.seq_len, c.params.pass_) for c in tuned) == sorted(
        (v, t, p) for v in ("tokamax_mosaic", "tokamax_triton") for t in lengths for p in ("fwd", "fwd_bwd"))
    assert all(c.params.tune and decline(VARIANTS[c.variant], c.params, H200) is None for c in tuned)
    untuned = {(c.variant, c.params) for c in cells if c.experiment in ("fwd", "fwd-bwd")}
    assert all((c.variant, c.params.model_copy(update={"tune": False})) in untuned for c in tuned)  # beside untuned
    fp8 = [c for c in cells if c.experiment == "fp8"]
    assert {c.params.seq_len for c in fp8} == set(lengths) and all(c.params.pass_ == "fwd" for c in fp8)
    for c in fp8:
        reason = decline(VARIANTS[c.variant], c.params, H200)
        assert (reason is None) == (c.variant != "tokamax_mosaic_fp8"), (c.label(), reason)
        baseline = VARIANTS[c.variant].fp8_baseline
        assert any(b.variant == baseline and b.params == c.params for b in cells if b.experiment == "fwd"), baseline


@pytest.mark.slow
def test_the_training_specs_small_experiments_run_ok_on_a_cpu_through_every_new_axis(tmp_path):
    """specs/training.yaml's small experiments on a CPU: naive, xla and tokamax's xla_chunked (where tokamax installs:
    Python >= 3.12) agree with the float32 reference through a window, a padded batch, ALiBi, a soft cap, MLA's
    narrower V, packed rows and a deterministic backward (bit for bit); its FP8 cells are recorded skipped, each with
    the reason (a GPU)."""
    import importlib.util
    import json

    from helpers import REPO, attnbench

    small = ["axes", "logits", "mla", "packed-small", "deterministic-small"]
    done = attnbench("run", REPO / "specs" / "training.yaml", "--only", *small, "fp8", "--variants", "naive", "xla",
                     "tokamax_xla_chunked", "tokamax_triton_fp8", "tokamax_mosaic_fp8", "--budget", "0.05", "--out",
                     tmp_path, "--run-id", "t", "--compile-cache", "off", timeout=900)
    assert done.returncode == 0, done.stderr
    cells = [json.loads(line) for line in (tmp_path / "t" / "cells.jsonl").read_text().splitlines()]
    runs = {"naive", "xla"} | ({"tokamax_xla_chunked"} if importlib.util.find_spec("tokamax") else set())
    ran = [c for c in cells if c["variant"] in runs]
    assert {c["experiment"] for c in ran} == set(small)
    assert all(c["status"] == "ok" for c in ran), [(c["variant"], c["params"], c["reason"]) for c in ran
                                                   if c["status"] != "ok"]
    axes = {name: {c["params"][name] for c in ran} for name in ("window", "fill", "bias", "softcap", "v_head_dim",
                                                                    "documents", "deterministic", "pass")}
    assert axes == {"window": {None, 128}, "fill": {1.0, 0.6}, "bias": {"none", "alibi"}, "softcap": {None, 1.0},
                    "v_head_dim": {64, 128}, "documents": {1, 2, 4, 8}, "deterministic": {False, True},
                    "pass": {"fwd", "fwd_bwd"}}
    assert all(c["correctness"]["bitwise_repeat"] for c in ran if c["params"]["deterministic"])
    others = [c for c in cells if c["variant"] not in runs]
    assert others and all(c["status"] == "skipped" and c["reason"] for c in others)
    fp8 = [c for c in others if c["experiment"] == "fp8"]
    assert {c["variant"] for c in fp8} == {"tokamax_triton_fp8", "tokamax_mosaic_fp8"}
    assert all("needs an NVIDIA GPU" in c["reason"] for c in fp8)
