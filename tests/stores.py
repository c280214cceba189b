"""Result stores made from the real records in examples/results/, for the dashboard's tests and benchmark.

Every run written here is a shipped run copied under a new run id, start time and git sha, its times scaled;
optionally grown to more cells (its experiments repeated under new names) and given what schema 3 adds and no
shipped run has yet (telemetry, power policy, energy, tuning, crashed and timeout cells). So tests and the
benchmark read real shapes, kernels, reasons and manifests, written as today's runner writes them.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
from pathlib import Path
from typing import Callable

from runner.record import CellRecord, Candidate, Manifest, PowerState, Span, Telemetry, TimerSummary, Tuning
from runner.results import CELLS, MANIFEST, Run
from runner.shape import cell_key
from runner.store import LocalStore

SHIPPED = Path(__file__).resolve().parents[1] / "examples" / "results"
CPU_LAB5 = "cpu/lab5-20261202-104832"
H200_LAB5 = "h200/lab5-20261202-110556"  # with TransformerEngine, cuDNN 9.14 (cudnn_fp8 incorrect at T 2048)
H200_LAB5_NO_TE = "h200/lab5-20261202-104743"  # cuDNN 9.19, te cells skipped
H200_LONG = "h200/hopper-long-20261202-110136"
H200_LONG_TE_FAILED = "h200/hopper-long-20261202-105336"
H200_WARM = "h200/hopper-long-warm-20261203-023241"  # with NVML's telemetry: its cells have a % MMA@clock
TIMES = ("median_s", "q1_s", "q3_s", "min_s")
Factor = Callable[[CellRecord], float]  # how much slower a copied cell is than its template


def shipped(folder: str) -> Run:
    """A shipped run, read (and upgraded) through the store as the dashboard reads it."""
    return LocalStore(SHIPPED).read(folder)


def copy_files(source: str, folder: Path, run_id: str, started: str, factor: float = 1.0) -> Path:
    """A shipped run's files copied as stored (schema 1, which every reader reads) under a new run id and start
    time, its timings `factor` times longer (the recorded rates stay: the dashboard derives its own)."""
    manifest = json.loads((SHIPPED / source / MANIFEST).read_text()) | {"run_id": run_id, "started_at": started}
    cells = [json.loads(line) for line in (SHIPPED / source / CELLS).read_text().splitlines()]
    for cell in cells:
        cell["run_id"] = run_id
        for timing in cell["timings"]:
            timing.update({k: timing[k] * factor for k in TIMES})
        if cell["median_s"] is not None:
            cell["median_s"] *= factor
    folder.mkdir(parents=True)
    (folder / MANIFEST).write_text(json.dumps(manifest))
    (folder / CELLS).write_text("".join(json.dumps(cell) + "\n" for cell in cells))
    return folder


def relabelled(source: str, folder: Path, gpu: str = "NVIDIA L4", capability: str = "8.9") -> Path:
    """A shipped run's files copied as stored into `folder` with its manifest's GPU relabelled (NVML's name, the
    device kind, the compute capability), its cells untouched: what attnbench says around another GPU's times, as
    the L4 walk stood an L4 in (docs/evidence/l4-walk-20261207.txt)."""
    manifest = json.loads((SHIPPED / source / MANIFEST).read_text())
    machine = manifest["machine"]
    machine.update(device_kind=gpu, compute_capability=capability, gpu=machine["gpu"] | {"name": gpu})
    folder.mkdir(parents=True)
    (folder / MANIFEST).write_text(json.dumps(manifest))
    (folder / CELLS).write_text((SHIPPED / source / CELLS).read_text())
    return folder


def retimed(cell: CellRecord, factor: float) -> CellRecord:
    """The cell `factor` times slower: every timer's times, and the rates and energy derived from them."""
    if factor == 1.0 or cell.median_s is None:
        return cell
    timings = [t.model_copy(update={k: getattr(t, k) * factor for k in TIMES}) for t in cell.timings]
    slower = {k: getattr(cell, k) * factor for k in ("median_s", "energy_j") if getattr(cell, k) is not None}
    rates = ("tflops", "gbps", "pct_of_peak", "pct_of_bandwidth", "tflops_per_j")
    return cell.model_copy(update={"timings": timings, **slower,
                                   **{k: getattr(cell, k) / factor for k in rates if getattr(cell, k) is not None}})


def copy_run(template: Run, run_id: str, started: dt.datetime, git_sha: str | None = None,
             factor: Factor = lambda cell: 1.0) -> tuple[Manifest, list[CellRecord]]:
    """The template run under a new id, start time and sha, each cell `factor(cell)` times slower."""
    shift = started - dt.datetime.fromisoformat(template.manifest.started_at)
    manifest = template.manifest.model_copy(update={
        "run_id": run_id, "started_at": started.isoformat(), "git_sha": git_sha,
        "ended_at": (dt.datetime.fromisoformat(template.manifest.ended_at) + shift).isoformat(),
    })
    cells = [retimed(c, factor(c)).model_copy(update={
        "run_id": run_id, "started_at": (dt.datetime.fromisoformat(c.started_at) + shift).isoformat()})
        for c in template.cells]
    return manifest, cells


def grown(manifest: Manifest, cells: list[CellRecord], count: int) -> tuple[Manifest, list[CellRecord]]:
    """`count` cells: the run's experiments repeated as NAME-2, NAME-3, ... (in its spec too, so the spec order
    holds), then cut at `count`."""
    experiments, out, copy = list(manifest.spec["experiments"]), list(cells), 2
    while len(out) < count:
        for exp in manifest.spec["experiments"]:
            name = f"{exp['name']}-{copy}"
            experiments.append({**exp, "name": name})
            out += [c.model_copy(update={"experiment": name, "key": cell_key(name, c.variant, c.params)})
                    for c in cells if c.experiment == exp["name"]]
        copy += 1
    spec = {**manifest.spec, "experiments": experiments}
    return manifest.model_copy(update={"spec": spec, "cells_planned": count}), out[:count]


def telemetry(cell: CellRecord, unstable: bool = False) -> CellRecord:
    """The cell as an H200 under `steady` power would have recorded it (issue 12's readings): the longer the call,
    the lower the SM clock and the nearer the power limit; `unstable` widens the clock span past 2 %."""
    if cell.status != "ok" or cell.median_s is None:
        return cell
    load = min(1.0, math.log10(1 + cell.median_s * 1e4) / 3)  # 0 for tiny calls, 1 from ~100 ms
    sm = 1980 - 400 * load
    spread = 0.12 if unstable else 0.005
    power = 250 + 430 * load
    energy = power * cell.median_s
    return cell.model_copy(update={
        "telemetry": Telemetry(
            source="nvml", timer=cell.timer, samples=40, sm_clock_mhz=Span(min=sm * (1 - spread), median=sm, max=sm),
            mem_clock_mhz=Span(min=3201, median=3201, max=3201),
            power_w=Span(min=power - 20, median=power, max=power + 15, mean=power), power_limit_w=700.0,
            temperature_c=Span(min=40, median=45 + 20 * load, max=46 + 20 * load),
            throttle=["SW power cap"] if load > 0.6 else [], clock_spread=spread),
        "power": PowerState(policy="steady", settled=not unstable, wait_s=0.5),
        "clock_unstable": unstable, "energy_j": energy, "tflops_per_j": cell.flops / 1e12 / energy,
    })


def tuned(cell: CellRecord) -> CellRecord:
    """The cell as a tuned variant records it: the winning config and the candidates it beat or skipped."""
    won = {"block_q": 128, "block_kv": 128}
    candidates = [Candidate(config=won, status="ok", median_s=cell.median_s),
                  Candidate(config={"block_q": 64, "block_kv": 64}, status="ok", median_s=cell.median_s * 1.12),
                  Candidate(config={"block_q": 128, "block_kv": 256}, status="skipped",
                            reason="needs 264 KiB of shared memory, 227 KiB available")]
    return cell.model_copy(update={"tuning": Tuning(config=won, candidates=candidates)})


def broken(cell: CellRecord, status: str, reason: str) -> CellRecord:
    """The cell as it is recorded when it did not finish: no timings."""
    return cell.model_copy(update={"status": status, "reason": reason, "timings": [], "timer": None,
                                   "median_s": None, "tflops": None, "gbps": None, "pct_of_peak": None})


def device_timing(seconds: float, spread: float = 0.01) -> TimerSummary:
    return TimerSummary(timer="device", median_s=seconds, q1_s=seconds * (1 - spread), q3_s=seconds * (1 + spread),
                        min_s=seconds * (1 - 2 * spread), samples=20, noise=2 * spread, converged=True)


def write_run(folder: Path, manifest: Manifest, cells: list[CellRecord]) -> Path:
    """The run's manifest.json and cells.jsonl as the runner writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).write_text(manifest.model_dump_json(by_alias=True))
    (folder / CELLS).write_text("".join(c.model_dump_json(by_alias=True) + "\n" for c in cells))
    return folder


EVERY_RUN = (H200_LAB5, H200_LONG, H200_LAB5_NO_TE, CPU_LAB5, H200_LONG_TE_FAILED)


def generate(out: Path, runs: int, cells_per_run: int, seed: int = 0, templates: tuple[str, ...] = EVERY_RUN
             ) -> list[str]:
    """A store of `runs` runs x `cells_per_run` cells: copies of the shipped runs (taken in turn), six hours
    apart, each time jittered by ~2 %, with cudnn 8 % slower from the 60 % mark on (a step for the history)."""
    rng = random.Random(seed)
    templates = [shipped(f) for f in templates]
    start = dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc)
    run_ids = []
    for index in range(runs):
        template = templates[index % len(templates)]
        step = 1.08 if index >= 0.6 * runs else 1.0
        run_id = f"{template.manifest.name}-{index:04d}"
        manifest, cells = copy_run(
            template, run_id, start + dt.timedelta(hours=6 * index), f"{rng.getrandbits(40):010x}",
            lambda cell: rng.lognormvariate(0, 0.02) * (step if cell.variant == "cudnn" else 1.0))
        manifest, cells = grown(manifest, cells, cells_per_run)
        folder = template.dir.rstrip("/").rpartition("/")[0].rpartition("/")[2]  # cpu or h200, as shipped
        write_run(out / folder / run_id, manifest, cells)
        run_ids.append(run_id)
    return run_ids
