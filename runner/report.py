"""The one printer: a run's cells, its leaderboard, the runs of a store, the variants here and two runs compared
(`attnbench compare`), as rich tables on a terminal and as GitHub markdown (a comparison also as json); csv or
parquet for export. pandas loads only for exports and comparisons (the CLI's quick commands stay quick). A terminal
table is a Grid of text that meets the terminal's width in `fitted`: no value cut short, the least needed columns left
out where it is narrow, and a line that says which."""

from __future__ import annotations

import json
import math
import os
import re
import textwrap
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from runner import counted, masks, metrics, paging, shape
from runner.cells import unsplit
from runner.machine import short_sha
from runner.marks import MARKS, NOT_CONVERGED, UNCONVERGED_MARK, UNSETTLED, UNSETTLED_MARK, Mark
from runner.record import (NONE_SET, NOT_RECORDED, CellRecord, gpu_model, gpu_name, policy_said, power_policy,
                           run_settings)
from runner.spool import Totals


def _fmt(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _flag(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "no"


def _timing_ms(c: CellRecord, timer: str) -> float | None:
    return next((t.median_s * 1e3 for t in c.timings if t.timer == timer), None)


def _marks(c: CellRecord) -> list[str]:
    """Each mark of the cell's headline time (runner.marks.MARKS), its symbol and word, with what the record says of
    it: '⚠ unsettled: power state not settled, clock moved 9%', '† not converged: noise 35% on 3 samples'."""
    return [f"{mark.symbol} {mark.word}: {mark.said(c)}" for mark in MARKS if mark.of(c)]


def _note(c: CellRecord) -> str:
    note = c.fp8.verdict if c.fp8 else c.reason
    return " ".join(part for part in [note, *(f"[{mark}]" for mark in _marks(c))] if part)


# Measurement columns: (header, right-aligned, getter). Beside device time, the host clock shows what the lab
# would have reported (dispatch included).
COLUMNS: list[tuple[str, bool, Callable[[CellRecord], str]]] = [
    ("median ms", True, lambda c: _fmt(c.median_s * 1e3 if c.median_s else None)),
    ("timer", False, lambda c: c.timer or "-"),
    ("wall ms", True, lambda c: _fmt(_timing_ms(c, "wall"))),  # the median too where wall is the timer (a CPU)
    ("TFLOP/s", True, lambda c: _fmt(c.tflops, 3)),
    ("GB/s", True, lambda c: _fmt(c.gbps, 3)),
    ("% copy", True, lambda c: _fmt(c.pct_of_bandwidth, 3)),  # of the copy bandwidth measured in the run
    ("SM MHz", True, lambda c: _fmt(c.telemetry.sm_clock_mhz.median if c.telemetry else None)),
    ("temp MiB", True, lambda c: _fmt(c.temp_bytes / 2**20 if c.temp_bytes is not None else None, 3)),
    ("backend", False, lambda c: c.backend or "-"),
    ("rel err", True, lambda c: _fmt(c.correctness.rel_err if c.correctness else None, 2)),
    ("note", False, _note),
]


def _us_per_token(c: CellRecord) -> float | None:
    """A serving cell's time per generated token (its B x T new tokens), in microseconds."""
    if not c.median_s or not paging.serving(c.params):
        return None
    return metrics.seconds_per_token(c.median_s, c.params.batch, c.params.seq_len) * 1e6


# Beside % copy where an experiment holds serving cells: what a decode step costs each token it generates
TOKEN_COLUMN = ("µs/token", True, lambda c: _fmt(_us_per_token(c), 3))


def clock_column(machine) -> tuple[str, bool, Callable[[CellRecord], str]]:
    """% of the GPU's dense MMA rate at each cell's sampled SM clock (runner.metrics.clock_peak), for the run's
    machine: its headline time's, where the clock was read over the headline's samples (none for a split cell, whose
    headline is wall)."""
    return "% MMA@clock", True, lambda c: _fmt(metrics.clock_peak(c, machine), 3)


def _after(header: str, column: tuple, columns: list[tuple]) -> list[tuple]:
    """`columns` with `column` put right after the one named `header`: where an optional column goes."""
    at = next(i for i, (name, _, _) in enumerate(columns) if name == header) + 1
    return columns[:at] + [column] + columns[at:]


# The measurement columns a terminal too narrow for a run's table leaves out (Grid.drops), first to last: the
# readings that explain a time before the time's own rates, the note last (a failure's reason, an FP8 verdict). The
# cell's name (variant, the shape axes that vary, status), its median ms and its TFLOP/s are never left out.
LEFT_OUT_FIRST = ("temp MiB", "SM MHz", "timer", "wall ms", "backend", "% copy", "GB/s", "rel err", "µs/token",
                  "% MMA@clock", "note")

# Columns that only a GPU fills (the copy bandwidth measured in the run, the SM clock NVML read, the % of the MMA peak
# at that clock): an experiment's table holds one where some cell has a value in it, so a CPU run's has no column of
# dashes.
GPU_ONLY = ("% copy", "SM MHz", "% MMA@clock")


def measured(c: CellRecord, columns: list[tuple]) -> list[str]:
    """A cell's measurement values under `columns`; dashes and its reason where it measured nothing."""
    if c.status == "ok" or c.correctness:
        return [get(c) for _, _, get in columns]
    return ["-"] * (len(columns) - 1) + [c.reason]


def measurement_columns(cells: list[CellRecord], machine=None) -> list[tuple]:
    """COLUMNS for an experiment's `cells`: % MMA@clock (given the run's machine) beside TFLOP/s, µs/token beside
    % copy where a cell serves, and each GPU_ONLY column only where some cell has a value in it."""
    columns = _after("TFLOP/s", clock_column(machine), COLUMNS)
    if any(paging.serving(c.params) for c in cells):
        columns = _after("% copy", TOKEN_COLUMN, columns)
    rows = [measured(c, columns) for c in cells]
    return [column for i, column in enumerate(columns)
            if column[0] not in GPU_ONLY or any(row[i] != "-" for row in rows)]


def experiment_grid(name: str, cells: list[CellRecord], machine=None) -> Grid:
    """Shape columns that vary within the experiment, then the measurements (measurement_columns: none that only a
    GPU fills on a CPU); constant ones in the title. A failed cell's row is red, a skipped one's yellow."""
    columns = measurement_columns(cells, machine)
    shapes = [c.params.as_dict() for c in cells]
    varying = [k for k in shape.NAMES if len({s[k] for s in shapes}) > 1]
    fixed = shape.label(shapes[0], omit=tuple(varying))
    header = ["variant", *(shape.column(k) for k in varying), "status", *(name for name, _, _ in columns)]
    rows = [[c.variant, *(shape.shown(k, values) for k in varying), c.status, *measured(c, columns)]
            for c, values in zip(cells, shapes)]
    return Grid(f"{name}  [dim]{fixed}[/]", header, rows, right=tuple(name for name, right, _ in columns if right),
                wraps=("note",), drops=LEFT_OUT_FIRST,
                styles=tuple({"ok": None, "skipped": "yellow"}.get(c.status, "red") for c in cells))


def print_tables(cells: list[CellRecord], console: Console, machine=None) -> None:
    """A table per experiment, its table_notes under it."""
    by_experiment: dict[str, list[CellRecord]] = {}
    for c in cells:
        by_experiment.setdefault(c.experiment, []).append(c)
    for name, group in by_experiment.items():
        print_grid(experiment_grid(name, group, machine), console)
        for note in notes_under(group, machine):
            print_prose(note, console)


PACKED_FLOPS = ("A packed row's FLOPs (docs above 1) count the query-key pairs inside each document alone, not the "
                "row's T × T: the work a kernel must do, so more documents a row read fewer TFLOP/s at the same time.")
SERVING_BYTES = ("A serving cell's bytes (kv lengths or pages set) count Q and the output once, and K and V once for "
                 "each request's real tokens: not a page pool's unused rows, the page table, or a dense cache's rows "
                 "past a request's length.")


def notes_under(cells: list[CellRecord], machine) -> list[str]:
    """The sentences under an experiment's table in show, a run's closing tables and the report: table_notes (the GPU
    of the run's `machine`), then unrated_notes."""
    return table_notes(cells, machine.gpu.name if machine and machine.gpu else None) + unrated_notes(cells, machine)


def table_notes(cells: list[CellRecord], gpu: str | None) -> list[str]:
    """The sentences under an experiment's table, each where a rate it speaks of is shown: what a packed row's FLOPs
    and a serving cell's bytes count, and why % copy above 100 is no error (copy_passed, `gpu` the run's)."""
    packed = any(c.tflops is not None and masks.packed(c.params) for c in cells)
    serving = any(c.gbps is not None and paging.serving(c.params) for c in cells)
    return rate_notes(packed, serving) + ([copy_passed(gpu)] if passes_copy(cells) else [])


def unrated_notes(cells: list[CellRecord], machine) -> list[str]:
    """Where `% MMA@clock` would stand under show's tables and a run's closing tables: runner.metrics.no_mma_rate's
    line, where a cell has TFLOP/s on a GPU (the run's `machine`) with no cited MMA rate."""
    said = metrics.no_mma_rate(machine)
    return [said] if said and any(c.tflops is not None for c in cells) else []


def rate_notes(packed: bool, serving: bool) -> list[str]:
    """The sentences that say what a rate counts: a packed row's FLOPs where `packed` (a packed row's TFLOP/s is
    shown), a serving cell's bytes where `serving` (a serving cell's GB/s is); table_notes' and the dashboard's
    Throughput tab's (dashboard.tables.rate_notes)."""
    return ([PACKED_FLOPS] if packed else []) + ([SERVING_BYTES] if serving else [])


def passes_copy(cells: list[CellRecord]) -> bool:
    """Whether a cell's rate passes the run's measured copy rate (% copy above 100), which copy_passed explains."""
    return any(c.pct_of_bandwidth is not None and c.pct_of_bandwidth > 100 for c in cells)


def copy_passed(gpu: str | None) -> str:
    """Why % copy above 100 is no error, the one sentence that show, a run's closing tables, the report and the
    dashboard's Throughput tab say wherever a cell passes it; `gpu`: the one GPU the copy was measured on, None where
    the cells are of several or it is not known."""
    where = f"this run's {gpu}" if gpu else "each run's GPU"
    return (f"% copy is a share of the rate of a device-memory copy measured on {where} (each byte read once and "
            "written once): a read-mostly stream, as decode reading its KV cache, can pass it, so above 100 % is "
            "expected there, not an error.")


WRAP_MIN = 14  # characters a line that a wrapping column (a note, a shape) keeps before a column is left out
FOLD_MIN = 4  # characters a line of folded text keeps where even the columns kept do not fit a terminal
NUMBER = re.compile(r"[-+±]?(\d[\d,]*(\.\d+)?|\.\d+)(e[-+]?\d+)?(/(\d+|\?))?\s?[×%]?")  # 0.985×, 1e-05, +3%, 8/10


def whole(value: str) -> bool:
    """Whether a value is number-like: one that is never cut across lines, at any width (a cut '40' over '96' reads
    as two numbers)."""
    return NUMBER.fullmatch(value.strip()) is not None


@dataclass(frozen=True)
class Grid:
    """A terminal table as text (a value never markup), before it meets a width: each value whole on its line but the
    `wraps` columns' (their words folded onto more lines where the table needs the room), and where a terminal is too
    narrow for that, the `drops` columns left out, first to last (fitted). A number (`whole`) is never cut, in any
    column, nor a value of a `kept` column (an id one copies)."""

    title: str  # markup: a dim part
    header: list[str]
    rows: list[list[str | Text]]  # Text where a value has a style of its own
    right: tuple[str, ...] = ()  # right-aligned: the numbers
    wraps: tuple[str, ...] = ()
    drops: tuple[str | tuple[str, ...], ...] = ()  # a tuple of names: left out together (A's and B's)
    styles: tuple[str | None, ...] = ()  # each row's, where rows have one
    kept: tuple[str, ...] = ()  # text columns whose values are never folded either

    def widths(self, shown: list[str], compact: bool) -> list[int]:
        """Each shown column's width: its widest value or its header, the header's longest word where `compact`
        (the header wraps); a wrapping column's at most WRAP_MIN."""
        return [self._width(self.header.index(name), compact) for name in shown]

    def _width(self, at: int, compact: bool) -> int:
        name = self.header[at]
        head = max(map(cell_len, name.split() or [""])) if compact else cell_len(name)
        widest = max([head, *(_text(row[at]).cell_len for row in self.rows)])
        return min(widest, max(WRAP_MIN, head)) if name in self.wraps else widest

    def floor(self, name: str) -> int:
        """The least width of a column: its widest number (every value of a `kept` column), else FOLD_MIN."""
        values = [_text(row[self.header.index(name)]) for row in self.rows]
        kept = [v.cell_len for v in values if name in self.kept or whole(v.plain)]
        return max([FOLD_MIN, *kept])


def _text(value: str | Text) -> Text:
    return value if isinstance(value, Text) else Text(value)


def _table_width(widths: list[int]) -> int:
    """A rich table's width, its columns `widths` wide: a space each side of each, a rule between two and at each
    edge."""
    return sum(widths) + 3 * len(widths) + 1


def fitted(grid: Grid, width: int, leave_out: bool = True) -> tuple[Table, list[str]]:
    """`grid` as a rich table `width` columns wide, and the columns left out for it (_shown; none where not
    `leave_out`, as in a pipe). Every column but a wrapping one gets a fixed width that holds its values whole, so rich
    narrows only the wrapping ones; where even the columns kept do not fit, each column narrows to no less than its
    floor (Grid.floor: its numbers whole), folding only text, and a table wider still runs past `width`: never a value
    cut short with '…', never a number cut across lines."""
    shown = _shown(grid, width) if leave_out else list(grid.header)
    widths = _fixed_widths(grid, shown, width)
    wider = None not in widths and _table_width(widths) > width  # rich expands a table given a width: only then
    table = Table(title=grid.title, title_justify="default",  # left, not padded to the table's width
                  width=_table_width(widths) if wider else None)
    for name, fixed in zip(shown, widths):
        table.add_column(name, justify="right" if name in grid.right else "left", overflow="fold", width=fixed)
    at = [grid.header.index(name) for name in shown]
    for row, style in zip(grid.rows, grid.styles or [None] * len(grid.rows)):
        table.add_row(*(_text(row[i]) for i in at), style=style)
    return table, [name for name in grid.header if name not in shown]


def _shown(grid: Grid, width: int) -> list[str]:
    """The grid's columns less as few of its drops, in their order, as let the rest fit `width` whole (headers
    wrapped at spaces, each wrapping column WRAP_MIN wide)."""
    shown = list(grid.header)
    for names in ((drop,) if isinstance(drop, str) else drop for drop in grid.drops):
        if _table_width(grid.widths(shown, compact=True)) <= width:
            break
        shown = [name for name in shown if name not in names]
    return shown


def _fixed_widths(grid: Grid, shown: list[str], width: int) -> list[int | None]:
    """The shown columns' widths: each header on one line where that fits, else wrapped at its spaces, the wrapping
    columns None (rich narrows those); where neither fits, narrowed (_narrowed)."""
    for compact in (False, True):
        if _table_width(widths := grid.widths(shown, compact)) <= width:
            return [None if name in grid.wraps else fixed for name, fixed in zip(shown, widths)]
    return _narrowed(widths, [min(grid.floor(name), fixed) for name, fixed in zip(shown, widths)], width)


def _narrowed(widths: list[int], floors: list[int], width: int) -> list[int]:
    """`widths` narrowed, the widest first, until the table fits `width` or each is at its floor."""
    widths = list(widths)
    while _table_width(widths) > width:
        narrowable = [i for i, (w, least) in enumerate(zip(widths, floors)) if w > least]
        if not narrowable:
            break
        widths[max(narrowable, key=lambda i: widths[i])] -= 1
    return widths


def print_grid(grid: Grid, console: Console) -> None:
    """`grid` at a terminal's width, a line under it naming the columns left out to fit (fitted); every column in a
    pipe, where a script or a log reads it (PIPE_WIDTH wide, runner.cli)."""
    table, left_out = fitted(grid, console.width, leave_out=console.is_terminal)
    console.print(table, crop=False)  # a table wider than the terminal (fitted) runs past it, its numbers whole
    if left_out:
        print_prose(f"left out at {console.width} columns: {', '.join(left_out)} (all in a wider terminal, or piped: "
                    "| less -S)", console)


# Prose on a terminal (compare's heading and verdict): broken first between clauses (after '; ' or ', ', before
# '· '), never between a number and a % or × after it ('5 %', the units compare's prose puts after numbers) nor inside a
# short parenthesis ('(A 76, B 76)'), each line after the first indented.
CLAUSE = re.compile(r"(?<=; )|(?<=, )|(?<= )(?=· )")
UNIT = re.compile(r"(?<=\d) (?=[%×])")
ASIDE = re.compile(r"\([^()]{1,20}\)")
SPACES = re.compile(r" {2,}")  # folded as one space: _with_clause takes a clause's first word to end at its first space
GLUE, INDENT = "\xa0", "  "  # textwrap never breaks at a no-break space


def folded(line: str, width: int) -> list[str]:
    """A line of prose as lines at most `width` wide: its clauses packed onto each line while they fit, a clause wider
    than a line broken at its spaces, each line after the first indented; never inside a word nor between a number
    and a % or × after it nor inside a short parenthesis, so a number or a run id stays whole (one wider than the
    terminal runs past it, alone on its line). The lines, stripped and joined by a space, read as `line`, each run of
    spaces in it one space."""
    if len(line) <= width:
        return [line]
    lines: list[str] = []
    glued = ASIDE.sub(lambda aside: aside[0].replace(" ", GLUE), UNIT.sub(GLUE, SPACES.sub(" ", line)))
    for clause in CLAUSE.split(glued):
        lines = _with_clause(lines, clause, width)
    return [part.rstrip().replace(GLUE, " ") for part in lines]


def _with_clause(lines: list[str], clause: str, width: int) -> list[str]:
    """`lines` and then `clause`: on the last line where it fits there, else on lines of its own; one wider than a
    line of its own starts on the last line where its first word fits there, broken at its spaces."""
    if lines and len((lines[-1] + clause).rstrip()) <= width:
        return [*lines[:-1], lines[-1] + clause]
    wide = len(INDENT + clause.rstrip()) > width
    carry = bool(lines) and wide and len(lines[-1] + clause.split(" ", 1)[0]) <= width
    kept, lead = (lines[:-1], lines[-1]) if carry else (lines, INDENT if lines else "")
    wrapped = textwrap.wrap(clause, width, initial_indent=lead, subsequent_indent=INDENT, break_long_words=False,
                            break_on_hyphens=False)
    return [*kept, *wrapped[:-1], wrapped[-1] + clause[len(clause.rstrip()):]]  # the space the next clause follows


def print_prose(line: str, console: Console) -> None:
    """A line of prose folded to a terminal's width (folded); whole in a pipe, where a log or a script reads it."""
    for part in folded(line, console.width) if console.is_terminal else [line]:
        console.print(escape(part), soft_wrap=True, highlight=False)


def markdown_table(header: list[str], rows: list[list]) -> str:
    """The one markdown writer: a GitHub table, a `|` in a value escaped and a line break made a space, so that the
    value stays one cell."""
    def cell(value) -> str:
        return " ".join(str(value).replace("|", "\\|").splitlines())

    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(cell, row)) + " |" for row in rows])


# What a terminal too narrow for the leaderboard leaves out, first to last; its shape, fastest variant, time and margin
# stay.
LEADERBOARD_LEFT_OUT_FIRST = ("variants", "auto", "next", "% MMA@clock", "fastest non-FP8")


def leaderboard_table(cells: list[CellRecord], console: Console,
                      legacy: Mapping[str, str] = MappingProxyType({}), manifest=None) -> None:
    """Per shape where two or more variants ran correctly: the fastest, its margin over the next and over auto, and
    with the run's `manifest` its % of the MMA peak at its clock and each side's cuDNN where they ran two releases;
    under it, what deprecated each legacy variant it names."""
    from runner.leaderboard import contested, leaderboard, notes

    board = contested(leaderboard(cells, manifest=manifest))
    if not board:
        return
    print_grid(leaderboard_grid(board, legacy), console)
    for note in notes(board, legacy, manifest.machine if manifest else None):
        console.print(escape(note), highlight=False)


def leaderboard_grid(standings: list, legacy: Mapping[str, str] = MappingProxyType({})) -> Grid:
    """runner.leaderboard's standings (one at least) as a terminal's table."""
    from runner.leaderboard import BOARD, rows

    body = rows(standings, legacy)
    return Grid(f"leaderboard: {BOARD}", list(body[0]),
                [list(row.values()) for row in body], right=("ms", "variants", "% MMA@clock"),
                wraps=("shape", "fastest", "next", "margin", "auto", "fastest non-FP8"),
                drops=LEADERBOARD_LEFT_OUT_FIRST)


def leaderboard_markdown(standings: list, legacy: Mapping[str, str] = MappingProxyType({}), machine=None) -> str:
    """runner.leaderboard's standings as a markdown table, what its marks mean, each legacy variant it names and, with
    the run's `machine`, a GPU without a cited MMA rate said under it (runner.leaderboard.notes); "" when there are
    none."""
    from runner.leaderboard import notes, rows

    body = rows(standings, legacy)
    if not body:
        return ""
    under = "".join(f"\n\n{note}" for note in notes(standings, legacy, machine))
    return markdown_table(list(body[0]), [list(row.values()) for row in body]) + under


def scaling_rows(cells: list[CellRecord]) -> list[dict[str, str]]:
    """Each ok cell of a variant that ran split across devices: its time, its scaling efficiency against the same
    cell on one device, and its communication against its compute where measured."""
    def unsplit_key(c: CellRecord) -> tuple:
        return c.experiment, c.variant, unsplit(c.params)

    ok = [c for c in cells if c.status == "ok" and c.median_s]
    one = {unsplit_key(c): c.median_s for c in ok if c.params.devices == 1}
    split = {(c.experiment, c.variant) for c in ok if c.params.devices > 1}
    rows = []
    for c in (c for c in ok if (c.experiment, c.variant) in split):
        base, comm = one.get(unsplit_key(c)), c.communication
        rows.append({
            "experiment": c.experiment, "variant": c.variant,
            "shape": shape.label(c.params.as_dict(), omit=("devices",)),
            "D": str(c.params.devices), "ms": _fmt(c.median_s * 1e3),
            "efficiency": _fmt(metrics.scaling_efficiency(base, c.params.devices, c.median_s) if base else None, 3),
            "comm ms": _fmt(comm.communication_s * 1e3 if comm else None, 3),
            "compute ms": _fmt(comm.compute_s * 1e3 if comm else None, 3),
        })
    return rows


def determinism_rows(cells: list[CellRecord]) -> list[dict[str, str]]:
    """Each correct cell that asked for a deterministic backward beside the same variant's cell at the same shape
    without (in any experiment of the run): the cost of determinism, measured."""
    def shape_of(c: CellRecord) -> str:
        return shape.label({**c.params.as_dict(), "deterministic": False})

    plain = {(c.variant, shape_of(c)): c for c in cells if c.status == "ok" and not c.params.deterministic}
    rows = []
    for c in cells:
        if c.status != "ok" or not c.params.deterministic or not c.median_s:
            continue
        if (base := plain.get((c.variant, shape_of(c)))) is not None and base.median_s:
            rows.append({"variant": c.variant, "shape": shape_of(c), "ms": _fmt(base.median_s * 1e3),
                         "deterministic ms": _fmt(c.median_s * 1e3), "cost": _cost(c, base),
                         "bits repeat": _flag(c.correctness.bitwise_repeat if c.correctness else None)})
    return rows


# What a serving cell adds over a plainer one at an otherwise equal shape: (the cost's name, whether the cell has
# it, the plainer cell's axes, what that cell is called). Paging is set beside the fastest dense cell of any variant
# (a paged kernel declines a dense cache), the rest beside the same variant's cell.
SERVING_COSTS = (
    ("paging", lambda p: p.page_size is not None, {"page_size": None, "page_order": "contiguous"}, "dense"),
    ("shuffled pages", lambda p: p.page_order == "shuffled", {"page_order": "contiguous"}, "contiguous"),
    ("ragged lengths", lambda p: p.kv_lengths not in (None, "equal"), {"kv_lengths": "equal"}, "equal lengths"),
    ("new tokens", lambda p: p.seq_len > 1, {"seq_len": 1}, "T1"),
)


def _serving_shape(values: dict) -> str:
    """A serving cell's shape as text, a paged cell's lengths unset read as equal (as runner.paging reads them)."""
    return shape.label({**values, "kv_lengths": values["kv_lengths"] or "equal"})


def serving_rows(cells: list[CellRecord]) -> list[dict[str, str]]:
    """Each correct serving cell beside the cell without its paging, its page shuffling, its ragged lengths or its
    T > 1 new tokens, at an otherwise equal shape (in any experiment of the run): the cost of each, measured."""
    ok = [c for c in cells if c.status == "ok" and c.median_s and paging.serving(c.params)]
    at = {}
    for c in ok:
        at.setdefault(_serving_shape(c.params.as_dict()), []).append(c)
    rows = []
    for cost, has, plainer, called in SERVING_COSTS:
        for c in (c for c in ok if has(c.params)):
            same = at.get(_serving_shape({**c.params.as_dict(), **plainer}), [])
            same = [b for b in same if b.variant == c.variant] if cost != "paging" else same
            if base := min(same, key=lambda b: b.median_s, default=None):
                rows.append(_cost_row(cost, c, base, called))
    return rows


def _cost_row(cost: str, c: CellRecord, base: CellRecord, called: str) -> dict[str, str]:
    return {"cost of": cost, "variant": c.variant, "shape": c.params.label(), "beside": f"{base.variant}, {called}",
            "ms": _fmt(c.median_s * 1e3), "beside ms": _fmt(base.median_s * 1e3),
            "cost": _cost(c, base)}


def _cost(c: CellRecord, base: CellRecord) -> str:
    """c's time over base's, as a cost; "(within noise)" where the gap is not beyond both cells' noise, as the
    leaderboard says of a margin (runner.leaderboard.Standing.decisive)."""
    gap = max(c.median_s, base.median_s) / min(c.median_s, base.median_s) - 1
    beyond = all(gap > noise for noise in (_noise(c), _noise(base)))
    return f"{c.median_s / base.median_s - 1:+.1%}" + ("" if beyond else " (within noise)")


def _noise(c: CellRecord) -> float:
    """The relative noise (IQR / median) of the cell's headline time."""
    return next((t.noise for t in c.timings if t.timer == c.timer), math.inf)


# The text columns of the tables beside the leaderboard that a terminal's table folds at spaces, and what a terminal too
# narrow for one leaves out, first to last (a name no table has is passed over): the sources and versions behind a
# published figure, the experiment (the shape names the pass), the % MMA columns, then what explains a cost beyond it.
BESIDE_WRAPS = ("shape", "beside", "cost", "published")
BESIDE_LEFT_OUT_FIRST = ("published", "published cuDNN", "our cuDNN", "experiment", "published % MMA@clock",
                         "measured % MMA@clock", "bits repeat", "compute ms", "comm ms", "beside", "beside ms")


@dataclass(frozen=True)
class Beside:
    """A table a run gets beside its cells and leaderboard, where it holds the cells for it."""

    title: str
    rows: list[dict[str, str]]
    right: tuple[str, ...]  # its numeric columns
    note: str | None = None  # one line under the rows, or in their stead: why some that were expected are missing

    @property
    def header(self) -> list[str]:
        """Every row's columns in their first order (a column only some rows have, too)."""
        return list(dict.fromkeys(name for row in self.rows for name in row))

    @property
    def heading(self) -> str:
        """The title as a section heading starts it (report's page and summary.md)."""
        return self.title[0].upper() + self.title[1:]

    def body(self) -> list[list[str]]:
        """The rows under `header`, "-" where a row lacks a column."""
        header = self.header
        return [[row.get(name, "-") for name in header] for row in self.rows]

    def grid(self) -> Grid:
        """The table as a terminal's (show's)."""
        return Grid(self.title, self.header, self.body(), right=self.right, wraps=BESIDE_WRAPS,
                    drops=BESIDE_LEFT_OUT_FIRST)


def published_rows(cells: list[CellRecord], manifest) -> list[dict[str, str]]:
    """Each measured cell beside the published figure at its shape (runner/published.py), if any."""
    from runner import published

    return [{name: _fmt(value) for name, value in row.items()}
            for row in published.beside(cells, manifest)]


def beside_tables(cells: list[CellRecord], manifest) -> list[Beside]:
    """The tables `show`, `attnbench report` (its page and summary.md) give a run beside its cells and leaderboard:
    scaling across devices, the cost of a deterministic backward, of paging, shuffled pages, ragged lengths and new
    tokens, and the published figures at its shapes; each only where the run holds the cells for it, or where a run on
    a GPU finds the published figures' folder without them (its note says so)."""
    from runner import published

    tables = [
        Beside("scaling: t(1) / (D x t(D)) against the variant's one-device cell", scaling_rows(cells),
               ("D", "ms", "efficiency", "comm ms", "compute ms")),
        Beside("deterministic backward: its time beside the same cell's without", determinism_rows(cells),
               ("ms", "deterministic ms", "cost")),
        Beside("serving: each cell beside the same shape without its paging, shuffling, ragged lengths or new tokens",
               serving_rows(cells), ("ms", "beside ms", "cost")),
        Beside(published_title(manifest), published_rows(cells, manifest),
               ("measured ms", "published ms", "measured / published", "measured % MMA@clock", "published % MMA@clock"),
               published.absent(manifest)),
    ]
    return [t for t in tables if t.rows or t.note]


def published_title(manifest) -> str:
    """The published table's title, naming the power policy the measured side ran under: a steady time reads behind a
    burst one at heavy shapes (docs/timing.md), which can flip measured / published."""
    from runner.published import FIGURE_IS

    policy = power_policy(manifest) if manifest else None
    under = f", measured under power {policy}" if policy else ""
    return f"published: measured / published at the same shape{under} (below 1: faster than published; {FIGURE_IS})"


def print_beside(cells: list[CellRecord], manifest, console: Console) -> None:
    """`show`'s tables beside the leaderboard (beside_tables), each as a terminal table."""
    for t in beside_tables(cells, manifest):
        if t.rows:
            print_grid(t.grid(), console)
        if t.note:
            console.print(escape(t.note), highlight=False)


def _part_state(part) -> str:
    if part.finished:
        return "finished"
    return "not started" if part.manifest is None and not part.cells else "unfinished"


def runs_grid(runs: list, uri: str) -> Grid:
    """One row per part of each run (the whole run, or each shard): its device (runs of one spec on several machines
    told apart), power policy (steady and burst times are not like with like), its settings beyond its spec (record.
    run_settings: a benchmark's --compile-ahead off beside its twins, a --where), cells done of planned, and its
    state, and how long it took (took_said); a recheck's settings first name the run it rechecks ('rechecks B'). The
    run id, which one copies into show, is never folded: a narrow terminal leaves out the name, the start, the shard
    where no run is sharded, the settings, how long it took, the device, then the power policy first."""
    rows = []
    for run in runs:
        m = run.manifest
        name, gpu, power, started, settings = (
            (m.name, gpu_name(m), policy_said(m), m.started_at, _settings(m)) if m else ("-",) * 5)
        rows += [[run.run_id, name, gpu, power, settings, started, part.shard or "-",
                  f"{len(part.cells)}/{'?' if part.planned is None else part.planned}", _part_state(part),
                  took(part) or "-"] for part in run.parts]
    sharded = any(part.shard for run in runs for part in run.parts)
    drops = ("name", "started", *(() if sharded else ("shard",)), "settings", "took", "device",
             "power")  # id: name-time
    return Grid(f"runs in {uri}", ["run", "name", "device", "power", "settings", "started", "shard", "cells", "state",
                                   "took"], rows, wraps=("power", "settings", "took"), drops=drops, kept=("run",))


def _settings(manifest) -> str:
    """A run's settings beyond its spec (record.run_settings), after 'rechecks B' where it is B's recheck; '-' where
    none."""
    rechecks = f"rechecks {manifest.rechecks}" if manifest.rechecks else ""
    return "; ".join(s for s in (rechecks, run_settings(manifest)) if s) or "-"


def run_facts(manifest, cells: list[CellRecord]) -> list[str]:
    """What a run is, first in show's header and the report's: its spec, device, power policy (steady against burst
    moves the times at heavy shapes and can flip measured / published: docs/timing.md), start, git sha (short_sha),
    the jax and cuDNN it ran (a worker's other cuDNN beside it: TransformerEngine's may be another release) and, from
    its cells, how warm its compile cache was (cache_said) and how long it took (took_said); nothing without a
    manifest."""
    if manifest is None:
        return []
    cache = cache_of(cells)
    return [f"spec {manifest.name}", device_said(manifest), f"power {policy_said(manifest)}",
            f"started {manifest.started_at}", f"git {short_sha(manifest.git_sha) if manifest.git_sha else '?'}",
            *_versions(manifest), *([f"compile cache {cache}"] if cache else []),
            f"took {took_said(manifest, cells)}"]


def cache_said(loaded: int, compiled: int) -> str | None:
    """How warm a run's compile cache was, from its programs (a cell's compilation.cached: loaded from the persistent
    cache or compiled): 'warm: 76 of 76 programs loaded', 'cold: 0 of 76 programs loaded', 'partly warm: 11 of 66
    programs loaded' (a program another cell of the run compiled first loads too); None where no program's is known
    (the cache off). A cell that reused another variant's program (compilation.shared_with) is neither."""
    programs = loaded + compiled
    if not programs:
        return None
    state = "warm" if loaded == programs else "cold" if not loaded else "partly warm"
    return f"{state}: {loaded:,} of {counted(programs, 'program')} loaded"


def cache_counts(cells: list[CellRecord]) -> tuple[int, int]:
    """(loaded, compiled): the cells whose program came from the persistent compile cache, and those compiled."""
    known = [c.compilation.cached for c in cells if c.compilation and c.compilation.cached is not None]
    return sum(known), len(known) - sum(known)


def cache_of(cells: list[CellRecord]) -> str | None:
    """cache_said of a run's cells: show's header, the report's facts, the dashboard's overview."""
    return cache_said(*cache_counts(cells))


IDLE_S = 60  # seconds of a run's wall time with no cell measured: a resume across calls or a pause, not a worker start


def took_said(manifest, cells: list[CellRecord]) -> str:
    """How long a run took, the one wording (runs, show's header, the report's facts, the dashboard's Runs tab):
    '219 s in cells · 1,141 s wall (resumed across calls, or paused: 921 s with no cell measured)'. In cells is
    in_cells_s, wall is wall_s ('not ended' where the manifest holds no end), which spans the gap where the run resumed
    across calls; '' without a manifest."""
    if manifest is None:
        return ""
    in_cells = f"{in_cells_s(cells):,.0f} s in cells"
    if manifest.ended_at is None:
        return f"{in_cells} · not ended"
    begun, wall = _epoch(manifest.started_at), wall_s(manifest)
    spans = sorted((_epoch(c.started_at), _epoch(c.started_at) + c.duration_s) for c in cells)
    idle = _idle_s(begun, begun + wall, spans)
    gap = f" (resumed across calls, or paused: {idle:,.0f} s with no cell measured)" if idle >= IDLE_S else ""
    return f"{in_cells} · {wall:,.0f} s wall{gap}"


def in_cells_s(cells: list[CellRecord]) -> float:
    """The seconds a run spent in its cells: their records' duration_s (compile, checks, settling, sampling: its
    phases) summed, every shard's."""
    return sum(c.duration_s for c in cells)


def wall_s(manifest) -> float:
    """The seconds from an ended run's manifest's started_at to its ended_at."""
    return _epoch(manifest.ended_at) - _epoch(manifest.started_at)


def _epoch(when: str) -> float:
    """An ISO 8601 time as seconds since the epoch, UTC where it names no zone."""
    parsed = datetime.fromisoformat(when)
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()


def took(part) -> str:
    """took_said of a run or one shard of it (results.Run, results.Part): its manifest and cells."""
    return took_said(part.manifest, part.cells)


def _idle_s(begun: float, ended: float, spans: list[tuple[float, float]]) -> float:
    """The longest stretch from `begun` to `ended` that no span (start, end), sorted by start, covers."""
    reached, longest = begun, 0.0
    for start, end in spans:
        longest, reached = max(longest, start - reached), max(reached, end)
    return max(longest, ended - reached)


def device_said(manifest) -> str:
    """'GPU NVIDIA H200', or 'no GPU (cpu)' for a run on another device (record.gpu_name, the one rule)."""
    return f"GPU {gpu_name(manifest)}" if gpu_model(manifest) else f"no GPU ({gpu_name(manifest)})"


def _versions(manifest) -> list[str]:
    """'jax 0.11.2', 'cuDNN 9.19.0 (transformer_engine worker 9.14.0)': where the run recorded them."""
    versions, said = manifest.machine.versions, []
    if "jax" in versions:
        said.append(f"jax {versions['jax']}")
    others = [f"{name} worker {w.versions['cudnn']}" for name, w in manifest.workers.items()
              if w.versions.get("cudnn") not in (None, versions.get("cudnn"))]
    if "cudnn" in versions or others:
        said.append(f"cuDNN {versions.get('cudnn', '—')}" + (f" ({', '.join(others)})" if others else ""))
    return said


def kernel_line(manifest) -> str | None:
    """show's header: the run's settings that can change its kernels, where any is set ('environment that can change
    kernels: xla_flags --xla_gpu_autotune_level=0 · kernel env NVTE_FUSED_ATTN=0'); None where none is set, or the run
    did not record them (compare and the dashboard's environments say 'not recorded' beside another run's)."""
    shown = [f"{fact} {value}" for fact, value in (manifest.machine.kernel_settings() if manifest else {}).items()
             if value not in (NONE_SET, NOT_RECORDED)]
    return "environment that can change kernels: " + " · ".join(shown) if shown else None


def earlier_line(manifest) -> str | None:
    """show's header: the machine facts that some of the run's cells were measured under besides the manifest's, where
    a resume went on across them or a shard ran under them ('some cells measured under another gpu driver 550.54.15');
    None where every cell was measured under the manifest's."""
    earlier = (manifest.earlier_facts if manifest else None) or {}
    shown = [f"{fact} {', '.join(values)}" for fact, values in earlier.items()]
    return "some cells measured under another " + " · ".join(shown) if shown else None


def summary_line(cells: list[CellRecord]) -> str:
    """'5 cells: 1 incorrect, 2 ok, 1 oom, 1 skipped'; '0 cells' for a run of none, not an empty list after a colon."""
    by_status = ", ".join(f"{n:,} {status}" for status, n in sorted(Counter(c.status for c in cells).items()))
    return f"{counted(len(cells), 'cell')}: {by_status}" if cells else counted(0, "cell")


def phase_line(totals: Totals) -> str:
    """Where the cells' time went: seconds per phase over all of them (the spool's totals), largest first."""
    parts = [f"{name} {seconds:.1f}" for name, seconds in sorted(totals.phases.items(), key=lambda kv: -kv[1])]
    return f"seconds by phase ({totals.cells_s:.1f} in cells): " + (", ".join(parts) or "none")


def markdown(df) -> str:
    """A DataFrame as a markdown table, values formatted as the terminal tables do."""
    df = df.astype(object).where(df.notna(), None)  # a nullable integer's missing value (pd.NA) reads as None
    return markdown_table(list(df.columns), [[_fmt(v) for v in row] for row in df.itertuples(index=False)]) + "\n"


def _header_only(frame):
    """`frame` of a bare cell (the default params; no values, no timings, phases or readings) with its row dropped:
    the columns every cell's row has, for a run of no cells."""
    required = {name: None for name, field in CellRecord.model_fields.items() if field.is_required()}
    return frame([CellRecord.model_construct(**{**required, "params": shape.default_params()})]).iloc[:0]


def export(cells: list[CellRecord], fmt: str, dest: Path | None) -> str | None:
    """Write csv / markdown / parquet to dest, or return csv / markdown text when dest is None."""
    from runner import frames

    df = frames.cells(cells) if cells else _header_only(frames.cells)
    df = df.assign(**{name: df[name].astype("Int64") for name in shape.COUNTS if name in df})  # 16, not 16.0
    if fmt == "parquet":
        df.to_parquet(dest, index=False)
        return None
    text = df.to_csv(index=False) if fmt == "csv" else markdown(df)
    if dest is None:
        return text
    dest.write_text(text)
    return None


# --- two runs compared (attnbench compare, attnbench report) --------------------------------------------------------
# Each takes `found`, a runner.compare.Comparison; pandas and compare load with it, never for the quick commands.

COMPARED = ["key", "experiment", "variant", "shape"]


def _ms(value: float) -> str:
    return f"{value:.4g}"


RECHECKED = "recheck / A"  # the median of a cell measured again (attnbench recheck) over A's


def _times(table):
    """Timed cells as text: A and B in ms, B / A, each run's noise, which side was sampled unsettled and which did not
    converge where any was, where B ran another kernel where any did, and the recheck's median over A's where any was
    measured again (runner.compare.cells, reproduced)."""
    shown = table[COMPARED].assign(**{
        "A ms": table["a_ms"].map(_ms), "B ms": table["b_ms"].map(_ms), "B / A": table["ratio"].map("{:.3f}×".format),
        "noise A": table["noise_a"].map("{:.1%}".format), "noise B": table["noise_b"].map("{:.1%}".format),
        **{mark.word: table[mark.column] for mark in MARKS if table[mark.column].ne("").any()},
        **({"kernel": table["kernel"]} if table["kernel"].ne("").any() else {}),
        **({RECHECKED: table["recheck_ratio"].map("{:.3f}×".format)} if table["recheck_ratio"].notna().any() else {})})
    return shown.reset_index(drop=True)


def differing(a: str, b: str) -> tuple[str, str]:
    """A's and B's kernel names cut to where they differ, at '_': the first word and the word before they part kept,
    the rest both share as '…' ('cudnn_…_knob_7_64x128x64_…', 'cudnn_…_knob_32_64x256x64_…'), where two names of 100
    characters cut alike at 40 read the same; whole where a side is empty or a cut leaves it nothing."""
    words_a, words_b = a.split("_"), b.split("_")
    head = len(os.path.commonprefix([words_a, words_b]))
    tail = len(os.path.commonprefix([words_a[head:][::-1], words_b[head:][::-1]]))
    if not a or not b or head + tail < 2 or min(len(words_a), len(words_b)) - head - tail < 1:
        return a, b

    def cut(words: list[str]) -> str:
        start = max(head - 1, 1)  # the last shared word before they part ('knob' of 'knob_7') stays
        kept = words[:1] + (["…"] if start > 1 else []) + words[start:len(words) - tail]
        return "_".join(kept + (["…"] if tail else []))

    return cut(words_a), cut(words_b)


KERNEL_NAMES = ("only A ran", "only B ran")  # compare's kernel columns: what tells A from B is at their names' end
# compare's text columns whose words a terminal's table folds onto more lines (a shape, B's reason, an environment's
# A and B, kernel names); the rest, times and ratios among them, stay whole (Grid)
COMPARED_WRAPS = ("shape", "reason", "A", "B", *KERNEL_NAMES)
# What a terminal too narrow for a comparison's table leaves out, first to last: the cell's key (for scripts: --format
# json), which kernel B ran, which side was sampled unsettled and which did not converge (the verdict counts all
# three), both runs' noise; in the table of kernels, the verdict and the kind of change; in the status changes,
# whether one is a regression (ok in A, not in B) and B's reason. The cell's experiment, variant and shape, A ms, B ms
# and B / A, A's and B's status and the kernels only A or only B ran are never left out.
COMPARED_LEFT_OUT_FIRST = ("key", "kernel", UNSETTLED, NOT_CONVERGED, ("noise A", "noise B"), "verdict", "change",
                           "regression", "reason")


def kernels_shown(kernels):
    """compare's 'ran another kernel' table with each row's two kernel lists cut to where they differ (differing)
    and a space after each ';', where a page or a terminal may wrap a list of names; `--format json` keeps them
    whole."""
    cut = [differing(a, b) for a, b in zip(*(kernels[name] for name in KERNEL_NAMES))]
    return kernels.assign(**{name: [pair[side].replace(";", "; ") for pair in cut]
                             for side, name in enumerate(KERNEL_NAMES)})


def comparison_sections(found) -> list[tuple]:
    """(title, table) pairs: what differs before the times (environment, status, cells in one run only), then the
    regressions, the cells that got faster and the geometric means; the cells within noise are only counted."""
    from runner.compare import UNCONFIRMED_WHY

    summary = found.summary.assign(**{"geomean B/A": found.summary["geomean B/A"].map("{:.3f}×".format)})
    changes = found.changes.assign(regression=found.changes["regression"].map({True: "yes", False: "no"}))
    return [
        ("Environment differences", found.environment.rename(columns={"a": "A", "b": "B"})),
        ("Status changes (A → B)", changes.rename(columns={"a": "A", "b": "B"})),
        ("Missing from B (regressions: ok in A, planned by B, absent)", found.missing),
        ("Cells only in A", found.only_a),
        ("Cells only in B", found.only_b),
        (f"Timed by different timers (not compared: no {found.timer or 'shared'} time in both)", found.other_timers),
        (f"No {found.timer or 'shared'} time in either run (not compared: the same timers in both)",
         found.without_timer),
        ("Ran another kernel in B (compared all the same; kernel names cut to where A's and B's differ)",
         kernels_shown(found.kernels)),
        ("Slower (regressions)", _times(found.slower)),
        ("Faster", _times(found.cells[found.cells["verdict"] == "faster"])),
        (f"Unconfirmed (moved, {UNCONFIRMED_WHY}: no regression, no improvement)", _times(found.unconfirmed)),
        ("Not reproduced (slower in B, not slower when measured again: no regression)", _times(found.not_reproduced)),
        ("Geometric mean of B / A per experiment and variant", summary),
    ]


def _describe(m) -> str:
    return f"{m.run_id} ({m.name} · {gpu_name(m)} · started {m.started_at})"


def comparison_heading(found) -> list[str]:
    from runner.compare import CONFIRM_NOISES, CONFIRM_SAMPLES

    return [f"A: {_describe(found.a)}", f"B: {_describe(found.b)}",
            f"{found.timer or 'no shared'} timer; slower or faster: B / A beyond {100 * found.threshold:g} % and both "
            f"runs' noise (IQR); where a side did not converge, beyond {CONFIRM_NOISES}× its noise on "
            f"{CONFIRM_SAMPLES} samples a side, else unconfirmed", *recheck_said(found)]


def recheck_said(found) -> list[str]:
    """The line that names the run that measured B's slower cells again, where one did, and how it differs from B in
    the facts that change what a time means (another GPU, driver, library or attnbench): [] where none did."""
    from runner.compare import differences, material_of, said

    if found.recheck is None:
        return []
    again = int(found.cells["recheck_ratio"].notna().sum())
    apart = said(material_of(differences(found.b, found.recheck)))
    return [f"measured again: {found.recheck.run_id} ({counted(again, 'cell')} timed in it and A)"
            + (f", which differs from B in what changes a time ({apart})" if apart else "")
            + "; a slower cell that A against it does not find slower by the same rule is not reproduced, never a "
            "regression"]


def marked_said(cells, mark: Mark) -> str:
    """'28 of those not converged in A or B (noise above its target when sampling stopped, or under 5 samples)' where
    any compared pair bears `mark` (its column of runner.compare.cells); '' where none."""
    count = int(cells[mark.column].ne("").sum())
    return f"{count} of those {mark.word} in A or B ({mark.why})" if count else ""


def marks_said(cells) -> list[str]:
    """marked_said of each mark any compared pair bears, not converged first (the verdict's unconfirmed cells are
    those that did not converge): the CLI's verdict and the dashboard's Compare tab say them so."""
    return [said for said in (marked_said(cells, mark) for mark in (UNCONVERGED_MARK, UNSETTLED_MARK)) if said]


def timers_said(found) -> str:
    """'3 cells timed by different timers (not compared)': cells ok in both whose timers differ between the runs (the
    CLI's verdict, the report's and the dashboard's Compare tab say it so); '' where none."""
    count = len(found.other_timers)
    return f"{counted(count, 'cell')} timed by different timers (not compared)" if count else ""


def untimed_said(found) -> str:
    """'2 cells with no device time in either run (not compared)': cells ok in both, timed by the same timers in
    both, the compared one not among them (it failed in both runs); '' where none."""
    count = len(found.without_timer)
    return f"{counted(count, 'cell')} with no {found.timer or 'shared'} time in either run (not compared)" \
        if count else ""


def kernels_said(found) -> str:
    """'5 cells ran another kernel in B; 9 cells ran another GEMM in B' of the cells timed in both
    (runner.compare.kernel_change: another backend or attention kernel, then GEMM kernels alone), each where any;
    '' where none did."""
    from runner.compare import ANOTHER_GEMM

    gemm = found.kernels["change"].eq(ANOTHER_GEMM)
    counts = ((int((~gemm).sum()), "another kernel"), (int(gemm.sum()), "another GEMM"))
    return "; ".join(f"{counted(count, 'cell')} ran {what} in B" for count, what in counts if count)


def _apart(found) -> str:
    """'; of those, 5 cells ran another kernel in B; 9 cells ran another GEMM in B; 3 cells timed by different timers
    (not compared); 2 cells with no device time in either run (not compared)', each where any."""
    kernels = f"; of those, {kernels_said(found)}" if len(found.kernels) else ""
    return kernels + "".join(f"; {said}" for said in (timers_said(found), untimed_said(found)) if said)


def not_reproduced_said(found) -> str:
    """', 2 not reproduced (slower, not when measured again)' where B's recheck cleared any cell, else '': the clause
    compare's verdict and the dashboard's Overview both say."""
    count = len(found.not_reproduced)
    return f", {count} not reproduced (slower, not when measured again)" if count else ""


def xla_only_said(found) -> str:
    """'3 of the slower cells ran only XLA-generated kernels: …' where any did (runner.compare.xla_generated), the
    pointer where no kernel change explains a slower cell; '' where none did."""
    count = len(found.slower_xla_only)
    return (f"{count} of the slower cells ran only XLA-generated kernels (fusions, Triton GEMMs): which tile XLA's "
            "autotuner chose is not in the record" if count else "")


def verdict(found) -> str:
    """One line: the regressions, or that there is none, over the cells both runs hold; then the material
    differences of their environments, if any."""
    from runner.compare import UNCONFIRMED_WHY, geomean, said

    counts = found.cells["verdict"].value_counts()
    held = found.common + len(found.only_b)
    short = f" of {found.planned_b} planned" if found.planned_b is not None and held < found.planned_b else ""
    held_a = found.common + len(found.only_a) + len(found.missing)
    tally = (f"{counted(found.common, 'cell')} in both (A {held_a}, B {held}{short})"
             f", {len(found.cells)} timed in both: {counts.get('slower', 0)} slower, {counts.get('faster', 0)} faster, "
             f"{counts.get('within noise', 0)} within noise"
             + (f", {len(found.unconfirmed)} unconfirmed ({UNCONFIRMED_WHY})" if len(found.unconfirmed) else "")
             + not_reproduced_said(found)
             + f"; geomean B / A over those {geomean(found.cells['ratio']):.3f}×"
             + "".join(f"; {said}" for said in marks_said(found.cells)) + _apart(found)
             + (f"; {xla_only_said(found)}" if len(found.slower_xla_only) else ""))
    line = f"no regression: {tally}" if not found.regressed else (
        f"REGRESSION: {counted(len(found.slower), 'cell')} slower, {len(found.no_longer_ok)} ok in A and not in B"
        + (f", {len(found.missing)} ok in A and missing from B" if len(found.missing) else "") + f" ({tally})")
    line += f" · differs: {said(found.material)}" if len(found.material) else ""
    line += f" · settings: {found.settings}" if found.settings else ""
    return line + (f" · {found.sitting}" if found.sitting else "")


def print_comparison(found, console: Console) -> None:
    """The comparison on a terminal or in a pipe: the two runs and the rule, a table per section, the verdict last
    (a log's tail), its prose folded between clauses at a terminal's width (print_prose)."""
    for line in comparison_heading(found):
        print_prose(line, console)
    for grid in comparison_grids(found):
        print_grid(grid, console)
    print_prose(verdict(found), console)


def comparison_grids(found) -> list[Grid]:
    """The terminal's table of each section that has rows (comparison_sections)."""
    return [Grid(title, list(map(str, table.columns)), [list(row) for row in table.astype(str).itertuples(index=False)],
                 right=("A ms", "B ms", "B / A", RECHECKED), wraps=COMPARED_WRAPS, drops=COMPARED_LEFT_OUT_FIRST)
            for title, table in comparison_sections(found) if len(table)]


def comparison_markdown(found) -> str:
    """The comparison as GitHub markdown: the verdict in bold under the heading (a PR comment is read from the top,
    where the terminal's verdict comes last, for a CI log's tail), the two runs and the rule, a table per section
    that has rows."""
    parts = ["### attnbench compare", f"**{verdict(found)}**",
             "\n".join(f"- {line}" for line in comparison_heading(found))]
    parts += [f"#### {title}\n\n{markdown(table).rstrip()}" for title, table in comparison_sections(found) if len(table)]
    return "\n\n".join(parts) + "\n"


def no_comparison_markdown(reason: str) -> str:
    """compare's markdown where B has no run to be compared with: the heading and the reason in the verdict's place."""
    return f"### attnbench compare\n\n**{reason}**\n"


def no_comparison_json(b, threshold: float, reason: str) -> str:
    """compare's json where B (its manifest `b`) has no run to be compared with (--against previous on a series'
    first night): every night's keys (comparison_json's), A and what needs it null, each section empty, no
    regression, the reason as the verdict; a consumer of any night reads this one too."""
    from runner import compare

    planned = compare.planned(b)
    document = {"a": None, "b": _run(b), "timer": None, "threshold": threshold, "regressed": False, "verdict": reason,
                "regressions": [], "unconfirmed": [], "not_reproduced": [], "slower_xla_only": [], "recheck": None,
                "b_planned": None if planned is None else len(planned),
                "settings": None, "sitting": None, **dict.fromkeys(SECTIONS, [])}
    return json.dumps(document, indent=2) + "\n"


def _records(table) -> list[dict]:
    return json.loads(table.to_json(orient="records"))  # NaN as null


def _run(m) -> dict:
    return {"run_id": m.run_id, "spec": m.name, "gpu": gpu_name(m), "started_at": m.started_at}


# comparison_json's sections: each a table of the comparison (runner.compare.Comparison) as a list of records.
SECTIONS = {
    "missing_in_b": lambda found: found.missing, "material_differences": lambda found: found.material,
    "environment": lambda found: found.environment, "status_changes": lambda found: found.changes,
    "only_in_a": lambda found: found.only_a, "only_in_b": lambda found: found.only_b,
    "cells": lambda found: found.cells.drop(columns=list(shape.NAMES)),
    "different_timers": lambda found: found.other_timers, "no_timer_in_either": lambda found: found.without_timer,
    "another_kernel": lambda found: found.kernels, "summary": lambda found: found.summary,
}


def comparison_json(found) -> str:
    """Every section and every cell timed in both (its verdict, key and shape), for a pipeline to read."""
    document = {
        "a": _run(found.a), "b": _run(found.b), "timer": found.timer, "threshold": found.threshold,
        "regressed": found.regressed, "verdict": verdict(found),
        "regressions": [*found.slower["key"], *found.no_longer_ok["key"], *found.missing["key"]],
        "unconfirmed": list(found.unconfirmed["key"]), "not_reproduced": list(found.not_reproduced["key"]),
        "slower_xla_only": list(found.slower_xla_only["key"]), "recheck": found.recheck.run_id if found.recheck else None, "b_planned": found.planned_b,
        "settings": found.settings, "sitting": found.sitting or None,
        **{name: _records(table(found)) for name, table in SECTIONS.items()},
    }
    return json.dumps(document, indent=2) + "\n"
