"""The Pallas variants on an NVIDIA GPU (the project's H200): each one's search compiles, its winner proves its backend
by its custom call and matches the float32 reference on one shape. Skipped cleanly without a GPU."""

from __future__ import annotations

import pytest

from helpers import params
from runner.cells import Cell
from runner.machine import current_device
from runner.measure import Measurer
from runner.record import CellRecord
from runner.registry import VARIANTS, decline, load_all
from runner.spec import parse_spec
from runner.timers import DeviceTimer, WallTimer

load_all()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(current_device().compute_capability is None, reason="needs an NVIDIA GPU"),
]
TIMING = dict(warmup=1, min_samples=3, max_samples=10, budget_s=0.2)
GQA = dict(batch=1, heads=16, kv_heads=2, head_dim=128)


def measure(variant: str, **shape) -> CellRecord:
    """One cell measured as a run would (the search included), or the test skipped where this GPU declines it."""
    p = params(**shape)
    if reason := decline(VARIANTS[variant], p, current_device()):
        pytest.skip(reason)
    spec = parse_spec({"name": "pallas-gpu", "timing": TIMING, "experiments": [{"name": "x", "variants": [variant]}]},
                      set(VARIANTS))
    return Measurer(spec, [DeviceTimer(), WallTimer()], "pallas-gpu", current_device()).measure(Cell("x", variant, p))


def assert_proven_and_correct(record: CellRecord, backend: str, call: str) -> None:
    assert record.status == "ok", record.reason  # "incorrect" would name the error against the float32 reference
    assert record.backend == backend and any(c.startswith(call) for c in record.custom_calls), record.custom_calls
    assert record.kernels, "CUPTI saw no kernel"
    ran = [c.config for c in record.tuning.candidates if c.status == "ok"]
    assert record.tuning.config in ran, record.tuning


def test_mgpu_causal_forward_searches_and_skips_the_configuration_past_shared_memory():
    record = measure("pallas_mgpu", **GQA, seq_len=1024, dtype="float16", causal=True)
    assert_proven_and_correct(record, "pallas_mosaic_gpu", "mosaic_gpu")
    too_big = next(c for c in record.tuning.candidates
                   if c.config == dict(block_q=64, block_kv=128, max_concurrent_steps=4))
    assert too_big.status == "skipped", too_big  # 2 x 4 x 128 x 128 x 2 B of K/V buffers: past 227 KiB


def test_mgpu_pipeline_emitter_candidates_compile_in_non_causal_forward():
    record = measure("pallas_mgpu", batch=4, seq_len=256, heads=8, head_dim=64, dtype="float16")
    assert_proven_and_correct(record, "pallas_mosaic_gpu", "mosaic_gpu")
    emitter = [c for c in record.tuning.candidates if c.config.get("kernel") == "pipeline_emitter"]
    assert [c.status for c in emitter] == ["ok", "ok"], emitter


def test_mgpu_backward_matches_the_reference_gradients():
    record = measure("pallas_mgpu", batch=2, seq_len=512, heads=4, kv_heads=2, head_dim=64, dtype="float16",
                     pass_="fwd_bwd")
    assert_proven_and_correct(record, "pallas_mosaic_gpu", "mosaic_gpu")
    assert set(record.correctness.grad_rel_err) == {"dq", "dk", "dv"}


@pytest.mark.parametrize("dtype, pass_", [("bfloat16", "fwd"), ("float16", "fwd_bwd")])
def test_triton_with_repeated_kv_heads_matches_the_reference(dtype, pass_):
    record = measure("pallas_triton", **GQA, seq_len=512, dtype=dtype, causal=True, pass_=pass_)
    assert_proven_and_correct(record, "pallas_triton", "__gpu$xla.gpu.triton")


@pytest.mark.parametrize("kv_heads", [8, 32])
def test_decode_on_a_head_major_cache_matches_the_reference(kv_heads):
    record = measure("pallas_decode", batch=4, seq_len=1, kv_seq_len=8192, heads=32, kv_heads=kv_heads,
                     head_dim=128, dtype="bfloat16")
    assert_proven_and_correct(record, "pallas_triton", "__gpu$xla.gpu.triton")
