"""The sampling step: bring the GPU to the spec's power state and take the timers' samples in it.

Under `steady` the headline's samples are calls of the same unbroken stream that brought the GPU to its state;
under `burst` the GPU cools back to idle first and the sample is short. The GPU's state while the headline sampled
comes back with the samples.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import jax

from runner import power
from runner.record import PowerState, Telemetry
from runner.spec import TimingSettings
from runner.timers import Limits, Sampled, Timer, limits, sample


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
              watch, ran_s: float | None = None) -> Timed:
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
