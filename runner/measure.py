"""One cell, measured, as steps that each return what they made:

inputs and float32 reference (once per shape, inputs.Truths) -> build (a variant may Skip) -> compile (or tune:
search the variant's configurations; programs.Programs keeps what a shape's variants share and what was compiled
ahead) -> check against the reference -> FP8 evidence -> power state and timers (sampling.py) -> a split cell's
communication (communication.py).
The Measurer runs the steps for a cell, adds up the seconds each says it took, and assembles the record from what
the steps returned.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from runner import communication, diagnose, power
from runner.assembly import cell_record
from runner.cells import Cell
from runner.checks import check_step, fp8_step, incorrect_reason, run_once
from runner.inputs import InputsAndReference, Truths
from runner.machine import Device
from runner.metrics import Ceilings
from runner.programs import Compiled, Programs, autotune_step, compile_step, tune_step
from runner.record import CellRecord, Communication, Correctness, Fp8Info, Tuning, utc_now
from runner.registry import VARIANTS, Autotuned, Probes, Skip, Tuned, Variant, first_line
from runner.sampling import Carry, PowerEnv, Timed, time_step
from runner.shape import Params
from runner.spec import Spec
from runner.timers import Stopwatch, Timer
from runner.tuning_cache import TuningCache


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
    """A cell started (ahead of its turn, or at it): its clock, its phases so far, and the program or the error that
    `Measurer.begin` met."""

    key: str
    started_at: str
    clock: float
    watch: Stopwatch = field(default_factory=Stopwatch)
    compiled: Compiled | None = None
    error: Exception | None = None

    @classmethod
    def now(cls, key: str) -> Begun:
        return cls(key, utc_now(), time.perf_counter())


@dataclass
class Made:
    """What a cell's steps made (None where a step did not run) and how the cell ended. The Measurer keeps each
    step's output here as the step returns, so a step that raises leaves the earlier ones' for the record."""

    compiled: Compiled | None = None
    tuning: Tuning | None = None
    correctness: Correctness | None = None
    fp8: Fp8Info | None = None
    timed: Timed | None = None
    split: Communication | None = None
    status: str = "ok"
    reason: str = ""


@dataclass
class Measurer:
    """Measures cells of one spec, reusing inputs, the reference and identical executables across a shape's variants.

    `begin(cell)` starts the next cell early (its inputs, reference and program) while the supervisor is still
    storing the previous record, and returns what it made for `measure(cell, begun=…)`; it runs in the same thread,
    between cells, so it never overlaps a timed window (XLA's autotuner launches kernels while it compiles, and
    CUPTI would count them).
    """

    spec: Spec
    timers: list[Timer]
    run_id: str
    device: Device
    ceilings: Ceilings = Ceilings()  # the machine's, that rates are shares of
    power_env: PowerEnv = field(default_factory=PowerEnv)
    truths: Truths = field(init=False)
    programs: Programs = field(init=False)
    probes: Probes = field(default_factory=Probes)
    carry: Carry | None = field(default=None, init=False)  # the load the last steady stream left, for the next
    tuning_cache: TuningCache | None = None  # where a library's tunings are kept (beside the compile cache)

    def __post_init__(self):
        self.truths = Truths(self.spec.seed)
        self.programs = Programs(on_gpu=bool(self.device.compute_capability))

    def baseline(self, variant: Variant, p: Params, truth: InputsAndReference):
        """The output of the variant's FP8 baseline on the same inputs (its program shared where it can be)."""
        name = variant.fp8_baseline
        baseline = compile_step(name, VARIANTS[name].build(p), p, self.programs.shared(p))
        return run_once(baseline, baseline.arguments(truth.args))[0]

    def tolerances(self, variant: Variant, p: Params) -> tuple[float, float]:
        """The output's tolerance (FP8's for FP8 variants, else the dtype's) and the gradients'."""
        spec = self.spec.tolerances
        tolerance = spec.fp8 if variant.fp8_baseline else getattr(spec, p.dtype)
        return tolerance, tolerance * spec.gradient_factor

    def begin(self, cell: Cell) -> Begun:
        """Start the cell ahead of its turn: inputs and reference for its shape, and its program unless it searches
        configurations (which needs the timer). Whatever goes wrong is kept for its turn, to be recorded there."""
        begun = Begun.now(cell.key)
        try:
            variant = VARIANTS[cell.variant]
            if not self.probes(variant):
                begun.watch.add(self.truths.get(cell.params)[1])
                begun.compiled = self.programs.take(cell)
                with begun.watch.phase("compile"):
                    built = variant.build(cell.params) if begun.compiled is None else None
                    if built is not None and not isinstance(built, (Tuned, Autotuned)):
                        begun.compiled = self.programs.compile_ahead(cell, built)
        except Exception as error:  # Skip included: recorded at the cell's turn
            begun.error = error
        return begun

    def program(self, cell: Cell, truth: InputsAndReference) -> tuple[Compiled, Tuning | None, dict[str, float]]:
        """The cell's timed program, built and compiled now, searched for (Tuned) or compiled with its library's
        tuning (Autotuned), and the seconds it took."""
        watch = Stopwatch()
        with watch.phase("compile"):
            built = VARIANTS[cell.variant].build(cell.params)
        if isinstance(built, Autotuned):
            return *autotune_step(cell.variant, built, cell.params, self.tuning_cache, watch), watch.phases
        if isinstance(built, Tuned):
            with watch.phase("tune"):
                return *tune_step(cell.variant, built, cell.params, truth.args, self.timers[0]), watch.phases
        with watch.phase("compile"):
            compiled = self.programs.compile(cell, built)
        return compiled, None, watch.phases

    def measure(self, cell: Cell, ahead: list[Cell] = (), begun: Begun | None = None, attempts: int = 1
                ) -> CellRecord:
        """Run one cell's steps (continuing what `begin` started for it, when `begun` is this cell's), compiling the
        programs of the cells `ahead` beside its own; never raises for a failure of the variant or the device.
        `attempts`: the run's count of the processes that started the cell, this one included, for its record."""
        begun = begun if begun is not None and begun.key == cell.key else Begun.now(cell.key)
        made = Made()
        try:
            self._steps(cell, ahead, begun, made)
        except Skip as reason:
            made.status, made.reason = "skipped", str(reason)
        except Exception as error:
            (made.status, made.reason), made.timed = failure(error), None  # a failed cell reports no timing
        return self._record(cell, begun, made, attempts)

    def _steps(self, cell: Cell, ahead: list[Cell], begun: Begun, made: Made) -> None:
        """The shape's inputs and reference, the cell's program (compiled ahead, or now), then its run."""
        watch = begun.watch
        if begun.error is not None:
            raise begun.error
        if ahead:  # the run's plan sent no cell the device cannot hold (plan.skipped_here): none is compiled
            watch.add(self.programs.precompile([cell, *ahead], self.probes, self.truths))
        if reason := self.probes(VARIANTS[cell.variant]):
            raise Skip(reason)
        truth, phases = self.truths.get(cell.params)
        watch.add(phases)
        made.compiled = begun.compiled or self.programs.take(cell)
        if made.compiled is None:
            made.compiled, made.tuning, phases = self.program(cell, truth)
            watch.add(phases)
        self._run(cell, truth, watch, made)

    def _run(self, cell: Cell, truth: InputsAndReference, watch: Stopwatch, made: Made) -> None:
        """The output checked against the reference; then why an incorrect one differs, or the timers; then FP8's
        evidence and a split cell's communication."""
        variant, p, compiled = VARIANTS[cell.variant], cell.params, made.compiled
        with watch.phase("check"):
            args = compiled.arguments(truth.args)
            called = time.perf_counter()
            outputs = run_once(compiled, args)
            ran_s = time.perf_counter() - called
            again = run_once(compiled, args) if p.deterministic else None
            made.correctness = check_step(p, outputs, truth, *self.tolerances(variant, p), again=again)
        if reason := incorrect_reason(made.correctness):
            made.status = "incorrect"
            made.reason = reason + diagnose.explain(p, outputs[0], truth.args, made.correctness.tolerance)
        else:
            made.timed = time_step(self.timers, compiled.program.executable, args, self.spec.timing,
                                   self.power_env, ran_s, self.carry)
            self.carry = made.timed.carry
            watch.add(made.timed.phases)
            if zero := [s.summary.timer for s in made.timed.sampled if s.summary.median_s <= 0]:
                raise RuntimeError(f"the {', '.join(zero)} timer measured no time for this call")
        if variant.fp8_baseline:
            with watch.phase("fp8"):
                made.fp8 = fp8_step(variant.fp8_baseline, p, outputs, self.baseline(variant, p, truth), compiled,
                                    made.timed.kernels if made.timed else [], variant.fp8_matmuls)
        if p.devices > 1 and made.timed is not None:
            with watch.phase("communication"):
                made.split = communication.communication_step(p, compiled, made.timed, self.timers, args,
                                                              self.spec.timing)

    def _record(self, cell: Cell, begun: Begun, made: Made, attempts: int) -> CellRecord:
        """The record of what the steps made."""
        return cell_record(
            cell, self.run_id, begun.started_at, time.perf_counter() - begun.clock, made.status, made.reason,
            ceilings=self.ceilings,
            phases=begun.watch.phases, correctness=made.correctness, fp8=made.fp8, tuning=made.tuning,
            communication=made.split, worker=VARIANTS[cell.variant].worker, attempts=attempts,
            **(_compiled_fields(made.compiled) if made.compiled else {}),
            **(self._timed_fields(made.timed) if made.timed else {}),
        )

    def _timed_fields(self, timed: Timed) -> dict:
        """The record's fields from the timers and the GPU's state while they sampled."""
        return dict(
            timings=[s.summary for s in timed.sampled], kernels=timed.kernels, power=timed.power,
            telemetry=timed.telemetry, soak=timed.soak, load=timed.load,
            telemetry_reason=self.power_env.reason if timed.telemetry is None else None,
            clock_unstable=power.unstable(timed.telemetry) if timed.telemetry else None,
        )


def _compiled_fields(compiled: Compiled) -> dict:
    """The record's fields from the cell's program."""
    compilation = compiled.program.compilation
    return dict(compile_s=compilation.seconds, compilation=compilation, custom_calls=compiled.custom_calls,
                backend=compiled.backend, temp_bytes=compiled.temp_bytes)
