"""Timers and adaptive sampling.

A timer takes a compiled function, its arguments and a count n, and returns Samples: n seconds-per-call values
and the kernels the calls launched. `sample` keeps asking it for more until the noise target, the cap or the
time budget is reached, and returns the summary with the kernels.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from runner.record import TimerSummary
from runner.spec import FLOOR_SAMPLES, TimingSettings

BATCH = 5  # samples asked of a timer at a time


class Stopwatch:
    """Seconds per phase of one step or cell; a step returns its own, and its caller adds them up."""

    def __init__(self):
        self.phases: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.count(name, time.perf_counter() - start)

    def count(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds

    def add(self, phases: dict[str, float]) -> None:
        """Another step's phases, added to these."""
        for name, seconds in phases.items():
            self.count(name, seconds)


@dataclass(frozen=True)
class Samples:
    seconds: list[float]
    kernels: list[str] = field(default_factory=list)  # the last call's kernels, in launch order
    kernel_s: list[float] = field(default_factory=list)  # and their seconds, where the timer sees kernels


class Timer(Protocol):
    name: str

    def __call__(self, fn: Callable, args: tuple, n: int) -> Samples: ...


@dataclass(frozen=True)
class Limits:
    """When one timer stops sampling."""

    warmup: int
    min_samples: int
    max_samples: int
    target_noise: float
    budget_s: float


def limits(timer: str, headline: str, settings: TimingSettings) -> Limits:
    """The spec's limits; the wall timer beside a device headline gets its own smaller cap and budget."""
    capped = timer == "wall" and headline != "wall"
    max_samples = min(settings.max_samples, settings.wall_max_samples) if capped else settings.max_samples
    return Limits(
        warmup=settings.warmup,
        min_samples=min(settings.min_samples, max_samples),
        max_samples=max_samples,
        target_noise=settings.target_noise,
        budget_s=min(settings.budget_s, settings.wall_budget_s) if capped else settings.budget_s,
    )


@dataclass(frozen=True)
class Sampled:
    """What `sample` made: the summary, the kernels seen, and the wall seconds it took (warm-up included)."""

    summary: TimerSummary
    kernels: list[str]
    seconds: float
    kernel_s: list[float] = field(default_factory=list)  # the seconds of each of `kernels` in the last call


class WallTimer:
    """Host clock around one call and block_until_ready: what the lab measures (dispatch included)."""

    name = "wall"

    def __call__(self, fn: Callable, args: tuple, n: int) -> Samples:
        import jax

        seconds = []
        for _ in range(n):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            seconds.append(time.perf_counter() - start)
        return Samples(seconds)


def summarise(name: str, samples: list[float], target_noise: float) -> TimerSummary:
    """Median, quartiles, min and IQR/median of the samples."""
    q1, median, q3 = np.percentile(samples, [25, 50, 75])
    noise = float((q3 - q1) / median) if median > 0 else 0.0
    return TimerSummary(
        timer=name,
        median_s=float(median),
        q1_s=float(q1),
        q3_s=float(q3),
        min_s=float(min(samples)),
        samples=len(samples),
        noise=noise,
        converged=noise <= target_noise,
    )


def sample(timer: Timer, fn: Callable, args: tuple, limit: Limits, clock: Callable[[], float] = time.perf_counter,
           ran_s: float | None = None) -> Sampled:
    """At least min_samples; then stop at target noise, max_samples or the time budget.

    Calls too slow for the budget do not run it over to fill min_samples: past the budget FLOOR_SAMPLES are
    enough. Such calls are asked for one at a time, and the warm-up stops after its first call when the rest
    would take more than half the budget. `ran_s`: the seconds of an untimed call just made (the correctness
    check's); when the warm-up would take more than half the budget at that pace, that call was the warm-up.
    """
    start = clock()
    per_call, rest = ran_s, limit.warmup
    if rest and per_call is None:  # no pace known: one call alone gives it
        timer(fn, args, 1)
        per_call, rest = clock() - start, rest - 1  # an overestimate: the first call pays what later calls do not
    if rest and per_call * rest <= limit.budget_s / 2:
        timer(fn, args, rest)
    seconds: list[float] = []
    kernels: list[str] = []
    kernel_s: list[float] = []
    deadline = clock() + limit.budget_s
    batch = 1 if per_call is not None and per_call * BATCH > limit.budget_s else BATCH
    # calls known to be quick: min_samples in one go (each request is a CUPTI session for the device timer)
    ask = limit.min_samples if per_call is not None and per_call * limit.min_samples <= limit.budget_s / 2 else batch
    while True:
        got = timer(fn, args, min(ask, limit.max_samples - len(seconds)))
        ask = batch
        seconds += got.seconds
        kernels, kernel_s = (got.kernels, got.kernel_s) if got.kernels else (kernels, kernel_s)
        if len(seconds) < limit.min_samples and (len(seconds) < FLOOR_SAMPLES or clock() <= deadline):
            continue
        summary = summarise(timer.name, seconds, limit.target_noise)
        if summary.converged or len(seconds) >= limit.max_samples or clock() > deadline:
            return Sampled(summary, kernels, clock() - start, kernel_s)


def _profiler():
    from jax.experimental.mosaic.gpu import profiler  # CUPTI through jaxlib's Mosaic GPU extension

    return profiler


class DeviceTimer:
    """Sum of the kernel times CUPTI records for one call: the attention itself, without host dispatch."""

    name = "device"

    def __call__(self, fn: Callable, args: tuple, n: int) -> Samples:
        _, timings = _profiler().measure(fn, aggregate=False, iterations=n)(*args)
        if timings is None:
            raise RuntimeError("CUPTI saw no kernel launched by this call")
        per_call = [timings] if n == 1 else timings  # measure() unwraps a single iteration
        return Samples([sum(ms for _, ms in kernels) / 1e3 for kernels in per_call], [k for k, _ in per_call[-1]],
                       [ms / 1e3 for _, ms in per_call[-1]])

    def session(self) -> CuptiSession:
        """A session around a stream of calls (steady samples are taken inside one: sampling.sample_in_load)."""
        return CuptiSession()

    def median(self, fn: Callable, args: tuple, n: int) -> float:
        """The median of n samples, for a ceiling measured once."""
        return float(np.median(self(fn, args, n).seconds))


class CuptiSession:
    """One CUPTI session: every kernel launched inside `with`, in launch order, as (name, milliseconds)."""

    def __enter__(self) -> CuptiSession:
        self.ext = _profiler().mosaic_gpu_lib._mosaic_gpu_ext
        self.timings: list[tuple[str, float]] = []
        self.ext._cupti_init()
        return self

    def __exit__(self, *exc) -> None:
        self.timings = self.ext._cupti_get_timings(True) or []


class ColdDeviceTimer:
    """Kernel time with L2 flushed before every call: a buffer larger than L2 is rewritten in between.

    profiler.measure warms up before it times, which would refill L2, so this drives the same CUPTI
    session directly and drops the flush's kernels, which come first, from each call's list.
    """

    name = "device_cold"

    def __init__(self, flush_bytes: int = 512 << 20):
        import jax

        self.buffer = jax.numpy.zeros(flush_bytes // 4, jax.numpy.float32)
        self.flush = jax.jit(lambda b: b + 1.0)
        jax.block_until_ready(self.flush(self.buffer))
        _, flush_kernels = _profiler().measure(self.flush, aggregate=False)(self.buffer)
        self.flush_launches = len(flush_kernels)

    def __call__(self, fn: Callable, args: tuple, n: int) -> Samples:
        import jax

        ext = _profiler().mosaic_gpu_lib._mosaic_gpu_ext
        seconds, kernels = [], []
        for _ in range(n):
            ext._cupti_init()
            try:
                jax.block_until_ready(self.flush(self.buffer))
                jax.block_until_ready(fn(*args))
            finally:
                timings = ext._cupti_get_timings(True)
            kernels = timings[self.flush_launches :]
            seconds.append(sum(ms for _, ms in kernels) / 1e3)
        return Samples(seconds, [name for name, _ in kernels])
