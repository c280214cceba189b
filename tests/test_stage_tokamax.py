"""scripts/stage-tokamax.sh in a scratch repository, with a stand-in python3 (no download): the wheels it asks for,
the size it refuses, and the install line it writes for the GPU machine."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import REPO

STAGE = REPO / "scripts" / "stage-tokamax.sh"
MIB = 1 << 20

# python3 as the script and install.sh call it: `-m pip download ... -d DIR WHEEL...` writes one file per wheel of
# $WHEEL_MIB MiB and logs its arguments; `-m pip install` succeeds; `-c ...` (the import check) prints what $SAYS
# says and exits $IMPORT_RC.
PYTHON = """#!/usr/bin/env bash
if [[ $1 == -m && $3 == download ]]; then
  echo "$@" > "$LOG"
  while (($#)); do [[ $1 == -d ]] && { dir=$2; shift; }; [[ $1 == *==* ]] && wheels+=("$1"); shift; done
  for w in "${wheels[@]}"; do head -c $((WHEEL_MIB * 1048576)) /dev/zero > "$dir/${w%%==*}.whl"; done
  exit 0
fi
[[ $1 == -m ]] && exit 0
printf '%b\\n' "$SAYS"; exit "$IMPORT_RC"
"""


@pytest.fixture
def repo(tmp_path) -> Path:
    """A scratch git repository holding the script, and a bin folder with the stand-in python3 first on PATH."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(STAGE, root / "scripts")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.write_text(PYTHON)
    python.chmod(0o755)
    return root


def stage(repo: Path, wheel_mib: int, **env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{repo.parent / 'bin'}:{os.environ['PATH']}", "LOG": str(repo.parent / "pip.log"),
           "WHEEL_MIB": str(wheel_mib), **env}
    return subprocess.run(["bash", "scripts/stage-tokamax.sh"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=60)


def test_it_stages_tokamax_and_what_its_import_needs_as_py312_wheels_without_deps(repo):
    done = stage(repo, 1)
    assert done.returncode == 0, done.stderr
    asked = (repo.parent / "pip.log").read_text().split()
    assert {"--no-deps", "--only-binary=:all:", "3.12", "manylinux_2_27_x86_64"} <= set(asked)
    assert "tokamax==0.0.17" in asked and any(a.startswith("xprof==2.2") for a in asked)
    staged = {p.name for p in (repo / ".devtokamax").iterdir()}
    assert {"tokamax.whl", "xprof.whl", "qwix.whl", "jaxtyping.whl", "install.sh"} <= staged
    assert "staged .devtokamax (8 MiB)" in done.stdout  # eight wheels of 1 MiB


def test_it_refuses_a_folder_a_device_call_cannot_carry(repo):
    done = stage(repo, 5)  # eight wheels of 5 MiB: 40 MiB
    assert done.returncode == 1
    assert "stage-tokamax: .devtokamax is 40 MiB, over the 40 MiB a device call can carry" in done.stderr


@pytest.mark.parametrize("import_rc, says, out, err", [
    (0, "a warning\\ntokamax 0.0.17 ready", "tokamax 0.0.17 ready", ""),
    (1, "Traceback (most recent call last):\\nModuleNotFoundError: No module named 'etils'", "",
     ".devtokamax/install.sh: import tokamax failed: ModuleNotFoundError: No module named 'etils'"),
])
def test_its_install_line_says_ready_or_names_the_missing_module(repo, import_rc, says, out, err):
    assert stage(repo, 1).returncode == 0
    env = {**os.environ, "PATH": f"{repo.parent / 'bin'}:{os.environ['PATH']}", "SAYS": says,
           "IMPORT_RC": str(import_rc)}
    done = subprocess.run(["bash", "-c", "source .devtokamax/install.sh; echo rc=$?"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == [line for line in (out, f"rc={import_rc}") if line]
    assert (done.stderr.splitlines()[:1] or [""])[0] == err


def test_the_staged_folder_is_ignored_by_git_so_it_is_neither_committed_nor_carried_twice(repo):
    assert stage(repo, 1).returncode == 0
    untracked = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                               capture_output=True, text=True, check=True).stdout
    assert ".devtokamax" not in untracked
    assert stage(repo, 1).returncode == 0  # a second staging adds no second exclude line
    assert (repo / ".git" / "info" / "exclude").read_text().count("/.devtokamax/") == 1
