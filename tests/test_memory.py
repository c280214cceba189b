"""runner/memory.py: the device memory a cell's inputs and float32 reference need (its inputs, its results, one
reference chunk, an input's draw), the scores a variant materialises beside them, and the rule that skips a cell a
device cannot hold. The peaks these counts are held to are measured in tests/test_inputs.py, where the arrays are
made; the committed runs hold the rule in tests/test_memory_records.py."""

from __future__ import annotations

import re

import pytest
from helpers import H200_MEMORY, params
from runner import memory, metrics, paging
from runner.registry import VARIANTS, load_all

load_all()

GiB = 1 << 30  # REFERENCE_CHUNK_BYTES is 2 GiB


def test_a_dense_training_cells_memory_is_its_inputs_results_and_one_chunk_of_rows():
    """B2 T8k, 64/8 heads, H128, bf16, fwd_bwd: a request's 8192 rows of scores do not fit 2 GiB, so a chunk is one
    request's K and V (sliced, in float32, their float32 gradients) and as many rows as fit beside them."""
    p = params(batch=2, seq_len=8192, heads=64, kv_heads=8, head_dim=128, dtype="bfloat16", causal=True,
               pass_="fwd_bwd")
    q, kv = 2 * 8192 * 64 * 128 * 2, 2 * 8192 * 8 * 128 * 2  # Q (and O, dO) and K (and V), bf16
    row, request_kv = 4 * 64 * 8192 * 3, 8192 * 8 * 256 * (2 + 4 + 4)  # f32 scores x3; K and V bf16, f32, f32 grads
    assert memory.chunk_shape(p) == (1, (2 * GiB - request_kv) // row) == (1, 314)
    assert memory.chunk_bytes(p) == 314 * row + request_kv == 2_143_289_344
    expected = 2 * (2 * q + 2 * kv)  # out, dQ, dK, dV in float32
    assert memory.needed_bytes(p) == (2 * q + 2 * kv) + expected + 2_143_289_344 == 3_955_228_672


def test_a_ragged_paged_decode_cells_memory_holds_its_pool_and_a_chunk_of_whole_requests():
    """B64 decode against long_tail lengths around 8k (the longest 24,078), 16-token pages: a chunk is 7 whole
    requests, each gathered to whole pages of the longest (24,080 keys); the pool of 32,796 pages is the cell's K and
    V (no dense cache beside it); the flat draw of its K pool (2^30 normals) is the peak."""
    p = params(batch=64, seq_len=1, kv_seq_len=8192, heads=32, kv_heads=8, head_dim=128, dtype="bfloat16",
               kv_lengths="long_tail", page_size=16)
    assert paging.cache_len(p) == 24_078 and sum(paging.pages_of(p)) == 32_796
    q = 64 * 32 * 128 * 2
    request = 4 * 32 * 24_078 + 24_080 * 8 * 256 * (2 + 4)  # one row of f32 scores; K and V gathered, bf16 and f32
    assert memory.chunk_shape(p) == (2 * GiB // request, 1) == (7, 1)
    assert memory.chunk_bytes(p) == 7 * request == 2_092_839_168
    pool, draw = 2 * 32_796 * 16 * 8 * 128 * 2, 4 * 2**30  # the K pool's 5.4e8 normals drawn as 2^30
    assert memory.needed_bytes(p) == q + pool + max(2 * q + 7 * request, draw) == 6_444_810_240


def test_a_packed_cells_memory_is_a_dense_cells_of_its_shape():
    """B4 T4k, 4 documents a row, fwd: the same bytes as the dense shape (the document ids are a few KiB); one
    request's rows fill a chunk, so it takes 4000 of its 4096 rows."""
    p = params(batch=4, seq_len=4096, heads=32, kv_heads=8, head_dim=128, dtype="bfloat16", causal=True, documents=4)
    q, kv = 4 * 4096 * 32 * 128 * 2, 4 * 4096 * 8 * 128 * 2
    row, request_kv = 4 * 32 * 4096, 4096 * 8 * 256 * (2 + 4)
    assert memory.chunk_shape(p) == (1, 4000) and memory.chunk_bytes(p) == 4000 * row + request_kv == 2 * GiB
    assert memory.needed_bytes(p) == q + 2 * kv + 2 * q + 2 * GiB == 2_617_245_696
    assert memory.needed_bytes(p) == memory.needed_bytes(p.model_copy(update={"documents": 1}))


def test_a_shape_whose_inputs_and_reference_outgrow_the_device_is_too_large_for_any_variant():
    p = params(seq_len=256)
    for name in ("cudnn", "xla"):  # the inputs are said first, scores or not
        assert re.fullmatch(r"inputs and float32 reference need .* MiB; the device has 1\.0 MiB",
                            memory.too_large(p, 1 << 20, VARIANTS[name]))
    assert memory.too_large(p.model_copy(update={"devices": 2}), 1 << 20, VARIANTS["ring"]) == \
        memory.too_large(p, 1 << 20, VARIANTS["ring"])  # a split cell's reference is made whole, on one device


def test_a_device_of_exactly_the_bytes_a_cell_needs_holds_it():
    """The rule skips a cell that needs more than the device has, not one that needs all of it: its inputs and
    reference alone, and xla_paged's copies (its gathered K and V, and XLA's of one) beside them and its scores."""
    dense, cudnn = params(seq_len=256), VARIANTS["cudnn"]
    needed = memory.needed_bytes(dense)
    assert memory.too_large(dense, needed, cudnn) is None
    assert memory.too_large(dense, needed - 1, cudnn).startswith("inputs and float32 reference need ")
    paged, xla_paged = params(seq_len=2, kv_seq_len=18, page_size=4, kv_lengths="equal"), VARIANTS["xla_paged"]
    held = memory.needed_bytes(paged) + memory.scores_bytes(paged, xla_paged) + xla_paged.kv_copy.bytes(paged)
    assert memory.too_large(paged, held, xla_paged) is None
    assert memory.too_large(paged, held - 1, xla_paged).startswith("xla_paged's gathered K and V ")


def test_a_variant_that_materialises_the_scores_needs_them_beside_the_inputs():
    """B2 T1024 N4 H16 bf16: 8 Mi scores, 6 bytes each under xla's forward (48 MiB), 10 with its backward, 4 under
    naive's; a flash kernel (cudnn) holds none, so the same device holds its cell."""
    p = params(batch=2, seq_len=1024, heads=4, head_dim=16, dtype="bfloat16")
    scores, needed = 2 * 4 * 1024 * 1024, memory.needed_bytes(p)
    assert memory.scores_bytes(p, VARIANTS["xla"]) == 6 * scores
    assert memory.scores_bytes(params(**{**p.as_dict(), "pass": "fwd_bwd"}), VARIANTS["xla"]) == 10 * scores
    assert memory.scores_bytes(p, VARIANTS["naive"]) == 4 * scores and memory.scores_bytes(p, VARIANTS["cudnn"]) == 0
    device = needed + 5 * scores
    assert memory.too_large(p, device, VARIANTS["cudnn"]) is None and memory.too_large(p, device, VARIANTS["naive"]) is None
    assert memory.too_large(p, device, VARIANTS["xla"]) == \
        f"xla's (B, N, T, S) scores need 48.0 MiB beside the inputs and float32 reference's " \
        f"{memory.size_text(needed)}; the device has {memory.size_text(device)}"


@pytest.mark.parametrize("name, shape, dtype, pass_, per_score", [
    ("xla", dict(heads=16), "float32", "fwd", 8),  # the records' 8, not bfloat16's 6: 131.0 GiB, where 6 said 99
    ("naive", dict(heads=20), "float32", "fwd", 8),  # 163.2 GiB, where 4 said 83
    ("xla", dict(heads=12), "float16", "fwd_bwd", 8),  # the records' 8, not bfloat16's 10: 99.1 GiB fits
])
def test_the_bytes_a_score_are_the_cells_dtypes(name, shape, dtype, pass_, per_score):
    """B1 T32k H128 causal, the review's cells at the H200's memory: float32 keeps 8 bytes a score under XLA's forward
    and naive's (the logits or scores 4 + their float32 softmax or weights 4), float16's backward 8 where bfloat16's
    keeps 10 (docs/benchmarks.md)."""
    p = params(batch=1, seq_len=32768, head_dim=128, causal=True, dtype=dtype, pass_=pass_, **shape)
    scores = 32768 * 32768 * shape["heads"]
    assert memory.scores_bytes(p, VARIANTS[name]) == per_score * scores
    fits = memory.needed_bytes(p) + per_score * scores <= H200_MEMORY
    assert (memory.too_large(p, H200_MEMORY, VARIANTS[name]) is None) == fits == (dtype == "float16")


def test_xla_cps_scores_are_autos_and_each_device_holds_its_share():
    """specs/context-parallel.yaml's B1 T32k N64 K8 H128 bf16 causal: at devices 1 xla_cp runs auto's program, so its
    cell is skipped as xla's is (384 GiB of scores); split across 8, each device holds an eighth (48 GiB) beside the
    whole reference that one device makes."""
    p = params(batch=1, seq_len=32768, heads=64, kv_heads=8, head_dim=128, dtype="bfloat16", causal=True)
    alone, split = memory.too_large(p, H200_MEMORY, VARIANTS["xla_cp"]), p.model_copy(update={"devices": 8})
    assert alone == memory.too_large(p, H200_MEMORY, VARIANTS["xla"]).replace("xla's", "xla_cp's")
    assert alone.startswith("xla_cp's (B, N, T, S) scores need 384.0 GiB beside")
    assert memory.scores_bytes(split, VARIANTS["xla_cp"]) == 48 * GiB
    assert memory.too_large(split, H200_MEMORY, VARIANTS["xla_cp"]) is None


def test_xla_pageds_gathered_copy_is_counted_with_its_scores_beside_the_inputs():
    """B80 T8 S128k N64 K8 H128 bf16 causal, page 16: inputs and reference 41.8 GiB, the gathered K and V 40.0 GiB and
    XLA's copy of one of them 20.0 GiB (its dot's layout, as xla's), the scores 30.0 GiB (6 bytes each); the copies and
    the scores each fit beside the inputs alone, the call holds both."""
    p = params(batch=80, seq_len=8, kv_seq_len=131072, heads=64, kv_heads=8, head_dim=128, dtype="bfloat16",
               causal=True, kv_lengths="equal", page_size=16)
    assert memory.scores_bytes(p, VARIANTS["xla_paged"]) == 30 * GiB
    assert VARIANTS["xla_paged"].kv_copy.bytes(p) == metrics.gathered_bytes(p) * 3 // 2 == 60 * GiB
    assert memory.too_large(p, H200_MEMORY, VARIANTS["xla_paged"]) == \
        "xla_paged's gathered K and V and XLA's copy of one (60.0 GiB) beside the cell's inputs, float32 reference " \
        "and scores needs 131.8 GiB; the device has 104.8 GiB"


def test_a_paged_cells_scores_span_the_gathered_pages_of_its_longest_request():
    p = params(seq_len=2, kv_seq_len=18, causal=True, page_size=4, kv_lengths="equal")  # 18 keys: 5 whole pages
    assert memory.scores_bytes(p, VARIANTS["xla_paged"]) == p.batch * p.heads * 2 * 20 * 8  # float32: 8 a score


# cudnn-frontend's published 4,504 GB/s: batch 128, KV 128k, Llama 3.1's 64 / 8 heads, H128, page 16, bf16, T = 1
GOAL = dict(batch=128, seq_len=1, kv_seq_len=131072, heads=64, kv_heads=8, head_dim=128, dtype="bfloat16",
            causal=True, kv_lengths="equal")
CUDNN, CUDNN_PAGED = VARIANTS["cudnn"], VARIANTS["cudnn_paged"]  # kernels that hold no (B, N, T, S) scores


def test_the_goal_shapes_paged_cell_fits_an_h200_as_its_dense_twin_does():
    """The pool in place of the dense K and V (at equal lengths a multiple of the page, as many bytes): 70.4 GB, not
    the 139.1 GB of a pool built beside a dense cache kept alive, which JAX's 104.9 GiB on an H200 refused."""
    paged, dense = params(**GOAL, page_size=16), params(**GOAL)
    pool = 2 * 128 * 8192 * 16 * 8 * 128 * 2  # 68.7 GB
    q, out, chunk = 128 * 64 * 128 * 2, 128 * 64 * 128 * 4, 4 * 64 * 131072 + 131072 * 8 * 256 * (2 + 4)
    assert memory.chunk_shape(paged) == (1, 1) and memory.chunk_bytes(paged) == chunk  # one request: 1.6 GB
    assert memory.needed_bytes(paged) == q + pool + out + chunk == memory.needed_bytes(dense) == 70_369_935_360
    assert memory.too_large(paged, H200_MEMORY, CUDNN_PAGED) is None and memory.too_large(dense, H200_MEMORY, CUDNN) is None
    assert memory.too_large(paged, 64 << 30, CUDNN_PAGED).startswith("inputs and float32 reference need 65.5 GiB")
