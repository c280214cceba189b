"""tests/crosscheck.py asks the run's plan (plan.skipped_here) before its Measurer compiles a cell: a cell the run would
skip on the device is declined with the run's reason, on a CPU too."""

from __future__ import annotations

import pytest

import crosscheck
from runner.machine import Device
from runner.measure import Measurer

SMALL = Device("gpu", "a small GPU", 9.0, 1 << 30)  # 1 GiB: the anchor's inputs and float32 reference need more
AMPERE = Device("gpu", "NVIDIA A100", 8.0, 80 << 30)


@pytest.fixture
def never_measured(monkeypatch):
    monkeypatch.setattr(Measurer, "measure", lambda self, cell, *rest, **given: pytest.fail(f"measured {cell.label()}"))


@pytest.mark.parametrize("carried", [False, True])
def test_a_cell_the_device_cannot_hold_is_declined_before_it_compiles(never_measured, carried):
    with pytest.raises(crosscheck.Declined, match=r": inputs and float32 reference need [\d.]+ GiB; the device has "
                                                  r"1\.0 GiB$"):
        crosscheck.crosscheck("cudnn", "steady", None, carried, device=SMALL)


def test_a_cell_the_gpus_compute_capability_declines_is_declined_before_it_compiles(never_measured):
    with pytest.raises(crosscheck.Declined, match="compute capability"):
        crosscheck.crosscheck("cudnn_fp8", "steady", None, device=AMPERE)
