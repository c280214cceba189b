"""Bad input found by walking every command as a careless user or a broken pipeline would (docs/evidence/
bad-input-walk-20261207.txt): each now exits with one line naming what and where, never a traceback."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess

import pytest

from helpers import REPO, attnbench, command, environment, in_process, spec_data, write_spec
from runner.results import CELLS, MANIFEST

SHIPPED_RUN = REPO / "examples" / "results" / "cpu" / "lab5-20261202-104832"


def stored(tmp_path, run_id: str):
    """A copy of the shipped CPU run under `run_id` in the results folder tmp_path/results."""
    folder = tmp_path / "results" / run_id
    shutil.copytree(SHIPPED_RUN, folder)
    return folder


def test_a_manifest_whose_spec_is_not_a_mapping_is_a_warning_and_the_other_runs_still_list(tmp_path):
    bad = stored(tmp_path, "bad")
    stored(tmp_path, "good")
    manifest = json.loads((bad / MANIFEST).read_text())
    (bad / MANIFEST).write_text(json.dumps(manifest | {"spec": "lab5"}))  # was an AttributeError, exit 1
    result = attnbench("runs", "--out", tmp_path / "results")
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [f"warning: {bad / MANIFEST}: not a valid record (upgrading schema_version 1 "
                                          "to 2: spec is str, not dict)"]
    assert SHIPPED_RUN.name in result.stdout  # the good run, by its manifest's run id


def test_variants_that_no_selected_cell_runs_are_refused_naming_the_ones_that_are(tmp_path):
    spec = write_spec(tmp_path / "spec.yaml", spec_data({"name": "a", "variants": ["xla"]},
                                                        {"name": "b", "variants": ["naive"]}))
    result = attnbench("run", spec, "--out", tmp_path / "results", "--only", "a", "--variants", "naive", "--dry-run")
    assert (result.returncode, result.stderr, result.stdout) == (  # was exit 0: "0 cells"
        2, "error: --variants: no cell runs naive (the cells run: xla)\n", "")
    assert not (tmp_path / "results").exists()


def test_a_spec_that_is_a_fifo_nothing_writes_to_is_refused_at_once_in_one_line(tmp_path):
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)  # no writer: reading it waited forever
    for args in (["validate", fifo], ["run", fifo, "--out", tmp_path / "results", "--dry-run"]):
        result = attnbench(*args, timeout=30)
        assert (result.returncode, result.stderr) == (
            2, f"error: {fifo}: a pipe that gave nothing (no writer, or one that wrote nothing, e.g. a generator that "
            "failed); a spec is a YAML file\n")


def test_a_pipe_whose_writer_wrote_nothing_says_it_gave_nothing():  # `: | attnbench validate /dev/stdin`
    line = f": | {shlex.join(map(str, command('validate')))} /dev/stdin"
    result = subprocess.run(["bash", "-c", line], cwd=REPO, capture_output=True, text=True, timeout=60, env=environment())
    assert (result.returncode, result.stderr) == (2, "error: /dev/stdin: a pipe that gave nothing (no writer, or one "
                                                  "that wrote nothing, e.g. a generator that failed); a spec is a YAML "
                                                  "file\n")


def test_a_spec_given_through_a_pipe_is_read():  # a generated spec: attnbench validate <(envsubst < spec.yaml)
    line = f"{shlex.join(map(str, command('validate')))} <(cat specs/smoke.yaml)"
    result = subprocess.run(["bash", "-c", line], cwd=REPO, capture_output=True, text=True, timeout=60, env=environment())
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert ": ok (2 experiments, 20 cells" in result.stdout.splitlines()[0]  # smoke.yaml's, read through the pipe


def test_the_dashboard_refuses_results_that_are_not_there_before_it_serves(tmp_path):  # it served, with an error page
    result = attnbench("dashboard", "--results", tmp_path / "nowhere", "--port", free_port(), timeout=30)
    assert (result.returncode, result.stderr) == (2, f"error: --results {tmp_path / 'nowhere'}: no such folder\n")
    result = attnbench("dashboard", "--port", free_port(), timeout=30, ATTNBENCH_RESULTS="gs://No_Such!")
    assert result.returncode == 2 and result.stderr.startswith(
        "error: $ATTNBENCH_RESULTS 'gs://No_Such!': not a bucket")


def test_the_dashboard_refuses_an_address_or_port_it_cannot_serve_on_in_one_line():
    result = attnbench("dashboard", "--address", "not a host", "--port", free_port(), timeout=30)
    assert result.returncode == 2 and "Traceback" not in result.stderr  # was streamlit's traceback, exit 1
    assert result.stderr.startswith("error: --address 'not a host': not a host name or address here (")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = attnbench("dashboard", "--address", "127.0.0.1", "--port", port, timeout=30)
    assert (result.returncode, result.stderr) == (  # was exit 1 after streamlit's banner
        2, f"error: --address 127.0.0.1 --port {port}: cannot serve there (Address already in use)\n")


def test_the_dashboard_serves_on_a_free_port(monkeypatch, capsys, tmp_path):
    served = []
    monkeypatch.setattr(os, "execv", lambda path, argv: served.append(argv))
    in_process(capsys, "dashboard", "--address", "127.0.0.1", "--port", free_port(), "--results", tmp_path)
    assert len(served) == 1 and served[0][-2:] == ["--results", str(tmp_path)]


def test_the_dashboard_serves_a_bucket_whose_credentials_are_not_there_yet(monkeypatch, capsys):
    """The page reads the bucket and says why it cannot until it can: a new GKE node's metadata server can answer
    late, and a start-up that opened the store exited 2 (File ... was not found), crash-looping the pod."""
    served = []
    monkeypatch.setattr(os, "execv", lambda path, argv: served.append(argv))
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nowhere/key.json")
    done = in_process(capsys, "dashboard", "--port", free_port(), "--results", "gs://bucket/runs")
    assert (done.code, done.errors, len(served)) == (None, [], 1)
    assert served[0][-2:] == ["--results", "gs://bucket/runs"]
    monkeypatch.setenv("ATTNBENCH_RESULTS", "gs://No_Such!/runs")
    done = in_process(capsys, "dashboard", "--port", free_port())
    assert (done.code, done.errors, len(served)) == (2, [
        "error: $ATTNBENCH_RESULTS 'gs://No_Such!/runs': not a bucket URI; expected gs://BUCKET[/PREFIX] (bucket: a-z "
        "0-9 . _ -)"], 1)


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return probe.getsockname()[1]


def test_an_emulator_host_without_its_scheme_is_named_in_one_line(tmp_path):
    result = attnbench("runs", "--out", "gs://bucket/runs", timeout=30, STORAGE_EMULATOR_HOST="localhost:9023")
    assert (result.returncode, result.stderr) == (  # was "unreachable (No connection adapters were found for ...)"
        2, "error: --out gs://bucket/runs: $STORAGE_EMULATOR_HOST 'localhost:9023' is not an emulator's URL "
           "(http://HOST:PORT)\n")


@pytest.mark.parametrize("host", ["http://127.0.0.1:9023", "http://localhost:9023/", "https://[::1]:9023",
                                  "http://emu"])
def test_an_emulator_url_with_its_scheme_opens_a_store(monkeypatch, host):
    from runner.store import GcsStore

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", host)
    assert GcsStore("bucket", "runs").uri == "gs://bucket/runs"  # the client is made; nothing is asked of it yet


@pytest.mark.parametrize("limit", ["junk", "0", "-5", "1e9", "9" * 19])
def test_a_worker_memory_limit_that_is_no_number_of_bytes_is_refused_before_the_run(tmp_path, limit):
    spec = write_spec(tmp_path / "spec.yaml", spec_data())
    result = attnbench("run", spec, "--out", tmp_path / "results", "--spool", tmp_path / "spool",
                       ATTNBENCH_WORKER_MEMORY_LIMIT=limit)
    assert (result.returncode, result.stderr) == (  # was the worker's traceback and an internal error, exit 1
        2, f"error: $ATTNBENCH_WORKER_MEMORY_LIMIT {limit!r}: must be a whole number of bytes above 0\n")
    assert not (tmp_path / "results").exists() and not (tmp_path / "spool").exists()


def test_a_worker_memory_limit_in_bytes_is_read():
    from runner.worker import memory_limit

    assert [memory_limit(env) for env in ({}, {"ATTNBENCH_WORKER_MEMORY_LIMIT": str(4 << 30)})] == [None, 4 << 30]


def test_a_cells_file_of_junk_lines_warns_of_the_first_twenty_and_counts_the_rest(tmp_path):
    run = stored(tmp_path, "junk")
    with open(run / CELLS, "a") as cells:
        cells.write("".join(f"junk {i}\n" for i in range(5000)))  # was 5,000 warning lines
    result = attnbench("show", run, "--format", "csv")
    warnings = result.stderr.splitlines()
    assert result.returncode == 0 and len(warnings) == 21
    assert warnings[0] == f"warning: {run / CELLS}:77: not valid JSON (Expecting value)"
    assert warnings[-1] == "warning: … and 4,980 more warnings"
    assert len(result.stdout.splitlines()) == 77  # the header and the shipped run's 76 cells


def test_a_report_location_that_cannot_be_written_is_named_once_by_its_option(tmp_path):
    stored(tmp_path, "a"), stored(tmp_path, "b")
    (tmp_path / "file").write_text("")
    results = tmp_path / "results"
    bad_uri = attnbench("compare", "a", "b", "--out", results, "--report", "gs://No_Such!")
    assert (bad_uri.returncode, bad_uri.stderr) == (0, "warning: --report gs://No_Such!: not written: not a bucket "
                                                    "URI; expected gs://BUCKET[/PREFIX] (bucket: a-z 0-9 . _ -); "
                                                    "the comparison stands\n")  # was "--report 'gs://No_Such!'" again
    under_file = attnbench("compare", "a", "b", "--out", results, "--report", tmp_path / "file" / "report")
    assert under_file.stderr == (f"warning: --report {tmp_path / 'file' / 'report'}: not written: "
                                 f"{tmp_path / 'file' / 'report' / 'index.html'}: Not a directory; the comparison "
                                 "stands\n")
    report = attnbench("report", "a", "--out", results, "--output", tmp_path / "file" / "report")
    assert (report.returncode, report.stderr) == (  # was the path alone, without the option that named it
        2, f"error: --output {tmp_path / 'file' / 'report' / 'index.html'}: Not a directory\n")


@pytest.mark.parametrize("command", [["validate"], ["run", "--dry-run"]], ids=" ".join)
def test_variant_files_that_do_not_load_are_named_by_validate_and_run_each_once(tmp_path, command):
    spec = write_spec(tmp_path / "spec.yaml", spec_data())
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    named = os.pathsep.join(str(p) for p in (tmp_path / "nowhere.py", tmp_path / "notes.txt", tmp_path / "broken.py"))
    out = ["--out", tmp_path / "results"] if command[0] == "run" else []
    result = attnbench(*command, spec, *out, ATTNBENCH_VARIANTS=named)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert result.returncode == 0 and warnings == [  # was silent: its variants were just unknown
        f"warning: $ATTNBENCH_VARIANTS {tmp_path / 'nowhere.py'}: no such file or folder; its variants are not loaded",
        f"warning: $ATTNBENCH_VARIANTS {tmp_path / 'notes.txt'}: not a .py file; its variants are not loaded",
        f"warning: $ATTNBENCH_VARIANTS {tmp_path / 'broken.py'}: RuntimeError: boom; its variants are not loaded"]


def test_an_empty_run_id_is_refused_where_given_and_unset_where_the_environment_leaves_it_empty(tmp_path):
    spec = write_spec(tmp_path / "spec.yaml", spec_data())
    given = attnbench("run", spec, "--out", tmp_path / "results", "--run-id", "", "--dry-run")
    assert (given.returncode, given.stderr) == (  # was a new run id: `--run-id "$UNSET"` never resumed its run
        2, "error: run id '': use up to 116 letters, digits, '.', '_' and '-', starting with a letter or digit\n")
    unset = attnbench("run", spec, "--out", tmp_path / "results", "--dry-run", ATTNBENCH_RUN_ID="")
    assert unset.returncode == 0, unset.stderr


NAN_VARIANT = '''
from runner.registry import variant


@variant("nan_kernel")
def build(p):
    """Attention that writes NaN everywhere, as a broken kernel does."""
    from runner.attention import naive_attention

    return lambda q, k, v: naive_attention(q, k, v, causal=p.causal) * float("nan")
'''


def test_a_kernel_that_writes_nan_is_an_incorrect_cell_and_the_run_goes_on(tmp_path):
    (tmp_path / "nan_kernel.py").write_text(NAN_VARIANT)
    spec = write_spec(tmp_path / "spec.yaml", spec_data(
        {"name": "a", "variants": ["nan_kernel", "xla"], "sweep": {"pass": ["fwd", "fwd_bwd"]}},
        {"name": "one-key", "variants": ["xla"], "seq_len": 1, "pass": "fwd_bwd"}))  # dq and dk are zeros here
    result = attnbench("run", spec, "--out", tmp_path / "results", "--run-id", "nan", "--spool", tmp_path / "spool",
                       ATTNBENCH_VARIANTS=str(tmp_path / "nan_kernel.py"))
    assert "internal error" not in result.stderr  # was exit 1 at the first NaN cell: its errors were written null
    cells = [json.loads(line) for line in (tmp_path / "results" / "nan" / CELLS).read_text().splitlines()]
    assert sorted((c["experiment"], c["variant"], c["params"]["pass"], c["status"]) for c in cells) == [
        ("a", "nan_kernel", "fwd", "incorrect"), ("a", "nan_kernel", "fwd_bwd", "incorrect"),
        ("a", "xla", "fwd", "ok"), ("a", "xla", "fwd_bwd", "ok"), ("one-key", "xla", "fwd_bwd", "ok")]
    assert "dq relative error nan > tolerance" in next(c["reason"] for c in cells if c["params"]["pass"] == "fwd_bwd"
                                                           and c["variant"] == "nan_kernel")


@pytest.mark.parametrize("args", [["show", "a"], ["compare", "a", "a"], ["compare", "a", "--against", "previous"],
                                  ["report", "a", "--output", "REPORT"]])
def test_an_empty_out_is_refused_by_every_reader_as_runs_and_run_refuse_it(tmp_path, args):
    # an empty --out was read as results/, the default
    result = attnbench(*[str(tmp_path / "report") if a == "REPORT" else a for a in args], "--out", "")
    assert (result.returncode, result.stderr, result.stdout) == (
        2, "error: --out '': not a results location; expected a folder or gs://bucket/prefix\n", "")


def test_an_empty_spool_is_refused_where_it_was_the_current_folder(tmp_path):
    spec = write_spec(tmp_path / "spec.yaml", spec_data())
    result = attnbench("run", spec, "--out", tmp_path / "results", "--spool", "", "--dry-run")
    assert (result.returncode, result.stderr) == (
        2, "attnbench run: error: argument --spool: must name a folder (got '') (see attnbench run --help)\n")


def test_the_dashboard_refuses_an_empty_results_as_the_other_commands_refuse_an_empty_out(monkeypatch, capsys):
    """An empty --results or $ATTNBENCH_RESULTS (a pipeline's unset variable) served the shipped example runs as if
    they were the lab's."""
    served = []
    monkeypatch.setattr(os, "execv", lambda path, argv: served.append(argv))
    done = in_process(capsys, "dashboard", "--port", free_port(), "--results", "")
    assert (done.code, done.errors, served) == (2, ["error: --results: must name a results folder or a bucket (got '')"],
                                                [])
    monkeypatch.setenv("ATTNBENCH_RESULTS", "")
    done = in_process(capsys, "dashboard", "--port", free_port())
    assert (done.code, done.errors, served) == (
        2, ["error: $ATTNBENCH_RESULTS: must name a results folder or a bucket (got '')"], [])


def test_an_out_below_a_folder_that_cannot_be_entered_is_checked_without_an_internal_error(monkeypatch, tmp_path):
    """Path.exists raises PermissionError below a folder this user cannot enter (the image runs as uid 10001): the
    --out check was an internal error, exit 1. Root enters every folder, so the test has stat refuse as the kernel
    would for another user."""
    from runner import cli

    locked = tmp_path / "locked"
    locked.mkdir()
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if str(path).startswith(f"{locked}{os.sep}"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    assert cli._uncreatable(locked / "inner" / "out") is None  # root makes the folder in locked; others are refused


@pytest.mark.parametrize("command", [["validate"], ["run", "--dry-run"]], ids=" ".join)
def test_a_variant_check_that_breaks_on_a_cell_ends_validate_and_the_dry_run_in_one_line_naming_it(tmp_path, command):
    (tmp_path / "late.py").write_text("from runner.registry import variant\n\n\n"
                                      "@variant('test_late', check=lambda p: p.seqlen if p.causal else None)\n"
                                      "def build(p):\n    '''A check that reads a field no cell has.'''\n")
    spec = write_spec(tmp_path / "spec.yaml", spec_data({"name": "a", "variants": ["test_late"], "causal": True}))
    out = ["--out", tmp_path / "results"] if command[0] == "run" else []
    result = attnbench(*command, spec, *out, ATTNBENCH_VARIANTS=str(tmp_path / "late.py"))
    assert (result.returncode, result.stderr) == (  # was exit 1: "internal error: AttributeError: ...", naming neither
        2, f"error: variant test_late: its check ({tmp_path / 'late.py'}:4) raised AttributeError: 'Params' object "
        "has no attribute 'seqlen'\n")  # validate said ok


def test_a_variant_check_that_breaks_in_a_run_names_the_unfinished_run_it_leaves_and_how_to_resume_it(tmp_path):
    """The run plans its cells once its first worker describes the device, after its folder and manifest are made:
    the line says they are left (`runs` lists the run 0/1 unfinished), where it said nothing of them."""
    (tmp_path / "late.py").write_text("from runner.registry import variant\n\n\n"
                                      "@variant('test_late', check=lambda p: p.seqlen if p.causal else None)\n"
                                      "def build(p):\n    '''A check that reads a field no cell has.'''\n")
    spec = write_spec(tmp_path / "spec.yaml", spec_data({"name": "a", "variants": ["test_late"], "causal": True}))
    out, spool, run_id = tmp_path / "results", tmp_path / "spool", "late-20261207-000000"
    result = attnbench("run", spec, "--out", out, "--run-id", run_id, ATTNBENCH_VARIANTS=str(tmp_path / "late.py"),
                       ATTNBENCH_SPOOL=str(spool))
    (left,) = spool.glob(f"*/{run_id}")
    assert (result.returncode, result.stderr) == (
        2, f"error: variant test_late: its check ({tmp_path / 'late.py'}:4) raised AttributeError: 'Params' object "
        f"has no attribute 'seqlen'; run {run_id} is left unfinished in {out / run_id} (its spool: {left}): once the "
        f"check is fixed, rerun with --run-id {run_id} --spool {spool} to resume it, or delete both folders\n")
