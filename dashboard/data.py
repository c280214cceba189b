"""The dashboard's data: runs read through the runner's own record, cached, flattened to frames."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import streamlit as st

from runner.record import CellRecord, Params, Timing
from runner.registry import load_all
from runner.report import SHAPE, frame
from runner.results import Run
from runner.store import open_store

VARIANTS = load_all()  # which variants promise FP8, and their bf16 twins

RESULTS_ENV = "ATTNBENCH_RESULTS"
SHIPPED_RESULTS = Path(__file__).resolve().parents[1] / "examples" / "results"
REMOTE_TTL_S = 300
STORE_TIMEOUT_S = 20.0  # how long the page waits for a bucket before saying it is unreachable
TIMER_ORDER = ["device", "wall", "device_cold"]
EMPTY_COLUMNS = ["run", "run_id", "experiment", "variant", "status", "reason", "flops", "temp_bytes", "kv_cache_bytes",
                 "peak_tflops", "backend", "kernels"]


@dataclass
class Results:
    """What one results location holds: its runs by id, newest first, or why none could be read."""

    uri: str
    runs: dict[str, Run] = field(default_factory=dict)
    error: str | None = None

    def problems(self) -> list[str]:
        return [p for run in self.runs.values() for p in run.problems]

    def label(self, run_id: str) -> str:
        return run_label(self.runs[run_id])


def results_uri(argv: list[str]) -> str:
    """--results after streamlit's `--`, else $ATTNBENCH_RESULTS, else the runs shipped in the repository."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--results", default=os.environ.get(RESULTS_ENV, str(SHIPPED_RESULTS)))
    return parser.parse_known_args(argv)[0].results


def read_runs(uri: str) -> list[Run]:
    """Every run in the store at `uri`, a folder or gs://bucket/prefix: the one place that knows where runs live."""
    store = open_store(uri, STORE_TIMEOUT_S)
    return [store.read(run_id) for run_id in store.runs()]


def _started(run: Run) -> str:
    return run.manifest.started_at if run.manifest else ""


def _read(uri: str) -> Results:
    try:
        runs = read_runs(uri)
    except Exception as error:  # a bad location or an unreachable bucket: said in the page, not raised
        return Results(uri, error=f"Could not read the results ({type(error).__name__}): {error}")
    runs.sort(key=_started, reverse=True)
    return Results(uri, {run.run_id: run for run in runs})


@st.cache_data(show_spinner="Reading runs…")
def _read_local(uri: str) -> Results:
    return _read(uri)


@st.cache_data(ttl=REMOTE_TTL_S, show_spinner="Reading runs from the bucket…")
def _read_remote(uri: str) -> Results:
    return _read(uri)


def load(uri: str) -> Results:
    """Runs under a folder (cached until reloaded) or a bucket (cached for REMOTE_TTL_S)."""
    return _read_remote(uri) if uri.startswith("gs://") else _read_local(uri)


def run_label(run: Run) -> str:
    """GPU (or device kind), start date and spec name: how a person tells runs apart."""
    if run.manifest is None:
        return f"{run.run_id} (manifest unreadable)"
    machine = run.manifest.machine
    device = machine.gpu.get("name") or machine.device_kind
    return f"{device} · {run.manifest.started_at[:16].replace('T', ' ')} · {run.manifest.name}"


def run_facts(run: Run) -> dict[str, str]:
    """Where and how a run ran: machine, GPU (driver, clocks), versions, spec and times, as text."""
    m = run.manifest
    if m is None:
        return {"folder": str(run.dir), "cells": str(len(run.cells))}
    facts = {
        "run_id": m.run_id, "spec": f"{m.name} ({m.spec_hash})", "started": m.started_at, "ended": m.ended_at,
        "cells": f"{len(run.cells)} recorded of {m.cells_planned} planned", "git": m.git_sha, "shard": m.shard,
        "host": m.machine.host, "platform": m.machine.platform, "device": m.machine.device_kind,
        "devices": m.machine.device_count, "compute capability": m.machine.compute_capability,
        "matmul peak (TFLOP/s)": m.machine.matmul_peak_tflops,
        **{f"gpu {k}": v for k, v in m.machine.gpu.items()},
        **{f"version {k}": v for k, v in m.machine.versions.items()},
        "command": " ".join(m.argv), "schema_version": m.schema_version, "folder": str(run.dir),
    }
    return {k: str(v) for k, v in facts.items() if v is not None}


def _run_frame(run: Run) -> pd.DataFrame:
    df = frame(run.cells)
    df["run"] = run_label(run)
    df["peak_tflops"] = run.manifest.machine.matmul_peak_tflops if run.manifest else None
    return df


def _displayable(df: pd.DataFrame) -> pd.DataFrame:
    """Dict-valued columns (grad_rel_err) as text, so tables and CSV show them."""
    for column in df.columns[df.dtypes == object]:
        if df[column].map(lambda v: isinstance(v, dict)).any():
            df[column] = df[column].map(lambda v: str(v) if isinstance(v, dict) else v)
    return df


@st.cache_data(ttl=REMOTE_TTL_S)  # no staler than the runs it is made from
def cells_frame(uri: str, run_ids: tuple[str, ...]) -> pd.DataFrame:
    """One row per cell of the chosen runs, every record field flat, plus the run's label and peak."""
    runs = load(uri).runs
    frames = [_run_frame(runs[r]) for r in run_ids if runs[r].cells]
    if not frames:
        return pd.DataFrame(columns=[*EMPTY_COLUMNS, *SHAPE])
    return _displayable(pd.concat(frames, ignore_index=True))


def timers(df: pd.DataFrame) -> list[str]:
    """Timers with a median column in the frame, in the order device, wall, device_cold, others."""
    found = [c.removesuffix("_median_s") for c in df.columns if c.endswith("_median_s")]
    return sorted(found, key=lambda t: TIMER_ORDER.index(t) if t in TIMER_ORDER else len(TIMER_ORDER))


def filtered(df: pd.DataFrame, choices: dict[str, list]) -> pd.DataFrame:
    """Rows whose value in each column is among the chosen ones; no choice keeps every row."""
    for column, chosen in choices.items():
        if chosen:
            df = df[df[column].isin(chosen)]
    return df


def with_rates(df: pd.DataFrame, timer: str) -> pd.DataFrame:
    """Latency, TFLOP/s and % of measured peak by `timer` (NaN where a cell has no such timing), sizes in MiB."""
    column = f"{timer}_median_s"
    df = df.copy()
    seconds = df[column].astype(float) if column in df else pd.Series(float("nan"), index=df.index)
    df["latency_ms"] = seconds * 1e3
    df["tflop_s"] = df["flops"].astype(float) / seconds / 1e12
    df["pct_of_peak"] = 100 * df["tflop_s"] / df["peak_tflops"].astype(float)
    df["temp_mib"] = df["temp_bytes"].astype(float) / 2**20
    df["kv_cache_mib"] = df["kv_cache_bytes"].astype(float) / 2**20
    return df


def measured(df: pd.DataFrame) -> pd.DataFrame:
    """Cells that ran, agreed with the reference and have a latency: what the charts draw."""
    return df[(df["status"] == "ok") & df["latency_ms"].notna()]


def sweeps(df: pd.DataFrame, column: str) -> list[str]:
    """Experiments in which `column` takes more than one value."""
    counts = df.groupby("experiment")[column].nunique()
    return [name for name in df["experiment"].unique() if counts[name] > 1]


def series(df: pd.DataFrame, x: str) -> pd.Series:
    """A line's name: the variant, plus the run and any parameter that varies at a fixed `x` (not kv_seq_len with T)."""
    varying = [c for c in ["run", *SHAPE] if c != x and df.groupby(x)[c].nunique().max() > 1]
    label = df["variant"].astype(str)
    for column in varying:
        label = label + f" {column}=" + df[column].astype(str)
    return label


def shape_label(p: Params) -> str:
    causal = " causal" if p.causal else ""
    return f"B{p.batch} T{p.seq_len} S{p.kv_seq_len} N{p.heads} K{p.kv_heads} H{p.head_dim} {p.dtype}{causal} {p.pass_}"


def attention_kind(heads: int, kv_heads: int) -> str:
    """MHA, GQA or MQA by how many query heads share a KV head."""
    if kv_heads == heads:
        return f"MHA (K={kv_heads})"
    return f"MQA (K={kv_heads})" if kv_heads == 1 else f"GQA (K={kv_heads})"


def _timing(cell: CellRecord, timer: str) -> Timing | None:
    return next((t for t in cell.timings if t.timer == timer), None)


def shared_timer(a: Run, b: Run, preferred: str) -> str | None:
    """`preferred` if both runs measured with it, else the first timer they share."""
    def run_timers(run: Run) -> set[str]:
        return {t.timer for c in run.cells for t in c.timings}

    common = run_timers(a) & run_timers(b)
    ordered = [preferred, *TIMER_ORDER, *sorted(common)]
    return next((t for t in ordered if t in common), None)


def _compare_row(a: CellRecord, b: CellRecord, timer: str) -> dict | None:
    ta, tb = _timing(a, timer), _timing(b, timer)
    if a.status != "ok" or b.status != "ok" or ta is None or tb is None:
        return None
    difference = abs(tb.median_s - ta.median_s)
    return {
        "experiment": a.experiment, "variant": a.variant, **a.params.as_dict(), "shape": shape_label(a.params),
        "a_ms": ta.median_s * 1e3, "b_ms": tb.median_s * 1e3, "ratio_b_over_a": tb.median_s / ta.median_s,
        "a_noise": ta.noise, "b_noise": tb.noise,
        "beyond_noise": difference > ta.q3_s - ta.q1_s and difference > tb.q3_s - tb.q1_s,
    }


def compare(a: Run, b: Run, timer: str) -> pd.DataFrame:
    """Per cell in both runs: b's median time over a's; beyond_noise where the gap exceeds both runs' IQR."""
    b_cells = {c.key: c for c in b.cells}
    rows = [_compare_row(c, b_cells[c.key], timer) for c in a.cells if c.key in b_cells]
    return pd.DataFrame([r for r in rows if r is not None])


def fp8_baseline(cell: pd.Series, candidates: pd.DataFrame) -> pd.Series | None:
    """The bf16 cell an FP8 cell is measured against: the recorded baseline, else the registry's (records from
    before Fp8Info.baseline, or FP8 cells without a verdict, do not carry it)."""
    recorded = cell.get("fp8_baseline")
    variant = VARIANTS.get(cell["variant"])
    name = recorded if isinstance(recorded, str) else variant.fp8_baseline if variant else None
    twins = candidates[candidates["variant"] == name]
    return None if twins.empty else twins.iloc[0]


def _verdict(cell: pd.Series) -> str:
    """The recorded FP8 verdict, or why the cell has none (skipped, failed, or recorded before verdicts on errors)."""
    return cell["fp8_verdict"] if isinstance(cell["fp8_verdict"], str) else f"{cell['status']}: {cell['reason']}"


def fp8_variants() -> set[str]:
    """Variants that promise FP8, from the registry: their skipped or failed cells belong in the table too."""
    return {name for name, v in VARIANTS.items() if v.fp8_baseline}


def fp8_table(df: pd.DataFrame) -> pd.DataFrame:
    """The FP8 truth table: per FP8 cell, what ran, whether f8 was in the program, error and speed-up vs bf16."""
    promised = df["variant"].isin(fp8_variants())
    if "fp8_in_hlo" in df:
        promised |= df["fp8_in_hlo"].notna()
    else:
        df = df.assign(fp8_in_hlo=None, fp8_in_kernels=None, fp8_rel_err_vs_bf16=None, fp8_verdict=None)
    rows = []
    for _, cell in df[promised].iterrows():
        same = (df["run_id"] == cell["run_id"]) & (df["experiment"] == cell["experiment"])
        same &= ~promised & (df[SHAPE] == cell[SHAPE]).all(axis=1)
        baseline = fp8_baseline(cell, df[same])
        rows.append({
            "run": cell["run"], "experiment": cell["experiment"], "variant": cell["variant"], "status": cell["status"],
            "backend": cell["backend"], "kernels": cell["kernels"], "fp8_in_program": cell["fp8_in_hlo"],
            "fp8_kernel_ran": cell["fp8_in_kernels"], "rel_err_vs_bf16": cell["fp8_rel_err_vs_bf16"],
            "baseline": None if baseline is None else baseline["variant"],
            "speedup_vs_bf16": None if baseline is None else baseline["latency_ms"] / cell["latency_ms"],
            "verdict": _verdict(cell),
        })
    return pd.DataFrame(rows)

