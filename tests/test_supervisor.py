"""runner/supervisor.py: cells run in worker processes; a worker that segfaults, hangs, exits or allocates without
bound costs its cell (crashed, timeout, oom), is replaced, and the run goes on, in one process tree."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from helpers import REPO, alive, attnbench, children, command, environment, spec_data, write_spec
from runner.store import read_run

TEST_VARIANTS = Path(__file__).with_name("variants")
pytestmark = pytest.mark.slow


def test_faulty_kernels_cost_only_their_cells(tmp_path):
    experiment = {"name": "faults", "variants": ["naive", "test_segfault", "test_hang", "test_exit", "test_hog"],
                  "sweep": {"seq_len": [8, 16]}}
    spec = write_spec(tmp_path / "faults.yaml", spec_data(experiment, timing={
        "min_samples": 2, "max_samples": 3, "budget_s": 0.05, "cell_timeout_s": 5}))
    done = attnbench("run", spec, "--out", tmp_path / "out", "--run-id", "faults", "--spool", tmp_path / "spool",
                     timeout=300, ATTNBENCH_VARIANTS=str(TEST_VARIANTS), ATTNBENCH_WORKER_MEMORY_LIMIT=str(4 << 30))
    assert done.returncode == 0, done.stderr[-3000:]
    cells = {(c.variant, c.params.seq_len): c for c in read_run(tmp_path / "out" / "faults").cells}
    assert len(cells) == 10
    assert all(c.status == "ok" for (variant, seq_len), c in cells.items() if seq_len == 8 or variant == "naive")
    segfault, hang, exit_, hog = (cells[(v, 16)] for v in ("test_segfault", "test_hang", "test_exit", "test_hog"))
    assert segfault.status == "crashed" and "killed by SIGSEGV" in segfault.reason, segfault.reason
    assert "Fatal Python error: Segmentation fault" in segfault.reason
    assert hang.status == "timeout" and "no result after 5 s" in hang.reason, hang.reason
    assert exit_.status == "crashed" and "exited with code 3" in exit_.reason, exit_.reason
    assert hog.status == "oom" and "MemoryError" in hog.reason, hog.reason
    assert "[jax worker] Fatal Python error: Segmentation fault" in done.stderr  # passed on, labelled
    # the first fault struck while the worker compiled it ahead with an earlier cell: that cell was measured again
    assert "measuring it again alone, and compiling nothing ahead from here on" in done.stderr


def test_a_worker_that_cannot_load_its_libraries_skips_only_its_cells(tmp_path):
    (tmp_path / "broken_backend.py").write_text('''
from runner.registry import Requires, Skip, variant


def preload():
    raise Skip("BrokenBackend does not load here: RuntimeError: curand shared object not found")


@variant("test_broken_backend", worker="broken", preload=preload)
def broken(p):
    """Needs a library set that does not load."""
    raise AssertionError("never built: its worker could not start")
''')
    experiment = {"name": "x", "variants": ["xla", "test_broken_backend", "naive"]}
    spec = write_spec(tmp_path / "spec.yaml", spec_data(experiment))
    done = attnbench("run", spec, "--out", tmp_path / "out", "--run-id", "libs", "--spool", tmp_path / "spool",
                     timeout=300, ATTNBENCH_VARIANTS=str(tmp_path / "broken_backend.py"))
    assert done.returncode == 0, done.stderr[-3000:]
    run = read_run(tmp_path / "out" / "libs")
    by_variant = {c.variant: c for c in run.cells}
    assert by_variant["xla"].status == by_variant["naive"].status == "ok"
    broken = by_variant["test_broken_backend"]
    assert broken.status == "skipped" and broken.worker == "broken"
    assert broken.reason == "BrokenBackend does not load here: RuntimeError: curand shared object not found"
    assert run.manifest.workers["broken"].error == broken.reason
    assert run.manifest.workers["jax"].versions["jax"]
    listing = attnbench("list", ATTNBENCH_VARIANTS=str(tmp_path / "broken_backend.py"))
    assert listing.returncode == 0
    assert "test_broken_backend" in listing.stdout and "curand shared object" in listing.stdout


def _two_groups(tmp_path: Path) -> tuple[Path, str]:
    """A spec whose JAX cells note when each was built (in tmp_path/marks), the last only after the other group's
    preload, and a variant in a worker of its own whose preload notes when it ran; the spec and the
    ATTNBENCH_VARIANTS value."""
    (tmp_path / "other_backend.py").write_text(f'''
import functools, os, time

from runner.attention import naive_attention
from runner.registry import variant

MARKS = {str(tmp_path / "marks")!r}
HOLD = {str(tmp_path / "hold")!r}


def mark(what):
    with open(MARKS, "a") as f:
        f.write(f"{{what}} {{os.getpid()}} {{time.time()}}\\n")


def preload():
    mark("preload")


def preloaded():
    return os.path.exists(MARKS) and "preload" in open(MARKS).read()


@variant("test_jax_mark")
def jax_mark(p):
    """Plain attention in JAX's worker that notes when it was built; its last cell (T 64) waits for the other group's
    preload first, so JAX's group outlasts the spare's start however busy the machine (a spare that never comes while
    it measures makes the wait run out: preload after the last build), and while the file HOLD is there, so that a
    test finds both workers alive at a known point."""
    deadline = time.monotonic() + 120
    while p.seq_len == 64 and (not preloaded() or os.path.exists(HOLD)) and time.monotonic() < deadline:
        time.sleep(0.02)
    mark("built")
    return functools.partial(naive_attention, causal=p.causal)


@variant("test_other", worker="other", preload=preload)
def other(p):
    """Plain attention in a worker of its own."""
    return functools.partial(naive_attention, causal=p.causal)
''')
    experiment = {"name": "x", "variants": ["test_other", "test_jax_mark"], "sweep": {"seq_len": [8, 16, 32, 64]}}
    return write_spec(tmp_path / "spec.yaml", spec_data(experiment, timing={"budget_s": 0.5})), \
        str(tmp_path / "other_backend.py")


def test_the_next_groups_worker_loads_its_libraries_while_the_first_one_measures(tmp_path):
    spec, variants = _two_groups(tmp_path)
    done = attnbench("run", spec, "--out", tmp_path / "out", "--run-id", "spare", "--spool", tmp_path / "spool",
                     "--compile-ahead", "off", timeout=300, ATTNBENCH_VARIANTS=variants)
    assert done.returncode == 0, done.stderr[-3000:]
    run = read_run(tmp_path / "out" / "spare")
    assert {(c.variant, c.status, c.worker) for c in run.cells} == {("test_other", "ok", "other"),
                                                                     ("test_jax_mark", "ok", "jax")}
    marks = [line.split() for line in (tmp_path / "marks").read_text().splitlines()]
    preloads = [float(t) for what, _, t in marks if what == "preload"]
    built = [float(t) for what, _, t in marks if what == "built"]
    assert len(preloads) == 2 and len(built) == 4  # the spare's head start, then its start proper
    assert preloads[0] < built[-1]  # TE's import (here, a mark) ran while JAX's worker was still measuring
    assert {pid for what, pid, _ in marks if what == "preload"} != {pid for what, pid, _ in marks if what == "built"}


def test_killing_the_runner_takes_the_spare_worker_along(tmp_path):
    spec, variants = _two_groups(tmp_path)
    (tmp_path / "hold").touch()  # JAX's worker held at T 64 with the spare up: both alive until the kill
    run = subprocess.Popen(command("run", spec, "--out", tmp_path / "out", "--spool", tmp_path / "spool"), cwd=REPO,
                           env=environment(ATTNBENCH_VARIANTS=variants), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(workers := children(run.pid)) < 2:  # JAX's worker measuring, the other group's as a spare
            assert time.monotonic() < deadline and run.poll() is None, "no spare worker appeared"
            time.sleep(0.05)
    finally:
        run.kill()
        run.wait()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in workers):
        assert time.monotonic() < deadline, "a worker outlived its runner"
        time.sleep(0.05)

