"""The timed program of a cell: a variant built, lowered and compiled for the cell's input shapes (or tuned: each
of its configurations compiled and briefly timed, the fastest kept; or its library's autotuner run, or its result
read from the tuning cache, and the call compiled with it), and the cache of programs (`Programs`): those
a shape's variants share, and those compiled ahead of their cells.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import jax
import jax.numpy as jnp

from runner.cells import Cell, reference_shape, with_backward
from runner.compiler import UNTIMED, Program, compile_lowered, compile_timed, lower_timed, shared_program
from runner.inputs import Truths, untimed_programs
from runner.memory import input_shapes
from runner.record import Candidate, Tuning
from runner.registry import VARIANTS, Autotuned, Probes, Skip, Staged, Tuned, backend_of, first_line
from runner.shape import Params
from runner.timers import Limits, Stopwatch, Timer, sample
from runner.tuning_cache import TuningCache

CUSTOM_CALL = re.compile(r'custom_call_target="([^"]+)"')
TUNE_LIMITS = Limits(warmup=1, min_samples=3, max_samples=5, target_noise=1.0, budget_s=0.5)
COMPILE_THREADS = min(8, os.cpu_count() or 1)  # programs compiled side by side ahead of their cells
SHARED_SHAPES = 32  # shapes whose executables are kept for variants that compile to the same program


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
    program = compile_timed(fn, args, shared, p.deterministic)
    shared.setdefault(program.fingerprint, (name, program))  # a reused program keeps its owner
    return compiled_from(program, staged)


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


def library_tuning(name: str, tuned: Autotuned, p: Params, fn: Callable, args: tuple,
                   cache: TuningCache | None, fresh: bool = False) -> tuple[str, Tuning]:
    """The library's tuning of the timed call for this cell: read from the tuning cache (unless `fresh`), else run
    now (and kept there). A kept result this library cannot read is warned about and tuned again."""
    text = cache.get(name, p) if cache and not fresh else None
    if text is not None:
        try:
            return text, tuning_of(tuned, text, cached=True)
        except Exception as error:  # the library's own reader refused it
            cache.kept.warn(f"{name}'s kept result does not read ({first_line(error)})")
    start = time.perf_counter()
    text = tuned.tune(fn, args)
    if cache:
        cache.put(name, p, text, time.perf_counter() - start)
    return text, tuning_of(tuned, text, cached=False)


def tuning_of(tuned: Autotuned, text: str, cached: bool) -> Tuning:
    config, candidates = tuned.chosen(text)
    return Tuning(config=config, candidates=[Candidate(**c) for c in candidates], tuner=tuned.tuner, cached=cached)


def autotune_step(name: str, tuned: Autotuned, p: Params, cache: TuningCache | None, watch: Stopwatch
                  ) -> tuple[Compiled, Tuning]:
    """The library's tuning (phase `tune`), then the timed call lowered with it in force and compiled (phase
    `compile`): the chosen kernel configuration is fixed when the call is traced."""
    staged, fn, args = timed_fn(tuned.attend, p)
    for fresh in (False, True):  # a kept result the call no longer lowers with is tuned anew once, and replaced
        with watch.phase("tune"):
            text, tuning = library_tuning(name, tuned, p, fn, args, cache, fresh)
        with watch.phase("compile"):
            with tuned.apply(text):
                item = lower_timed(fn, args, p.deterministic)
        if not (mismatch := not_in_force(tuning.config, tuned.in_force(item.lowered))):
            break
        if not tuning.cached:
            raise RuntimeError(f"{tuned.tuner}'s choice is not what the call was lowered with: {mismatch}")
        cache.kept.warn(f"{name}'s kept result is not what the call lowers with ({mismatch})")
    with watch.phase("compile"):
        program = compile_lowered(item)
    return compiled_from(program, staged), tuning


def not_in_force(chosen: dict, lowered: dict) -> str:
    """Each tuned op whose lowered config is not the one chosen, in words ('' when every one is)."""
    return "; ".join(f"{op}: chose {config}, lowered {lowered.get(op)}" for op, config in chosen.items()
                     if lowered.get(op) != config)


def ahead(compiled: Compiled) -> Compiled:
    """The program marked as compiled ahead of its cell's turn."""
    compilation = compiled.program.compilation.model_copy(update={"ahead": True})
    return dataclasses.replace(compiled, program=dataclasses.replace(compiled.program, compilation=compilation))


@dataclass
class Programs:
    """The programs of one worker: the executables of the last SHARED_SHAPES shapes by fingerprint (variants of a
    shape that compile to the same program share one), and the programs a batch compiled ahead of their cells."""

    on_gpu: bool  # timed programs compile one at a time (see _compile_all)
    _shared: OrderedDict[Params, dict] = field(default_factory=OrderedDict)
    _ready: dict[str, Compiled | Exception] = field(default_factory=dict)  # compiled ahead, by cell key
    _tried: set[str] = field(default_factory=set)  # cells a batch compiled (or tried to) already

    def shared(self, p: Params) -> dict:
        """Fingerprint -> (variant, program) for this shape's executables."""
        if p not in self._shared:
            self._shared[p] = {}
            while len(self._shared) > SHARED_SHAPES:
                self._shared.popitem(last=False)
        self._shared.move_to_end(p)
        return self._shared[p]

    def compile(self, cell: Cell, built) -> Compiled:
        """The cell's program compiled at its turn (or an identical executable of its shape reused)."""
        return compile_step(cell.variant, built, cell.params, self.shared(cell.params))

    def compile_ahead(self, cell: Cell, built) -> Compiled:
        """The cell's program compiled before its turn, so that no batch compiles it again."""
        self._tried.add(cell.key)
        return ahead(self.compile(cell, built))

    def take(self, cell: Cell) -> Compiled | None:
        """The cell's program if a batch compiled it (raising the error it met instead)."""
        made = self._ready.pop(cell.key, None)
        if isinstance(made, Exception):
            raise made
        return made

    def precompile(self, cells: list[Cell], probes: Probes, truths: Truths) -> dict[str, float]:
        """Compile the timed programs of these cells, and the untimed ones of their shapes' inputs and references
        (those `truths` does not hold), in threads (XLA compiles without holding the GIL; see _compile_all for what
        runs side by side); the seconds it took, as the phase `compile` (none when the batch ran already). It runs
        at a cell's turn before anything is timed, never during a timed window: XLA's autotuner launches kernels,
        and CUPTI would count them. A program that fails to compile keeps its error for its own cell's turn."""
        watch = Stopwatch()
        if all(c.key in self._tried for c in cells[:2]):  # this cell's and the next one's batch ran: not yet
            return watch.phases
        todo = [c for c in cells if c.key not in self._tried]
        self._tried.update(c.key for c in todo)
        batch = {c.key for c in cells}
        self._ready = {key: made for key, made in self._ready.items() if key in batch}
        with watch.phase("compile"):
            lowered, shapes = self._lower(todo, probes)
            # a forward shape whose forward+backward twin is in the batch takes the twin's inputs and reference
            own = [p for p in shapes if p.pass_ != "fwd" or with_backward(p) not in shapes]
            untimed = {prog[0]: prog for p in own if not truths.holds(p) for prog in untimed_programs(p, truths.seed)}
            self._compile_all(lowered, list(untimed.values()))
        return watch.phases

    def _lower(self, cells: list[Cell], probes: Probes) -> tuple[list[tuple], dict[Params, None]]:
        """(cell, staged, Lowered) for each cell with a program to compile now, and the shapes they need inputs of;
        a cell whose build fails (Skip included) keeps its error for its turn."""
        lowered, shapes = [], {}
        for cell in cells:
            variant, p = VARIANTS[cell.variant], cell.params
            try:
                if probes(variant):
                    continue
                built = variant.build(p)
                if isinstance(built, (Tuned, Autotuned)):  # its search compiles and times at its turn
                    continue
                staged, fn, args = timed_fn(built, p)
                lowered.append((cell, staged, lower_timed(fn, args, p.deterministic)))
            except Exception as error:  # Skip included: recorded at the cell's turn
                self._ready[cell.key] = error
                continue
            shapes.setdefault(reference_shape(p), None)
        return lowered, shapes

    def _compile_all(self, lowered: list[tuple], untimed: list[tuple]) -> None:
        """Compile each distinct program of `lowered` (cell, staged, Lowered) once, with the `untimed` ones beside
        them in the pool; a variant whose program another one of its shape compiles shares that executable.

        On a GPU the timed programs compile one at a time, in a thread of their own: XLA's autotuner times candidate
        kernels on the device, and two autotuning at once pick worse ones, though side by side a batch compiles faster
        (docs/benchmarks.md, "The numbers behind the runner's constants")."""
        compiling: dict[tuple, Future] = {}  # (shape, fingerprint) -> the first cell's compile of that program
        timed_threads = 1 if self.on_gpu else COMPILE_THREADS
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
                self._ready[cell.key] = ahead(compiled_from(program, staged))
            except Exception as error:  # a compile error: the cell fails with it at its turn
                self._ready[cell.key] = error
