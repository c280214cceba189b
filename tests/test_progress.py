"""runner/progress.py: one line per finished cell, plain where stdout is a log and beside a bar on a terminal."""

from __future__ import annotations

import io

from rich.console import Console

from runner.cells import Cell
from runner.progress import PlainProgress, RichProgress, outcome, progress_for
from test_results import record

REASON = "needs tokamax: pip install 'attnbench[tokamax]'"


def cell_of(r) -> Cell:
    return Cell(r.experiment, r.variant, r.params)


def test_an_ok_cell_says_its_time_and_rate_and_any_other_its_reason():
    ok = record("xla")
    assert outcome(ok) == f"ok {ok.median_s * 1e3:.4g} ms (wall) {ok.tflops:.3g} TFLOP/s"
    assert outcome(record("xla", "skipped", reason=REASON)) == f"skipped: {REASON}"


def test_plain_progress_numbers_its_lines_of_the_total():
    stream = io.StringIO()
    cells = [record("xla"), record("naive", "skipped", reason=REASON)]
    with PlainProgress(len(cells), stream) as progress:
        for r in cells:
            progress.finished(cell_of(r), r)
    assert stream.getvalue().splitlines() == [f"[1/2] {cell_of(cells[0]).label()}: {outcome(cells[0])}",
                                              f"[2/2] {cell_of(cells[1]).label()}: skipped: {REASON}"]


def test_a_terminal_gets_the_bar_and_a_reason_prints_as_text_not_markup():
    console = Console(record=True, width=200, force_terminal=True)
    assert isinstance(progress_for(1, Console(file=io.StringIO())), PlainProgress)
    assert isinstance(progress_for(1, console), RichProgress)
    skipped = record("naive", "skipped", reason=REASON)
    with RichProgress(1, console) as progress:
        progress.finished(cell_of(skipped), skipped)
    assert f"skipped: {REASON}" in console.export_text()
