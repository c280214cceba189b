"""A benchmark of the run loop itself (not a timed test): its own seconds per cell at 1,000, 10,000 and 100,000
cells, for cells its worker answers at once (tests/variants/instant.py: every cell crosses the worker seam, is
spooled and stored) and for cells that all decline here (tests/variants/blocked.py at seq_len not a multiple of
16: recorded by the supervisor alone). Each count is one whole `attnbench run` process into a local folder.

    python scripts/bench_supervisor.py [--counts 1000 10000 100000] [--kinds instant declined] [--out DIR]

Per cell is the time between the first and the last cell's progress line over the cells between them, so the
process start (JAX's import, the machine's description) and the final report are outside it; the first and the
last tenth of the cells are timed apart too, to show whether the cost per cell grows with the run. `total` is
the whole process. The supervisor's CPU seconds over the same cells are read from /proc: the loop's own work,
where the wall time also holds the disk's fsyncs (the spool's and the local store's, per measured cell).
The load average before and after each run says how quiet the machine was. Prints a markdown
table for docs/benchmarks.md and writes DIR/bench-supervisor.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's runner, installed or not

from runner import RUN_ID_ENV  # noqa: E402
from runner.registry import VARIANTS_ENV  # noqa: E402

VARIANT = {"instant": "test_instant", "declined": "test_blocked"}
SEQ_LENS = list(range(1, 11))  # none a multiple of 16: test_blocked declines every cell by its own rule
HEADS = list(range(1, 11))
PER_BATCH = len(SEQ_LENS) * len(HEADS)  # cells per batch value: the spec stays far below the loader's 10,000 values
PROGRESS = re.compile(rb"^\[(\d+)/(\d+)\] ")


def spec_text(kind: str, cells: int) -> str:
    """A spec of exactly `cells` cells of the kind's variant: batch x seq_len x heads, float32."""
    batches = list(range(1, cells // PER_BATCH + 1))
    return json.dumps({  # JSON is YAML: the spec loader reads it
        "name": f"bench-{kind}-{cells}", "seed": 0, "max_cells": max(cells, 1),
        "defaults": {"head_dim": 8, "dtype": "float32"},
        "timing": {"budget_s": 0.01},
        "experiments": [{"name": "loop", "variants": [VARIANT[kind]],
                         "sweep": {"batch": batches, "seq_len": SEQ_LENS, "heads": HEADS}}],
    })


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used so far: the supervisor's own, not its workers'."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_env() -> dict[str, str]:
    """The environment of a benchmarked run: the tests' variant files registered as a user's are (runner.registry),
    and no run id inherited."""
    return {**os.environ, VARIANTS_ENV: str(ROOT / "tests" / "variants"), RUN_ID_ENV: ""}


def run_once(kind: str, cells: int, work: Path) -> dict:
    """One `attnbench run` of the kind's spec; times of every progress line as it arrives."""
    spec = work / f"{kind}-{cells}.yaml"
    spec.write_text(spec_text(kind, cells))
    env = run_env()
    command = [sys.executable, "-m", "runner", "run", str(spec), "--out", str(work / "out"), "--spool",
               str(work / "spool"), "--run-id", f"bench-{kind}-{cells}"]
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    stamps, cpu = [], []
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        for line in process.stdout:
            if PROGRESS.match(line):
                stamps.append(time.perf_counter())
                if len(stamps) in (1, cells):
                    cpu.append(cpu_s(process.pid))
        error = process.stderr.read().decode(errors="replace")
    total = time.perf_counter() - start
    if process.returncode != 0 or len(stamps) != cells:
        sys.exit(f"bench-supervisor: {kind} x {cells} exited {process.returncode} after {len(stamps)} cells: "
                 f"{error.strip().splitlines()[-1:]}")
    tenth = max(cells // 10, 2)
    return {"kind": kind, "cells": cells, "total_s": total, "load_before": load_before,
            "load_after": os.getloadavg()[0],
            "per_cell_ms": 1e3 * (stamps[-1] - stamps[0]) / (cells - 1),
            "cpu_per_cell_ms": 1e3 * (cpu[-1] - cpu[0]) / (cells - 1),
            "first_tenth_ms": 1e3 * (stamps[tenth - 1] - stamps[0]) / (tenth - 1),
            "last_tenth_ms": 1e3 * (stamps[-1] - stamps[-tenth]) / (tenth - 1)}


def table(rows: list[dict]) -> str:
    lines = ["| cells | kind | per cell (ms) | supervisor CPU per cell (ms) | first tenth (ms/cell) | "
             "last tenth (ms/cell) | whole process (s) | load before / after |",
             "|---:|---|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {r['cells']:,} | {r['kind']} | {r['per_cell_ms']:.2f} | {r['cpu_per_cell_ms']:.2f} | "
              f"{r['first_tenth_ms']:.2f} | "
              f"{r['last_tenth_ms']:.2f} | {r['total_s']:.1f} | {r['load_before']:.2f} / {r['load_after']:.2f} |"
              for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--kinds", nargs="+", choices=list(VARIANT), default=list(VARIANT))
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench-supervisor")
    args = parser.parse_args()
    if bad := [n for n in args.counts if n <= 0 or n % PER_BATCH]:
        parser.error(f"--counts: {bad[0]} is not a positive multiple of {PER_BATCH}")
    rows = []
    for cells in args.counts:
        for kind in args.kinds:
            with tempfile.TemporaryDirectory(prefix="attnbench-bench-") as work:
                rows.append(run_once(kind, cells, Path(work)))
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench-supervisor.json").write_text(json.dumps(rows, indent=2))
    print(table(rows))


if __name__ == "__main__":
    main()
