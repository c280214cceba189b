"""The timed program of a cell: a variant built, lowered and compiled for the cell's input shapes (or tuned: each
of its configurations compiled and briefly timed, the fastest kept)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp

from runner.compiler import UNTIMED, Program, compile_timed
from runner.inputs import input_shapes
from runner.record import Candidate, Tuning
from runner.shape import Params
from runner.registry import Skip, Staged, Tuned, backend_of
from runner.timers import Limits, Timer, sample

CUSTOM_CALL = re.compile(r'custom_call_target="([^"]+)"')
TUNE_LIMITS = Limits(warmup=1, min_samples=3, max_samples=5, target_noise=1.0, budget_s=0.5)


@dataclass(frozen=True)
class Compiled:
    """A variant made ready for one cell: the timed program, how to make its arguments from the cell's inputs,
    and how to read its output. Compiling needs only the inputs' shapes, so it can happen ahead of them."""

    program: Program
    prepare: Callable | None  # (q, k, v[, dout]) -> the timed call's arguments (FP8 tensors and scales, or the
    # inputs placed across devices); None: the inputs
    finish: Callable  # compiled output -> output (and grads) comparable with the reference
    custom_calls: list[str]
    temp_bytes: int | None
    hlo: str
    twin: Callable | None = None  # the timed call without collectives (Staged.twin), uncompiled

    @property
    def backend(self) -> str:
        return backend_of(self.custom_calls)

    def arguments(self, inputs: tuple) -> tuple:
        """The timed call's arguments for these inputs (staged, untimed, where the variant asks)."""
        return jax.block_until_ready(UNTIMED(self.prepare, *inputs)) if self.prepare else inputs


def with_grads(attend: Callable) -> Callable:
    """fwd_bwd: the output and dq, dk, dv for a given output cotangent."""

    def forward_backward(q, k, v, dout):
        out, vjp = jax.vjp(attend, q, k, v)
        return (out, *vjp(dout))

    return forward_backward


def input_avals(p: Params) -> tuple:
    """Shapes and dtype of the cell's inputs: all that lowering needs."""
    return tuple(jax.ShapeDtypeStruct(s, jnp.dtype(p.dtype)) for s in input_shapes(p))


def timed_fn(built, p: Params) -> tuple[Staged | None, Callable, tuple]:
    """The timed call of a built variant, and the shapes it is lowered for (the staged arguments' where it stages)."""
    staged = built if isinstance(built, Staged) else None
    fn = staged.attend if staged else built
    fn = with_grads(fn) if p.pass_ == "fwd_bwd" else fn
    avals = input_avals(p)
    return staged, fn, (jax.eval_shape(staged.prepare, *avals) if staged else avals)


def compiled_from(program: Program, staged: Staged | None) -> Compiled:
    memory = program.executable.memory_analysis()
    hlo = program.executable.as_text()
    return Compiled(
        program=program,
        prepare=staged.prepare if staged else None,
        finish=staged.finish if staged else (lambda out: out),
        custom_calls=sorted(set(CUSTOM_CALL.findall(hlo))),
        temp_bytes=int(memory.temp_size_in_bytes) if memory is not None else None,
        hlo=hlo,
        twin=staged.twin if staged else None,
    )


def compile_step(name: str, built, p: Params, shared: dict) -> Compiled:
    """Lower and compile the timed call for the cell's input shapes (or reuse an identical executable)."""
    staged, fn, args = timed_fn(built, p)
    program = compile_timed(fn, args, shared)
    shared.setdefault(program.fingerprint, (name, program))  # a reused program keeps its owner
    return compiled_from(program, staged)


def first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error).strip()}".splitlines()[0][:500]


def tune_step(name: str, tuned: Tuned, p: Params, inputs: tuple, timer: Timer) -> tuple[Compiled, Tuning]:
    """Compile and briefly time every configuration; the fastest is the cell's program. A configuration that does
    not compile here (too much shared memory, say) is skipped with its error; when none does, the cell is."""
    candidates, best = [], None
    for config in tuned.configs:
        try:
            compiled = compile_step(name, tuned.build(config), p, {})
            args = compiled.arguments(inputs)
            median = sample(timer, compiled.program.executable, args, TUNE_LIMITS).summary.median_s
        except Skip as reason:
            candidates.append(Candidate(config=config, status="skipped", reason=str(reason)))
            continue
        except Exception as error:  # this configuration cannot run this shape
            candidates.append(Candidate(config=config, status="skipped", reason=first_line(error)))
            continue
        candidates.append(Candidate(config=config, status="ok", median_s=median))
        if best is None or median < best[1]:
            best = (compiled, median, config)
    if best is None:
        reasons = "; ".join(f"{c.config}: {c.reason}" for c in candidates[:3])
        raise Skip(f"{name}: none of its {len(candidates)} configurations runs this shape ({reasons})")
    return best[0], Tuning(config=best[2], candidates=candidates)
