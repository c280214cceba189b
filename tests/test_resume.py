"""Runs to gs:// against a real GCS-API server, as a pod meets them: killed, signalled, cut off from the store,
poisoned by a cell that takes the process down, and sharded. Each run is its own process, with real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import BUCKET
from helpers import alive, children, spec_data, write_spec
from runner.cells import expand
from runner.cli import EXIT_INPUT, EXIT_NOT_RESUMABLE, EXIT_NOT_UPLOADED, EXIT_SIGTERM, main
from runner.registry import VARIANTS, VARIANTS_ENV, load_all
from runner.shard import parse_shard, select
from runner.spec import load_spec
from runner.spool import GROUP_S, SPOOL_ENV
from runner.store import open_store, read_run
from test_results import manifest

ROOT = Path(__file__).resolve().parents[1]
TEST_VARIANTS = Path(__file__).with_name("variants")
OUT = f"gs://{BUCKET}/runs"
RUN_TIMEOUT_S = 180
SIGTERM_LIMIT_S = 10  # what docs/results.md promises: a Spot pod has 15 s, the system pods the last of them

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def test_variants(monkeypatch):
    """The fault variants of tests/variants, known to this process and to every run it starts."""
    monkeypatch.setenv(VARIANTS_ENV, str(TEST_VARIANTS))
    load_all()
    yield
    for name in [n for n in VARIANTS if n.startswith("test_")]:
        VARIANTS.pop(name)
    for module in [m for m in sys.modules if m.startswith("attnbench_variants_")]:
        sys.modules.pop(module)


def planned_keys(spec: Path) -> set[str]:
    return {c.key for c in expand(load_spec(spec, set(load_all())))}


def stored(run_id: str) -> list[str]:
    """Keys of the cells the store holds for the run: consolidated and per-cell objects."""
    return [c.key for c in open_store(OUT).read(run_id).cells]


def start_run(spec: Path, run_id: str, spool: Path, *extra: str, **env: str) -> subprocess.Popen:
    """`attnbench run` as its own process, as in a pod; stdout and stderr go to files beside the spool, which --spool
    names unless `env` gives ATTNBENCH_SPOOL (a pod's: the spool; empty: a shell's, the default, and `spool` holds
    the logs alone)."""
    spooled = [] if SPOOL_ENV in env else ["--spool", str(spool)]
    command = [sys.executable, "-m", "runner", "run", str(spec), "--out", OUT, "--run-id", run_id, *spooled,
               "--flush-every", "0.5", *extra]
    spool.mkdir(parents=True, exist_ok=True)
    with open(spool / "stdout.txt", "a") as out, open(spool / "stderr.txt", "a") as err:
        return subprocess.Popen(command, cwd=ROOT, env={**os.environ, **env},
                                stdout=out, stderr=err)


def wait_for(condition, timeout_s: float = RUN_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def spooled(spool: Path, run_id: str) -> Path:
    """The run folder inside a spool (one store: one folder)."""
    return next(spool.glob(f"*/{run_id}"))


def in_flight(run_id: str) -> str | None:
    """The key of the cell the store says a process is measuring."""
    marker = marker_of(run_id)
    return marker["key"] if marker else None


def marker_of(run_id: str) -> dict | None:
    parts = open_store(OUT).read(run_id).parts
    return parts[0].inflight if parts else None


def assert_each_cell_once(emulator, run_id: str, spec: Path) -> None:
    consolidated = [json.loads(line)["key"] for line in emulator.lines(f"runs/{run_id}/cells.jsonl")]
    assert len(consolidated) == len(set(consolidated))
    assert set(consolidated) == planned_keys(spec)


# The faulty variants fail as they are built; compiling ahead would build them while an earlier cell is in flight
# (tests/test_supervisor.py covers that case), and these tests are about the cell in flight.
ONE_AT_A_TIME = ("--compile-ahead", "off")


def gated_spec(folder: Path, seq_lens=(8, 16, 24)) -> Path:
    """naive and test_gated (tests/variants/gated.py) over these seq_lens: the run order is naive then test_gated
    at each seq_len, and test_gated waits at seq_len 16 and beyond until the test opens that gate."""
    experiment = {"name": "gated", "variants": ["naive", "test_gated"], "sweep": {"seq_len": list(seq_lens)}}
    return write_spec(folder / "gated.yaml", spec_data(experiment))


def gated_key(spec: Path, seq_len: int) -> str:
    return next(c.key for c in expand(load_spec(spec, set(load_all()))) if c.variant == "test_gated" and
                c.params.seq_len == seq_len)


def open_gate(gates: Path, seq_len: int) -> None:
    (gates / str(seq_len)).touch()


def start_gated(spec: Path, run_id: str, spool: Path, gates: Path, *extra: str, **env: str) -> subprocess.Popen:
    """A run of a gated spec, its cells one at a time, so the cell in flight is the one held at its gate."""
    gates.mkdir(exist_ok=True)
    return start_run(spec, run_id, spool, *ONE_AT_A_TIME, *extra, ATTNBENCH_TEST_GATES=str(gates), **env)


def spooled_lines(spool: Path, run_id: str, part: str = "cells") -> int:
    cells = list(spool.glob(f"*/{run_id}/{part}.jsonl"))
    return len(cells[0].read_text().splitlines()) if cells else 0


def faulty_spec(folder: Path, variant: str, **timing) -> Path:
    """naive and a faulty variant at T = 8, 16, 24: the variant takes its worker down at T = 16 only."""
    experiment = {"name": "faults", "variants": ["naive", variant], "sweep": {"seq_len": [8, 16, 24]}}
    return write_spec(folder / f"{variant}.yaml", spec_data(experiment, timing={"min_samples": 2, "max_samples": 3,
                                                                                "budget_s": 0.05, **timing}))


def test_a_killed_pod_loses_at_most_the_cell_in_flight_and_the_last_group_even_with_its_spool(emulator, tmp_path):
    spec, gates = gated_spec(tmp_path, (8, 16, 24, 32)), tmp_path / "gates"
    gates.mkdir()
    open_gate(gates, 16)
    open_gate(gates, 24)  # the run is held at its last cell: the kill comes while cells flow, never after the end
    run = start_gated(spec, "killed", tmp_path / "pod-1", gates)
    wait_for(lambda: len(read_run(spooled(tmp_path / "pod-1", "killed")).cells) >= 3 if list(
        (tmp_path / "pod-1").glob("*/killed")) else False)
    assert run.poll() is None
    run.kill()
    run.wait()
    in_spool = [json.loads(line) for line in (spooled(tmp_path / "pod-1", "killed") / "cells.jsonl").read_text()
                .splitlines()]  # in the order they were spooled
    assert len(in_spool) < len(planned_keys(spec))
    in_store = set(stored("killed"))
    lost = [r for r in in_spool if r["key"] not in in_store]
    assert lost == in_spool[len(in_spool) - len(lost):]  # the store lags by the newest cells, it skips none
    # a cell slower than GROUP_S was in the store before the next one started; only quicker ones may be lost with it
    assert all(r["duration_s"] < GROUP_S for r in lost[:-1]), lost
    open_gate(gates, 32)
    new_pod = start_gated(spec, "killed", tmp_path / "pod-2", gates)  # another node: an empty spool
    assert new_pod.wait(RUN_TIMEOUT_S) == 0, (tmp_path / "pod-2" / "stderr.txt").read_text()
    assert_each_cell_once(emulator, "killed", spec)
    assert open_store(OUT).names("killed/cells/") == []  # the dead pod's per-cell objects are folded in and gone
    assert "already done" in (tmp_path / "pod-2" / "stdout.txt").read_text()


def store_down_at_the_gate(emulator, spec: Path, run_id: str, spool: Path, gates: Path, *extra: str
                           ) -> subprocess.Popen:
    """A run held at its gated cell at seq_len 16, every cell before it in the store, then the store stopped."""
    run = start_gated(spec, run_id, spool, gates, *extra)
    held = gated_key(spec, 16)
    wait_for(lambda: in_flight(run_id) == held)  # the marker goes up after the cells spooled before it
    assert len(stored(run_id)) == 3 and run.poll() is None  # naive at 8, test_gated at 8, naive at 16
    emulator.stop()
    return run


def answering_late(emulator, spec: Path, run_id: str, spool: Path, gates: Path, expected: int, part: str = "cells",
                   **env: str) -> None:
    """A run started with the store out of reach, held at its gate at seq_len 16 after three cells spooled (into
    `part`); then the store answers, the run goes on through its gates, and exits `expected` (a refusal the late
    check found)."""
    run = start_gated(spec, run_id, spool, gates, "--store-timeout", "60", **env)
    wait_for(lambda: spooled_lines(spool, run_id, part) == 3 or run.poll() is not None)  # held at the gate at 16
    assert run.poll() is None, (spool / "stderr.txt").read_text()
    emulator.start()
    open_gate(gates, 16)
    open_gate(gates, 24)
    assert run.wait(RUN_TIMEOUT_S) == expected, (spool / "stderr.txt").read_text()


def test_store_down_then_back_loses_nothing(emulator, tmp_path):
    spec, spool, gates = gated_spec(tmp_path), tmp_path / "spool", tmp_path / "gates"
    run = store_down_at_the_gate(emulator, spec, "outage", spool, gates, "--store-timeout", "60")
    open_gate(gates, 16)
    open_gate(gates, 24)
    # the cells after the gate are measured while the store is down; the run then waits for it (60 s at most)
    wait_for(lambda: spooled_lines(spool, "outage") == len(planned_keys(spec)) or run.poll() is not None)
    assert run.poll() is None, (spool / "stderr.txt").read_text()
    emulator.start()
    assert run.wait(RUN_TIMEOUT_S) == 0, (spool / "stderr.txt").read_text()
    assert_each_cell_once(emulator, "outage", spec)


def test_store_never_back_exits_3_with_the_spool(emulator, tmp_path):
    spec, spool, gates = gated_spec(tmp_path), tmp_path / "spool", tmp_path / "gates"
    run = store_down_at_the_gate(emulator, spec, "lost", spool, gates, "--store-timeout", "2")
    open_gate(gates, 16)
    open_gate(gates, 24)
    assert run.wait(RUN_TIMEOUT_S) == EXIT_NOT_UPLOADED, (spool / "stderr.txt").read_text()
    folder = spooled(spool, "lost")
    error = (spool / "stderr.txt").read_text().splitlines()[-1]
    assert error.startswith("error: results not uploaded") and str(folder) in error
    assert (spool / "stdout.txt").read_text().splitlines()[-1] == f"results: {folder} (the spool; not in {OUT}/lost)"
    kept = read_run(folder)
    assert kept.problems == [] and kept.manifest.ended_at is not None
    assert {c.key for c in kept.cells} == planned_keys(spec)


def test_a_run_id_of_another_spec_in_a_store_out_of_reach_at_start_is_refused_when_it_answers(emulator, tmp_path):
    """The start-up refusal of a run id that holds a run of another spec (a9ca381) cannot ask a store out of reach:
    the run measures into the spool, and when the store first answers it uploads nothing and ends with exit 2, what it
    measured moved in the spool to a new run id that the line names."""
    other = manifest(run_id="taken", name="other", spec={"name": "other"}, spec_hash="f" * 16)
    open_store(OUT).put("taken/manifest.json", other.model_dump_json().encode())
    emulator.stop()
    spec, spool, gates = gated_spec(tmp_path), tmp_path / "spool", tmp_path / "gates"
    answering_late(emulator, spec, "taken", spool, gates, EXIT_INPUT)
    [aside] = [p for p in spooled(spool, "taken").parent.iterdir() if p.name != "taken"]
    moved = read_run(aside).cells
    error = (spool / "stderr.txt").read_text().splitlines()[-1]
    assert error.startswith(f"error: run id taken: {OUT}/taken holds a run of spec other (spec hash {'f' * 16}) and "
                            f"{spec} (test, spec hash ")
    assert error.endswith(f"found before the first upload: nothing uploaded; the {len(moved)} cells it held were moved "
                          f"to run {aside.name} in the spool {aside}: rerun the same command with --run-id "
                          f"{aside.name} --spool {spool} to finish that run and upload it")
    assert open_store(OUT).names("taken/") == ["taken/manifest.json"] and len(moved) >= 3


def test_a_shard_refused_late_is_finished_and_uploaded_by_the_rerun_its_line_gives(emulator, tmp_path):
    """An Indexed Job's pod (its shard from the environment) whose bucket is out of reach at start-up, refused when it
    answers (the other shard's manifest there is under other kernel settings), moves what it measured to a run of its
    own; the same command rerun by hand with the flags the line names measures the rest of that shard alone and
    uploads it with the moved cells."""
    spec, spool, gates = gated_spec(tmp_path), tmp_path / "pod-2", tmp_path / "gates"
    run_flags, other_flags = "--xla_cpu_enable_fast_math=false", "--xla_cpu_enable_fast_math=true"
    gates.mkdir()
    open_gate(gates, 24)  # shard 1/2's last cell; shard 0/2 is held at 16
    first = start_gated(spec, "sharded", tmp_path / "pod-1", gates, "--shard", "1/2", XLA_FLAGS=run_flags)
    assert first.wait(RUN_TIMEOUT_S) == 0, (tmp_path / "pod-1" / "stderr.txt").read_text()
    emulator.stop()
    answering_late(emulator, spec, "sharded", spool, gates, EXIT_NOT_RESUMABLE, "cells-0-of-2", XLA_FLAGS=other_flags,
                   JOB_COMPLETION_INDEX="0", JOB_COMPLETIONS="2")
    [aside] = [p for p in spooled(spool, "sharded").parent.iterdir() if p.name != "sharded"]
    moved = read_run(aside).cells
    error = (spool / "stderr.txt").read_text().splitlines()[-1]
    flags = error.partition("rerun the same command with ")[2].partition(" to finish ")[0].split()
    assert flags == ["--run-id", aside.name, "--shard", "0/2", "--spool", str(spool)], error
    assert "to finish shard 0/2 of that run (its only one) and upload it" in error
    again = start_gated(spec, "sharded", spool, gates, *flags, XLA_FLAGS=other_flags)  # by hand: no Job variables
    assert again.wait(RUN_TIMEOUT_S) == 0, (spool / "stderr.txt").read_text()
    assert len(moved) >= 3 and f"resuming {aside.name}: {len(moved)} of 4 cells already done" in (spool / "stdout.txt").read_text()
    [part] = [p for p in open_store(OUT).read(aside.name).parts if p.manifest]  # shard 1/2 of it: never measured
    assert part.shard == "0/2" and {c.key for c in part.cells} == shard_keys(spec, "0/2")


def shard_keys(spec: Path, shard: str) -> set[str]:
    return {c.key for c in select(expand(load_spec(spec, set(load_all()))), parse_shard(shard))}


def test_a_resume_refused_when_its_store_answers_late_moves_what_it_measured_to_a_run_of_its_own(emulator, tmp_path):
    """A pod whose bucket is out of reach at start-up measures into its spool; when the bucket answers, the run's
    cells there were timed under other kernel settings: exit 4, nothing uploaded, and the one line names the run id
    the cells measured meanwhile were moved to in the spool. A rerun under that id uploads them as a run of its own,
    measuring only the rest; a rerun under the run's settings from the same spool resumes the run, none mixed in."""
    spec, spool, gates = gated_spec(tmp_path), tmp_path / "pod-2", tmp_path / "gates"
    run_flags, other_flags = "--xla_cpu_enable_fast_math=false", "--xla_cpu_enable_fast_math=true"
    first = start_run(spec, "mixed", tmp_path / "pod-1", "--variants", "naive", XLA_FLAGS=run_flags)
    assert first.wait(RUN_TIMEOUT_S) == 0, (tmp_path / "pod-1" / "stderr.txt").read_text()
    naive = set(stored("mixed"))
    emulator.stop()
    answering_late(emulator, spec, "mixed", spool, gates, EXIT_NOT_RESUMABLE, XLA_FLAGS=other_flags)
    folder = spooled(spool, "mixed")
    [aside] = [p for p in folder.parent.iterdir() if p.name != "mixed"]
    moved = {c.key for c in read_run(aside).cells}
    assert (spool / "stderr.txt").read_text().splitlines()[-1].endswith(
        f"found when {OUT}/mixed answered: nothing uploaded; the {len(moved)} cells it held were moved to run "
        f"{aside.name} in the spool {aside}: rerun the same command with --run-id {aside.name} --spool {spool} to "
        "finish that run and upload it, or under the run's settings to resume mixed")
    assert len(moved) >= 3 and not read_run(folder).cells and set(stored("mixed")) == naive
    again = start_gated(spec, aside.name, spool, gates, XLA_FLAGS=other_flags)
    assert again.wait(RUN_TIMEOUT_S) == 0, (spool / "stderr.txt").read_text()
    assert f"resuming {aside.name}: {len(moved)} of 6 cells already done" in (spool / "stdout.txt").read_text()
    assert_each_cell_once(emulator, aside.name, spec)
    assert open_store(OUT).read(aside.name).manifest.machine.xla_flags == [other_flags]
    resumed = start_gated(spec, "mixed", spool, gates, XLA_FLAGS=run_flags)
    assert resumed.wait(RUN_TIMEOUT_S) == 0, (spool / "stderr.txt").read_text()
    assert_each_cell_once(emulator, "mixed", spec)
    assert open_store(OUT).read("mixed").manifest.machine.xla_flags == [run_flags]


def start_up_s(spec: Path, spool: Path) -> float:
    """Seconds a run takes to start up on this machine now: one refused before the store (a bad run id)."""
    started = time.monotonic()
    assert start_run(spec, "not an id", spool).wait(RUN_TIMEOUT_S) == EXIT_INPUT
    return time.monotonic() - started


def test_an_unreachable_store_is_said_within_10_s_and_does_not_hold_up_measuring(emulator, tmp_path):
    """Within 10 s of start-up, the run's own on this machine (a busy 2-core one took 4 s to start and said it 9.3 s
    after starting: 10 s from the process's start raced the machine)."""
    emulator.stop()
    spec, spool, gates = gated_spec(tmp_path), tmp_path / "spool", tmp_path / "gates"
    start_up = start_up_s(spec, tmp_path / "refused")
    started = time.monotonic()
    run = start_gated(spec, "unreachable", spool, gates)  # the default store timeout: 120 s
    said = lambda: [line for line in (spool / "stderr.txt").read_text().splitlines() if "into the spool" in line]  # noqa: E731
    wait_for(said, timeout_s=30 + start_up)
    assert time.monotonic() - started < start_up + 10, start_up  # the probe waits 5 s at most
    [warning] = said()
    assert warning.startswith(f"warning: {OUT}: unreachable")
    assert f"into the spool {spooled(spool, 'unreachable')};" in warning and "retried for up to 120 s" in warning
    assert "exits 3" in warning
    # held at the gate at seq_len 16, the cells before it measured well inside the store's timeout: the first read
    # of the store waits 5 s at most, and measuring never waits for the store
    wait_for(lambda: spooled_lines(spool, "unreachable") == 3, timeout_s=90)
    assert run.poll() is None
    run.send_signal(signal.SIGTERM)
    assert run.wait(SIGTERM_LIMIT_S + 5) == EXIT_SIGTERM


def sigterm_within_the_limit(run: subprocess.Popen) -> float:
    sent = time.monotonic()
    run.send_signal(signal.SIGTERM)
    code = run.wait(SIGTERM_LIMIT_S + 20)
    took = time.monotonic() - sent
    assert code == EXIT_SIGTERM and took < SIGTERM_LIMIT_S, (code, took)
    return took


def test_sigterm_in_a_long_cell_abandons_it_and_exits_75_within_10_s(emulator, tmp_path):
    spec = faulty_spec(tmp_path, "test_slow")  # the cell at T = 16 compiles for 60 s
    spool = tmp_path / "spool"
    run = start_run(spec, "preempted", spool, *ONE_AT_A_TIME)
    slow = next(c.key for c in expand(load_spec(spec, set(load_all()))) if c.variant == "test_slow" and
                c.params.seq_len == 16)
    wait_for(lambda: in_flight("preempted") == slow)
    sigterm_within_the_limit(run)
    finished = {c.key for c in read_run(spooled(spool, "preempted")).cells}
    assert slow not in finished and set(stored("preempted")) == finished  # every finished cell, no partial one
    assert json.loads(emulator.text("runs/preempted/manifest.json"))["ended_at"] is None
    assert in_flight("preempted") is None  # abandoned on notice is no crash
    assert "interrupted by SIGTERM" in (spool / "stderr.txt").read_text()
    rerun = start_run(spec, "preempted", spool, *ONE_AT_A_TIME, ATTNBENCH_TEST_SLOW_S="0")
    assert rerun.wait(RUN_TIMEOUT_S) == 0, (spool / "stderr.txt").read_text()
    assert_each_cell_once(emulator, "preempted", spec)
    assert all(c.attempts == 1 for c in open_store(OUT).read("preempted").cells)


def test_a_shard_from_the_environment_stopped_by_sigterm_is_resumed_by_the_rerun_its_line_gives(emulator, tmp_path):
    """An Indexed Job's pod takes its shard from JOB_COMPLETION_INDEX/JOB_COMPLETIONS: SIGTERM's line names --shard
    beside --run-id, so the rerun it gives, by hand from a shell without them, resumes that shard alone (without
    --shard it would be another part of the run: the whole of it)."""
    spec, spool, gates = gated_spec(tmp_path), tmp_path / "pod", tmp_path / "gates"
    run = start_gated(spec, "preempted", spool, gates, JOB_COMPLETION_INDEX="0", JOB_COMPLETIONS="2")
    wait_for(lambda: spooled_lines(spool, "preempted", "cells-0-of-2") == 3 or run.poll() is not None)  # held at 16
    assert run.poll() is None, (spool / "stderr.txt").read_text()
    sigterm_within_the_limit(run)
    said = (spool / "stderr.txt").read_text().splitlines()[-1]
    flags = said.partition("; rerun with ")[2].removesuffix(" to resume").split()
    assert said.startswith("interrupted by SIGTERM: 3 of 4 cells done") and flags == [
        "--run-id", "preempted", "--shard", "0/2"], said
    open_gate(gates, 16)
    again = start_gated(spec, "preempted", spool, gates, *flags)  # by hand: no Job variables
    assert again.wait(RUN_TIMEOUT_S) == 0, (spool / "stderr.txt").read_text()
    assert "resuming preempted: 3 of 4 cells already done" in (spool / "stdout.txt").read_text()
    [part] = [p for p in open_store(OUT).read("preempted").parts if p.manifest]
    assert part.shard == "0/2" and {c.key for c in part.cells} == shard_keys(spec, "0/2")


def test_a_pods_sigterm_line_names_its_spool_from_the_environment_and_its_rerun_uploads_what_it_held(emulator,
                                                                                                      tmp_path):
    """A Job's pod takes its spool from ATTNBENCH_SPOOL: stopped by SIGTERM while its store is out of reach, the
    cells it measured are in that spool alone, and its line names --spool beside --run-id, so the rerun it gives, by
    hand from a shell without the variable, resumes from them and uploads them (without --spool it would measure
    them again into the shell's own spool)."""
    spec, spool, gates = gated_spec(tmp_path), tmp_path / "pod", tmp_path / "gates"
    emulator.stop()
    run = start_gated(spec, "preempted", spool, gates, "--store-timeout", "60", ATTNBENCH_SPOOL=str(spool))
    wait_for(lambda: spooled_lines(spool, "preempted") == 3 or run.poll() is not None)  # held at 16
    assert run.poll() is None, (spool / "stderr.txt").read_text()
    sigterm_within_the_limit(run)
    said = (spool / "stderr.txt").read_text().splitlines()[-1]
    flags = said.partition("; rerun with ")[2].removesuffix(" to resume").split()
    assert said.startswith("interrupted by SIGTERM: 3 of 6 cells done, not uploaded") and flags == [
        "--run-id", "preempted", "--spool", str(spool)], said
    emulator.start()
    open_gate(gates, 16)
    open_gate(gates, 24)
    shell = tmp_path / "shell"
    again = start_gated(spec, "preempted", shell, gates, *flags, ATTNBENCH_SPOOL="", XDG_CACHE_HOME=str(shell))
    assert again.wait(RUN_TIMEOUT_S) == 0, (shell / "stderr.txt").read_text()
    assert "resuming preempted: 3 of 6 cells already done" in (shell / "stdout.txt").read_text()
    assert_each_cell_once(emulator, "preempted", spec)


def test_sigterm_at_start_up_exits_75(gate, tiny_spec, tmp_path):
    """SIGTERM while the run starts up, held at its first request to the store: a fixed sleep met it while the
    command line's modules loaded on a busy machine and before start-up ended on a quick one."""
    asked, released = threading.Event(), threading.Event()

    def hold(method, path):
        asked.set()
        released.wait(RUN_TIMEOUT_S)

    gate.refuse = hold
    spool = tmp_path / "spool"
    run = start_run(tiny_spec, "early", spool)
    try:
        assert asked.wait(RUN_TIMEOUT_S) and run.poll() is None, (spool / "stderr.txt").read_text()
        sigterm_within_the_limit(run)
    finally:
        released.set()
    said = (spool / "stderr.txt").read_text()
    assert said.splitlines()[-1] == "interrupted by SIGTERM before measuring began; nothing to upload", said


def test_sigterm_while_the_store_is_down_exits_75_within_10_s(emulator, tmp_path):
    """SIGTERM in a cell measured while the store is down, the uploader retrying the cell before it."""
    spec, spool, gates = gated_spec(tmp_path), tmp_path / "spool", tmp_path / "gates"
    run = store_down_at_the_gate(emulator, spec, "down", spool, gates, "--store-timeout", "60")
    open_gate(gates, 16)  # its cell is spooled and its upload retries; the run is held at the next gate
    wait_for(lambda: (read_run(spooled(spool, "down")).parts[0].inflight or {}).get("key") == gated_key(spec, 24))
    assert run.poll() is None
    sigterm_within_the_limit(run)
    text = (spool / "stderr.txt").read_text()
    assert "interrupted by SIGTERM: 5 of 6 cells done, not uploaded" in text, text


def test_sigterm_in_the_last_upload_while_the_store_is_down_exits_75_within_10_s(emulator, tmp_path):
    """SIGTERM once every cell is measured and an upload has failed, while the run's last upload retries a store
    that is down (each call for 20 s)."""
    spec, spool, gates = gated_spec(tmp_path), tmp_path / "spool", tmp_path / "gates"
    run = store_down_at_the_gate(emulator, spec, "ending", spool, gates, "--store-timeout", "20")
    open_gate(gates, 16)
    open_gate(gates, 24)
    wait_for(lambda: read_run(spooled(spool, "ending")).manifest.ended_at is not None and not children(run.pid)
             and "upload retried" in (spool / "stderr.txt").read_text() or run.poll() is not None)
    assert run.poll() is None, (spool / "stderr.txt").read_text()
    sigterm_within_the_limit(run)
    text = (spool / "stderr.txt").read_text()
    assert "interrupted by SIGTERM: 6 of 6 cells done, not uploaded" in text, text


def test_a_cell_that_kills_the_process_twice_is_recorded_crashed(emulator, tmp_path):
    spec = faulty_spec(tmp_path, "test_hang")
    poison = next(c for c in expand(load_spec(spec, set(load_all()))) if c.variant == "test_hang" and
                  c.params.seq_len == 16)
    for attempt, pod in enumerate(("pod-1", "pod-2"), 1):  # the pod dies under the cell (node lost): SIGKILL
        run = start_run(spec, "poison", tmp_path / pod, *ONE_AT_A_TIME)
        wait_for(lambda: (marker_of("poison") or {}) | {"cell": None, "since": None} == {
            "key": poison.key, "attempts": attempt, "cell": None, "since": None})
        run.kill()
        run.wait()
    third = start_run(spec, "poison", tmp_path / "pod-3", *ONE_AT_A_TIME)
    assert third.wait(RUN_TIMEOUT_S) == 0, (tmp_path / "pod-3" / "stderr.txt").read_text()
    cells = {c.key: c for c in open_store(OUT).read("poison").cells}
    assert set(cells) == planned_keys(spec)
    assert cells[poison.key].status == "crashed" and "died 2 times" in cells[poison.key].reason
    assert all(c.status == "ok" for key, c in cells.items() if key != poison.key)


def test_killing_the_runner_leaves_no_worker(emulator, tmp_path):
    spec = faulty_spec(tmp_path, "test_hang")
    run = start_run(spec, "orphan", tmp_path / "spool", *ONE_AT_A_TIME)
    wait_for(lambda: "test_hang" in (marker_of("orphan") or {}).get("cell", ""))
    workers = children(run.pid)
    assert workers
    run.kill()
    run.wait()
    wait_for(lambda: not any(alive(pid) for pid in workers), timeout_s=10)


def test_a_full_run_to_gcs_and_three_shards_that_make_it(emulator, tiny_spec, tmp_path, monkeypatch, capsys):
    """The spec run whole, then in three shards (one unsharded run serves both checks)."""
    common = [str(tiny_spec), "--out", OUT, "--spool", str(tmp_path / "spool")]
    assert main(["run", *common, "--run-id", "whole"]) == 0
    assert_each_cell_once(emulator, "whole", tiny_spec)
    run = open_store(OUT).read("whole")
    assert run.problems == [] and run.manifest.ended_at is not None and run.manifest.cells_planned == 8
    assert open_store(OUT).runs() == ["whole"]
    assert open_store(OUT).names("whole/cells/") == [] and not emulator.text("runs/whole/inflight.json")
    capsys.readouterr()
    assert main(["show", "whole", "--out", OUT]) == 0
    assert "8 cells: 8 ok" in capsys.readouterr().out
    assert main(["run", *common, "--run-id", "sharded", "--shard", "0/3"]) == 0
    assert main(["run", *common, "--run-id", "sharded", "--shard", "1/3"]) == 0
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "2")  # the third as an Indexed Job's pod
    monkeypatch.setenv("JOB_COMPLETIONS", "3")
    assert main(["run", *common, "--run-id", "sharded"]) == 0
    shards = [[json.loads(line)["key"] for line in emulator.lines(f"runs/sharded/cells-{i}-of-3.jsonl")]
              for i in range(3)]
    whole = [json.loads(line)["key"] for line in emulator.lines("runs/whole/cells.jsonl")]
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


def test_an_object_that_fails_its_checksum_is_a_problem_and_the_run_resumes(emulator, tiny_spec, tmp_path, capsys):
    common = [str(tiny_spec), "--out", OUT, "--run-id", "corrupt"]
    assert main(["run", *common, "--spool", str(tmp_path / "pod-1")]) == 0
    stored = next(emulator.data_dir.rglob("runs/corrupt/cells.jsonl"))
    stored.write_bytes(stored.read_bytes().replace(b'"ok"', b'"OK"', 1))  # the bytes change, not the checksum
    capsys.readouterr()
    assert main(["show", "corrupt", "--out", OUT]) == 0
    assert "could not be read (DataCorruption: Checksum mismatch while downloading" in capsys.readouterr().err
    assert main(["runs", "--out", OUT]) == 0
    assert "could not be read" in capsys.readouterr().err
    assert main(["run", *common, "--spool", str(tmp_path / "pod-2")]) == 0  # a new pod: measures again, rewrites
    run = open_store(OUT).read("corrupt")
    assert run.problems == [] and {c.key for c in run.cells} == planned_keys(tiny_spec)
