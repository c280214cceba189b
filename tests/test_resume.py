"""Runs to gs:// against a real GCS-API server: killed, signalled, cut off from the store, and sharded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import BUCKET
from runner.cells import expand
from runner.cli import EXIT_NOT_UPLOADED, EXIT_SIGTERM, main
from runner.registry import load_all
from runner.store import read_run
from runner.spec import load_spec
from runner.store import open_store

ROOT = Path(__file__).resolve().parents[1]
OUT = f"gs://{BUCKET}/runs"
RUN_TIMEOUT_S = 180


def planned_keys(spec: Path) -> set[str]:
    return {c.key for c in expand(load_spec(spec, set(load_all())))}


def keys(lines: list[str]) -> list[str]:
    return [json.loads(line)["key"] for line in lines]


def start_run(spec: Path, run_id: str, spool: Path, *extra: str) -> subprocess.Popen:
    """`attnbench run` as its own process, as in a pod; stdout and stderr go to files beside the spool."""
    command = [sys.executable, "-m", "runner", "run", str(spec), "--out", OUT, "--run-id", run_id,
               "--spool", str(spool), "--flush-every", "0.5", *extra]
    spool.mkdir(parents=True, exist_ok=True)
    with open(spool / "stdout.txt", "a") as out, open(spool / "stderr.txt", "a") as err:
        return subprocess.Popen(command, cwd=ROOT, env=os.environ.copy(), stdout=out, stderr=err)


def wait_for(condition, timeout_s: float = RUN_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def spooled(spool: Path, run_id: str) -> Path:
    """The run folder inside a spool (one store: one folder)."""
    return next(spool.glob(f"*/{run_id}"))


def assert_each_cell_once(emulator, run_id: str, spec: Path) -> None:
    stored = keys(emulator.lines(f"runs/{run_id}/cells.jsonl"))
    assert len(stored) == len(set(stored))
    assert set(stored) == planned_keys(spec)


def test_full_run_to_gcs(emulator, tiny_spec, tmp_path, capsys):
    assert main(["run", str(tiny_spec), "--out", OUT, "--run-id", "full", "--spool", str(tmp_path / "spool")]) == 0
    assert_each_cell_once(emulator, "full", tiny_spec)
    run = open_store(OUT).read("full")
    assert run.problems == [] and run.manifest.ended_at is not None and run.manifest.cells_planned == 8
    assert open_store(OUT).runs() == ["full"]
    capsys.readouterr()
    assert main(["show", "full", "--out", OUT]) == 0
    assert "8 cells: 8 ok" in capsys.readouterr().out


def kill_part_way(emulator, spec: Path, run_id: str, spool: Path) -> None:
    """Start a run and SIGKILL it once the store holds at least one more cell than before."""
    before = len(emulator.lines(f"runs/{run_id}/cells.jsonl"))
    run = start_run(spec, run_id, spool)
    wait_for(lambda: len(emulator.lines(f"runs/{run_id}/cells.jsonl")) > before)
    run.kill()
    run.wait()


def test_sigkill_then_reruns_write_each_cell_once(emulator, long_spec, tmp_path):
    kill_part_way(emulator, long_spec, "killed", tmp_path / "pod-1")
    kill_part_way(emulator, long_spec, "killed", tmp_path / "pod-1")  # the container restarted: same spool
    assert len(emulator.lines("runs/killed/cells.jsonl")) < len(planned_keys(long_spec))
    new_pod = start_run(long_spec, "killed", tmp_path / "pod-2")  # another node: an empty spool
    assert new_pod.wait(RUN_TIMEOUT_S) == 0
    assert_each_cell_once(emulator, "killed", long_spec)
    assert "already done" in (tmp_path / "pod-2" / "stdout.txt").read_text()


def test_store_down_then_back_loses_nothing(emulator, long_spec, tmp_path):
    spool = tmp_path / "spool"
    run = start_run(long_spec, "outage", spool, "--store-timeout", "60")
    wait_for(lambda: len(emulator.lines("runs/outage/cells.jsonl")) >= 2)
    emulator.stop()
    cells = spooled(spool, "outage") / "cells.jsonl"
    before = len(cells.read_text().splitlines())
    wait_for(lambda: len(cells.read_text().splitlines()) >= before + 3 or run.poll() is not None)
    emulator.start()
    assert run.wait(RUN_TIMEOUT_S) == 0, (spool / "stderr.txt").read_text()
    assert_each_cell_once(emulator, "outage", long_spec)


def test_store_never_back_exits_3_with_the_spool(emulator, long_spec, tmp_path):
    spool = tmp_path / "spool"
    run = start_run(long_spec, "lost", spool, "--store-timeout", "2")
    wait_for(lambda: len(emulator.lines("runs/lost/cells.jsonl")) >= 2)
    emulator.stop()
    assert run.wait(RUN_TIMEOUT_S) == EXIT_NOT_UPLOADED
    folder = spooled(spool, "lost")
    error = (spool / "stderr.txt").read_text().splitlines()[-1]
    assert error.startswith("error: results not uploaded") and str(folder) in error
    kept = read_run(folder)
    assert kept.problems == [] and kept.manifest.ended_at is not None
    assert {c.key for c in kept.cells} == planned_keys(long_spec)


def test_sigterm_flushes_and_exits_75(emulator, long_spec, tmp_path):
    spool = tmp_path / "spool"
    run = start_run(long_spec, "preempted", spool)
    wait_for(lambda: len(emulator.lines("runs/preempted/cells.jsonl")) >= 2)
    run.send_signal(signal.SIGTERM)
    assert run.wait(RUN_TIMEOUT_S) == EXIT_SIGTERM
    stored = keys(emulator.lines("runs/preempted/cells.jsonl"))
    assert sorted(stored) == sorted(c.key for c in read_run(spooled(spool, "preempted")).cells)  # all flushed
    assert len(stored) < len(planned_keys(long_spec))
    assert json.loads(emulator.text("runs/preempted/manifest.json"))["ended_at"] is None
    assert "interrupted by SIGTERM" in (spool / "stderr.txt").read_text()
    assert start_run(long_spec, "preempted", spool).wait(RUN_TIMEOUT_S) == 0
    assert_each_cell_once(emulator, "preempted", long_spec)


def test_three_shards_make_the_unsharded_run(emulator, tiny_spec, tmp_path, monkeypatch, capsys):
    common = [str(tiny_spec), "--out", OUT, "--spool", str(tmp_path / "spool")]
    assert main(["run", *common, "--run-id", "whole"]) == 0
    assert main(["run", *common, "--run-id", "sharded", "--shard", "0/3"]) == 0
    assert main(["run", *common, "--run-id", "sharded", "--shard", "1/3"]) == 0
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "2")  # the third as an Indexed Job's pod
    monkeypatch.setenv("JOB_COMPLETIONS", "3")
    assert main(["run", *common, "--run-id", "sharded"]) == 0
    shards = [keys(emulator.lines(f"runs/sharded/cells-{i}-of-3.jsonl")) for i in range(3)]
    whole = keys(emulator.lines("runs/whole/cells.jsonl"))
    assert all(shards) and sum(len(s) for s in shards) == len(whole)
    assert set().union(*shards) == set(whole)
    run = open_store(OUT).read("sharded")
    assert run.problems == [] and len(run.cells) == 8
    assert run.manifest.cells_planned == 8 and run.manifest.ended_at is not None
    assert [(p.shard, p.finished) for p in run.parts] == [("0/3", True), ("1/3", True), ("2/3", True)]
    capsys.readouterr()
    assert main(["runs", "--out", OUT]) == 0
    listing = capsys.readouterr().out
    assert listing.count("sharded") == 3 and "finished" in listing
