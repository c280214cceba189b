"""The one printer: a run's cells, its leaderboard, the runs of a store and the variants here, as rich tables on a
terminal and as GitHub markdown; csv or parquet for export. pandas loads only for exports (the CLI's quick
commands stay quick)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from runner import metrics, shape
from runner.cells import unsplit
from runner.record import CellRecord
from runner.spool import Totals


def _fmt(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _timing_ms(c: CellRecord, timer: str) -> float | None:
    return next((t.median_s * 1e3 for t in c.timings if t.timer == timer), None)


def _note(c: CellRecord) -> str:
    note = c.fp8.verdict if c.fp8 else c.reason
    return f"{note} [clock moved {c.telemetry.clock_spread:.0%}]" if c.clock_unstable else note


# Measurement columns: (header, right-aligned, getter). Beside device time, the host clock shows what the lab
# would have reported (dispatch included).
COLUMNS: list[tuple[str, bool, Callable[[CellRecord], str]]] = [
    ("median ms", True, lambda c: _fmt(c.median_s * 1e3 if c.median_s else None)),
    ("timer", False, lambda c: c.timer or "-"),
    ("wall ms", True, lambda c: _fmt(_timing_ms(c, "wall"))),  # the median too where wall is the timer (a CPU)
    ("TFLOP/s", True, lambda c: _fmt(c.tflops, 3)),
    ("GB/s", True, lambda c: _fmt(c.gbps, 3)),
    ("SM MHz", True, lambda c: _fmt(c.telemetry.sm_clock_mhz.median if c.telemetry else None)),
    ("temp MiB", True, lambda c: _fmt(c.temp_bytes / 2**20 if c.temp_bytes is not None else None, 3)),
    ("backend", False, lambda c: c.backend or "-"),
    ("rel err", True, lambda c: _fmt(c.correctness.rel_err if c.correctness else None, 2)),
    ("note", False, _note),
]


def experiment_table(name: str, cells: list[CellRecord]) -> Table:
    """Shape columns that vary within the experiment, then the measurements; constant ones in the title."""
    shapes = [c.params.as_dict() for c in cells]
    varying = [k for k in shape.NAMES if len({s[k] for s in shapes}) > 1]
    fixed = shape.label(shapes[0], omit=tuple(varying))
    table = Table(title=f"{name}  [dim]{fixed}[/]", title_justify="default")  # left, not padded to the table's width
    for header in ["variant", *(shape.column(k) for k in varying), "status"]:
        table.add_column(header)
    for header, right, _ in COLUMNS:
        table.add_column(header, justify="right" if right else "left")
    for c, values in zip(cells, shapes):
        style = {"ok": None, "skipped": "yellow"}.get(c.status, "red")
        measured = [get(c) for _, _, get in COLUMNS] if c.status == "ok" or c.correctness else \
            ["-"] * (len(COLUMNS) - 1) + [c.reason]
        measured = [escape(m) for m in measured]  # text, not markup: a note's [clock moved 12%], an extra's [tokamax]
        table.add_row(c.variant, *(str(values[k]) for k in varying), c.status, *measured, style=style)
    return table


def print_tables(cells: list[CellRecord], console: Console) -> None:
    by_experiment: dict[str, list[CellRecord]] = {}
    for c in cells:
        by_experiment.setdefault(c.experiment, []).append(c)
    for name, group in by_experiment.items():
        console.print(experiment_table(name, group))


def rich_table(title: str, header: list[str], rows: list[list[str]], right: tuple[str, ...] = ()) -> Table:
    """A titled rich table of text rows; the `right` columns right-aligned."""
    table = Table(title=title, title_justify="default")  # left, not padded to the table's width
    for name in header:
        table.add_column(name, justify="right" if name in right else "left")
    for row in rows:
        table.add_row(*row)
    return table


def markdown_table(header: list[str], rows: list[list]) -> str:
    """The one markdown writer: a GitHub table, a `|` in a value escaped and a line break made a space, so that the
    value stays one cell."""
    def cell(value) -> str:
        return " ".join(str(value).replace("|", "\\|").splitlines())

    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(cell, row)) + " |" for row in rows])


def leaderboard_table(cells: list[CellRecord], console: Console,
                      legacy: Mapping[str, str] = MappingProxyType({})) -> None:
    """Per shape where two or more variants ran correctly: the fastest, its margin over the next and over auto;
    under it, what deprecated each legacy variant it names."""
    from runner.leaderboard import leaderboard, legacy_notes, rows

    contested = [s for s in leaderboard(cells) if s.variants > 1]
    if not contested:
        return
    body = rows(contested, legacy)
    console.print(rich_table("leaderboard: the fastest correct variant per shape", list(body[0]),
                             [list(row.values()) for row in body], right=("ms", "variants")))
    for note in legacy_notes(contested, legacy):
        console.print(escape(note), highlight=False)


def published_table(cells: list[CellRecord], manifest, console: Console) -> None:
    """Each measured cell beside the published figure at its shape (runner/published.py), if any."""
    from runner import published

    body = published.beside(cells, published.fp8_promised(manifest))
    if not body:
        return
    console.print(rich_table("published: measured / published at the same shape (below 1: faster than published)",
                             list(body[0]), [[_fmt(v) for v in row.values()] for row in body],
                             right=("measured ms", "published ms", "measured / published")))


def leaderboard_markdown(standings: list, legacy: Mapping[str, str] = MappingProxyType({})) -> str:
    """runner.leaderboard's standings as a markdown table, each legacy variant it names said under it; "" when there
    are none."""
    from runner.leaderboard import legacy_notes, rows

    body = rows(standings, legacy)
    if not body:
        return ""
    notes = "".join(f"\n\n{note}" for note in legacy_notes(standings, legacy))
    return markdown_table(list(body[0]), [list(row.values()) for row in body]) + notes


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


def scaling_table(cells: list[CellRecord], console: Console) -> None:
    """The scaling of the variants that split a cell across devices, when the run has any."""
    if body := scaling_rows(cells):
        console.print(rich_table("scaling: t(1) / (D x t(D)) against the variant's one-device cell", list(body[0]),
                                 [list(row.values()) for row in body],
                                 right=("D", "ms", "efficiency", "comm ms", "compute ms")))


def _part_state(part) -> str:
    if part.finished:
        return "finished"
    return "not started" if part.manifest is None and not part.cells else "unfinished"


def runs_table(runs: list, uri: str) -> Table:
    """One row per part of each run (the whole run, or each shard): cells done of planned, and its state."""
    rows = []
    for run in runs:
        name, started = (run.manifest.name, run.manifest.started_at) if run.manifest else ("-", "-")
        rows += [[run.run_id, name, started, part.shard or "-",
                  f"{len(part.cells)}/{'?' if part.planned is None else part.planned}", _part_state(part)]
                 for part in run.parts]
    return rich_table(f"runs in {uri}", ["run", "name", "started", "shard", "cells", "state"], rows)


def summary_line(cells: list[CellRecord]) -> str:
    counts: dict[str, int] = {}
    for c in cells:
        counts[c.status] = counts.get(c.status, 0) + 1
    return f"{len(cells)} cells: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def phase_line(totals: Totals) -> str:
    """Where the cells' time went: seconds per phase over all of them (the spool's totals), largest first."""
    parts = [f"{name} {seconds:.1f}" for name, seconds in sorted(totals.phases.items(), key=lambda kv: -kv[1])]
    return f"seconds by phase ({totals.cells_s:.1f} in cells): " + ", ".join(parts)


def markdown(df) -> str:
    """A DataFrame as a markdown table, values formatted as the terminal tables do."""
    return markdown_table(list(df.columns), [[_fmt(v) for v in row] for row in df.itertuples(index=False)]) + "\n"


def export(cells: list[CellRecord], fmt: str, dest: Path | None) -> str | None:
    """Write csv / markdown / parquet to dest, or return csv / markdown text when dest is None."""
    from runner import frames

    df = frames.cells(cells)
    if fmt == "parquet":
        df.to_parquet(dest, index=False)
        return None
    text = df.to_csv(index=False) if fmt == "csv" else markdown(df)
    if dest is None:
        return text
    dest.write_text(text)
    return None
