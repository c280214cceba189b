"""Published figures in the dashboard: a "published" series on the Latency and Throughput charts at the shapes the
cells share with docs/reference/ (runner/published.py matches them), and measured / published on the Leaderboard."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from runner import metrics, published
from dashboard.tables import SHAPE, case, line_axes, shape_labels

SERIES_COLOUR = "#222222"  # black stars: no variant's colour


def matched(cells: pd.DataFrame, fp8_variants: set[str]) -> pd.DataFrame:
    """The cells with a published figure at their shape: their columns plus published_ms, published_tflops,
    published_gbps (the cell's FLOPs and bytes over the published time) and published (the series' name); FP8
    figures for variants that promise FP8."""
    rows = []
    for index, row in candidates(cells).iterrows():
        for figure in published.lookup(row[SHAPE].to_dict(), row["variant"] in fp8_variants):
            rated = metrics.rates(row["flops"], row["bytes_min"], figure.median_s)
            rows.append({"index": index, "published_ms": figure.median_s * 1e3, "published": figure.source,
                         "published_fp8": figure.fp8, "published_tflops": rated["tflops"],
                         "published_gbps": rated["gbps"], "published_cudnn": figure.cudnn or "—"})
    if not rows:
        return cells.iloc[:0].assign(published_ms=[], published=[], published_fp8=[], published_tflops=[],
                                     published_gbps=[], published_cudnn=[])
    extra = pd.DataFrame(rows).set_index("index")
    return cells.join(extra, how="inner")


def candidates(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells whose sequence lengths and head counts some figure has: the rest need no per-row lookup (a
    selection may hold 100,000 cells)."""
    shapes = [dict(key) for key, _ in published.figures()]
    for axis in ("seq_len", "heads", "head_dim"):
        cells = cells[cells[axis].isin({s[axis] for s in shapes})]
    return cells


def draw(fig: go.Figure, cells: pd.DataFrame, x: str, y: str, fp8_variants: set[str]) -> go.Figure:
    """Add the published figures at these cells' shapes to a chart of y (latency_ms, tflops or gbps) along x: a line
    per series and per case of the chart's own lines (decode_sweep's KV lengths and new tokens along the batch), one
    legend entry per series."""
    column = {"latency_ms": "published_ms", "tflops": "published_tflops", "gbps": "published_gbps"}.get(y)
    found = matched(cells, fp8_variants) if column else pd.DataFrame()
    if found.empty:
        return fig
    found = found.assign(case=case(found, line_axes(cells, x)))
    for (name, fp8), series in found.groupby(["published", "published_fp8"], sort=False):
        label = f"{name}{' (FP8)' if fp8 else ''}"
        for index, (line, points) in enumerate(series.groupby("case", sort=False)):
            points = points.drop_duplicates(x).sort_values(x)  # every variant and run at a shape: one figure
            fig.add_trace(go.Scatter(
                x=points[x], y=points[column], mode="lines+markers", name=label, legend="legend",
                legendgroup=label, showlegend=index == 0,
                line={"color": SERIES_COLOUR, "dash": "dot" if fp8 else "dash", "width": 1},
                marker={"symbol": "star", "size": 10, "color": SERIES_COLOUR},
                hovertemplate=f"{label}{f' · {line}' if line else ''}<br>{x} %{{x}}<br>%{{y:.4g}}<extra></extra>"))
    return fig


def table(cells: pd.DataFrame, fp8_variants: set[str], manifests: dict) -> pd.DataFrame:
    """Measured beside published, a row per matching cell: below 1, faster than the published figure; the cuDNN each
    side ran (ours from each run's manifest, `manifests`: run -> manifest, where the cell's backend is cuDNN's:
    published.cudnn_ran)."""
    found = matched(cells, fp8_variants)
    if found.empty:
        return found
    backends = found["backend"].where(found["backend"].notna(), None)
    ours = [published.cudnn_ran(variant, backend, manifests.get(run)) or "—"
            for run, variant, backend in zip(found["run"], found["variant"], backends)]
    return pd.DataFrame({
        "run": found["run"], "experiment": found["experiment"], "variant": found["variant"],
        "shape": shape_labels(found), "measured ms": found["latency_ms"], "published ms": found["published_ms"],
        "measured / published": found["latency_ms"] / found["published_ms"], "our cuDNN": ours,
        "published cuDNN": found["published_cudnn"], "published": found["published"],
    })
