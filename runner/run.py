"""A run: the spec's cells measured in order, each record spooled as it ends and uploaded to the store promptly.

A rerun with the same run id resumes: cells the store or the spool already holds are skipped.
"""

from __future__ import annotations

import datetime as dt
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.console import Console

from runner import machine
from runner.cells import Cell
from runner.measure import Measurer
from runner.progress import progress_for
from runner.record import Manifest, utc_now
from runner.registry import VARIANTS, verdict
from runner.spec import Spec
from runner.spec import Timing as TimingSettings
from runner.spool import Spool, Uploader
from runner.store import Store, StoreUnavailable
from runner.timers import ColdDeviceTimer, DeviceTimer, WallTimer


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


@dataclass
class Outcome:
    """How a run ended: every cell done or stopped by SIGTERM, and whether the store holds it all."""

    finished: bool
    uploaded: bool
    done: int  # cells of this run (or shard) the spool holds
    planned: int
    error: str | None = None  # why the upload failed


@contextmanager
def stop_on_sigterm() -> Iterator[threading.Event]:
    """Inside: SIGTERM (a preemption notice) sets the event instead of ending the process."""
    stop = threading.Event()

    def requested(signum, frame) -> None:
        print("SIGTERM: stopping after the current cell", file=sys.stderr, flush=True)
        stop.set()

    previous = signal.signal(signal.SIGTERM, requested)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)


def already_done(uploader: Uploader) -> set[str]:
    """Keys of the cells the store or the spool holds; when the store is unreachable, the spool's alone."""
    try:
        done = uploader.pull()
    except StoreUnavailable as error:
        print(f"warning: {error}; resuming from the spool {uploader.spool.dir} alone", file=sys.stderr, flush=True)
        done = set()
    return done | uploader.spool.keys()


def measure_all(cells: list[Cell], measurer: Measurer, uploader: Uploader, console: Console,
                stop: threading.Event) -> bool:
    """Measure and spool each cell, the uploader told after each; False when `stop` ended it early."""
    with progress_for(len(cells), console) as progress:
        for cell in cells:
            if stop.is_set():
                return False
            progress.started(cell)
            reason = skip_reason(cell)
            record = measurer.skipped(cell, reason) if reason else measurer.measure(cell)
            uploader.spool.add(record)
            uploader.notify()
            progress.finished(cell, record)
    return True


def new_manifest(spec: Spec, spool: Spool, planned: int, argv: list[str]) -> Manifest:
    """This run's (or shard's) manifest; a resumed one keeps the first start time."""
    previous = spool.manifest()
    return Manifest(
        run_id=spool.run_id,
        name=spec.name,
        spec=spec.model_dump(mode="json", by_alias=True),
        spec_hash=spec.digest(),
        started_at=previous.started_at if previous else utc_now(),
        machine=machine.describe_here(),
        git_sha=machine.git_sha(),
        shard=spool.shard,
        cells_planned=planned,
        argv=argv,
    )


def measure_rest(spec: Spec, cells: list[Cell], uploader: Uploader, console: Console, argv: list[str],
                 stop: threading.Event) -> bool:
    """Skip what is done, measure the rest, close the manifest; False when `stop` ended it early."""
    spool = uploader.spool
    done = already_done(uploader)
    manifest = new_manifest(spec, spool, len(cells), argv)
    spool.write_manifest(manifest)
    todo = [c for c in cells if c.key not in done]
    if len(todo) < len(cells):
        console.print(f"resuming {spool.run_id}: {len(cells) - len(todo)} of {len(cells)} cells already done")
    measurer = Measurer(spec, timers_for_device(spec.timing), spool.run_id, manifest.machine.matmul_peak_tflops)
    uploader.start()
    if not measure_all(todo, measurer, uploader, console, stop):
        return False
    manifest.gpu_at_end = machine.gpu_readings()
    manifest.ended_at = utc_now()
    spool.write_manifest(manifest)
    return True


def execute(spec: Spec, cells: list[Cell], store: Store, spool: Spool, console: Console, argv: list[str],
            flush_every_s: float) -> Outcome:
    """Measure the cells that neither the store nor the spool holds yet; spool each record, upload it promptly."""
    uploader = Uploader(spool, store, flush_every_s)
    try:
        with stop_on_sigterm() as stop:
            finished = measure_rest(spec, cells, uploader, console, argv, stop)
    finally:  # an error or Ctrl-C too: upload what the spool holds
        uploaded = uploader.close()
    held = len(spool.keys() & {c.key for c in cells})
    return Outcome(finished, uploaded, held, len(cells), uploader.error)
