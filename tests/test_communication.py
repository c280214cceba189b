"""runner/communication.py: a split cell's communication against its compute, from kernels or from its twin."""

from __future__ import annotations

import pytest

from runner.communication import from_kernels, from_twin
from runner.timers import Limits, Samples, sample

# One call of a 2-GPU ring as CUPTI lists it: each GPU's attention kernels and NCCL's send/receive
KERNELS = ["fmha_fwd_kernel", "ncclDevKernel_SendRecv", "fmha_fwd_kernel", "ncclDevKernel_SendRecv", "reduce_fusion"]
SECONDS = [0.004, 0.001, 0.004, 0.003, 0.0002]


def test_collective_kernels_against_the_others_per_device():
    split = from_kernels(KERNELS, SECONDS, devices=2)
    assert split.source == "kernels"
    assert split.communication_s == pytest.approx((0.001 + 0.003) / 2)
    assert split.compute_s == pytest.approx((0.004 + 0.004 + 0.0002) / 2)


def test_no_timed_kernels_is_no_figure():
    assert from_kernels(["fmha_fwd_kernel"], [], devices=2) is None


def test_the_twin_gives_what_the_collectives_added_never_below_zero():
    assert from_twin(0.010, 0.007).communication_s == pytest.approx(0.003)
    noisy = from_twin(0.006, 0.007)  # the twin sampled slower than the cell: the collectives were all hidden
    assert noisy.communication_s == 0.0 and noisy.compute_s == 0.007


class KernelTimer:
    """A device timer whose calls launch named kernels of known seconds, as CUPTI reports them."""

    name = "device"

    def __call__(self, fn, args, n):
        return Samples([sum(SECONDS)] * n, list(KERNELS), list(SECONDS))


def test_the_sampler_keeps_each_kernels_seconds_of_the_last_call():
    got = sample(KernelTimer(), None, (), Limits(0, 3, 3, 0.05, 10.0))
    assert got.kernels == KERNELS and got.kernel_s == SECONDS
