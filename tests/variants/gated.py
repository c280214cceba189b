"""A variant that exists only in the tests: it holds its cell at a point the test chooses, so a fault (the store
down, a kill, SIGTERM) meets the run at a known cell however fast the machine or its compilation cache is.

From seq_len 16 on, building a cell waits until the folder $ATTNBENCH_TEST_GATES holds a file named after its
seq_len (`16`, `24`, ...): the test opens a gate by creating that file. Without the variable it never waits."""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

from runner.record import Params
from runner.registry import variant

GATES_ENV = "ATTNBENCH_TEST_GATES"
FIRST_GATE = 16  # seq_len
MOST_S = 300.0  # a gate never opened (a broken test) lets the cell go on after this, so no run hangs for ever


def _wait_for_gate(seq_len: int) -> None:
    folder = os.environ.get(GATES_ENV)
    if not folder or seq_len < FIRST_GATE:
        return
    deadline = time.monotonic() + MOST_S
    while not (Path(folder) / str(seq_len)).exists() and time.monotonic() < deadline:
        time.sleep(0.02)


@variant("test_gated", backend="xla")
def gated(p: Params):
    """Plain attention, built once the test opens the cell's gate ($ATTNBENCH_TEST_GATES/<seq_len>)."""
    from runner.attention import naive_attention

    _wait_for_gate(p.seq_len)
    return functools.partial(naive_attention, causal=p.causal)
