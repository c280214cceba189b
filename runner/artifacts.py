"""`attnbench report`: runs as files to hand around. One self-contained HTML page (its charts inline as PNG data, its
tables, each run's leaderboard and its comparison with the previous run; no script, no server, no network: it opens
from a folder, a bucket or a CI artifact), the same charts as PNG files, and a markdown summary. The comparison is
runner/compare.py's, the leaderboard runner/leaderboard.py's, the charts runner/figures.py's."""

from __future__ import annotations

import base64
import html
from itertools import islice
from dataclasses import dataclass

from runner import compare, counted, figures, report, shape
from runner.leaderboard import BOARD, Standing, contested, leaderboard, legacy_of, notes, rows, winners
from runner.record import CellRecord
from runner.report import leaderboard_markdown, summary_line
from runner.results import Run

INDEX, SUMMARY = "index.html", "summary.md"
MAX_CHARTS = 24  # charts per run: a run of a thousand experiments stays a page to open; its tables hold every cell
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;color:#222;margin:0 auto;max-width:1200px;padding:1em 2em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-top:.6em}h3{margin-top:1.4em}
table{border-collapse:collapse;font-size:12px;margin:.4em 0 1em;display:block;max-width:100%;overflow-x:auto}
th,td{border:1px solid #ddd;padding:2px 6px}
th{background:#f4f4f4;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.bad td{color:#b00}tr.skip td{color:#a70}figure{margin:1em 0}figure img{max-width:100%}
.meta{color:#555;font-size:12px}.verdict{font-weight:600}.regressed{color:#b00}
"""


@dataclass(frozen=True)
class Report:
    """One run as the report shows it: the run, its charts, and its comparison with the previous run (None: none)."""

    run: Run
    charts: tuple[figures.Chart, ...]
    comparison: compare.Comparison | None = None


def charts_of(run: Run) -> tuple[figures.Chart, ...]:
    """A latency chart per experiment that sweeps a size, in the run's order, the first MAX_CHARTS of them."""
    made = (figures.latency_chart(run.run_id, name, cells) for name, cells in by_experiment(run.cells).items())
    return tuple(islice((chart for chart in made if chart is not None), MAX_CHARTS))


def by_experiment(cells: list[CellRecord]) -> dict[str, list[CellRecord]]:
    grouped: dict[str, list[CellRecord]] = {}
    for c in cells:
        grouped.setdefault(c.experiment, []).append(c)
    return grouped


def figure_name(chart: figures.Chart) -> str:
    return f"figures/{chart.name}.png"


def files(reports: list[Report]) -> dict[str, bytes]:
    """Every file of the report, by its name under the output: index.html, summary.md, figures/*.png."""
    images = {figure_name(chart): figures.draw(chart) for r in reports for chart in r.charts}
    return {INDEX: page(reports, images).encode(), SUMMARY: summary(reports).encode(), **images}


# --- markdown --------------------------------------------------------------------------------------------------------

def summary(reports: list[Report]) -> str:
    """The report in markdown: per run its facts, the verdict against the previous run, the leaderboard, the tables
    beside it (report.beside_tables) and the figures (as links to the PNG files beside it)."""
    parts = ["# attnbench report"]
    for r in reports:
        parts += [f"## {r.run.run_id}", "\n".join(f"- {fact}" for fact in facts(r.run))]
        parts.append(f"**{report.verdict(r.comparison)}** (against {r.comparison.a.run_id})" if r.comparison
                     else "No earlier run of this spec identity, GPU, power policy and timer to compare with.")
        standings = standings_of(r.run)
        if standings:
            parts.append(fastest(standings, lambda variant: f"**{variant}**"))
        if board := leaderboard_markdown(standings, legacy_of([r.run.manifest]), r.run.manifest.machine):
            parts += ["### Leaderboard", board]
        for t in report.beside_tables(r.run.cells, r.run.manifest):
            parts += [f"### {t.heading}", *([report.markdown_table(t.header, t.body())] if t.rows else []),
                      *([t.note] if t.note else [])]
        parts += [f"![{chart.title}]({figure_name(chart)})" for chart in r.charts]
    return "\n\n".join(parts) + "\n"


def standings_of(run: Run) -> list[Standing]:
    """The run's leaderboard over its contested shapes (runner.leaderboard.contested; with its manifest, each time's
    share of the MMA peak at its clock and the cuDNN its variant ran)."""
    return contested(leaderboard(run.cells, manifest=run.manifest))


def fastest(standings: list[Standing], strong=str) -> str:
    """Which variant is fastest where, the first answer under the verdict: runner.leaderboard.winners' line (the
    dashboard's overview says the same, 'fastest' once), pointing at the leaderboard below for every shape."""
    return f"{winners(standings, strong)} (every shape: the leaderboard below)."


def facts(run: Run) -> list[str]:
    """The run's header (report.run_facts: show's too), how long it took (report.took) and its cells by status."""
    return report.run_facts(run.manifest, run.cells) + [summary_line(run.cells)]


# --- html ------------------------------------------------------------------------------------------------------------

def page(reports: list[Report], images: dict[str, bytes]) -> str:
    """The whole report as one HTML document with nothing outside it."""
    ids = [r.run.run_id for r in reports]
    head = (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>attnbench report: "
            f"{_e(', '.join(ids))}</title><style>{STYLE}</style></head><body>")
    nav = "<nav>" + " · ".join(f"<a href='#{_e(i)}'>{_e(i)}</a>" for i in ids) + "</nav>"
    return "\n".join([head, "<h1>attnbench report</h1>", nav, *(section(r, images) for r in reports),
                      "</body></html>\n"])


def section(r: Report, images: dict[str, bytes]) -> str:
    """A run in the order a reader needs it: its facts and verdict, its charts, the leaderboard and the tables beside
    it (scaling, the costs of determinism and of serving's axes, published figures: report.beside_tables), then the
    comparison's detail and every cell."""
    run = r.run
    parts = [f"<section id='{_e(run.run_id)}'><h2>{_e(run.run_id)}</h2>",
             "<p class='meta'>" + " · ".join(map(_e, facts(run))) + "</p>", verdict_html(r.comparison)]
    standings = standings_of(run)
    if standings:
        parts.append(f"<p class='fastest'>{fastest(standings, lambda variant: f'<strong>{_e(variant)}</strong>')}</p>")
    parts += ["<h3>Charts</h3>", charts_note(run, r.charts),
              *(figure_html(chart, images[figure_name(chart)]) for chart in r.charts)] if r.charts else []
    parts += [leaderboard_html(standings, legacy_of([run.manifest]), run.manifest.machine),
              *(beside_html(t) for t in report.beside_tables(run.cells, run.manifest)),
              comparison_html(r.comparison),
              "<h3>Cells</h3>", *(cells_html(name, cells, run.manifest.machine)
                                  for name, cells in by_experiment(run.cells).items()),
              "</section>"]
    return "\n".join(parts)


def charts_note(run: Run, charts: tuple[figures.Chart, ...]) -> str:
    """Which experiments are drawn: those that sweep a size, at most MAX_CHARTS."""
    shown = f"the first {len(charts)}" if len(charts) == MAX_CHARTS else f"{len(charts)}"
    return (f"<p class='meta'>Median latency against the size each experiment sweeps: {shown} of "
            f"{counted(len(by_experiment(run.cells)), 'experiment')}; the tables below hold every cell.</p>")


def verdict_html(found) -> str:
    """Against the previous run, in one line: the verdict, or that there is no run to compare with."""
    if found is None:
        return ("<p class='verdict'>No earlier run of this spec identity, GPU, power policy and timer to compare "
                "with.</p>")
    return (f"<p class='verdict{' regressed' if found.regressed else ''}'>Against "
            f"{_e(found.a.run_id)}: {_e(report.verdict(found))}</p>")


def comparison_html(found) -> str:
    """The comparison's detail: the two runs and the rule, then each section that has rows."""
    if found is None:
        return ""
    parts = ["<h3>Against the previous run</h3>",
             "<ul>" + "".join(f"<li>{_e(line)}</li>" for line in report.comparison_heading(found)) + "</ul>"]
    for title, table in report.comparison_sections(found):
        if len(table):
            parts.append(table_html(title, list(map(str, table.columns)), table.astype(str).values.tolist()))
    return "\n".join(parts)


def figure_html(chart: figures.Chart, png: bytes) -> str:
    data = base64.b64encode(png).decode()
    return (f"<figure class='chart' data-chart='{_e(chart.name)}'><img alt='{_e(chart.title)}' "
            f"src='data:image/png;base64,{data}'></figure>")  # its title, subtitle and runs are drawn in the PNG


def leaderboard_html(standings: list[Standing], legacy: dict[str, str], machine=None) -> str:
    """The contested `standings` as a table, its notes under it (runner.leaderboard.notes: with the run's `machine`,
    a GPU without a cited MMA rate said); "" when there are none."""
    body = rows(standings, legacy)
    if not body:
        return ""
    under = "".join(f"<p class='meta'>{_e(note)}</p>" for note in notes(standings, legacy, machine))
    return table_html(f"Leaderboard: {BOARD}", list(body[0]),
                      [list(row.values()) for row in body]) + under


def cells_html(experiment: str, cells: list[CellRecord], machine=None) -> str:
    """The experiment's cells as show's table: varying shape columns, status, then the measurements (with the run's
    `machine`, % MMA@clock); under it, report.notes_under."""
    shapes = [c.params.as_dict() for c in cells]
    varying = [k for k in shape.NAMES if len({s[k] for s in shapes}) > 1]
    columns = report.measurement_columns(cells, machine)
    header = ["variant", *(shape.column(k) for k in varying), "status", *(name for name, _, _ in columns)]
    body = [[c.variant, *(shape.shown(k, s) for k in varying), c.status, *report.measured(c, columns)]
            for c, s in zip(cells, shapes)]
    fixed = shape.label(shapes[0], omit=tuple(varying))
    under = "".join(f"<p class='meta'>{_e(note)}</p>" for note in report.notes_under(cells, machine))
    return table_html(f"{experiment} · {fixed} · {counted(len(cells), 'cell')}", header, body,
                      [{"ok": "", "skipped": "skip"}.get(c.status, "bad") for c in cells]) + under


def beside_html(t: report.Beside) -> str:
    """A table beside the leaderboard, its note under it (or, where it has no rows, its heading and the note)."""
    table = table_html(t.heading, t.header, t.body()) if t.rows else f"<h3>{_e(t.heading)}</h3>"
    return table + (f"<p class='meta'>{_e(t.note)}</p>" if t.note else "")


def table_html(title: str, header: list[str], body: list[list[str]], classes: list[str] | None = None) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    lines = [f"<tr class='{k}'>" if k else "<tr>" for k in classes or [""] * len(body)]
    rows_html = "".join(start + "".join(_td(v) for v in row) + "</tr>" for start, row in zip(lines, body))
    return f"<table><caption>{_e(title)}</caption><thead><tr>{head}</tr></thead><tbody>{rows_html}</tbody></table>"


def _td(value) -> str:
    text = str(value)
    numeric = text.replace(".", "", 1).replace("-", "", 1).replace("e", "", 1).isdigit()
    return f"<td class='n'>{_e(text)}</td>" if numeric else f"<td>{_e(text)}</td>"


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)
