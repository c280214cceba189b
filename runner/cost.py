"""What a cell costs in GPU seconds, before it runs: the median measured duration of the cells of its cost key (its
worker, its pass and the power class the run groups it in), from stored runs. `scripts/bench_runner.py --estimate`
prices specs from runs given to it; shards (runner/shard.py) are balanced by the table measured on the H200 below,
shipped with the code, so that every shard's pod computes the same shares from the cells alone (never from the
store's contents or the time)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from runner.cells import run_class
from runner.shape import Params

Key = tuple[str, str, int]  # (worker, pass, power class)


def cost_key(worker: str, p: Params) -> Key:
    """What a cell's cost is looked up by: its worker, its pass and the power class the run groups it in."""
    return worker, p.pass_, run_class(p)


def measured(runs: Iterable) -> dict[Key, list[float]]:
    """Seconds of each measured cell of the runs (a worker ran it: not declined, not lost), by cost_key."""
    by_key: dict[Key, list[float]] = {}
    for run in runs:
        for cell in run.cells:
            if cell.worker is not None and cell.status not in ("crashed", "timeout") and (
                    cell.timings or cell.compilation or cell.correctness):
                by_key.setdefault(cost_key(cell.worker, cell.params), []).append(cell.duration_s)
    return by_key


def medians(by_key: dict[Key, list[float]]) -> dict[Key, float]:
    """Each key's median seconds, to the millisecond, keys sorted: a table as H200 is written."""
    return {key: round(statistics.median(by_key[key]), 3) for key in sorted(by_key)}


def price(key: Key, table: dict[Key, float]) -> tuple[float, bool]:
    """A cell's seconds and whether its key was measured: else those of its worker and pass in the nearest power
    class (the lower on a tie), else the median of its worker's keys, else of every key (an extrapolation)."""
    if key in table:
        return table[key], True
    worker, pass_, klass = key
    near = sorted((abs(k[2] - klass), k[2], k) for k in table if k[:2] == (worker, pass_))
    if near:
        return table[near[0][2]], False
    same = [s for k, s in table.items() if k[0] == worker] or list(table.values())
    return statistics.median(same), False


# Median seconds a cell, measured on the H200 by the runner of 2026-12-03/04 (steady power): the
# eleven model presets' runs in examples/results/h200 (*-20261203, *-20261204) and hopper-long's and lab5's warm
# runs in docs/evidence/runs-20261203. Written by `python scripts/bench_runner.py --prices RUN_DIR...`
# (docs/benchmarks.md, "Shards priced by what their cells cost").
H200: dict[Key, float] = {
    ('jax', 'fwd', 6): 0.464,
    ('jax', 'fwd', 7): 0.541,
    ('jax', 'fwd', 8): 0.52,
    ('jax', 'fwd', 9): 0.668,
    ('jax', 'fwd', 10): 0.978,
    ('jax', 'fwd', 11): 1.858,
    ('jax', 'fwd', 12): 2.249,
    ('jax', 'fwd', 13): 3.134,
    ('jax', 'fwd', 14): 8.062,
    ('jax', 'fwd_bwd', 11): 2.382,
    ('jax', 'fwd_bwd', 12): 1.977,
    ('jax', 'fwd_bwd', 13): 4.883,
    ('transformer_engine', 'fwd', 6): 0.481,
    ('transformer_engine', 'fwd', 7): 0.489,
    ('transformer_engine', 'fwd', 8): 0.503,
    ('transformer_engine', 'fwd', 9): 0.51,
    ('transformer_engine', 'fwd', 10): 0.861,
    ('transformer_engine', 'fwd', 11): 1.845,
    ('transformer_engine', 'fwd', 12): 2.166,
    ('transformer_engine', 'fwd', 13): 2.687,
    ('transformer_engine', 'fwd', 14): 4.905,
    ('transformer_engine', 'fwd_bwd', 11): 1.92,
    ('transformer_engine', 'fwd_bwd', 12): 2.123,
    ('transformer_engine', 'fwd_bwd', 13): 4.744,
}
