"""scripts/gpu-queue.sh, the way a GPU session calls it: the same arguments again and again, each call until its
deadline, the work resumed and packed into $OUT each time (real bash, real `attnbench run` subprocesses)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from helpers import REPO, spec_data, write_spec

QUEUE = REPO / "scripts" / "gpu-queue.sh"


def call(work: Path, out: Path, seconds: int, *specs: Path) -> subprocess.CompletedProcess:
    out.mkdir(exist_ok=True)
    for old in out.iterdir():  # $OUT starts empty on every call
        old.unlink()
    env = {**os.environ, "OUT": str(out), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(REPO)}
    return subprocess.run(["bash", str(QUEUE), str(work), str(seconds), "20261203", *map(str, specs)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)


def packed(out: Path) -> set[str]:
    with tarfile.open(out / "results.tgz") as tar:
        return {Path(name).parts[1] for name in tar.getnames() if name.startswith("results/") and name != "results"}


def test_the_queue_runs_each_spec_once_across_calls_and_packs_what_is_done(tmp_path):
    first = write_spec(tmp_path / "first.yaml", spec_data({"name": "a", "variants": ["xla"]}, name="first"))
    second = write_spec(tmp_path / "second.yaml", spec_data({"name": "b", "variants": ["naive"]}, name="second"))
    work, out = tmp_path / "work", tmp_path / "out"

    late = call(work, out, 10, first, second)  # under 30 s left: nothing is started
    assert late.returncode == 0 and "deadline: first-20261203 not started" in late.stdout
    assert packed(out) == set()

    both = call(work, out, 240, first, second)
    assert both.returncode == 0, both.stdout[-2000:] + both.stderr[-2000:]
    assert packed(out) == {"first-20261203", "second-20261203"}

    for kept in work.iterdir():  # the device copy keeps only what .gitignore ignores: results/
        if kept.name != "results":
            shutil.rmtree(kept) if kept.is_dir() else kept.unlink()
    again = call(work, out, 240, first, second)  # both finished: passed over, and still packed
    assert again.returncode == 0 and "gpu-queue:" not in again.stdout
    assert packed(out) == {"first-20261203", "second-20261203"}
    assert (out / "queue.log").read_text() == ""  # the log went with the rest, and nothing ran since


def test_the_queue_refuses_a_shard_whose_end_it_could_not_see(tmp_path):
    spec = write_spec(tmp_path / "first.yaml", spec_data({"name": "a", "variants": ["xla"]}, name="first"))
    result = call(tmp_path / "work", tmp_path / "out", 240, spec, "--", "--shard", "0/2")
    assert result.returncode == 2 and not (tmp_path / "work").exists()
    assert result.stderr == "gpu-queue: --shard: the queue runs whole runs on one machine, not shards\n"
