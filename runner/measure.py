"""One cell, measured: build, compile, inspect, check against float32, time, summarise."""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from runner import metrics
from runner.attention import reference_attention
from runner.cells import Cell
from runner.record import CellRecord, Correctness, Fp8Info, Params, utc_now
from runner.registry import VARIANTS, Staged, Variant
from runner.spec import Spec
from runner.timers import Timer, sample

REFERENCE_CHUNK_BYTES = 2 << 30  # float32 scores of one reference chunk
CUSTOM_CALL = re.compile(r'custom_call_target="([^"]+)"')
FP8_TYPE = re.compile(r"\bf8e[45]m[23]")
FP8_KERNEL = re.compile(r"f8|fp8|e4m3", re.IGNORECASE)


@dataclass
class Problem:
    """Inputs of one shape and the float32 truth for them."""

    args: tuple  # q, k, v (and the output cotangent under fwd_bwd)
    ref: tuple  # out (and dq, dk, dv under fwd_bwd), float32
    unmasked_rows: jax.Array | None  # causal: rows 0 and T-1 of unmasked attention


def make_inputs(p: Params, seed: int) -> tuple:
    """Seeded normal Q, K, V (and dO) in the cell's dtype."""
    keys = jax.random.split(jax.random.PRNGKey(seed), 4)
    dtype = jnp.dtype(p.dtype)
    shapes = [(p.batch, p.seq_len, p.heads, p.head_dim)] + [(p.batch, p.kv_seq_len, p.kv_heads, p.head_dim)] * 2
    if p.pass_ == "fwd_bwd":
        shapes.append(shapes[0])
    return tuple(jax.random.normal(key, shape, jnp.float32).astype(dtype) for key, shape in zip(keys, shapes))


@functools.partial(jax.jit, static_argnames=("causal", "with_grads"))
def _reference_chunk(q, k, v, dout, q_offset, causal: bool, with_grads: bool):
    attend = functools.partial(reference_attention, causal=causal, q_offset=q_offset)
    if not with_grads:
        return (attend(q, k, v),)
    out, vjp = jax.vjp(attend, q, k, v)
    return (out, *vjp(dout.astype(jnp.float32)))


def reference(p: Params, args: tuple) -> tuple:
    """float32 output (and gradients), computed a block of query rows at a time to bound memory."""
    q, k, v = args[:3]
    dout = args[3] if len(args) > 3 else jnp.zeros((), jnp.float32)
    with_grads = p.pass_ == "fwd_bwd"
    row_bytes = p.batch * p.heads * p.kv_seq_len * 4 * (3 if with_grads else 1)
    rows = max(1, min(p.seq_len, REFERENCE_CHUNK_BYTES // row_bytes))
    outs, grads_q, grad_k, grad_v = [], [], 0.0, 0.0
    for start in range(0, p.seq_len, rows):
        chunk = slice(start, start + rows)
        d_chunk = dout[:, chunk] if with_grads else dout
        parts = _reference_chunk(q[:, chunk], k, v, d_chunk, start, p.causal, with_grads)
        outs.append(parts[0])
        if with_grads:
            grads_q.append(parts[1])
            grad_k, grad_v = grad_k + parts[2], grad_v + parts[3]
    out = jnp.concatenate(outs, axis=1)
    return (out, jnp.concatenate(grads_q, axis=1), grad_k, grad_v) if with_grads else (out,)


def make_problem(p: Params, seed: int) -> Problem:
    args = make_inputs(p, seed)
    ref = reference(p, args)
    unmasked = None
    if p.causal and p.seq_len >= p.kv_seq_len > 1:
        rows = jnp.array([0, p.seq_len - 1])
        unmasked = reference_attention(args[0][:, rows], args[1], args[2], causal=False)
    return Problem(args, ref, unmasked)


@jax.jit
def _errors(out, ref):
    diff = out.astype(jnp.float32) - ref
    return jnp.max(jnp.abs(diff)), jnp.linalg.norm(diff) / jnp.linalg.norm(ref)


def rel_err(out, ref) -> float:
    return float(_errors(out, ref)[1])


def with_grads(attend):
    """fwd_bwd: the output and dq, dk, dv for a given output cotangent."""

    def forward_backward(q, k, v, dout):
        out, vjp = jax.vjp(attend, q, k, v)
        return (out, *vjp(dout))

    return forward_backward


@dataclass
class Prepared:
    """A variant made ready for one cell: the compiled timed call, its arguments, and how to read its output."""

    compiled: object
    args: tuple
    finish: object  # compiled output -> output (and grads) comparable with the reference
    compile_s: float


def prepare(variant: Variant, p: Params, inputs: tuple) -> Prepared:
    """Build the variant, convert inputs if it is staged, then jit, lower and compile the timed call."""
    built = variant.build(p)
    staged = built if isinstance(built, Staged) else None
    fn = staged.attend if staged else built
    fn = with_grads(fn) if p.pass_ == "fwd_bwd" else fn
    args = jax.block_until_ready(jax.jit(staged.prepare)(*inputs[:3])) if staged else inputs
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return Prepared(compiled, args, staged.finish if staged else (lambda out: out), time.perf_counter() - start)


def backend_of(custom_calls: list[str]) -> str:
    if any(c.startswith("__cudnn$fmha") for c in custom_calls):
        return "cudnn"
    if any("te_fused_attn" in c for c in custom_calls):
        return "transformer_engine"
    return "xla"


def check(p: Params, outputs, problem: Problem, tolerance: float, grad_tolerance: float) -> Correctness:
    """Errors against the float32 reference, and the lab's causal check; outputs is (out[, dq, dk, dv])."""
    max_abs, rel = (float(x) for x in _errors(outputs[0], problem.ref[0]))
    grads = None
    if p.pass_ == "fwd_bwd":
        grads = {name: rel_err(g, r) for name, g, r in zip(("dq", "dk", "dv"), outputs[1:], problem.ref[1:])}
    first_changed = last_unchanged = None
    if problem.unmasked_rows is not None:
        rows = outputs[0][:, jnp.array([0, p.seq_len - 1])]
        first_changed = rel_err(rows[:, :1], problem.unmasked_rows[:, :1]) > tolerance
        last_unchanged = rel_err(rows[:, 1:], problem.unmasked_rows[:, 1:]) <= tolerance
    return Correctness(
        max_abs_err=max_abs,
        rel_err=rel,
        grad_rel_err=grads,
        tolerance=tolerance,
        grad_tolerance=grad_tolerance if grads else None,
        causal_first_changed=first_changed,
        causal_last_unchanged=last_unchanged,
    )


def incorrect_reason(c: Correctness) -> str:
    """Why a correctness result fails, or '' when it passes."""
    errors = {"out": (c.rel_err, c.tolerance)}
    errors.update({name: (err, c.grad_tolerance) for name, err in (c.grad_rel_err or {}).items()})
    bad = {name: (err, tol) for name, (err, tol) in errors.items() if not err <= tol}  # NaN counts as bad
    if bad:
        return "; ".join(f"{name} relative error {err:.3g} > tolerance {tol:g}" for name, (err, tol) in bad.items())
    if c.causal_first_changed is False or c.causal_last_unchanged is False:
        return "causal check failed: row 0 must change under the mask and the last row must not"
    return ""


def as_tuple(outputs) -> tuple:
    """A forward call returns out, a fwd_bwd call (out, dq, dk, dv): make both a tuple."""
    return outputs if isinstance(outputs, tuple) else (outputs,)


def fp8_verdict(in_hlo: bool, in_kernels: bool | None, dtype: str, baseline: str, diff: float) -> str:
    """One sentence on whether FP8 reached attention."""
    if not in_hlo:
        return (
            f"not FP8: no f8 type in the compiled program, so attention ran in {dtype} "
            f"(output differs from {baseline} by {diff:.3g})"
        )
    if in_kernels is False:
        return "f8 types in the compiled program, but no kernel that ran is an f8 kernel"
    return "FP8 attention: f8 types in the compiled program" + (" and an f8 kernel ran" if in_kernels else "")


def fp8_info(variant: Variant, p: Params, problem: Problem, outputs: tuple, hlo: str, kernels: list[str]) -> Fp8Info:
    """Did FP8 happen? Types in the compiled program, kernel names, and distance from the bf16 baseline."""
    in_hlo = bool(FP8_TYPE.search(hlo))
    in_kernels = any(FP8_KERNEL.search(k) for k in kernels) if kernels else None
    baseline = prepare(VARIANTS[variant.fp8_baseline], p, problem.args)
    base_out = as_tuple(baseline.finish(baseline.compiled(*baseline.args)))
    diff = rel_err(outputs[0], base_out[0].astype(jnp.float32))
    return Fp8Info(
        baseline=variant.fp8_baseline,
        in_hlo=in_hlo,
        in_kernels=in_kernels,
        rel_err_vs_bf16=diff,
        verdict=fp8_verdict(in_hlo, in_kernels, p.dtype, variant.fp8_baseline, diff),
    )


def failure(error: BaseException) -> tuple[str, str]:
    """(status, reason) for an exception raised while compiling or running."""
    text = f"{type(error).__name__}: {str(error).strip()}"
    first = text.splitlines()[0][:500]
    oom = "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower() or isinstance(error, MemoryError)
    return ("oom" if oom else "failed"), first


class Measurer:
    """Measures cells of one spec, reusing inputs and the reference across variants of a shape."""

    def __init__(self, spec: Spec, timers: list[Timer], run_id: str, peak_tflops: float | None = None):
        self.spec, self.timers, self.run_id, self.peak = spec, timers, run_id, peak_tflops
        self._problem: tuple[Params, Problem] | None = None

    def problem(self, p: Params) -> Problem:
        if self._problem is None or self._problem[0] != p:
            self._problem = None  # free the previous shape's arrays first
            self._problem = (p, make_problem(p, self.spec.seed))
        return self._problem[1]

    def skipped(self, cell: Cell, reason: str) -> CellRecord:
        return self._record(cell, utc_now(), time.perf_counter(), status="skipped", reason=reason)

    def measure(self, cell: Cell) -> CellRecord:
        """Run one cell; never raises for a failure of the variant or the device."""
        started, clock = utc_now(), time.perf_counter()
        try:
            problem = self.problem(cell.params)
        except Exception as error:  # the reference itself did not fit or failed
            status, reason = failure(error)
            return self._record(cell, started, clock, status=status, reason=f"float32 reference: {reason}")
        fields: dict = {}
        try:
            self._measure(cell, problem, fields)
        except Exception as error:
            fields["status"], fields["reason"] = failure(error)
        return self._record(cell, started, clock, **fields)

    def _measure(self, cell: Cell, problem: Problem, fields: dict) -> None:
        variant, p = VARIANTS[cell.variant], cell.params
        prepared = prepare(variant, p, problem.args)
        compiled, fields["compile_s"] = prepared.compiled, prepared.compile_s
        memory = compiled.memory_analysis()
        fields["temp_bytes"] = int(memory.temp_size_in_bytes) if memory is not None else None
        hlo = compiled.as_text()
        fields["custom_calls"] = sorted(set(CUSTOM_CALL.findall(hlo)))
        fields["backend"] = backend_of(fields["custom_calls"])
        outputs = as_tuple(prepared.finish(jax.block_until_ready(compiled(*prepared.args))))
        tolerances = self.spec.tolerances
        tolerance = getattr(tolerances, "fp8" if variant.fp8_baseline else p.dtype)
        correctness = check(p, outputs, problem, tolerance, tolerance * tolerances.gradient_factor)
        fields["correctness"] = correctness
        if reason := incorrect_reason(correctness):
            fields["status"], fields["reason"] = "incorrect", reason
            if variant.fp8_baseline:
                fields["fp8"] = fp8_info(variant, p, problem, outputs, hlo, [])
            return
        timings = [sample(timer, compiled, prepared.args, self.spec.timing) for timer in self.timers]
        if zero := [t.timer for t in timings if t.median_s <= 0]:
            raise RuntimeError(f"the {', '.join(zero)} timer measured no time for this call")
        fields["timings"] = timings
        fields["kernels"] = list(dict.fromkeys(k for timer in self.timers for k in getattr(timer, "kernels", ())))
        if variant.fp8_baseline:
            fields["fp8"] = fp8_info(variant, p, problem, outputs, hlo, fields["kernels"])
        fields["status"] = "ok"

    def _record(self, cell: Cell, started: str, clock: float, **fields) -> CellRecord:
        p = cell.params
        timings = fields.get("timings", [])
        # device time is what the kernels took; wall time only where there is no device timer
        primary = next((t for t in timings if t.timer == "device"), timings[0] if timings else None)
        flops, traffic = metrics.flops(p), metrics.bytes_min(p)
        tflops = flops / primary.median_s / 1e12 if primary else None
        return CellRecord(
            key=cell.key,
            run_id=self.run_id,
            experiment=cell.experiment,
            variant=cell.variant,
            params=p,
            started_at=started,
            duration_s=time.perf_counter() - clock,
            timer=primary.timer if primary else None,
            median_s=primary.median_s if primary else None,
            flops=flops,
            bytes_min=traffic,
            kv_cache_bytes=metrics.kv_cache_bytes(p),
            tflops=tflops,
            gbps=traffic / primary.median_s / 1e9 if primary else None,
            pct_of_peak=100 * tflops / self.peak if tflops and self.peak else None,
            **fields,
        )
