"""Plotly figures drawn the way the lab's plots read: a fixed colour per variant in every chart, runs told apart
by line style (bars: by hatching), two short legends (variants, runs), titles that say what is held fixed and
by which timer, 1-2-5 ticks on log axes and the q1-q3 range as error bars."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from runner import counted, shape
from runner.figures import GRID_COLOUR as GRID  # as the reports: the grid's colour, a variant's, a log axis's ticks
from runner.figures import ONE_TWO_FIVE_SPAN, VARIANT_COLOURS
from runner.marks import UNSETTLED_MARK

DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "cross", "star"]
PATTERNS = ["", "/", "\\", "x", ".", "+"]
MAX_RUNS = len(DASHES)  # runs one chart tells apart; the views say when they draw fewer than selected
HEIGHT = 460
# Plain styling instead of a plotly template: a template is expanded into every figure (most of its bytes and of
# the time to build it), and streamlit's own theme is off (views.plot).
PLAIN = {"template": "none", "paper_bgcolor": "white", "plot_bgcolor": "white",
         "font": {"family": "Source Sans Pro, sans-serif", "size": 13, "color": "#31333f"}}
AXIS = {"gridcolor": GRID, "zerolinecolor": GRID, "linecolor": "#bbb", "showline": True, "ticks": "outside",
        "tickcolor": "#bbb", "automargin": True}
AXES = {
    **{name: shape.title(name) for name in shape.SIZES},
    "latency_ms": "median latency (ms)", "speedup": "speed-up over the baseline (×)", "tflops": "TFLOP/s",
    "tflops_per_j": "TFLOP per joule", "pct_of_peak": "% of measured bf16 matmul peak",
    "pct_of_clock_peak": "% of MMA peak at its SM clock",
    "pct_of_bandwidth": "% of measured bandwidth", "gbps": "GB/s (Q, K, V, O once)",
    "temp_mib": "compiled temp memory (MiB)", "kv_cache_mib": "KV cache (MiB)", "sm_clock_median_mhz": "SM clock (MHz)",
    "power_mean_w": "mean power (W)", "attention": "attention (KV heads K)", "median_ms": "median latency (ms)",
    "us_per_token": "µs per generated token (B × T new)", "devices": "devices the sequence is split across",
    "efficiency": "scaling efficiency: t(1) / (D × t(D))", "t_s": "seconds under load", "sm_clock_mhz": "SM clock (MHz)",
    "power_w": "power (W)", "temperature_c": "temperature (°C)",
}


def colours(variants: list[str]) -> dict[str, str]:
    """Variant -> colour: the fixed ones, then palette colours in the order given (pass every variant the store
    knows, so a variant keeps its colour whatever is selected)."""
    spare = [c for c in qualitative.Dark24 if c.lower() not in {v.lower() for v in VARIANT_COLOURS.values()}]
    others = [v for v in dict.fromkeys(variants) if v not in VARIANT_COLOURS]
    return {**VARIANT_COLOURS, **{v: spare[i % len(spare)] for i, v in enumerate(others)}}


@dataclass(frozen=True)
class Style:
    """How a chart tells series apart: colour per variant (fixed for the store), line style per run."""

    colour: dict[str, str]
    runs: tuple[str, ...]  # the drawn runs, newest first: line styles in this order

    def dash(self, run: str) -> str:
        return DASHES[self.runs.index(run)]

    def symbol(self, run: str) -> str:
        return SYMBOLS[self.runs.index(run)]


def log_ticks(low: float, high: float) -> list[float]:
    """1-2-5 ticks covering [low, high] (plotly's log axis labels only decades, or nothing within one); decades
    alone past ONE_TWO_FIVE_SPAN, where 1-2-5 would crowd the axis."""
    mantissas = (1, 2, 5) if high / low <= ONE_TWO_FIVE_SPAN else (1,)
    ticks = [m * 10.0**e for e in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
             for m in mantissas]
    inside = [t for t in ticks if low <= t <= high]
    below, above = [t for t in ticks if t < low], [t for t in ticks if t > high]
    return below[-1:] + inside + above[:1]  # one tick beyond each end, so the data sits between labels


def _format(value: float) -> str:
    return f"{value:g}"


STEADY = 0.01  # values (error bars too) within this share of their level draw as one level, not as a slope


def _y_axis(fig: go.Figure, values: pd.Series, log: bool, bars: tuple[pd.Series, ...] = ()) -> None:
    """A log axis with 1-2-5 ticks when the values span more than 4×, else linear (reads better when close); a linear
    axis whose values and error `bars` all but agree (a clock held at 1980 MHz) spans ±2 % of their level, where
    plotly zoomed in to ±1 unit and drew a steady value amid ticks half a MHz apart."""
    positive = values[values > 0].dropna()
    if log and len(positive) and positive.max() / positive.min() > 4:
        ticks = log_ticks(positive.min(), positive.max())
        fig.update_yaxes(type="log", tickvals=ticks, ticktext=[_format(t) for t in ticks])
        return
    drawn = pd.concat([values, *bars]).dropna()
    level = drawn.abs().max() if len(drawn) else 0
    if level > 0 and drawn.max() - drawn.min() <= STEADY * level:
        middle = (drawn.max() + drawn.min()) / 2
        fig.update_yaxes(range=[middle - 2 * STEADY * level, middle + 2 * STEADY * level])


def _x_sizes(fig: go.Figure, values: pd.Series) -> None:
    """A log axis ticked at the swept sizes themselves (each a doubling)."""
    ticks = sorted(values.dropna().unique())
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])


def _title(title: str, subtitle: str) -> dict:
    """A chart's title (bold) and subtitle, left-aligned; their lines run down from the first one's baseline, which
    fit places once the figure's height is known."""
    return {"text": title, "font": {"size": TITLE_FONT_PX, "weight": "bold"}, "x": 0.01, "xanchor": "left",
            "yref": "container", "yanchor": "bottom", "subtitle": {"text": subtitle, "font": {"size": SUBTITLE_FONT_PX}}}


def _layout(fig: go.Figure, title: str, subtitle: str, x: str, y: str) -> go.Figure:
    """Titles, axes and the two horizontal legends; the titles' lines, the legends' rows and the figure's height are
    set once every trace is in (fit, from views.plot: published series come after)."""
    return fig.update_layout(
        title=_title(title, subtitle),
        **PLAIN, xaxis=AXIS, yaxis=AXIS, xaxis_title=AXES.get(x, x), yaxis_title=AXES.get(y, y), hovermode="closest",
        legend={"orientation": "h", "title": {"text": "variant "}}, legend2={"orientation": "h", "title": {"text": "run "}},
    )


# The layout is fitted to a browser window 1280 px wide (a laptop's): its main area, beside the 400 px sidebar
# (app.py sets it) and 80 px of padding each side, is 720 px, of which a row of columns shares 704 (two columns stand
# 16 px apart). A chart is fitted to its column's width (views.plot's `share` of a row), by default
# the narrowest a chart gets: the Latency chart beside its table, 5 of 11 (320 px; half a row is 352).
WINDOW_PX, PADDING_PX = 1280, 80
SIDEBAR_PX = 400  # wide enough for a whole run id in each chip: ids tell runs apart, cut ones do not
MAIN_PX, GAP_PX, NARROWEST = WINDOW_PX - SIDEBAR_PX - 2 * PADDING_PX, 16, 5 / 11
MARGIN_L, MARGIN_R = 60, 20


def figure_px(share: float = NARROWEST) -> int:
    """A figure's width in a 1280 px window, in a column holding `share` of its row (1: the whole main area)."""
    return MAIN_PX if share == 1 else round(share * (MAIN_PX - GAP_PX))


# The two legends sit under the x axis title, so the plot keeps its width whatever the number of variants and runs,
# and the figure grows by their height, so the plot keeps its height too and charts side by side stay level. plotly
# lays a horizontal legend that takes more than one row out in columns as wide as its widest entry, as many as the
# plot's width holds: a wider window holds more, and the rows a figure was given for a narrower one stand blank. So
# each legend's columns are fixed (entrywidthmode 'fraction': a column is 1/n of the plot's width in any window): as
# many of its widest entry (at a wide letter's width) as the plot holds in a 1280 px window, in the column the chart
# stands in (plot_px(share)), and the figure is given the height those rows take (plotly's: 1.3 font sizes a line of
# an entry, 3 px more an entry, 10 px a legend), the same in any window 1280 px wide or wider. A name wider than the
# plot is wrapped at its spaces.
TOP_PX, PLOT_PX, AXIS_PX, CHAR_PX, ENTRY_PX = 70, 265, 58, 7.0, 46
ENTRY_PAD_PX, LEGEND_PAD_PX, LEGEND_GAP_PX, BOTTOM_PX = 3, 10, 6, 12


def plot_px(share: float = NARROWEST) -> int:
    """The width of a figure's plot (its legends' too) in a 1280 px window, in a column holding `share` of its row."""
    return figure_px(share) - MARGIN_L - MARGIN_R


# plotly wraps no title either: one wider than its chart runs past the chart's right edge. Titles and subtitles are
# broken at their spaces into lines that fit the chart's width (figure_px) at the legends' wide letter (CHAR_PX at
# their 13 px, scaled to the font; bold titles measured up to 1.18 times that, 0.63 em a letter), and the top margin
# and the figure grow by the lines added (plotly sets a line every 1.3 font sizes), so the plot keeps its size. A
# title wrapped for its column at 1280 px stays wrapped in a wider window, where it would have fitted on one line: a
# line more of top margin (24 px for a title, 17 for a subtitle), the price of one rule for every window.
TITLE_FONT_PX, SUBTITLE_FONT_PX, FONT_PX, BOLD, LINE_SPACING = 18, 13, 13, 1.2, 1.3
TITLE_BASELINE_PX, TITLE_RIGHT_PX = 35, 8  # the first line's baseline from the figure's top; room kept at the right


def wrap(text: str, width: float, char_px: float = CHAR_PX, extra_px: float = 0) -> str:
    """`text` with each of its lines broken at its spaces into lines of at most `width` pixels at `char_px` a letter
    (and `extra_px` a line: a legend entry's symbol); a word longer than that keeps a line of its own."""
    lines: list[str] = []
    for line in text.split("<br>"):
        lines.append("")
        for word in line.split(" "):
            if lines[-1] and extra_px + char_px * len(f"{lines[-1]} {word}") > width:
                lines.append(word)
            else:
                lines[-1] = f"{lines[-1]} {word}" if lines[-1] else word
    return "<br>".join(lines)


def _wrapped(fig: go.Figure, width: float) -> tuple[str, str]:
    """The figure's title and subtitle (_title's) in lines that fit a figure `width` pixels wide."""
    title, subtitle = fig.layout.title, fig.layout.title.subtitle
    room = width * (1 - title.x) - TITLE_RIGHT_PX
    return (wrap(title.text or "", room, CHAR_PX * title.font.size / FONT_PX * BOLD),
            wrap(subtitle.text or "", room, CHAR_PX * subtitle.font.size / FONT_PX))


def _added_px(fig: go.Figure, width: float) -> float:
    """The height the figure's title and subtitle take at `width` beyond a line each (what the top margin holds)."""
    title, subtitle = _wrapped(fig, width)
    return LINE_SPACING * (fig.layout.title.font.size * title.count("<br>")
                           + fig.layout.title.subtitle.font.size * subtitle.count("<br>"))


def fit_titles(fig: go.Figure, width: float, beside: tuple[go.Figure, ...] = ()) -> int:
    """Wrap the title and subtitle into lines that fit a figure `width` pixels wide; the pixels of top margin to add
    for the lines added: the most that it or a figure `beside` it in its row needs, so that their plots stay level."""
    added = max(_added_px(f, width) for f in (fig, *beside))
    fig.layout.title.text, fig.layout.title.subtitle.text = _wrapped(fig, width)
    return math.ceil(added)


def _entry_px(name: str) -> float:
    return ENTRY_PX + CHAR_PX * max(len(line) for line in name.split("<br>"))


def legend_name(name: str, width: float) -> str:
    """`name` as its legend entry shows it: wrapped at its spaces into lines that fit `width` pixels (a word longer
    than that keeps a line of its own)."""
    return wrap(name, width, CHAR_PX, ENTRY_PX)


def legend_columns(names: list[str], width: float) -> int:
    """The columns of a legend of these entries (legend_name's) in a plot `width` pixels wide: as many of the widest
    entry as fit, at least one."""
    return max(1, int(width // max(map(_entry_px, names)))) if names else 1


def legend_px(names: list[str], columns: int) -> int:
    """The height plotly gives a horizontal legend of these entries in rows of `columns`, a row as tall as its
    tallest entry (0: no entry, no legend)."""
    if not names:
        return 0
    lines = [name.count("<br>") + 1 for name in names]
    rows = [max(lines[i:i + columns]) for i in range(0, len(lines), columns)]
    return math.ceil(sum(max(LINE_SPACING * FONT_PX * tall, 16) + ENTRY_PAD_PX for tall in rows) + LEGEND_PAD_PX)


def fit(fig: go.Figure, share: float = NARROWEST, beside: tuple[go.Figure, ...] = ()) -> go.Figure:
    """Fit a figure of this module to the column it gets (`share` of a row, figure_px), once every trace is in
    (views.plot): its titles wrapped into lines and, where it has the two horizontal legends, its legends given their
    columns and rows for that width; the top margin (as tall as the figures `beside` it need: their plots stay level)
    and the height grow by what they take, so the plot keeps its size."""
    added = fit_titles(fig, figure_px(share), beside)
    if getattr(fig.layout, "legend2", None) is not None and fig.layout.legend2.orientation == "h":
        fit_legends(fig, plot_px(share), TOP_PX + added)
    else:
        fig.update_layout(height=fig.layout.height + added, margin_t=fig.layout.margin.t + added)
    return fig.update_layout(title_y=1 - TITLE_BASELINE_PX / fig.layout.height)


def fit_legends(fig: go.Figure, width: float, top: float = TOP_PX) -> go.Figure:
    """Give the legends ('legend': variants, published series, ringed cells; 'legend2': runs) of a plot `width`
    pixels wide their columns and the height their rows take under the x axis, and make the figure that much taller,
    over a top margin of `top` pixels (the titles')."""
    entries: dict[str, list[str]] = {"legend": [], "legend2": []}
    shown = {trace.name for trace in fig.data if trace.showlegend is not False and trace.name is not None}
    for trace in fig.data:  # every trace of a series shown, so that its name stays one
        if trace.name in shown:
            trace.name = legend_name(trace.name, width)
            names = entries.setdefault(trace.legend or "legend", [])
            if trace.showlegend is not False and trace.name not in names:
                names.append(trace.name)
    columns = {key: legend_columns(entries[key], width) for key in entries}
    tall = {key: legend_px(entries[key], columns[key]) for key in entries}
    runs = tall["legend2"] + LEGEND_GAP_PX if tall["legend2"] else 0
    below = AXIS_PX + tall["legend"] + runs + BOTTOM_PX
    height = top + PLOT_PX + below
    at = {"legend": below - AXIS_PX, "legend2": runs + BOTTOM_PX - LEGEND_GAP_PX}
    return fig.update_layout(  # legend positions in pixels from the figure's bottom ('container'), as the margin is
        height=height, margin={"l": MARGIN_L, "r": MARGIN_R, "t": top, "b": below},
        **{key: {"yref": "container", "y": at[key] / height, "yanchor": "top", "xref": "container", "x": 0.0,
                 "xanchor": "left", "traceorder": "normal", "entrywidthmode": "fraction", "maxheight": 1,
                 "entrywidth": 1 / columns[key]} for key in ("legend", "legend2")},
    )


def _legend_keys(fig: go.Figure, style: Style, variants: list[str], runs: list[str], bars: bool = False) -> None:
    """One legend entry per variant (its colour) and, with several runs, one per run (its line style or hatch)."""
    for variant in variants:
        fig.add_trace(_key(variant, {"color": style.colour[variant]}, bars, legend="legend", legendgroup=variant))
    if len(runs) > 1:
        for run in runs:
            look = {"color": "#555", "pattern_shape": PATTERNS[style.runs.index(run)]} if bars else {"color": "#555"}
            fig.add_trace(_key(run, look, bars, legend="legend2", dash=None if bars else style.dash(run),
                               symbol=None if bars else style.symbol(run)))


def _key(name: str, look: dict, bars: bool, dash: str | None = None, symbol: str | None = None,
         **where) -> go.BaseTraceType:
    if bars:
        return go.Bar(x=[None], y=[None], name=name, marker=look, showlegend=True, **where)
    return go.Scatter(x=[None], y=[None], name=name, mode="lines+markers", showlegend=True, **where,
                      line={"color": look["color"], "dash": dash or "solid"}, marker={"symbol": symbol or "circle"})


def _error(df: pd.DataFrame, y: str, low: str | None, high: str | None) -> dict | None:
    if not low or not high or df[low].isna().all():
        return None
    return {"type": "data", "array": (df[high] - df[y]).clip(lower=0), "arrayminus": (df[y] - df[low]).clip(lower=0),
            "thickness": 1, "width": 3}


def lines(df: pd.DataFrame, x: str, y: str, style: Style, title: str, subtitle: str, log_y: bool = True,
          low: str | None = None, high: str | None = None, by: str | None = None) -> go.Figure:
    """y against a swept size, a line per variant and run, and per value of column `by` (the case of the other
    swept axes, 'causal tp2'), which names the line on hover; error bars from `low` to `high` (q1-q3); cells whose
    runner.marks marks ⚠ (unsettled: its power state not settled or its SM clock moved) ringed in red."""
    fig = go.Figure()
    df = df.sort_values(x)
    for group, series in df.groupby(["variant", "run", *([by] if by else [])], sort=False):
        variant, run = group[:2]
        name = " · ".join(map(str, group))
        fig.add_trace(go.Scatter(
            x=series[x], y=series[y], mode="lines+markers", showlegend=False, legendgroup=variant, name=name,
            line={"color": style.colour[variant], "dash": style.dash(run), "width": 2},
            marker={"symbol": style.symbol(run), "size": 7}, error_y=_error(series, y, low, high),
            hovertemplate=f"{name}<br>{x} %{{x}}<br>{AXES.get(y, y)} %{{y:.4g}}<extra></extra>",
        ))
    _legend_keys(fig, style, list(dict.fromkeys(df["variant"])), list(dict.fromkeys(df["run"])))
    _ring_unsettled(fig, df, x, y)
    _x_sizes(fig, df[x])
    _y_axis(fig, df[y], log_y, tuple(df[c] for c in (low, high) if c))
    return _layout(fig, title, subtitle, x, y)


def _ring_unsettled(fig: go.Figure, df: pd.DataFrame, x: str, y: str) -> None:
    column = UNSETTLED_MARK.column
    flagged = df[df[column]] if column in df else df.iloc[:0]
    if len(flagged):
        fig.add_trace(go.Scatter(x=flagged[x], y=flagged[y], mode="markers",
                                 name=f"{UNSETTLED_MARK.symbol} {UNSETTLED_MARK.word}",
                                 legend="legend", marker={"symbol": "circle-open", "size": 16, "color": "#d62728",
                                                          "line": {"width": 2}}, hoverinfo="skip"))


def bars(df: pd.DataFrame, x: str, y: str, style: Style, title: str, subtitle: str, log_y: bool = False,
         low: str | None = None, high: str | None = None) -> go.Figure:
    """y per category of `x` (in the frame's order), bars side by side: colour by variant, hatching by run."""
    fig = go.Figure()
    for (variant, run), series in df.groupby(["variant", "run"], sort=False):
        fig.add_trace(go.Bar(
            x=series[x], y=series[y], name=f"{variant} · {run}", showlegend=False, legendgroup=variant,
            offsetgroup=f"{variant} · {run}", error_y=_error(series, y, low, high),
            marker={"color": style.colour[variant], "pattern_shape": PATTERNS[style.runs.index(run)]},
            hovertemplate=f"{variant} · {run}<br>%{{x}}<br>{AXES.get(y, y)} %{{y:.4g}}<extra></extra>",
        ))
    _legend_keys(fig, style, list(dict.fromkeys(df["variant"])), list(dict.fromkeys(df["run"])), bars=True)
    fig.update_layout(barmode="group")
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=list(dict.fromkeys(df[x])))
    fig = _layout(fig, title, subtitle, x, y)
    _y_axis(fig, df[y], log_y)
    return fig


def peak_lines(fig: go.Figure, highest: float, peak: float | None,
               named: str = "bf16 matmul peak (measured)") -> go.Figure:
    """The peak (`named`: the measured bf16 matmul peak, or the MMA peak at a cell's clock) once the data comes near
    it (half of it), and FP8's nominal 2× once data passes it: FP8 runs on FP8 tensor cores, so FP8 cells above 100 %
    are expected, not an error. (Lines far above small values would squash them flat.)"""
    if peak is None or math.isnan(peak) or highest < peak / 2:
        return fig
    level(fig, peak, named, line_dash="dash", line_color="#444")
    if highest > peak:
        level(fig, 2 * peak, "FP8 tensor cores: 2× bf16 peak (nominal)", line_dash="dot", line_color="#999")
    return fig


# A level's label stands on its line at the plot's left, where a data line may cross it: a white ground keeps it legible
LABEL_GROUND = "rgba(255, 255, 255, 0.85)"


def level(fig: go.Figure, y: float, text: str, position: str = "top left", **line) -> go.Figure:
    """A horizontal line across the plot at `y` (a peak, a limit), labelled on a white ground."""
    return fig.add_hline(y=y, annotation_text=text, annotation_position=position,
                         annotation_bgcolor=LABEL_GROUND, **line)


VERDICT_COLOURS = {"faster": "#2ca02c", "slower": "#d62728", "within noise": "#b0b0b0", "unconfirmed": "#ff7f0e",
                   "not reproduced": "#9467bd"}


def ratio_bars(table: pd.DataFrame, title: str, subtitle: str) -> go.Figure:
    """B / A per cell as horizontal bars diverging from 1.0, in spec order top to bottom: green faster, red
    slower (beyond both runs' noise), grey within noise, orange unconfirmed (a side not converged), purple not
    reproduced (slower, not when measured again)."""
    labels = table["variant"] + "  " + table["shape"]
    fig = go.Figure(go.Bar(
        y=labels, x=table["ratio"] - 1, base=1, orientation="h",
        marker={"color": table["verdict"].map(VERDICT_COLOURS)}, customdata=np.stack([table["a_ms"], table["b_ms"],
                                                                                      table["verdict"]], axis=1),
        hovertemplate="%{y}<br>B / A %{x:.3f}<br>A %{customdata[0]:.4g} ms · B %{customdata[1]:.4g} ms"
                      "<br>%{customdata[2]}<extra></extra>",
    ))
    fig.add_vline(x=1.0, line_color="#444")
    spread = max(0.05, float((table["ratio"] - 1).abs().max()) * 1.1)
    fig.update_xaxes(range=[1 - spread, 1 + spread], title="latency B / A (× ; below 1: B faster)")
    fig.update_yaxes(autorange="reversed", type="category", automargin=True)
    return fig.update_layout(
        title=_title(title, subtitle), **PLAIN, xaxis=AXIS, yaxis=AXIS,
        height=120 + 22 * len(table), margin={"l": 10, "r": 20, "t": 70, "b": 40}, showlegend=False, bargap=0.25,
    )


SHA_TICKS = 10
# A step's legend entry, symbol and colour by its verdict (runner.compare's, unconfirmed in the Compare tab's orange).
STEP_LOOKS = {"slower": ("step to slower", "triangle-up", VERDICT_COLOURS["slower"]),
              "faster": ("step to faster", "triangle-down", VERDICT_COLOURS["faster"]),
              "unconfirmed": ("unconfirmed step", "diamond", VERDICT_COLOURS["unconfirmed"]),
              "not reproduced": ("step not reproduced", "triangle-up-open", VERDICT_COLOURS["not reproduced"])}


def history_lines(points: pd.DataFrame, x: str, style: Style, title: str, subtitle: str,
                  marks: list[tuple[str, object, float, float, str]]) -> go.Figure:
    """Median against run date (or sha) per variant (its legend entry says over how many cells where `cells` is a
    column), the q1-q3 range as a shaded band; steps (`marks`: variant, x and median of the first run at the new
    level, new / old, and the verdict: slower, faster, unconfirmed or not reproduced) as one legend entry per verdict, their ratio on
    hover: no text on the plot to overlap."""
    fig = go.Figure()
    for variant, series in points.groupby("variant", sort=False):
        colour = style.colour[variant]
        band = pd.concat([series[x], series[x][::-1]])
        count = series["cells"].iloc[0] if "cells" in series else None
        name = variant if count is None else f"{variant} ({counted(count, 'cell')})"
        fig.add_trace(go.Scatter(x=band, y=pd.concat([series["q3_ms"], series["q1_ms"][::-1]]), fill="toself",
                                 fillcolor=colour, opacity=0.18, line={"width": 0}, hoverinfo="skip",
                                 showlegend=False, legendgroup=variant))
        fig.add_trace(go.Scatter(x=series[x], y=series["median_ms"], mode="lines+markers", name=name,
                                 legendgroup=variant, line={"color": colour}, marker={"size": 5},
                                 customdata=series["run"], hovertemplate="%{customdata}<br>%{y:.4g} ms<extra></extra>"))
    for verdict, (name, symbol, colour) in STEP_LOOKS.items():
        found = [m for m in marks if m[4] == verdict]
        if found:
            fig.add_trace(go.Scatter(
                x=[m[1] for m in found], y=[m[2] for m in found], mode="markers", name=name,
                marker={"symbol": symbol, "size": 13, "color": colour, "line": {"width": 1, "color": "white"}},
                text=[f"{m[0]} {m[3] - 1:+.1%}" for m in found], hovertemplate="%{text}<extra>step</extra>"))
    if x == "git_sha":  # at most SHA_TICKS labels, each sha cut to 7 characters: any count of runs stays readable
        shas = list(dict.fromkeys(points[x]))
        shown = shas[::math.ceil(len(shas) / SHA_TICKS)]
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=shas, tickangle=0, tickvals=shown,
                         ticktext=[str(sha)[:7] for sha in shown])
    _y_axis(fig, points["median_ms"], True)
    fig = _layout(fig, title, subtitle, x, "median_ms")
    return fig.update_layout(xaxis_title="run date" if x == "started" else "git sha (in date order)")


def soak_lines(points: pd.DataFrame, y: str, style: Style, title: str, subtitle: str) -> go.Figure:
    """A soak's y against seconds of unbroken load, a line per variant, run and cell (`case` names it on hover), with
    the house's two legends: a colour per variant, a line style per run."""
    fig = go.Figure()
    for (variant, run, case), series in points.groupby(["variant", "run", "case"], sort=False):
        name = f"{variant} · {case} · {run}"
        fig.add_trace(go.Scatter(
            x=series["t_s"], y=series[y], mode="lines", name=name, showlegend=False, legendgroup=variant,
            line={"color": style.colour[variant], "dash": style.dash(run), "width": 2},
            hovertemplate=f"{name}<br>%{{x:.2f}} s<br>{AXES[y]} %{{y:.4g}}<extra></extra>",
        ))
    _legend_keys(fig, style, list(dict.fromkeys(points["variant"])), list(dict.fromkeys(points["run"])))
    return _layout(fig, title, subtitle, "t_s", y)
