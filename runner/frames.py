"""Records as pandas frames: one flat row per cell, and the soak points of the cells that have a soak. The one
records -> frame that `show`'s exports, `compare`, `report` and the dashboard all read."""

from __future__ import annotations

import pandas as pd

from runner import masks, metrics, paging, shape
from runner.record import CellRecord, Machine

SOAK_COLUMNS = ["run", "key", "variant", "case", "t_s", "calls", "tflops", "median_s", "sm_clock_mhz", "power_w",
                "drawn_w", "temperature_c"]


def cells(records: list[CellRecord], machine: Machine | None = None) -> pd.DataFrame:
    """One row per cell (CellRecord.row), `order` its place in the list (the run's order), `packed` whether its rows
    are packed (runner.masks), `serving` whether it is a serving cell (runner.paging) and its headline
    `seconds_per_token` (per new token, as show's µs/token), and given the run's machine, `clock_peak_tflops` (its
    GPUs' dense MMA rate at the SM clock read while its `telemetry_timer` sampled, runner.metrics) and
    `pct_of_clock_peak`: its headline TFLOP/s as a share of it, where the headline is that timer."""
    rows = pd.DataFrame([c.row() for c in records])
    if not len(rows):
        return rows
    peaks = [metrics.clock_peak_tflops(c, machine, c.telemetry.timer if c.telemetry else None) for c in records]
    return rows.assign(order=range(len(rows)), packed=[masks.packed(c.params) for c in records],
                       serving=[paging.serving(c.params) for c in records],
                       seconds_per_token=[metrics.seconds_per_token(c.median_s, c.params.batch, c.params.seq_len)
                                          if c.median_s and paging.serving(c.params) else None for c in records],
                       clock_peak_tflops=peaks,
                       pct_of_clock_peak=[metrics.clock_peak_share(c.tflops, peak) if c.telemetry and c.timer ==
                                          c.telemetry.timer else None for c, peak in zip(records, peaks)])


def soak_points(records: list[CellRecord]) -> pd.DataFrame:
    """One row per soak point of every cell that has a soak: its run, key, variant and shape (`case`)."""
    rows = [{"run": c.run_id, "key": c.key, "variant": c.variant, "case": shape.label(c.params.as_dict()),
             **point.model_dump(exclude={"throttle"})}
            for c in records if c.soak for point in c.soak.points]
    return pd.DataFrame(rows, columns=SOAK_COLUMNS)
