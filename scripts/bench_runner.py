"""A benchmark of the runner itself: a spec run as whole processes with a cold compilation cache, then warm (and,
with --ahead-off, warm again without starting cells early), each timed from the outside, with its profile: each
phase's share of the process, and the GPU's idle time between cells (the gaps between the cells' `load` windows).

    python scripts/bench_runner.py specs/lab5.yaml [--out DIR] [--ahead-off] [--budget S] [--root CHECKOUT] [--label L]
    python scripts/bench_runner.py --compare RUN_DIR_A RUN_DIR_B     # same cells, same answers, same times?
    python scripts/bench_runner.py --estimate RUN_DIR... --specs SPEC...  # GPU time of specs from measured cells
    python scripts/bench_runner.py --prices RUN_DIR...  # their cost table (runner.cost.H200: what shards are priced by)

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
from collections import Counter
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner import report  # noqa: E402
from runner.cells import Cell, expand  # noqa: E402
from runner.cost import Key, cost_key, measured, medians, price  # noqa: E402
from runner.machine import Device  # noqa: E402
from runner.record import CellRecord, Window  # noqa: E402
from runner.registry import load_all  # noqa: E402
from runner.run import in_run_order, plan  # noqa: E402
from runner.spec import SpecError, load_spec  # noqa: E402
from runner.store import read_run  # noqa: E402

PHASES = ("inputs", "reference", "compile", "tune", "check", "fp8", "settle", "device", "wall", "device_cold")


def run_once(spec: Path, out: Path, run_id: str, cache: Path, spool: Path, *extra: str, root: Path = ROOT) -> Window:
    """The host's clock (seconds since the epoch) around one whole `attnbench run` process of the runner in `root`
    (another checkout: a "before"); its spool is `spool`, outside `out`, whose readers would list each run twice."""
    command = [sys.executable, "-m", "runner", "run", str(spec), "--out", str(out), "--run-id", run_id,
               "--compile-cache", str(cache), "--spool", str(spool), *extra]
    start = time.time()
    done = subprocess.run(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    process = Window(start=start, end=time.time())
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        sys.exit(f"bench-runner: {run_id}: attnbench run exited {done.returncode}: {said}")
    return process


def summary(out: Path, run_id: str, process: Window) -> dict:
    """Whole-process seconds, per cell, the phase totals, how many programs came from the cache, and the profile."""
    run = read_run(out / run_id)
    cells = run.cells
    phases = run.manifest.phases
    seconds = process.end - process.start
    shared = sum(1 for c in cells if c.compilation and c.compilation.shared_with)
    measured = sum(phases.values())
    starts = {group: sum(w.start_s.values()) for group, w in run.manifest.workers.items()}
    in_cells = report.in_cells_s(cells)
    return {"run_id": run_id, "process_s": seconds, "cells": len(cells), "per_cell_s": seconds / len(cells),
            "in_cells_s": in_cells, "worker_start_s": starts,
            "phases": phases, "phases_s": measured, "shares": shares(phases, in_cells, seconds),
            "gpu": gpu_idle(cells, process), "machine": machine_step(run.manifest),
            "cached": report.cache_counts(cells)[0], "shared": shared, "statuses": Counter(c.status for c in cells)}


def machine_step(manifest) -> str:
    """The seconds the run's workers spent describing the machine at their start (its ceilings measured, or reused
    from those kept beside the compile cache) and which it was."""
    seconds = sum(w.start_s.get("machine", 0.0) for w in manifest.workers.values())
    origin = manifest.machine.ceilings_origin
    return f"{seconds:.1f}" + ("" if origin is None else " reused" if origin.reused else " measured")


def shares(phases: dict[str, float], in_cells_s: float, process_s: float) -> dict[str, float]:
    """Each phase's share of the whole process, with the time in cells that no phase counts ("cells, other") and
    the time outside every cell (starting workers, planning, storing records)."""
    parts = {**phases, "cells, other": in_cells_s - sum(phases.values()), "outside cells": process_s - in_cells_s}
    return {name: seconds / process_s for name, seconds in parts.items()}


def gpu_idle(cells: list[CellRecord], process: Window) -> dict:
    """The GPU's time under the timers' load and idle around it, from the cells' `load` windows (host clock): idle
    before the first window, between windows (each gap, in run order), and after the last; None where no cell
    recorded one (runs before 2026-12-06, or no cell timed)."""
    windows = sorted((c.load.start, c.load.end) for c in cells if c.load)
    if not windows:
        return {"windows": 0, "loaded_s": None, "before_s": None, "between_s": None, "after_s": None,
                "gap_median_s": None, "gap_max_s": None}
    gaps = [later[0] - earlier[1] for earlier, later in zip(windows, windows[1:])]
    return {"windows": len(windows), "loaded_s": sum(end - start for start, end in windows),
            "before_s": windows[0][0] - process.start, "between_s": sum(gaps), "after_s": process.end - windows[-1][1],
            "gap_median_s": statistics.median(gaps) if gaps else None, "gap_max_s": max(gaps, default=None)}


def table(rows: list[dict]) -> str:
    """One row per run: whole process, per cell, and the phase totals."""
    shown = [p for p in PHASES if any(p in r["phases"] for r in rows)]
    head = ["run", "process s", "cells", "s / cell", "outside cells s", "workers starting s", "machine s (ceilings)",
            "cached", "shared", *(f"{p} s" for p in shown)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        starts = ", ".join(f"{group} {s:.1f}" for group, s in r.get("worker_start_s", {}).items()) or "—"
        values = [r["run_id"], f"{r['process_s']:.1f}", str(r["cells"]), f"{r['per_cell_s']:.2f}",
                  f"{r['process_s'] - r['in_cells_s']:.1f}", starts, r.get("machine", "—"), str(r["cached"]),
                  str(r["shared"]), *(f"{r['phases'].get(p, 0):.1f}" for p in shown)]
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines)


def profile(rows: list[dict]) -> str:
    """One row per run: the GPU's loaded and idle seconds (from the cells' load windows), then each phase's share of
    the process."""
    names = list(dict.fromkeys(name for r in rows for name in r["shares"]))
    head = ["run", "process s", "GPU loaded s", "idle before first s", "idle between cells s", "gap median ms",
            "gap max ms", "idle after last s", *(f"{name} %" for name in names)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        gpu = r["gpu"]
        values = [r["run_id"], f"{r['process_s']:.1f}",
                  *(_number(gpu[k]) for k in ("loaded_s", "before_s", "between_s")),
                  *(_number(gpu[k], 1e3) for k in ("gap_median_s", "gap_max_s")), _number(gpu["after_s"]),
                  *(_number(r["shares"].get(name), 100) for name in names)]
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines)


def _number(value: float | None, scale: float = 1.0) -> str:
    return "—" if value is None else f"{value * scale:.1f}"


def run_keys(cells: list[Cell], device: Device) -> list[Key]:
    """The cost key of each cell a worker would measure on `device`, in the run's own order and by its own plan
    (runner.run: the worker, the decline verdict and the class are the run's)."""
    work = plan(in_run_order(cells), device)
    return [cost_key(work.groups[i], work.cells[i].params) for i, reason in enumerate(work.declined) if reason is None]


def overheads(runs: list) -> list[float]:
    """Each ended run's seconds outside its cells (process overhead: the manifest's start to end, less the cells)."""
    return [max(0.0, report.wall_s(run.manifest) - report.in_cells_s(run.cells)) for run in runs
            if run.manifest.ended_at]


def estimate(runs: list, specs: list, device: Device) -> list[dict]:
    """Each spec's GPU time from measured per-cell costs: the cells a worker would measure on `device` (declined
    ones cost nothing), each at the median of the measured cells of its cost key, plus one process's overhead."""
    table = medians(measured(runs))
    spent = overheads(runs)
    overhead = statistics.median(spent) if spent else 0.0
    rows = []
    for spec in specs:
        cells = expand(spec)
        keys = run_keys(cells, device)
        priced = [price(key, table) for key in keys]
        rows.append({"spec": spec.name, "cells": len(cells), "measured_cells": len(keys),
                     "cells_s": sum(s for s, _ in priced), "overhead_s": overhead,
                     "extrapolated": sum(1 for _, exact in priced if not exact)})
    return rows


def estimate_table(rows: list[dict]) -> str:
    head = ["spec", "cells", "cells a worker measures", "of them priced from another class", "cells s", "process s",
            "total min"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        total = r["cells_s"] + r["overhead_s"]
        lines.append(f"| {r['spec']} | {r['cells']} | {r['measured_cells']} | {r['extrapolated']} | "
                     f"{r['cells_s']:.0f} | {r['overhead_s']:.0f} | {total / 60:.1f} |")
    total = sum(r["cells_s"] + r["overhead_s"] for r in rows)
    lines.append(f"| all | {sum(r['cells'] for r in rows)} | {sum(r['measured_cells'] for r in rows)} | "
                 f"{sum(r['extrapolated'] for r in rows)} | {sum(r['cells_s'] for r in rows):.0f} | "
                 f"{sum(r['overhead_s'] for r in rows):.0f} | {total / 60:.1f} |")
    return "\n".join(lines)


def prices_literal(table: dict[Key, float]) -> str:
    """A cost table as runner.cost.H200 is written: one key a line."""
    return "\n".join(["{", *(f"    {key!r}: {seconds!r}," for key, seconds in table.items()), "}"])


def run_device(run) -> Device:
    """The device a run measured on, from its manifest: what the variants' requirements are checked against."""
    machine = run.manifest.machine
    memory = machine.gpu.memory_total_mib << 20 if machine.gpu and machine.gpu.memory_total_mib else None
    capability = float(machine.compute_capability) if machine.compute_capability else None
    return Device(machine.platform, machine.device_kind, capability, memory, machine.device_count)


def _headline(cell: CellRecord):
    return next((t for t in cell.timings if t.timer == cell.timer), None)


def compare(a_dir: Path, b_dir: Path) -> str:
    """Cells both runs measured: same status, both correct, and B's headline time over A's (geomean, and how many
    differ by more than both runs' interquartile range)."""
    a, b = read_runs([a_dir, b_dir], "--compare")
    b_cells = {c.key: c for c in b.cells}
    pairs = [(c, b_cells[c.key]) for c in a.cells if c.key in b_cells]
    same_status = sum(x.status == y.status for x, y in pairs)
    changed = [f"{x.experiment}/{x.variant} {x.params.label()}: {x.status} -> {y.status}" for x, y in pairs
               if x.status != y.status]
    timed = [(x, y, _headline(x), _headline(y)) for x, y in pairs if x.status == y.status == "ok"
             and x.timer == y.timer and _headline(x) and _headline(y)]
    ratios = [ty.median_s / tx.median_s for _, _, tx, ty in timed]
    if not ratios:
        fail([f"--compare: {a.run_id} and {b.run_id} have no cell timed in both ({len(pairs)} cells in both)"])
    beyond = [(x, y) for x, y, tx, ty in timed if abs(ty.median_s - tx.median_s) > max(tx.q3_s - tx.q1_s,
                                                                                          ty.q3_s - ty.q1_s)]
    geomean = math.exp(statistics.fmean(math.log(r) for r in ratios)) if ratios else float("nan")
    lines = [f"A = {a.run_id}, B = {b.run_id}: {len(pairs)} cells in both, {same_status} with the same status",
             f"timed in both ({len(timed)}): B/A geomean {geomean:.3f}, median {statistics.median(ratios):.3f}, "
             f"range {min(ratios):.3f}-{max(ratios):.3f}; {len(beyond)} differ by more than both runs' IQR"]
    return "\n".join(lines + [f"- status changed: {c}" for c in changed])


def fail(problems: list[str]) -> NoReturn:
    """Bad input: a line each, exit 2."""
    for problem in problems:
        print(f"bench-runner: error: {problem}", file=sys.stderr)
    sys.exit(2)


def unrunnable(spec: Path, root: Path) -> list[str]:
    """What keeps the bench from starting its first run: a SPEC that is no file, a --root without the runner."""
    problems = [] if spec.is_file() else [f"{spec}: no such file"]
    if not (root / "runner" / "__main__.py").is_file():
        problems.append(f"--root {root}: not an attnbench checkout (it has no runner/__main__.py)")
    return problems


def read_runs(paths: list[Path], option: str) -> list:
    """The runs, whole: a run without a manifest, or with a line or object that did not read, is refused (its
    cells would price or compare what it does not hold)."""
    runs = [read_run(path) for path in paths]
    if problems := [f"{option} {path}: {problem}" for path, run in zip(paths, runs) for problem in run.problems]:
        fail(problems)
    return runs


def read_measured_runs(paths: list[Path], option: str) -> list:
    """read_runs, refusing runs of which no cell was measured (declined, lost, or stored before cells named their
    worker): they price nothing, where --estimate took a median of no prices."""
    runs = read_runs(paths, option)
    if not measured(runs):
        fail([f"{option}: no measured cell in {', '.join(map(str, paths))}"])
    return runs


def read_specs(paths: list[Path]) -> list:
    if not paths:
        fail(["--estimate prices the specs given by --specs SPEC...: give at least one"])
    try:
        return [load_spec(path, set(load_all())) for path in paths]
    except SpecError as error:
        fail([f"--specs: {problem}" for problem in error.problems])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", nargs="?", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench-runner")
    parser.add_argument("--ahead-off", action="store_true", help="also a warm run with --compile-ahead off")
    parser.add_argument("--budget", type=float,
                        help="each timer's seconds, as `attnbench run --budget` (make demo: 0.2)")
    parser.add_argument("--root", type=Path, default=ROOT, help="run the runner of this checkout (a 'before')")
    parser.add_argument("--label", default="", help="put in the run ids and the JSON's name (e.g. before, after)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("RUN_A", "RUN_B"))
    parser.add_argument("--estimate", nargs="+", type=Path, metavar="RUN_DIR",
                        help="price --specs from these runs' measured cells (on the device of the first run)")
    parser.add_argument("--specs", nargs="+", type=Path, default=[], metavar="SPEC")
    parser.add_argument("--prices", nargs="+", type=Path, metavar="RUN_DIR",
                        help="print the cost table of these runs' measured cells (runner.cost.H200 is one)")
    args = parser.parse_args()
    if args.compare:
        print(compare(*args.compare))
        return
    if args.prices:
        print(prices_literal(medians(measured(read_measured_runs(args.prices, "--prices")))))
        return
    if args.estimate:
        specs = read_specs(args.specs)
        runs = read_measured_runs(args.estimate, "--estimate")
        rows = estimate(runs, specs, run_device(runs[0]))
        print(json.dumps(rows, indent=2), file=sys.stderr)
        print(estimate_table(rows))
        return
    if args.spec is None:
        fail(["give a SPEC to run, or --compare, --estimate or --prices (see --help)"])
    if problems := unrunnable(args.spec, args.root):
        fail(problems)
    name = args.spec.stem + (f"-{args.label}" if args.label else "")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    cache = Path(tempfile.mkdtemp(prefix="attnbench-bench-cache-"))
    spool = Path(tempfile.mkdtemp(prefix="attnbench-bench-spool-"))
    runs = [("cold", ()), ("warm", ())] + ([("warm-ahead-off", ("--compile-ahead", "off"))] if args.ahead_off else [])
    budget = ("--budget", f"{args.budget:g}") if args.budget else ()
    rows = []
    for label, extra in runs:
        run_id = f"{name}-{label}-{stamp}"
        process = run_once(args.spec.resolve(), args.out.resolve(), run_id, cache, spool, *budget, *extra,
                           root=args.root)
        rows.append({**summary(args.out, run_id, process), "options": [*budget, *extra]})
        print(f"{run_id}: {process.end - process.start:.1f} s", file=sys.stderr, flush=True)
    (args.out / f"bench-runner-{name}-{stamp}.json").write_text(json.dumps(rows, indent=2))
    print(table(rows))
    print("\n" + profile(rows))
    if args.ahead_off:
        print("\n" + compare(args.out / rows[1]["run_id"], args.out / rows[2]["run_id"]))


if __name__ == "__main__":
    main()
