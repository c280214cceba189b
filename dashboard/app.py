"""attnbench dashboard: `streamlit run dashboard/serve.py -- --results DIR|gs://bucket/prefix` (serve.py prepares the
server, then serves this page).

The sidebar panels return the user's choices, each widget bound to a query parameter of the URL (runs by run
id), so every view is a link that opens as it was; data.py reads and caches the store, tables.py computes,
charts.py draws figures and views.py lays out one tab each. Only the open tab is computed.
"""

from __future__ import annotations

import sys

import pandas as pd
import streamlit as st

from dashboard import charts, data, tables, views, widgets
from runner import compare, counted, shape
from runner.record import SCHEMA_VERSION

FILTERS = {"experiment": "Experiment", "variant": "Variant", "dtype": "dtype", "causal": "Causal", "pass": "Pass"}
FILTERS.update({axis.name: axis.name for axis in shape.AXES if axis.quiet})  # window, fill, bias, softcap, tp...
FIND = ("gpu", "spec", "sha", "since", "until")  # Find runs' widgets
TIMER_HELP = "device: GPU time of the kernels the call ran; wall: host clock around the call and block_until_ready."
RUNS_LISTED = 100  # run ids the Runs list offers, newest first: a long list costs every page load, not only the first
# The nvbench tables are markdown (views.summary_table): Streamlit pads their cells for prose, so a table of six columns
# ran past its column at 1280 px (under the chart or table beside it). Tighter cells fit it; one wider still scrolls
# inside its column.
TABLE_CSS = ("<style>[data-testid=stMarkdownContainer] table {display: block; max-width: 100%; overflow-x: auto}"
             "[data-testid=stMarkdownContainer] :is(th, td) {padding: 0.25rem 0.5rem}</style>")
BASELINES = ["xla", "auto", "cudnn"]  # the default baseline: the first of these in the selection
TABS = {
    "Latency": views.latency, "Throughput": views.throughput, "Memory": views.memory, "Heads": views.heads,
    "Backends": views.backends, "FP8": views.fp8, "Leaderboard": views.leaderboard, "History": views.history,
    "Compare": views.compare, "Soak": views.soak, "Cells": views.cells, "Runs": views.runs,
}


def source_ui(snap: data.Snapshot) -> None:
    """Where the runs come from, and a button to read them again."""
    st.sidebar.caption(f"results: `{snap.uri}` · {counted(len(snap.runs), 'run')} · schema_version {SCHEMA_VERSION}")
    if st.sidebar.button("Reload runs"):
        data.reload()
        st.rerun()


def find_runs_ui(runs: pd.DataFrame) -> pd.DataFrame:
    """Narrow the run list by GPU, spec, git sha and start date (empty: no narrowing) while Find runs is open. Its
    widgets are built only then: the browser draws every widget it is sent before the first chart, open or not; a
    link that narrows opens it."""
    if any(value for key in FIND for value in widgets.asked(key)):
        st.session_state.setdefault("find", True)  # the link's own words open it: nothing to write into it
    finder = st.sidebar.expander("Find runs (GPU, spec, sha, date)", key="find", bind="query-params")
    if not finder.open:
        return runs
    with finder:
        gpus = widgets.multi(st, "GPU", sorted(runs["gpu"].dropna().unique()), "gpu", "ran no run here",
                             placeholder="all")
        specs = widgets.multi(st, "Spec", sorted(runs["spec"].dropna().unique()), "spec", "ran no run here",
                              placeholder="all")
        sha = st.text_input("git sha starts with", key="sha", bind="query-params").strip()
        since = st.date_input("Started on or after", value=None, key="since", bind="query-params")
        until = st.date_input("Started on or before", value=None, key="until", bind="query-params")
    found = runs
    if gpus:
        found = found[found["gpu"].isin(gpus)]
    if specs:
        found = found[found["spec"].isin(specs)]
    if sha:
        found = found[found["git_sha"].fillna("").str.startswith(sha)]
    if since:
        found = found[found["started"].dt.date >= since]
    if until:
        found = found[found["started"].dt.date <= until]
    return found


def runs_ui(runs: pd.DataFrame) -> list[str]:
    """The runs to show, by run id (newest first; type to search); when the link names none, the newest run Find runs
    matches that is not a soak (a soak is one curve, no sweep; its tab shows it) nor a recheck (another run's slower
    cells measured again, `attnbench recheck`: the Compare tab takes it beside that run); none where Find runs
    matches none, said on the page (a run of another GPU's figures below an L4 question would answer it)."""
    found = find_runs_ui(runs)
    swept = found.index[~found["soak"].fillna(False).astype(bool) & found["rechecks"].isna()]  # no manifest: neither
    widgets.choose("run", list((swept if len(swept) else found.index)[:1]))
    listed = found.index[:RUNS_LISTED]
    kept = [r for r in widgets.asked("run") if r in runs.index and r not in listed]  # chosen before narrowing
    chosen = widgets.multi(st.sidebar, "Runs", [*listed, *kept], "run", "is not a run in this store",
                           help="Run ids, newest first; type to search. Find runs narrows the list.")
    if len(found) < len(runs):
        st.sidebar.caption(f"{len(found):,} of {counted(len(runs), 'run')} match Find runs")
    if found.empty and not chosen:
        st.info(f"No run matches Find runs, of {counted(len(runs), 'run')} here: widen it, or name a run under Runs.")
    if len(found) > RUNS_LISTED:
        st.sidebar.caption(f"Listing the newest {RUNS_LISTED}: Find runs reaches the others")
    return chosen


def filters_ui(cells: pd.DataFrame) -> dict[str, list]:
    """Column -> chosen values; an empty choice means every value. A column of fewer than two values in the selected
    runs has no filter unless the link or the user chose one: it could narrow nothing, and each filter costs the
    browser time before the first chart (of the shipped runs' 19 columns, 15 hold one value or none)."""
    st.sidebar.subheader("Cells")
    values = {column: sorted(cells[column].dropna().unique().tolist()) for column in FILTERS if column in cells}
    return {column: widgets.multi(st.sidebar, FILTERS[column], options, column, "is in none of the selected runs",
                                  placeholder="all")
            for column, options in values.items() if len(options) > 1 or widgets.asked(column)}


def timer_ui(cells: pd.DataFrame) -> str | None:
    """Which timer's medians every latency and rate comes from."""
    options = compare.timers(cells)
    if not options and not widgets.asked("timer"):
        return None
    return widgets.single(st.sidebar, "radio", "Timer", options, "timer", "was not used by the selected runs",
                          horizontal=True, help=TIMER_HELP)


def baseline_ui(cells: pd.DataFrame) -> str | None:
    """The variant speed-ups are measured against."""
    variants = list(dict.fromkeys(cells["variant"].dropna())) if "variant" in cells else []
    if not variants:
        return None
    default = next((v for v in BASELINES if v in variants), variants[0])
    return widgets.single(st.sidebar, "selectbox", "Baseline for speed-ups", variants, "baseline",
                          "ran in none of the selected runs", index=variants.index(default))


def selection_ui(snap: data.Snapshot) -> views.Selection:
    """The sidebar, top to bottom: runs, cell filters, timer, baseline."""
    chosen = set(runs_ui(snap.runs))
    known = [r for r in snap.runs.index if r in chosen]  # newest first, as charts and the overview take them
    cells = snap.cells(tuple(known))
    choices = filters_ui(cells)
    timer = timer_ui(cells)
    baseline = baseline_ui(cells)
    rated = tables.with_rates(tables.filtered(cells, choices), snap.runs, timer)
    rated = rated.assign(speedup=tables.speedup(rated, baseline), efficiency=tables.efficiency(rated))
    style = charts.Style(charts.colours(snap.variants()), tuple(known[:charts.MAX_RUNS]))
    return views.Selection(known, rated, choices, timer, baseline, style)


def main() -> None:
    st.set_page_config(page_title="attnbench", layout="wide", initial_sidebar_state=charts.SIDEBAR_PX)
    st.html(TABLE_CSS)
    uri = data.results_uri(sys.argv[1:])
    snap = data.load(uri)
    st.title("attnbench results")
    source_ui(snap)
    if snap.error:
        st.error(snap.error)
        return
    if snap.runs.empty:
        st.info(f"No runs under {uri}. Write some with `attnbench run SPEC --out {uri}`.")
        return
    chosen = selection_ui(snap)
    views.load_problems(snap, chosen.runs)
    above = st.container()  # the overview, drawn after the tab so the tab's first chart reaches the browser first
    for tab, view in zip(st.tabs(list(TABS), key="tab", bind="query-params"), TABS.values()):
        if tab.open:
            with tab:
                view(snap, chosen)
    with above:
        views.overview(snap, chosen)


if __name__ == "__main__":
    main()
