"""Variants that exist only in the tests and take their worker down at one shape (seq_len 16), as a broken
kernel would: a segfault, a hang, an exit, unbounded allocation, or a compile slower than a Spot notice.
At other shapes they are plain attention, so a run shows that only the one cell suffers."""

from __future__ import annotations

import ctypes
import functools
import os
import time

from runner.shape import Params
from runner.registry import variant

FAULT_AT = 16  # seq_len


def _attention(p: Params):
    from runner.attention import naive_attention

    return functools.partial(naive_attention, causal=p.causal)


def _faulty(fault):
    def build(p: Params):
        if p.seq_len == FAULT_AT:
            fault()
        return _attention(p)

    return build


def _segfault() -> None:
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def _hang() -> None:
    time.sleep(3600)


def _exit() -> None:
    os._exit(3)


def _hog() -> None:
    import numpy as np

    hoard = []
    while True:  # bounded only by the worker's memory limit (untouched pages: quick to reach it)
        hoard.append(np.empty(1 << 28, np.uint8))


def _slow() -> None:
    time.sleep(float(os.environ.get("ATTNBENCH_TEST_SLOW_S", "60")))


for name, fault, doc in [
    ("test_segfault", _segfault, "Segfaults at seq_len 16."),
    ("test_hang", _hang, "Never returns at seq_len 16."),
    ("test_exit", _exit, "Exits the process at seq_len 16."),
    ("test_hog", _hog, "Allocates without bound at seq_len 16."),
    ("test_slow", _slow, "Compiles for a minute at seq_len 16."),
]:
    build = _faulty(fault)
    build.__doc__ = doc
    variant(name, backend="xla")(build)
