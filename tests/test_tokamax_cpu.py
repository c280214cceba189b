"""tokamax_xla_chunked, the tokamax variant a CPU runs, run for real on this checkout's code. tokamax 0.0.17 needs
Python >= 3.12 and jax >= 0.11.1, and the suite's .venv is the project's floor (3.11), so
scripts/install-test-tools.sh builds .venv-tools/tokamax (`.[jax,tokamax]` on the first Python >= 3.12 it finds) and
these tests run `python -m runner` with that venv's python from the checkout. Everywhere else in the suite tokamax is
a stand-in (tests/test_tokamax.py); here the variants meet the package itself."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from helpers import REPO, environment, table_rows
from runner.registry import load_all

TOKAMAX_VENV = REPO / ".venv-tools" / "tokamax"
INPUTS = REPO / "scripts" / "tokamax_venv_inputs.py"
SMALL = ("axes", "logits", "mla", "packed-small", "deterministic-small")
AXES = ("window", "fill", "bias", "softcap", "v_head_dim", "documents", "pass")


def tokamax_python() -> Path:
    """The venv's python, built from today's inputs; a clear failure naming `make test-tools` where it is not.

    Fail, not skip, on a machine with no Python >= 3.12 too: this is the one place the suite runs tokamax, and CI's
    machine has one (pyenv's 3.12), so a skip would let the test vanish unseen the day the venv stopped being built.
    Such a machine gets this one failure, saying what to install; the rest of the suite runs."""
    python, stamp = TOKAMAX_VENV / "bin" / "python", TOKAMAX_VENV / ".installed"
    if python.exists() and stamp.exists():
        today = subprocess.run([python, INPUTS], capture_output=True, text=True)
        if today.returncode == 0 and today.stdout.strip() == stamp.read_text().strip():
            return python
    pytest.fail(f"{TOKAMAX_VENV} is missing or older than its inputs ({INPUTS.name}): run `make test-tools`, which "
                "needs a Python >= 3.12 (python3.12 or python3.13 on PATH, pyenv's, or ATTNBENCH_PYTHON312=/path)")


def in_venv(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python ARGS` with the tokamax venv's python, from the checkout and with it on PYTHONPATH (the workers too), so
    the checkout's runner runs, not the copy pip installed."""
    return subprocess.run([tokamax_python(), *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=environment(PYTHONPATH=str(REPO)))


def declined_by_tokamax(cell: dict) -> bool:
    """The cells of SMALL that tokamax_xla_chunked declines: a deterministic backward (tokamax has no such option),
    and ALiBi with a soft cap (tokamax caps after the bias)."""
    p = cell["params"]
    return cell["variant"] == "tokamax_xla_chunked" and (p["deterministic"] or (p["bias"] != "none" and
                                                                                p["softcap"] is not None))


@pytest.mark.slow
def test_list_in_the_tokamax_venv_runs_xla_chunked_here_and_names_a_gpu_for_the_rest():
    where = in_venv("-c", "import runner, tokamax; print(runner.__file__)")
    assert where.returncode == 0, where.stderr[-3000:]
    assert Path(where.stdout.strip()).parent == REPO / "runner"
    done = in_venv("-m", "runner", "list")
    assert done.returncode == 0, done.stderr[-3000:]
    here = {row["variant"]: row["here"] for row in table_rows(done.stdout.replace("┃", "│"))}
    tokamax = {name for name in load_all() if name.startswith("tokamax_")}
    assert here["tokamax_xla_chunked"] == "yes"
    for name in tokamax - {"tokamax_xla_chunked"}:
        assert here[name].startswith(f"no: {name} needs an NVIDIA GPU with compute capability"), here[name]


@pytest.mark.slow
def test_the_training_specs_small_experiments_run_ok_with_tokamax_xla_chunked(tmp_path):
    """naive and tokamax_xla_chunked through training.yaml's small experiments, every cell against the float32
    reference: ok, or declined by tokamax with its reason, none incorrect; xla_chunked ok through every new axis and
    in each experiment but deterministic-small, all of whose cells ask for a deterministic backward."""
    done = in_venv("-m", "runner", "run", REPO / "specs" / "training.yaml", "--only", *SMALL, "--variants", "naive",
                   "tokamax_xla_chunked", "--budget", "0.05", "--out", tmp_path, "--run-id", "t", "--compile-cache",
                   "off", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    versions = json.loads((tmp_path / "t" / "manifest.json").read_text())["machine"]["versions"]
    assert Version(versions["jax"]) >= Version("0.11.1") and "tokamax" in versions, versions
    cells = [json.loads(line) for line in (tmp_path / "t" / "cells.jsonl").read_text().splitlines()]
    assert {c["experiment"] for c in cells} == set(SMALL)
    wrong = [(c["variant"], c["params"], c["status"], c["reason"]) for c in cells
             if c["status"] != ("skipped" if declined_by_tokamax(c) else "ok")]
    assert wrong == []
    for c in cells:
        if c["status"] == "skipped":
            words = "has no determinism option" if c["params"]["deterministic"] else "caps the logits after adding"
            assert words in c["reason"], c["reason"]
    chunked = [c for c in cells if c["variant"] == "tokamax_xla_chunked" and c["status"] == "ok"]
    assert {c["experiment"] for c in chunked} == set(SMALL) - {"deterministic-small"}
    assert {name: {c["params"][name] for c in chunked} for name in AXES} == {
        "window": {None, 128}, "fill": {1.0, 0.6}, "bias": {"none", "alibi"}, "softcap": {None, 1.0},
        "v_head_dim": {64, 128}, "documents": {1, 2, 8}, "pass": {"fwd", "fwd_bwd"}}
    deterministic = [c for c in cells if c["params"]["deterministic"] and c["status"] == "ok"]
    assert deterministic and all(c["correctness"]["bitwise_repeat"] for c in deterministic)  # naive's, bit for bit
