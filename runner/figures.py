"""Charts as files: a run's latency against the size each experiment sweeps, drawn by matplotlib into PNG bytes for
`attnbench report` and the docs' results pages. A chart names the runs it came from in its footer. matplotlib loads
inside `draw`, so the CLI's quick commands never import it."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from runner import shape
from runner.leaderboard import NOT_FP8, cell_fp8_mark
from runner.marks import marks_of
from runner.record import CellRecord

# Families share a hue: JAX's own paths blue, cuDNN green, TransformerEngine orange, FP8 a lighter shade of its
# bf16 twin, Pallas purple and red (the dashboard's colours too); any other variant takes a spare colour.
VARIANT_COLOURS = {
    "naive": "#7f7f7f", "xla": "#1f77b4", "auto": "#6baed6", "cudnn": "#2ca02c", "cudnn_fp8": "#8fd18a",
    "te": "#ff7f0e", "te_fp8": "#fdb56b", "pallas_mgpu": "#9467bd", "pallas_triton": "#d62728",
    "pallas_decode": "#8c564b",
}
SPARE_COLOURS = ["#17becf", "#bcbd22", "#e377c2", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"]
STYLES = ["-", "--", ":", "-."]
GRID_COLOUR = "#e8e8e8"  # the major grid lines, here and on the dashboard's charts (dashboard.charts.GRID)
ONE_TWO_FIVE_SPAN = 1e4  # the widest log axis (high / low: four decades) ticked 1-2-5; a wider one, its powers of
# ten alone, where 1-2-5 would crowd it (here and in dashboard.charts.log_ticks)
MAX_SERIES = 10  # lines one chart draws; its subtitle says when there were more (the tables hold every cell)
SIZE_IN, DPI = (7.0, 3.9), 100
FONT_PT = 9  # every text of a chart, its legend and footer too: 12.5 px at DPI, where 7 pt (under 10 px) read small


@dataclass(frozen=True)
class Series:
    """One line: a label, the variant that colours it, its (x, y) points in x order, and the source it came from
    (a chart of two sources, steady and burst, draws each source in its own line style)."""

    label: str
    variant: str
    points: tuple[tuple[float, float], ...]
    source: int = 0
    marks: tuple[str, ...] = ()  # each point's (runner.marks: '' where none), for a table of the chart's numbers


@dataclass(frozen=True)
class Chart:
    """What one figure draws, and the runs it came from."""

    name: str  # a file stem
    title: str
    subtitle: str
    x: str
    y: str
    series: tuple[Series, ...]
    runs: tuple[str, ...]
    log_y: bool = True


def stem(text: str) -> str:
    """A file name from free text: letters, digits, '.', '_' and '-' kept, the rest '-'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "chart"


def swept_size(shapes: list[dict], prefer: str | None = None) -> tuple[str | None, list[str]]:
    """The size axis a chart draws along (`prefer`, else T, else the first size that varies) and the other axes
    that vary apart from it, which tell its lines apart (N, which follows tp, draws no lines of its own). A size
    some cell holds at null (no window, a dense cache) has no place on the x axis: it tells lines apart instead."""
    varying = [k for k in shape.NAMES if len({s.get(k) for s in shapes}) > 1]
    sizes = [k for k in varying if k in shape.SIZES and all(s.get(k) is not None for s in shapes)]
    x = next((k for k in [prefer, "seq_len", *sizes] if k in sizes), None)
    return x, [k for k in varying if k != x and not _follows(shapes, k, x)]


def _follows(shapes: list[dict], axis: str, x: str | None) -> bool:
    """Whether each value of x comes with one value of `axis` (kv_seq_len with seq_len, heads with tp)."""
    seen: dict = {}
    return x is not None and all(seen.setdefault(s.get(x), s.get(axis)) == s.get(axis) for s in shapes)


# What a chart can draw against the swept size: axis title, the value of a cell, a log axis or not.
METRICS = {
    "latency": ("median latency (ms)", lambda c: c.median_s * 1e3, True),
    "tflops": ("TFLOP/s", lambda c: c.tflops, False),
    "gbps": ("GB/s (Q, K, V, O read or written once)", lambda c: c.gbps, False),
}


def series_of(cells: Iterable[CellRecord], x: str, rest: list[str], y, suffix: str = "",
              source: int = 0) -> list[Series]:
    """Lines by variant and the `rest` axes, y(cell) against the cell's `x`, in the order they first appear, each
    point's marks beside it; a variant that asked for FP8 and ran without is named so, as on the board ('te_fp8 (not
    FP8)': fp8_mark)."""
    lines: dict[tuple[str, str, bool], list[tuple[float, float, str]]] = {}
    for c in cells:
        params = c.params.as_dict()
        other = " ".join(filter(None, [shape.label(params, omit=tuple(n for n in shape.NAMES if n not in rest)),
                                       suffix]))
        lines.setdefault((c.variant, other, cell_fp8_mark(c) == NOT_FP8), []).append((params[x], y(c), marks_of(c)))
    return [Series(" ".join(filter(None, [variant, f"({NOT_FP8})" if not_fp8 else "", other])), variant,
                   tuple((x, v) for x, v, _ in sorted(points)), source, tuple(mark for _, _, mark in sorted(points)))
            for (variant, other, not_fp8), points in lines.items()]


def sweep_chart(name: str, experiment: str, sources: list[tuple[str, str, list[CellRecord]]],
                metric: str = "latency", x: str | None = None) -> Chart | None:
    """`metric` against the size the experiment sweeps, a line per variant (and other varying axes) of each source
    (run id, a suffix telling its lines apart, its cells of the experiment); None when it sweeps no size or
    nothing was timed."""
    label, value, log_y = METRICS[metric]
    timed = [(run, suffix, c) for run, suffix, cells in sources for c in cells
             if c.status == "ok" and c.median_s and value(c)]
    shapes = [c.params.as_dict() for _, _, c in timed]
    x, rest = swept_size(shapes, x)
    if x is None:
        return None
    series = [line for i, (run, suffix, _) in enumerate(sources)
              for line in series_of([c for r, s, c in timed if (r, s) == (run, suffix)], x, rest, value, suffix, i)]
    fixed = shape.label(shapes[0], omit=tuple(k for k in shape.NAMES if len({s.get(k) for s in shapes}) > 1))
    timers = sorted({c.timer for _, _, c in timed if c.timer})
    shown = f"; {MAX_SERIES} of {len(series)} lines" if len(series) > MAX_SERIES else ""
    return Chart(stem(name), f"{experiment}: {label.split(' (')[0]} against {shape.title(x)}",
                 f"{fixed} · median {'/'.join(timers)} time{shown}", shape.title(x), label, tuple(series[:MAX_SERIES]),
                 tuple(dict.fromkeys(run for run, _, _ in sources)), log_y)


def latency_chart(run_id: str, experiment: str, cells: list[CellRecord]) -> Chart | None:
    """Median latency against the size the experiment sweeps, a line per variant (and other varying axes)."""
    return sweep_chart(f"{run_id}-{experiment}", experiment, [(run_id, "", cells)])


def colours(series: tuple[Series, ...]) -> dict[str, str]:
    others = [s.variant for s in series if s.variant not in VARIANT_COLOURS]
    spare = {v: SPARE_COLOURS[i % len(SPARE_COLOURS)] for i, v in enumerate(dict.fromkeys(others))}
    return {**VARIANT_COLOURS, **spare}


def draw(chart: Chart, fmt: str = "png") -> bytes:
    """The chart as image bytes (png or svg), the same bytes for the same chart and matplotlib."""
    from matplotlib import rc_context

    with rc_context({"svg.hashsalt": "attnbench", "svg.fonttype": "none", "font.size": FONT_PT}):
        figure = figure_of(chart)
        data = io.BytesIO()
        metadata = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
        figure.savefig(data, format=fmt, metadata=metadata)
    return data.getvalue()


def figure_of(chart: Chart):
    """The chart on a matplotlib Figure: its title and subtitle above, the legend right of the plot, the runs below."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=SIZE_IN, dpi=DPI, layout="constrained")
    _plot(figure.subplots(), chart)
    figure.suptitle(f"{chart.title}\n{chart.subtitle}", x=0.01, ha="left", fontsize=FONT_PT)
    figure.supxlabel(f"runs: {', '.join(chart.runs)}", x=0.01, ha="left", fontsize=FONT_PT, color="#555")
    return figure


def _plot(axes, chart: Chart) -> None:
    colour, used = colours(chart.series), {}
    by_source = len({s.source for s in chart.series}) > 1  # steady solid, burst dashed: the style names the source
    for s in chart.series:
        style = STYLES[(s.source if by_source else _next(used, s.variant)) % len(STYLES)]
        xs, ys = zip(*s.points)
        axes.plot(xs, ys, style, marker="o", markersize=3, color=colour[s.variant], label=s.label, linewidth=1.5)
    axes.set_xscale("log", base=2)
    axes.xaxis.set_major_formatter(lambda value, _: f"{value / 1024:g}k" if value >= 1024 else f"{value:g}")
    if chart.log_y:
        _log_y(axes)
    axes.set_xlabel(chart.x)
    axes.set_ylabel(chart.y)
    axes.grid(True, which="major", color=GRID_COLOUR)
    axes.legend(fontsize=FONT_PT, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)


def _log_y(axes) -> None:
    """A log y axis labelled at its 1-2-5 values (decades alone past four of them, as the dashboard's) and nowhere
    else, in plain numbers; one too narrow for two of those (150 to 320: only 200) labelled in even linear steps
    instead, so a reader can tell values apart. The ticks are placed here, not by matplotlib's minor locator, whose
    choice changes between versions (3.8's falls back to AutoLocator's 160, 180, ...)."""
    from matplotlib import ticker

    axes.set_yscale("log")
    low, high = axes.get_ylim()
    labelled = _one_two_five(low, high)
    axes.yaxis.set_major_locator(ticker.FixedLocator(labelled) if len(labelled) >= 2 else ticker.MaxNLocator(nbins=4))
    axes.yaxis.set_major_formatter(lambda value, _: _plain(value))
    axes.yaxis.set_minor_formatter(ticker.NullFormatter())
    if len(labelled) < 2:
        axes.yaxis.set_minor_locator(ticker.NullLocator())


def _one_two_five(low: float, high: float) -> list[float]:
    """1, 2 and 5 times each power of ten from `low` to `high`; the powers of ten alone past ONE_TWO_FIVE_SPAN."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    mantissas = (1, 2, 5) if high / low <= ONE_TWO_FIVE_SPAN else (1,)
    return [v for e in range(first, last + 1) for m in mantissas if low <= (v := float(f"{m}e{e}")) <= high]


def _plain(value: float) -> str:
    """A tick's value as a plain number to six digits: 0.00005 and 2000000, never 5e-05 or 2e+06."""
    return format(Decimal(f"{value:.6g}"), "f")


def _next(used: dict[str, int], variant: str) -> int:
    """A variant's lines after its first take the next line style."""
    used[variant] = used.get(variant, -1) + 1
    return used[variant]
