"""Published figures beside ours: other benchmarks' results at shapes attnbench also runs.

docs/reference/sources.yaml lists each file of figures with where it came from (repository, commit, path), the
library versions and GPU that made it, and its format; `figures()` reads them into Figures keyed by shape, so a cell
of the same shape (every axis, quiet ones included) finds its published counterpart and gives measured / published.
The folder is $ATTNBENCH_REFERENCE where set (the dashboard's image copies it there), else the checkout's.

cudnn-frontend's sdpa_benchmark_training CSVs (format `cudnn-frontend-sdpa`) time the forward and the backward
apart; attnbench's fwd_bwd times them as one program, so its published counterpart is fwd_time_ms + bwd_time_ms
(a row with `deterministic_bwd` True: the fwd_bwd cell with `deterministic` true).
Their `fp8` rows are FP8 attention on bfloat16 models: they match the cells of variants that promise FP8.

cudnn-frontend's attention_inference CSVs (format `cudnn-frontend-inference`, decode_sweep's) time one decode step:
q_tokens new tokens against a cache of kv_len keys, causal aligned to the end when q_tokens > 1. Their `cudnn`
backend reads a contiguous (dense) K and V (the benchmark's README; the `page_size` column is the config's, for
FlashInfer), so a row is attnbench's dense serving cell: kv_lengths equal, page_size null, causal. The per-GPU heads
are the row's (tp 1); only the bfloat16 `cudnn` generation rows without a window are read.

cudnn-frontend's attention_training CSVs (format `cudnn-frontend-training`) hold one row per backend (`cudnn`,
`flash_attention_4`), data type, mask, shape and pass (`fwd`, or `bwd` with `deterministic_bwd` False or True), and
`peak_mma_tflops`: the GPU's dense MMA rate for the row's data type at the SM clock the benchmark sampled after
timing it (flops per clock per SM x SMs x MHz, runner.metrics.peak_mma_tflops). A `fwd` row is a fwd cell; fwd +
bwd is a fwd_bwd cell, and fwd + the deterministic bwd a fwd_bwd cell with `deterministic` true. Each backend is a
series of its own (the entry's `series` maps backend -> name); its batch is the row's, so batch 2 never meets batch 1.

A figure stands beside a cell only where the run's GPU (its manifest's NVML name, `machine.gpu.name`) is the one the
figures were measured on (the entry's `gpu`): an L4's or a CPU's cell is never set against an H200's figure.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import yaml

from runner import metrics, shape
from runner.leaderboard import FP8, NOT_FP8, cell_fp8_mark
from runner.record import cudnn_ran, gpu_model

REFERENCE_ENV = "ATTNBENCH_REFERENCE"
CHECKOUT = Path(__file__).resolve().parents[1] / "docs" / "reference"
SOURCES = "sources.yaml"  # the folder's index: each file of figures, where it came from, its GPU and format
# What a published figure is, said beside every table of them: cuDNN's time stands beside our XLA and Pallas rows too.
FIGURE_IS = "each published figure times the kernel its `published` column names, beside every variant of ours"


@dataclass(frozen=True)
class Figure:
    """One published timing at one shape."""

    source: str  # "cuDNN 9.19.1 (cudnn-frontend 1.19.0) on NVIDIA H200": the series' name
    url: str
    fp8: bool
    shape: tuple  # (name, value) pairs: the shape as a cell key sees it
    median_s: float
    peak_tflops: float | None = None  # the publisher's dense MMA rate at the clock it sampled, where it gives one
    cudnn: str | None = None  # the cuDNN the publisher's figure ran ("9.27.0"), None where it ran none (FA4)
    gpu: str | None = None  # the GPU it was measured on, by NVML's name (sources.yaml's `gpu`: "NVIDIA H200")


def dotted(backend_version: str) -> str:
    """cuDNN's version number as its CSVs give it (91901, or 92700.000) in dots: 9.19.1, 9.27.0."""
    number = int(float(backend_version))
    return f"{number // 10000}.{number // 100 % 100}.{number % 100}"


def folder() -> Path:
    return Path(os.environ.get(REFERENCE_ENV) or CHECKOUT)


def _plain(name: str, value):
    """A shape value as a record holds it, whatever a table made of it (NaN for None, 4096.0 for 4096, numpy)."""
    if hasattr(value, "item"):
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer() and name not in ("fill", "softcap"):
        return int(value)
    return value


def key(values: dict) -> tuple:
    """A shape's identity for matching: every axis, quiet ones at their default left out (as in cell keys)."""
    plain = shape.resolved({name: _plain(name, values.get(name)) for name in shape.NAMES if name in values})
    return tuple(sorted(shape.keyed(plain).items()))


def _cudnn_frontend(path: Path, source: str, url: str) -> list[Figure]:
    """cudnn-frontend's sdpa_benchmark_training CSV: a forward and a forward + backward figure per successful row."""
    found = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["success"] != "True":
                continue
            values = dict(batch=int(row["batch_size"]), seq_len=int(row["q_seqlen"]), kv_seq_len=int(row["kv_seqlen"]),
                          heads=int(row["num_q_heads"]), kv_heads=int(row["num_kv_heads"]),
                          head_dim=int(row["head_dim_qk"]), v_head_dim=int(row["head_dim_vo"]), dtype="bfloat16",
                          causal=row["attn_mask"] == "top_left",
                          window=int(row["sliding_window_size"]) if row["sliding_window_size"] else None)
            fp8, fwd_ms = row["data_type"] == "fp8", float(row["fwd_time_ms"])
            deterministic = row.get("deterministic_bwd") == "True"
            cudnn = dotted(row["cudnn_backend_version"]) if row["backend"] == "cudnn" else None
            if not deterministic:  # a deterministic row's forward is its plain row's again
                found.append(Figure(source, url, fp8, key({**values, "pass": "fwd"}), fwd_ms / 1e3, cudnn=cudnn))
            if row["bwd_time_ms"]:
                both_s = (fwd_ms + float(row["bwd_time_ms"])) / 1e3
                cell = {**values, "pass": "fwd_bwd", "deterministic": deterministic}
                found.append(Figure(source, url, fp8, key(cell), both_s, cudnn=cudnn))
    return found


def _cudnn_frontend_inference(path: Path, source: str, url: str) -> list[Figure]:
    """cudnn-frontend's attention_inference CSV: a decode figure per successful bfloat16 cudnn generation row."""
    found = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if (row["success"], row["phase"], row["backend"], row["data_type"], row["kv_cache_dtype"],
                    row["sliding_window_size"]) != ("True", "generation", "cudnn", "bfloat16", "bfloat16", ""):
                continue
            values = dict(batch=int(row["batch_size"]), seq_len=int(row["q_tokens"]), kv_seq_len=int(row["kv_len"]),
                          heads=int(row["num_q_heads"]), kv_heads=int(row["num_kv_heads"]),
                          head_dim=int(row["head_dim_qk"]), v_head_dim=int(row["head_dim_vo"]), dtype="bfloat16",
                          causal=True, kv_lengths="equal", page_size=None)
            found.append(Figure(source, url, False, key({**values, "pass": "fwd"}), float(row["time_ms"]) / 1e3,
                                cudnn=row["backend_detail"].split()[-1]))  # "cudnn 9.27.0"
    return found


def _cudnn_frontend_training(path: Path, series: dict, url: str) -> list[Figure]:
    """cudnn-frontend's attention_training CSV: per backend, data type, mask and shape, a forward figure, a forward +
    backward one and a forward + deterministic backward one, each with the publisher's peak at its sampled clock."""
    rows: dict[tuple, dict] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["success"] != "True" or row["sliding_window_size"] or row["backend"] not in series:
                continue
            columns = ("backend", "data_type", "attn_mask", "batch_size", "q_seqlen", "kv_seqlen", "num_q_heads",
                       "num_kv_heads", "head_dim_qk", "head_dim_vo")
            shape_of = tuple(row[c] for c in columns)
            rows.setdefault(shape_of, {})[(row["profile_pass"], row["deterministic_bwd"] == "True")] = row
    found = []
    for (backend, data_type, mask, *sizes), passes in rows.items():
        if (forward := passes.get(("fwd", False))) is None:
            continue
        batch, seq_len, kv_seq_len, heads, kv_heads, head_dim, v_head_dim = (int(x) for x in sizes)
        values = dict(batch=batch, seq_len=seq_len, kv_seq_len=kv_seq_len, heads=heads, kv_heads=kv_heads,
                      head_dim=head_dim, v_head_dim=v_head_dim, dtype="bfloat16", causal=mask == "top_left")
        fwd_s, fp8 = float(forward["time_ms"]) / 1e3, data_type == "fp8"
        cudnn = dotted(forward["cudnn_backend_version"]) if backend == "cudnn" else None  # FA4's row runs none
        found.append(Figure(series[backend], url, fp8, key({**values, "pass": "fwd"}), fwd_s,
                            float(forward["peak_mma_tflops"]), cudnn))
        for deterministic in (False, True):
            if (backward := passes.get(("bwd", deterministic))) is not None:
                cell = {**values, "pass": "fwd_bwd", "deterministic": deterministic}
                found.append(Figure(series[backend], url, fp8, key(cell), fwd_s + float(backward["time_ms"]) / 1e3,
                                    float(backward["peak_mma_tflops"]), cudnn))
    return found


FORMATS = {"cudnn-frontend-sdpa": _cudnn_frontend, "cudnn-frontend-inference": _cudnn_frontend_inference,
           "cudnn-frontend-training": _cudnn_frontend_training}


def _entries(where: Path) -> list[dict] | None:
    """sources.yaml's entries, None where the folder holds none (an image built without docs/reference/)."""
    sources = where / SOURCES
    return yaml.safe_load(sources.read_text()) if sources.is_file() else None


@cache
def _load(where: str) -> dict[tuple, list[Figure]]:
    index: dict[tuple, list[Figure]] = {}
    for entry in _entries(Path(where)) or []:
        if not (Path(where) / entry["file"]).is_file():  # absent() says so where a run expected its figures
            continue
        for figure in FORMATS[entry["format"]](Path(where) / entry["file"], entry["series"], entry["url"]):
            index.setdefault((figure.shape, figure.fp8), []).append(replace(figure, gpu=entry.get("gpu")))
    return index


def figures() -> dict[tuple, list[Figure]]:
    """Every published figure, by (shape key, fp8)."""
    return _load(str(folder()))


def lookup(values: dict, fp8: bool) -> list[Figure]:
    """The published figures at this shape (a cell's params by spec name), FP8 ones for a variant promising FP8."""
    return figures().get((key(values), fp8), [])


def gpu_of(manifest) -> str | None:
    """The GPU a run ran on, by NVML's name (record.gpu_model); None for a CPU's run or where no manifest says."""
    return gpu_model(manifest) if manifest else None


def absent(manifest) -> str | None:
    """Why a run on a GPU may miss published figures it would be set beside: the reference folder holds no
    sources.yaml (so no GPU's figures are known), or a file it lists for the run's GPU is missing; None where they
    were read, and for a CPU's run, which expects none."""
    gpu, where = gpu_of(manifest), folder()
    entries = _entries(where) if gpu else []
    if entries is None:
        return (f"no published figures: {where} holds no {SOURCES} (an image or install without docs/reference/; "
                f"${REFERENCE_ENV} names the folder)")
    missing = [e["file"] for e in entries if e.get("gpu") == gpu and not (where / e["file"]).is_file()]
    return f"published figures of the {gpu} not read: {', '.join(missing)} missing in {where}" if missing else None


def on_gpu(values: dict, fp8: bool, gpu: str | None) -> list[Figure]:
    """The published figures at this shape measured on `gpu` (a run's, gpu_of): none for another GPU or a CPU."""
    return [f for f in lookup(values, fp8) if gpu is not None and f.gpu == gpu]


def marked(variant: str, fp8_mark: str | None) -> str:
    """A variant's name in a published table: 'te_fp8 (not FP8)' where its FP8 never ran (so it stands beside the
    bf16 figure), else its name alone."""
    return f"{variant} ({NOT_FP8})" if fp8_mark == NOT_FP8 else variant


def beside(cells, manifest=None) -> list[dict]:
    """A row per (measured cell, published figure) at the same shape on the same GPU (the run's manifest's: none
    without one), an FP8 figure only beside a cell whose record says FP8 ran (runner.leaderboard.fp8_mark: an FP8
    variant that ran in bf16 is set beside the bf16 figure, as the bf16 it is, and named so: `marked`): measured /
    published below 1 is faster; the cuDNN each side ran ("—" where it ran none); where the publisher gives its peak
    at the clock it sampled, each side's TFLOP/s (the cell's FLOPs over each time) as a share of its own clock's MMA
    peak (ours from the run's machine and the cell's median SM clock)."""
    machine, gpu, rows = manifest.machine if manifest else None, gpu_of(manifest), []
    for c in cells:
        if c.status != "ok" or not c.median_s:
            continue
        mark = cell_fp8_mark(c)
        for figure in on_gpu(c.params.as_dict(), mark == FP8, gpu):
            row = {"experiment": c.experiment, "variant": marked(c.variant, mark), "shape": c.params.label(),
                   "measured ms": c.median_s * 1e3, "published ms": figure.median_s * 1e3,
                   "measured / published": c.median_s / figure.median_s,
                   "our cuDNN": cudnn_ran(c.variant, c.backend, manifest) or "—", "published cuDNN": figure.cudnn or "—"}
            if figure.peak_tflops:
                row["measured % MMA@clock"] = metrics.clock_peak(c, machine)
                published_tflops = metrics.rates(c.flops, c.bytes_min, figure.median_s)["tflops"]
                row["published % MMA@clock"] = metrics.clock_peak_share(published_tflops, figure.peak_tflops)
            rows.append({**row, "published": figure.source})
    return rows

