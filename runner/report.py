"""Tables of a run's cells: rich on a terminal; csv, markdown or parquet for export."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from runner.record import CellRecord

SHAPE = ["batch", "seq_len", "kv_seq_len", "heads", "kv_heads", "head_dim", "dtype", "causal", "pass"]
SHORT = {"batch": "B", "seq_len": "T", "kv_seq_len": "S", "heads": "N", "kv_heads": "K", "head_dim": "H"}


def frame(cells: list[CellRecord]) -> pd.DataFrame:
    """One row per cell, every field flat."""
    return pd.DataFrame([c.row() for c in cells])


def _fmt(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _result_columns(c: CellRecord) -> list[str]:
    if c.status != "ok" and c.correctness is None:
        return ["-"] * 8 + [c.reason]
    rel = c.correctness.rel_err if c.correctness else None
    note = c.fp8.verdict if c.fp8 else c.reason
    mib = c.temp_bytes / 2**20 if c.temp_bytes is not None else None
    ms = c.median_s * 1e3 if c.median_s else None
    # beside device time, the host clock shows what the lab would have reported (dispatch included)
    wall = next((t.median_s * 1e3 for t in c.timings if t.timer == "wall" and c.timer != "wall"), None)
    return [
        _fmt(ms), c.timer or "-", _fmt(wall), _fmt(c.tflops, 3), _fmt(c.gbps, 3), _fmt(mib, 3), c.backend or "-",
        _fmt(rel, 2), note,
    ]


def experiment_table(name: str, cells: list[CellRecord]) -> Table:
    """Shape columns that vary within the experiment, then the measurements; constant ones in the title."""
    shapes = [c.params.as_dict() for c in cells]
    varying = [k for k in SHAPE if len({s[k] for s in shapes}) > 1]
    fixed = " ".join(f"{SHORT.get(k, k)}={shapes[0][k]}" for k in SHAPE if k not in varying)
    table = Table(title=f"{name}  [dim]{fixed}[/]", title_justify="left")
    for col in ["variant", *(SHORT.get(k, k) for k in varying), "status"]:
        table.add_column(col)
    for col in ["median ms", "timer", "wall ms", "TFLOP/s", "GB/s", "temp MiB", "backend", "rel err", "note"]:
        table.add_column(col, justify="right" if col not in ("timer", "backend", "note") else "left")
    for c, shape in zip(cells, shapes):
        style = {"ok": None, "skipped": "yellow"}.get(c.status, "red")
        row = [c.variant, *(str(shape[k]) for k in varying), c.status, *_result_columns(c)]
        table.add_row(*row, style=style)
    return table


def print_tables(cells: list[CellRecord], console: Console) -> None:
    by_experiment: dict[str, list[CellRecord]] = {}
    for c in cells:
        by_experiment.setdefault(c.experiment, []).append(c)
    for name, group in by_experiment.items():
        console.print(experiment_table(name, group))


def summary_line(cells: list[CellRecord]) -> str:
    counts: dict[str, int] = {}
    for c in cells:
        counts[c.status] = counts.get(c.status, 0) + 1
    return f"{len(cells)} cells: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def markdown(df: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table (no extra dependency)."""
    cells = [[_fmt(v).replace("|", "\\|") for v in row] for row in df.itertuples(index=False)]  # a | ends a cell
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells]) + "\n"


def export(cells: list[CellRecord], fmt: str, dest: Path | None) -> str | None:
    """Write csv / markdown / parquet to dest, or return csv / markdown text when dest is None."""
    df = frame(cells)
    if fmt == "parquet":
        df.to_parquet(dest, index=False)
        return None
    text = df.to_csv(index=False) if fmt == "csv" else markdown(df)
    if dest is None:
        return text
    dest.write_text(text)
    return None
