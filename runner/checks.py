"""The checks of a cell's output: errors against the float32 reference, the lab's causal check, and whether FP8
reached attention. Pure functions of what they are given (the FP8 baseline's output included)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp

from runner import paging
from runner.attention import real_tokens
from runner.compiler import UNTIMED
from runner.inputs import InputsAndReference, cotangent, masks_lengths
from runner.metrics import FP8_MATMULS
from runner.programs import Compiled
from runner.record import Correctness, Fp8Info
from runner.shape import Fp8Matmul, Params

FP8_TYPE = re.compile(r"\bf8e[45]m[23]")
FP8_KERNEL = re.compile(r"f8|fp8|e4m3", re.IGNORECASE)


def as_tuple(outputs) -> tuple:
    """A forward call returns out, a fwd_bwd call (out, dq, dk, dv): make both a tuple."""
    return outputs if isinstance(outputs, tuple) else (outputs,)


def run_once(compiled: Compiled, args: tuple) -> tuple:
    """The cell's output (and gradients) in the cell's dtype."""
    return as_tuple(compiled.finish(jax.block_until_ready(compiled.program.executable(*args))))


def _errors(out, ref):
    diff = out.astype(jnp.float32) - ref
    apart, size = jnp.linalg.norm(diff), jnp.linalg.norm(ref)
    # a reference of zeros (dq and dk where each query sees one key) is met by zeros alone: 0, else inf, never 0/0
    return jnp.max(jnp.abs(diff)), jnp.where(size > 0, apart / size, jnp.where(apart == 0, 0.0, jnp.inf))


def rel_err(out, ref) -> float:
    return float(UNTIMED(_errors, out, ref)[1])


def _same_bits(a, b):
    unsigned = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}[a.dtype.itemsize]
    return jnp.array_equal(jax.lax.bitcast_convert_type(a, unsigned), jax.lax.bitcast_convert_type(b, unsigned))


def same_bits(outputs: tuple, again: tuple) -> bool:
    """Whether two calls' outputs (and gradients) are equal bit for bit (NaNs included)."""
    return all(bool(UNTIMED(_same_bits, a, b)) for a, b in zip(outputs, again, strict=True))


def check_step(p: Params, outputs: tuple, truth: InputsAndReference, tolerance: float,
               grad_tolerance: float, again: tuple | None = None) -> Correctness:
    """Errors against the float32 reference, and the lab's causal check; outputs is (out[, dq, dk, dv]), compared
    on the batch's real tokens only (what a library writes at padded positions, or past a serving cell's request
    lengths, is undefined). `again`, a second call's outputs on the same inputs (a deterministic cell's), is
    compared with them bit for bit."""
    bitwise = same_bits(outputs, again) if again is not None else None
    outputs = real_tokens(outputs, *masks_lengths(p)) if p.fill < 1 or paging.serving(p) else outputs
    max_abs, rel = (float(x) for x in UNTIMED(_errors, outputs[0], truth.expected[0]))
    grads = None
    if p.pass_ == "fwd_bwd":
        grads = {name: rel_err(g, r) for name, g, r in zip(("dq", "dk", "dv"), outputs[1:], truth.expected[1:])}
    first_changed = last_unchanged = None
    if truth.unmasked_rows is not None:
        rows = outputs[0][:, jnp.array([0, p.seq_len - 1])]
        first_changed = rel_err(rows[:, :1], truth.unmasked_rows[:, :1]) > tolerance
        last_unchanged = rel_err(rows[:, 1:], truth.unmasked_rows[:, 1:]) <= tolerance
    return Correctness(
        max_abs_err=max_abs,
        rel_err=rel,
        grad_rel_err=grads,
        cotangent=cotangent(p),
        tolerance=tolerance,
        grad_tolerance=grad_tolerance if grads else None,
        causal_first_changed=first_changed,
        causal_last_unchanged=last_unchanged,
        bitwise_repeat=bitwise,
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
    if c.bitwise_repeat is False:
        return "asked to be deterministic, a second call on the same inputs gave other bits"
    return ""


def fp8_verdict(in_hlo: bool, in_kernels: bool | None, dtype: str, baseline: str, diff: float) -> str:
    """One sentence on whether FP8 reached attention."""
    if not in_hlo:
        return (
            f"not FP8: no f8 type in the compiled program, so attention ran in {dtype} "
            f"(output differs from {baseline} by {diff:.3g})"
        )
    if in_kernels is False:
        return ("f8 types in the compiled program, but no kernel name that ran says f8 (cuDNN's names carry their "
                "data type; a Pallas kernel's, as tokamax_triton_fp8's, do not)")
    return "FP8 attention: f8 types in the compiled program" + (" and an f8 kernel ran" if in_kernels else "")


def fp8_step(baseline: str, p: Params, outputs: tuple, baseline_out, compiled: Compiled,
             kernels: list[str], matmuls: tuple[Fp8Matmul, ...] = FP8_MATMULS) -> Fp8Info:
    """Did FP8 happen? Types in the compiled program, kernel names, and distance from the baseline's output
    (`baseline_out`, the baseline variant's output on the same inputs); `matmuls`, those the variant runs on f8
    values, recorded where one is not (its MMA peak mixes the two rates, runner.metrics.mma_peak_tflops)."""
    in_hlo = bool(FP8_TYPE.search(compiled.hlo))
    in_kernels = any(FP8_KERNEL.search(k) for k in kernels) if kernels else None
    diff = rel_err(outputs[0], baseline_out.astype(jnp.float32))
    return Fp8Info(
        baseline=baseline,
        in_hlo=in_hlo,
        in_kernels=in_kernels,
        rel_err_vs_bf16=diff,
        matmuls=None if set(matmuls) == set(FP8_MATMULS) else list(matmuls),
        verdict=fp8_verdict(in_hlo, in_kernels, p.dtype, baseline, diff),
    )
