"""The machine's ceilings, measured once per GPU: the bf16 matmul peak and the copy bandwidth (runner/gpu.py) that a
cell's rates are shares of, kept beside the compile cache and reused by a later run on the same key instead of
measured at every start (1.8-5.4 s of an H200 worker's start, before the first cell).

The key is what can change them: the GPU (its name and NVML uuid, and the SMs CUDA gives this process: a MIG
instance of it has fewer, under the same uuid), the driver, the power limit and the clock caps in
force (the maximum SM clock and the application clocks), the libraries that compile and run the two measurements
(jax, jaxlib, the CUDA runtime and cuDNN jaxlib loaded), the timer that times them, and FORMAT (the way they are
measured). Any part that differs is another key, so they are measured afresh; so are kept ones older than
MAX_AGE_DAYS, with `run --measure-ceilings`, with the compile cache off (nowhere to keep them), and where NVML gives
no uuid (nothing tells this GPU from another). Entries are kept as runner/kept.py keeps them: in a local folder,
or the bucket for a Job; a corrupt one is warned about in one line and measured afresh.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Callable

from runner.kept import Kept, digest
from runner.metrics import Ceilings
from runner.record import CeilingsOrigin, GpuFacts, utc_now

FOLDER = "attnbench-ceilings"
FORMAT = 1  # the entry's layout, and gpu.matmul_peak_tflops' and memory_bandwidth_gbps' way: bump on a change
# A GPU's sustained rates can drift while no part of the key moves (its cooling, a firmware or VBIOS update that
# leaves the driver string alone, a neighbour heating the chassis): a nightly re-measures once a week, some 5 s
# against 5 s every night, so the ceilings it rates against are never more than a week old.
MAX_AGE_DAYS = 7.0
# The libraries that compile and run the two measurements (runner.machine.versions and runner.gpu.cuda_versions)
VERSIONED = ("jax", "jaxlib", "cuda_runtime", "cudnn")
TIMER = "device"  # CUPTI's kernel time, runner.timers.DeviceTimer: what gpu's measurements take the median of
NEEDED = ("matmul_peak_tflops", "memory_bandwidth_gbps", "run_id", "measured_at")


def key(gpu: GpuFacts | None, versions: dict[str, str]) -> dict | None:
    """What can change the ceilings; None without the GPU's uuid."""
    if gpu is None or not gpu.uuid:
        return None
    return {"format": FORMAT, "gpu": gpu.name, "uuid": gpu.uuid, "sm_count": gpu.sm_count, "driver": gpu.driver,
            "power_limit_w": gpu.power_limit_w, "sm_clock_max_mhz": gpu.sm_clock_max_mhz,
            "sm_clock_app_mhz": gpu.sm_clock_app_mhz, "mem_clock_app_mhz": gpu.mem_clock_app_mhz, "timer": TIMER,
            "versions": {name: versions.get(name) for name in VERSIONED}}


def name(identity: dict) -> str:
    """The entry's object name: the GPU's uuid and a digest of the whole key."""
    return f"{FOLDER}/{identity['uuid']}-{digest(identity)}.json"


def measure() -> Ceilings:
    """The two ceilings measured now on device 0 (runner/gpu.py)."""
    from runner import gpu

    return Ceilings(gpu.matmul_peak_tflops(), gpu.memory_bandwidth_gbps())


def ceilings(location: str, gpu: GpuFacts | None, versions: dict[str, str], run_id: str, afresh: bool = False,
             measured: Callable[[], Ceilings] = measure) -> tuple[Ceilings, CeilingsOrigin]:
    """The ceilings for this run and where they came from: those kept at `location` (the compile cache in use, or
    'off') for this GPU and key, else measured now and kept there."""
    identity, kept = key(gpu, versions), Kept(location, "ceilings", "measuring them afresh")
    if afresh:
        why = "measured afresh, as --measure-ceilings asked"
    elif location == "off":
        why = "measured: the compile cache is off, so none are kept"
    elif identity is None:
        why = "measured: NVML gave no uuid to keep them under"
    else:
        entry = kept.get(name(identity), identity, NEEDED)
        found, why = _reusable(entry, kept, name(identity)) if entry else (None, "measured: none kept for this key")
        if found:
            return found
    fresh = measured()
    origin = CeilingsOrigin(reused=False, run_id=run_id, measured_at=utc_now(), note=why)
    if identity is not None and location != "off":
        kept.put(name(identity), {**identity, "matmul_peak_tflops": fresh.peak_tflops,
                                  "memory_bandwidth_gbps": fresh.bandwidth_gbps, "run_id": run_id,
                                  "measured_at": origin.measured_at})
    return fresh, origin


def _reusable(entry: dict, kept: Kept, where: str) -> tuple[tuple[Ceilings, CeilingsOrigin] | None, str]:
    """A kept entry's ceilings and origin if it holds two finite positive ceilings measured at most MAX_AGE_DAYS ago;
    else None and why they are measured afresh."""
    peak, bandwidth, when = entry["matmul_peak_tflops"], entry["memory_bandwidth_gbps"], entry["measured_at"]
    days = _days_since(when)
    if days is None or not all(_positive(value) for value in (peak, bandwidth)):
        kept.warn(f"{kept.location}/{where} is not a ceilings entry (ceilings {peak!r}, {bandwidth!r}, measured at "
                  f"{when!r})")
        return None, "measured: the kept entry could not be read"
    if days > MAX_AGE_DAYS:
        return None, f"measured: those kept are {days:.1f} days old, more than {MAX_AGE_DAYS:g}"
    origin = CeilingsOrigin(reused=True, run_id=str(entry["run_id"]), measured_at=when,
                            note=f"reused: kept {days:.1f} days ago for this key")
    return (Ceilings(peak, bandwidth), origin), ""


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _days_since(when) -> float | None:
    """Days from an ISO 8601 time with its zone to now; None for anything else."""
    try:
        return (dt.datetime.now(dt.timezone.utc) - dt.datetime.fromisoformat(when)).total_seconds() / 86400
    except (TypeError, ValueError):  # not text, not a time, or a time without its zone
        return None
