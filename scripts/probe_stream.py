"""What a steady sample must be taken inside of (a probe for docs/benchmarks.md; writes JSON to argv[1]).

Plain JAX, CUPTI and NVML, none of the runner: cuDNN causal forward bf16, B1 64/8 heads H128, at each T:
1. from idle, one CUPTI session around an unbroken stream of back-to-back calls (the queue never drains: the host
   waits on a call two chunks back), NVML every 10 ms: throughput per call against time under load, with the
   power (energy counter), clock, temperature and throttle reasons of the same moments;
2. after that stream, a host gap of 0 / 20 / 100 ms, then 5 calls in a new session: what a gap costs;
3. a new session opened while the queue still holds calls: do its first calls still read high?

    python scripts/probe_stream.py OUT.json [SECONDS] [T,T,...]

Without an NVIDIA GPU under JAX it says so in one line and exits 1, before anything GPU-only is imported.
"""
import json
import sys
import threading
import time

import jax
import jax.numpy as jnp


def gpu_missing() -> str | None:
    """Why this process cannot probe (no NVIDIA GPU under JAX), or None."""
    platform = jax.devices()[0].platform
    return None if platform == "gpu" else f"JAX's device here is {platform}"


if __name__ == "__main__" and (missing := gpu_missing()):
    sys.exit(f"probe_stream: measuring needs an NVIDIA GPU; {missing}")

import pynvml  # noqa: E402  (NVML and Mosaic GPU's profiler: after the check, which a CPU fails in one line)
from jax.experimental.mosaic.gpu import profiler  # noqa: E402

EXT = profiler.mosaic_gpu_lib._mosaic_gpu_ext
B, N, K, H = 1, 64, 8, 128


def flops(t: int) -> float:
    return 4 * B * N * H * t * (t + 1) / 2


class Nvml(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        pynvml.nvmlInit()
        self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.rows, self.stop = [], threading.Event()

    def read(self):
        n, h = pynvml, self.h
        return (time.monotonic(), n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM), n.nvmlDeviceGetPowerUsage(h) / 1e3,
                n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU), n.nvmlDeviceGetCurrentClocksThrottleReasons(h),
                n.nvmlDeviceGetTotalEnergyConsumption(h))

    def run(self):
        while not self.stop.wait(0.01):
            self.rows.append(self.read())


def stream(fn, args, seconds: float, per_chunk: int):
    """Back-to-back calls for `seconds`; returns (host time of each chunk's completion, calls per chunk)."""
    pending, done = [], []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pending.append(None)
        for _ in range(per_chunk):
            out = fn(*args)
        pending[-1] = out
        if len(pending) > 2:
            jax.block_until_ready(pending.pop(0))
            done.append(time.monotonic())
    for out in pending:
        jax.block_until_ready(out)
        done.append(time.monotonic())
    return done


def per_call(timings, calls: int):
    k = len(timings) // calls
    return [sum(ms for _, ms in timings[i * k:(i + 1) * k]) for i in range(calls)], len(timings) % calls


def probe(t: int, seconds: float, nvml: Nvml) -> dict:
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    q = jax.random.normal(keys[0], (B, t, N, H), jnp.bfloat16)
    k = jax.random.normal(keys[1], (B, t, K, H), jnp.bfloat16)
    v = jax.random.normal(keys[2], (B, t, K, H), jnp.bfloat16)
    fn = jax.jit(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn"))
    fn = fn.lower(q, k, v).compile()
    args = (q, k, v)
    jax.block_until_ready(fn(*args))
    _, one = profiler.measure(fn, aggregate=False)(*args)
    kernels, call_ms = len(one), sum(ms for _, ms in one)
    per_chunk = max(1, int(50 / call_ms))
    out = {"T": t, "kernels_per_call": kernels, "per_chunk": per_chunk}
    time.sleep(6)  # idle
    t0 = time.monotonic()
    EXT._cupti_init()
    done = stream(fn, args, seconds, per_chunk)
    timings = EXT._cupti_get_timings(False)
    calls = per_chunk * len(done)
    ms, extra = per_call(timings, calls)
    out["stream"] = {"t0": t0, "chunk_done": [d - t0 for d in done], "call_ms": ms, "records": len(timings),
                     "calls": calls, "extra_records": extra,
                     "tflops": [flops(t) / (m / 1e3) / 1e12 for m in ms]}
    # 2. gaps
    gaps = {}
    for gap in (0.0, 0.02, 0.1, 0.5):
        stream(fn, args, 1.0, per_chunk)
        time.sleep(gap)
        _, tm = profiler.measure(fn, aggregate=False, iterations=5)(*args)
        gaps[str(gap)] = [flops(t) / (sum(m for _, m in c) / 1e3) / 1e12 for c in tm]
    out["gap_then_5"] = gaps
    # 3. a session opened while calls are queued
    stream(fn, args, 1.0, per_chunk)
    for _ in range(per_chunk):
        last = fn(*args)
    EXT._cupti_init()
    outs = [fn(*args) for _ in range(30)]
    jax.block_until_ready(outs[-1])
    jax.block_until_ready(last)
    tm = EXT._cupti_get_timings(False)
    n = len(tm) // kernels
    ms3 = [sum(m for _, m in tm[i * kernels:(i + 1) * kernels]) for i in range(n)]
    out["queued_session"] = {"records": len(tm), "tflops": [flops(t) / (m / 1e3) / 1e12 for m in ms3]}
    out["nvml_t0"] = t0
    return out


def main():
    path = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 4.0
    lengths = [int(x) for x in sys.argv[3].split(",")] if len(sys.argv) > 3 else [8192, 16384]
    nvml = Nvml()
    nvml.start()
    results = {"devices": str(jax.devices()), "jax": jax.__version__, "probes": []}
    for t in lengths:
        results["probes"].append(probe(t, seconds, nvml))
        print("done", t, flush=True)
    nvml.stop.set()
    results["nvml"] = nvml.rows
    EXT._cupti_get_timings(True)
    with open(path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
