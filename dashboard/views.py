"""The dashboard's sections: each draws one view, or says in a line why the selection has nothing for it."""

from __future__ import annotations

import functools

import pandas as pd
import streamlit as st

from dashboard import charts, data
from runner.report import SHAPE
from runner.results import Run

MAX_PROBLEMS_SHOWN = 20


def guarded(view):
    """A view that cannot draw odd data says so in the page; the other views still render."""

    @functools.wraps(view)
    def draw(*args, **kwargs):
        try:
            view(*args, **kwargs)
        except Exception as error:  # data from any store: one bad view must not blank the page
            st.error(f"{view.__name__}: could not draw this view: {type(error).__name__}: {error}")

    return draw


def load_problems(results: data.Results) -> None:
    """What could not be read: an unreachable store, a malformed file or line, an unknown schema_version."""
    if results.error:
        st.error(results.error)
    problems = results.problems()
    if problems:
        shown = "\n".join(f"- `{p}`" for p in problems[:MAX_PROBLEMS_SHOWN])
        more = len(problems) - MAX_PROBLEMS_SHOWN
        st.warning(f"{len(problems)} problem(s) reading results; the rest loaded:\n{shown}"
                   + (f"\n- …and {more} more" if more > 0 else ""))


def _sweep(df: pd.DataFrame, x: str, y: str, key: str, log_y: bool = False) -> None:
    names = data.sweeps(df, x)
    if not names:
        st.info(f"No experiment in the selection sweeps {charts.TITLES[x]}.")
    for name in names:
        st.caption(f"experiment **{name}**")
        st.plotly_chart(charts.sweep_lines(df[df["experiment"] == name], x, y, log_y), key=f"{key}-{name}")


@guarded
def latency(ok: pd.DataFrame) -> None:
    st.header("Latency")
    by_length, by_batch = st.columns(2)
    with by_length:
        _sweep(ok, "seq_len", "latency_ms", "latency-seq", log_y=True)
    with by_batch:
        _sweep(ok, "batch", "latency_ms", "latency-batch", log_y=True)


@guarded
def throughput(ok: pd.DataFrame) -> None:
    st.header("Throughput")
    rate, peak = st.columns(2)
    with rate:
        _sweep(ok, "seq_len", "tflop_s", "tflops-seq")
    with peak:
        with_peak = ok[ok["pct_of_peak"].notna()]
        if with_peak.empty:
            st.info("No measured matmul peak in the selected runs (the runner measures it on GPUs), so no % of peak.")
        else:
            _sweep(with_peak, "seq_len", "pct_of_peak", "peak-seq")


@guarded
def memory(ok: pd.DataFrame) -> None:
    st.header("Memory")
    st.caption("Temporary buffers of the compiled program: the naive path holds the (B, N, T, S) weights, "
               "O(T²); a fused kernel stays O(T).")
    _sweep(ok[ok["temp_mib"].notna()], "seq_len", "temp_mib", "memory-seq", log_y=True)


@guarded
def heads(ok: pd.DataFrame) -> None:
    st.header("MHA / GQA / MQA")
    names = data.sweeps(ok, "kv_heads")
    if not names:
        st.info("No experiment in the selection sweeps the number of KV heads.")
    for name in names:
        st.caption(f"experiment **{name}**")
        cells = ok[ok["experiment"] == name]
        time_chart, cache_chart = st.columns(2)
        time_chart.plotly_chart(charts.heads_bars(cells, "latency_ms"), key=f"heads-latency-{name}")
        cache_chart.plotly_chart(charts.heads_bars(cells, "kv_cache_mib"), key=f"heads-cache-{name}")


@guarded
def backends(ok: pd.DataFrame) -> None:
    st.header("TransformerEngine vs cuDNN vs XLA (causal)")
    causal = ok[ok["causal"].eq(True) & ok["backend"].notna()]
    names = [n for n in causal["experiment"].unique() if causal[causal["experiment"] == n]["backend"].nunique() > 1]
    if not names:
        found = ", ".join(sorted(causal["backend"].unique())) or "none"
        st.info(f"No experiment has causal cells from two or more backends (transformer_engine, cudnn, xla); here: {found}.")
    for name in names:
        st.caption(f"experiment **{name}**")
        st.plotly_chart(charts.backend_chart(causal[causal["experiment"] == name]), key=f"backends-{name}")


@guarded
def fp8(rates: pd.DataFrame) -> None:
    st.header("FP8 truth table")
    table = data.fp8_table(rates)
    if table.empty:
        st.info("No FP8 cells in the selection (FP8 variants need a GPU with FP8 support).")
        return
    st.caption("Whether FP8 really happened: f8 types in the compiled program, an f8 kernel name, and the "
               "distance and speed-up against the same shape in bf16.")
    st.dataframe(table, hide_index=True, column_config={
        "rel_err_vs_bf16": st.column_config.NumberColumn("error vs bf16 (rel)", format="%.3g"),
        "speedup_vs_bf16": st.column_config.NumberColumn("speed-up vs bf16 (×)", format="%.2f"),
    })


@guarded
def cells(df: pd.DataFrame) -> None:
    st.header("Cells")
    counts = df["status"].value_counts()
    st.caption(f"{len(df)} cells: " + ", ".join(f"{n} {status}" for status, n in counts.items())
               + " · every field of the record · click a column to sort")
    st.dataframe(df, hide_index=True)
    st.download_button("Download CSV", df.to_csv(index=False), file_name="attnbench-cells.csv", mime="text/csv")


@guarded
def problem_cells(df: pd.DataFrame) -> None:
    st.header("Skipped, failed and incorrect cells")
    bad = df[df["status"] != "ok"]
    if bad.empty:
        st.success("Every selected cell ran and agreed with the reference.")
        return
    columns = ["run", "experiment", "variant", "status", "reason", *SHAPE]
    columns += [c for c in ("rel_err", "tolerance") if c in bad]
    st.dataframe(bad[columns], hide_index=True)


@guarded
def comparison(results: data.Results, pair: tuple[str, str] | None, timer: str | None, choices: dict) -> None:
    st.header("Compare two runs")
    if pair is None:
        st.info(f"Comparing needs two runs; {results.uri} has {len(results.runs)}.")
        return
    a, b = (results.runs[r] for r in pair)
    shared = data.shared_timer(a, b, timer)
    table = data.compare(a, b, shared) if shared else pd.DataFrame()
    table = data.filtered(table, choices) if not table.empty else table  # no shared cell: nothing to filter
    if table.empty:
        st.info("The two runs share no measured cell (same experiment, variant and shape) under the filters.")
        return
    flagged = int(table["beyond_noise"].sum())
    st.caption(f"A = {data.run_label(a)} · B = {data.run_label(b)} · timer {shared} · {flagged} of {len(table)} "
               "cells differ by more than both runs' interquartile range")
    st.plotly_chart(charts.ratio_bars(table), key="compare")
    st.dataframe(table, hide_index=True)


@guarded
def metadata(runs: list[Run]) -> None:
    st.header("Runs")
    if not runs:
        st.info("No run selected.")
    for run in runs:
        st.subheader(data.run_label(run))
        facts = data.run_facts(run)
        st.table(pd.DataFrame({"fact": list(facts), "value": list(facts.values())}).set_index("fact"))
        if run.manifest:
            with st.expander("spec"):
                st.json(run.manifest.spec, expanded=False)
