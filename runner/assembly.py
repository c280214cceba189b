"""A cell's record, assembled in one place from what its steps returned: its work, traffic, rates and energy
derived here from the headline timing (a soak's bins rated alike), whoever made the record (a worker that measured
the cell, or the run that declined it, gave it up or lost its worker)."""

from __future__ import annotations

from runner import metrics, paging, power
from runner.cells import Cell
from runner.metrics import Ceilings
from runner.record import CellRecord, Machine, Soak


def ceilings(machine: Machine | None) -> Ceilings:
    """The machine record's measured ceilings (none without a machine record)."""
    return Ceilings(machine.matmul_peak_tflops, machine.memory_bandwidth_gbps) if machine else Ceilings()


def cell_record(cell: Cell, run_id: str, started_at: str, duration_s: float, status: str, reason: str = "",
                ceilings: Ceilings = Ceilings(), **fields) -> CellRecord:
    """A cell's record with its work, traffic and rates derived from the headline timing: device, else the first;
    wall for a cell split across devices, whose kernel times CUPTI sums over every GPU and stream. A cell with no
    reason notes a page pool that is mostly empty pages (runner.paging.pool_note)."""
    p, timings = cell.params, fields.get("timings", [])
    preferred = "wall" if p.devices > 1 else "device"
    headline = next((t for t in timings if t.timer == preferred), timings[0] if timings else None)
    seconds = headline.median_s if headline else None
    kernel_time = headline is not None and headline.timer != "wall"
    watts = power.mean_power_w(fields.get("telemetry"), fields.get("power")) if kernel_time else None
    work, traffic = metrics.flops(p), metrics.bytes_min(p)
    if fields.get("soak") is not None:
        fields["soak"] = _rated(fields["soak"], work, traffic)
    return CellRecord(
        key=cell.key, run_id=run_id, experiment=cell.experiment, variant=cell.variant, params=p,
        status=status, reason=reason or paging.pool_note(p), started_at=started_at, duration_s=duration_s,
        timer=headline.timer if headline else None, median_s=seconds,
        flops=work, bytes_min=traffic, kv_cache_bytes=metrics.kv_cache_bytes(p),
        **(metrics.rates(work, traffic, seconds, ceilings, p.devices) if seconds else {}),
        **metrics.energy(p, seconds, watts), **fields,
    )


def _rated(soak: Soak, work: int, traffic: int) -> Soak:
    """A soak's bins with each median kernel time as TFLOP/s, by the rates every reader uses."""
    points = [pt.model_copy(update={"tflops": metrics.rates(work, traffic, pt.median_s)["tflops"] if pt.median_s
                                    else None}) for pt in soak.points]
    return soak.model_copy(update={"points": points})
