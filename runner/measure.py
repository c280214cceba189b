"""One cell, measured, as steps that each return what they made:

inputs and float32 reference (once per shape) -> build (a variant may Skip) -> compile (or tune: search the
variant's configurations) -> check against the reference -> FP8 evidence -> power state -> timers.
The Measurer runs the steps for a cell, keeps the seconds each took, and assembles the record from what the
steps returned.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import jax
import jax.numpy as jnp

from runner import metrics, power
from runner import diagnose, masks
from runner.attention import Logits, real_tokens, reference_attention
from runner.cells import Cell
from runner.compiler import UNTIMED, Program, compile_lowered, compile_timed, lower_timed, shared_program
from runner.machine import Device
from runner.record import (CellRecord, Correctness, Fp8Info, Machine, Params, PowerState, Telemetry, Tuning,
                           Candidate, utc_now)
from runner.registry import VARIANTS, Skip, Staged, Tuned, Variant, backend_of, decline
from runner.spec import Spec, TimingSettings
from runner.timers import Limits, Sampled, Timer, limits, sample

REFERENCE_CHUNK_BYTES = 2 << 30  # float32 scores of one reference chunk
KEY_BUCKETS = 4  # causal reference chunks see 1/4, 2/4, 3/4 or all of the keys
CUSTOM_CALL = re.compile(r'custom_call_target="([^"]+)"')
FP8_TYPE = re.compile(r"\bf8e[45]m[23]")
FP8_KERNEL = re.compile(r"f8|fp8|e4m3", re.IGNORECASE)
COMPILE_THREADS = min(8, os.cpu_count() or 1)  # programs compiled side by side ahead of their cells
SHARED_SHAPES = 32  # shapes whose executables are kept for variants that compile to the same program
TUNE_LIMITS = Limits(warmup=1, min_samples=3, max_samples=5, target_noise=1.0, budget_s=0.5)


class Stopwatch:
    """Seconds per phase of one cell."""

    def __init__(self):
        self.phases: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start


# --- inputs and the float32 truth ------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputsAndReference:
    """One shape's inputs and the float32 results every variant is checked against."""

    args: tuple  # q, k, v (and the output cotangent under fwd_bwd)
    expected: tuple  # out (and dq, dk, dv under fwd_bwd), float32
    unmasked_rows: jax.Array | None  # causal: rows 0 and T-1 of unmasked attention


def input_shapes(p: Params) -> list[tuple[int, ...]]:
    """q, k, v (and dO under fwd_bwd); V and dO are v_head_dim wide."""
    q, k = (p.batch, p.seq_len, p.heads, p.head_dim), (p.batch, p.kv_seq_len, p.kv_heads, p.head_dim)
    v, out = k[:3] + (p.v_head_dim,), q[:3] + (p.v_head_dim,)
    return [q, k, v] + ([out] if p.pass_ == "fwd_bwd" else [])


def draw_size(shape: tuple) -> int:
    """The power of two at or above a tensor's element count: the flat draw its normals are cut from."""
    return 1 << max(0, math.prod(shape) - 1).bit_length()


def _normal(key, size: int):
    return jax.random.normal(key, (size,), jnp.float32)


def _cut(flat, shape: tuple, dtype: str):
    return flat[: math.prod(shape)].reshape(shape).astype(jnp.dtype(dtype))


def make_inputs(p: Params, seed: int) -> tuple:
    """Seeded normal Q, K, V (and dO) in the cell's dtype.

    Each tensor is cut from a flat float32 draw whose size is a power of two, so shapes share the random-number
    program (threefry compiles in ~0.6 s on a CPU, and a spec has a dozen shapes); the values are those of
    `jax.random.normal(key, shape)`, because partitionable threefry numbers its draws by flat index."""
    keys = jax.random.split(jax.random.PRNGKey(seed), 4)
    return tuple(UNTIMED(_cut, UNTIMED(_normal, key, size=draw_size(shape)), shape=shape, dtype=p.dtype)
                 for key, shape in zip(keys, input_shapes(p)))


def _reference_chunk(q, k, v, dout, q_offset, *lengths, logits: Logits, with_grads: bool):
    q_lengths, kv_lengths = lengths or (None, None)  # none: no padding
    attend = functools.partial(reference_attention, causal=logits.causal, q_offset=q_offset, logits=logits,
                               q_lengths=q_lengths, kv_lengths=kv_lengths)
    if not with_grads:
        return (attend(q, k, v),)
    out, vjp = jax.vjp(attend, q, k, v)
    return (out, *vjp(dout.astype(jnp.float32)))


def _visible_keys(p: Params, end: int) -> int:
    """Causal: the keys query rows before `end` can see, rounded up to a quarter of S (so a shape compiles at most
    KEY_BUCKETS chunk programs); without a mask, all of them."""
    if not p.causal:
        return p.kv_seq_len
    bucket = -(-p.kv_seq_len // KEY_BUCKETS)
    return min(p.kv_seq_len, -(-end // bucket) * bucket)


def reference(p: Params, args: tuple) -> tuple:
    """float32 output (and gradients), computed a block of query rows at a time to bound memory; under a causal
    mask a block skips the keys no row of it can see (about a third of the work at long T)."""
    q, k, v = args[:3]
    dout = args[3] if len(args) > 3 else jnp.zeros((), jnp.float32)
    with_grads = p.pass_ == "fwd_bwd"
    lengths = masks_lengths(p) if p.fill < 1 else ()
    row_bytes = p.batch * p.heads * p.kv_seq_len * 4 * (3 if with_grads else 1)
    rows = max(1, min(p.seq_len, REFERENCE_CHUNK_BYTES // row_bytes))
    outs, grads_q, grad_k, grad_v = [], [], 0.0, 0.0
    for start in range(0, p.seq_len, rows):
        chunk, keys = slice(start, start + rows), _visible_keys(p, min(p.seq_len, start + rows))
        d_chunk = dout[:, chunk] if with_grads else dout
        parts = UNTIMED(_reference_chunk, q[:, chunk], k[:, :keys], v[:, :keys], d_chunk, jnp.int32(start),
                        *lengths, logits=Logits.of(p), with_grads=with_grads)
        outs.append(parts[0])
        if with_grads:
            grads_q.append(parts[1])
            pad = ((0, 0), (0, p.kv_seq_len - keys), (0, 0), (0, 0))
            grad_k, grad_v = grad_k + jnp.pad(parts[2], pad), grad_v + jnp.pad(parts[3], pad)
    out = jnp.concatenate(outs, axis=1)
    return (out, jnp.concatenate(grads_q, axis=1), grad_k, grad_v) if with_grads else (out,)


def masks_lengths(p: Params) -> tuple:
    """The reference's query and key/value lengths: the padded batch's (runner.masks.lengths), else full ones."""
    q_lengths, kv_lengths = masks.padded_lengths(p) or ([p.seq_len] * p.batch, [p.kv_seq_len] * p.batch)
    return jnp.asarray(q_lengths, jnp.int32), jnp.asarray(kv_lengths, jnp.int32)


def unmasked_rows(p: Params, args: tuple) -> jax.Array | None:
    """Plain causal cells (no window, no padding): rows 0 and T-1 of attention without the mask (the same cap and
    bias), for the lab's first/last row check."""
    if not (p.causal and p.seq_len >= p.kv_seq_len > 1) or p.window is not None or p.fill < 1 or p.bias != "none":
        return None
    rows = jnp.array([0, p.seq_len - 1])
    logits = dataclasses.replace(Logits.of(p), causal=False)
    return UNTIMED(reference_attention, args[0][:, rows], args[1], args[2], causal=False, logits=logits)


def _size(count: int) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.1f} {unit}" if unit != "B" else f"{count} B"
        count /= 1024


def needed_bytes(p: Params) -> int:
    """Device memory for a shape's inputs and float32 reference: the inputs, then the larger of the float32 results
    with one reference chunk (its scores plus the float32 copies of K and V it makes) and the inputs' flat draw."""
    q, kv = metrics.tensor_bytes(p)
    f32 = 4 // metrics.ITEMSIZE[p.dtype]
    inputs = 2 * q + 2 * kv if p.pass_ == "fwd_bwd" else q + 2 * kv
    expected = (2 * q + 2 * kv) * f32 if p.pass_ == "fwd_bwd" else q * f32
    chunk = min(REFERENCE_CHUNK_BYTES, p.batch * p.heads * p.seq_len * p.kv_seq_len * 4) + 2 * kv * f32
    draw = 4 * max(draw_size(shape) for shape in input_shapes(p))  # while the inputs are made
    return inputs + max(expected + chunk, draw)


# --- compile, check, FP8 evidence ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Compiled:
    """A variant made ready for one cell: the timed program, how to make its arguments from the cell's inputs,
    and how to read its output. Compiling needs only the inputs' shapes, so it can happen ahead of them."""

    program: Program
    prepare: Callable | None  # (q, k, v) -> the timed call's arguments (FP8 tensors and scales); None: the inputs
    finish: Callable  # compiled output -> output (and grads) comparable with the reference
    custom_calls: list[str]
    temp_bytes: int | None
    hlo: str

    @property
    def backend(self) -> str:
        return backend_of(self.custom_calls)

    def arguments(self, inputs: tuple) -> tuple:
        """The timed call's arguments for these inputs (staged, untimed, where the variant asks)."""
        return jax.block_until_ready(UNTIMED(self.prepare, *inputs[:3])) if self.prepare else inputs


def with_grads(attend: Callable) -> Callable:
    """fwd_bwd: the output and dq, dk, dv for a given output cotangent."""

    def forward_backward(q, k, v, dout):
        out, vjp = jax.vjp(attend, q, k, v)
        return (out, *vjp(dout))

    return forward_backward


def input_avals(p: Params) -> tuple:
    """Shapes and dtype of the cell's inputs: all that lowering needs."""
    return tuple(jax.ShapeDtypeStruct(s, jnp.dtype(p.dtype)) for s in input_shapes(p))


def _timed_fn(built, p: Params) -> tuple[Staged | None, Callable, tuple]:
    """The timed call of a built variant, and the shapes it is lowered for (the staged arguments' where it stages)."""
    staged = built if isinstance(built, Staged) else None
    fn = staged.attend if staged else built
    fn = with_grads(fn) if p.pass_ == "fwd_bwd" else fn
    avals = input_avals(p)
    return staged, fn, (jax.eval_shape(staged.prepare, *avals[:3]) if staged else avals)


def _compiled(program: Program, staged: Staged | None) -> Compiled:
    memory = program.executable.memory_analysis()
    hlo = program.executable.as_text()
    return Compiled(
        program=program,
        prepare=staged.prepare if staged else None,
        finish=staged.finish if staged else (lambda out: out),
        custom_calls=sorted(set(CUSTOM_CALL.findall(hlo))),
        temp_bytes=int(memory.temp_size_in_bytes) if memory is not None else None,
        hlo=hlo,
    )


def compile_step(name: str, built, p: Params, shared: dict) -> Compiled:
    """Lower and compile the timed call for the cell's input shapes (or reuse an identical executable)."""
    staged, fn, args = _timed_fn(built, p)
    return _compiled(compile_timed(fn, args, shared, name), staged)


def untimed_programs(p: Params, seed: int) -> list[tuple]:
    """The untimed programs a shape's inputs and reference compile that are not compiled yet (UNTIMED.warm's
    arguments): found by tracing make_inputs, reference and unmasked_rows themselves, so the list cannot drift."""
    found: list[tuple] = []

    def truth():
        args = make_inputs(p, seed)
        return reference(p, args), unmasked_rows(p, args)

    with UNTIMED.recording(found):
        jax.eval_shape(truth)
    return found


def as_tuple(outputs) -> tuple:
    """A forward call returns out, a fwd_bwd call (out, dq, dk, dv): make both a tuple."""
    return outputs if isinstance(outputs, tuple) else (outputs,)


def run_once(compiled: Compiled, args: tuple) -> tuple:
    """The cell's output (and gradients) in the cell's dtype."""
    return as_tuple(compiled.finish(jax.block_until_ready(compiled.program.executable(*args))))


def _errors(out, ref):
    diff = out.astype(jnp.float32) - ref
    return jnp.max(jnp.abs(diff)), jnp.linalg.norm(diff) / jnp.linalg.norm(ref)


def rel_err(out, ref) -> float:
    return float(UNTIMED(_errors, out, ref)[1])


def check_step(p: Params, outputs: tuple, truth: InputsAndReference, tolerance: float,
               grad_tolerance: float) -> Correctness:
    """Errors against the float32 reference, and the lab's causal check; outputs is (out[, dq, dk, dv]), compared
    on the batch's real tokens only (what a library writes at padded positions is undefined)."""
    outputs = real_tokens(outputs, *masks_lengths(p)) if p.fill < 1 else outputs
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


def fp8_step(variant: Variant, p: Params, truth: InputsAndReference, outputs: tuple, compiled: Compiled,
             kernels: list[str], shared: dict) -> Fp8Info:
    """Did FP8 happen? Types in the compiled program, kernel names, and distance from the bf16 baseline."""
    in_hlo = bool(FP8_TYPE.search(compiled.hlo))
    in_kernels = any(FP8_KERNEL.search(k) for k in kernels) if kernels else None
    baseline_name = variant.fp8_baseline
    baseline = compile_step(baseline_name, VARIANTS[baseline_name].build(p), p, shared)
    diff = rel_err(outputs[0], run_once(baseline, baseline.arguments(truth.args))[0].astype(jnp.float32))
    return Fp8Info(
        baseline=baseline_name,
        in_hlo=in_hlo,
        in_kernels=in_kernels,
        rel_err_vs_bf16=diff,
        verdict=fp8_verdict(in_hlo, in_kernels, p.dtype, baseline_name, diff),
    )


def _first_line(error: BaseException) -> str:
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
            candidates.append(Candidate(config=config, status="skipped", reason=_first_line(error)))
            continue
        candidates.append(Candidate(config=config, status="ok", median_s=median))
        if best is None or median < best[1]:
            best = (compiled, median, config)
    if best is None:
        reasons = "; ".join(f"{c.config}: {c.reason}" for c in candidates[:3])
        raise Skip(f"{name}: none of its {len(candidates)} configurations runs this shape ({reasons})")
    return best[0], Tuning(config=best[2], candidates=candidates)


# --- power state and timers ------------------------------------------------------------------------------------


@dataclass
class PowerEnv:
    """What the power policy needs: a telemetry source (None off NVIDIA GPUs, with why) and the idle state."""

    source: power.Source | None = None
    reason: str | None = "no NVIDIA GPU: clocks and power are not observable"
    idle: power.Idle | None = None


@dataclass(frozen=True)
class Timed:
    """What the timers made: one Sampled per timer (headline first), and the GPU's state while the headline sampled."""

    sampled: list[Sampled]
    power: PowerState | None = None
    telemetry: Telemetry | None = None

    @property
    def kernels(self) -> list[str]:
        return next((s.kernels for s in self.sampled if s.kernels), [])


def _back_to_back(fn: Callable, args: tuple) -> Callable[[], None]:
    """Enough calls to keep the GPU busy for ~50 ms, then wait for them."""
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    calls = max(1, min(1000, int(0.05 / max(time.perf_counter() - start, 1e-6))))

    def run() -> None:
        for _ in range(calls - 1):
            fn(*args)
        jax.block_until_ready(fn(*args))

    return run


def time_step(timers: list[Timer], fn: Callable, args: tuple, settings: TimingSettings, env: PowerEnv,
              watch: Stopwatch, ran_s: float | None = None) -> Timed:
    """Bring the GPU to the spec's power state, sample the headline timer under telemetry, then the others (ran_s:
    the seconds of the untimed call made just before, which may stand in for a slow call's warm-up)."""
    headline = timers[0].name
    state, telemetry = None, None
    if env.source is not None:
        with watch.phase("settle"):
            if settings.power == "steady":
                state = power.settle(_back_to_back(fn, args), env.source, settings.settle_max_s)
            else:
                state = power.cool(env.source, env.idle or power.Idle(None, None), settings.settle_max_s)
    sampled = []
    for timer in timers:
        limit = limits(timer.name, headline, settings)
        if settings.power == "burst" and timer.name == headline:
            limit = Limits(limit.warmup, limit.min_samples, limit.min_samples, limit.target_noise, limit.budget_s)
        with watch.phase(timer.name):
            if timer.name == headline and env.source is not None:
                with power.Recorder(env.source) as recorder:
                    sampled.append(sample(timer, fn, args, limit, ran_s=ran_s))
                telemetry = power.summarise(recorder.readings, env.source.power_limit_w)
            else:
                sampled.append(sample(timer, fn, args, limit, ran_s=ran_s))
    return Timed(sampled, state, telemetry)


def failure(error: BaseException) -> tuple[str, str]:
    """(status, reason) for an exception raised while compiling or running."""
    text = f"{type(error).__name__}: {str(error).strip()}"
    oom = "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower() or isinstance(error, MemoryError)
    return ("oom" if oom else "failed"), _first_line(error)


# --- one cell --------------------------------------------------------------------------------------------------


@dataclass
class Begun:
    """A cell started ahead of its turn: its clock, the phases so far, and the program or the error it met."""

    key: str
    started_at: str
    clock: float
    watch: Stopwatch
    compiled: Compiled | None = None
    error: Exception | None = None


@dataclass
class Measurer:
    """Measures cells of one spec, reusing inputs, the reference and identical executables across a shape's variants.

    `begin(cell)` starts the next cell early (its inputs, reference and program) while the supervisor is still
    storing the previous record; it runs in the same thread, between cells, so it never overlaps a timed window
    (XLA's autotuner launches kernels while it compiles, and CUPTI would count them).
    """

    spec: Spec
    timers: list[Timer]
    run_id: str
    device: Device
    machine: Machine | None = None
    power_env: PowerEnv = field(default_factory=PowerEnv)
    _begun: Begun | None = None
    _truth: tuple[Params, InputsAndReference] | None = None
    _shared: OrderedDict[Params, dict] = field(default_factory=OrderedDict)
    _probed: dict[str, str | None] = field(default_factory=dict)
    _ready: dict[str, Compiled | Exception] = field(default_factory=dict)  # compiled ahead, by cell key
    _tried: set[str] = field(default_factory=set)  # cells a batch compiled (or tried to) already

    def truth(self, p: Params, watch: Stopwatch) -> InputsAndReference:
        """The shape's inputs and float32 results, made once per shape."""
        if self._truth is None or self._truth[0] != p:
            self._truth = None  # free the previous shape's arrays first
            if self.device.memory_bytes and (needed := needed_bytes(p)) > self.device.memory_bytes:
                raise Skip(f"inputs and float32 reference need {_size(needed)}; the device has "
                           f"{_size(self.device.memory_bytes)}")
            with watch.phase("inputs"):
                args = jax.block_until_ready(make_inputs(p, self.spec.seed))
            with watch.phase("reference"):
                truth = InputsAndReference(args, jax.block_until_ready(reference(p, args)), unmasked_rows(p, args))
            self._truth = (p, truth)
        return self._truth[1]

    def shared(self, p: Params) -> dict:
        """Fingerprint -> (variant, program) for this shape's executables (the last SHARED_SHAPES shapes are kept)."""
        if p not in self._shared:
            self._shared[p] = {}
            while len(self._shared) > SHARED_SHAPES:
                self._shared.popitem(last=False)
        self._shared.move_to_end(p)
        return self._shared[p]

    def precompile(self, cells: list[Cell], watch: Stopwatch) -> None:
        """Compile the timed programs of these cells, and the untimed ones of their shapes' inputs and references,
        in threads (XLA compiles without holding the GIL; see _compile_all for what runs side by side). It runs at
        a cell's turn before anything is timed, never during a timed window: XLA's autotuner launches kernels, and
        CUPTI would count them. A program that fails to compile keeps its error for its own cell's turn."""
        if all(c.key in self._tried for c in cells[:2]):  # this cell's and the next one's batch ran: not yet
            return
        todo = [c for c in cells if c.key not in self._tried]
        self._tried.update(c.key for c in todo)
        batch = {c.key for c in cells}
        self._ready = {key: made for key, made in self._ready.items() if key in batch}
        with watch.phase("compile"):
            lowered, shapes = [], {}
            for cell in todo:
                variant, p = VARIANTS[cell.variant], cell.params
                try:
                    if self.unavailable(variant, p):
                        continue
                    built = variant.build(p)
                    if isinstance(built, Tuned):  # its search compiles and times at its turn
                        continue
                    staged, fn, args = _timed_fn(built, p)
                    lowered.append((cell, staged, lower_timed(fn, args)))
                except Exception as error:  # Skip included: recorded at the cell's turn
                    self._ready[cell.key] = error
                    continue
                if self._truth is None or self._truth[0] != p:
                    shapes.setdefault(p, None)
            untimed = {prog[0]: prog for p in shapes for prog in untimed_programs(p, self.spec.seed)}
            self._compile_all(lowered, list(untimed.values()))

    def _compile_all(self, lowered: list[tuple], untimed: list[tuple]) -> None:
        """Compile each distinct program of `lowered` (cell, staged, Lowered) once, with the `untimed` ones beside
        them in the pool; a variant whose program another one of its shape compiles shares that executable.

        On a GPU the timed programs compile one at a time, in a thread of their own: XLA's autotuner times candidate
        kernels on the device, and two autotuning at once pick worse ones (on the H200 three lab5 cells came out
        15-57 % slower that way, docs/benchmarks.md), though side by side the batch took 19 s where one at a
        time took 32 s."""
        compiling: dict[tuple, Future] = {}  # (shape, fingerprint) -> the first cell's compile of that program
        timed_threads = 1 if self.device.compute_capability else COMPILE_THREADS
        with ThreadPoolExecutor(COMPILE_THREADS, thread_name_prefix="attnbench-compile") as pool, \
                ThreadPoolExecutor(timed_threads, thread_name_prefix="attnbench-compile-timed") as timed_pool:
            warming = [pool.submit(UNTIMED.warm, *prog) for prog in untimed]
            for cell, _, item in lowered:
                identity = (cell.params, item.fingerprint)
                if identity not in compiling and not shared_program(item, self.shared(cell.params)):
                    compiling[identity] = timed_pool.submit(compile_lowered, item, True)
        for future in warming:
            future.exception()  # an untimed program that fails here fails again, and is reported, where it runs
        for cell, staged, item in lowered:  # in batch order: the first cell of a program owns it, the rest share it
            shared = self.shared(cell.params)
            try:
                if (program := shared_program(item, shared)) is None:
                    program = compiling[(cell.params, item.fingerprint)].result()
                    shared[item.fingerprint] = (cell.variant, program)
                program = dataclasses.replace(program, compilation=program.compilation.model_copy(
                    update={"ahead": True}))
                self._ready[cell.key] = _compiled(program, staged)
            except Exception as error:  # a compile error: the cell fails with it at its turn
                self._ready[cell.key] = error

    def _take(self, cell: Cell) -> Compiled | None:
        """The cell's program if a batch compiled it (raising the error it met instead)."""
        made = self._ready.pop(cell.key, None)
        if isinstance(made, Exception):
            raise made
        return made

    def unavailable(self, variant: Variant, p: Params) -> str | None:
        """Why the variant declines this cell here: its rules, or its probe (run once per variant)."""
        if reason := decline(variant, p, self.device):
            return reason
        if variant.name not in self._probed:
            self._probed[variant.name] = variant.probe() if variant.probe else None
        return self._probed[variant.name]

    def tolerances(self, variant: Variant, p: Params) -> tuple[float, float]:
        """The output's tolerance (FP8's for FP8 variants, else the dtype's) and the gradients'."""
        spec = self.spec.tolerances
        tolerance = spec.fp8 if variant.fp8_baseline else getattr(spec, p.dtype)
        return tolerance, tolerance * spec.gradient_factor

    def begin(self, cell: Cell) -> None:
        """Start the cell ahead of its turn: inputs and reference for its shape, and its program unless it searches
        configurations (which needs the timer). Whatever goes wrong is kept for its turn, to be recorded there."""
        begun = Begun(cell.key, utc_now(), time.perf_counter(), Stopwatch())
        try:
            variant = VARIANTS[cell.variant]
            if not self.unavailable(variant, cell.params):
                self.truth(cell.params, begun.watch)
                begun.compiled = self._take(cell)
                with begun.watch.phase("compile"):
                    built = variant.build(cell.params) if begun.compiled is None else None
                    if built is not None and not isinstance(built, Tuned):
                        self._tried.add(cell.key)
                        compiled = compile_step(cell.variant, built, cell.params, self.shared(cell.params))
                        compilation = compiled.program.compilation.model_copy(update={"ahead": True})
                        begun.compiled = dataclasses.replace(
                            compiled, program=dataclasses.replace(compiled.program, compilation=compilation))
        except Exception as error:  # Skip included: recorded at the cell's turn
            begun.error = error
        self._begun = begun

    def program(self, cell: Cell, truth: InputsAndReference, watch: Stopwatch,
                ahead: Compiled | None) -> tuple[Compiled, Tuning | None]:
        """The cell's timed program: compiled ahead, else built and compiled now, or searched for (Tuned)."""
        if ahead is not None:
            return ahead, None
        with watch.phase("compile"):
            built = VARIANTS[cell.variant].build(cell.params)
        if isinstance(built, Tuned):
            with watch.phase("tune"):
                return tune_step(cell.variant, built, cell.params, truth.args, self.timers[0])
        with watch.phase("compile"):
            return compile_step(cell.variant, built, cell.params, self.shared(cell.params)), None

    def measure(self, cell: Cell, ahead: list[Cell] = ()) -> CellRecord:
        """Run one cell's steps (continuing what `begin` started for it), compiling the programs of the cells `ahead`
        beside its own; never raises for a failure of the variant or the device."""
        begun, self._begun = self._begun, None
        if begun is None or begun.key != cell.key:
            begun = Begun(cell.key, utc_now(), time.perf_counter(), Stopwatch())
        watch, variant, p = begun.watch, VARIANTS[cell.variant], cell.params
        compiled = correctness = fp8 = tuning = timed = None
        try:
            if begun.error is not None:
                raise begun.error
            if ahead:
                self.precompile([cell, *ahead], watch)
            if reason := self.unavailable(variant, p):
                raise Skip(reason)
            truth = self.truth(p, watch)
            compiled, tuning = self.program(cell, truth, watch, begun.compiled or self._take(cell))
            with watch.phase("check"):
                args = compiled.arguments(truth.args)
                called = time.perf_counter()
                outputs = run_once(compiled, args)
                ran_s = time.perf_counter() - called
                correctness = check_step(p, outputs, truth, *self.tolerances(variant, p))
            if reason := incorrect_reason(correctness):
                reason += diagnose.explain(p, outputs[0], truth.args, correctness.tolerance, reference, rel_err)
                if variant.fp8_baseline:
                    with watch.phase("fp8"):
                        fp8 = fp8_step(variant, p, truth, outputs, compiled, [], self.shared(p))
                status = ("incorrect", reason)
            else:
                timed = time_step(self.timers, compiled.program.executable, args, self.spec.timing, self.power_env,
                                  watch, ran_s)
                if zero := [s.summary.timer for s in timed.sampled if s.summary.median_s <= 0]:
                    raise RuntimeError(f"the {', '.join(zero)} timer measured no time for this call")
                if variant.fp8_baseline:
                    with watch.phase("fp8"):
                        fp8 = fp8_step(variant, p, truth, outputs, compiled, timed.kernels, self.shared(p))
                status = ("ok", "")
        except Skip as reason:
            status = ("skipped", str(reason))
        except Exception as error:
            status = failure(error)
            timed = None  # a failed cell reports no timing
        return self._record(cell, begun, status, compiled, correctness, fp8, tuning, timed)

    def _record(self, cell, begun, status, compiled, correctness, fp8, tuning, timed) -> CellRecord:
        """The record of what the steps returned (None where a step did not run)."""
        m = self.machine
        telemetry = timed.telemetry if timed else None
        return metrics.cell_record(
            cell, self.run_id, begun.started_at, time.perf_counter() - begun.clock, *status,
            ceilings=(m.matmul_peak_tflops, m.memory_bandwidth_gbps) if m else (None, None),
            phases=begun.watch.phases,
            compile_s=compiled.program.compilation.seconds if compiled else None,
            compilation=compiled.program.compilation if compiled else None,
            custom_calls=compiled.custom_calls if compiled else [],
            backend=compiled.backend if compiled else None,
            temp_bytes=compiled.temp_bytes if compiled else None,
            correctness=correctness, fp8=fp8, tuning=tuning,
            timings=[s.summary for s in timed.sampled] if timed else [],
            kernels=timed.kernels if timed else [],
            power=timed.power if timed else None,
            telemetry=telemetry,
            telemetry_reason=self.power_env.reason if timed and telemetry is None else None,
            clock_unstable=power.unstable(telemetry) if telemetry else None,
            worker=VARIANTS[cell.variant].worker,
        )

