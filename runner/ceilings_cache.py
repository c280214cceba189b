"""The machine's ceilings, measured once per GPU: the bf16 matmul peak and the copy bandwidth (runner/gpu.py) that a
cell's rates are shares of, kept beside the compile cache and reused by a later run on the same key instead of
measured at every start (1.8-5.4 s of an H200 worker's start, before the first cell).

The key is what can change them: the GPU (its name and NVML uuid, and the SMs CUDA gives this process: a MIG
instance of it has fewer, under the same uuid), the driver, the power limit and the clock caps in
force (the maximum SM clock and the application clocks), the libraries that compile and run the two measurements
(jax, jaxlib, the CUDA runtime and cuDNN jaxlib loaded), the XLA_FLAGS that can change their kernels
(machine.kernel_flags), the timer that times them, and FORMAT (the way they are measured). Any part that differs
is another key, so they are measured afresh; so are kept ones older than MAX_AGE_DAYS, with `run
--measure-ceilings`, with the compile cache off (nowhere to keep them), and where NVML gives no uuid (nothing tells
this GPU from another). Entries are kept as runner/kept.py keeps them: in a local folder, or the bucket for a Job; a
corrupt one is warned about in one line and measured afresh.

A low reading (a GPU time-shared with another pod, a hot neighbour) would spoil a week of runs, so ceilings that are
not plausible (implausible) are neither kept nor reused: the run that measured them rates against them, and its
record's note and one warning line say why they were not kept.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Callable

from runner.kept import Kept, digest
from runner.machine import kernel_flags
from runner.metrics import Ceilings, peak_mma_tflops
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
# Plausible ceilings: a matmul at least this share of the GPU's dense bf16 MMA rate at its clock cap, and, where an
# entry for the key is being renewed, each ceiling at least this share of that entry's: well under the readings of a
# GPU alone (docs/timing.md, Plausible ceilings), above those of one whose time is shared
SHARE_OF_MMA = 0.5
SHARE_OF_KEPT = 0.9


def key(gpu: GpuFacts | None, versions: dict[str, str], xla_flags: str = "") -> dict | None:
    """What can change the ceilings; None without the GPU's uuid."""
    if gpu is None or not gpu.uuid:
        return None
    return {"format": FORMAT, "gpu": gpu.name, "uuid": gpu.uuid, "sm_count": gpu.sm_count, "driver": gpu.driver,
            "power_limit_w": gpu.power_limit_w, "sm_clock_max_mhz": gpu.sm_clock_max_mhz,
            "sm_clock_app_mhz": gpu.sm_clock_app_mhz, "mem_clock_app_mhz": gpu.mem_clock_app_mhz, "timer": TIMER,
            "versions": {name: versions.get(name) for name in VERSIONED}, "xla_flags": kernel_flags(xla_flags)}


def mma_tflops(gpu: GpuFacts | None, capability: float | None) -> float | None:
    """The GPU's dense bf16 MMA TFLOP/s at its clock cap (the application clock where one is set, else the maximum
    SM clock): what its matmul ceiling is a share of; None where a fact is unknown (a CPU, a GPU not in the table)."""
    if gpu is None or capability is None:
        return None
    return peak_mma_tflops(str(capability), gpu.sm_count, "bfloat16", gpu.sm_clock_app_mhz or gpu.sm_clock_max_mhz,
                           gpu.name)


def implausible(found: Ceilings, mma: float | None, before: Ceilings | None = None) -> str | None:
    """Why `found` are too low to keep or reuse, against the GPU's MMA rate (`mma`) and the ceilings kept before for
    the key (`before`); None: plausible, or nothing to compare them with."""
    if mma and found.peak_tflops < SHARE_OF_MMA * mma:
        return (f"matmul {found.peak_tflops:.0f} TFLOP/s is under {SHARE_OF_MMA:.0%} of the GPU's dense bf16 rate at "
                f"its clock cap ({mma:.0f} TFLOP/s)")
    pairs = [] if before is None else [("matmul", "TFLOP/s", found.peak_tflops, before.peak_tflops),
                                       ("copy", "GB/s", found.bandwidth_gbps, before.bandwidth_gbps)]
    return next((f"{what} {now:.0f} {unit} is under {SHARE_OF_KEPT:.0%} of the {then:.0f} {unit} kept for this key "
                 "before" for what, unit, now, then in pairs if now < SHARE_OF_KEPT * then), None)


def name(identity: dict) -> str:
    """The entry's object name: the GPU's uuid and a digest of the whole key."""
    return f"{FOLDER}/{identity['uuid']}-{digest(identity)}.json"


def measure() -> Ceilings:
    """The two ceilings measured now on device 0 (runner/gpu.py)."""
    from runner import gpu

    return Ceilings(gpu.matmul_peak_tflops(), gpu.memory_bandwidth_gbps())


def ceilings(location: str, gpu: GpuFacts | None, versions: dict[str, str], run_id: str, afresh: bool = False,
             measured: Callable[[], Ceilings] = measure, capability: float | None = None,
             xla_flags: str = "") -> tuple[Ceilings, CeilingsOrigin]:
    """The ceilings for this run and where they came from: those kept at `location` (the compile cache in use, or
    'off') for this GPU (of compute `capability`) and key, else measured now and kept there if plausible."""
    identity, kept = key(gpu, versions, xla_flags), Kept(location, "ceilings", "measuring them afresh")
    mma, before = mma_tflops(gpu, capability), None
    why = _why_measured(location, identity, afresh)
    if why is None:
        entry = kept.get(name(identity), identity, NEEDED)
        found, why, before = _reusable(entry, kept, name(identity), mma) if entry else (
            None, "measured: none kept for this key", None)
        if found:
            return found
    fresh, keeps = measured(), identity is not None and location != "off"
    doubt = implausible(fresh, mma, before) if keeps else None
    if doubt:
        kept.warn(f"{kept.location}: these are not kept: {doubt}", "this run rates against them")
    origin = CeilingsOrigin(reused=False, run_id=run_id, measured_at=utc_now(),
                            note=why + (f"; not kept: {doubt}" if doubt else ""))
    if keeps and not doubt:
        kept.put(name(identity), {**identity, "matmul_peak_tflops": fresh.peak_tflops,
                                  "memory_bandwidth_gbps": fresh.bandwidth_gbps, "run_id": run_id,
                                  "measured_at": origin.measured_at})
    return fresh, origin


def _why_measured(location: str, identity: dict | None, afresh: bool) -> str | None:
    """Why the ceilings are measured without looking for kept ones; None: look."""
    if afresh:
        return "measured afresh, as --measure-ceilings asked"
    if location == "off":
        return "measured: the compile cache is off, so none are kept"
    if identity is None:
        return "measured: NVML gave no uuid to keep them under"
    return None


def _reusable(entry: dict, kept: Kept, where: str, mma: float | None
              ) -> tuple[tuple[Ceilings, CeilingsOrigin] | None, str, Ceilings | None]:
    """A kept entry's ceilings and origin if it holds two finite positive plausible ceilings measured at most
    MAX_AGE_DAYS ago; else None, why they are measured afresh, and the entry's ceilings where a new measurement is
    held to them (plausible ones, too old)."""
    values, when = (entry["matmul_peak_tflops"], entry["memory_bandwidth_gbps"]), entry["measured_at"]
    days = _days_since(when)
    if days is None or not all(_positive(value) for value in values):
        kept.warn(f"{kept.location}/{where} is not a ceilings entry (ceilings {values[0]!r}, {values[1]!r}, "
                  f"measured at {when!r})")
        return None, "measured: the kept entry could not be read", None
    if doubt := implausible(Ceilings(*values), mma):
        kept.warn(f"{kept.location}/{where} is not plausible ({doubt})")
        return None, f"measured: those kept are not plausible ({doubt})", None
    if days > MAX_AGE_DAYS:
        return None, f"measured: those kept are {days:.1f} days old, more than {MAX_AGE_DAYS:g}", Ceilings(*values)
    origin = CeilingsOrigin(reused=True, run_id=str(entry["run_id"]), measured_at=when,
                            note=f"reused: kept {days:.1f} days ago for this key")
    return (Ceilings(*values), origin), "", None


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _days_since(when) -> float | None:
    """Days from an ISO 8601 time with its zone to now; None for anything else."""
    try:
        return (dt.datetime.now(dt.timezone.utc) - dt.datetime.fromisoformat(when)).total_seconds() / 86400
    except (TypeError, ValueError):  # not text, not a time, or a time without its zone
        return None
