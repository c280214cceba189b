"""Communication against compute in a cell split across devices, two ways, each where it can be measured:

kernels  on a GPU the device timer sees every kernel of the call on every device: the collective (NCCL) kernels
         against the others, each summed over the devices and divided by their count
twin     a variant may build its program again without collectives (the same local work on data that stays put):
         the cell's wall time less the twin's is the communication that compute did not hide; on any platform

`communication_step`, the Measurer's step after the timers for a split cell, takes the twin where the variant has
one, else the kernels.
"""

from __future__ import annotations

import re

from runner.compiler import compile_timed
from runner.programs import Compiled, with_grads
from runner.record import Communication
from runner.shape import Params
from runner.sampling import Timed
from runner.spec import TimingSettings
from runner.timers import Timer, limits, sample

COLLECTIVE_KERNEL = re.compile(r"^nccl", re.IGNORECASE)  # ncclDevKernel_AllGather_RING_LL, ncclKernel_SendRecv, ...


def from_kernels(kernels: list[str], kernel_s: list[float], devices: int) -> Communication | None:
    """Collective against other kernel seconds per device, from one call's kernels; None without timed kernels."""
    if not kernel_s:
        return None
    collective = sum(s for name, s in zip(kernels, kernel_s) if COLLECTIVE_KERNEL.search(name))
    return Communication(source="kernels", communication_s=collective / devices,
                         compute_s=(sum(kernel_s) - collective) / devices)


def from_twin(total_s: float, twin_s: float) -> Communication:
    """The cell's time against its collective-free twin's: what the collectives added (never below zero)."""
    return Communication(source="twin", communication_s=max(0.0, total_s - twin_s), compute_s=twin_s)


def communication_step(p: Params, compiled: Compiled, timed: Timed, timers: list[Timer], args: tuple,
                       settings: TimingSettings) -> Communication | None:
    """A split cell's communication against its compute: by its twin without collectives (both by the wall
    clock), else by the device timer's kernels; None where neither can be had."""
    wall = next((t for t in timers if t.name == "wall"), None)
    if compiled.twin is not None and wall is not None:
        twin = with_grads(compiled.twin) if p.pass_ == "fwd_bwd" else compiled.twin
        program = compile_timed(twin, args, {})
        twin_s = sample(wall, program.executable, args, limits("wall", "wall", settings)).summary.median_s
        total_s = next(s.summary.median_s for s in timed.sampled if s.summary.timer == "wall")
        return from_twin(total_s, twin_s)
    device = next((s for s in timed.sampled if s.summary.timer == "device"), None)
    return from_kernels(device.kernels, device.kernel_s, p.devices) if device else None
