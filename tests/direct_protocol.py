"""An independent way to time one call in each power state, against which the runner's numbers are checked.

Written apart from runner/sampling.py and runner/power.py on purpose, and with no NVML: plain JAX, CUPTI through
jaxlib's Mosaic GPU extension, and the host's clock. What it measures is fixed by wall-clock durations, not by any
reading of the GPU's state, so it cannot share a blind spot with the runner's state rules.

- burst: IDLE_S of idle, then two calls in one CUPTI session (the median of the two).
- steady: LOAD_S of back-to-back calls (the host never lets the queue drain), then 30 more calls in one CUPTI
  session opened while calls are still queued, so no host gap comes between the load and the timed calls (a gap
  of 20 ms hands the clock back on an H200); the median of the 30.
"""

from __future__ import annotations

import statistics
import time

import jax

IDLE_S = 8.0
LOAD_S = 10.0
STEADY_CALLS = 30
BURST_CALLS = 2
PROTOCOL = {
    "burst": f"{IDLE_S:g} s idle, then {BURST_CALLS} calls in one CUPTI session (median)",
    "steady": f"{LOAD_S:g} s of back-to-back calls, then {STEADY_CALLS} calls in one CUPTI session opened while "
              "calls were still queued (median)",
}


def _ext():
    from jax.experimental.mosaic.gpu import profiler

    return profiler.mosaic_gpu_lib._mosaic_gpu_ext


def _per_call_ms(timings: list, calls: int, kernels: int) -> list[float]:
    timings = timings[len(timings) - calls * kernels:]  # calls queued before the session may have been caught too
    return [sum(ms for _, ms in timings[i * kernels:(i + 1) * kernels]) for i in range(calls)]


def _kernels_per_call(fn, args) -> int:
    ext = _ext()
    jax.block_until_ready(fn(*args))
    ext._cupti_init()
    try:
        jax.block_until_ready(fn(*args))
    finally:
        timings = ext._cupti_get_timings(True)
    return len(timings)


def call_seconds(fn, args, policy: str) -> float:
    """The median seconds of one call's kernels in the policy's state, by this module's protocol."""
    ext, kernels = _ext(), _kernels_per_call(fn, args)
    if policy == "burst":
        time.sleep(IDLE_S)
        ext._cupti_init()
        try:
            jax.block_until_ready([fn(*args) for _ in range(BURST_CALLS)])
        finally:
            timings = ext._cupti_get_timings(True)
        return statistics.median(_per_call_ms(timings, BURST_CALLS, kernels)) / 1e3
    started = time.perf_counter()
    jax.block_until_ready(fn(*args))
    per_batch = max(1, int(0.02 / max(time.perf_counter() - started, 1e-6)))
    queue: list = []
    end = time.monotonic() + LOAD_S
    while time.monotonic() < end:
        for _ in range(per_batch):
            last = fn(*args)
        queue.append(last)
        if len(queue) > 3:
            jax.block_until_ready(queue.pop(0))
    ext._cupti_init()  # the last batches are still queued: the GPU has not stopped
    try:
        for _ in range(STEADY_CALLS):
            last = fn(*args)
        jax.block_until_ready(last)
        jax.block_until_ready(queue)
    finally:
        timings = ext._cupti_get_timings(True)
    return statistics.median(_per_call_ms(timings, STEADY_CALLS, kernels)) / 1e3
