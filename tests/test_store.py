"""Stores: the local folder and GCS (against gcp-storage-emulator) behind one interface, one layout."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time

import pytest

import runner.store as store_module
from conftest import BUCKET, held_port
from helpers import REPO, environment, in_process, spec_data, write_spec
from runner.cli import main
from runner.store import GcsStore, LocalStore, StoreError, StoreUnavailable, open_store
from test_results import manifest, some_records

RUN = "run-1"


def lines(records) -> bytes:
    return "".join(r.model_dump_json(by_alias=True) + "\n" for r in records).encode()


@pytest.fixture(params=["local", "gcs"])
def store(request, tmp_path):
    if request.param == "local":
        return open_store(str(tmp_path / "results"))
    request.getfixturevalue("emulator")
    return open_store(f"gs://{BUCKET}/some/prefix/")


@pytest.mark.parametrize("uri", ["gs://", "gs://A-Bucket/x", "gs:///x", "gs://b", "s3://bucket/x", "http://x", ""])
def test_bad_uris_are_refused(uri):
    with pytest.raises(StoreError):
        open_store(uri)


def test_a_file_is_not_a_results_folder(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreError, match="not a folder"):
        open_store(str(tmp_path / "file"))


def test_uris_name_their_store(tmp_path, emulator):
    assert isinstance(open_store(str(tmp_path)), LocalStore)
    gcs = open_store(f"gs://{BUCKET}/a/b/")
    assert isinstance(gcs, GcsStore) and gcs.uri == f"gs://{BUCKET}/a/b" and gcs.location("r") == f"gs://{BUCKET}/a/b/r"


def test_objects_round_trip(store):
    assert store.get("r/manifest.json") is None and store.names() == []
    store.put("r/cells.jsonl", b"one\n")
    store.put("r/cells.jsonl", b"one\ntwo\n")  # replaced whole
    store.put("r/deeper/x.json", b"{}")
    assert store.get("r/cells.jsonl") == b"one\ntwo\n"
    assert store.names() == ["r/cells.jsonl", "r/deeper/x.json"] and store.names("r/deeper/") == ["r/deeper/x.json"]


def test_an_unsharded_run_reads_back(store):
    records = some_records()
    store.put(f"{RUN}/manifest.json", manifest().model_dump_json().encode())
    store.put(f"{RUN}/cells.jsonl", lines(records))
    run = store.read(RUN)
    assert run.problems == [] and run.manifest == manifest() and run.cells == records
    assert run.dir == store.location(RUN) and run.run_id == manifest().run_id
    assert [(p.shard, len(p.cells), p.planned, p.finished) for p in run.parts] == [(None, 5, 4, True)]


def test_shards_read_as_one_run(store):
    records = some_records()
    store.put(f"{RUN}/manifest-0-of-3.json", manifest(shard="0/3", cells_planned=3).model_dump_json().encode())
    store.put(f"{RUN}/cells-0-of-3.jsonl", lines(records[:3]) + b"{torn")
    unfinished = manifest(shard="1/3", cells_planned=2, ended_at=None)
    store.put(f"{RUN}/manifest-1-of-3.json", unfinished.model_dump_json().encode())
    store.put(f"{RUN}/cells-1-of-3.jsonl", lines(records[3:] + records[3:4]))  # a repeat: the reader keeps one
    run = store.read(RUN)
    assert sorted(c.key for c in run.cells) == sorted(r.key for r in records)
    assert [(p.shard, len(p.cells), p.planned, p.finished) for p in run.parts] == [
        ("0/3", 3, 3, True), ("1/3", 2, 2, False), ("2/3", 0, None, False)]
    assert run.manifest.shard is None and run.manifest.cells_planned == 5 and run.manifest.ended_at is None
    assert len(run.problems) == 2
    assert "cells-0-of-3.jsonl:4: not valid JSON" in run.problems[0] and "1 repeated cell keys" in run.problems[1]


def test_runs_are_the_folders_with_run_objects(store):
    store.put("a/manifest.json", manifest().model_dump_json().encode())
    store.put("b/cells-0-of-2.jsonl", b"")
    store.put("gpu/c/manifest.json", b"{}")
    store.put("d/notes.txt", b"")
    store.put("e/cells-2-of-2.jsonl", b"")  # no such shard
    assert store.runs() == ["a", "b", "gpu/c"]



def test_a_shard_object_of_no_shard_is_a_problem_not_a_silent_loss(store):
    """cells-5-of-2.jsonl beside a two-shard run's manifest names no shard: its records are not read, and the run says
    so (it read as "0 cells" with no problem)."""
    store.put(f"{RUN}/manifest-0-of-2.json", manifest(shard="0/2", cells_planned=5).model_dump_json().encode())
    store.put(f"{RUN}/cells-5-of-2.jsonl", lines(some_records()))
    store.put(f"{RUN}/manifest.jsonl", b"{}")
    run = store.read(RUN)
    assert run.cells == [] and [p.shard for p in run.parts] == ["0/2", "1/2"]
    assert run.problems == [
        f"{store.location(RUN)}/cells-5-of-2.jsonl: shard 5 of 2 does not exist (shards are 0 to 1); left out",
        f"{store.location(RUN)}/manifest.jsonl: a manifest object is .json, not .jsonl; left out"]
    assert store.listing()[RUN].problems == run.problems  # the dashboard's table of runs says so too


def test_a_pipe_where_a_part_should_be_is_named_as_what_it_is_and_never_opened(tmp_path):
    store = open_store(str(tmp_path))
    store.put(f"{RUN}/manifest.json", manifest().model_dump_json().encode())
    os.mkfifo(tmp_path / RUN / "cells.jsonl")  # opening it would wait for a writer that never comes
    assert store.read(RUN).problems == [  # was "not a regular file, not a file; left out"
        f"{store.location(RUN)}/cells.jsonl: a pipe, socket or device, not a file; left out"]


def test_a_layout_name_that_is_no_file_is_a_problem_that_show_prints(tmp_path, capsys):
    """A local run folder whose cells.jsonl is a folder (and whose inflight.json links to nothing) read as "0 cells"
    with no problem: the listing keeps files only. Each is a problem now, which `show` prints (and the dashboard's
    table of runs, from the store's listing)."""
    store = open_store(str(tmp_path))
    store.put(f"{RUN}/manifest.json", manifest().model_dump_json().encode())
    (tmp_path / RUN / "cells.jsonl").mkdir()
    (tmp_path / RUN / "cells.jsonl" / "part").write_bytes(lines(some_records()))
    (tmp_path / RUN / "inflight.json").symlink_to(tmp_path / "nowhere")
    (tmp_path / RUN / "notes").mkdir()  # no name of the layout: not the run's business
    where = store.location(RUN)
    assert store.read(RUN).problems == store.listing()[RUN].problems == [
        f"{where}/cells.jsonl: a folder, not a file; left out",
        f"{where}/inflight.json: a link to nothing, not a file; left out"]
    shown = in_process(capsys, "show", tmp_path / RUN)
    assert shown.code == 0 and shown.errors == [f"warning: {where}/cells.jsonl: a folder, not a file; left out",
                                                f"warning: {where}/inflight.json: a link to nothing, not a file; left out"]


def test_a_folder_under_a_misnamed_layout_name_beside_the_cells_is_a_problem(tmp_path):
    """Empty folders named cells-5-of-2.jsonl and manifest.jsonl beside a valid manifest.json are said by read and
    the listing alike: only a folder below cells/ goes unsaid (each object in it is said), not every misnamed one."""
    store = open_store(str(tmp_path))
    store.put(f"{RUN}/manifest.json", manifest().model_dump_json().encode())
    for name in ("cells-5-of-2.jsonl", "manifest.jsonl"):
        (tmp_path / RUN / name).mkdir()
    where = store.location(RUN)
    assert store.read(RUN).problems == store.listing()[RUN].problems == [
        f"{where}/cells-5-of-2.jsonl: a folder, not a file; left out",
        f"{where}/manifest.jsonl: a folder, not a file; left out"]


def test_an_object_below_a_folder_of_a_runs_cells_is_a_problem_of_that_run(store):
    """run/cells/sub/x.json belongs to run, as run/cells/notes.txt does: said by read and the listing, the same in a
    bucket and a local folder (whose folder cells/sub holds the object, and is not said again), never a run of its own."""
    records = some_records()
    store.put(f"{RUN}/manifest.json", manifest().model_dump_json().encode())
    store.put(f"{RUN}/cells.jsonl", lines(records))
    store.put(f"{RUN}/cells/sub/x.json", lines(records[:1]))
    store.put(f"{RUN}/cells-0-of-2/deeper/still/{records[0].key}.json", lines(records[:1]))
    why = "not an object of one cell (those are cells/KEY.json or cells-i-of-n/KEY.json, KEY 16 hex digits); left out"
    where = store.location(RUN)
    run = store.read(RUN)
    assert run.problems == store.listing()[RUN].problems == [
        f"{where}/cells-0-of-2/deeper/still/{records[0].key}.json: {why}", f"{where}/cells/sub/x.json: {why}"]
    assert run.cells == records and store.runs() == [RUN]


def test_a_missing_run_reads_as_problems(store):
    run = store.read("nothing")
    assert run.manifest is None and run.cells == [] and "missing" in run.problems[0]


def test_an_unreachable_bucket_is_unavailable(monkeypatch):
    """Its message keeps the host and port (the head of requests' text) and the cause (its tail), cut at words with an
    ellipsis between: it was cut at 200 characters, mid-word, before the cause ("(Caused by NewConnect")."""
    with held_port() as closed:  # nobody listens, nor can start to meanwhile
        port = closed.getsockname()[1]
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
        store = open_store(f"gs://{BUCKET}/x", timeout_s=1)
        with pytest.raises(StoreUnavailable) as listing:
            store.names()
        with pytest.raises(StoreUnavailable) as upload:
            store.put("r/cells.jsonl", b"")
    for error in (listing.value, upload.value):
        said = str(error).partition("(ConnectionError: ")[2]
        assert f"host='127.0.0.1', port={port}" in said and " … " in said, said
        assert said.rstrip(")\"'").endswith("Connection refused"), said


@pytest.mark.parametrize("text, head, tail", [
    ("GET https://storage.googleapis.com/b/" + "x" * 300 + " 503 Service Unavailable", "GET", "503 Service Unavailable"),
    ("a " * 150 + "cause", "a a", "a cause"),
    ("word" * 80, "word", "word"),  # no space to cut at: cut where the limit falls
])
def test_a_long_error_keeps_its_head_and_its_cause(text, head, tail):
    short = store_module._first_line(RuntimeError(text + "\nsecond line"))
    assert len(short) <= 200 and " … " in short and short.startswith(head) and short.endswith(tail)
    before, _, after = short.partition(" … ")
    assert text.startswith(before) and text.endswith(after)
    if " " in text:  # cut between words, not in one
        assert text[len(before)] == " " and text[-len(after) - 1] == " "
    assert store_module._first_line(RuntimeError("short\nsecond")) == "short"


def test_a_stopped_emulator_keeps_its_port_until_it_starts_again(emulator):
    """An outage test's emulator comes back on the same port (the run's clients know it): meanwhile a bind without
    SO_REUSEADDR, as bind(0)'s search for a free port is, is refused it."""
    emulator.stop()
    with socket.socket() as other, pytest.raises(OSError, match="in use"):
        other.bind(("127.0.0.1", emulator.port))
    emulator.start()
    assert emulator.bucket().exists()


def test_a_missing_bucket_is_bad_input(emulator):
    with pytest.raises(StoreError, match="no such bucket"):
        open_store("gs://no-such-bucket/x").names()


@pytest.mark.parametrize("out", ["s3://bucket/x", "gs://Bad_Bucket", "gs://no-such-bucket/x"])
def test_run_show_and_runs_refuse_a_bad_store_in_one_line(out, emulator, tiny_spec, tmp_path, capsys):
    for argv in (["run", str(tiny_spec), "--out", out, "--spool", str(tmp_path)], ["runs", "--out", out],
                 ["show", "some-run", "--out", out]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def refused_first(count: int, status: int):
    """A Gate rule: the first `count` requests answered `status`, then every one passed through."""
    asked = itertools.count()
    return lambda method, path: status if next(asked) < count else None


def refused_for(seconds: float, status: int):
    """A Gate rule: every request answered `status` until `seconds` from now, then passed through."""
    until = time.monotonic() + seconds
    return lambda method, path: status if time.monotonic() < until else None


@pytest.mark.slow
def test_credentials_refused_at_first_are_retried_and_the_run_goes_on(gate, metadata_server, tmp_path, capsys):
    """A new node's metadata server is there but slow, and its credentials come late: 401 for the first requests,
    then the run writes its results (401 for the first 3 s after the rule was set left none refused where the run's
    start-up took longer)."""
    gate.refuse = refused_first(2, 401)
    path = write_spec(tmp_path / "s.yaml", spec_data())
    outcome = in_process(capsys, "run", path, "--out", f"gs://{BUCKET}/results", "--run-id", "late-auth",
                         "--spool", tmp_path / "spool")
    assert outcome.code == 0, outcome.err
    assert gate.refused, "the test must refuse credentials at first"
    assert [line for line in outcome.errors if "retrying credentials for up to 60 s" in line] != []
    assert gate.emulator.text("results/late-auth/manifest.json")


def test_credentials_refused_for_good_are_bad_input_after_the_grace(gate, metadata_server, tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.setattr(store_module, "AUTH_GRACE_S", 3.0)
    gate.refuse = refused_for(3600, 403)
    path = write_spec(tmp_path / "s.yaml", spec_data())
    outcome = in_process(capsys, "run", path, "--out", f"gs://{BUCKET}/results", "--spool", tmp_path / "spool")
    assert outcome.code == 2 and outcome.errors[-1].startswith(f"error: --out gs://{BUCKET}/results: cannot write")
    assert 2.5 < outcome.seconds < 20 and not (tmp_path / "spool").exists()


def test_credentials_refused_off_gke_are_bad_input_at_once(gate, no_metadata_server, tmp_path, capsys):
    gate.refuse = refused_for(3600, 403)
    path = write_spec(tmp_path / "s.yaml", spec_data())
    outcome = in_process(capsys, "run", path, "--out", f"gs://{BUCKET}/results", "--spool", tmp_path / "spool")
    assert outcome.code == 2 and outcome.errors[-1].startswith(f"error: --out gs://{BUCKET}/results: cannot write")
    assert "retrying" not in outcome.err and outcome.seconds < 5 and not (tmp_path / "spool").exists()


# `attnbench ARGS` whose stderr's last line lists every pause it asked of time.sleep: google-auth's search for
# credentials pings a metadata server that is not there three times, pausing between, and says nothing of it
PAUSES = ("import sys, time\nsleep, paused = time.sleep, []\ntime.sleep = lambda s: (paused.append(s), sleep(s))[1]\n"
          "from runner.cli import main\ntry:\n    sys.exit(main(sys.argv[1:]))\n"
          "finally:\n    print(f'paused {paused}', file=sys.stderr)")


@pytest.mark.slow
def test_no_credentials_off_gke_exit_2_with_no_pause_saying_how_to_set_them(no_metadata_server, tmp_path, monkeypatch):
    """A laptop with no Google credentials at all: nothing will answer later, so nothing is waited for. Judged by the
    pauses asked for, not by the time taken, which load stretches: within start-up + 3 s failed 1 run in 5 beside two
    busy processes (8.13 s against a start-up of 5.12)."""
    for name in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no gcloud login in ~/.config/gcloud
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    path = write_spec(tmp_path / "s.yaml", spec_data())
    args = ["run", path, "--out", "gs://some-bucket/results", "--spool", tmp_path / "spool"]
    result = subprocess.run([sys.executable, "-c", PAUSES, *map(str, args)], cwd=REPO, capture_output=True, text=True,
                            timeout=90, env=environment())
    *said, paused = result.stderr.splitlines()
    assert result.returncode == 2 and paused == "paused []", result.stderr
    [line] = said  # google-auth's own line: where to read how to set credentials up
    assert line.startswith("error: --out gs://some-bucket/results: ") and "cloud.google.com/docs/authentication" in line


def test_a_bucket_that_does_not_exist_is_not_retried(emulator, tmp_path, capsys):
    path = write_spec(tmp_path / "s.yaml", spec_data())
    outcome = in_process(capsys, "run", path, "--out", "gs://no-such-bucket/results", "--spool", tmp_path / "spool")
    assert outcome.code == 2 and "no such bucket" in outcome.err and "retrying" not in outcome.err
    assert outcome.seconds < 10


def test_a_local_part_folder_goes_with_its_last_object_and_stays_while_it_holds_any(tmp_path):
    store = LocalStore(tmp_path)
    for i in range(3):
        store.put(f"run/cells.part/{i}.json", b"{}")
    store.put("run/manifest.json", b"{}")
    store.delete("run/cells.part/0.json")
    store.delete("run/cells.part/missing.json")  # not there: no error
    assert sorted(p.name for p in (tmp_path / "run" / "cells.part").iterdir()) == ["1.json", "2.json"]
    store.delete("run/cells.part/1.json")
    store.delete("run/cells.part/2.json")
    assert not (tmp_path / "run" / "cells.part").exists() and (tmp_path / "run" / "manifest.json").exists()


def test_manifests_are_every_parts_that_reads_and_never_a_cell(tmp_path):
    store = LocalStore(tmp_path)
    for name, spec_hash in (("manifest-0-of-2.json", "a" * 16), ("manifest-1-of-2.json", "b" * 16)):
        store.put(f"r/{name}", manifest(spec_hash=spec_hash).model_dump_json().encode())
    store.put("r/manifest.json", b"{torn")  # a part that does not read: a resume writes it again
    store.put("r/cells-0-of-2.jsonl", some_records()[0].model_dump_json().encode())
    store.put("r/old/manifest.json", manifest(spec_hash="c" * 16).model_dump_json().encode())  # another folder
    assert sorted(m.spec_hash for m in store.manifests("r")) == ["a" * 16, "b" * 16]
    assert store.manifests("nothing") == []


def test_a_half_done_moves_marker_reads_alike_in_its_run_and_in_the_stores_moves(tmp_path):
    """Store.read (a run's problems: show's) and LocalStore.moves (runs', for a folder with no run yet) each found a
    half-done move's marker and said it their own way: both read it through Store.moving, a run's marker and a
    shard's, in a folder with a run and in one without; an object that only looks like one is none."""
    from runner.results import moving_name, moving_said

    local = LocalStore(tmp_path / "spool")
    local.put(f"aside/{moving_name(None)}", b"refused")
    local.put(f"lone/{moving_name('1/2')}", b"refused")
    local.put("aside/moving-from-x.txt", b"refused")
    local.put("aside/manifest.json", manifest().model_copy(update={"run_id": "aside"}).model_dump_json().encode())
    moves = dict(local.moves())
    assert moves == {folder: moving_said(local.location(folder), leaf, "refused")
                     for folder, leaf in (("aside", moving_name(None)), ("lone", moving_name("1/2")))}
    assert [p for p in local.read("aside").problems if "moving" in p] == [moves["aside"]]
    assert local.moving("aside/moving-from-x.txt") is None and local.moving("aside/manifest.json") is None
