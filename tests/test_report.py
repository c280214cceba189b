"""runner/report.py: the tables `attnbench show` prints, and a run's cells exported as csv, markdown or parquet."""

from __future__ import annotations

import html

import pandas as pd
import pytest
from rich.console import Console

from helpers import REPO, params
from runner.frames import cells as frame
from runner.marks import UNSETTLED_WHY, noise_text
from runner.report import export, markdown, markdown_table, phase_line, print_tables, serving_rows, summary_line
from runner.spool import Totals
from runner.store import read_run
from stores import CPU_LAB5, H200_LAB5, H200_LAB5_NO_TE, H200_LONG, SHIPPED, shipped, telemetry
from test_results import record, some_records


def test_a_cells_note_prints_as_text_not_markup():
    cell = shipped(H200_LONG).cells[0].model_copy(update=dict(
        status="skipped", correctness=None, reason="needs tokamax: pip install 'attnbench[tokamax]' [clock moved 9%]"))
    console = Console(record=True, width=400)
    print_tables([cell], console)
    assert "pip install 'attnbench[tokamax]' [clock moved 9%]" in console.export_text()


def test_a_time_that_did_not_converge_says_so_in_its_note():
    """`show`, a run's closing tables and the report's cell tables: a headline time whose noise never met its target
    ends its note with how noisy it stayed and on how many samples; a converged one says nothing."""
    ok = [c for c in shipped(CPU_LAB5).cells if c.status == "ok"]
    loose = next(c for c in ok if not c.timings[0].converged)
    settled = next(c for c in ok if c.timings[0].converged)
    console = Console(record=True, width=400)
    print_tables([loose, settled], console)
    rows = [line for line in console.export_text().splitlines() if " ok " in line]
    headline = loose.timings[0]
    assert rows[0].rstrip(" │").endswith(f"[† not converged: noise {noise_text(headline.noise)} on {headline.samples} samples]")
    assert "not converged" not in rows[1]


def test_a_moved_clock_says_how_far_in_tenths_below_10_percent():
    """A clock that moved 2.3 % (more than power.UNSTABLE_SPREAD's 2 %) read '[⚠ unsettled: clock moved 2%]' in whole
    percent: the note gives it as marks.noise_text gives a noise, '2.3%'."""
    cell = telemetry(next(c for c in shipped(H200_LAB5).cells if c.status == "ok"), unstable=True)
    cell = cell.model_copy(update={"telemetry": cell.telemetry.model_copy(update={"clock_spread": 0.023})})
    console = Console(record=True, width=400)
    print_tables([cell], console)
    assert "[⚠ unsettled: power state not settled, clock moved 2.3%]" in console.export_text()


def test_a_table_with_a_cell_past_100_percent_copy_says_why_naming_the_runs_gpu():
    """decode-20261202's pallas_decode reads 108.2 % of the copy measured on its H200: show, a run's closing tables
    and the report say under its table why that is no error, naming the GPU the copy was measured on (review s11,
    finding 5: show printed it with no word, the dashboard named an H200's nominal rate whatever the GPU); a table
    whose cells stay under 100 % says nothing of it."""
    from runner.artifacts import cells_html
    from runner.record import gpu_model
    from runner.report import copy_passed

    decode = read_run(SHIPPED / "h200" / "decode-20261202")
    said = copy_passed(gpu_model(decode.manifest))
    assert max(c.pct_of_bandwidth or 0 for c in decode.cells) > 100 and "this run's NVIDIA H200" in said
    console = Console(record=True, width=400)
    print_tables(decode.cells, console, decode.manifest.machine)
    assert said in console.export_text()
    assert html.escape(said, quote=True) in cells_html("decode", decode.cells, decode.manifest.machine)
    under = [c.model_copy(update={"pct_of_bandwidth": 99.0}) for c in decode.cells]
    console = Console(record=True, width=400)
    print_tables(under, console, decode.manifest.machine)
    assert "100 %" not in console.export_text() and "100 %" not in cells_html("decode", under, None)


def test_a_table_of_packed_rows_or_serving_cells_says_what_their_flops_and_bytes_count():
    """An ML walk's packed row read a quarter of the unpacked row's TFLOP/s at about its time, and a ragged decode's
    GB/s stood beside pools and caches of other sizes, with no word under either table of what they count (docs/specs.md
    and results.md said it): show, a run's closing tables and the report say it under the experiment's table, only
    where such a rate is shown."""
    from runner.artifacts import cells_html
    from runner.report import PACKED_FLOPS, SERVING_BYTES

    packed = record(params=params(seq_len=16, causal=True, documents=4))
    serving = record(params=params(seq_len=1, kv_seq_len=16, kv_lengths="uniform", page_size=4))
    plain = record()
    for cells, said in (([plain, packed], [PACKED_FLOPS]), ([serving], [SERVING_BYTES]), ([plain], []),
                        ([record("xla", "skipped", params=packed.params, reason="r")], [])):
        console = Console(record=True, width=400)
        print_tables(cells, console)
        text, page = console.export_text(), cells_html("exp", cells, None)
        for sentence in (PACKED_FLOPS, SERVING_BYTES):
            assert (sentence in text.replace("\n", " ")) == (sentence in said)
            assert (html.escape(sentence, quote=True) in page) == (sentence in said)


def test_the_boards_heading_says_a_shape_one_variant_ran_alone_is_not_on_it():
    """An ML walk's decode shapes (xla_paged alone paged, xla alone dense) were missing from show's board, whose
    heading said 'per shape' where the dashboard's caption says 'where two or more variants ran correctly'."""
    from runner.artifacts import leaderboard_html
    from runner.leaderboard import contested, leaderboard
    from runner.report import leaderboard_table

    alone = params(seq_len=16, causal=True)
    cells = [record("xla"), record("naive"), record("xla", params=alone)]
    console = Console(record=True, width=400)
    leaderboard_table(cells, console)
    board = contested(leaderboard(cells))
    assert len(board) == 1 and "where two or more variants ran correctly" in console.export_text()
    assert "where two or more variants ran correctly" in leaderboard_html(board, {})


def test_summary_line_counts_statuses():
    assert summary_line(some_records()) == "5 cells: 1 incorrect, 2 ok, 1 oom, 1 skipped"
    assert summary_line(some_records()[:1]) == "1 cell: 1 " + some_records()[0].status  # not '1 cells'
    assert summary_line(some_records() * 250).startswith("1,250 cells: 250 incorrect, 500 ok")  # as validate counts
    assert summary_line([]) == "0 cells"  # a run of none: not "0 cells: ", an empty list after a colon


def test_export_csv_has_one_row_per_cell(tmp_path):
    records = some_records()
    text = export(records, "csv", None)
    df = pd.read_csv(pd.io.common.StringIO(text))
    assert list(df["variant"]) == [r.variant for r in records]
    assert list(df["status"]) == [r.status for r in records]
    assert list(df["key"]) == [r.key for r in records]
    assert df.loc[0, "wall_median_s"] == pytest.approx(1e-4)
    dest = tmp_path / "cells.csv"
    assert export(records, "csv", dest) is None
    assert dest.read_text() == text


def test_export_markdown_is_a_table(tmp_path):
    records = some_records()
    text = export(records, "markdown", None)
    lines = text.splitlines()
    columns = list(frame(records).columns)
    assert lines[0] == "| " + " | ".join(columns) + " |"
    assert lines[1] == "|" + "---|" * len(columns)
    assert len(lines) == 2 + len(records)
    rows = [lines[0], *lines[2:]]
    assert all(line.startswith("| ") and line.endswith(" |") for line in rows)
    assert all(line.count(" | ") == len(columns) - 1 for line in rows)  # no cell breaks a row
    assert "| cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; this run is on cpu |" in lines[4]
    assert markdown(frame(records)) == text


def test_markdown_escapes_a_pipe_in_a_reason():
    failed = record("xla", "failed", reason="ValueError: expected int | str")
    lines = export([failed], "markdown", None).splitlines()
    assert lines[2].count(" | ") == lines[0].count(" | ")
    assert "| ValueError: expected int \\| str |" in lines[2]


def test_export_parquet_reads_back(tmp_path):
    records = some_records()
    dest = tmp_path / "cells.parquet"
    assert export(records, "parquet", dest) is None
    df = pd.read_parquet(dest)
    assert list(df["key"]) == [r.key for r in records]
    assert list(df["status"]) == [r.status for r in records]
    assert df["flops"].tolist() == [r.flops for r in records]


def test_export_parquet_of_forward_cells_only(tmp_path):
    # no gradients anywhere: the grad_rel_err column is all None
    records = [record(params=params()), record("naive", params=params(causal=True))]
    for r in records:
        r.correctness.grad_rel_err = None
    dest = tmp_path / "fwd.parquet"
    export(records, "parquet", dest)
    assert len(pd.read_parquet(dest)) == 2


def test_a_pipe_or_a_line_break_in_a_value_stays_in_its_cell():
    lines = markdown_table(["experiment", "ms"], [["a | b\nc", 1.5]]).splitlines()
    assert lines == ["| experiment | ms |", "|---|---|", "| a \\| b c | 1.5 |"]


def test_show_prints_microseconds_per_generated_token_for_serving_cells_only():
    """B8 x T2 new tokens in 0.8 ms: 50 µs a token (beside % copy where a GPU fills it: after GB/s here, a CPU's
    record); a prefill experiment has no such column."""
    decode = params(batch=8, seq_len=2, kv_seq_len=64, causal=True, kv_lengths="uniform", page_size=16)
    serving = record(params=decode).model_copy(update=dict(experiment="decode", median_s=8e-4))
    console = Console(record=True, width=400)
    print_tables([serving, some_records()[0]], console)
    decode_table, prefill_table = console.export_text().split("\nexp ")
    header = [h.strip() for h in next(line for line in decode_table.splitlines() if "µs/token" in line).split("┃")]
    row = [v.strip() for v in next(line for line in decode_table.splitlines() if "│ xla " in line).split("│")]
    assert header.index("µs/token") == header.index("GB/s") + 1 and dict(zip(header, row))["µs/token"] == "50"
    assert "µs/token" not in prefill_table


def test_an_optional_column_goes_after_the_one_it_belongs_beside_wherever_that_stands(monkeypatch):
    """% MMA@clock follows TFLOP/s and µs/token follows % copy by name, not by a count of the columns before them."""
    from runner import report

    run = shipped(H200_LONG)
    decode = params(batch=8, seq_len=2, kv_seq_len=64, causal=True, kv_lengths="uniform", page_size=16,
                    dtype=run.cells[0].params.dtype)  # one the GPU has an MMA rate for
    serving = telemetry(run.cells[0]).model_copy(update=dict(params=decode, pct_of_bandwidth=40.0))  # a clock, a copy
    monkeypatch.setattr(report, "COLUMNS", [("first", False, lambda c: "x"), *report.COLUMNS])
    header = report.experiment_grid("e", [serving], run.manifest.machine).header
    assert header.index("% MMA@clock") == header.index("TFLOP/s") + 1
    assert header.index("µs/token") == header.index("% copy") + 1


def test_show_sets_each_serving_cell_beside_the_same_shape_without_its_paging_shuffling_raggedness_or_new_tokens():
    """Paging beside the fastest dense cell of any variant (cudnn's 0.8 ms, not xla's 1 ms), the rest beside the same
    variant's cell, in any experiment, a row per cost in turn; a paged cell with its lengths unset reads as equal; a
    cell whose plainer one did not run, or ran not ok, has no row; a cell that is no serving cell has none either; a
    cost not beyond both cells' noise (20 % each here) is marked within noise, as the leaderboard marks a margin."""
    def cell(variant: str, ms: float, experiment: str = "serve", status: str = "ok", **shape):
        p = params(batch=4, seq_len=shape.pop("seq_len", 1), kv_seq_len=256, causal=True, **shape)
        return record(variant, status, params=p).model_copy(update=dict(experiment=experiment, median_s=ms / 1e3))

    equal = dict(kv_lengths="equal")
    cells = [cell("xla", 1.0, **equal), cell("cudnn", 0.8, "dense", **equal), cell("xla_paged", 1.5, page_size=16),
             cell("xla_paged", 1.8, page_size=16, page_order="shuffled", kv_lengths="equal"),
             cell("xla", 1.2, kv_lengths="uniform"), cell("xla", 2.0, seq_len=4, **equal),
             cell("xla", 9.0, seq_len=4, kv_lengths="bimodal"),  # no bimodal T1, no ok T4 equal of cudnn
             cell("cudnn", 0.5, status="failed", seq_len=4, **equal), cell("xla", 3.0, seq_len=2, kv_lengths=None)]
    rows = [(r["cost of"], r["variant"], r["shape"], r["beside"], r["cost"]) for r in serving_rows(cells)]
    base = "B4 T1 S256 N4 H8 float32 causal fwd"
    assert rows == [
        ("paging", "xla_paged", f"{base} P16", "cudnn, dense", "+87.5%"),
        ("paging", "xla_paged", f"{base} kv-equal P16 shuffled", "cudnn, dense", "+125.0%"),
        ("shuffled pages", "xla_paged", f"{base} kv-equal P16 shuffled", "xla_paged, contiguous", "+20.0% (within noise)"),
        ("ragged lengths", "xla", f"{base} kv-uniform", "xla, equal lengths", "+20.0% (within noise)"),
        ("ragged lengths", "xla", f"{base.replace('T1', 'T4')} kv-bimodal", "xla, equal lengths", "+350.0%"),
        ("new tokens", "xla", f"{base.replace('T1', 'T4')} kv-equal", "xla, T1", "+100.0%"),
    ], rows


def test_show_prints_the_cost_of_paging_and_new_tokens_of_the_cpu_serving_fixture(capsys):
    """tests/fixtures/serving-cpu: xla_paged beside xla at each of B 1/8 x KV 2k/8k x T 1/8, T 8 beside T 1."""
    from helpers import REPO, in_process
    from runner.store import read_run

    folder = REPO / "tests" / "fixtures" / "serving-cpu" / "serving-cpu-20261206"
    rows = serving_rows(read_run(folder).cells)
    assert sorted((r["cost of"], r["variant"]) for r in rows) == sorted(
        [("paging", "xla_paged")] * 8 + [("new tokens", "xla")] * 4 + [("new tokens", "xla_paged")] * 4)
    result = in_process(capsys, "show", folder)
    assert result.code == 0 and "serving: each cell beside the same shape without its paging" in result.out


def test_the_phase_line_says_none_when_no_cell_spent_a_phase():
    assert phase_line(Totals()) == "seconds by phase (0.0 in cells): none"  # a run whose cells were all skipped
    assert phase_line(Totals({"compile": 1.0, "sample": 2.5}, 4.0)) == "seconds by phase (4.0 in cells): sample 2.5, compile 1.0"



def shown_rows(cells) -> list[dict[str, str]]:
    """print_tables' rows of one experiment by header."""
    console = Console(record=True, width=400)
    print_tables(cells, console)
    lines = [[c.strip() for c in line.replace("┃", "│").split("│")[1:-1]] for line in console.export_text().splitlines()
             if line.startswith(("│", "┃"))]
    return [dict(zip(lines[0], row)) for row in lines[1:]]


def test_show_prints_a_swept_axis_as_a_reader_reads_it_and_the_csv_keeps_sizes_whole():
    """No window, dense, yes and no, not Python's None and True; a dense cell's page order is not one; kv_lengths'
    header is its name (kv- is a label's prefix); the CSV writes page_size 16 (not 16.0) and seconds per token."""
    def cell(ms: float = 0.8, **shape):
        p = params(batch=8, seq_len=2, kv_seq_len=64, causal=True, **shape)
        return record(params=p).model_copy(update=dict(experiment="e", median_s=ms / 1e3))

    serving = [cell(kv_lengths=k, page_size=p, page_order="shuffled") for k in ("equal", "uniform") for p in (16, None)]
    rows = shown_rows(serving)
    assert [(r["kv_lengths"], r["P"], r["page_order"]) for r in rows] == [
        ("equal", "16", "shuffled"), ("equal", "dense", "-"), ("uniform", "16", "shuffled"), ("uniform", "dense", "-")]
    prefill = [cell(window=w, deterministic=d, pass_="fwd_bwd") for w in (None, 8) for d in (False, True)]
    assert [(r["W"], r["deterministic"]) for r in shown_rows(prefill)] == [
        ("no window", "no"), ("no window", "yes"), ("8", "no"), ("8", "yes")]
    import csv
    import io

    table = list(csv.DictReader(io.StringIO(export(serving, "csv", None))))
    assert [r["page_size"] for r in table] == ["16", "", "16", ""]
    assert [float(r["seconds_per_token"]) for r in table] == pytest.approx([0.8e-3 / 16] * 4)  # B8 x T2 new tokens


def test_a_compared_pair_either_side_of_which_was_sampled_unsettled_says_which():
    """compare's cell table names the side(s) whose power state never settled or whose clock moved: their ratio is
    power state as well as code (the report's Slower table and the dashboard's every-cell table carry it)."""
    from runner import compare
    from runner.record import PowerState
    from runner.report import comparison_sections, verdict
    from stores import retimed

    run = shipped(H200_LONG)
    ok = [c for c in run.cells if c.status == "ok"]
    rough, moving = ok[0].key, ok[1].key
    b = [retimed(c, 2.0).model_copy(update={"power": PowerState(policy="steady", settled=c.key != rough),
                                            "clock_unstable": c.key == moving}) for c in run.cells]
    a = [c.model_copy(update={"clock_unstable": c.key == moving}) for c in run.cells]
    found = compare.compare(frame(a), frame(b), run.manifest, run.manifest)
    said = dict(zip(found.cells["key"], found.cells["unsettled"]))
    assert said.pop(rough) == "B" and said.pop(moving) == "A, B" and set(said.values()) == {""}
    slower = dict(comparison_sections(found))["Slower (regressions)"].set_index("key")["unsettled"]
    assert slower[rough] == "B" and slower[moving] == "A, B"
    settled = compare.compare(frame(run.cells), frame([retimed(c, 2.0) for c in run.cells]), run.manifest, run.manifest)
    assert set(settled.cells["unsettled"]) == {""}
    assert f"2 of those unsettled in A or B ({UNSETTLED_WHY})" in verdict(found) and "unsettled" not in verdict(settled)
    assert "unsettled" not in dict(comparison_sections(settled))["Slower (regressions)"]  # a column only where any is


def test_the_clock_column_is_shown_where_a_cell_of_the_experiment_fills_it():
    """A run on a CPU has no GPU clock: `show` printed its % MMA@clock column all dashes, which the run's closing
    tables left out. Both print through experiment_grid, which shows it where any cell has a clock."""
    from runner import report

    def header(cells, machine) -> list[str]:
        return report.experiment_grid("e", cells, machine).header

    cpu, gpu = shipped(CPU_LAB5), shipped(H200_LONG)
    assert "% MMA@clock" not in header(cpu.cells, cpu.manifest.machine)
    clocked = [telemetry(c) for c in gpu.cells]
    assert "% MMA@clock" in header(clocked, gpu.manifest.machine)
    assert "% MMA@clock" not in header(gpu.cells, gpu.manifest.machine)  # recorded before NVML's readings were


# --- a terminal's width: the tables of show and compare fitted to it (runner.report.fitted) --------------------------

WIDTHS = (80, 100, 120, 160)
SHOWN = ("h200/hopper-long-warm-20261202", "h200/lab5-warm-20261203-023042", "h200/llama3.1-70b-20261203",
         "h200/decode-20261202", CPU_LAB5)  # many GPU columns, many shape axes, serving columns, a CPU's few


def on_terminal(grid, width: int) -> str:
    """What print_grid writes to a terminal `width` columns wide, styles dropped."""
    import io

    console = Console(file=io.StringIO(), force_terminal=True, width=width, record=True)
    from runner.report import print_grid

    print_grid(grid, console)
    return console.export_text()


def cells_of(line: str) -> list[str]:
    return [cell.strip() for cell in line[1:-1].split(line[0])]


def read_back(text: str, whole: tuple[str, ...]) -> tuple[list[str], list[dict[str, str]], list[str] | None]:
    """A printed grid's header (each header's wrapped lines joined), the first line of each of its rows by header (a
    row starts where one of the `whole` columns, numbers that never wrap, has a value), and the columns its left-out
    line names."""
    import re

    lines = text.splitlines()
    header = [" ".join(filter(None, parts)) for parts in zip(*(cells_of(line) for line in lines if line[0] == "┃"))]
    numeric = [i for i, name in enumerate(header) if name in whole]
    body = [cells_of(line) for line in lines if line[0] == "│"]
    rows = [dict(zip(header, cells)) for cells in body if not numeric or any(cells[i] for i in numeric)]
    under = " ".join(line.strip() for line in lines[next(i for i, line in enumerate(lines) if line[0] == "└") + 1:])
    said = re.fullmatch(r"left out at \d+ columns: (.*) \(all in a wider terminal, or piped: \| less -S\)", under)
    assert said or not under, under
    return header, rows, said[1].split(", ") if said else None


def assert_whole(grid, width: int) -> list[str]:
    """At `width`: no line wider; every column but the grid's drops shown; each number of each row whole in its cell;
    the left-out line naming exactly the columns not shown. The columns left out."""
    text = on_terminal(grid, width)
    assert max(map(len, text.splitlines())) <= width
    header, rows, left_out = read_back(text, numbers_of(grid))
    dropped = [name for name in grid.header if name not in header]
    assert left_out == (dropped or None)
    droppable = {name for drop in grid.drops for name in ((drop,) if isinstance(drop, str) else drop)}
    assert set(dropped) <= droppable, f"{set(dropped) - droppable} left out, not among the drops"
    numbers = [name for name in header if name in numbers_of(grid)]
    if numbers:
        assert len(rows) == len(grid.rows)
        for row, shown in zip(grid.rows, rows):
            assert [shown[name] for name in numbers] == [row[grid.header.index(name)] for name in numbers]
    return dropped


def numbers_of(grid) -> tuple[str, ...]:
    """The grid's numeric columns that never wrap (a cost, '+3.1% (within noise)', may)."""
    return tuple(name for name in grid.right if name not in grid.wraps)


def experiment_grids(run) -> list:
    from runner.report import experiment_grid

    by_experiment: dict[str, list] = {}
    for c in run.cells:
        by_experiment.setdefault(c.experiment, []).append(c)
    return [experiment_grid(name, cells, run.manifest.machine) for name, cells in by_experiment.items()]


@pytest.mark.parametrize("folder", SHOWN)
def test_show_on_a_narrow_terminal_leaves_columns_out_and_cuts_no_number(folder):
    """show at 120 columns cut median ms and TFLOP/s to '6…' among 16 columns; now, at each width, the least needed
    columns go first (LEFT_OUT_FIRST), every number shown is whole, and a line names what was left out."""
    grids = experiment_grids(shipped(folder))
    dropped = {width: [assert_whole(grid, width) for grid in grids] for width in WIDTHS}
    assert any(dropped[80])  # each run's tables are too wide for 80 columns whole: the test leaves columns out
    for grid in grids:
        assert not assert_whole(grid, 400)  # wide enough: every column


@pytest.mark.parametrize("folder", [SHIPPED / "h200/hopper-long-warm-20261202", SHIPPED / "h200/llama3.1-70b-20261203",
                                    REPO / "tests/fixtures/serving-cpu/serving-cpu-20261206"])
def test_shows_leaderboard_and_the_tables_beside_it_fit_a_narrow_terminal_too(folder):
    """The leaderboard (its variant count and margin over auto first) and the tables beside it (the published
    figures' sources and cuDNN versions first; what a serving cost is set beside) leave columns out as the cells'
    tables do."""
    from runner.leaderboard import contested, leaderboard
    from runner.report import beside_tables, leaderboard_grid
    from runner.store import read_run

    run = read_run(folder)
    board = contested(leaderboard(run.cells, manifest=run.manifest))
    grids = [t.grid() for t in beside_tables(run.cells, run.manifest) if t.rows]
    assert grids
    grids += [leaderboard_grid(board)] if board else []  # a run of one variant a shape has no board
    for width in WIDTHS:
        for grid in grids:
            assert_whole(grid, width)


def test_a_narrow_terminal_leaves_out_no_more_than_it_must():
    """Each wrapping column (the note) is counted WRAP_MIN wide, not its widest value's, when a width is tried: counted
    whole, a 70-character FP8 verdict would leave out every column it could at 160."""
    fwd, _ = experiment_grids(shipped("h200/hopper-long-warm-20261202"))
    assert assert_whole(fwd, 160) == ["temp MiB"]
    assert assert_whole(fwd, 120) == ["timer", "wall ms", "SM MHz", "temp MiB", "backend"]


def test_where_even_the_columns_kept_do_not_fit_the_text_folds_and_the_numbers_stay_whole():
    """At 60 columns a run of seven shape axes cannot show its cells' names whole: the text columns fold onto more
    lines, never '…', each time, rate and shape axis keeps its width, and the table runs past 60 (69 wide: ten
    columns' rules and padding take 31) rather than cut one."""
    grid = experiment_grids(shipped("h200/llama3.1-70b-20261203"))[0]
    text = on_terminal(grid, 60)
    assert "…" not in text and max(map(len, text.splitlines())) == 69
    assert not cut_numbers(grid, 60) and any(line.startswith("│ n_fp") for line in text.splitlines())  # cudnn_fp8


def compared(a: str, b: str):
    from runner import compare

    run_a, run_b = shipped(a), shipped(b)
    return compare.compare(frame(run_a.cells), frame(run_b.cells), run_a.manifest, run_b.manifest)


@pytest.mark.parametrize("pair", [("h200/hopper-long-warm-20261202", "h200/hopper-long-warm-20261203-023241"),
                                  ("h200/lab5-warm-20261202-182308", "h200/lab5-warm-20261203-023042"),
                                  (H200_LAB5_NO_TE, H200_LAB5)])  # status changes, another kernel
def test_compare_on_a_narrow_terminal_keeps_each_time_and_ratio_whole(pair):
    """compare at 80 columns wrapped a shape over seven lines and cut the key, experiment and variant with '…'; now
    each table leaves out the key, then the noise, before a time, and folds only its shape, reasons and kernel names:
    the status changes and the kernels B ran too fit 80 columns with their cells' names whole."""
    from runner.report import comparison_grids

    grids = comparison_grids(compared(*pair))
    assert any("A ms" in grid.header for grid in grids)
    for width in WIDTHS:
        for grid in grids:
            assert_whole(grid, width)


def cut_numbers(grid, width: int) -> list[str]:
    """The numbers (runner.report.whole) of the columns shown at `width` that no line of their column holds whole."""
    from runner.report import fitted, whole

    left_out = fitted(grid, width)[1]
    shown = [name for name in grid.header if name not in left_out]
    body = [cells_of(line) for line in on_terminal(grid, width).splitlines() if line.startswith("│")]
    held = {name: {cells[i] for cells in body} for i, name in enumerate(shown)}
    values = {name: [str(row[grid.header.index(name)]).strip() for row in grid.rows] for name in shown}
    return [f"{name} {value}" for name in shown for value in values[name] if whole(value) and value not in held[name]]


def test_no_number_is_cut_across_lines_at_any_width():
    """Below ~50 columns show's shape axes folded (T 4096 as '40' over '96') and compare's geomean ('0.985×' as '0.98'
    over '5×'): only Grid.right's columns kept their width. A column now keeps its numbers whole by what it holds, at
    every width from 30 to 130; where even the columns that stay do not fit, text folds and the table runs past the
    terminal."""
    from runner.report import comparison_grids

    grids = [*experiment_grids(shipped("h200/hopper-long-warm-20261202")), *experiment_grids(shipped(CPU_LAB5)),
             *comparison_grids(compared("h200/hopper-long-warm-20261202", "h200/hopper-long-cold-20261202-182618"))]
    assert any("geomean B/A" in grid.header for grid in grids)
    for width in range(30, 131):
        for grid in grids:
            assert not cut_numbers(grid, width), (width, grid.title)
    assert max(map(len, on_terminal(grids[0], 40).splitlines())) > 40  # too narrow for what stays: it runs past
    assert all(max(map(len, on_terminal(grid, 400).splitlines())) < 400 for grid in grids)  # never padded to a width


def test_runs_on_a_narrow_terminal_leaves_out_the_device_before_it_folds_a_run_id():
    """At 59 columns runs folded 'decode-20261' over '202' and kept the device, NVIDIA H200 on every row: the run id,
    which one copies into show, is never folded, and the shard (where none is sharded), the settings, how long it took
    and the device go first; the power policy, which sets steady and burst runs apart, goes last and folds its words
    first (80 columns keep it)."""
    from runner.report import fitted, runs_grid
    from runner.store import LocalStore

    store = LocalStore(SHIPPED / "h200")
    grid = runs_grid([store.read(run_id) for run_id in store.runs()], store.uri)
    assert fitted(grid, 59)[1] == ["name", "device", "power", "settings", "started", "shard", "took"]
    assert fitted(grid, 80)[1] == ["name", "device", "settings", "started", "shard", "took"]
    assert fitted(grid, 120)[1] == ["name", "settings", "started", "shard"]  # how long each took, beside its device
    for width in (40, 59, 80):
        text = on_terminal(grid, width)
        ids = {cells_of(line)[0] for line in text.splitlines() if line.startswith("│")}
        assert set(store.runs()) <= ids, width


def test_a_pipe_keeps_every_column_however_wide_the_table():
    """Piped output is read by scripts: PIPE_WIDTH wide, every column kept, no left-out line, where a terminal as wide
    leaves columns out."""
    import io

    from runner.cli import PIPE_WIDTH
    from runner.report import Grid, print_grid

    header = [f"c{i}" for i in range(30)]
    grid = Grid("wide", header, [["123456"] * 30], right=tuple(header), drops=tuple(header[1:]))
    piped = Console(file=io.StringIO(), width=PIPE_WIDTH, record=True)  # not a terminal
    print_grid(grid, piped)
    shown, _, left_out = read_back(piped.export_text(), ())
    assert shown == header and left_out is None
    assert assert_whole(grid, PIPE_WIDTH)  # a terminal: some left out


def test_the_columns_left_out_first_are_columns_a_run_has():
    """LEFT_OUT_FIRST names measurement columns by header: a header renamed would leave its column never left out."""
    from runner import report

    headers = {name for name, _, _ in [*report.COLUMNS, report.TOKEN_COLUMN, report.clock_column(None)]}
    assert set(report.LEFT_OUT_FIRST) <= headers


def test_the_comparisons_counts_name_every_mark():
    """marks_said counts each mark's column of compare's frame, in its own order: a mark added to runner.marks.MARKS
    and left out of it would go uncounted in the verdict and the dashboard's Compare tab."""
    from runner.marks import MARKS
    from runner.report import marks_said

    cells = pd.DataFrame({mark.column: ["A", ""] for mark in MARKS})
    assert sorted(marks_said(cells)) == sorted(f"1 of those {mark.word} in A or B ({mark.why})" for mark in MARKS)
    assert marks_said(cells.iloc[1:]) == []


def test_how_warm_a_compile_cache_was_is_said_from_its_programs():
    """cache_said's three states, and nothing where no program's is known (the cache off)."""
    from runner.report import cache_said

    assert cache_said(76, 0) == "warm: 76 of 76 programs loaded"
    assert cache_said(0, 1) == "cold: 0 of 1 program loaded"
    assert cache_said(11, 55) == "partly warm: 11 of 66 programs loaded"
    assert cache_said(0, 0) is None


def test_the_facts_line_counts_the_programs_a_run_loaded_or_compiled_not_those_another_variant_shared():
    """The shipped cold and warm lab5 runs (one cache folder, the cold run first): 66 programs each, 9 cells more
    reused another variant's (compilation.shared_with), counted in neither; the cold run loaded the 11 programs
    another of its cells had compiled first. A run with the cache off says nothing of it."""
    from runner.report import run_facts

    facts = {run: run_facts(shipped(f"h200/{run}").manifest, shipped(f"h200/{run}").cells)
             for run in ("lab5-cold-20261202-182308", "lab5-warm-20261202-182308", "lab5-20261202-110556")}
    assert facts["lab5-cold-20261202-182308"][-2] == "compile cache partly warm: 11 of 66 programs loaded"
    assert facts["lab5-warm-20261202-182308"][-2] == "compile cache warm: 66 of 66 programs loaded"
    assert not any(fact.startswith("compile cache") for fact in facts["lab5-20261202-110556"])


def test_shows_header_cuts_the_git_sha_as_the_dashboard_does_and_keeps_dirty():
    """show's and the report's facts line prints the sha cut to 12 characters (runner.machine.short_sha, the
    dashboard's overview's), where the full 40 folded the power policy across two lines at 80 columns."""
    from runner.report import run_facts

    sha = "0123456789abcdef" * 2 + "01234567"
    manifest = shipped(H200_LONG).manifest
    assert f"git {sha[:12]}" in run_facts(manifest.model_copy(update={"git_sha": sha}), [])
    assert f"git {sha[:12]}-dirty" in run_facts(manifest.model_copy(update={"git_sha": sha + "-dirty"}), [])


def test_how_long_a_run_took_sums_its_cells_and_says_where_wall_time_spans_a_resume():
    """gemma2-27b-20261204 resumed across calls: 1,141 s from start to end, 219 s in its cells, 921 s of it with no
    cell measured; lab5's cold run of 12-03 took as long in cells as on the wall (benchmarks.md's phases: 45.4 s);
    a run not ended says so; a stretch shorter than IDLE_S (a worker starting) is no resume."""
    from runner.report import IDLE_S, took, took_said

    assert took(shipped("h200/gemma2-27b-20261204")) == (
        "219 s in cells · 1,141 s wall (resumed across calls, or paused: 921 s with no cell measured)")
    assert took(shipped("h200/lab5-cold-20261203-023042")) == "46 s in cells · 46 s wall"
    long = shipped(H200_LONG)
    run = long.manifest.model_copy(update={"started_at": "2026-12-10T00:00:00+00:00"})

    def spans(*started_seconds):
        return [long.cells[0].model_copy(update={"started_at": started, "duration_s": seconds})
                for started, seconds in started_seconds]

    cells = spans(("2026-12-10T00:00:05+00:00", 10.0), ("2026-12-10T00:00:15", 20.0))  # no zone: UTC
    assert took_said(run.model_copy(update={"ended_at": None}), cells) == "30 s in cells · not ended"
    ended = run.model_copy(update={"ended_at": f"2026-12-10T00:{(35 + IDLE_S) // 60:02d}:{(35 + IDLE_S) % 60:02d}"
                                               "+00:00"})
    assert took_said(ended, cells).endswith(f"{35 + IDLE_S} s wall (resumed across calls, or paused: {IDLE_S} s "
                                            "with no cell measured)")
    assert took_said(ended, cells + spans(("2026-12-10T00:00:36+00:00", IDLE_S - 2))).endswith(f"{35 + IDLE_S} s wall")
    assert took_said(None, cells) == ""


def test_no_cited_mma_rate_is_said_only_for_a_gpu_without_one_where_a_cell_has_tflops():
    """metrics.no_mma_rate's line (the L4 walk's finding 5) stands under a run's closing tables (print_tables) and its
    board where TFLOP/s stand on a GPU no cited MMA rate covers: not on an H200, not on a CPU, not under a table of
    cells that measured nothing, and the GPU's NVML name decides (an H20 is sm90 without GH100's rate)."""
    from runner import leaderboard, metrics
    from runner.report import unrated_notes

    gpu = shipped(H200_LONG)
    machine = gpu.manifest.machine

    def relabelled(name: str, capability: str):
        return machine.model_copy(update={"compute_capability": capability, "device_kind": name,
                                          "gpu": machine.gpu.model_copy(update={"name": name})})

    l4, h20 = relabelled("NVIDIA L4", "8.9"), relabelled("NVIDIA H20", "9.0")
    said = metrics.no_mma_rate(l4)
    assert said.startswith("% MMA@clock: no cited MMA rate for NVIDIA L4 (compute capability 8.9)")
    assert "NVIDIA H20 (compute capability 9.0)" in metrics.no_mma_rate(h20)
    assert metrics.no_mma_rate(machine) is None and metrics.no_mma_rate(shipped(CPU_LAB5).manifest.machine) is None
    assert unrated_notes(gpu.cells, l4) == [said] and unrated_notes(gpu.cells, machine) == []
    failed = [c.model_copy(update={"status": "failed", "tflops": None}) for c in gpu.cells]
    assert unrated_notes(failed, l4) == []
    console = Console(record=True, width=400)
    print_tables(gpu.cells, console, l4)  # a run's closing tables print as show's
    assert said in console.export_text()
    board = leaderboard.contested(leaderboard.leaderboard(gpu.cells, manifest=gpu.manifest))
    assert leaderboard.notes(board, {}, l4)[-1] == said and said not in leaderboard.notes(board, {}, machine)
    assert leaderboard.notes([], {}, l4) == []
