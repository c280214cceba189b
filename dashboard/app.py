"""attnbench dashboard: `streamlit run dashboard/app.py -- --results DIR|gs://bucket/prefix`.

The sidebar panels choose (each widget bound to the URL's query parameters, so a view is a shareable
link); data.py reads and caches; views.py draws.
"""

from __future__ import annotations

import sys

import streamlit as st

from dashboard import data, views
from runner.record import SCHEMA_VERSION

FILTERS = {"experiment": "Experiment", "variant": "Variant", "dtype": "dtype", "causal": "Causal", "pass": "Pass"}
TIMER_HELP = "device: GPU time of the kernels the call ran; wall: host clock around the call and block_until_ready."


def source_ui(results: data.Results) -> None:
    """Where the runs come from, and a button to read them again."""
    st.sidebar.caption(f"results: `{results.uri}` · {len(results.runs)} run(s) · schema_version {SCHEMA_VERSION}")
    if st.sidebar.button("Reload runs"):
        st.cache_data.clear()
        st.rerun()


def run_picker_ui(results: data.Results) -> list[str]:
    """The runs to show, labelled by GPU and date; the newest by default."""
    return st.sidebar.multiselect(
        "Runs", list(results.runs), default=list(results.runs)[:1], format_func=results.label, key="run",
        bind="query-params",
    )


def filters_ui(cells) -> dict[str, list]:
    """Column -> chosen values; an empty choice means every value."""
    return {
        column: st.sidebar.multiselect(label, sorted(cells[column].dropna().unique().tolist()), key=column,
                                       placeholder="all", bind="query-params")
        for column, label in FILTERS.items()
    }


def timer_ui(cells) -> str | None:
    """Which timer's medians the charts use."""
    options = data.timers(cells)
    if not options:
        return None
    return st.sidebar.radio("Timer", options, key="timer", horizontal=True, help=TIMER_HELP, bind="query-params")


def compare_ui(results: data.Results) -> tuple[str, str] | None:
    """Two runs to compare cell by cell, A the older by default; None while the store has fewer than two."""
    run_ids = list(results.runs)
    if len(run_ids) < 2:
        return None
    st.sidebar.subheader("Compare")
    a = st.sidebar.selectbox("Run A", run_ids, index=1, format_func=results.label, key="a", bind="query-params")
    b = st.sidebar.selectbox("Run B", run_ids, index=0, format_func=results.label, key="b", bind="query-params")
    return a, b


def draw(results: data.Results, run_ids: list[str], cells, timer: str | None, choices: dict, pair) -> None:
    """Every view, top to bottom, from the filtered cells."""
    rates = data.with_rates(cells, timer)
    ok = data.measured(rates)
    views.latency(ok)
    views.throughput(ok)
    views.memory(ok)
    views.heads(ok)
    views.backends(ok)
    views.fp8(rates)
    views.cells(cells)
    views.problem_cells(cells)
    views.comparison(results, pair, timer, choices)
    views.metadata([results.runs[r] for r in run_ids])


def main() -> None:
    st.set_page_config(page_title="attnbench", layout="wide")
    uri = data.results_uri(sys.argv[1:])
    results = data.load(uri)
    st.title("attnbench results")
    source_ui(results)
    views.load_problems(results)
    if not results.runs:
        if results.error is None:
            st.info(f"No runs under {uri}. Write some with `attnbench run SPEC --out {uri}`.")
        return
    run_ids = run_picker_ui(results)
    all_cells = data.cells_frame(uri, tuple(run_ids))
    choices = filters_ui(all_cells)
    timer = timer_ui(all_cells)
    pair = compare_ui(results)
    draw(results, run_ids, data.filtered(all_cells, choices), timer, choices, pair)


if __name__ == "__main__":
    main()
