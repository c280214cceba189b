"""Land what the H200's plan brought back (scripts/gpu-plan.sh's OUTDIR, copied to results/gpu-plan) where the project
keeps it: each finished run of the H200 in examples/results/h200/, the energy probe with its replay, the cross-checks,
the bench's JSON, plan.log and steps.txt in docs/evidence/ (docs/benchmarks.md, "Landing").

    python scripts/land-gpu-plan.py [FROM] [--root CHECKOUT] [--dry-run]

FROM (default CHECKOUT/results/gpu-plan) is read, never changed; CHECKOUT is this script's own unless --root names
another. A run is finished when every cell it planned is stored, counted by the store's reader as `attnbench runs`
counts them; an unfinished one is left, with a line saying how many cells it lacks (a later call resumes it), and so
is a run another GPU measured (a rehearsal on a CPU), with a line naming it. Nothing already in CHECKOUT is
overwritten but the plan's own account (plan.log, steps.txt), which every call appends to: where FROM's is longer and
begins with the one landed (a later call's), it is landed anew, with a line saying so. The probe's replay
(scripts/replay_energy.py, then with --old) is written beside it as probe-energy-DAY.txt. What stays to do by hand is
printed last. FROM missing, or holding nothing to land: one line, exit 1.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner.record import gpu_name  # noqa: E402
from runner.results import Run  # noqa: E402
from runner.store import LocalStore, StoreUnavailable  # noqa: E402

H200 = Path("examples/results/h200")
H200_GPU = "NVIDIA H200"  # the GPU that examples/results/h200's runs name (runner.record.gpu_name: NVML's name)
EVIDENCE = Path("docs/evidence")
REPLAY = ROOT / "scripts" / "replay_energy.py"


class Refused(Exception):
    """FROM or CHECKOUT is not what landing needs: one line."""


@dataclass
class Landing:
    """One thing to land: `source` in FROM (a file, or a run's folder) to `target` in the checkout, as `files` (each
    file's path in the checkout, relative to it -> its path in FROM); `replayed`: the energy probe, whose replay is
    written beside it; `account`: plan.log or steps.txt, which each call appends to."""

    source: Path
    target: Path
    files: dict[Path, Path]
    replayed: bool = False
    account: bool = False


def day_of(source: Path) -> str:
    """The plan's day (OUTDIR/day, which scripts/gpu-plan.sh writes before its first step)."""
    if not source.is_dir():
        raise Refused(f"{source} is not a folder (copy the folder the call brought back there: docs/benchmarks.md, "
                      "\"The calls\")")
    try:
        day = (source / "day").read_text(errors="replace").strip()  # a torn or foreign file: said below, as read
    except OSError:
        raise Refused(f"{source} has no file day (scripts/gpu-plan.sh writes one first): not a folder the plan "
                      "wrote") from None
    if not re.fullmatch(r"\d{8}", day):
        raise Refused(f"{source}/day says {day[:40]!r}, not a day (YYYYMMDD)")
    return day


def planned_on_an_h200(source: Path) -> None:
    """Nothing of a plan that ran elsewhere lands (a rehearsal on a CPU: its logs would hold the H200's day's place):
    OUTDIR/gpu, NVML's name of the GPU, which scripts/gpu-plan.sh writes before its first step."""
    try:
        gpu = (source / "gpu").read_text(errors="replace").strip()
    except OSError:
        raise Refused(f"{source} has no file gpu (scripts/gpu-plan.sh writes one first): not a folder the plan "
                      "wrote") from None
    if gpu != H200_GPU:
        raise Refused(f"{source} was planned on {gpu[:40]!r}, not an {H200_GPU}: nothing of it lands")


def lacking(run: Run) -> str | None:
    """Why a run is not landed (another GPU measured it, it lacks cells, or does not read whole), or None where the
    H200 measured it, every planned cell is stored and it reads as tests/test_record.py asks of every run in
    examples/results."""
    if run.manifest is None:
        return "no manifest (it stopped before its first write)"
    if (gpu := gpu_name(run.manifest)) != H200_GPU:
        return f"it was measured on {gpu}, not an {H200_GPU} ({H200} holds the H200's runs)"
    lacks = run.manifest.cells_planned - len(run.cells)
    if lacks > 0:
        return f"it lacks {lacks} of its {run.manifest.cells_planned} planned cells (a later call resumes it)"
    return f"it does not read whole: {run.problems[0]}" if run.problems else None


def run_landings(folder: Path) -> tuple[list[Landing], list[str]]:
    """The finished runs under `folder`, each to examples/results/h200/<run id>, and a line for each left."""
    if not folder.is_dir():
        return [], []
    store, landings, left = LocalStore(folder), [], []
    for run_id in store.runs():
        if why := lacking(store.read(run_id)):
            left.append(f"{folder / run_id}: left, {why}")
            continue
        source = folder / run_id
        files = sorted(p for p in source.rglob("*") if p.is_file() and not p.name.startswith("."))
        target = H200 / source.name
        landings.append(Landing(source, target, {target / p.relative_to(source): p for p in files}))
    return landings, left


def evidence(files: list[Path], under: Path = EVIDENCE, replayed: bool = False, account: bool = False) -> list[Landing]:
    """Each file there is to docs/evidence/ (or `under`), under its own name."""
    return [Landing(f, under / f.name, {under / f.name: f}, replayed, account) for f in files if f.is_file()]


def landings(source: Path, day: str) -> tuple[list[Landing], list[str]]:
    """Everything FROM holds to land, and a line for each run left."""
    runs, left = run_landings(source / "results")
    bench_runs, bench_left = run_landings(source / "bench")
    return [*runs, *bench_runs, *evidence([source / f"probe-energy-{day}.json"], replayed=True),
            *evidence([*sorted(source.glob(f"steady-crosscheck*-{day}.json")),
                       *sorted((source / "bench").glob("bench-runner-*.json"))]),
            *evidence([source / "plan.log", source / "steps.txt"], EVIDENCE / f"gpu-plan-{day}", account=True)], \
        left + bench_left


def grown(root: Path, landing: Landing) -> bool:
    """Whether FROM's copy of the plan's account is a later call's of the one landed: longer, and beginning with it."""
    landed, later = root / landing.target, landing.source
    if not (landing.account and landed.is_file()):
        return False
    old, new = landed.read_bytes(), later.read_bytes()
    return len(new) > len(old) and new.startswith(old)


def sorted_out(root: Path, found: list[Landing]) -> tuple[list[Landing], list[str]]:
    """What to land, and a line for each of those already there: left as it is, or an account a later call grew,
    landed anew."""
    todo, said = [], []
    for landing in found:
        if grown(root, landing):
            said.append(f"{landing.target}: {landing.source} begins with it and goes on (a later call's), to land anew")
        elif (root / landing.target).exists():
            said.append(f"{landing.target}: already there, not overwritten")
            continue
        todo.append(landing)
    return todo, said


def land(root: Path, landing: Landing) -> None:
    """Copy its files, contents only: FROM may be read-only (files_at is), what lands must not be."""
    for target, source in landing.files.items():
        (root / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, root / target)


def replay(root: Path, probe: Path) -> str | None:
    """scripts/replay_energy.py on the landed probe, then with --old, written beside it as a .txt; what went wrong, or
    None."""
    outputs = []
    for extra in ((), ("--old",)):
        done = subprocess.run([sys.executable, str(REPLAY), str(probe), *extra], cwd=root, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or ["no message"])[-1]
            return f"replay_energy.py exited {done.returncode}: {said}"
        outputs.append(done.stdout)
    head = (f"# scripts/replay_energy.py on the H200's energy probe (scripts/gpu-plan.sh, step probe-energy), "
            f"written by scripts/land-gpu-plan.py:\n"
            f"#   python scripts/replay_energy.py {probe}        (the change-point estimator)\n"
            f"#   python scripts/replay_energy.py {probe} --old  (first and last readings, before 2026-12-07)\n\n")
    (root / probe.with_suffix(".txt")).write_text(head + "\n".join(outputs))
    return None


def carry_out(root: Path, landing: Landing) -> str | None:
    """Land it, the probe's replay beside it, and say so; what went wrong, or None. What failed is taken back out, so
    that landing again tries it again rather than finding it already there."""
    try:
        land(root, landing)
        problem = replay(root, landing.target) if landing.replayed else None
    except OSError as error:
        problem = f"cannot write {error.filename}: {error.strerror}"
    if problem:
        take_back(root / landing.target)
        return f"{landing.source} not landed, {problem}"
    print(f"copied {landing.source} -> {landing.target}")
    if landing.replayed:
        print(f"wrote {landing.target.with_suffix('.txt')}")
    return None


def take_back(target: Path) -> None:
    """Remove what a failed landing wrote of `target` (a run's folder, or a file)."""
    if target.is_dir():
        shutil.rmtree(target)
    elif target.is_file():  # not where its folder could not be made
        target.unlink()


def said_only(landing: Landing) -> None:
    """What --dry-run says of one landing."""
    print(f"would copy {landing.source} -> {landing.target}")
    if landing.replayed:
        print(f"would write {landing.target.with_suffix('.txt')} (replay_energy.py, then with --old)")


def land_all(root: Path, todo: list[Landing], dry_run: bool) -> int:
    """Land each (or say what would land): 1 where one failed (a line each), else 0."""
    failed = 0
    for landing in todo:
        if dry_run:
            said_only(landing)
        elif problem := carry_out(root, landing):
            print(f"land-gpu-plan: {problem}", file=sys.stderr)
            failed = 1
    return failed


def by_hand(day: str) -> list[str]:
    """What landing leaves to a person (docs/benchmarks.md, "Landing")."""
    return [
        "a dated section of docs/benchmarks.md on what they show: the cross-checks' rows in \"Steady, sampled inside "
        "the load\", the bench's tables (bench_runner.py printed them into plan.log) in \"The runner's own speed\"",
        f"timing.carry_cap's verdict in docs/timing.md, from steady-crosscheck-carried-{day}.json",
        "a chart of a training or serving run: a Page in scripts/results_pages.py, then `make results-pages`",
        "then `pytest tests/test_record.py tests/test_memory_records.py`: every landed run read whole, the memory "
        "rule held to its records",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", type=Path, metavar="FROM",
                        help="the folder the plan's calls brought back (default CHECKOUT/results/gpu-plan)")
    parser.add_argument("--root", type=Path, default=ROOT, metavar="CHECKOUT",
                        help="the checkout to land in (default: this script's)")
    parser.add_argument("--dry-run", action="store_true", help="say what would be copied; copy nothing")
    args = parser.parse_args()
    source = args.source or args.root / "results" / "gpu-plan"
    try:
        if not (args.root / H200).is_dir():
            raise Refused(f"--root {args.root}: not an attnbench checkout (it has no {H200})")
        day = day_of(source)
        planned_on_an_h200(source)
        found, left = landings(source, day)
    except (Refused, StoreUnavailable) as error:
        print(f"land-gpu-plan: {error}", file=sys.stderr)
        return 1
    todo, there = sorted_out(args.root, found)
    for line in [*left, *there]:
        print(line)
    if not todo:
        print(f"land-gpu-plan: nothing to land from {source}", file=sys.stderr)
        return 1
    failed = land_all(args.root, todo, args.dry_run)
    print("\nleft by hand (docs/benchmarks.md, \"Landing\"):\n" + "\n".join(f"- {line}" for line in by_hand(day)))
    return failed


if __name__ == "__main__":
    sys.exit(main())
