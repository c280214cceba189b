"""scripts/gpu-plan.sh, the H200 evidence plan as named steps: its list, its refusals and its deadline, on a CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

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
    assert len(steps) == len(set(steps)) == 16
    assert {"env", "probe-energy", "train-fwd", "serve-sweep", "cross-carried", "bench-lab5", "preset-70b"} <= set(steps)


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
