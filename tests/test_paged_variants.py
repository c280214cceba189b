"""The paged decode variants off a GPU (runner/variants/cudnn_paged.py, pallas_paged.py): what each declines and why,
the page pool, table and lengths each stages for its kernel (the Pallas kernel itself in interpret mode, cuDNN's
call emulated from jax's documented semantics and lowered for CUDA), against the float32 reference; a wrong page
table is caught. Nothing here runs cuDNN or Triton: that needs the GPU."""

from __future__ import annotations

import functools
import math
import re

import jax
import jax.numpy as jnp
import pytest

from helpers import H200_MEMORY, REPO, params
from runner import paging
from runner.inputs import make_inputs, reference
from runner.cells import Cell
from runner.machine import Device
from runner.programs import input_avals
from runner.registry import VARIANTS, Staged, backend_of, decline, load_all
from runner.plan import plan
from runner.variants import cudnn_paged, pallas_paged
from runner.variants.pallas_triton import MIN_BLOCK

load_all()
H200 = Device("gpu", "NVIDIA H200", 9.0, H200_MEMORY)  # JAX's bytes_limit, as the H200's runs say
A100 = Device("gpu", "NVIDIA A100", 8.0, 80 << 30)
CPU = Device("cpu", "cpu", None)
# cudnn-frontend's decode_sweep shape: Llama 3.1 (64 query heads, 8 KV heads, H128), one new token, page 16
LLAMA = dict(batch=32, seq_len=1, kv_seq_len=8192, heads=64, kv_heads=8, head_dim=128, dtype="bfloat16",
             page_size=16)
MLA = dict(LLAMA, heads=128, kv_heads=1, head_dim=576, v_head_dim=512, page_size=64)  # DeepSeek V3's latent cache
# tiny: three requests of 24, 36 and 60 keys (long_tail), pages of 8 scattered over the pool, 2 query heads per KV
TINY = dict(batch=3, seq_len=1, kv_seq_len=40, heads=4, kv_heads=2, head_dim=16, dtype="bfloat16", page_size=8,
            page_order="shuffled", kv_lengths="long_tail")
CUSTOM_CALL = re.compile(r"custom_call @([^\s(]+)")


# --- rules: what each variant declines, and why ------------------------------------------------------------------


@pytest.mark.parametrize("name, shape, device, words", [
    ("cudnn_paged", LLAMA, CPU, "cudnn_paged needs an NVIDIA GPU with compute capability ≥ 8.0"),
    ("cudnn_paged", dict(LLAMA, page_size=None), H200, "reads a paged KV cache: the cell sets no page_size"),
    ("cudnn_paged", dict(LLAMA, seq_len=4, causal=True), H200,
     "top-left causal mask only; T=4 new tokens need it aligned to each request's end"),
    ("cudnn_paged", dict(LLAMA, dtype="float32"), H200, "runs bfloat16 / float16 only, not float32"),
    ("cudnn_paged", dict(LLAMA, head_dim=100), H200, "head_dim a multiple of 8, not 100"),
    ("cudnn_paged", dict(LLAMA, **{"pass": "fwd_bwd"}), H200, "has no fwd_bwd pass"),
    ("cudnn_paged", MLA, H200, "supports head_dim up to 256, not 576"),
    ("cudnn_paged", dict(LLAMA, window=128), H200, "declines a sliding window"),
    ("pallas_paged", dict(LLAMA, page_size=None), H200, "reads a paged KV cache: the cell sets no page_size"),
    ("pallas_paged", dict(LLAMA, seq_len=2), H200, "one query token per request (q is [B, N, H]), not T=2"),
    ("pallas_paged", dict(LLAMA, head_dim=96), H200, "head_dim a power of two >= 16, not 96"),
    ("pallas_paged", dict(LLAMA, page_size=24), H200, "page_size a power of two, not 24"),
    ("pallas_paged", dict(LLAMA, **{"pass": "fwd_bwd"}), H200, "has no fwd_bwd pass"),
    ("pallas_paged", MLA, H200, "declines a V head dimension other than head_dim"),
])
def test_each_paged_variant_declines_what_its_kernel_cannot_run_and_says_why(name, shape, device, words):
    reason = decline(VARIANTS[name], params(**shape), device)
    assert reason and words in reason, reason


@pytest.mark.parametrize("name, shape", [
    ("cudnn_paged", LLAMA), ("cudnn_paged", dict(LLAMA, causal=True)), ("cudnn_paged", dict(LLAMA, seq_len=8)),
    ("cudnn_paged", dict(LLAMA, kv_lengths="bimodal", page_order="shuffled", page_size=64)),
    ("cudnn_paged", dict(LLAMA, heads=32, kv_heads=32, head_dim=256)),
    ("pallas_paged", LLAMA), ("pallas_paged", dict(LLAMA, causal=True, softcap=30.0)),
    ("pallas_paged", dict(LLAMA, kv_lengths="long_tail", page_order="shuffled", page_size=256)),
])
def test_each_paged_variant_takes_the_decode_shapes_it_is_for(name, shape):
    assert decline(VARIANTS[name], params(**shape), H200) is None


def test_a_dense_variant_declines_a_paged_cell_and_a_paged_one_a_dense_cell_in_one_plan():
    cells = [c for c in _cells(dict(LLAMA, page_size=None), LLAMA)]
    verdicts = {(c.variant, c.params.page_size): reason for c, reason in zip(cells, plan(cells, H200).declined)}
    assert verdicts[("cudnn_paged", 16)] is None and verdicts[("pallas_paged", 16)] is None
    assert "no page_size" in verdicts[("cudnn_paged", None)] and "no page_size" in verdicts[("pallas_paged", None)]
    assert "paged KV cache" in verdicts[("cudnn", 16)] and verdicts[("cudnn", None)] is None


def test_the_serving_specs_kernel_cells_run_on_an_h200_except_those_declined_by_design():
    from runner.cells import expand
    from runner.spec import load_spec

    cells = expand(load_spec(REPO / "specs" / "serving.yaml", set(VARIANTS)))
    assert {c.params.page_size for c in cells if c.experiment == "dense"} == {None}  # dense means dense
    ran, declined = {}, {}
    for cell in cells:
        if cell.variant in ("cudnn_paged", "pallas_paged", "pallas_decode"):
            reason = decline(VARIANTS[cell.variant], cell.params, H200)
            ran[cell.variant] = ran.get(cell.variant, 0) + (reason is None)
            declined.setdefault(cell.variant, set()).update([re.sub(r"T=\d", "T=n", reason)] if reason else [])
    assert all(ran.values()) and set(ran) == {"cudnn_paged", "pallas_paged", "pallas_decode"}
    assert declined == {  # the reasons as a user reads them, written out (not asked of the rules under test)
        "cudnn_paged": {"cudnn_paged reads a paged KV cache: the cell sets no page_size",
                        "cudnn_paged supports head_dim up to 256, not 576",
                        "jax's cuDNN path has a top-left causal mask only; T=n new tokens need it aligned to each "
                        "request's end (cuDNN's bottom-right causal, which jax does not expose)"},
        "pallas_paged": {"pallas_paged reads a paged KV cache: the cell sets no page_size",
                         "pallas_paged takes one query token per request (q is [B, N, H]), not T=n",
                         "pallas_paged declines a V head dimension other than head_dim: it implements none"},
        "pallas_decode": {"pallas_decode declines a paged KV cache: pallas_decode reads one dense cache (pallas_paged "
                          "is its paged sibling)",
                          "pallas_decode is decode attention: one query token per sequence (T = 1), not T=n"},
    }


def _cells(*shapes):
    return [Cell("e", name, params(**shape)) for shape in shapes for name in ("cudnn", "cudnn_paged", "pallas_paged")]


def test_pallas_paged_is_legacy_and_its_module_gone_is_its_reason(monkeypatch):
    import importlib.util

    legacy = VARIANTS["pallas_paged"].info().legacy
    assert legacy.startswith("jax 0.11 deprecated jax.experimental.pallas.ops.gpu") and "no GPU paged" in legacy
    gone, real = "jax.experimental.pallas.ops.gpu.paged_attention", importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda found, *a: None if found == gone else real(found, *a))
    assert VARIANTS["pallas_paged"].probe() == f"this jax no longer ships {gone} ({legacy})"


@pytest.mark.parametrize("capability", [8.0, 8.9, 9.0, 10.0])
def test_cudnn_paged_takes_head_dim_past_128_on_hopper_only(capability):
    gpu = Device("gpu", "a GPU", capability)
    wide, narrow = (params(**dict(LLAMA, heads=32, kv_heads=32, head_dim=h)) for h in (256, 128))
    assert decline(VARIANTS["cudnn_paged"], narrow, gpu) is None
    assert decline(VARIANTS["cudnn_paged"], wide, gpu) == (
        None if capability >= 9.0 else "cuDNN's flash attention takes head_dim up to 128 before Hopper, not 256")
    assert isinstance(VARIANTS["cudnn_paged"].build(wide), Staged)  # the build keeps no copy of the rule


def test_cudnn_paged_probe_names_the_private_function_it_needs(monkeypatch):
    assert VARIANTS["cudnn_paged"].probe() is None  # jax 0.10.2 here, as 0.11 on the GPU machine, has it
    monkeypatch.delattr(cudnn_paged._private(), "paged_attention")
    assert "needs paged_attention(q_seqlen, kv_seqlen, page_table_k, page_table_v)" in VARIANTS["cudnn_paged"].probe()
    monkeypatch.setattr(cudnn_paged, "_private", lambda: None)  # a jax that moved the module
    assert VARIANTS["cudnn_paged"].probe() == "cudnn_paged needs jax._src.cudnn.fused_attention_stablehlo, which " \
                                              "this jax does not have"


# --- the Pallas kernel in interpret mode, against the float32 reference -------------------------------------------


def _rel_err(out, ref) -> float:
    return float(jnp.linalg.norm(out.astype(jnp.float32) - ref) / jnp.linalg.norm(ref))


SMALL = dict(pages_per_compute_block=2, k_splits=2, num_warps=8, num_stages=2)  # 2 splits of 4 pages: fast to interpret


def _pallas_out(p, inputs, table=lambda t: t):
    kernel = functools.partial(pallas_paged.kernel_module().paged_attention, interpret=True)
    staged = pallas_paged.staged(p, SMALL, kernel)
    q, k_pages, v_pages, padded, lengths = staged.prepare(*inputs)
    return jax.jit(staged.attend)(q, k_pages, v_pages, table(padded), lengths)


def test_pallas_paged_reads_a_ragged_shuffled_gqa_cache_as_the_reference_does():
    p = params(**TINY)
    inputs = make_inputs(p, 0)
    assert paging.lengths(p) == [24, 36, 60] and inputs[1].shape == (3 + 5 + 8, 8, 2, 16)  # the pool's pages
    out = _pallas_out(p, inputs)
    assert out.shape == (3, 1, 4, 16) and _rel_err(out, reference(p, inputs)[0]) < 1e-2


def test_pallas_paged_with_a_wrong_page_table_is_far_from_the_reference():
    p = params(**TINY)
    inputs = make_inputs(p, 0)
    theirs = _pallas_out(p, inputs, table=lambda t: jnp.roll(t, 1, axis=0))  # each request reads another's pages
    assert _rel_err(theirs, reference(p, inputs)[0]) > 0.1


def test_pallas_paged_stages_a_head_major_pool_scaled_q_and_a_table_the_kernel_asserts_on():
    p = params(**TINY)
    for config in pallas_paged.configs(p):
        q, k_pages, _, table, lengths = jax.eval_shape(pallas_paged.make_prepare(p, config), *input_avals(p))
        per_split = table.shape[1] // config["k_splits"]
        assert table.shape[1] % config["k_splits"] == 0 and per_split % config["pages_per_compute_block"] == 0
        assert q.shape == (3, 4, 16) and k_pages.shape == (2, sum(paging.pages_of(p)), 8, 16)
    q, *_ = pallas_paged.make_prepare(p, SMALL)(*make_inputs(p, 0))
    raw = make_inputs(p, 0)[0][:, 0].astype(jnp.float32)
    assert float(jnp.max(jnp.abs(q.astype(jnp.float32) * math.sqrt(16) - raw))) < 0.05  # the scale, folded into Q


def test_pallas_paged_search_keeps_blocks_of_at_least_a_page_and_16_keys():
    for page_size, per_block in ((1, {64, 128}), (16, {4, 8}), (64, {1, 2}), (256, {1})):
        grid = pallas_paged.configs(params(**dict(LLAMA, page_size=page_size)))
        assert {c["pages_per_compute_block"] for c in grid} == per_block
        assert all(c["pages_per_compute_block"] * page_size >= MIN_BLOCK for c in grid)  # Triton's 16 rows
        assert {c["num_stages"] for c in grid} == ({1} if page_size == 256 else {2})


# --- cuDNN: the staged pool and table, its call emulated as jax documents it, its lowering for CUDA ---------------


def _emulated_cudnn(q, k_pages, v_pages, table, q_seqlen, kv_seqlen, *, scale):
    """What jax's paged_attention documents (PADDING mask): K[b, j * P + i] = k_pages[table[b, 0, j, 0], i], keys
    at or past kv_seqlen[b] masked; float32."""
    batch, width = table.shape[0], table.shape[2]

    def dense(pool):
        return pool[table[:, 0, :, 0]].reshape(batch, width * pool.shape[1], *pool.shape[2:]).astype(jnp.float32)

    k, v = dense(k_pages), dense(v_pages)
    groups = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
    scores = jnp.einsum("btnh,bsnh->bnts", q.astype(jnp.float32), k) * scale
    keep = jnp.arange(k.shape[1])[None, None, None, :] < kv_seqlen[:, None, None, None]
    weights = jax.nn.softmax(jnp.where(keep, scores, -jnp.inf), axis=-1)
    return jnp.einsum("bnts,bsnh->btnh", weights, v)


@pytest.mark.parametrize("shape", [TINY, dict(TINY, seq_len=3),
                                   dict(TINY, kv_lengths="equal", page_order="contiguous")])
def test_cudnn_paged_stages_what_its_call_reads_as_the_reference_does(shape):
    p = params(**shape)
    inputs = make_inputs(p, 0)
    q, k_pages, v_pages, table, q_seqlen, kv_seqlen = cudnn_paged.prepare(p)(*inputs)
    assert k_pages.shape == (3 * table.shape[2], 8, 2, 16) and table.shape == (3, 1, max(paging.pages_of(p)), 1)
    assert q_seqlen.tolist() == [p.seq_len] * 3 and kv_seqlen.tolist() == paging.lengths(p)
    out = _emulated_cudnn(q, k_pages, v_pages, table, q_seqlen, kv_seqlen, scale=1 / math.sqrt(16))
    assert _rel_err(out, reference(p, inputs)[0]) < 1e-5
    wrong = jnp.roll(table, 1, axis=0)  # (a request's own pages in another order are the same set of keys)
    assert _rel_err(_emulated_cudnn(q, k_pages, v_pages, wrong, q_seqlen, kv_seqlen, scale=0.25),
                    reference(p, inputs)[0]) > 0.1


class _Cudnn:
    @staticmethod
    def cudnn_get_version() -> int:
        return 91900  # the H200's cuDNN 9.19; jax reads it before it lowers


def test_cudnn_paged_lowers_for_cuda_to_a_paged_fmha_custom_call_that_proves_cudnn(monkeypatch):
    monkeypatch.setattr(cudnn_paged._private(), "cuda_versions", _Cudnn)  # None without a CUDA runtime
    p = params(**TINY)
    staged = VARIANTS["cudnn_paged"].build(p)
    assert isinstance(staged, Staged)
    avals = jax.eval_shape(staged.prepare, *input_avals(p))
    text = jax.jit(staged.attend).trace(*avals).lower(lowering_platforms=("cuda",)).as_text()
    calls = sorted(set(CUSTOM_CALL.findall(text)))
    assert calls == ["__cudnn$fmhaSoftmax"] and backend_of(calls) == "cudnn"
    config = text[text.index("cudnn_fmha_backend_config"):]
    assert '\\22is_paged_attention\\22: true' in config and '\\22mask_type\\22: \\22PADDING\\22' in config


@pytest.mark.parametrize("name", ["cudnn_paged", "xla_paged"])
def test_a_paged_variant_stages_the_cells_pools_as_they_are_held_not_a_copy(name):
    """At equal lengths cuDNN's pool needs no padding pages, and xla_paged gathers inside its timed call: each hands
    the pools the cell holds to its call (Compiled.arguments runs prepare untimed), so the B128 x 128k cell holds its
    68.7 GB pool once."""
    from runner.compiler import UNTIMED

    p = params(**dict(TINY, kv_lengths="equal"))
    inputs = make_inputs(p, 0)
    staged = VARIANTS[name].build(p)
    made = UNTIMED(staged.prepare, *inputs)
    assert made[1] is inputs[1] and made[2] is inputs[2]


MLA_TAKERS = ("tokamax_mosaic", "tokamax_triton", "tokamax_xla_chunked")  # V narrower than K, kv_lengths, GPU kernels
NARROW_V = "declines a V head dimension other than head_dim"


@pytest.mark.parametrize("path, experiment, cells", [("specs/serving.yaml", "mla", 72),
                                                     ("specs/models/deepseek-v3.yaml", "serve", 36)])
def test_mla_decode_runs_on_the_variants_that_take_v_narrower_than_k_and_the_paged_kernels_say_why_not(
        path, experiment, cells):
    """DeepSeek V3's absorbed MLA decode (128 query heads, one latent KV head, Q and K 576, V 512): tokamax's kernels
    take its dense or ragged cells at T = 1 (their causal is top-left: T > 1 declined), naive its dense ones; no
    paged kernel takes it, each for its reason (tokamax's package is absent here: its rules are read without the
    device's)."""
    from runner.cells import expand
    from runner.registry import static_decline
    from runner.spec import load_spec

    mla = [c for c in expand(load_spec(REPO / path, set(VARIANTS))) if c.experiment == experiment]
    assert len(mla) == cells and {(c.params.heads, c.params.kv_heads, c.params.head_dim, c.params.v_head_dim)
                                  for c in mla} == {(128, 1, 576, 512)}
    runs, why = set(), {}
    for cell in mla:
        tokamax = cell.variant.startswith("tokamax_")
        reason = (static_decline if tokamax else functools.partial(decline, device=H200))(VARIANTS[cell.variant],
                                                                                          cell.params)
        if reason is None:
            runs.add((cell.variant, cell.params.seq_len, cell.params.page_size))
        else:
            why.setdefault(cell.variant, set()).add(re.sub(r"T=\d", "T=n", reason))
    dense = {(name, 1, None) for name in MLA_TAKERS}
    assert runs == (dense if experiment == "mla" else dense | {("naive", t, None) for t in (1, 4)})
    assert why["cudnn_paged"] == {"cudnn_paged supports head_dim up to 256, not 576"}
    assert all(NARROW_V in reason for name in ("pallas_paged", "xla_paged") for reason in why[name])
    assert all("TPU only" in reason or "causal mask is top-left; a serving cell's T=n" in reason
               for name in MLA_TAKERS for reason in why[name])


# cudnn-frontend's published 4,504 GB/s: B128, KV 128k, Llama 3.1's heads, page 16, bf16, one new token
GOAL = dict(LLAMA, batch=128, kv_seq_len=131072, causal=True, kv_lengths="equal")


def test_at_the_goal_shape_the_plan_skips_the_variants_that_copy_the_pool_with_the_sizes_and_runs_cudnn_paged():
    """The cell holds its 68.7 GB pool once (tests/test_memory.py); cudnn_paged reads it as held, while pallas_paged's
    head-major copy and xla_paged's gathered copy would need as much again: the run's plan (and so its dry run) skips
    them before a worker is asked, their builds keep no copy of the rule. Half the batch fits beside them."""
    goal, half = params(**GOAL), params(**dict(GOAL, batch=64))
    cells = [Cell("e", name, p) for p in (goal, half) for name in ("cudnn_paged", "pallas_paged", "xla_paged")]
    declined = plan(cells, H200).declined
    assert declined[0] is None and declined[3:] == [None, None, None]
    assert declined[1:3] == [
        "pallas_paged's head-major copy of the pool (64.0 GiB) beside the cell's inputs and float32 reference needs "
        "129.5 GiB; the device has 104.8 GiB",
        "xla_paged's gathered K and V and XLA's copy of one (96.0 GiB) beside the cell's inputs, float32 reference and "
        "scores needs 167.5 GiB; the device has 104.8 GiB"]  # its 6.0 GiB of scores (one query a request) beside
    assert all(VARIANTS[name].build(goal) for name in ("cudnn_paged", "pallas_paged", "xla_paged"))


def test_each_paged_variant_admits_a_ragged_cell_by_the_copy_it_makes():
    """At long_tail lengths (mean 128k) the longest of 64 requests holds 385,247 keys: xla_paged's gathered copy is 64
    times that (94.1 GiB), three times the 32.0 GiB pool, so its cell cannot fit beside its inputs; pallas_paged's
    head-major copy is the pool's size, so the same cell fits beside it."""
    ragged = params(**dict(GOAL, batch=64, kv_lengths="long_tail"))
    assert max(paging.lengths(ragged)) == 385247
    assert plan([Cell("e", "xla_paged", ragged), Cell("e", "pallas_paged", ragged)], H200).declined == [
        "xla_paged's gathered K and V and XLA's copy of one (141.1 GiB) beside the cell's inputs, float32 reference "
        "and scores needs 186.4 GiB; the device has 104.8 GiB", None]  # 94.1 GiB gathered, 47.0 of XLA's copy
