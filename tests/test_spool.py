"""The spool and its uploader, on local stores: torn lines, folding in the store's copy, an outage and back."""

from __future__ import annotations

from runner.store import read_run
from runner.spool import Spool, Uploader, spool_store
from runner.store import LocalStore
from test_results import manifest, record, some_records

RUN = "run-1"


def test_spool_folder_is_a_run_folder_named_after_its_store(tmp_path):
    local = spool_store(tmp_path / "spool", LocalStore(tmp_path / "results"))
    spool = Spool(local, RUN, "1/3")
    spool.write_manifest(manifest(shard="1/3"))
    spool.add(record())
    assert spool.dir.parent.name.endswith("_results") and spool.dir.name == RUN
    assert sorted(p.name for p in spool.dir.iterdir()) == ["cells-1-of-3.jsonl", "manifest-1-of-3.json"]
    run = read_run(spool.dir)
    assert run.problems == [] and run.cells == [record()] and [p.shard for p in run.parts if p.cells] == ["1/3"]


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


def test_the_first_upload_folds_in_the_stores_copy(tmp_path):
    records = some_records()
    store = LocalStore(tmp_path / "store")
    earlier_pod = Spool(LocalStore(tmp_path / "pod-1"), RUN, None)
    for r in records[:3]:
        earlier_pod.add(r)
    Uploader(earlier_pod, store, 1).flush()
    spool = Spool(LocalStore(tmp_path / "pod-2"), RUN, None)
    for r in records[2:]:  # records[2] measured again before the store could be asked
        spool.add(r)
    Uploader(spool, store, 1).flush()
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
