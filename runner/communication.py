"""Communication against compute in a cell split across devices, two ways, each where it can be measured:

kernels  on a GPU the device timer sees every kernel of the call on every device: the collective (NCCL) kernels
         against the others, each summed over the devices and divided by their count
twin     a variant may build its program again without collectives (the same local work on data that stays put):
         the cell's wall time less the twin's is the communication that compute did not hide; on any platform
"""

from __future__ import annotations

import re

from runner.record import Communication

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
