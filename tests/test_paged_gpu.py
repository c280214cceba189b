"""The paged decode kernels on an NVIDIA GPU (the project's H200): cudnn_paged, pallas_paged and pallas_decode on a
ragged batch each compile, prove their backend by their custom call and match the float32 reference on a serving
cell with pages scattered over the pool; tokamax's kernels on DeepSeek V3's absorbed MLA decode. Skipped cleanly
without a GPU (or, for tokamax's, without tokamax); none of this has run until it runs there."""

from __future__ import annotations

import pytest

from test_pallas_gpu import assert_proven_and_correct, measure
from runner.machine import current_device

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(current_device().compute_capability is None, reason="needs an NVIDIA GPU"),
]
# Llama 3.1's heads, 8 ragged requests (long_tail around 4k keys), pages of 16 scattered over the pool
SERVING = dict(batch=8, seq_len=1, kv_seq_len=4096, heads=64, kv_heads=8, head_dim=128, dtype="bfloat16",
               causal=True, kv_lengths="long_tail", page_order="shuffled")


@pytest.mark.parametrize("page_size", [16, 64])
def test_cudnn_paged_reads_a_shuffled_ragged_cache_as_the_reference_does(page_size):
    record = measure("cudnn_paged", **SERVING, page_size=page_size)
    assert record.status == "ok", record.reason
    assert record.backend == "cudnn" and any(c.startswith("__cudnn$fmha") for c in record.custom_calls)
    assert record.kernels, "CUPTI saw no kernel"


def test_cudnn_paged_takes_new_tokens_without_a_mask():
    record = measure("cudnn_paged", **dict(SERVING, seq_len=4, causal=False), page_size=16)
    assert record.status == "ok", record.reason


@pytest.mark.parametrize("page_size", [16, 64])
def test_pallas_paged_searches_and_reads_a_shuffled_ragged_cache_as_the_reference_does(page_size):
    record = measure("pallas_paged", **SERVING, page_size=page_size)
    assert_proven_and_correct(record, "pallas_triton", "__gpu$xla.gpu.triton")


def test_pallas_decode_reads_a_ragged_batch_to_each_requests_length():
    record = measure("pallas_decode", **SERVING)
    assert_proven_and_correct(record, "pallas_triton", "__gpu$xla.gpu.triton")


# DeepSeek V3's MLA decode with its up-projections absorbed: 128 query heads, one latent KV head, Q and K 576, V 512
MLA = dict(SERVING, heads=128, kv_heads=1, head_dim=576, v_head_dim=512)


@pytest.mark.parametrize("name", ["tokamax_mosaic", "tokamax_triton", "tokamax_xla_chunked"])
def test_tokamax_reads_a_ragged_mla_decode_batch_as_the_reference_does(name):
    """The variants that declare V narrower than K (tests/test_paged_variants.py: every paged kernel declines it)."""
    record = measure(name, **MLA)
    assert record.status == "ok", record.reason
