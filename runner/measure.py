"""One cell, measured, as steps that each return what they made:

inputs and float32 reference (once per shape) -> build (a variant may Skip) -> compile (or tune: search the
variant's configurations) -> check against the reference -> FP8 evidence -> power state and timers (sampling.py)
-> a split cell's communication (communication.py).
The Measurer runs the steps for a cell, keeps the seconds each took, and assembles the record from what the
steps returned.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import jax

from runner import communication, diagnose, power
from runner.assembly import cell_record
from runner.cells import Cell, unsplit
from runner.checks import check_step, fp8_step, incorrect_reason, run_once
from runner.compiler import UNTIMED, compile_lowered, lower_timed, shared_program
from runner.inputs import (InputsAndReference, make_inputs, needed_bytes, reference, size_text, unmasked_rows,
                           untimed_programs)
from runner.machine import Device
from runner.metrics import Ceilings
from runner.programs import Compiled, compiled_from, compile_step, first_line, timed_fn, tune_step
from runner.record import CellRecord, Tuning, utc_now
from runner.shape import Params
from runner.registry import VARIANTS, Skip, Tuned, Variant
from runner.sampling import PowerEnv, time_step
from runner.spec import Spec
from runner.timers import Timer

COMPILE_THREADS = min(8, os.cpu_count() or 1)  # programs compiled side by side ahead of their cells
SHARED_SHAPES = 32  # shapes whose executables are kept for variants that compile to the same program


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


def failure(error: BaseException) -> tuple[str, str]:
    """(status, reason) for an exception raised while compiling or running."""
    text = f"{type(error).__name__}: {str(error).strip()}"
    oom = "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower() or isinstance(error, MemoryError)
    reason = first_line(error)
    if oom and "memory" not in reason.lower():  # XLA's autotuner: "Failed to get configs … Example failure:", then why
        why = next((line.strip() for line in text.splitlines() if "out of memory" in line.lower()), "")
        reason = f"{reason.rstrip()} … {why[why.lower().index('out of memory'):]}"[:500] if why else reason
    return ("oom" if oom else "failed"), reason


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
    ceilings: Ceilings = Ceilings()  # the machine's, that rates are shares of
    power_env: PowerEnv = field(default_factory=PowerEnv)
    _begun: Begun | None = None
    _truth: tuple[Params, InputsAndReference] | None = None
    _shared: OrderedDict[Params, dict] = field(default_factory=OrderedDict)
    _probed: dict[str, str | None] = field(default_factory=dict)
    _ready: dict[str, Compiled | Exception] = field(default_factory=dict)  # compiled ahead, by cell key
    _tried: set[str] = field(default_factory=set)  # cells a batch compiled (or tried to) already

    def truth(self, p: Params, watch: Stopwatch) -> InputsAndReference:
        """The shape's inputs and float32 results, made once per shape."""
        p = unsplit(p)  # a shape split across 1 or 8 devices has the same inputs and reference
        if self._truth is None or self._truth[0] != p:
            self._truth = None  # free the previous shape's arrays first
            if self.device.memory_bytes and (needed := needed_bytes(p)) > self.device.memory_bytes:
                raise Skip(f"inputs and float32 reference need {size_text(needed)}; the device has "
                           f"{size_text(self.device.memory_bytes)}")
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
                    if self.unavailable(variant):
                        continue
                    built = variant.build(p)
                    if isinstance(built, Tuned):  # its search compiles and times at its turn
                        continue
                    staged, fn, args = timed_fn(built, p)
                    lowered.append((cell, staged, lower_timed(fn, args)))
                except Exception as error:  # Skip included: recorded at the cell's turn
                    self._ready[cell.key] = error
                    continue
                if self._truth is None or self._truth[0] != unsplit(p):
                    shapes.setdefault(unsplit(p), None)
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
                self._ready[cell.key] = compiled_from(program, staged)
            except Exception as error:  # a compile error: the cell fails with it at its turn
                self._ready[cell.key] = error

    def _take(self, cell: Cell) -> Compiled | None:
        """The cell's program if a batch compiled it (raising the error it met instead)."""
        made = self._ready.pop(cell.key, None)
        if isinstance(made, Exception):
            raise made
        return made

    def unavailable(self, variant: Variant, declined: str | None = None) -> str | None:
        """Why the variant declines this cell here: the supervisor's verdict on its rules (`declined`; it sends
        only cells it found runnable), or the variant's probe (run once per variant)."""
        if declined:
            return declined
        if variant.name not in self._probed:
            self._probed[variant.name] = variant.probe() if variant.probe else None
        return self._probed[variant.name]

    def baseline(self, variant: Variant, p: Params, truth: InputsAndReference):
        """The output of the variant's FP8 baseline on the same inputs (its program shared where it can be)."""
        name = variant.fp8_baseline
        baseline = compile_step(name, VARIANTS[name].build(p), p, self.shared(p))
        return run_once(baseline, baseline.arguments(truth.args))[0]

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
            if not self.unavailable(variant):
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

    def measure(self, cell: Cell, ahead: list[Cell] = (), declined: str | None = None) -> CellRecord:
        """Run one cell's steps (continuing what `begin` started for it), compiling the programs of the cells `ahead`
        beside its own; never raises for a failure of the variant or the device."""
        begun, self._begun = self._begun, None
        if begun is None or begun.key != cell.key:
            begun = Begun(cell.key, utc_now(), time.perf_counter(), Stopwatch())
        watch, variant, p = begun.watch, VARIANTS[cell.variant], cell.params
        compiled = correctness = fp8 = tuning = timed = split = None
        try:
            if begun.error is not None:
                raise begun.error
            if ahead:
                self.precompile([cell, *ahead], watch)
            if reason := self.unavailable(variant, declined):
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
                reason += diagnose.explain(p, outputs[0], truth.args, correctness.tolerance)
                if variant.fp8_baseline:
                    with watch.phase("fp8"):
                        fp8 = fp8_step(variant.fp8_baseline, p, outputs, self.baseline(variant, p, truth), compiled, [])
                status = ("incorrect", reason)
            else:
                timed = time_step(self.timers, compiled.program.executable, args, self.spec.timing, self.power_env,
                                  watch, ran_s)
                if zero := [s.summary.timer for s in timed.sampled if s.summary.median_s <= 0]:
                    raise RuntimeError(f"the {', '.join(zero)} timer measured no time for this call")
                if variant.fp8_baseline:
                    with watch.phase("fp8"):
                        fp8 = fp8_step(variant.fp8_baseline, p, outputs, self.baseline(variant, p, truth), compiled,
                                       timed.kernels)
                if p.devices > 1:
                    with watch.phase("communication"):
                        split = communication.communication_step(p, compiled, timed, self.timers, args,
                                                                 self.spec.timing)
                status = ("ok", "")
        except Skip as reason:
            status = ("skipped", str(reason))
        except Exception as error:
            status = failure(error)
            timed = None  # a failed cell reports no timing
        return self._record(cell, begun, status, compiled, correctness, fp8, tuning, timed, split)

    def _record(self, cell, begun, status, compiled, correctness, fp8, tuning, timed, split) -> CellRecord:
        """The record of what the steps returned (None where a step did not run)."""
        telemetry = timed.telemetry if timed else None
        return cell_record(
            cell, self.run_id, begun.started_at, time.perf_counter() - begun.clock, *status,
            ceilings=self.ceilings,
            phases=begun.watch.phases,
            compile_s=compiled.program.compilation.seconds if compiled else None,
            compilation=compiled.program.compilation if compiled else None,
            custom_calls=compiled.custom_calls if compiled else [],
            backend=compiled.backend if compiled else None,
            temp_bytes=compiled.temp_bytes if compiled else None,
            correctness=correctness, fp8=fp8, tuning=tuning, communication=split,
            timings=[s.summary for s in timed.sampled] if timed else [],
            kernels=timed.kernels if timed else [],
            power=timed.power if timed else None,
            telemetry=telemetry,
            soak=timed.soak if timed else None,
            telemetry_reason=self.power_env.reason if timed and telemetry is None else None,
            clock_unstable=power.unstable(telemetry) if telemetry else None,
            worker=VARIANTS[cell.variant].worker,
        )

