"""runner/attention.py, and whole cells checked for correctness through the Measurer, on the CPU with tiny shapes.

naive and xla agree with each other and with the float32 reference (GQA, MQA, causal, f32 and bf16); a wrong
variant is `incorrect` and untimed; a raising one is `failed`, or `oom` for resource exhaustion. The inputs and
the reference themselves: tests/test_inputs.py; the checks' rules: tests/test_checks.py.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import params, spec_data
from runner.attention import naive_attention, reference_attention
from runner.cells import Cell
from runner.machine import current_device
from runner.measure import Measurer, failure
from runner.registry import VARIANTS, load_all, variant
from runner.spec import parse_spec
from runner.timers import Samples, WallTimer

load_all()

# (kv_heads, seq_len, kv_seq_len, causal): MHA, GQA, MQA, masked and not, T != S both ways
SHAPES = {
    "MHA": (4, 8, 8, False),
    "MHA-causal": (4, 8, 8, True),
    "GQA-causal": (2, 8, 8, True),
    "MQA-causal": (1, 8, 8, True),
    "GQA-T<S-causal": (2, 8, 12, True),
    "MQA-T>S-causal": (1, 12, 8, True),
}
TOLERANCE = {"float32": 1e-5, "bfloat16": 2e-2}
# jitted, so that each shape costs one compilation rather than one per operation
naive_jit = jax.jit(naive_attention, static_argnames="causal")
reference_jit = jax.jit(reference_attention, static_argnames="causal")


def random_inputs(p, seed: int) -> tuple:
    """Normal Q, K, V (and dO under fwd_bwd) from numpy: jax.random compiles anew for every shape, slowly on a CPU."""
    rng = np.random.default_rng(seed)
    q_shape, kv_shape = (p.batch, p.seq_len, p.heads, p.head_dim), (p.batch, p.kv_seq_len, p.kv_heads, p.head_dim)
    shapes = [q_shape, kv_shape, kv_shape] + ([q_shape] if p.pass_ == "fwd_bwd" else [])
    return tuple(jnp.asarray(rng.standard_normal(shape, np.float32).astype(jnp.dtype(p.dtype))) for shape in shapes)


def rel_err(out, ref) -> float:
    out, ref = np.asarray(out, np.float32), np.asarray(ref, np.float32)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


@functools.partial(jax.jit, static_argnames="causal")
def xla_attention(q, k, v, causal: bool):
    return jax.nn.dot_product_attention(q, k, v, is_causal=causal, implementation="xla")


@functools.partial(jax.jit, static_argnames="causal")
def three_ways(q, k, v, causal: bool):
    """naive, xla and the float32 reference, compiled together."""
    return naive_attention(q, k, v, causal), xla_attention(q, k, v, causal), reference_attention(q, k, v, causal)


def numpy_attention(q, k, v, causal: bool) -> np.ndarray:
    """Attention in float64 numpy, one head at a time: the definition, independent of runner.attention."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    batch, seq_len, heads, head_dim = q.shape
    groups = heads // k.shape[2]
    out = np.zeros_like(q)
    for b in range(batch):
        for n in range(heads):
            scores = q[b, :, n] @ k[b, :, n // groups].T / np.sqrt(head_dim)
            if causal:
                scores = np.where(np.tril(np.ones(scores.shape, bool)), scores, -np.inf)
            weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
            out[b, :, n] = weights / weights.sum(axis=-1, keepdims=True) @ v[b, :, n // groups]
    return out


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kv_heads, seq_len, kv_seq_len, causal", SHAPES.values(), ids=SHAPES.keys())
def test_naive_and_xla_agree_with_the_reference(dtype, kv_heads, seq_len, kv_seq_len, causal):
    p = params(batch=2, seq_len=seq_len, kv_seq_len=kv_seq_len, kv_heads=kv_heads, dtype=dtype, causal=causal)
    q, k, v = random_inputs(p, 1)
    naive, xla, ref = three_ways(q, k, v, causal=causal)
    assert naive.shape == xla.shape == ref.shape == q.shape
    assert naive.dtype == xla.dtype == jnp.dtype(dtype)
    assert rel_err(naive, ref) < TOLERANCE[dtype]
    assert rel_err(xla, ref) < TOLERANCE[dtype]
    assert rel_err(naive, xla) < 2 * TOLERANCE[dtype]


@pytest.mark.parametrize("shape", ["MHA", "GQA-causal", "GQA-T<S-causal", "MQA-T>S-causal"])
def test_reference_is_attention_by_definition(shape):
    kv_heads, seq_len, kv_seq_len, causal = SHAPES[shape]
    p = params(batch=2, seq_len=seq_len, kv_seq_len=kv_seq_len, kv_heads=kv_heads, causal=causal)
    q, k, v = random_inputs(p, 2)
    assert rel_err(reference_jit(q, k, v, causal=causal), numpy_attention(q, k, v, causal)) < 1e-6


def test_causal_mask_changes_every_row_but_the_last_when_t_equals_s():
    p = params()
    q, k, v = random_inputs(p, 3)
    diff = np.abs(np.asarray(naive_jit(q, k, v, causal=True) - naive_jit(q, k, v, causal=False))).max(axis=(0, 2, 3))
    assert (diff[:-1] > 1e-3).all()
    assert diff[-1] < 1e-6


def test_gqa_equals_mha_with_repeated_kv_heads():
    p = params(heads=4, kv_heads=2)
    q, k, v = random_inputs(p, 4)
    k_full, v_full = jnp.repeat(k, 2, axis=2), jnp.repeat(v, 2, axis=2)
    mha = reference_jit(q, k_full, v_full, causal=True)
    for out in three_ways(q, k, v, causal=True):
        assert rel_err(out, mha) < 1e-6


def test_reference_rows_with_offset_are_those_rows_of_the_whole():
    p = params(causal=True)
    q, k, v = random_inputs(p, 5)
    whole = reference_jit(q, k, v, causal=True)
    part = reference_jit(q[:, 4:7], k, v, causal=True, q_offset=4)
    np.testing.assert_allclose(part, whole[:, 4:7], rtol=1e-6, atol=1e-6)


# --- whole cells through the Measurer ---------------------------------------------------------------


@pytest.fixture(scope="module")
def measurer() -> Measurer:
    spec = parse_spec(spec_data(), set(VARIANTS))
    return Measurer(spec, [WallTimer()], "test-run", current_device())


@contextmanager
def wrong_variants():
    """Test-only variants: unscaled scores (wrong), one that raises, one that runs out of memory."""

    @variant("test_unscaled")
    def unscaled(p):
        """Forgets the 1/sqrt(H) scale."""

        def attend(q, k, v):
            groups = q.shape[2] // k.shape[2]
            k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
            weights = jax.nn.softmax(jnp.einsum("btnh,bsnh->bnts", q, k), axis=-1)
            return jnp.einsum("bnts,bsnh->btnh", weights, v)

        return attend

    @variant("test_raises")
    def raises(p):
        """Fails while tracing."""

        def attend(q, k, v):
            raise RuntimeError("boom: this variant cannot trace\nsecond line")

        return attend

    @variant("test_oom")
    def oom(p):
        """Runs out of device memory."""

        def attend(q, k, v):
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 68719476736 bytes.")

        return attend

    @variant("test_unmasked")
    def unmasked(p):
        """Ignores the causal mask."""
        return functools.partial(naive_attention, causal=False)

    @variant("test_no_dk")
    def no_dk(p):
        """Right forward, but no gradient reaches K."""
        return lambda q, k, v: naive_attention(q, jax.lax.stop_gradient(k), v, causal=p.causal)

    names = ("test_unscaled", "test_raises", "test_oom", "test_unmasked", "test_no_dk")
    try:
        yield names
    finally:
        for name in names:
            VARIANTS.pop(name, None)


@pytest.fixture
def test_variants():
    with wrong_variants() as names:
        yield names


def cell(variant_name: str, **shape) -> Cell:
    return Cell("t", variant_name, params(**shape))


@pytest.mark.parametrize("name", ["naive", "xla", "auto"])
def test_correct_cell_is_ok_and_timed(measurer, name):
    record = measurer.measure(cell(name, kv_heads=2))
    assert record.status == "ok", record.reason
    assert record.reason == ""
    assert record.correctness.rel_err < 1e-5 and record.correctness.tolerance == 2e-3
    [timing] = record.timings
    assert timing.timer == record.timer == "wall"
    assert 2 <= timing.samples <= 3
    assert record.median_s == timing.median_s > 0
    assert record.tflops == pytest.approx(record.flops / record.median_s / 1e12)
    assert record.gbps == pytest.approx(record.bytes_min / record.median_s / 1e9)
    assert record.compile_s > 0 and record.temp_bytes is not None
    assert record.backend == "xla"


def test_fwd_bwd_cell_checks_every_gradient(measurer):
    record = measurer.measure(cell("xla", kv_heads=2, causal=True, pass_="fwd_bwd"))
    assert record.status == "ok", record.reason
    assert set(record.correctness.grad_rel_err) == {"dq", "dk", "dv"}
    assert all(err < 1e-4 for err in record.correctness.grad_rel_err.values())


@pytest.mark.parametrize("name", ["naive", "xla"])
def test_causal_check_passes_for_a_correct_causal_cell(measurer, name):
    record = measurer.measure(cell(name, causal=True))
    assert record.status == "ok", record.reason
    assert record.correctness.causal_first_changed is True
    assert record.correctness.causal_last_unchanged is True


def test_causal_check_is_not_recorded_where_it_does_not_apply(measurer):
    full = measurer.measure(cell("xla"))
    short_queries = measurer.measure(cell("xla", seq_len=4, kv_seq_len=8, causal=True))  # last row is masked too
    for record in (full, short_queries):
        assert record.status == "ok", record.reason
        assert record.correctness.causal_first_changed is None
        assert record.correctness.causal_last_unchanged is None


def test_wrong_variant_is_incorrect_with_a_reason_and_no_timing(measurer, test_variants):
    record = measurer.measure(cell("test_unscaled", causal=True))
    assert record.status == "incorrect"
    assert record.reason.startswith("out relative error ")
    assert record.reason.endswith(" > tolerance 0.002")
    assert record.correctness.rel_err > 0.002
    assert record.timings == [] and record.median_s is None and record.tflops is None and record.gbps is None


def test_raising_variant_is_failed_with_its_message(measurer, test_variants):
    record = measurer.measure(cell("test_raises"))
    assert record.status == "failed"
    assert record.reason == "RuntimeError: boom: this variant cannot trace"
    assert record.timings == [] and record.correctness is None


def test_resource_exhausted_is_oom(measurer, test_variants):
    record = measurer.measure(cell("test_oom"))
    assert record.status == "oom"
    assert "RESOURCE_EXHAUSTED" in record.reason
    assert record.timings == []


def test_a_failed_cell_does_not_stop_the_next(measurer, test_variants):
    assert measurer.measure(cell("test_raises")).status == "failed"
    assert measurer.measure(cell("xla")).status == "ok"


def test_test_variants_are_removed_after_use():
    with wrong_variants() as names:
        assert set(names) <= set(VARIANTS)
    assert not set(names) & set(VARIANTS)
@pytest.mark.parametrize(
    "error, status",
    [
        (RuntimeError("XlaRuntimeError: RESOURCE_EXHAUSTED: out of HBM"), "oom"),
        (RuntimeError("CUDA error: out of memory"), "oom"),
        (MemoryError(), "oom"),
        (ValueError("shapes do not match"), "failed"),
    ],
)
def test_failure_status(error, status):
    assert failure(error)[0] == status


def test_an_oom_reason_names_the_allocation_when_its_first_line_does_not():
    """XLA's autotuner puts the allocation that failed lines below "Failed to get configs" (H200, 2026-12-04)."""
    error = RuntimeError("NOT_FOUND: Failed to get configs for: 2 out of 6 instructions. Example failure: \n%fusion = "
                         "f32[128,16384,16384]\n}. Status: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
                         "128.02GiB with allocator GPU_0_bfc on device 0.\nmore")
    status, reason = failure(error)
    assert status == "oom" and "\n" not in reason
    assert reason.startswith("RuntimeError: NOT_FOUND: Failed to get configs") and reason.endswith(
        "Out of memory while trying to allocate 128.02GiB with allocator GPU_0_bfc on device 0.")
    assert failure(RuntimeError("RESOURCE_EXHAUSTED: Out of memory, 3 GiB\nmore"))[1] == (
        "RuntimeError: RESOURCE_EXHAUSTED: Out of memory, 3 GiB")


def test_failure_reason_is_one_bounded_line():
    status, reason = failure(RuntimeError("x" * 2000 + "\nmore"))
    assert "\n" not in reason and len(reason) == 500


def test_a_variant_that_ignores_the_mask_fails_the_causal_check(measurer, test_variants):
    record = measurer.measure(cell("test_unmasked", causal=True))
    assert record.status == "incorrect" and record.reason
    assert record.correctness.causal_first_changed is False  # row 0 equals unmasked attention
    assert record.correctness.causal_last_unchanged is True
    assert record.timings == []


def test_a_wrong_gradient_is_incorrect(measurer, test_variants):
    record = measurer.measure(cell("test_no_dk", causal=True, pass_="fwd_bwd"))
    assert record.status == "incorrect"
    assert record.correctness.rel_err < 1e-5  # the forward is right
    assert record.correctness.grad_rel_err["dk"] == pytest.approx(1.0)  # dK is all zeros
    assert record.correctness.grad_rel_err["dq"] < 1e-4
    assert record.reason.startswith("dk relative error 1 > tolerance ")
    assert record.timings == [] and record.median_s is None


class ZeroTimer:
    """A device timer that saw no kernels: CUPTI's per-call sum over an empty kernel list is 0 s."""

    name = "device"

    def __call__(self, fn, args, n):
        return Samples([0.0] * n)


def test_a_zero_median_fails_the_cell_instead_of_reporting_a_rate():
    spec = parse_spec(spec_data(), set(VARIANTS))
    record = Measurer(spec, [ZeroTimer()], "test-run", current_device()).measure(cell("xla"))
    assert record.status == "failed"
    assert record.reason == "RuntimeError: the device timer measured no time for this call"
    assert record.timings == [] and record.tflops is None


@pytest.fixture
def fp8_promises():
    """Test-only variants that promise FP8 against the xla baseline: one right in bf16, one wrong."""

    @variant("test_fp8_in_name_only", fp8_baseline="xla")
    def in_name_only(p):
        """Promises FP8, computes in the input dtype."""
        return functools.partial(jax.nn.dot_product_attention, is_causal=p.causal, implementation="xla")

    @variant("test_fp8_wrong", fp8_baseline="xla")
    def wrong(p):
        """Promises FP8, returns twice the output."""
        return lambda q, k, v: 2 * jax.nn.dot_product_attention(q, k, v, is_causal=p.causal)

    yield
    for name in ("test_fp8_in_name_only", "test_fp8_wrong"):
        VARIANTS.pop(name, None)


def test_a_promise_of_fp8_without_f8_in_the_program_is_called_so(measurer, fp8_promises):
    record = measurer.measure(cell("test_fp8_in_name_only"))
    assert record.status == "ok", record.reason
    assert record.correctness.tolerance == measurer.spec.tolerances.fp8
    assert record.fp8.baseline == "xla" and record.fp8.in_hlo is False
    assert record.fp8.rel_err_vs_bf16 == 0.0
    assert record.fp8.verdict.startswith("not FP8: no f8 type in the compiled program")


def test_an_incorrect_fp8_cell_keeps_its_fp8_verdict(measurer, fp8_promises):
    record = measurer.measure(cell("test_fp8_wrong"))
    assert record.status == "incorrect" and record.timings == []
    assert record.fp8.baseline == "xla" and record.fp8.in_kernels is None
    assert record.fp8.rel_err_vs_bf16 == pytest.approx(1.0, rel=1e-3)
