"""Progress: a rich bar with count and ETA on a terminal, one plain line per cell elsewhere (pod logs)."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from runner.cells import Cell
from runner.record import CellRecord


def outcome(record: CellRecord) -> str:
    """'ok 0.091 ms (device) 12.3 TFLOP/s' or 'skipped: reason'."""
    if record.status != "ok":
        return f"{record.status}: {record.reason}"
    return f"ok {record.median_s * 1e3:.4g} ms ({record.timer}) {record.tflops:.3g} TFLOP/s"


class PlainProgress:
    def __init__(self, total: int, stream=None):
        self.total, self.done, self.stream = total, 0, stream or sys.stdout  # sys.stdout now, not at import

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def started(self, cell: Cell) -> None:
        pass

    def finished(self, cell: Cell, record: CellRecord) -> None:
        self.done += 1
        print(f"[{self.done}/{self.total}] {cell.label()}: {outcome(record)}", file=self.stream, flush=True)


class RichProgress:
    def __init__(self, total: int, console: Console):
        self.console = console
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
        )
        self.task = self.bar.add_task("cells", total=total)

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)

    def started(self, cell: Cell) -> None:
        self.bar.update(self.task, description=cell.label())

    def finished(self, cell: Cell, record: CellRecord) -> None:
        style = {"ok": "green", "skipped": "yellow"}.get(record.status, "red")
        self.console.print(f"[{style}]{escape(cell.label())}[/]: {escape(outcome(record))}", highlight=False)
        self.bar.advance(self.task)


def progress_for(total: int, console: Console):
    """The progress display suited to where `console` goes (stdout for run, stderr for recheck, whose stdout carries
    the comparison)."""
    return RichProgress(total, console) if console.is_terminal else PlainProgress(total, console.file)
