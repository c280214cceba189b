"""Records as pandas frames: one flat row per cell, and the soak points of the cells that have a soak. The one
records -> frame that `show`'s exports, `compare`, `report` and the dashboard all read."""

from __future__ import annotations

import pandas as pd

from runner import metrics, shape
from runner.record import CellRecord, Machine

SOAK_COLUMNS = ["run", "key", "variant", "case", "t_s", "calls", "tflops", "median_s", "sm_clock_mhz", "power_w",
                "drawn_w", "temperature_c"]


def cells(records: list[CellRecord], machine: Machine | None = None) -> pd.DataFrame:
    """One row per cell (CellRecord.row), `order` its place in the list (the run's order), and given the run's
    machine, `pct_of_clock_peak`: its TFLOP/s as a share of the GPU's dense MMA rate at its sampled SM clock."""
    rows = pd.DataFrame([c.row() for c in records])
    if not len(rows):
        return rows
    return rows.assign(order=range(len(rows)), pct_of_clock_peak=[clock_peak(c, machine) for c in records])


def mma_type(c: CellRecord) -> str:
    """The data type a cell's matmuls ran in: fp8 where FP8 reached the compiled program, else its dtype."""
    return "fp8" if c.fp8 and c.fp8.in_hlo else c.params.dtype


def clock_peak(c: CellRecord, machine: Machine | None) -> float | None:
    """100 x the cell's TFLOP/s / the MMA peak at the median SM clock NVML read while it was timed, or None; a cell
    split across D GPUs (its FLOPs are the whole call's) against D such peaks."""
    if machine is None or c.telemetry is None or machine.gpu is None or c.tflops is None:
        return None
    return metrics.clock_peak_share(c.tflops / c.params.devices, machine.compute_capability, machine.gpu.sm_count,
                                    mma_type(c), c.telemetry.sm_clock_mhz.median)


def soak_points(records: list[CellRecord]) -> pd.DataFrame:
    """One row per soak point of every cell that has a soak: its run, key, variant and shape (`case`)."""
    rows = [{"run": c.run_id, "key": c.key, "variant": c.variant, "case": shape.label(c.params.as_dict()),
             **point.model_dump(exclude={"throttle"})}
            for c in records if c.soak for point in c.soak.points]
    return pd.DataFrame(rows, columns=SOAK_COLUMNS)
