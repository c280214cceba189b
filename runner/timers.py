"""Timers and adaptive sampling.

A timer takes `call` (one attention call that returns device arrays) and a count n, and returns n
samples in seconds per call. `sample` keeps asking it for more until the noise target, the cap or the
cell's time budget is reached.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Protocol

import jax
import numpy as np

from runner.record import Timing
from runner.spec import Timing as TimingSettings

BATCH = 5  # samples asked of a timer at a time


class Timer(Protocol):
    name: str

    def __call__(self, call: Callable[[], Any], n: int) -> list[float]: ...


class WallTimer:
    """Host clock around one call and block_until_ready: what the lab measures (dispatch included)."""

    name = "wall"

    def __call__(self, call: Callable[[], Any], n: int) -> list[float]:
        samples = []
        for _ in range(n):
            start = time.perf_counter()
            jax.block_until_ready(call())
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


def sample(timer: Timer, call: Callable[[], Any], settings: TimingSettings) -> Timing:
    """At least min_samples; then stop at target noise, max_samples or the time budget."""
    if settings.warmup:
        timer(call, settings.warmup)
    samples: list[float] = []
    deadline = time.perf_counter() + settings.budget_s
    while len(samples) < settings.max_samples:
        samples += timer(call, min(BATCH, settings.max_samples - len(samples)))
        if len(samples) < settings.min_samples:
            continue
        if summarise(timer.name, samples, settings.target_noise).converged or time.perf_counter() > deadline:
            break
    return summarise(timer.name, samples, settings.target_noise)
