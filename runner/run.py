"""A run: the spec's cells measured in order, each record written as soon as it ends."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from rich.console import Console

from runner import machine
from runner.cells import Cell
from runner.measure import Measurer
from runner.progress import progress_for
from runner.record import Manifest
from runner.registry import VARIANTS, verdict
from runner.results import RunWriter
from runner.spec import Spec
from runner.spec import Timing as TimingSettings
from runner.timers import ColdDeviceTimer, DeviceTimer, WallTimer


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_run_id(spec: Spec) -> str:
    return f"{spec.name}-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}"


def skip_reason(cell: Cell) -> str | None:
    """Why the cell cannot run on this machine, or None."""
    return verdict(VARIANTS[cell.variant], cell.params, machine.current_device())


def timers_for_device(settings: TimingSettings) -> list:
    """Wall time everywhere; on an NVIDIA GPU also kernel time (CUPTI), hot and, if asked, L2-cold."""
    if machine.current_device().compute_capability is None:
        return [WallTimer()]
    return [WallTimer(), DeviceTimer()] + ([ColdDeviceTimer()] if settings.cold else [])


def execute(spec: Spec, cells: list[Cell], out: Path, run_id: str, console: Console, argv: list[str]) -> Path:
    """Measure every cell, appending each record to <out>/<run_id>/cells.jsonl as it ends; return the run folder."""
    manifest = Manifest(
        run_id=run_id,
        name=spec.name,
        spec=spec.model_dump(mode="json", by_alias=True),
        spec_hash=spec.digest(),
        started_at=now(),
        machine=machine.describe_here(),
        git_sha=machine.git_sha(),
        cells_planned=len(cells),
        argv=argv,
    )
    writer = RunWriter(out, manifest)
    measurer = Measurer(spec, timers_for_device(spec.timing), run_id, manifest.machine.matmul_peak_tflops)
    with progress_for(len(cells), console) as progress:
        for cell in cells:
            progress.started(cell)
            reason = skip_reason(cell)
            record = measurer.skipped(cell, reason) if reason else measurer.measure(cell)
            writer.append(record)
            progress.finished(cell, record)
    manifest.gpu_at_end = machine.gpu_readings()
    writer.finish(now())
    return writer.dir
