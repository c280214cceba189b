"""The marks (runner.marks): a cell is marked for the same reasons, with the same words, wherever it is shown."""

from __future__ import annotations

import ast
import io
import re

import pandas as pd
from rich.console import Console

from dashboard import charts, data, tables, views
from helpers import REPO, script
from runner import compare, figures, leaderboard, marks, report
from runner.frames import cells as frame
from runner.record import PowerState
from stores import H200_LAB5, SHIPPED, shipped, telemetry, write_run

WHY = marks.UNSETTLED_WHY


def unsettled_run(tmp_path):
    """lab5 on an H200 with the seq-len experiment's winner at T 512 sampled before its power state settled, on a
    clock that held (clock_unstable false): the dashboard's tables marked it nothing, the board and the results pages
    marked it unsettled (⚠), and show's note named only a moved clock."""
    run = shipped(H200_LAB5)
    seq = [c for c in run.cells if c.experiment == "seq-len" and c.status == "ok"]
    at_512 = [c for c in seq if c.params.seq_len == 512]
    winner = min(at_512, key=lambda c: c.median_s)
    settled = PowerState(policy="steady", settled=True, rule="held")
    cells = [c.model_copy(update={"power": PowerState(policy="steady", settled=False, rule="unsettled")
                                  if c.key == winner.key else settled, "clock_unstable": False}) for c in run.cells]
    write_run(tmp_path / "h200" / run.manifest.run_id, run.manifest, cells)
    return run.manifest.run_id, cells, winner.key


def test_an_unsettled_cell_on_a_steady_clock_is_marked_alike_on_every_surface(tmp_path):
    run_id, cells, key = unsettled_run(tmp_path)
    cell = next(c for c in cells if c.key == key)
    seq = [c for c in cells if c.experiment == "seq-len"]
    assert marks.marks_of(cell) == "⚠" and not cell.clock_unstable

    # the board: its name says unsettled, its key line says why in the marks' words
    board = leaderboard.contested(leaderboard.leaderboard(seq))
    row = next(r for r, s in zip(leaderboard.rows(board), board) if s.winner.variant == cell.variant
               and s.shape == leaderboard.label(cell.params.as_dict()))
    assert row["fastest"].endswith(f"({marks.UNSETTLED})")
    assert f"({marks.UNSETTLED}) {WHY}" in leaderboard.marks_key(board)

    # the results pages: the number carries ⚠, the key under the table says what it means
    chart = figures.sweep_chart("c", "seq-len", [(run_id, "", seq)])
    lines = script("scripts/results_pages.py").table(chart).splitlines()
    assert f"{cell.median_s * 1e3:.4g}⚠" in next(line for line in lines if line.startswith("| 512 |"))
    assert lines[-1] == f"*⚠ {marks.UNSETTLED}: {WHY}.*"

    # show and the report: the note names the mark and what the record says of it
    console = Console(file=io.StringIO(), record=True, width=400)
    report.print_tables([cell], console)
    assert f"[⚠ {marks.UNSETTLED}: power state not settled]" in console.export_text()

    # the dashboard: the nvbench table's entry carries ⚠, its legend the same key, the chart rings it
    snap = data.snapshot(str(tmp_path), data.RunCache())
    frame = tables.measured(tables.with_rates(snap.cells((run_id,)), snap.runs, "device"))
    rows = frame[frame["experiment"] == "seq-len"].assign(speedup=float("nan"))
    entry = tables.summary(rows).set_index("T").loc["512", cell.variant]
    assert " ⚠" in entry and tables.legend(rows) == f"⚠ {marks.UNSETTLED}: {WHY}"
    style = charts.Style(charts.colours(set(rows["variant"])), (run_id,))
    assert views.ringed(rows, views.Selection([run_id], rows, {}, "device", None, style)) == \
        f"⚠ 1 cell {marks.UNSETTLED} ({WHY}), ringed in red"
    chart = charts.lines(rows, "seq_len", "latency_ms", style, "seq-len", "")
    ringed = next(trace for trace in chart.data if trace.name == f"⚠ {marks.UNSETTLED}")
    assert list(ringed.x) == [512]


def test_the_caption_counts_the_unsettled_cells_the_chart_rings_of_the_drawn_runs_alone():
    """Of 7 selected runs a chart draws and rings the newest 6 (charts.MAX_RUNS): the caption counted the 7th's
    unsettled cells too (47 said, 39 ringed in hopper-long's fwd) and said 'its power state' of them all."""
    runs = [f"r{i}" for i in range(charts.MAX_RUNS + 1)]
    cells = pd.DataFrame({"run": runs, marks.UNSETTLED_MARK.column: True})
    sel = views.Selection(runs, cells, {}, "device", None, charts.Style({}, tuple(runs[:charts.MAX_RUNS])))
    assert views.ringed(cells, sel) == f"⚠ {charts.MAX_RUNS} cells {marks.UNSETTLED} (each {WHY}), ringed in red"


def test_the_key_names_each_mark_shown_in_one_order():
    assert marks.key("") == "" and marks.key("†⚠") == marks.key("⚠†")
    assert marks.key("†") == f"† {marks.NOT_CONVERGED}: {marks.NOT_CONVERGED_WHY}"


def test_the_overview_names_what_two_runs_differ_in_without_the_unsettled_mark():
    """⚠ means unsettled alone: the overview's line against the run before said '⚠ differs: version cudnn …', a run's
    environment under a cell's mark; it says 'differs: …', `attnbench compare`'s word."""
    snap = data.snapshot(str(SHIPPED), data.RunCache())
    run = H200_LAB5.rpartition("/")[2]
    cells = tables.with_rates(snap.cells((run,)), snap.runs, "device")
    sel = views.Selection([run], cells, {}, "device", None, charts.Style(charts.colours(set(cells["variant"])), (run,)))
    said = views._move(snap, run, sel)
    assert "; differs: version cudnn 9.19.0 → 9.14.0" in said and "⚠" not in said


def _prose(path) -> list[tuple[int, str]]:
    """The string literals of a module (f-strings' parts among them), docstrings left out: what it prints."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node)}
    return [(node.lineno, node.value) for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_module_but_marks_spells_a_marks_symbol_or_word_in_what_it_prints():
    """results_pages.py wrote '(⚠)' and '(†)', report.py and the dashboard 'not converged' and 'a side not converged'
    of their own: each reads runner.marks' constants, so a mark reworded there is reworded everywhere. A literal that
    is the word alone (a frame's column, the record's power rule) names a field, not a mark."""
    spelt = [mark.symbol for mark in marks.MARKS] + [mark.word for mark in marks.MARKS]
    found = [f"{path.relative_to(REPO)}:{line} {text!r}" for folder in ("runner", "dashboard", "scripts")
             for path in sorted((REPO / folder).glob("*.py")) if path.name != "marks.py"
             for line, text in _prose(path) if any(s in text for s in spelt) and not re.fullmatch(r"\w+", text)]
    assert found == []


def test_a_record_and_its_frame_row_are_unsettled_alike_for_either_half_of_the_rule():
    """The rule is written twice (runner.marks.unsettled on a record, runner.compare.unsettled on a frame, which
    pandas alone reads): a power state that never settled, a moved clock, both and neither, held together."""
    cell = next(c for c in shipped(H200_LAB5).cells if c.status == "ok")
    cells = [cell.model_copy(update={"power": PowerState(policy="steady", settled=settled), "clock_unstable": moved})
             for settled in (True, False) for moved in (False, True)]
    assert [marks.unsettled(c) for c in cells] == [False, True, True, True]
    assert compare.unsettled(frame(cells)).tolist() == [marks.unsettled(c) for c in cells]


def test_a_timing_on_too_few_samples_is_not_converged_alike_on_a_record_its_frame_row_and_the_board():
    """A burst cell's 2 or 3 samples say `converged: true` with a noise that is the spread of 2 or 3 numbers: under
    FEW_SAMPLES it is marked † (runner.marks.noise_unmet, derived as it is read) on the record, on its frame row
    (runner.compare.unconverged, which compare's verdicts read) and on the board, whose margin it is never decisive."""
    cell = next(c for c in shipped(H200_LAB5).cells if c.status == "ok")
    headline = next(t for t in cell.timings if t.timer == cell.timer)
    cells = [cell.model_copy(update={"key": f"k{n}", "variant": f"v{n}", "timings": [
        headline.model_copy(update={"samples": n, "converged": True, "noise": 0.0001,
                                    "median_s": headline.median_s * (1 + n / 10)})]}) for n in (3, 5)]
    expected = [True, False]
    assert [marks.unconverged(c) is not None for c in cells] == expected
    assert compare.unconverged(frame(cells), cell.timer).tolist() == expected
    assert [leaderboard.time_of(c).unconverged for c in cells] == expected
    (standing,) = leaderboard.leaderboard(cells)
    assert standing.margin > 0.1 and not standing.decisive


def test_a_noise_near_its_target_keeps_a_decimal():  # 2.2 % against a 2 % target read "noise 2%"
    assert [marks.noise_text(n) for n in (0.022, 0.004, 0.0999, 0.353, 1.5)] == ["2.2%", "0.4%", "10.0%", "35%", "150%"]


def test_what_an_unsettled_record_says_names_each_half_of_the_rule_that_holds():
    """show's and the report's note said which half of the unsettled rule held by a copy of the rule (report.py's
    _unsettled_said): the note and the mark read one rule (runner.marks.power_unsettled, the cell's clock_unstable), a
    power state not observed or settled saying nothing."""
    cell = telemetry(next(c for c in shipped(H200_LAB5).cells if c.status == "ok"), unstable=True)
    moved = f"clock moved {marks.noise_text(cell.telemetry.clock_spread)}"
    said = {(settled, clock): marks.UNSETTLED_MARK.said(cell.model_copy(update={
        "power": settled and PowerState(policy="steady", settled=settled == "settled"), "clock_unstable": clock}))
        for settled in (None, "settled", "unsettled") for clock in (False, True)}
    assert said == {(None, False): "", ("settled", False): "", ("unsettled", False): "power state not settled",
                    (None, True): moved, ("settled", True): moved,
                    ("unsettled", True): f"power state not settled, {moved}"}
