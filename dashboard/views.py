"""The dashboard's views: the problems and overview above the tabs, then one function per tab. Each draws from
the Selection, or says in a line why the selection has nothing for it."""

from __future__ import annotations

import functools
import urllib.parse
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from dashboard import charts, data, published, tables, widgets
from runner import compare as comparison
from runner import leaderboard as board
from runner import counted, report, shape
from runner.machine import short_sha
from runner.marks import UNCONVERGED_MARK, UNSETTLED_MARK
from runner.published import FIGURE_IS

MAX_PROBLEMS_SHOWN = 20
MAX_EXPERIMENTS = 10  # experiments drawn per tab; the Experiment filter picks others


@dataclass(frozen=True)
class Selection:
    """What the sidebar chose: the runs (keys, newest first), their cells under the filters rated by the timer,
    the filters themselves, the baseline of speed-ups and how charts tell variants and runs apart."""

    runs: list[str]
    cells: pd.DataFrame
    filters: dict[str, list]
    timer: str | None
    baseline: str | None
    style: charts.Style


def guarded(view):
    """A view that cannot draw odd data says so in the page; the other views still render."""

    @functools.wraps(view)
    def draw(*args, **kwargs):
        try:
            view(*args, **kwargs)
        except Exception as error:  # data from any store: one bad view must not blank the page
            st.error(f"{view.__name__}: could not draw this view: {type(error).__name__}: {error}")

    return draw


def link(**params) -> str:
    """A relative link to this dashboard with these query parameters (lists repeat the parameter)."""
    return "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None}, doseq=True)


def plot(fig, key: str, share: float = charts.NARROWEST, beside: tuple = ()) -> None:
    """A figure as charts.py drew it: streamlit's theme would restyle it (and drops legend entries of grouped
    traces), so it is off; every trace now in, its titles are wrapped and its legends given their rows for the
    column it stands in, `share` of its row (charts.fit; by default the narrowest a chart gets), its top margin as
    tall as the figures `beside` it need."""
    st.plotly_chart(charts.fit(fig, share, beside), key=key, theme=None, config={"displaylogo": False})


def plot_beside(figures: dict[str, object]) -> None:
    """Figures (key -> figure) side by side in a row of two columns, their plots level (the tallest titles' top
    margin for each); a third starts the next row."""
    pairs = list(figures.items())
    for row in (pairs[i:i + 2] for i in range(0, len(pairs), 2)):
        for (key, fig), column in zip(row, st.columns(2)):
            with column:
                plot(fig, key, 1 / 2, tuple(f for k, f in row if k != key))


# --- above the tabs ----------------------------------------------------------------------------------------------

def load_problems(snap: data.Snapshot, runs: list[str]) -> None:
    """What could not be read: a malformed manifest, file or line, an unknown schema_version, a run id in two
    folders (every manifest's problems; cells' problems for the runs shown, which are the runs read)."""
    problems = snap.problems + snap.run_problems(runs)
    if problems:
        shown = "\n".join(f"- `{p}`" for p in problems[:MAX_PROBLEMS_SHOWN])
        more = len(problems) - MAX_PROBLEMS_SHOWN
        st.warning(f"{counted(len(problems), 'problem')} reading results; the rest loaded:\n{shown}"
                   + (f"\n- …and {more} more" if more > 0 else ""))


@guarded
def overview(snap: data.Snapshot, sel: Selection) -> None:
    """Counts of the selection, then a row per selected run: where it ran, under which power policy (steady and burst
    times are not like with like), how warm its compile cache was, and how it moved against the previous run of its
    spec on its GPU. Markdown only: the page's first view stays light for the browser."""
    status = sel.cells["status"]
    gpus = ", ".join(snap.runs.loc[sel.runs, "gpu"].dropna().unique()) or data.NOT_KNOWN
    st.markdown(f"**{len(sel.runs):,} of {counted(len(snap.runs), 'run')}** · {gpus} · "
                f"cells: **{(status == 'ok').sum()} ok**, "
                f"{(status == 'skipped').sum()} skipped (expected), **{status.isin(tables.FAILED).sum()} failed** "
                "(failed, oom, incorrect, crashed or timeout: see Cells)")
    if not sel.runs:
        return
    if line := fastest(sel):
        st.markdown(line)
    rows = [_run_row(snap.runs.loc[run].fillna(data.NOT_KNOWN), run) + [_cache(snap, run)] for run in sel.runs]
    st.markdown(report.markdown_table(["run", "spec", "GPU", "power", "started", "git sha", "compile cache"], rows))
    moves = [f"- `{run}` {_move(snap, run, sel)}" for run in sel.runs[:charts.MAX_RUNS]
             if snap.manifests[run] is not None]
    st.markdown("**Against the previous run of the same spec identity, GPU, power policy and timer** (over the cells "
                f"both hold; beyond both runs' noise and {100 * comparison.DEFAULT_THRESHOLD:g} %, as `attnbench "
                "compare --against previous`)\n\n" + "\n".join(moves))


def fastest(sel: Selection) -> str:
    """Which variant is fastest where, the first thing the page answers: the newest selected run's leaderboard in a
    line, over the shapes where two or more correct variants ran ('' where none did)."""
    newest = sel.cells[sel.cells["run"] == sel.runs[0]] if sel.runs else sel.cells.iloc[:0]
    contested = board.contested(tables.standings(newest))
    if not contested:
        return ""
    return (f"By the {sel.timer} timer in `{sel.runs[0]}`: {board_summary(contested)} "
            "(every shape: Leaderboard)")


def _run_row(r: pd.Series, run: str) -> list:
    started = f"{r['started']:%Y-%m-%d %H:%M:%S}" if isinstance(r["started"], pd.Timestamp) else data.NOT_KNOWN
    return [run, r["spec"], r["gpu"], r["power"], started, short_sha(str(r["git_sha"]))]


def _cache(snap: data.Snapshot, run: str) -> str:
    """How warm the run's compile cache was, over all its cells (report.cache_of); NOT_KNOWN where no program's is."""
    return snap.parse([run])[run].cache or data.NOT_KNOWN


def _move(snap: data.Snapshot, run: str, sel: Selection) -> str:
    """How `run` moved against its predecessor, its worst slow-down, cells no longer ok, and a link to compare
    them."""
    found_before = comparison.previous(snap.manifests, run)
    before, over = found_before.run, comparison.passed_over(found_before)
    found = judged(snap, before, run, snap.cells((before,)), snap.cells((run,)), timer=sel.timer) if before else None
    table = found.cells if found else pd.DataFrame()
    if table.empty:
        said = ("no earlier run to compare" if found is None else
                f"nothing to compare with `{before}`: {comparison.nothing_compared(found)}")
        return said + (f" ({over})" if over else "")
    slower, faster = table[table["verdict"] == "slower"], table[table["verdict"] == "faster"]
    text = (f"vs `{before}`: {len(slower)} slower, {len(faster)} faster{report.not_reproduced_said(found)} of the "
            f"{counted(len(table), 'cell')} both timed, "
            f"geomean B / A {comparison.geomean(table['ratio']):.3f}×")
    text += f"; of those, {report.kernels_said(found)}" if len(found.kernels) else ""
    if said := report.marked_said(table, UNCONVERGED_MARK):
        text += f"; {said}" + (f", {len(found.unconfirmed)} unconfirmed" if len(found.unconfirmed) else "")
    if len(slower):
        worst = slower.loc[slower["ratio"].idxmax()]
        marked = f" ({worst['kernel']})" if worst["kernel"] else ""  # its ratio is another kernel's as well
        text += f"; worst {worst['experiment']}/{worst['variant']} {worst['shape']} {worst['ratio']:.2f}×{marked}"
    if len(found.no_longer_ok):
        text += f"; {len(found.no_longer_ok)} ok before and not now"
    if len(found.missing):
        text += f"; {len(found.missing)} ok before and missing now"
    if len(found.material):
        text += f"; differs: {comparison.said(found.material)}"  # compare's word: ⚠ is runner.marks' unsettled
    if found.sitting:  # no earlier sitting's run of the series is stored (comparison.previous)
        text += f"; {found.sitting}"
    if over:
        text += f"; {over}"
    return text + f" · [compare]({link(run=[run, before], tab='Compare', a=before, b=run)})"


# --- per experiment figures ----------------------------------------------------------------------------------------

def experiments(cells: pd.DataFrame, note: str = "") -> list[tuple[str, pd.DataFrame]]:
    """The experiments to draw, in spec order, at most MAX_EXPERIMENTS (a caption names the rest)."""
    names = list(dict.fromkeys(cells.sort_values(["order"], kind="stable")["experiment"]))
    if len(names) > MAX_EXPERIMENTS:
        st.caption(f"Showing {MAX_EXPERIMENTS} of {counted(len(names), 'experiment')}{note}; pick others with the "
                   f"Experiment filter: {', '.join(names[MAX_EXPERIMENTS:])}")
    return [(name, cells[cells["experiment"] == name]) for name in names[:MAX_EXPERIMENTS]]


def size_axis(cells: pd.DataFrame) -> str | None:
    """The swept size (T, B, ...) an experiment's lines run along, if it sweeps one; a size some cell holds at null
    (no window, a dense cache) tells lines apart instead."""
    return next((a for a in tables.swept(cells) if a in tables.SIZES and cells[a].notna().all()), None)


def drawn(cells: pd.DataFrame, sel: Selection) -> pd.DataFrame:
    """The cells of the runs a chart tells apart (the newest MAX_RUNS selected)."""
    return cells[cells["run"].isin(sel.style.runs)]


def figure(cells: pd.DataFrame, sel: Selection, y: str, what: str, log_y: bool = True, low: str | None = None,
           high: str | None = None, bars: str = "q1–q3", timed: bool = True):
    """y of one experiment's cells: lines along its swept size, else bars per swept case; the title names the
    experiment, the subtitle what is held fixed, the timer (where y comes from one) and what error bars span."""
    x = size_axis(cells)
    subtitle = tables.fixed_shape(cells) + (f" · {sel.timer} timer" if timed else "")
    subtitle += f" · error bars: {bars}" if low else ""
    title = f"{cells['experiment'].iloc[0]}: {what}"
    axes = tables.swept(cells)
    if x:  # a line per case of the other axes that vary at one size: cells of different masks never on one line
        others = tables.line_axes(cells, x)
        cases = tables.case(cells, others)
        return charts.lines(cells.assign(case=cases), x, y, sel.style, f"{title} vs {shape.BY_NAME[x].short}",
                            subtitle + mixed(others, cases.nunique()), log_y, low, high, by="case" if others else None)
    # one shape only (a filter, or runs that ran one size): its bars stand under that shape, not an empty category
    case = tables.case(cells, axes) if axes else pd.Series(tables.fixed_shape(cells), index=cells.index)
    fig = charts.bars(cells.assign(case=case).sort_values("order"), "case", y, sel.style, title, subtitle, log_y,
                      low, high)
    return fig.update_xaxes(title=", ".join(axes) or "shape")


def mixed(axes: list[str], cases: int) -> str:
    """What a chart's lines of one colour mix, for its subtitle: ' · each variant's lines: causal × tp (8 cases,
    hover names each)'; '' where a variant draws one line per run."""
    if not axes:
        return ""
    names = " × ".join(shape.BY_NAME[a].short or a for a in axes)
    return f" · each variant's lines: {names} ({cases} cases, hover names each)"


def runs_caption(sel: Selection) -> None:
    if len(sel.runs) > charts.MAX_RUNS:
        st.caption(f"Charts draw the {charts.MAX_RUNS} newest of the {counted(len(sel.runs), 'selected run')} "
                   "(one line style each); tables hold them all. History compares many runs.")


# --- tabs ----------------------------------------------------------------------------------------------------------

@guarded
def latency(snap: data.Snapshot, sel: Selection) -> None:
    ok = tables.measured(sel.cells)
    if ok.empty:
        st.info("No measured cell in the selection.")
        return
    mode, gpu_state, as_markdown = st.columns(3)  # each toggle's label whole at 1280 px (a fifth of the row cut it)
    speedups = mode.segmented_control("Show", ["latency", "speed-up"], key="y", bind="query-params",
                                      default="latency",
                                      help=f"speed-up: the baseline's latency ({sel.baseline}) over each variant's")
    gpu_state = gpu_state.toggle("GPU clock and power", key="clock", bind="query-params",
                                 help="under each chart, the SM clock and power while its cells were timed (where "
                                      "recorded); off, the page's first chart comes sooner (docs/benchmarks.md)")
    as_markdown = as_markdown.toggle("Tables as markdown", key="md", bind="query-params",
                                     help="each table also as GitHub markdown, to copy into a note or an issue")
    runs_caption(sel)
    shown = experiments(ok)
    first, rest = headline([cells for name, cells in shown if size_axis(cells)], sel)
    for cells in first:
        latency_row(cells, sel, speedups == "speed-up", as_markdown, snap.manifests, gpu_state)
    if rest and (more := more_experiments(rest)).open:
        with more:
            for cells in rest:
                latency_row(cells, sel, speedups == "speed-up", as_markdown, snap.manifests, gpu_state)
    unswept = [cells for name, cells in shown if not size_axis(cells)]
    if unswept:
        st.subheader("Experiments that sweep no size")
    for cells, column in zip(unswept, st.columns(2) * len(unswept)):
        with column:
            st.markdown(f"**{cells['experiment'].iloc[0]}** · {tables.fixed_shape(cells)}")
            summary_table(cells, sel, as_markdown)


def headline(charted: list[pd.DataFrame], sel: Selection) -> tuple[list[pd.DataFrame], list[pd.DataFrame]]:
    """The experiments charted at once, and those one click away: the first alone (the headline), unless the
    Experiment filter chose them. The browser draws every chart it is sent before the first is on screen: a view of
    nine charts took ~6 s more than one (docs/benchmarks.md)."""
    if sel.filters.get("experiment"):
        return charted, []
    return charted[:1], charted[1:]


def more_experiments(rest: list[pd.DataFrame]):
    """An expander naming the other experiments; its content runs only when it is open (a link opens it: more=true)."""
    names = ", ".join(cells["experiment"].iloc[0] for cells in rest)
    return st.expander(f"{counted(len(rest), 'more experiment')}: {names}", key="more", bind="query-params")


def latency_row(cells: pd.DataFrame, sel: Selection, speedups: bool, as_markdown: bool, manifests: dict,
                gpu_state: bool) -> None:
    """One experiment: its chart (with published figures at its shapes) beside its nvbench table; under them the SM
    clock and power when recorded and asked for (`gpu_state`), else a line naming the cells sampled unsettled."""
    name = cells["experiment"].iloc[0]
    chart, table = st.columns([5, 6])
    with chart:
        if speedups:
            plot(figure(drawn(cells, sel), sel, "speedup", f"speed-up over {sel.baseline}", log_y=False),
                 f"speedup-{name}")
        else:
            fig = figure(drawn(cells, sel), sel, "latency_ms", "latency", low="q1_ms", high="q3_ms")
            plot(published.draw(fig, drawn(cells, sel), size_axis(cells), "latency_ms", manifests), f"latency-{name}")
    with table:
        summary_table(cells, sel, as_markdown)
    if "sm_clock_median_mhz" in cells and cells["sm_clock_median_mhz"].notna().any():
        if gpu_state:
            telemetry_row(drawn(cells, sel), sel)
        elif said := ringed(cells, sel):
            st.caption(f"**{name}**: {said}; their clock and power: **GPU clock and power** above")


def ringed(cells: pd.DataFrame, sel: Selection) -> str:
    """'⚠ 2 cells unsettled (each sampled before its power state settled or ...), ringed in red': the cells of the
    drawn runs (drawn: the newest MAX_RUNS, those a chart rings) runner.marks marks ⚠, as the tables mark them; ''
    where none."""
    mark = UNSETTLED_MARK
    count = int(drawn(cells, sel)[mark.column].sum())
    each = "each " if count > 1 else ""
    return f"{mark.symbol} {counted(count, 'cell')} {mark.word} ({each}{mark.why}), ringed in red" if count else ""


def summary_table(cells: pd.DataFrame, sel: Selection, as_markdown: bool) -> None:
    """nvbench's tables, one per run: swept values down, variants across, 'median ±noise ·speed-up'; with
    `as_markdown`, all of them again as one markdown block (with a copy button)."""
    marks = tables.legend(cells)
    st.caption(f"median (ms) ±noise (IQR / median) ·speed-up over **{sel.baseline}**"
               + (f" · {marks}" if marks else ""))
    texts = []
    for run in [r for r in sel.runs if r in set(cells["run"])]:
        table = tables.summary(cells[cells["run"] == run])
        if len(sel.runs) > 1:
            st.markdown(f"`{run}`")
        st.markdown(tables.markdown(table))  # a markdown table costs the browser far less than st.table
        texts.append(f"{run}\n\n{tables.markdown(table)}")
    if as_markdown:
        st.code("\n\n".join(texts), language="markdown")


def telemetry_row(cells: pd.DataFrame, sel: Selection) -> None:
    """SM clock (min to max) and mean power (to max) against the same axis as latency, power limit dashed."""
    name = cells["experiment"].iloc[0]
    said = ringed(cells, sel)
    st.caption(f"GPU state while **{name}** was timed" + (f": {said}" if said else ""))
    clock = figure(cells, sel, "sm_clock_median_mhz", "SM clock", False, "sm_clock_min_mhz", "sm_clock_max_mhz",
                   "min–max")
    power = figure(cells, sel, "power_mean_w", "power", False, "power_mean_w", "power_max_w", "mean–max")
    limit = cells["power_limit_w"].dropna()
    if len(limit):
        charts.level(power, limit.max(), "power limit", "top right", line_dash="dash")
    plot_beside({f"clock-{name}": clock, f"power-{name}": power})


RATES = {"TFLOP/s": "tflops", "GB/s": "gbps", "TFLOP/J": "tflops_per_j"}  # the Throughput tab's rates


@guarded
def throughput(snap: data.Snapshot, sel: Selection) -> None:
    rate = st.segmented_control("Rate", list(RATES), key="rate", bind="query-params", default="TFLOP/s",
                                help="GB/s: the bytes a call must move (a decode's KV cache once) per second. "
                                     "TFLOP/J: FLOPs per joule of GPU energy (mean power × kernel time), from the "
                                     "record's telemetry")
    y = RATES.get(rate, "tflops")
    ok = tables.measured(sel.cells)
    shown = ok[ok[y].notna()]
    if shown.empty:
        st.info("No cell of the selection records energy: that needs NVML telemetry on a GPU (records of schema 3)."
                if y == "tflops_per_j" else "No measured cell in the selection.")
        return
    by_size = [(n, c) for n, c in experiments(shown, " with a rate") if size_axis(c) or split(c)]
    if not by_size:
        st.info("No experiment in the selection sweeps a size (T, B, ...) or the devices.")
        return
    runs_caption(sel)
    fp8, peaks = set(tables.fp8_variants(snap.manifests)), snap.runs["peak_tflops"]
    if fp8 & set(shown["variant"]):  # said where FP8 cells are drawn, not on every run
        st.caption("FP8 variants run on FP8 tensor cores, whose peak is twice bf16's: above 100 % of the measured bf16 "
                   "matmul peak is expected for them, not an error.")
    if shown["pct_of_bandwidth"].gt(100).any():  # said where a cell passes the copy's rate, as FP8's line above
        gpus = set(snap.runs.loc[shown["run"].unique(), "gpu"])
        st.caption(report.copy_passed(gpus.pop() if len(gpus) == 1 else None))
    for note in tables.rate_notes(shown, y):  # what a packed row's FLOPs or a serving cell's bytes count, as show says
        st.caption(note)
    for note in tables.unrated_notes(shown, snap.manifests, sel.timer) if y == "tflops" else []:  # no MMA rate
        st.caption(note)
    ceilings = shown[["pct_of_peak", "pct_of_bandwidth"]].notna().any(axis=None)
    if not ceilings:  # said once, and the rates drawn two to a row, not each beside the same sentence
        st.info("No measured matmul peak or memory bandwidth in these runs (the runner measures them on GPUs), so no "
                "% of either.")
    alone = {}
    for name, cells in by_size:
        if split(cells):
            scaling_rows(drawn(cells, sel), sel, y)
        elif ceilings:
            throughput_row(drawn(cells, sel), sel, y, peaks, snap.manifests)
        else:
            alone |= {f"rate-{name}": rate_figure(drawn(cells, sel), sel, y, peaks, snap.manifests),
                      **per_cell_figures(drawn(cells, sel), sel, y)}
    plot_beside(alone)


def rate_figure(cells: pd.DataFrame, sel: Selection, y: str, peaks: pd.Series, manifests: dict):
    """An experiment's rate along its size, published figures at its shapes, TFLOP/s with the measured peak."""
    fig = published.draw(figure(cells, sel, y, charts.AXES[y], log_y=False), cells, size_axis(cells), y, manifests)
    return charts.peak_lines(fig, cells[y].max(), drawn_peak(cells, peaks)) if y == "tflops" else fig


def throughput_row(cells: pd.DataFrame, sel: Selection, y: str, peaks: pd.Series, manifests: dict) -> None:
    """Rate of one experiment (with published figures at its shapes) beside its share of the measured ceiling
    (matmul peak, or bandwidth for decode); under the share, TFLOP/s' % of the MMA peak at each cell's clock, or
    beside GB/s a serving experiment's µs per generated token."""
    name = cells["experiment"].iloc[0]
    fig = rate_figure(cells, sel, y, peaks, manifests)
    ceiling = share_figure(cells, sel)
    rate, share = st.columns(2)
    with rate:
        plot(fig, f"rate-{name}", 1 / 2, beside=(ceiling[1],) if ceiling else ())
    with share:
        if ceiling:
            plot(ceiling[1], f"{ceiling[0]}-{name}", 1 / 2, beside=(fig,))
        else:
            st.info("No measured matmul peak in this experiment's runs (the runner measures it on GPUs), so no % of "
                    "peak.")
        for key, extra in per_cell_figures(cells, sel, y).items():
            plot(extra, key, 1 / 2)


def per_cell_figures(cells: pd.DataFrame, sel: Selection, y: str) -> dict[str, object]:
    """Where recorded: with TFLOP/s each cell's % of the MMA peak at its own clock, with GB/s a serving experiment's
    µs per generated token (a decode step's cost to each token it makes)."""
    name, found = cells["experiment"].iloc[0], {}
    if y == "tflops" and "pct_of_clock_peak" in cells and cells["pct_of_clock_peak"].notna().any():
        fig = figure(cells, sel, "pct_of_clock_peak", "% of MMA peak at its clock", log_y=False)
        found[f"clock-peak-{name}"] = charts.peak_lines(fig, cells["pct_of_clock_peak"].max(), 100.0,
                                                        "MMA peak at its SM clock")
    if y == "gbps" and cells["us_per_token"].notna().any():
        found[f"token-{name}"] = figure(cells, sel, "us_per_token", "µs per generated token")
    return found


def bound_by_bandwidth(cells: pd.DataFrame) -> bool:
    """Whether an experiment's cells come nearer the measured memory bandwidth than the matmul peak (a decode), by
    their median shares: the ceiling that binds them. Runs that measured both record both for every cell, and a
    prefill's 5 % of bandwidth says nothing beside its 60 % of the peak."""
    bandwidth, peak = cells["pct_of_bandwidth"].median(), cells["pct_of_peak"].median()
    return bandwidth == bandwidth and not peak >= bandwidth  # NaN: not measured


def share_figure(cells: pd.DataFrame, sel: Selection) -> tuple[str, object] | None:
    """An experiment's share of the measured ceiling that binds it (its key's prefix and figure): memory bandwidth
    (decode) or the matmul peak, whichever its cells come nearer; None where neither is measured."""
    if bound_by_bandwidth(cells):
        return "bandwidth", figure(cells, sel, "pct_of_bandwidth", "% of memory bandwidth", log_y=False)
    if cells["pct_of_peak"].notna().any():
        fig = figure(cells, sel, "pct_of_peak", "% of matmul peak", log_y=False)
        return "peak", charts.peak_lines(fig, cells["pct_of_peak"].max(), 100.0)
    return None


def split(cells: pd.DataFrame) -> bool:
    """Whether an experiment sweeps the devices its sequence is split across (context parallelism)."""
    return "devices" in tables.swept(cells)


def device_figure(cells: pd.DataFrame, sel: Selection, y: str, what: str, log_y: bool):
    """y of one shape's cells against the devices, a line per variant and run."""
    subtitle = f"{tables.fixed_shape(cells)} · {sel.timer} timer"
    title = f"{cells['experiment'].iloc[0]}: {what} vs devices"
    return charts.lines(cells, "devices", y, sel.style, title, subtitle, log_y)


def scaling_rows(cells: pd.DataFrame, sel: Selection, y: str) -> None:
    """An experiment split across devices: per value of its swept size, the rate and the scaling efficiency
    against the devices (1 dashed: perfect scaling)."""
    name, x = cells["experiment"].iloc[0], size_axis(cells)
    for value, part in cells.groupby(x) if x else [(None, cells)]:
        efficiency = device_figure(part, sel, "efficiency", "scaling efficiency", log_y=False)
        charts.level(efficiency, 1, "perfect scaling", "top right", line_dash="dash")
        plot_beside({f"scaling-rate-{name}-{value}": device_figure(part, sel, y, charts.AXES[y], log_y=False),
                     f"scaling-efficiency-{name}-{value}": efficiency})


def drawn_peak(cells: pd.DataFrame, peaks: pd.Series) -> float | None:
    """The measured matmul peak (TFLOP/s, the run's manifest) of the first drawn run that has one."""
    measured = pd.to_numeric(cells["run"].drop_duplicates().map(peaks), errors="coerce").dropna()
    return float(measured.iloc[0]) if not measured.empty else None


SOAK_CHARTS = {"tflops": "throughput (median kernel time of each bin's calls)", "sm_clock_mhz": "SM clock",
               "power_w": "power (NVML's trailing average)", "temperature_c": "temperature"}


@guarded
def soak(snap: data.Snapshot, sel: Selection) -> None:
    points = snap.soak(tuple(sel.style.runs))
    points = points[points["key"].isin(sel.cells["key"])]  # the cells the filters keep
    if points.empty:
        st.info("No cell of the selection has a soak: `attnbench soak SPEC` (or timing.soak_s) runs each cell back "
                "to back for a while on a GPU and records its thermal curve.")
        return
    runs_caption(sel)
    st.caption("Each cell run back to back from idle in one unbroken stream of calls (one CUPTI session): what the "
               "GPU sustains as its power controller and temperature settle. Bins of the calls that ended in them.")
    subtitle = tables.fixed_shape(sel.cells[sel.cells["key"].isin(points["key"])])
    plot_beside({f"soak-{y}": charts.soak_lines(points, y, sel.style, what, subtitle)
                 for y, what in SOAK_CHARTS.items()})


@guarded
def memory(snap: data.Snapshot, sel: Selection) -> None:
    ok = tables.measured(sel.cells)
    ok = ok[ok["temp_mib"].notna()]
    by_length = [(n, c) for n, c in experiments(ok) if size_axis(c) == "seq_len"]
    if not by_length:
        st.info("No experiment in the selection sweeps the sequence length with compiled memory recorded.")
        return
    st.caption("Temporary buffers of the compiled program: the naive path holds the (B, N, T, S) weights, O(T²); "
               "a fused kernel stays O(T).")
    plot_beside({f"memory-{name}": figure(drawn(cells, sel), sel, "temp_mib", "compiled temp memory", timed=False)
                 for name, cells in by_length})


def attention_kind(heads: int, kv_heads: int) -> str:
    """MHA, GQA or MQA by how many query heads share a KV head."""
    kind = "MHA" if kv_heads == heads else "MQA" if kv_heads == 1 else "GQA"
    return f"{kind} (K={kv_heads})"


@guarded
def heads(snap: data.Snapshot, sel: Selection) -> None:
    ok = tables.measured(sel.cells)
    names = [(n, c) for n, c in experiments(ok) if "kv_heads" in tables.swept(c)]
    if not names:
        st.info("No experiment in the selection sweeps the number of KV heads.")
    for name, cells in names:
        cells = drawn(cells, sel).sort_values(["kv_heads", "order"], ascending=[False, True])
        cells = cells.assign(attention=[attention_kind(h, k) for h, k in zip(cells["heads"], cells["kv_heads"])])
        fixed = tables.fixed_shape(cells)
        plot_beside({f"heads-latency-{name}": charts.bars(cells, "attention", "latency_ms", sel.style,
                                                          f"{name}: latency", f"{fixed} · {sel.timer} timer · "
                                                          "error bars: q1–q3", low="q1_ms", high="q3_ms"),
                     f"heads-cache-{name}": charts.bars(cells, "attention", "kv_cache_mib", sel.style,
                                                        f"{name}: KV cache", fixed)})


@guarded
def backends(snap: data.Snapshot, sel: Selection) -> None:
    ok = tables.measured(sel.cells)
    causal = ok[ok["causal"].eq(True) & ok["backend"].notna()]
    names = [(n, c) for n, c in experiments(causal) if c["backend"].nunique() > 1]
    if not names:
        found = ", ".join(sorted(causal["backend"].unique())) or "none"
        st.info(f"No experiment has causal cells from two or more backends (transformer_engine, cudnn, xla, ...); "
                f"here: {found}.")
        return
    runs_caption(sel)
    for name, cells in names:
        chart, table = st.columns([3, 2])
        with chart:
            plot(figure(drawn(cells, sel), sel, "latency_ms", "causal latency by backend", low="q1_ms", high="q3_ms"),
                 f"backends-{name}", share=3 / 5)
        with table:
            st.caption("What each variant's compiled program ran (its custom calls prove the backend), and where the "
                       "variants ran two cuDNN releases (TE's worker loads its own), which each ran")
            st.dataframe(proved(cells, snap.manifests), hide_index=True)


def proved(cells: pd.DataFrame, manifests: dict) -> pd.DataFrame:
    """Per variant (and run) its backend and custom calls, and a cuDNN column where the cuDNN kernels among them
    came from two or more releases (tables.cudnn_of): a te-against-cudnn gap is then in part the releases'."""
    cells = cells.assign(cuDNN=tables.cudnn_of(cells, manifests))
    shown = cells.drop_duplicates(["variant", "cuDNN"])[["variant", "backend", "cuDNN", "custom_calls"]]
    if shown["cuDNN"].nunique() < 2:
        return shown.drop(columns="cuDNN").drop_duplicates("variant")
    return shown.assign(cuDNN=shown["cuDNN"].fillna("—"))  # "—": no cuDNN kernel, as the published table says


@guarded
def fp8(snap: data.Snapshot, sel: Selection) -> None:
    table = tables.fp8_table(sel.cells, tables.fp8_variants(snap.manifests))
    if table.empty:
        st.info("No FP8 cells in the selection (FP8 variants need a GPU with FP8 support).")
        return
    st.caption("Whether FP8 really happened: the verdict, then the speed-up and error against the same shape in "
               "bf16, f8 types in the compiled program and an f8 kernel name. Above 100 % of the bf16 matmul peak is "
               "expected for real FP8 (FP8 tensor cores: twice bf16's peak).")
    st.dataframe(table, hide_index=True, column_config={
        "verdict": st.column_config.TextColumn(width="large"),
        "speed-up vs bf16": st.column_config.NumberColumn(format="%.2f×"),
        "% of bf16 peak": st.column_config.NumberColumn(format="%.0f %%"),
        "error vs bf16": st.column_config.NumberColumn(format="%.3g"),
        "kernels": st.column_config.TextColumn(width="medium"),
    })


@guarded
def leaderboard(snap: data.Snapshot, sel: Selection) -> None:
    standings = tables.standings(sel.cells, snap.manifests)
    if not standings:
        st.info("No measured cell in the selection.")
        return
    if contested := board.contested(standings):
        boards(snap, sel, contested)
    else:
        st.info("No shape in the selection where two or more variants ran correctly: no leaderboard.")
    beside = published.table(tables.measured(sel.cells), snap.manifests)
    missing = published.absent(sel.runs, snap.manifests)
    if not beside.empty or missing:
        st.subheader("Beside published figures")
    if not beside.empty:
        st.caption("Each measured cell at the shape of a published figure, on the GPU the figure was measured on "
                   "(docs/reference/), by the cell's headline timer (as `attnbench show`): measured / published "
                   f"below 1 is faster than published; {FIGURE_IS}.")
        st.dataframe(beside, hide_index=True)
    for note in missing:
        st.caption(note)


def boards(snap: data.Snapshot, sel: Selection, standings: list[board.Standing]) -> None:
    """Each selected run's leaderboard over its contested shapes (runner.leaderboard.contested), as `show`'s: its
    notes with the run's machine (a GPU without a cited MMA rate said); a run with none says so, where it was left
    out without a word."""
    st.caption(f"Per shape where two or more variants ran correctly: the fastest correct variant ({sel.timer} timer), "
               "how much longer the next takes (within noise: the gap is smaller than either's IQR) and how much "
               "longer `auto` takes, with the backend JAX picked for it.")
    as_markdown = st.toggle("Tables as markdown", key="md", bind="query-params")
    for run in sel.runs:
        mine = [s for s in standings if s.run_id == run]
        if not mine:
            st.caption(f"{run}: no leaderboard (no shape where two or more variants ran correctly)")
        else:
            manifest = snap.manifests.get(run)
            legacy, machine = board.legacy_of([manifest]), manifest.machine if manifest else None
            st.subheader(run)
            st.markdown(board_summary(mine))
            st.dataframe(tables.board(sel.cells, mine, legacy), hide_index=True)
            for note in board.notes(mine, legacy, machine):
                st.caption(note)
            if as_markdown:
                st.code(report.leaderboard_markdown(mine, legacy, machine), language="markdown")


def board_summary(standings: list[board.Standing]) -> str:
    """'**cudnn** fastest at 12 of 20 shapes, **te** at 8; auto within 5 % of the fastest at 6 of 14'."""
    return board.winners(standings, lambda variant: f"**{variant}**")


@guarded
def history(snap: data.Snapshot, sel: Selection) -> None:
    series = tables.series(snap.runs)
    if series.empty:
        st.info("History needs runs with a manifest.")
        return
    first = sel.runs[0] if sel.runs else snap.runs.index[0]
    labels = list(series.index)
    default = next((label for label, keys in series.items() if first in keys), labels[0])
    left, middle, right = st.columns([2, 1, 1])  # 'llama3.1-70b · NVIDIA H200 · steady' whole at 1280 px
    widgets.renamed("series", tables.former_labels(snap.runs))
    chosen = widgets.single(left, "selectbox", "Spec · GPU · power policy", labels, "series",
                            "has no runs in this store", chosen=default)
    x = widgets.single(right, "segmented_control", "Against", ["date", "git sha"], "hx", "is not an axis",
                       default="date")
    if chosen is None:  # Back to the step before the page chose it (docs/dashboard.md, Links)
        st.info("Choose a spec · GPU · power policy to draw its runs.")
        return
    keys = series.get(chosen, [])
    cells = tables.filtered(snap.cells(tuple(keys)), sel.filters)
    timer = comparison.shared_timer(cells, cells, sel.timer) if len(cells) else None
    if timer is None:
        st.info(f"No timed cell in the runs of {chosen}.")
        return
    points = tables.history(cells, snap.runs, timer)
    again = rechecks_of(snap, keys, sel.filters, timer)
    with middle:
        experiment = widgets.single(st, "selectbox", "Experiment", list(dict.fromkeys(points["experiment"])), "hexp",
                                    "is not in these runs")
    by_sha = x == "git sha" and points["git_sha"].notna().all()
    if x == "git sha" and not by_sha:
        st.caption("Some of these runs record no git sha: drawn against their date.")
    if experiment in set(points["experiment"]):  # an experiment from a link that these runs lack is flagged above
        history_chart(points[points["experiment"] == experiment], snap.manifests, sel,
                      "git_sha" if by_sha else "started", f"{chosen} · {counted(len(keys), 'run')} · {timer} timer",
                      again)
    worst_regressions(tables.judged_steps(points, snap.manifests, again), tables.status_regressions(cells, snap.runs))


def rechecks_of(snap: data.Snapshot, keys: list[str], filters: dict, timer: str) -> pd.DataFrame | None:
    """The history points of the rechecks of the runs `keys` (comparison.recheck_of), under the same `filters`: None
    where no run of them was measured again."""
    again = [r for r in (comparison.recheck_of(snap.manifests, k) for k in keys) if r]
    return tables.history(tables.filtered(snap.cells(tuple(again)), filters), snap.runs, timer) if again else None


def history_chart(points: pd.DataFrame, manifests: dict, sel: Selection, x: str, subtitle: str,
                  again: pd.DataFrame | None = None) -> None:
    """One cell's median and IQR band over the runs, its steps as `attnbench compare` judges their runs
    (tables.judged_steps), or the experiment's geometric mean per variant, its steps by compare's rule on levels."""
    cells = points.drop_duplicates("key").assign(label=lambda f: f["variant"] + " · " + tables.shape_labels(f))
    options = ["geometric mean per variant", *cells["label"]]
    picked = widgets.single(st, "selectbox", "Cell", options, "hcell", "is not in this experiment")
    if picked == options[0]:
        shown = tables.experiment_history(points)
        title = f"{points['experiment'].iloc[0]}: geometric mean of the cells every run holds"
        subtitle += " · per variant over the cells each of its runs holds (legend: how many)"
        lost = sorted(set(points["variant"]) - set(shown["variant"]))
        if lost:
            st.caption(f"No cell of {', '.join(lost)} is in every run that measured it: pick a cell to follow it.")
        marks = [(variant, s.iloc[i][x], s.iloc[i]["median_ms"], ratio, "slower" if ratio > 1 else "faster")
                 for variant, s in shown.groupby("variant", sort=False)
                 for i, ratio in tables.steps(s["median_ms"].tolist(),
                                              ((s["q3_ms"] - s["q1_ms"]) / s["median_ms"]).tolist())]
    else:
        key = cells.loc[cells["label"] == picked, "key"].iloc[0]
        shown = points[points["key"] == key]
        title = f"{points['experiment'].iloc[0]}: {picked}"
        after = shown.set_index("run")
        marks = [(step.variant, after.at[step.after, x], after.at[step.after, "median_ms"], step.ratio, step.verdict)
                 for step in tables.judged_steps(shown, manifests, again).itertuples()]
    plot(charts.history_lines(shown, x, sel.style, title, subtitle + " · band: q1–q3", marks), "history", share=1)


NO_REGRESSIONS = (  # the threshold as tables.judged_steps applies it: compare's
    f"No cell went from ok to incorrect or failed, nor stepped to a slower level (more than "
    f"{100 * comparison.DEFAULT_THRESHOLD:g} % and beyond its noise, as `attnbench compare` of the runs either side "
    f"says).")
UNCONFIRMED = (f"Unconfirmed steps: moved beyond the threshold and the noise, {comparison.UNCONFIRMED_WHY} and "
               f"short of {comparison.CONFIRM_NOISES}× its noise on its run's sample floor; `attnbench compare` of "
               "those runs says `unconfirmed`: no regression.")
NOT_REPRODUCED = ("Not reproduced: slower steps whose run after `attnbench recheck` measured again and found clearly "
                  "not slower than the run before; `attnbench compare` of those runs says `not reproduced`: no "
                  "regression (docs/regressions.md).")


def worst_regressions(judged: pd.DataFrame, broken: pd.DataFrame) -> None:
    """The cells that stopped being ok (`broken`: tables.status_regressions), then the largest steps for the worse
    that `attnbench compare` calls slower (`judged`: tables.judged_steps), each linked to a comparison of its runs;
    under them the unconfirmed steps, named apart, never counted among the regressions."""
    worst = pd.concat([broken, tables.regressions(judged)], ignore_index=True)
    st.subheader("Worst regressions in this history")
    if worst.empty:
        st.success(NO_REGRESSIONS)
    else:
        st.markdown(regressions_markdown(worst))
    kernels = worst["kernel"].ne("").any()
    if len(unconfirmed := tables.unconfirmed(judged)):
        st.caption(f"{counted(len(unconfirmed), 'unconfirmed step')}. {UNCONFIRMED}")
        st.markdown(regressions_markdown(unconfirmed))
        kernels |= unconfirmed["kernel"].ne("").any()
    if len(gone := tables.not_reproduced(judged)):
        st.caption(f"{counted(len(gone), 'step')} not reproduced. {NOT_REPRODUCED}")
        st.markdown(regressions_markdown(gone))
        kernels |= gone["kernel"].ne("").any()
    if kernels:
        st.caption(f"kernel: what the run after ran in place of the run before's, as `attnbench compare` marks a cell "
                   f"(its ratio is another kernel's as well as the code's). {comparison.KERNEL_KEY}")


def regressions_markdown(worst: pd.DataFrame) -> str:
    """The regressions as a markdown table, each linked to a comparison of its runs (names escaped: an experiment
    may be called anything): a cell that stopped being ok says so ('ok → incorrect'), a slower one by how much, and
    where any ran another kernel after its step, a `kernel` column marks it."""
    marked = bool(worst["kernel"].ne("").any())
    rows = [[r.experiment, r.variant, r.shape, _change(r), *([r.kernel] if marked else []),
             f"[{r.before} → {r.after}]({link(run=[r.after, r.before], tab='Compare', a=r.before, b=r.after)})"]
            for r in worst.itertuples()]
    return report.markdown_table(["experiment", "variant", "shape", "change", *(["kernel"] if marked else []),
                                  "runs (compare)"], rows)


def _change(row) -> str:
    ratio = getattr(row, "ratio", None)
    return f"{ratio:.2f}×" if isinstance(ratio, float) and ratio == ratio else f"{row.a} → {row.b}"


@guarded
def compare(snap: data.Snapshot, sel: Selection) -> None:
    """Run A against run B as `attnbench compare` sees them (runner/compare.py): status changes and cells in one run
    only first, then B / A per cell with its verdict, and the environments."""
    runs = list(snap.runs.index)
    if len(runs) < 2:
        st.info(f"Comparing needs two runs; {snap.uri} has {len(runs)}.")
        return
    named = {key: next((r for r in widgets.asked(key) if r in snap.manifests), None) for key in ("a", "b")}
    a_first, b_first = tables.pair(snap.manifests, runs, sel.runs, **named)
    left, right, limit = st.columns([2, 2, 1])
    a = widgets.single(left, "selectbox", "Run A (before)", runs, "a", "is not a run in this store", chosen=a_first)
    b = widgets.single(right, "selectbox", "Run B (after)", runs, "b", "is not a run in this store", chosen=b_first,
                       **({} if b_first else {"index": None}))
    threshold = limit.number_input("Threshold %", 0.0, 1000.0, 100 * comparison.DEFAULT_THRESHOLD, 1.0,
                                   key="threshold", bind="query-params",
                                   help="slower or faster only beyond this and both runs' noise, as `attnbench "
                                        "compare --threshold`")
    if b is None and a in snap.runs.index:
        st.info(f"No run after `{a}` in its series (spec identity, GPU, power policy and timer): choose run B.")
    if a not in snap.runs.index or b not in snap.runs.index:
        return
    whole_a, whole_b = snap.cells((a,)), snap.cells((b,))
    cells_a, cells_b = tables.filtered(whole_a, sel.filters), tables.filtered(whole_b, sel.filters)
    found = judged(snap, a, b, cells_a, cells_b, threshold / 100, sel.timer, sel.filters)
    like_with_like(found)
    status_changes(found)
    timers_and_kernels(found)
    if found.cells.empty:
        cut = len(cells_a) < len(whole_a) or len(cells_b) < len(whole_b)
        st.info(f"No cell to compare under the filters: {comparison.nothing_compared(found, cut)} (a cell: the same "
                "experiment, variant and shape).")
    else:
        compare_results(found)
    environments({a: snap.manifests[a], b: snap.manifests[b]}, "A and B")


def judged(snap: data.Snapshot, a: str, b: str, cells_a: pd.DataFrame, cells_b: pd.DataFrame,
           threshold: float = comparison.DEFAULT_THRESHOLD, timer: str | None = None,
           filters: dict | None = None) -> comparison.Comparison:
    """A against B as `attnbench compare` judges them: B's slower cells judged again against B's recheck where the
    store holds one (comparison.recheck_of), under the same `filters`."""
    again = comparison.recheck_of(snap.manifests, b)
    cells = None if again is None else tables.filtered(snap.cells((again,)), filters or {})
    return comparison.compare(cells_a, cells_b, snap.manifests[a], snap.manifests[b], threshold, timer, cells,
                              None if again is None else snap.manifests[again])


def like_with_like(found: comparison.Comparison) -> None:
    """Which cells the comparison is over, and the differences that change what a time means, beside the verdict;
    a comparison across power policies is labelled as one (the CLI refuses it unless asked)."""
    held = found.common + len(found.only_b)
    short = f" of {found.planned_b} planned" if found.planned_b is not None and held < found.planned_b else ""
    held_a = found.common + len(found.only_a) + len(found.missing)
    st.markdown(f"Over the **{counted(found.common, 'cell')} both runs hold** (A {held_a}, B {held}{short}), "
                f"**{len(found.cells)} timed in both**: every count and mean below is over those alone.")
    policy_a, policy_b = found.policies
    if policy_a != policy_b:
        st.warning(f"**Across power policies** ({policy_a} → {policy_b}): the times are not like "
                 "with like; `attnbench compare` refuses this pair unless given `--allow-policy-change`.")
    if len(found.material):
        settings = f" (settings: {found.settings})" if found.settings else ""
        st.warning(f"Not like with like: {comparison.said(found.material)}{settings}")


def _ok_in_a_and(count: int, rest: str) -> str:
    """`1 cell was ok in A and is {rest}`, `3 cells were ok in A and are {rest}`."""
    one = count == 1
    return f"{counted(count, 'cell')} {'was' if one else 'were'} ok in A and {'is' if one else 'are'} {rest}"


def status_changes(found: comparison.Comparison) -> None:
    """Cells whose status changed (a cell ok in A and not in B is a regression) and cells in one run only."""
    if len(found.no_longer_ok):
        st.warning(_ok_in_a_and(len(found.no_longer_ok), "not in B")
                   + ": a regression, as `attnbench compare` counts it")
    if len(found.missing):
        st.warning(_ok_in_a_and(len(found.missing), "missing from B") + ", which planned them: a regression, as "
                   "`attnbench compare` counts it")
        st.dataframe(key_last(found.missing), hide_index=True)
    if len(found.changes):
        st.caption("Status changes (A → B)")
        st.dataframe(key_last(found.changes), hide_index=True,  # not sized by the first rows' empty reasons
                     column_config={"reason": st.column_config.TextColumn(width="large")})
    for which, only in (("A", found.only_a), ("B", found.only_b)):
        if len(only):
            st.caption(f"{counted(len(only), 'cell')} only in {which}")
            st.dataframe(key_last(only), hide_index=True)


def timers_and_kernels(found: comparison.Comparison) -> None:
    """Cells ok in both that different timers timed (no verdict: neither a regression nor an improvement), and the
    compared cells that ran another kernel in B, each counted as compare's verdict counts them, in a table."""
    if len(found.other_timers):
        st.warning(f"{report.timers_said(found)}: no {found.timer or 'shared'} time in both runs, so neither a "
                   "regression nor an improvement")
        st.dataframe(key_last(found.other_timers), hide_index=True)
    if len(found.without_timer):
        st.warning(f"{report.untimed_said(found)}: timed alike in both, by other timers, so neither a regression nor "
                   "an improvement")
        st.dataframe(key_last(found.without_timer), hide_index=True)
    if len(found.kernels):
        st.warning(f"{report.kernels_said(found)}, of the {len(found.cells)} timed in both, as the `change` column "
                   f"says ({comparison.KERNEL_KEY}), the names cut to where A's and B's differ. Their B / A is another "
                   "kernel's as well as the code's")
        st.dataframe(names_before_shape(report.kernels_shown(found.kernels)), hide_index=True)


def names_before_shape(kernels: pd.DataFrame) -> pd.DataFrame:
    """The kernels table with the shape, then the key, after the kernel names, so a 1280 px window shows what A and
    B ran, where the shape's 230 px pushed both names out of sight."""
    return kernels[[c for c in kernels.columns if c not in ("shape", "key")] + ["shape", "key"]]


def key_last(cells: pd.DataFrame) -> pd.DataFrame:
    """A table of cells with their key (a hash: it tells cells apart, it says nothing to a reader) as its last column,
    so a 1280 px window shows the reason or the times first."""
    return cells[[*(c for c in cells.columns if c != "key"), "key"]]


def compare_results(found: comparison.Comparison) -> None:
    """Counts and the overall ratio, geomeans per experiment and variant, bars per cell, then every cell."""
    table, threshold = found.cells, f"{100 * found.threshold:g} %"
    counts = table["verdict"].value_counts()
    columns = st.columns(5)
    columns[0].metric("Geomean B / A", f"{comparison.geomean(table['ratio']):.3f}×",
                      help="below 1: B is faster overall")
    columns[1].metric("Faster beyond noise", int(counts.get("faster", 0)), help=f"and beyond {threshold}")
    columns[2].metric("Slower beyond noise", int(counts.get("slower", 0)), help=f"and beyond {threshold}")
    columns[3].metric("Within noise", int(counts.get("within noise", 0)), help=f"or within {threshold}")
    columns[4].metric("Unconfirmed", int(counts.get("unconfirmed", 0)),
                      help=f"moved beyond {threshold} and both runs' noise, but {comparison.UNCONFIRMED_WHY} and the gap is "
                           f"not beyond {comparison.CONFIRM_NOISES}× its noise on {comparison.CONFIRM_SAMPLES} "
                           "samples a side: never a regression (docs/regressions.md)")
    for line in report.recheck_said(found):  # compare's heading line, the recheck's differences from B included
        st.info(f"{line}: {counted(len(found.not_reproduced), 'cell')} not reproduced; `recheck / A` is the recheck's time over "
                "A's (docs/regressions.md)")
    chart, summary = st.columns([3, 2])
    with summary:
        st.caption("Per experiment and variant: geometric mean of B / A and cells beyond noise")
        st.dataframe(found.summary, hide_index=True,
                     column_config={"geomean B/A": st.column_config.NumberColumn(format="%.3f×")})
    with chart:
        names = list(dict.fromkeys(table["experiment"]))
        experiment = widgets.single(st, "selectbox", "Experiment", names, "cexp", "is not in both runs")
        cells = table[table["experiment"] == experiment]
        cells = cells.assign(shape=tables.shape_labels(cells, tables.swept(cells) or None))
        plot(charts.ratio_bars(cells, f"{experiment}: latency B / A per cell",
                               f"{tables.fixed_shape(cells)} · {found.timer} timer · green faster, red slower "
                               f"(beyond {threshold} and both runs' IQR), grey within noise, orange unconfirmed, "
                               "purple not reproduced"),
             "compare", share=3 / 5)
    st.caption(" · ".join(["Every shared cell (click a header to sort)", *report.marks_said(table)]))
    st.dataframe(key_last(table.drop(columns=tables.SHAPE)), hide_index=True, column_config={
        UNCONVERGED_MARK.column: st.column_config.TextColumn(UNCONVERGED_MARK.word),
        UNSETTLED_MARK.column: st.column_config.TextColumn(UNSETTLED_MARK.word),
        "ratio": st.column_config.NumberColumn("B / A", format="%.3f"),
        "a_ms": st.column_config.NumberColumn("A (ms)", format="%.4g"),
        "b_ms": st.column_config.NumberColumn("B (ms)", format="%.4g"),
        "recheck_ratio": st.column_config.NumberColumn("recheck / A", format="%.3f"),
        "noise_a": st.column_config.NumberColumn("noise A", format="percent"),
        "noise_b": st.column_config.NumberColumn("noise B", format="percent")})


def environments(manifests: dict, which: str) -> None:
    """Runs' environments side by side, the facts that differ highlighted and named."""
    table = comparison.environments(manifests)
    differs = table.index[table["differs"]]
    st.subheader(f"Environments of {which}")
    if len(differs):
        changes = "; ".join(f"**{fact}**: " + " → ".join(dict.fromkeys(table.loc[fact].drop("differs")))
                            for fact in differs)
        st.warning(f"{counted(len(differs), 'environment fact')} {'differs' if len(differs) == 1 else 'differ'}: "
                   f"{changes}")
    shown = table.drop(columns="differs")
    st.dataframe(shown.style.apply(lambda row: ["background-color: #fde2e1" if table.loc[row.name, "differs"]
                                                else "" for _ in row], axis=1))


@guarded
def cells(snap: data.Snapshot, sel: Selection) -> None:
    failed, skipped = tables.failures(sel.cells)
    st.subheader("Failures by reason")
    if failed.empty:
        st.success("No selected cell failed, ran out of memory, crashed, timed out or disagreed with the reference.")
    else:
        st.dataframe(failed, hide_index=True, column_config={"reason": st.column_config.TextColumn(width="large")})
    st.subheader("Expected skips by reason")
    if skipped.empty:
        st.caption("No skipped cell.")
    else:
        st.dataframe(skipped, hide_index=True, column_config={"reason": st.column_config.TextColumn(width="large")})
    every = displayable(sel.cells)
    st.subheader("Every cell")
    st.caption(f"{counted(len(every), 'cell')} · every field of the record · click a header to sort")
    st.dataframe(every, hide_index=True)
    st.download_button("Download CSV", every.to_csv(index=False), file_name="attnbench-cells.csv", mime="text/csv")


def displayable(cells: pd.DataFrame) -> pd.DataFrame:
    """Dict-valued columns (grad_rel_err, fields from newer records) as text, so the table can show them."""
    nested = [c for c in cells.columns
              if cells[c].dtype == "object" and cells[c].map(lambda v: isinstance(v, (dict, list))).any()]
    return cells.assign(**{c: cells[c].map(lambda v: str(v) if isinstance(v, (dict, list)) else v) for c in nested})


def _took(snap: data.Snapshot, run: str) -> str:
    """How long `run` took, over all its cells whatever the filters (report.took, show's wording)."""
    return snap.parse([run])[run].took


@guarded
def runs(snap: data.Snapshot, sel: Selection) -> None:
    st.subheader("Runs in the store")
    st.dataframe(snap.runs, column_config={"started": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss")})
    if not sel.runs:
        return
    st.markdown("**How long the selected runs took**\n\n" + report.markdown_table(
        ["run", "took"], [[run, _took(snap, run) or data.NOT_KNOWN] for run in sel.runs]))
    environments({r: snap.manifests[r] for r in sel.runs}, "the selected runs")
    st.subheader("Variants, as the runs' manifests describe them")
    st.dataframe(tables.variants(snap.manifests, sel.runs), hide_index=True)
    for run in sel.runs[:charts.MAX_RUNS]:
        manifest = snap.manifests[run]
        if manifest:
            with st.expander(f"spec of {run}"):
                st.json(manifest.spec, expanded=False)
