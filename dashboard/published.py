"""Published figures in the dashboard: a "published" series on the Latency and Throughput charts at the shapes the
cells share with docs/reference/ (runner/published.py matches them), and measured / published on the Leaderboard;
only beside cells of a run on the GPU the figures were measured on (its manifest's, runner.published.on_gpu)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from runner import leaderboard, metrics, published
from dashboard.data import power_of
from dashboard.tables import SHAPE, case, cudnn_of, line_axes, shape_labels

SERIES_COLOUR = "#222222"  # black stars: no variant's colour


def matched(cells: pd.DataFrame, manifests: dict) -> pd.DataFrame:
    """The cells with a published figure at their shape on their run's GPU (`manifests`: run -> manifest; no
    manifest, no GPU, no figure): their columns plus published_ms, published_tflops, published_gbps (the cell's FLOPs
    and bytes over the published time), published (the series' name), the cuDNN each side ran (published_cudnn,
    our_cudnn: "—" where none), its fp8_mark (runner.leaderboard.fp8_mark), the power policy ours ran under
    (our_power: dashboard.data.power_of); FP8 figures only where the record says FP8 ran."""
    rows, found = [], candidates(cells)
    cudnns = dict(zip(found.index, cudnn_of(found, manifests)))
    for index, row in found.iterrows():
        manifest = manifests.get(row["run"])
        mark = leaderboard.fp8_mark(row.get("fp8_verdict"), row.get("fp8_in_hlo"))
        for figure in published.on_gpu(row[SHAPE].to_dict(), mark == leaderboard.FP8, published.gpu_of(manifest)):
            rated = metrics.rates(row["flops"], row["bytes_min"], figure.median_s)
            rows.append({"index": index, "fp8_mark": mark, "published_ms": figure.median_s * 1e3,
                         "published": figure.source,
                         "published_fp8": figure.fp8, "published_tflops": rated["tflops"],
                         "published_gbps": rated["gbps"], "published_cudnn": figure.cudnn or "—",
                         "our_cudnn": cudnns[index] or "—",
                         "our_power": power_of(manifest)})
    if not rows:
        return cells.iloc[:0].assign(fp8_mark=[], published_ms=[], published=[], published_fp8=[], published_tflops=[],
                                     published_gbps=[], published_cudnn=[], our_cudnn=[], our_power=[])
    extra = pd.DataFrame(rows).set_index("index")
    return cells.join(extra, how="inner")


def candidates(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells whose sequence lengths and head counts some figure has: the rest need no per-row lookup (a
    selection may hold 100,000 cells)."""
    shapes = [dict(key) for key, _ in published.figures()]
    for axis in ("seq_len", "heads", "head_dim"):
        cells = cells[cells[axis].isin({s[axis] for s in shapes})]
    return cells


def draw(fig: go.Figure, cells: pd.DataFrame, x: str, y: str, manifests: dict) -> go.Figure:
    """Add the published figures at these cells' shapes, on their runs' GPU, to a chart of y (latency_ms, tflops or
    gbps) along x: a line per series and per case of the chart's own lines (decode_sweep's KV lengths and new tokens
    along the batch), one legend entry per series; each point's hover says which cuDNN each side ran."""
    column = {"latency_ms": "published_ms", "tflops": "published_tflops", "gbps": "published_gbps"}.get(y)
    found = matched(cells, manifests) if column else pd.DataFrame()
    if found.empty:
        return fig
    found = found.assign(case=case(found, line_axes(cells, x)))
    for (name, fp8), series in found.groupby(["published", "published_fp8"], sort=False):
        label = f"{name}{' (FP8)' if fp8 else ''}"
        for index, (line, points) in enumerate(series.groupby("case", sort=False)):
            sides = cudnn_sides(points, x)
            points = points.drop_duplicates(x).sort_values(x)  # every variant and run at a shape: one figure
            fig.add_trace(go.Scatter(
                x=points[x], y=points[column], mode="lines+markers", name=label, legend="legend",
                legendgroup=label, showlegend=index == 0, customdata=[sides[v] for v in points[x]],
                line={"color": SERIES_COLOUR, "dash": "dot" if fp8 else "dash", "width": 1},
                marker={"symbol": "star", "size": 10, "color": SERIES_COLOUR},
                hovertemplate=f"{label}{f' · {line}' if line else ''}<br>{x} %{{x}}<br>%{{y:.4g}}"
                              "<br>%{customdata}<extra></extra>"))
    return fig


def cudnn_sides(points: pd.DataFrame, x: str) -> dict:
    """Per x, which cuDNN each side ran: the figure's, and each measured variant's there that ran one; and the power
    policies ours ran under."""
    def said(group: pd.DataFrame) -> str:
        ours = sorted({f"{v} {c}" for v, c in zip(group["variant"], group["our_cudnn"]) if c != "—"})
        theirs = group["published_cudnn"].iloc[0]
        power = ", ".join(sorted(set(group["our_power"])))
        figure = f"cuDNN {theirs}" if theirs != "—" else "no cuDNN"
        return f"published: {figure} · ours: {', '.join(ours) or 'no cuDNN'} · measured under power {power}"
    return {value: said(group) for value, group in points.groupby(x, sort=False)}


def absent(runs: list[str], manifests: dict) -> list[str]:
    """Why the runs on a GPU may miss published figures (runner.published.absent), each reason once."""
    return sorted({note for run in runs if (note := published.absent(manifests.get(run)))})


def table(cells: pd.DataFrame, manifests: dict) -> pd.DataFrame:
    """Measured beside published, a row per matching cell on the figure's GPU, by each record's headline timer (as
    `attnbench show`, whatever timer the sidebar chose): below 1, faster than the published figure; the cuDNN each
    side ran (ours from each run's manifest, `manifests`: run -> manifest, where the cell's backend is cuDNN's:
    runner.record.cudnn_ran); the power policy each run ran under (a steady time reads behind a burst one)."""
    found = matched(cells, manifests)
    if found.empty:
        return found
    measured_ms = pd.to_numeric(found["median_s"], errors="coerce") * 1e3
    return pd.DataFrame({
        "run": found["run"], "experiment": found["experiment"],
        "variant": [published.marked(v, m) for v, m in zip(found["variant"], found["fp8_mark"])],
        "shape": shape_labels(found), "timer": found["timer"], "power": found["our_power"], "measured ms": measured_ms,
        "published ms": found["published_ms"], "measured / published": measured_ms / found["published_ms"],
        "our cuDNN": found["our_cudnn"], "published cuDNN": found["published_cudnn"], "published": found["published"],
    })
