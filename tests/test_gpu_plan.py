"""scripts/gpu-plan.sh, the H200 evidence plan as named steps: its list, its refusals and its deadline, on a CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import REPO

PLAN = REPO / "scripts" / "gpu-plan.sh"


def plan(*args, deadline: float | None = None, **extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", **extra}  # python3: the venv's
    env.pop("DEADLINE", None)
    if deadline is not None:
        env["DEADLINE"] = str(int(deadline))
    return subprocess.run(["bash", str(PLAN), *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=env)


def test_list_names_every_step_once_with_its_command():
    steps = [line.split(":", 1)[0] for line in plan("list").stdout.splitlines()]
    assert len(steps) == len(set(steps)) == 17
    assert {"env", "probe-energy", "train-fwd", "serve-sweep", "cross-carried", "bench-lab5", "preset-70b"} <= set(steps)


def test_every_experiment_of_the_issues_specs_is_in_a_step():
    """training.yaml and serving.yaml are what issues 37 and 38 wait for: an experiment no step names is never run on
    the H200 (serving's cpu is the CPU's slice of every axis)."""
    import yaml
    named = {}
    for line in plan("list").stdout.splitlines():
        words = line.split()
        if "--only" in words and "specs/" in line:
            spec = next(w for w in words if w.startswith("specs/"))
            rest = words[words.index("--only") + 1:]
            named.setdefault(spec, set()).update(rest[:next((i for i, w in enumerate(rest) if w.startswith("--")),
                                                            len(rest))])
    for spec, own in (("specs/training.yaml", set()), ("specs/serving.yaml", {"cpu"})):
        names = {e["name"] for e in yaml.safe_load((REPO / spec).read_text())["experiments"]}
        assert names - own - named[spec] == set(), spec


def test_an_unknown_step_is_refused_before_any_step_runs(tmp_path):
    result = plan(tmp_path, "env", "train-fwdd", deadline=time.time() + 100)
    assert (result.returncode, result.stderr) == (2, "gpu-plan: no step train-fwdd (scripts/gpu-plan.sh list: the steps)\n")
    assert not (tmp_path / "steps.txt").exists()


def test_a_step_runs_with_its_account_and_one_past_the_deadline_is_not_started(tmp_path):
    ran = plan(tmp_path, "env", deadline=time.time() + 100)
    assert ran.returncode == 0 and '"platform": "cpu"' in (tmp_path / "plan.log").read_text()
    assert (tmp_path / "steps.txt").read_text().startswith("env: exit 0 after ")
    late = plan(tmp_path / "late", "env", "train-fwd", deadline=time.time() + 10)
    assert (tmp_path / "late" / "steps.txt").read_text() == "env: not started (deadline)\ntrain-fwd: not started (deadline)\n"
    assert late.returncode == 0


def test_a_run_step_writes_its_dated_run_into_the_folder_it_is_given(tmp_path):
    """train-fwd on a CPU: every cell declines (no GPU), and the run is there under training-fwd-DAY to resume."""
    done = plan(tmp_path, "train-fwd", deadline=time.time() + 110, DAY="20261206")  # a call after midnight
    account = (tmp_path / "steps.txt").read_text()
    assert account.startswith("train-fwd: exit 0 after ") and f"--out {tmp_path}/results --run-id training-fwd-" in account
    assert done.returncode == 0 and (tmp_path / "results" / "training-fwd-20261206" / "manifest.json").exists()


def test_a_step_that_fails_makes_the_plan_exit_1_after_the_rest_ran(tmp_path):
    """train-fwd's --out is a file, so its run is refused (exit 2); env after it still runs; the plan exits 1."""
    (tmp_path / "results").write_text("not a folder")
    done = plan(tmp_path, "train-fwd", "env", deadline=time.time() + 110, DAY="20261206")
    account = (tmp_path / "steps.txt").read_text().splitlines()
    assert done.returncode == 1 and account[0].startswith("train-fwd: exit 2 ") and account[1].startswith("env: exit 0")


def test_a_later_call_resumes_from_the_folder_carried_back_under_its_day(tmp_path):
    """FROM, the first call's folder (from before midnight): copied in, its day kept, the step that ended passed over
    and the one cut by its deadline run again, into the first call's run."""
    first = tmp_path / "carried"
    (first / "results").mkdir(parents=True)
    (first / "day").write_text("20261206\n")
    (first / "steps.txt").write_text("env: exit 0 after 4s: python3 -m runner env\n"
                                     "train-fwd: exit 124 after 480s: python3 -m runner run specs/training.yaml\n")
    done = plan(tmp_path / "out", "env", "train-fwd", deadline=time.time() + 110, FROM=str(first))
    account = (tmp_path / "out" / "steps.txt").read_text().splitlines()
    assert done.returncode == 0 and account[:2] == (first / "steps.txt").read_text().splitlines()
    assert account[2] == "env: passed over (it ended with exit 0 in an earlier call)"
    assert account[3].startswith("train-fwd: exit 0 ") and account[3].endswith("--run-id training-fwd-20261206")
    assert (tmp_path / "out" / "results" / "training-fwd-20261206" / "manifest.json").exists()
    assert '"platform"' not in (tmp_path / "out" / "plan.log").read_text()  # env did not run again


def carried(folder: Path, *steps: str) -> Path:
    """A folder an earlier call brought back, its steps.txt these lines."""
    (folder / "results").mkdir(parents=True)
    (folder / "day").write_text("20261206\n")
    (folder / "steps.txt").write_text("".join(f"{line}\n" for line in steps))
    return folder


def test_a_step_killed_after_its_grace_runs_again_in_the_next_call(tmp_path):
    """Exit 137: the step outlived its deadline's TERM by 15 s and was killed, as cut as one that stopped at TERM."""
    first = carried(tmp_path / "carried", "env: exit 137 after 540s: python3 -m runner env")
    done = plan(tmp_path / "out", "env", deadline=time.time() + 100, FROM=str(first))
    account = (tmp_path / "out" / "steps.txt").read_text().splitlines()
    assert done.returncode == 0 and account[1].startswith("env: exit 0 after ")


def test_a_step_passed_over_that_had_failed_makes_the_plan_exit_1(tmp_path):
    first = carried(tmp_path / "carried", "env: exit 2 after 1s: python3 -m runner env")
    done = plan(tmp_path / "out", "env", deadline=time.time() + 100, FROM=str(first))
    assert (tmp_path / "out" / "steps.txt").read_text().splitlines()[1] == \
        "env: passed over (it ended with exit 2 in an earlier call)"
    assert done.returncode == 1


def test_a_folder_to_resume_that_is_not_there_is_refused_before_any_step_runs(tmp_path):
    result = plan(tmp_path / "out", "env", deadline=time.time() + 100, FROM=str(tmp_path / "nothing"))
    assert (result.returncode, result.stderr) == (
        2, f"gpu-plan: FROM={tmp_path}/nothing is not a folder (carry the folder the last call brought back)\n")
    assert not (tmp_path / "out").exists()


def test_the_evidence_the_estimator_waits_for_comes_before_every_run():
    """probe-energy, then cross (steady against burst and the direct protocol), then the rest: the note's order."""
    steps = [line.split(":", 1)[0] for line in plan("list").stdout.splitlines()]
    assert steps[:4] == ["env", "probe-energy", "cross", "gputests"]


def test_pack_brings_the_whole_folder_back_as_a_few_files_at_its_exit(tmp_path):
    """A device call brings back at most 8 files from $OUT, two folders down: PACK leaves OUTDIR as parts of one tar.gz
    there at its exit, a failed one too (a step an earlier call ended with exit 2), which `unpack` turns back into the
    folder the steps wrote (runs, steps.txt, day, gpu)."""
    out, packed = tmp_path / "plan", tmp_path / "OUT"
    packed.mkdir()
    (packed / "gpu-plan.tgz.3").write_text("a part an earlier pack left")
    (out / "results" / "run-a").mkdir(parents=True)
    (out / "results" / "run-a" / "cells.jsonl").write_text("{}\n")
    (out / "steps.txt").write_text("env: exit 2 after 3s: python3 -m runner env\n")
    result = plan(out, "env", "cross", deadline=time.time() + 10, PACK=str(packed / "gpu-plan.tgz"))
    assert result.returncode == 1, result.stderr
    assert sorted(p.name for p in packed.iterdir()) == ["gpu-plan.tgz.0"]
    unpacked = tmp_path / "results" / "gpu-plan"
    unpacked.mkdir(parents=True)
    (unpacked / "stale").write_text("the call before's")
    result = plan("unpack", packed, unpacked)
    assert (result.returncode, result.stdout) == (0, f"gpu-plan: {unpacked} holds what the call brought back\n")
    assert (unpacked / "results" / "run-a" / "cells.jsonl").read_text() == "{}\n"
    assert (unpacked / "steps.txt").read_text().splitlines()[1:] == [
        "env: passed over (it ended with exit 2 in an earlier call)", "cross: not started (deadline)"]
    assert (unpacked / "day").exists() and (unpacked / "gpu").read_text() in ("none\n", "NVIDIA H200\n")
    assert not (unpacked / "stale").exists() and not (tmp_path / "results" / "gpu-plan.new").exists()


@pytest.mark.parametrize("parts", ["none", "torn"])
def test_unpack_leaves_the_folder_as_it_was_where_no_pack_reads(tmp_path, parts):
    """A call that brought back no part (killed at its limit, its machine taken away) or a torn one: the folder the
    next call carries keeps the last call's runs, steps and day."""
    packed, into = tmp_path / "OUT", tmp_path / "gpu-plan"
    packed.mkdir()
    into.mkdir()
    (into / "steps.txt").write_text("env: exit 0 after 4s: python3 -m runner env\n")
    if parts == "torn":
        (packed / "gpu-plan.tgz.0").write_bytes(b"\x1f\x8b not all of it")
    result = plan("unpack", packed, into)
    said = {"none": f"no pack in {packed} (no *.tgz.N: {into} left as it was)",
            "torn": f"the pack in {packed} does not unpack ({into} left as it was)"}[parts]
    assert (result.returncode, result.stderr.splitlines()[-1]) == (2, f"gpu-plan: {said}")
    assert [p.name for p in into.iterdir()] == ["steps.txt"] and not (tmp_path / "gpu-plan.new").exists()


def test_the_gpu_tests_name_each_verdict_as_it_ends_and_leave_the_direct_rows_to_cross(tmp_path):
    """On a CPU every GPU test skips; plan.log names each (a suite cut by the deadline keeps those that ended), and
    none measured against the direct protocol, which cross and cross-carried measure."""
    plan(tmp_path, "gputests", deadline=time.time() + 100)
    log = (tmp_path / "plan.log").read_text()
    assert "tests/test_gpu.py::test_cudnn_runs_the_fused_kernel_at_the_lab_default_shape SKIPPED" in log
    assert "tests/test_paged_gpu.py::" in log and "direct_measurement" not in log
