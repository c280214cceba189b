"""Timers and adaptive sampling.

A timer takes a compiled function, its arguments and a count n, and returns n samples in seconds per
call. `sample` keeps asking it for more until the noise target, the cap or the cell's time budget is
reached. Device timers also keep the names of the kernels the last call launched.
"""

from __future__ import annotations

import time
from typing import Callable, Protocol

import jax
import numpy as np

from runner.record import Timing
from runner.spec import Timing as TimingSettings

BATCH = 5  # samples asked of a timer at a time


class Timer(Protocol):
    name: str

    def __call__(self, fn: Callable, args: tuple, n: int) -> list[float]: ...


class WallTimer:
    """Host clock around one call and block_until_ready: what the lab measures (dispatch included)."""

    name = "wall"

    def __call__(self, fn: Callable, args: tuple, n: int) -> list[float]:
        samples = []
        for _ in range(n):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            samples.append(time.perf_counter() - start)
        return samples


def summarise(name: str, samples: list[float], target_noise: float) -> Timing:
    """Median, quartiles, min and IQR/median of the samples."""
    q1, median, q3 = np.percentile(samples, [25, 50, 75])
    noise = float((q3 - q1) / median) if median > 0 else 0.0
    return Timing(
        timer=name,
        median_s=float(median),
        q1_s=float(q1),
        q3_s=float(q3),
        min_s=float(min(samples)),
        samples=len(samples),
        noise=noise,
        converged=noise <= target_noise,
    )


def sample(timer: Timer, fn: Callable, args: tuple, settings: TimingSettings) -> Timing:
    """At least min_samples; then stop at target noise, max_samples or the time budget."""
    if settings.warmup:
        timer(fn, args, settings.warmup)
    samples: list[float] = []
    deadline = time.perf_counter() + settings.budget_s
    while True:
        samples += timer(fn, args, min(BATCH, settings.max_samples - len(samples)))
        if len(samples) < settings.min_samples:
            continue
        summary = summarise(timer.name, samples, settings.target_noise)
        if summary.converged or len(samples) >= settings.max_samples or time.perf_counter() > deadline:
            return summary


def _profiler():
    from jax.experimental.mosaic.gpu import profiler  # CUPTI through jaxlib's Mosaic GPU extension

    return profiler


class DeviceTimer:
    """Sum of the kernel times CUPTI records for one call: the attention itself, without host dispatch."""

    name = "device"

    def __init__(self):
        self.kernels: list[str] = []

    def __call__(self, fn: Callable, args: tuple, n: int) -> list[float]:
        _, timings = _profiler().measure(fn, aggregate=False, iterations=n)(*args)
        if timings is None:
            raise RuntimeError("CUPTI saw no kernel launched by this call")
        per_call = [timings] if n == 1 else timings  # measure() unwraps a single iteration
        self.kernels = [name for name, _ in per_call[0]]
        return [sum(ms for _, ms in kernels) / 1e3 for kernels in per_call]


class ColdDeviceTimer(DeviceTimer):
    """Kernel time with L2 flushed before every call: a buffer larger than L2 is rewritten in between.

    profiler.measure warms up before it times, which would refill L2, so this drives the same CUPTI
    session directly and drops the flush's kernels, which come first, from each call's list.
    """

    name = "device_cold"

    def __init__(self, flush_bytes: int = 512 << 20):
        super().__init__()
        self.buffer = jax.numpy.zeros(flush_bytes // 4, jax.numpy.float32)
        self.flush = jax.jit(lambda b: b + 1.0)
        jax.block_until_ready(self.flush(self.buffer))
        _, flush_kernels = _profiler().measure(self.flush, aggregate=False)(self.buffer)
        self.flush_launches = len(flush_kernels)

    def __call__(self, fn: Callable, args: tuple, n: int) -> list[float]:
        ext = _profiler().mosaic_gpu_lib._mosaic_gpu_ext
        samples = []
        for _ in range(n):
            ext._cupti_init()
            try:
                jax.block_until_ready(self.flush(self.buffer))
                jax.block_until_ready(fn(*args))
            finally:
                timings = ext._cupti_get_timings(True)
            kernels = timings[self.flush_launches :]
            self.kernels = [name for name, _ in kernels]
            samples.append(sum(ms for _, ms in kernels) / 1e3)
        return samples
