"""Plotly figures from cell frames: units on every axis, log2 axes where the sizes double."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from dashboard.data import attention_kind, series

TITLES = {
    "seq_len": "sequence length T (tokens)",
    "batch": "batch size B",
    "latency_ms": "median latency (ms)",
    "tflop_s": "throughput (TFLOP/s)",
    "pct_of_peak": "% of measured bf16 matmul peak",
    "temp_mib": "compiled temp memory (MiB)",
    "kv_cache_mib": "KV cache (MiB)",
    "ratio_b_over_a": "latency ratio B / A (×)",
}
HOVER = ["experiment", "variant", "backend", "dtype", "causal", "pass", "run"]


def _log2_x(fig: go.Figure, values: pd.Series) -> go.Figure:
    """A log axis ticked at the swept sizes themselves (each a doubling)."""
    ticks = sorted(values.unique())
    return fig.update_xaxes(type="log", tickvals=ticks, ticktext=[str(t) for t in ticks])


def sweep_lines(df: pd.DataFrame, x: str, y: str, log_y: bool = False) -> go.Figure:
    """y against a doubling parameter, one line per variant (and per anything else that varies)."""
    df = df.assign(series=series(df, x)).sort_values(x)
    fig = px.line(df, x=x, y=y, color="series", markers=True, log_y=log_y, hover_data=HOVER,
                  labels={x: TITLES[x], y: TITLES[y], "series": "variant"})
    if log_y:
        fig.update_yaxes(dtick=1)  # label the decades only
    return _log2_x(fig, df[x])


def heads_bars(df: pd.DataFrame, y: str) -> go.Figure:
    """y per attention kind, MHA to MQA, a bar per variant (and per anything else that varies)."""
    kinds = [attention_kind(h, k) for h, k in zip(df["heads"], df["kv_heads"])]
    df = df.assign(series=series(df, "kv_heads"), attention=kinds).sort_values("kv_heads", ascending=False)
    return px.bar(df, x="attention", y=y, color="series", barmode="group", hover_data=HOVER,
                  labels={"attention": "attention (KV heads K)", y: TITLES[y], "series": "variant"})


def backend_chart(df: pd.DataFrame) -> go.Figure:
    """Latency of each backend: lines against T when T is swept, bars otherwise."""
    df = df.assign(implementation=df["variant"] + " (" + df["backend"].fillna("?") + ")")
    labels = {"seq_len": TITLES["seq_len"], "latency_ms": TITLES["latency_ms"], "implementation": "variant (backend)"}
    if df["seq_len"].nunique() > 1:
        fig = px.line(df.sort_values("seq_len"), x="seq_len", y="latency_ms", color="implementation",
                      markers=True, hover_data=HOVER, labels=labels)
        return _log2_x(fig, df["seq_len"])
    return px.bar(df, x="implementation", y="latency_ms", color="backend", hover_data=HOVER, labels=labels)


def ratio_bars(df: pd.DataFrame) -> go.Figure:
    """Per-cell ratio B / A; colour says whether the gap is beyond both runs' noise."""
    df = df.assign(cell=df["experiment"] + "/" + df["variant"] + " " + df["shape"],
                   verdict=df["beyond_noise"].map({True: "beyond noise", False: "within noise"}))
    fig = px.bar(df, x="cell", y="ratio_b_over_a", color="verdict", hover_data=["a_ms", "b_ms", "a_noise", "b_noise"],
                 color_discrete_map={"beyond noise": "#d62728", "within noise": "#7f7f7f"},
                 labels={"cell": "cell", "ratio_b_over_a": TITLES["ratio_b_over_a"], "verdict": ""})
    fig.add_hline(y=1.0, line_dash="dot")
    return fig.update_yaxes(type="log")
