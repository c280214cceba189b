"""A variant that exists only in the tests and the run loop's benchmark (scripts/bench_supervisor.py): its worker
answers each of its cells at once. Its rules accept every cell, so the supervisor sends each one over the seam;
its probe then reports a missing API, so the worker records the cell `skipped` without touching JAX. What a run
of it costs per cell is the run loop's own: the verdict, the job sent, the record back, spooled and stored."""

from __future__ import annotations

from runner.shape import Params
from runner.registry import variant


def _missing() -> str:
    return "test_instant measures nothing: its worker answers at once"


@variant("test_instant", backend="xla", probe=_missing)
def instant(p: Params):
    """Answered by its worker at once (its probe declines), for the run loop's own cost."""
    raise AssertionError("test_instant is never built: its probe declines every cell")
