"""scripts/land-gpu-plan.py: what the H200's plan brought back (scripts/gpu-plan.sh's OUTDIR) landed in a checkout, on
a CPU: copies of a committed H200 run and of committed evidence of each kind stand in for the H200's, and a real tiny
run on this CPU for a rehearsal's, which is left."""

from __future__ import annotations

import errno
import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import shapes_spec
from helpers import REPO, attnbench, environment, script
from test_record import reads_as_shipped

LAND = REPO / "scripts" / "land-gpu-plan.py"
EVIDENCE = REPO / "docs" / "evidence"
DAY = "20261207"
H200_RUNS = REPO / "examples" / "results" / "h200"
RUN = "hopper-long-20261202-110136"  # a committed H200 run of 24 cells (a small one), landed under its own id
CPU_RUN = f"training-fwd-{DAY}"  # the tiny run on this CPU, as a rehearsal's run
CUT = f"serving-sweep-{DAY}"
TORN = f"training-packed-{DAY}"
BENCH = "lab5-cold-20261207-231500"  # bench_runner.py's run ids: SPEC-cold-STAMP, SPEC-warm-STAMP
BENCH_JSON = "bench-runner-lab5-20261207-231500.json"
PROBE = f"probe-energy-{DAY}.json"
CROSS = (f"steady-crosscheck-{DAY}.json", f"steady-crosscheck-carried-{DAY}.json")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A real run of 8 cells on this CPU (the runner's own `run` on a small spec), once for the module."""
    folder = tmp_path_factory.mktemp("tiny")
    done = attnbench("run", shapes_spec(folder, [8, 16]), "--out", folder / "results", "--run-id", CPU_RUN,
                     ATTNBENCH_SPOOL=str(folder / "spool"), XDG_CACHE_HOME=str(folder / "cache"))
    assert done.returncode == 0, done.stderr[-2000:]
    return folder / "results" / CPU_RUN


def writable(folder: Path, on: bool) -> None:
    """Make `folder` and all in it writable again, or read-only (as a call's files_at is)."""
    for path in [folder, *folder.rglob("*")]:
        mode = (0o755 if path.is_dir() else 0o644) if on else (0o555 if path.is_dir() else 0o444)
        path.chmod(mode)


@pytest.fixture
def checkout(tmp_path) -> Path:
    """An empty checkout to land in: the two folders landing writes below."""
    root = tmp_path / "checkout"
    for folder in ("examples/results/h200", "docs/evidence"):
        (root / folder).mkdir(parents=True)
    return root


def brought_back(source: Path, tiny_run: Path) -> Path:
    """A folder as the plan's calls bring it back: its day, a finished H200 run (with a write a kill left in flight),
    one a deadline cut one cell short and one with a line that does not read, a finished run on this CPU, the energy
    probe, both cross-checks, a bench's JSON and its run, plan.log and steps.txt; read-only, as files_at is."""
    shutil.copytree(H200_RUNS / RUN, source / "results" / RUN)
    (source / "results" / RUN / ".manifest.json.tmp").write_text("{")
    torn = shutil.copytree(H200_RUNS / RUN, source / "results" / TORN)
    with open(torn / "cells.jsonl", "a") as cells:
        cells.write('{"schema_version": \n')
    cut = shutil.copytree(H200_RUNS / RUN, source / "results" / CUT)
    (cut / "cells.jsonl").write_text("".join((cut / "cells.jsonl").read_text().splitlines(keepends=True)[:-1]))
    shutil.copytree(tiny_run, source / "results" / CPU_RUN)
    shutil.copytree(H200_RUNS / RUN, source / "bench" / BENCH)
    shutil.copy(EVIDENCE / "bench-runner-lab5-20261203-023042.json", source / "bench" / BENCH_JSON)
    shutil.copy(EVIDENCE / "probe-stream-20261203.json", source / PROBE)
    shutil.copy(EVIDENCE / "steady-crosscheck-20261203.json", source / CROSS[0])
    shutil.copy(EVIDENCE / "steady-crosscheck-65e3e74-20261203.json", source / CROSS[1])
    (source / "day").write_text(f"{DAY}\n")
    (source / "gpu").write_text("NVIDIA H200\n")
    (source / "plan.log").write_text("done 8192\n")
    (source / "steps.txt").write_text("env: exit 0 after 4s: python3 -m runner env\n")
    writable(source, False)
    return source


@pytest.fixture
def source(tmp_path, tiny_run):
    folder = brought_back(tmp_path / "gpu-plan", tiny_run)
    yield folder
    writable(folder, True)


def land(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(LAND), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=environment())


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def replayed(probe: str) -> str:
    """The committed replay of the 2026-12-03 probe (both estimators), as it reads of the probe landed as `probe`."""
    committed = (EVIDENCE / "energy-step-replay-20261207.txt").read_text()
    body = committed[committed.index("\n\ndocs/evidence/") + 2:]
    return body.replace("docs/evidence/probe-stream-20261203.json", probe)


def test_every_kind_lands_where_the_landing_list_puts_it(checkout, source):
    """FROM at the checkout's results/gpu-plan, its default: a finished H200 run passes the check every shipped run is
    held to; the cut (one cell short: "every planned cell"), the torn run and the CPU's stay; the probe lands with its
    replay beside it; all writable."""
    default = checkout / "results" / "gpu-plan"
    default.parent.mkdir()
    writable(source, True)
    shutil.copytree(source, default)
    writable(default, False)
    done = land("--root", checkout, cwd=source.parent)
    writable(default, True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    landed = files(checkout / "examples" / "results" / "h200")
    assert landed == {f"{run}/{name}": (H200_RUNS / RUN / name).read_bytes() for run in (BENCH, RUN)
                      for name in ("cells.jsonl", "manifest.json")}
    for run in (RUN, BENCH):
        reads_as_shipped(checkout / "examples" / "results", f"h200/{run}")
    left = [line for line in done.stdout.splitlines() if ": left, " in line]
    assert left == [f"{default}/results/{CUT}: left, it lacks 1 of its 24 planned cells (a later call resumes it)",
                    f"{default}/results/{CPU_RUN}: left, it was measured on cpu, not an NVIDIA H200 "
                    "(examples/results/h200 holds the H200's runs)",
                    f"{default}/results/{TORN}: left, it does not read whole: {default}/results/{TORN}/cells.jsonl:25: "
                    "not valid JSON (Expecting value)"]
    brought = {BENCH_JSON: default / "bench" / BENCH_JSON, **{name: default / name for name in (*CROSS, PROBE)},
               f"gpu-plan-{DAY}/plan.log": default / "plan.log", f"gpu-plan-{DAY}/steps.txt": default / "steps.txt"}
    evidence = files(checkout / "docs" / "evidence")
    text = evidence.pop(PROBE.replace(".json", ".txt")).decode()
    assert evidence == {name: path.read_bytes() for name, path in brought.items()}
    assert text.startswith("# scripts/replay_energy.py") and text.endswith("\n\n" + replayed(f"docs/evidence/{PROBE}"))
    assert all(p.stat().st_mode & stat.S_IWUSR for p in checkout.rglob("*"))
    assert f"steady-crosscheck-carried-{DAY}.json" in done.stdout.split("left by hand")[1]


def test_a_dry_run_says_what_it_would_copy_and_copies_nothing(checkout, source):
    done = land(source, "--root", checkout, "--dry-run", cwd=source.parent)
    assert done.returncode == 0 and files(checkout) == {}
    said = [line for line in done.stdout.splitlines() if line.startswith("would ")]
    assert said[:3] == [f"would copy {source}/results/{RUN} -> examples/results/h200/{RUN}",
                        f"would copy {source}/bench/{BENCH} -> examples/results/h200/{BENCH}",
                        f"would copy {source}/{PROBE} -> docs/evidence/{PROBE}"]
    assert len(said) == 9 and f"would write docs/evidence/{PROBE.replace('.json', '.txt')}" in said[3]


def test_nothing_already_there_is_overwritten_and_each_says_so(checkout, source):
    assert land(source, "--root", checkout, cwd=source.parent).returncode == 0
    mine = checkout / "examples" / "results" / "h200" / RUN / "manifest.json"
    mine.write_text("the lead's")
    (checkout / "docs" / "evidence" / f"gpu-plan-{DAY}" / "plan.log").unlink()
    again = land(source, "--root", checkout, cwd=source.parent)
    assert again.returncode == 0 and mine.read_text() == "the lead's"
    assert f"examples/results/h200/{RUN}: already there, not overwritten" in again.stdout.splitlines()
    assert [line for line in again.stdout.splitlines() if line.startswith("copied ")] == [
        f"copied {source}/plan.log -> docs/evidence/gpu-plan-{DAY}/plan.log"]
    third = land(source, "--root", checkout, cwd=source.parent)
    assert (third.returncode, third.stderr) == (1, f"land-gpu-plan: nothing to land from {source}\n")
    assert third.stdout.count("already there, not overwritten") == 8


def test_a_later_calls_account_lands_over_the_one_landed_and_nothing_else_does(checkout, source):
    """steps.txt grown by a later call (it begins with the landed one) lands anew; a plan.log that does not begin with
    the landed one, and a cross-check grown alike, are left."""
    assert land(source, "--root", checkout, cwd=source.parent).returncode == 0
    writable(source, True)
    for grown in (source / "steps.txt", source / CROSS[0]):
        grown.write_bytes(grown.read_bytes() + b"cross: exit 0 after 300s: python3 scripts/steady_crosscheck.py\n")
    (source / "plan.log").write_text("another call's\ndone 8192\n")
    again = land(source, "--root", checkout, cwd=source.parent)
    account = checkout / "docs" / "evidence" / f"gpu-plan-{DAY}"
    assert again.returncode == 0 and (account / "steps.txt").read_bytes() == (source / "steps.txt").read_bytes()
    assert (account / "plan.log").read_text() == "done 8192\n"
    said = [line for line in again.stdout.splitlines() if ": left, " not in line]
    assert said[:8] == [f"{target}: already there, not overwritten" for target in (
        f"examples/results/h200/{RUN}", f"examples/results/h200/{BENCH}", f"docs/evidence/{PROBE}",
        *(f"docs/evidence/{name}" for name in (*CROSS, BENCH_JSON)), f"docs/evidence/gpu-plan-{DAY}/plan.log")] + [
        f"docs/evidence/gpu-plan-{DAY}/steps.txt: {source}/steps.txt begins with it and goes on (a later call's), "
        "to land anew"]
    assert said[8] == f"copied {source}/steps.txt -> docs/evidence/gpu-plan-{DAY}/steps.txt"


NOT_A_FOLDER = ("{source} is not a folder (copy the folder the call brought back there: docs/benchmarks.md, "
                "\"The calls\")")
BAD = {
    "missing": NOT_A_FOLDER,
    "a file": NOT_A_FOLDER,
    "no day": "{source} has no file day (scripts/gpu-plan.sh writes one first): not a folder the plan wrote",
    "bad day": "{source}/day says '../x', not a day (YYYYMMDD)",
    "a day not of text": "{source}/day says '\ufffd\ufffd2026', not a day (YYYYMMDD)",
    "no gpu": "{source} has no file gpu (scripts/gpu-plan.sh writes one first): not a folder the plan wrote",
    "planned on a CPU": "{source} was planned on 'none', not an NVIDIA H200: nothing of it lands",
    "a cut run alone": "nothing to land from {source}",
    "not a checkout": "--root {root}: not an attnbench checkout (it has no examples/results/h200)",
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_and_lands_nothing(tmp_path, checkout, tiny_run, case):
    source = tmp_path / "gpu-plan"
    if case == "a file":
        source.write_text("")
    elif case != "missing":
        source.mkdir()
        (source / "day").write_text("../x" if case == "bad day" else DAY)
        (source / "gpu").write_text("none\n" if case == "planned on a CPU" else "NVIDIA H200\n")
        shutil.copytree(tiny_run, source / "results" / CUT)
        (source / "results" / CUT / "cells.jsonl").write_text("")
    if case == "no day":
        (source / "day").unlink()
    if case == "no gpu":
        (source / "gpu").unlink()
    if case == "a day not of text":
        (source / "day").write_bytes(b"\xff\xfe2026")
    root = tmp_path / "elsewhere" if case == "not a checkout" else checkout
    done = land(source, "--root", root, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, f"land-gpu-plan: {BAD[case].format(source=source, root=root)}\n")
    assert files(checkout) == {}


def test_a_probe_the_replay_cannot_read_is_not_landed_and_the_rest_is(tmp_path, checkout, source):
    writable(source, True)
    (source / PROBE).write_text(json.dumps({"probes": []}))
    done = land(source, "--root", checkout, cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"land-gpu-plan: {source}/{PROBE} not landed, replay_energy.py exited 2: replay_energy.py: "
        f"docs/evidence/{PROBE} has no 'nvml' and no 'probes' rows: not a scripts/probe_stream.py output"]
    evidence = files(checkout / "docs" / "evidence")
    assert PROBE not in evidence and CROSS[1] in evidence and f"gpu-plan-{DAY}/steps.txt" in evidence


def test_the_checkout_is_the_scripts_own_unless_root_names_another(tmp_path):
    """Run from elsewhere without --root: a run this repository ships is already there (a dry run: nothing is
    written)."""
    source = tmp_path / "gpu-plan"
    shutil.copytree(H200_RUNS / RUN, source / "results" / RUN)
    (source / "day").write_text(DAY)
    (source / "gpu").write_text("NVIDIA H200")
    done = land(source, "--dry-run", cwd=tmp_path)
    assert f"examples/results/h200/{RUN}: already there, not overwritten" in done.stdout.splitlines()


def test_a_copy_that_fails_is_one_line_and_takes_back_what_it_wrote(tmp_path, checkout, source):
    """A file where the plan's folder of docs/evidence goes: its two files are refused, each a line; the rest lands."""
    (checkout / "docs" / "evidence" / f"gpu-plan-{DAY}").write_text("")
    done = land(source, "--root", checkout, cwd=tmp_path)
    folder = checkout / "docs" / "evidence" / f"gpu-plan-{DAY}"
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"land-gpu-plan: {source}/{name} not landed, cannot write {folder}: File exists"
        for name in ("plan.log", "steps.txt")]
    assert CROSS[1] in files(checkout / "docs" / "evidence") and "Traceback" not in done.stdout


def in_this_process(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """The script's main() here, so that a test can break what it calls: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", [str(LAND), *map(str, args)])
    code = script("scripts/land-gpu-plan.py").main()
    out, err = capsys.readouterr()
    return code, out, err


def test_a_run_cut_off_while_it_is_copied_is_taken_back_out(monkeypatch, capsys, checkout, source):
    """The disk fills at a run's manifest: its folder is not left half landed (landing again would pass it over)."""
    copy = shutil.copyfile

    def full(src, dst):
        if Path(dst).name == "manifest.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return copy(src, dst)

    monkeypatch.setattr(shutil, "copyfile", full)
    code, out, err = in_this_process(monkeypatch, capsys, source, "--root", checkout)
    h200 = checkout / "examples" / "results" / "h200"
    assert code == 1 and err.splitlines()[0] == (f"land-gpu-plan: {source}/results/{RUN} not landed, cannot write "
                                                 f"{h200}/{RUN}/manifest.json: No space left on device")
    assert list(h200.iterdir()) == [] and len(err.splitlines()) == 2  # the bench's run too


def test_a_store_that_cannot_be_read_is_one_line(monkeypatch, capsys, checkout, source):
    from runner.store import LocalStore, StoreUnavailable

    def denied(store, name):
        raise StoreUnavailable(f"{store.root / name}: Permission denied")

    monkeypatch.setattr(LocalStore, "get", denied)
    code, out, err = in_this_process(monkeypatch, capsys, source, "--root", checkout)
    assert (code, out) == (1, "") and err == f"land-gpu-plan: {source}/results/{RUN}/cells.jsonl: Permission denied\n"
    assert files(checkout) == {}
