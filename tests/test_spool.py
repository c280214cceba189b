"""The spool and its uploader, on local stores: torn lines, folding in the store's copy, an outage and back, grouped
commits, and real processes killed or signalled while they spool or consolidate."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import BUCKET
from helpers import REPO, attnbench, command, environment, in_process, spec_data, write_spec
from runner.cells import Cell
from runner.cli import EXIT_SIGTERM
from runner.spool import GROUP_S, OtherRun, Spool, Uploader, spool_store
from runner.store import LocalStore, StoreError, StoreUnavailable, read_run
from test_results import manifest, record, some_records

RUN = "run-1"


def test_spool_folder_is_a_run_folder_named_after_its_store(tmp_path):
    local = spool_store(tmp_path / "spool", LocalStore(tmp_path / "results"))
    spool = Spool(local, RUN, "1/3")
    spool.write_manifest(manifest(shard="1/3"))
    spool.add(record())
    assert "_results-" in spool.dir.parent.name and spool.dir.name == RUN
    assert sorted(p.name for p in spool.dir.iterdir()) == ["cells-1-of-3.jsonl", "manifest-1-of-3.json"]
    run = read_run(spool.dir)
    assert run.problems == [] and run.cells == [record()] and [p.shard for p in run.parts if p.cells] == ["1/3"]


def test_stores_whose_uris_read_alike_get_their_own_spools(tmp_path):
    nested, flat = LocalStore(tmp_path / "x" / "y"), LocalStore(tmp_path / "x_y")
    old_name = lambda uri: re.sub(r"[^A-Za-z0-9._-]+", "_", uri).strip("_")  # noqa: E731
    assert old_name(nested.uri) == old_name(flat.uri)  # the old spool naming made them one folder
    assert spool_store(tmp_path / "spool", nested).root != spool_store(tmp_path / "spool", flat).root


def test_a_key_is_spooled_once(tmp_path):
    spool = Spool(LocalStore(tmp_path), RUN, None)
    spool.add(record())
    spool.add(record(duration_s=9.0))
    assert (spool.dir / "cells.jsonl").read_text() == record().model_dump_json(by_alias=True) + "\n"


def test_a_line_torn_by_a_kill_is_dropped_and_appends_go_on(tmp_path):
    first, second, third = some_records()[:3]
    spool = Spool(LocalStore(tmp_path), RUN, None)
    spool.write_manifest(manifest())
    spool.add(first)
    with open(spool.dir / "cells.jsonl", "a") as f:
        f.write(second.model_dump_json()[:40])  # killed mid-write
    reopened = Spool(LocalStore(tmp_path), RUN, None)
    reopened.add(third)
    assert reopened.keys() == {first.key, third.key}
    assert read_run(spool.dir).cells == [first, third] and read_run(spool.dir).problems == []


def test_a_reopened_spool_keeps_each_line_as_it_was_written_and_its_phase_totals(tmp_path):
    """A resumed process neither rewrites the lines an older runner spooled (schema 1 here) nor re-counts its own:
    the lines go to the store as they are, readers upgrade them; the phase totals are the lines' sums."""
    old = (Path(__file__).with_name("fixtures") / "schema1" / "schema1-20261202-000000" / "cells.jsonl").read_text()
    (tmp_path / RUN).mkdir()
    (tmp_path / RUN / "cells.jsonl").write_text(old)
    reopened = Spool(LocalStore(tmp_path), RUN, None)
    assert reopened.objects()[reopened.cells_name].decode() == old
    cells = reopened.records()
    assert reopened.totals.cells_s == pytest.approx(sum(c.duration_s for c in cells)) and len(cells) == 9


def open_files_under(folder: Path) -> list[Path]:
    """The files this process holds open under `folder`, as the kernel lists them in /proc/self/fd."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own fd, closed by now
            continue
        if target.is_relative_to(folder.resolve()):
            held.append(target)
    return held


def test_a_closed_spool_holds_no_file_open_and_still_reads(tmp_path):
    spool = Spool(LocalStore(tmp_path), RUN, None)
    spool.add(record())
    spool.set_inflight({"key": record().key, "attempts": 1})
    assert len(open_files_under(tmp_path)) == 2  # the cells and the in-flight marker
    spool.close()
    assert open_files_under(tmp_path) == []
    assert spool.keys() == {record().key} and read_run(spool.dir).cells == [record()]
    spool.set_inflight(None)  # after the end: the marker stays as last written
    assert json.loads((spool.dir / "inflight.json").read_text())["key"] == record().key
    with pytest.raises(OSError):
        spool.add(record(variant="naive"))
    spool.close()  # twice is once


def test_a_grouped_fsync_that_fires_after_close_touches_no_descriptor(tmp_path, monkeypatch):
    """A timer's sync can start after close() cancelled it (Timer.cancel does not stop a callback under way): it
    must not fsync the closed descriptor, nor the file that reuses its number."""
    from runner.spool import GroupSync

    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    fd = os.open(tmp_path / "cells.jsonl", os.O_WRONLY | os.O_CREAT)
    group = GroupSync(fd, every_s=60.0)
    group.wrote()  # at once
    group.wrote()  # scheduled
    late = group._timer
    assert synced == [fd] and late is not None
    group.close()
    assert synced == [fd, fd] and late.finished.is_set()  # close() fsynced and cancelled the timer
    other = os.open(tmp_path / "other", os.O_WRONLY | os.O_CREAT)  # the lowest free number: likely fd again
    try:
        late.function()  # the callback, running late
        group.wrote()
        group.close()
        assert synced == [fd, fd]
    finally:
        os.close(other)


def test_a_run_in_process_closes_its_spool(tmp_path, capsys):
    from runner.cli import main

    spec = write_spec(tmp_path / "tiny.yaml", spec_data({"name": "tiny", "variants": ["naive"],
                                                        "sweep": {"seq_len": [8, 16]}}))
    assert main(["run", str(spec), "--out", str(tmp_path / "results"), "--run-id", "closed",
                 "--spool", str(tmp_path / "spool")]) == 0
    assert "2 cells: 2 ok" in capsys.readouterr().out
    assert open_files_under(tmp_path / "spool") == []


def test_the_first_upload_folds_in_the_stores_copy(tmp_path):
    records = some_records()
    store = LocalStore(tmp_path / "store")
    earlier_pod = Spool(LocalStore(tmp_path / "pod-1"), RUN, None)
    for r in records[:3]:
        earlier_pod.add(r)
    Uploader(earlier_pod, store, 1).consolidate()
    spool = Spool(LocalStore(tmp_path / "pod-2"), RUN, None)
    for r in records[2:]:  # records[2] measured again before the store could be asked
        spool.add(r)
    Uploader(spool, store, 1).consolidate()
    stored = (store.root / RUN / "cells.jsonl").read_text().splitlines()
    assert len(stored) == len(records)  # each once
    assert sorted(c.key for c in read_run(store.root / RUN).cells) == sorted(r.key for r in records)


def test_uploads_resume_when_the_store_comes_back(tmp_path):
    blocked = tmp_path / "store"
    blocked.write_text("a file where the store's folder should be")  # every write fails
    spool = Spool(LocalStore(tmp_path / "spool"), RUN, None)
    uploader = Uploader(spool, LocalStore(blocked), every_s=0.05)
    uploader.start()
    spool.add(record())
    uploader.notify()
    assert uploader.close() is False and "store" in uploader.error
    blocked.unlink()
    uploader = Uploader(spool, LocalStore(blocked), every_s=0.05)
    uploader.start()
    assert uploader.close() is True and uploader.error is None
    assert read_run(blocked / RUN).cells == [record()]


class OutOfReach(LocalStore):
    """A store that answers nothing: every call is StoreUnavailable."""

    def read(self, run_id: str):
        raise StoreUnavailable(f"{self.uri}: unreachable")

    def put(self, name: str, data: bytes) -> None:
        raise StoreUnavailable(f"{self.uri}: unreachable")


@pytest.mark.parametrize("said_at_start", [False, True])
def test_a_store_out_of_reach_is_said_once(tmp_path, capsys, said_at_start):
    """The run's first read of the store and every failed upload after it say the outage once between them, and not
    at all where the run's start-up probe said it (cli._say_unreachable): each said it again, three warnings."""
    from runner.run import first_pull

    spool = Spool(LocalStore(tmp_path / "spool"), RUN, None)
    store = OutOfReach(tmp_path / "store")
    uploader = Uploader(spool, store, every_s=0.05, unreachable="said at start-up" if said_at_start else None)
    assert first_pull(uploader, store) == set()
    uploader.start()
    spool.add(record())
    uploader.notify()
    assert uploader.close() is False
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == (0 if said_at_start else 1), warnings


def files_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refusing_to_join(spool: Spool, store, every_s: float = 0.05) -> Uploader:
    """An uploader whose run resumes only parts of its own spec hash, as run.execute's does (run.same_run)."""
    return Uploader(spool, store, every_s, resumes=lambda stored: stored.spec_hash == manifest().spec_hash)


def test_a_store_that_first_answers_holding_a_run_of_another_spec_gets_nothing(tmp_path, capsys):
    """The store's folder was not there when the run started (a file in its place: every write failed) and appears
    holding a run of another spec under the run id: the first upload that reaches it puts nothing, for good, and the
    spool keeps every cell (a9ca381 checked at start-up only, so the two specs' records ended under one run id)."""
    blocked = tmp_path / "store"
    blocked.write_text("a file where the store's folder should be")
    spool = Spool(LocalStore(tmp_path / "spool"), RUN, None)
    spool.write_manifest(manifest(run_id=RUN))
    spool.add(record())
    uploader = refusing_to_join(spool, LocalStore(blocked))
    with pytest.raises(StoreUnavailable):
        uploader.flush()  # out of reach: read as holding nothing, written to never
    blocked.unlink()
    other = manifest(run_id=RUN, name="other", spec_hash="f" * 16)
    LocalStore(blocked).put(f"{RUN}/manifest.json", other.model_dump_json().encode())
    held = files_under(blocked)
    said = f"{blocked / RUN} holds a run of spec other (spec hash {other.spec_hash})"
    with pytest.raises(OtherRun, match=re.escape(said)):
        uploader.flush()
    uploader.start()
    started = time.monotonic()
    uploader.commit(some_records()[1], wait_s=30, stop=threading.Event())  # nothing will be stored: no wait for it
    assert time.monotonic() - started < 10 and uploader.close() is False and uploader.refused.manifest.name == "other"
    assert files_under(blocked) == held and len(spool.records()) == 2
    shown = in_process(capsys, "show", spool.dir)  # what the refused run's line points to reads as a run
    assert shown.code == 0 and "2 cells" in shown.out, shown


def test_a_sibling_shards_manifest_of_the_same_spec_lets_the_shards_upload_land(tmp_path):
    """Shard 0/2 of this very spec (the same hash) is in the store: shard 1/2, as run.execute runs it, joins the run
    and its upload lands. Its refusal is of another spec's run only, never of another shard's part."""
    from rich.console import Console

    from runner import run
    from runner.cells import expand
    from runner.machine import versions
    from runner.registry import load_all
    from runner.spec import parse_spec

    spec = parse_spec(spec_data({"name": "a", "variants": ["cudnn"]}), set(load_all()))  # declines float32: none run
    store = LocalStore(tmp_path / "out")
    machine = manifest().machine.model_copy(update={"versions": versions()})  # this CPU's: a machine it resumes on
    sibling = manifest(run_id=RUN, shard="0/2", spec=spec.model_dump(mode="json"), spec_hash=spec.digest(),
                       machine=machine)
    store.put(f"{RUN}/manifest-0-of-2.json", sibling.model_dump_json().encode())
    cells = expand(spec)
    with Spool(spool_store(tmp_path / "spool", store), RUN, "1/2") as spool:
        outcome = run.execute(spec, cells, store, spool, Console(file=open(os.devnull, "w")), [], run.Options())
    assert outcome.refused is None and outcome.uploaded and outcome.done == len(cells)
    stored = read_run(store.root / RUN)
    assert [p.shard for p in stored.parts] == ["0/2", "1/2"] and len(stored.cells) == len(cells)


def test_a_bucket_out_of_reach_at_start_is_checked_for_a_run_of_another_spec_when_it_answers(tmp_path, emulator):
    """A shard whose bucket did not answer: the first read that does finds the other shard of another spec's run."""
    from runner.store import open_store

    store = open_store(f"gs://{BUCKET}/runs", timeout_s=2)
    store.put(f"{RUN}/manifest-0-of-2.json", manifest(name="other", shard="0/2", spec_hash="f" * 16).model_dump_json()
              .encode())
    spool = Spool(LocalStore(tmp_path / "spool"), RUN, "1/2")
    spool.add(record())
    uploader = refusing_to_join(spool, store)
    emulator.stop()
    with pytest.raises(StoreUnavailable):
        uploader.flush()
    emulator.start()
    with pytest.raises(OtherRun):
        uploader.flush()
    assert uploader.close() is False and store.names() == [f"{RUN}/manifest-0-of-2.json"]


def test_commits_wait_for_the_store_group_s_apart_until_the_part_is_consolidated(tmp_path):
    first, second, third = some_records()[:3]
    store = LocalStore(tmp_path / "store")
    spool = Spool(LocalStore(tmp_path / "spool"), RUN, None)
    uploader = Uploader(spool, store, every_s=10)
    uploader.start()
    uploader.commit(first, wait_s=10, stop=threading.Event())
    assert (store.root / RUN / "cells" / f"{first.key}.json").exists()  # in the store before the next cell starts
    uploader.commit(second, wait_s=10, stop=threading.Event())  # within GROUP_S: it goes with the next wait
    time.sleep(GROUP_S)
    uploader.commit(third, wait_s=10, stop=threading.Event())  # a cell slower than GROUP_S: waited for, with second
    assert {c.key for c in read_run(store.root / RUN).cells} == {first.key, second.key, third.key}
    assert uploader.close() is True
    assert not (store.root / RUN / "cells").exists()
    assert [c.key for c in read_run(store.root / RUN).cells] == [first.key, second.key, third.key]


def test_cells_uploaded_together_are_one_object_read_as_cells_of_their_own(tmp_path):
    records = some_records()[:3]
    store = LocalStore(tmp_path / "store")
    spool = Spool(LocalStore(tmp_path / "spool"), RUN, None)
    for r in records:
        spool.add(r)
    Uploader(spool, store, every_s=10).flush()
    assert len(store.names(f"{RUN}/cells/")) == 1
    assert sorted(c.key for c in read_run(store.root / RUN).cells) == sorted(r.key for r in records)


def test_the_in_flight_marker_reaches_the_store_and_is_cleared(tmp_path):
    store = LocalStore(tmp_path / "store")
    spool = Spool(LocalStore(tmp_path / "spool"), RUN, "0/2")
    uploader = Uploader(spool, store, every_s=10)
    uploader.mark({"key": "0123456789abcdef", "attempts": 1})
    uploader.flush()
    assert store.read(RUN).parts[0].inflight == {"key": "0123456789abcdef", "attempts": 1}
    uploader.mark(None)
    uploader.consolidate()
    assert not (store.root / RUN / "inflight-0-of-2.json").exists()


def test_a_resumed_part_with_nothing_to_measure_removes_its_predecessors_marker(tmp_path):
    """The predecessor died (or lost the store) after its last cell; the process that resumes finds every cell done,
    sends no marker of its own, and must not leave the old one behind."""
    store = LocalStore(tmp_path / "store")
    earlier = Spool(LocalStore(tmp_path / "pod-1"), RUN, None)
    first = Uploader(earlier, store, 1)
    first.mark({"key": record().key, "attempts": 1})
    earlier.add(record())
    first.flush()  # killed here: the cell is stored, the marker naming it too
    assert store.read(RUN).parts[0].inflight == {"key": record().key, "attempts": 1}
    Uploader(Spool(LocalStore(tmp_path / "pod-2"), RUN, None), store, 1).consolidate()
    assert not (store.root / RUN / "inflight.json").exists()
    assert read_run(store.root / RUN).cells == [record()]


def test_a_predecessors_marker_for_a_cell_not_yet_recorded_stays(tmp_path):
    """That marker counts the attempts of a cell that may kill the process: only its record retires it."""
    store = LocalStore(tmp_path / "store")
    first = Uploader(Spool(LocalStore(tmp_path / "pod-1"), RUN, None), store, 1)
    first.mark({"key": "0123456789abcdef", "attempts": 1})
    first.flush()
    Uploader(Spool(LocalStore(tmp_path / "pod-2"), RUN, None), store, 1).consolidate()
    assert store.read(RUN).parts[0].inflight == {"key": "0123456789abcdef", "attempts": 1}


def test_a_shorter_marker_written_over_a_longer_one_reads_whole_in_a_new_process(tmp_path):
    spool = Spool(LocalStore(tmp_path), "run", None)
    spool.set_inflight({"key": "a" * 40, "attempt": 1})
    spool.set_inflight({"key": "b", "attempt": 2})
    again = Spool(LocalStore(tmp_path), "run", None)  # what a process started after this one died reads
    assert again.inflight() == {"key": "b", "attempt": 2}
    spool.set_inflight(None)
    assert Spool(LocalStore(tmp_path), "run", None).inflight() is None
    again.set_inflight({"key": "c"})  # the next process writes its own over what is there
    assert Spool(LocalStore(tmp_path), "run", None).inflight() == {"key": "c"}


# Real `attnbench run` processes of tests/variants/instant.py's cells (each crosses the worker seam and is spooled
# and stored; no JAX work), killed or signalled as a pod is.
INSTANT_VARIANTS = {"ATTNBENCH_VARIANTS": str(Path(__file__).with_name("variants"))}


def instant_spec(folder: Path, cells: int) -> Path:
    """`cells` test_instant cells, 10 heads values per seq_len."""
    sweep = {"seq_len": list(range(1, cells // 10 + 1)), "heads": list(range(1, 11))}
    return write_spec(folder / "instant.yaml", spec_data({"name": "loop", "variants": ["test_instant"], "sweep": sweep}))


def run_args(spec: Path, tmp_path: Path, spool: str) -> list[str]:
    return ["run", spec, "--out", tmp_path / "out", "--spool", tmp_path / spool, "--run-id", RUN]


@pytest.mark.slow
def test_a_record_spooled_before_a_sigkill_is_in_the_spool(tmp_path):
    """The spool's fsyncs are grouped, its writes are not: every cell whose progress line was printed (after its
    record was spooled) is in the spool of a process killed right after."""
    spec = instant_spec(tmp_path, 2000)
    run = subprocess.Popen(command(*run_args(spec, tmp_path, "spool")), cwd=REPO, env=environment(**INSTANT_VARIANTS),
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    printed = []
    for line in run.stdout:
        if line.startswith("["):
            printed.append(line.partition("] ")[2].rpartition(": skipped")[0])
            if len(printed) == 300:
                run.kill()
                break
    run.wait()
    assert len(printed) == 300
    spooled = read_run(next((tmp_path / "spool").glob(f"*/{RUN}"))).cells
    assert set(printed) <= {Cell(c.experiment, c.variant, c.params).label() for c in spooled}
    rerun = attnbench(*run_args(spec, tmp_path, "spool"), **INSTANT_VARIANTS)
    assert rerun.returncode == 0, rerun.stderr
    stored = read_run(tmp_path / "out" / RUN)
    assert len(stored.cells) == 2000 and stored.problems == []


# A store whose deletes take as long as a bucket's (GCS: tens of ms each), so that removing a part's per-cell
# objects takes longer than a SIGTERM leaves.
SLOW_DELETES = ("import sys, time; from runner import store; delete = store.LocalStore.delete; "
                "store.LocalStore.delete = lambda self, name: (time.sleep(0.05), delete(self, name))[1]; "
                "from runner.cli import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.slow
def test_sigterm_while_consolidating_exits_75_within_the_limit_and_the_next_run_finishes_it(tmp_path):
    spec = instant_spec(tmp_path, 300)
    first = attnbench(*run_args(spec, tmp_path, "pod-1"), **INSTANT_VARIANTS)
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "out" / RUN
    (folder / "cells").mkdir()
    for line in (folder / "cells.jsonl").read_text().splitlines(keepends=True):  # as a pod killed before
        (folder / "cells" / f"{json.loads(line)['key']}.json").write_text(line)  # consolidating leaves them
    (folder / "cells.jsonl").unlink()
    second = subprocess.Popen([sys.executable, "-c", SLOW_DELETES, *map(str, run_args(spec, tmp_path, "pod-2"))],
                              cwd=REPO, env=environment(**INSTANT_VARIANTS), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(list((folder / "cells").iterdir())) > 290:  # consolidating: the cells object is written, deletes began
        assert time.monotonic() < deadline and second.poll() is None, second.stderr.read() if second.poll() else ""
        time.sleep(0.05)
    second.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    assert second.wait(30) == EXIT_SIGTERM and time.monotonic() - sent < 5, second.stderr.read()
    left = list((folder / "cells").iterdir())
    assert left and len(read_run(folder).cells) == 300 and len((folder / "cells.jsonl").read_text().splitlines()) == 300
    third = attnbench(*run_args(spec, tmp_path, "pod-3"), **INSTANT_VARIANTS)
    assert third.returncode == 0, third.stderr
    assert not (folder / "cells").exists() and len((folder / "cells.jsonl").read_text().splitlines()) == 300
    assert read_run(folder).problems == []


class OutOfReachThenRefusing(LocalStore):
    """A store out of reach for its first call, then answering every write with 403 (its permission revoked)."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.calls, self.outage_met = 0, threading.Event()

    def put(self, name: str, data: bytes) -> None:
        self.calls += 1
        if self.calls == 1:
            self.outage_met.set()
            raise StoreUnavailable(f"{self.uri}: unreachable")
        raise StoreError(f"{self.uri}: 403 Forbidden")


def test_a_failure_of_another_kind_after_an_outage_is_said_too(tmp_path, capsys):
    """An outage is said once; a 403 once the store answers is another failure, said when it comes, where it stayed
    unsaid until the run ended, hours later, behind the outage's one warning."""
    spool, store = Spool(LocalStore(tmp_path / "spool"), RUN, None), OutOfReachThenRefusing(tmp_path / "store")
    uploader = Uploader(spool, store, every_s=0.05)
    uploader.start()
    spool.add(record())
    uploader.notify()
    # the thread's first upload meets the outage, so close's last one meets the 403
    assert store.outage_met.wait(30), "the uploader thread made no upload in 30 s"
    assert uploader.close() is False
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert [("unreachable" in w, "403 Forbidden" in w) for w in warnings] == [(True, False), (False, True)], warnings


def test_the_machine_check_reads_again_the_manifests_of_shards_that_started_after_the_pull(tmp_path):
    """Two shards of one run starting together on two machines: each pulled the store before its first worker
    described the machine (seconds, minutes with cold caches), so the pull saw neither. The check reads the other
    shards' manifests again as it runs: the second to check is refused against the first's, landed meanwhile."""
    from runner.resume import OtherMachine, Resume
    from runner.results import part_names

    store = LocalStore(tmp_path / "out")
    spool = Spool(spool_store(tmp_path / "spool", store), RUN, "1/2")
    uploader = Uploader(spool, store, 30.0)
    assert uploader.pull() == set()
    first = manifest(run_id=RUN, shard="0/2")
    first = first.model_copy(update={"machine": first.machine.model_copy(update={"xla_flags": ["--x=false"]})})
    store.put(f"{RUN}/{part_names('0/2')[0]}", first.model_dump_json().encode())
    assert uploader.measuring_on(Resume(spool, first.machine)) and uploader.refused is None
    other = first.machine.model_copy(update={"xla_flags": ["--x=true"]})
    assert not uploader.measuring_on(Resume(spool, other))
    assert isinstance(uploader.refused, OtherMachine) and str(uploader.refused) == "xla_flags --x=false → --x=true"


@pytest.mark.parametrize("junk", [b"{}", b"{\"run_id\": "], ids=["empty object", "cut short"])
def test_this_parts_manifest_in_the_store_that_does_not_read_is_replaced_with_one_line_naming_it(tmp_path, capsys,
                                                                                                 junk):
    """A manifest of the run's part in the store that does not read (an empty object, a write cut short) is replaced by
    the run's own as it uploads: one warning says which object and why, where it was overwritten unsaid."""
    store = LocalStore(tmp_path / "out")
    store.put(f"{RUN}/manifest.json", junk)
    spool = Spool(spool_store(tmp_path / "spool", store), RUN, None)
    uploader = Uploader(spool, store, 30.0)
    assert uploader.pull() == set()
    spool.write_manifest(manifest(run_id=RUN))
    uploader.flush()
    uploader.flush()
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    where = tmp_path / "out" / RUN / "manifest.json"
    assert len(warnings) == 1 and warnings[0].startswith(f"warning: {where}: "), warnings
    assert warnings[0].endswith("; replaced by this run's manifest")
    assert read_run(tmp_path / "out" / RUN).manifest == manifest(run_id=RUN)


def spooled_part(local: LocalStore, run_id: str, host: str, records: list) -> Spool:
    """A closed part of run `run_id` in the spool `local`: `records` under a manifest of machine `host`."""
    with Spool(local, run_id, None) as part:
        for one in records:
            part.add(one.model_copy(update={"run_id": run_id}))
        made = manifest(run_id=run_id)
        part.write_manifest(made.model_copy(update={"machine": made.machine.model_copy(update={"host": host})}))
    return part


def test_a_part_set_aside_takes_a_run_id_no_spool_folder_or_store_run_holds(tmp_path):
    """Run ids are to the second: two late refusals in one second, on a store that holds a run of that id already,
    each move to an id of their own (a suffix), never into one run under the second's manifest."""
    from runner.resume import set_aside

    local, store = LocalStore(tmp_path / "spool"), LocalStore(tmp_path / "out")
    store.put("test-1/manifest.json", manifest(run_id="test-1").model_dump_json().encode())
    records = some_records()
    parts = [spooled_part(local, "run-a", "a", records[:2]), spooled_part(local, "run-b", "b", records[2:])]
    asides = [set_aside(part, "test-1", store) for part in parts]
    assert [aside.run_id for aside in asides] == ["test-1-2", "test-1-3"]
    assert [(aside.keys(), aside.manifest().machine.host) for aside in asides] == [
        (part.keys(), host) for part, host in zip(parts, "ab")]


# set_aside in its own process, held before its `at`-th write to the spool (a put, a delete, the cells' append) until
# the test kills it: the kill lands at a known point of the move, whatever the machine's speed.
HELD_SET_ASIDE = """
import sys, time
from pathlib import Path
from runner import resume, spool
from runner.store import LocalStore
root, held, at = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
writes = []
def holding(write):
    def call(*args):
        writes.append(write.__name__)
        if len(writes) == at:
            held.write_text(write.__name__)
            time.sleep(600)
        return write(*args)
    return call
with spool.Spool(LocalStore(root), "refused", None) as part:
    pass
for owner, name in [(LocalStore, "put"), (LocalStore, "delete"), (spool.Spool, "add_quietly")]:
    setattr(owner, name, holding(getattr(owner, name)))
resume.set_aside(part, "aside", LocalStore(root.parent / "out"))
held.write_text(f"done after {len(writes)}")
"""
MOVE_WRITES = 7  # the marker, the aside's empty cells and its manifest, its cells, the old cells and manifest, the marker


def killed_in_set_aside(tmp_path: Path, at: int) -> list:
    """The spool tmp_path/spool as a SIGKILL before set_aside's `at`-th write leaves it: the part of run `refused`
    moving to run `aside`; its records."""
    records = some_records()
    spooled_part(LocalStore(tmp_path / "spool"), "refused", "h", records)
    held = tmp_path / "held"
    process = subprocess.Popen([sys.executable, "-c", HELD_SET_ASIDE, tmp_path / "spool", held, str(at)], cwd=REPO)
    deadline = time.monotonic() + 60
    while not held.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert held.exists(), f"exit {process.poll()}"
    process.kill()
    process.wait()
    assert (held.read_text() == f"done after {MOVE_WRITES}") == (at > MOVE_WRITES), held.read_text()
    return records


@pytest.mark.slow
@pytest.mark.parametrize("at", [1, 2, 4, MOVE_WRITES, MOVE_WRITES + 1])
def test_runs_and_show_say_a_set_aside_killed_mid_move_and_what_finishes_it(tmp_path, capsys, at):
    """A SIGKILL inside set_aside, once its marker is written and before it is removed (writes 2 to MOVE_WRITES), leaves
    the two runs half moved: `runs` over the spool says so once, naming both runs and the rerun that finishes the move
    (a folder that holds the marker alone, no run yet, too), as `show` of the run moved to does; before the marker, or
    after the move, it says nothing."""
    killed_in_set_aside(tmp_path, at)
    store = tmp_path / "spool"  # the spool's folder of one store
    listed = in_process(capsys, "runs", "--out", store)
    said = [line for line in listed.err.splitlines() if "moving-from.txt" in line]
    mid_move = 1 < at <= MOVE_WRITES
    assert listed.code == 0 and len(said) == mid_move, listed.err
    assert not mid_move or said[0] == (
        f"warning: {store / 'aside' / 'moving-from.txt'}: run refused's cells were moving to run aside when a process "
        "was killed (a late refusal's set-aside), so either run may hold some of them: the refused command again with "
        f"--run-id aside --spool {tmp_path} finishes the move (a recheck's: the same attnbench recheck command with "
        f"--spool {tmp_path})"), listed.err
    if (store / "aside" / "manifest.json").exists():
        assert ("moving-from.txt" in in_process(capsys, "show", store / "aside").err) == mid_move


@pytest.mark.slow
@pytest.mark.parametrize("rerun, code", [("aside", 2), ("refused", 0)])
def test_the_command_a_half_done_moves_warning_names_finishes_it_through_the_cli(tmp_path, capsys, monkeypatch, rerun,
                                                                                  code):
    """The warning's command (its words as a shell splits them), run through the CLI with a spec the spool's runs were
    not measured by, finishes the move a kill left half done, though the spec check refuses the run id moved to (exit
    2): the move is finished before that check (cli._preflight). Under the other id, `refused`, it finishes it too,
    and that id, empty once the move is done, measures on."""
    from runner.run import Outcome
    import shlex
    import shutil

    from runner import run
    from runner.store import open_store

    records = killed_in_set_aside(tmp_path, 3)
    root, out = tmp_path / "my spool", tmp_path / "out"
    local = spool_store(root, open_store(str(out)))
    shutil.copytree(tmp_path / "spool", local.root)
    said = in_process(capsys, "runs", "--out", local.root).err
    words = shlex.split(said.partition("the refused command again with ")[2].partition(" finishes the move")[0])
    assert words == ["--run-id", "aside", "--spool", str(root)], said
    words[1] = rerun
    monkeypatch.setattr(run, "execute", lambda spec, cells, *rest: Outcome(True, True, len(cells), len(cells)))
    spec = write_spec(tmp_path / "spec.yaml", spec_data())
    assert in_process(capsys, "run", spec, "--out", out, *words).code == code
    keys = {run_id: Spool(local, run_id, None).keys() for run_id in ("refused", "aside")}
    assert not keys["refused"] & keys["aside"] and keys["refused"] | keys["aside"] == {r.key for r in records}
    assert not list(local.root.glob("*/moving-from*"))
    assert "moving-from" not in in_process(capsys, "runs", "--out", local.root).err


def test_a_shards_half_done_move_names_the_shard_that_finishes_it():
    """A shard's marker (moving-from-1-of-2.txt) is finished by a run of that shard alone (finish_moves), so its
    warning's command names --shard 1/2 beside the run id moved to and the spool, each a word a shell reads back."""
    import shlex

    from runner.results import moving_name, moving_said

    said = moving_said("/x/my spool/store-0123/aside", moving_name("1/2"), "refused")
    words = said.partition("the refused command again with ")[2].partition(" finishes the move")[0]
    assert shlex.split(words) == ["--run-id", "aside", "--shard", "1/2", "--spool", "/x/my spool"], said


@pytest.mark.slow
@pytest.mark.parametrize("at", range(1, MOVE_WRITES + 2))
def test_a_set_aside_killed_at_any_write_leaves_a_spool_that_a_rerun_of_either_id_finishes(tmp_path, at):
    """A SIGKILL (OOM, a node lost) inside set_aside, before each of its writes in turn (and after the last): the
    rerun of either run id finds each cell in one run of the spool, none lost, and none without its manifest."""
    import shutil

    from runner.resume import finish_moves

    records = killed_in_set_aside(tmp_path, at)
    for rerun in ("refused", "aside"):
        local = LocalStore(shutil.copytree(tmp_path / "spool", tmp_path / rerun))
        finish_moves(local, rerun, None)
        parts = {run_id: Spool(local, run_id, None) for run_id in ("refused", "aside")}
        keys = {run_id: part.keys() for run_id, part in parts.items()}
        assert not keys["refused"] & keys["aside"] and keys["refused"] | keys["aside"] == {r.key for r in records}
        for run_id, part in parts.items():
            assert not keys[run_id] or part.manifest().run_id == run_id, (rerun, run_id)
            assert {r.run_id for r in part.records()} <= {run_id}
            part.close()
        assert not list(local.root.glob("*/moving-from*")), rerun


def test_a_spool_is_the_environments_where_its_variable_names_it_and_not_the_default(tmp_path, monkeypatch):
    """spool_from_environment: a rerun from a shell (no $ATTNBENCH_SPOOL) must name --spool only where the variable
    chose the run's spool, and chose another than the one a run takes without it."""
    from runner.spool import SPOOL_ENV, default_spool_root, spool_from_environment

    monkeypatch.delenv(SPOOL_ENV, raising=False)
    default, pods = default_spool_root(), tmp_path / "pod spool"
    assert not spool_from_environment(pods) and not spool_from_environment(default)
    monkeypatch.setenv(SPOOL_ENV, str(pods))
    assert spool_from_environment(pods) and spool_from_environment(Path(f"{pods}/"))
    assert not spool_from_environment(tmp_path / "another")  # --spool named it: a shell's rerun names it so too
    monkeypatch.setenv(SPOOL_ENV, str(default))
    assert not spool_from_environment(default)  # the variable names the default: a shell's rerun finds it anyway
    monkeypatch.setenv(SPOOL_ENV, "")
    assert not spool_from_environment(Path(""))
