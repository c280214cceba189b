"""GPU truth, checked on an NVIDIA GPU (the project's H200); skipped cleanly elsewhere."""

from __future__ import annotations

import importlib.util

import pytest

from crosscheck import ANCHOR, crosscheck, idle, measured, measurer as _measurer, params
from helpers import attnbench, spec_data, write_spec
from runner import power
from runner.cells import Cell
from runner.machine import current_device
from runner.store import read_run
from runner.timers import ColdDeviceTimer, DeviceTimer, WallTimer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(current_device().compute_capability is None, reason="needs an NVIDIA GPU"),
]

IDLE = idle()
LAB_DEFAULT = dict(batch=4, seq_len=128, heads=8, head_dim=64, dtype="bfloat16", causal=False)


def measurer(timers, **timing):
    return _measurer(timers, IDLE, **timing)


def measure(variant: str, timers=None, **shape):
    return measured(measurer(timers or [DeviceTimer(), WallTimer()]), Cell("gpu", variant, params(**shape)))


def test_cudnn_runs_the_fused_kernel_at_the_lab_default_shape():
    record = measure("cudnn", **LAB_DEFAULT)
    assert record.status == "ok", record.reason
    assert any(c.startswith("__cudnn$fmha") for c in record.custom_calls)
    assert record.backend == "cudnn"
    assert any("sdpa" in k or "fmha" in k or "flash" in k for k in record.kernels), record.kernels


def test_lab_default_shape_device_time_is_a_fraction_of_wall_time():
    record = measure("xla", **LAB_DEFAULT)
    wall, device = (next(t for t in record.timings if t.timer == name) for name in ("wall", "device"))
    assert record.timer == "device"
    assert device.median_s < wall.median_s / 2, (device.median_s, wall.median_s)


def test_auto_records_what_it_compiled_to():
    auto, xla, cudnn = (measure(v, **LAB_DEFAULT) for v in ("auto", "xla", "cudnn"))
    assert auto.status == "ok", auto.reason
    twin = {"xla": xla, "cudnn": cudnn}[auto.backend]  # the kernels prove the backend the record names
    assert auto.kernels == twin.kernels, (auto.kernels, twin.kernels)


def test_naive_temp_memory_grows_with_t_squared_and_cudnn_does_not():
    shape = dict(batch=4, seq_len=4096, heads=16, head_dim=128, dtype="bfloat16", causal=False)
    naive, cudnn = measure("naive", **shape), measure("cudnn", **shape)
    assert naive.temp_bytes >= 4 * 16 * 4096 * 4096 * 2  # the (B, N, T, S) bf16 weights
    assert cudnn.temp_bytes < naive.temp_bytes / 100


@pytest.mark.parametrize("variant", ["cudnn", "xla"])
def test_fwd_bwd_is_checked_against_reference_gradients(variant):
    record = measure(variant, **{**LAB_DEFAULT, "causal": True, "kv_heads": 2, "pass": "fwd_bwd"})
    assert record.status == "ok", record.reason
    assert set(record.correctness.grad_rel_err) == {"dq", "dk", "dv"}


@pytest.mark.parametrize("seq_len", [8192, 16384])
@pytest.mark.parametrize("policy", ["burst", "steady"])
@pytest.mark.parametrize("variant", ["cudnn", "cudnn_fp8"])
def test_device_tflops_match_an_independent_direct_measurement(variant, policy, seq_len):
    row = crosscheck(variant, policy, IDLE, seq_len=seq_len)
    assert abs(row["ratio"] - 1) < 0.03, row


@pytest.mark.parametrize("seq_len", [8192, 16384])
def test_a_steady_cell_that_carries_the_cap_of_the_cell_before_matches_the_direct_measurement(seq_len):
    """The carried capped verdict (judged after 1 s of its own load, not 1.5 s) samples the same steady state."""
    row = crosscheck("cudnn", "steady", IDLE, carried=True, seq_len=seq_len)
    assert abs(row["ratio"] - 1) < 0.03, row
    assert row["power"]["carried_s"] > 0, row  # its stream continued the load of the cell before


def test_telemetry_power_and_energy_are_recorded():
    record = measure("cudnn", **ANCHOR)
    t = record.telemetry
    assert record.status == "ok", record.reason
    assert t.source == "nvml" and t.samples >= 2 and 300 < t.sm_clock_mhz.median < 3000
    assert 0 < t.power_w.mean <= t.power_w.max and t.power_limit_w > 0
    assert record.power.policy == "steady" and record.clock_unstable == power.unstable(t)
    # the energy counter's mean over a sample long enough for its steps, else NVML's reading after the settling
    watts = power.mean_power_w(t, record.power)
    if t.drawn_w is not None:
        assert 0 < t.drawn_w <= 1.2 * t.power_limit_w and watts == t.drawn_w
    else:
        assert record.power.wait_s >= power.NVML_AVERAGE_S and watts == t.power_w.mean
    assert record.energy_j == pytest.approx(watts * record.median_s)
    assert record.tflops_per_j == pytest.approx(record.flops / 1e12 / record.energy_j)


def test_cudnn_fp8_is_real_fp8_and_faster_than_bf16():
    fp8, bf16 = measure("cudnn_fp8", **ANCHOR), measure("cudnn", **ANCHOR)
    assert fp8.status == "ok", fp8.reason
    assert fp8.fp8.in_hlo and fp8.fp8.in_kernels, fp8.fp8
    assert fp8.correctness.rel_err < 0.1
    assert fp8.tflops > 1.2 * bf16.tflops, (fp8.tflops, bf16.tflops)


def _run_in_workers(tmp_path, variants: list[str], **shape) -> dict:
    """Cells measured by `attnbench run`, each variant in its own worker as a run does, by variant."""
    experiment = {"name": "x", "variants": variants, **shape}
    spec = write_spec(tmp_path / "spec.yaml", spec_data(experiment, defaults={}, timing={"budget_s": 0.5}))
    done = attnbench("run", spec, "--out", tmp_path / "out", "--run-id", "gpu", "--spool", tmp_path / "spool",
                     timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return {c.variant: c for c in read_run(tmp_path / "out" / "gpu").cells}


def test_te_fp8_says_whether_fp8_reached_attention(tmp_path):
    if current_device().compute_capability < 8.9:
        pytest.skip("needs compute capability 8.9")
    if importlib.util.find_spec("transformer_engine") is None:  # never import it here: JAX's GPU backend is up
        pytest.skip("needs transformer_engine")
    record = _run_in_workers(tmp_path, ["te", "te_fp8"], **{**LAB_DEFAULT, "seq_len": 2048, "causal": True})["te_fp8"]
    assert record.status == "ok", record.reason
    assert record.worker == "transformer_engine"
    assert record.backend == "transformer_engine" and record.fp8.baseline == "te"
    if record.fp8.in_hlo:
        assert not record.fp8.verdict.startswith("not FP8"), record.fp8
    else:  # what the H200 showed with TE 2.20.2: bf16 attention, the same output as plain te
        assert record.fp8.verdict.startswith("not FP8"), record.fp8
        assert record.fp8.rel_err_vs_bf16 < record.correctness.tolerance


def test_cold_samples_are_named_and_not_faster_than_hot():
    record = measure("cudnn", timers=[DeviceTimer(), ColdDeviceTimer()], **{**LAB_DEFAULT, "seq_len": 1024})
    hot, cold = (next(t for t in record.timings if t.timer == name) for name in ("device", "device_cold"))
    assert cold.median_s >= hot.median_s * 0.95


def test_matmul_and_bandwidth_ceilings_are_measured():
    from runner.gpu import matmul_peak_tflops, memory_bandwidth_gbps

    assert 50 < matmul_peak_tflops(size=4096, calls=10) < 5000
    assert 200 < memory_bandwidth_gbps(size_bytes=1 << 30, calls=10) < 20000


def test_cudnn_fp8_is_correct_at_h64_in_a_run_that_also_measures_te(tmp_path):
    """TE's cuDNN stays in TE's worker: cudnn_fp8 at H=64 runs on JAX's own cuDNN and agrees with float32."""
    if importlib.util.find_spec("transformer_engine") is None:
        pytest.skip("needs transformer_engine")
    cells = _run_in_workers(tmp_path, ["cudnn", "cudnn_fp8", "te"], **{**LAB_DEFAULT, "seq_len": 2048})
    assert cells["te"].status == "ok" and cells["te"].worker == "transformer_engine", cells["te"].reason
    assert cells["cudnn_fp8"].status == "ok", cells["cudnn_fp8"].reason
    assert cells["cudnn_fp8"].worker == "jax"



# Issue 37's training cells, small: each asserts the record is ok and names what ran (the lead runs them with -m gpu).
TRAINING_SMALL = dict(batch=2, seq_len=1024, heads=8, kv_heads=2, head_dim=128, dtype="bfloat16", causal=True)
needs_tokamax = pytest.mark.skipif(importlib.util.find_spec("tokamax") is None, reason="needs tokamax")


@needs_tokamax
@pytest.mark.parametrize("pass_", ["fwd", "fwd_bwd"])
@pytest.mark.parametrize("variant, backend", [("tokamax_mosaic", "pallas_mosaic_gpu"),
                                              ("tokamax_triton", "pallas_triton")])
def test_tokamax_kernels_run_forward_and_backward_and_their_custom_calls_prove_it(variant, backend, pass_):
    record = measure(variant, **TRAINING_SMALL, **{"pass": pass_})
    assert record.status == "ok", record.reason
    assert record.backend == backend, (record.backend, record.custom_calls)
    assert record.kernels, "CUPTI named no kernel"
    if pass_ == "fwd_bwd":
        assert set(record.correctness.grad_rel_err) == {"dq", "dk", "dv"}


@needs_tokamax
def test_tokamax_packed_rows_run_on_its_kernels():
    for variant in ("tokamax_mosaic", "tokamax_triton"):
        record = measure(variant, **TRAINING_SMALL, documents=4)
        assert record.status == "ok", (variant, record.reason)


@needs_tokamax
def test_a_tuned_tokamax_cell_records_what_tokamax_autotune_chose():
    record = measure("tokamax_triton", **TRAINING_SMALL, tune=True)
    assert record.status == "ok", record.reason
    assert record.tuning.tuner == "tokamax.autotune" and record.tuning.config, record.tuning
    assert record.backend == "pallas_triton"


@needs_tokamax
def test_tokamax_triton_fp8_runs_e4m3_through_qwix_and_is_compared_with_its_bf16_baseline():
    if current_device().compute_capability < 8.9:
        pytest.skip("needs compute capability 8.9")
    record = measure("tokamax_triton_fp8", **TRAINING_SMALL)
    assert record.status == "ok", record.reason
    assert record.backend == "pallas_triton" and record.fp8.baseline == "tokamax_triton"
    assert record.fp8.in_hlo, record.fp8  # e4m3 reached the compiled program (the Triton kernel's name says no dtype)
    assert record.fp8.matmuls == ["qk"]  # its P·V runs in bf16: its MMA peak is set so (runner.metrics)


@pytest.mark.parametrize("pass_", ["fwd", "fwd_bwd"])
def test_packed_rows_run_on_cudnn_through_its_segment_offsets(pass_):
    if current_device().compute_capability < 9.0:
        pytest.skip("packed rows on cuDNN need Hopper")
    record = measure("cudnn", **TRAINING_SMALL, documents=4, **{"pass": pass_})
    assert record.status == "ok", record.reason
    assert record.backend == "cudnn" and any(c.startswith("__cudnn$fmha") for c in record.custom_calls)


def test_a_deterministic_cudnn_backward_repeats_bit_for_bit():
    record = measure("cudnn", **TRAINING_SMALL, deterministic=True, **{"pass": "fwd_bwd"})
    assert record.status == "ok", record.reason
    assert record.backend == "cudnn" and record.correctness.bitwise_repeat is True
