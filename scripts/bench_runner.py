"""A benchmark of the runner itself: a spec run as whole processes with a cold compilation cache, then warm (and,
with --ahead-off, warm again without starting cells early), each timed from the outside.

    python scripts/bench_runner.py specs/lab5.yaml [--out DIR] [--ahead-off] [--budget S]
    python scripts/bench_runner.py --compare RUN_DIR_A RUN_DIR_B     # same cells, same answers, same times?

Prints markdown tables (for docs/benchmarks.md) and writes DIR/bench-runner-SPEC.json. `make bench-runner` runs it.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner.record import CellRecord  # noqa: E402
from runner.store import read_run  # noqa: E402

PHASES = ("inputs", "reference", "compile", "tune", "check", "fp8", "settle", "device", "wall", "device_cold")


def run_once(spec: Path, out: Path, run_id: str, cache: Path, *extra: str) -> float:
    """Seconds of one whole `attnbench run` process."""
    command = [sys.executable, "-m", "runner", "run", str(spec), "--out", str(out), "--run-id", run_id,
               "--compile-cache", str(cache), "--spool", str(out / ".spool"), *extra]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"bench-runner: {run_id} exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    return seconds


def summary(out: Path, run_id: str, seconds: float) -> dict:
    """Whole-process seconds, per cell, the phase totals and how many programs came from the cache."""
    run = read_run(out / run_id)
    cells = run.cells
    phases = run.manifest.phases
    cached = sum(1 for c in cells if c.compilation and c.compilation.cached)
    shared = sum(1 for c in cells if c.compilation and c.compilation.shared_with)
    measured = sum(phases.values())
    starts = {group: sum(w.start_s.values()) for group, w in run.manifest.workers.items()}
    return {"run_id": run_id, "process_s": seconds, "cells": len(cells), "per_cell_s": seconds / len(cells),
            "in_cells_s": sum(c.duration_s for c in cells), "worker_start_s": starts,
            "phases": phases, "phases_s": measured,
            "cached": cached, "shared": shared, "statuses": _counts(c.status for c in cells)}


def _counts(values) -> dict:
    counts: dict = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def table(rows: list[dict]) -> str:
    """One row per run: whole process, per cell, and the phase totals."""
    shown = [p for p in PHASES if any(p in r["phases"] for r in rows)]
    head = ["run", "process s", "cells", "s / cell", "outside cells s", "workers starting s", "cached", "shared",
            *(f"{p} s" for p in shown)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        starts = ", ".join(f"{group} {s:.1f}" for group, s in r.get("worker_start_s", {}).items()) or "—"
        values = [r["run_id"], f"{r['process_s']:.1f}", str(r["cells"]), f"{r['per_cell_s']:.2f}",
                  f"{r['process_s'] - r['in_cells_s']:.1f}", starts, str(r["cached"]),
                  str(r["shared"]), *(f"{r['phases'].get(p, 0):.1f}" for p in shown)]
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines)


def _headline(cell: CellRecord):
    return next((t for t in cell.timings if t.timer == cell.timer), None)


def compare(a_dir: Path, b_dir: Path) -> str:
    """Cells both runs measured: same status, both correct, and B's headline time over A's (geomean, and how many
    differ by more than both runs' interquartile range)."""
    a, b = read_run(a_dir), read_run(b_dir)
    b_cells = {c.key: c for c in b.cells}
    pairs = [(c, b_cells[c.key]) for c in a.cells if c.key in b_cells]
    same_status = sum(x.status == y.status for x, y in pairs)
    changed = [f"{x.experiment}/{x.variant} {x.params.label()}: {x.status} -> {y.status}" for x, y in pairs
               if x.status != y.status]
    timed = [(x, y, _headline(x), _headline(y)) for x, y in pairs if x.status == y.status == "ok"
             and x.timer == y.timer and _headline(x) and _headline(y)]
    ratios = [ty.median_s / tx.median_s for _, _, tx, ty in timed]
    beyond = [(x, y) for x, y, tx, ty in timed if abs(ty.median_s - tx.median_s) > max(tx.q3_s - tx.q1_s,
                                                                                          ty.q3_s - ty.q1_s)]
    geomean = math.exp(statistics.fmean(math.log(r) for r in ratios)) if ratios else float("nan")
    lines = [f"A = {a.run_id}, B = {b.run_id}: {len(pairs)} cells in both, {same_status} with the same status",
             f"timed in both ({len(timed)}): B/A geomean {geomean:.3f}, median {statistics.median(ratios):.3f}, "
             f"range {min(ratios):.3f}-{max(ratios):.3f}; {len(beyond)} differ by more than both runs' IQR"]
    return "\n".join(lines + [f"- status changed: {c}" for c in changed])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench-runner")
    parser.add_argument("--ahead-off", action="store_true", help="also a warm run with --compile-ahead off")
    parser.add_argument("--budget", type=float, help="each timer's seconds, as `attnbench run --budget` (make demo: 0.2)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("RUN_A", "RUN_B"))
    args = parser.parse_args()
    if args.compare:
        print(compare(*args.compare))
        return
    name = args.spec.stem
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    cache = Path(tempfile.mkdtemp(prefix="attnbench-bench-cache-"))
    runs = [("cold", ()), ("warm", ())] + ([("warm-ahead-off", ("--compile-ahead", "off"))] if args.ahead_off else [])
    budget = ("--budget", f"{args.budget:g}") if args.budget else ()
    rows = []
    for label, extra in runs:
        run_id = f"{name}-{label}-{stamp}"
        seconds = run_once(args.spec, args.out, run_id, cache, *budget, *extra)
        rows.append({**summary(args.out, run_id, seconds), "options": [*budget, *extra]})
        print(f"{run_id}: {seconds:.1f} s", file=sys.stderr, flush=True)
    (args.out / f"bench-runner-{name}-{stamp}.json").write_text(json.dumps(rows, indent=2))
    print(table(rows))
    if args.ahead_off:
        print("\n" + compare(args.out / rows[1]["run_id"], args.out / rows[2]["run_id"]))


if __name__ == "__main__":
    main()
