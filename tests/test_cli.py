"""runner/cli.py end to end: `python -m runner …` in a subprocess, its exit codes, its output and its files.

Exit codes and the real run go through a subprocess; a few output checks call `main()` in this process,
which is the same code without a second start of jax.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import time

import pandas as pd
import pytest

from helpers import REPO, attnbench, command, environment, spec_data, write_spec
from runner.cells import expand
from runner.cli import main
from runner.registry import load_all
from runner.results import CELLS, MANIFEST
from runner.store import read_run
from runner.spec import load_spec

CPU_SKIP = "cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; this run is on cpu"
RUN_ID = "cli-test"


def tiny_spec() -> dict:
    """10 cells: the four variants with and without the mask (GQA), and naive/xla forward+backward."""
    return spec_data(
        {"name": "variants", "variants": ["naive", "xla", "auto", "cudnn"], "kv_heads": 2, "sweep": {"causal": [False, True]}},
        {"name": "backward", "variants": ["naive", "xla"], "pass": "fwd_bwd", "causal": True, "kv_heads": 1},
    )  # fmt: skip


def in_process(capsys, *args) -> tuple[int, str, str]:
    """main(ARGS) here: (exit code, stdout, stderr)."""
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def no_traceback(result: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in result.stdout + result.stderr


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    return result.stderr.splitlines()


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    return write_spec(tmp_path_factory.mktemp("spec") / "tiny.yaml", tiny_spec())


@pytest.fixture(scope="module")
def run(spec_path, tmp_path_factory):
    """One real run of the tiny spec, shared by the tests that read it: (process, run folder)."""
    out = tmp_path_factory.mktemp("results")
    spool = tmp_path_factory.mktemp("spool")
    result = attnbench("run", spec_path, "--out", out, "--run-id", RUN_ID, ATTNBENCH_SPOOL=str(spool))
    return result, out / RUN_ID


# --- validate -----------------------------------------------------------------------------------------


def test_validate_ok(spec_path):
    result = attnbench("validate", spec_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{spec_path}: ok (2 experiments, 10 cells)"
    assert result.stderr == ""


def test_bad_spec_exits_2_with_one_stderr_line_per_problem(tmp_path):
    long_name = "flash" * 30  # a line longer than a terminal stays one line
    bad = spec_data(
        {"name": "a", "variants": ["xla", long_name]},
        {"name": "b", "variants": ["naive"], "heads": 6, "kv_heads": 4},
        {"name": "b", "variants": ["naive"], "sweep": {}},
    )
    result = attnbench("validate", write_spec(tmp_path / "bad.yaml", bad))
    assert result.returncode == 2
    no_traceback(result)
    assert error_lines(result) == [
        f"error: experiments[0].variants[1]: unknown variant '{long_name}' (known: {', '.join(sorted(load_all()))})",
        "error: experiments[1].kv_heads: heads (6) must be a multiple of kv_heads (4)",
        "error: experiments[2].name: duplicate experiment name 'b'",
        "error: experiments[2].sweep: must name at least one axis",
    ]
    assert result.stdout == ""


def test_run_of_a_bad_spec_exits_2_and_writes_nothing(tmp_path):
    bad = spec_data({"name": "a", "variants": ["xla"], "bogus": 1, "sweep": {"seq_len": [64, 0]}})
    result = attnbench("run", write_spec(tmp_path / "bad.yaml", bad), "--out", tmp_path / "out")
    assert result.returncode == 2
    no_traceback(result)
    assert error_lines(result) == [
        "error: experiments[0].sweep.seq_len[1]: must be > 0",
        "error: experiments[0].bogus: unknown key",
    ]
    assert not (tmp_path / "out").exists()


def test_missing_spec_exits_2(tmp_path):
    path = tmp_path / "nowhere.yaml"
    result = attnbench("run", path, "--out", tmp_path)
    assert result.returncode == 2
    no_traceback(result)
    assert error_lines(result) == [f"error: {path}: no such file"]


def test_unreadable_yaml_exits_2_with_line_and_column(tmp_path):
    path = write_spec(tmp_path / "broken.yaml", "name: t\nexperiments:\n  - name: a\n    variants: [xla\n")
    result = attnbench("validate", path)
    assert result.returncode == 2
    no_traceback(result)
    assert error_lines(result) == [f"error: {path}:5:1: not valid YAML (expected ',' or ']', but got '<stream end>')"]


def test_unknown_command_is_a_usage_error():
    result = attnbench("frobnicate")
    assert result.returncode == 2
    no_traceback(result)


# --- run ----------------------------------------------------------------------------------------------


def test_run_with_a_spool_that_is_a_file_is_bad_input(spec_path, tmp_path):
    (tmp_path / "a-file").write_text("")
    result = attnbench("run", spec_path, "--out", tmp_path / "out", "--spool", tmp_path / "a-file")
    no_traceback(result)
    assert len(error_lines(result)) == 1
    assert result.returncode == 2


@pytest.mark.parametrize("option", ["--flush-every", "--store-timeout"])
@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1"])
def test_seconds_must_be_finite_and_positive(spec_path, capsys, option, value):
    with pytest.raises(SystemExit) as caught:
        main(["run", str(spec_path), option, value])
    assert caught.value.code == 2
    assert "must be a positive number of seconds" in capsys.readouterr().err


def test_a_shard_without_a_run_id_is_bad_input(spec_path, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ATTNBENCH_RUN_ID", raising=False)
    code, _, err = in_process(capsys, "run", spec_path, "--out", tmp_path, "--shard", "0/2")
    assert code == 2
    assert err.strip() == "error: shard 0/2: give --run-id (or ATTNBENCH_RUN_ID) so that every shard writes the same run"


def test_dry_run_lists_cells_with_skip_verdicts(spec_path, tmp_path):
    result = attnbench("run", spec_path, "--dry-run", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    cells = expand(load_spec(spec_path, set(load_all())))
    expected = [f"{c.label()}: {'skip: ' + CPU_SKIP if c.variant == 'cudnn' else 'run'}" for c in cells]
    assert result.stdout.splitlines() == [*expected, "10 cells"]
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


def test_only_and_variants_select_cells(spec_path, capsys):
    code, out, err = in_process(capsys, "run", spec_path, "--dry-run", "--only", "backward", "--variants", "xla", "cudnn")
    assert code == 0, err
    assert out.splitlines() == ["backward/xla B1 T8 N4 K1 H8 float32 causal fwd_bwd: run", "1 cells"]


def test_unknown_experiment_and_variant_exit_2_with_a_line_each(spec_path):
    result = attnbench("run", spec_path, "--dry-run", "--only", "nope", "--variants", "xla", "flash9")
    assert result.returncode == 2
    no_traceback(result)
    assert error_lines(result) == [
        "error: --only: no experiment 'nope' in the spec (it has: variants, backward)",
        f"error: --variants: unknown variant 'flash9' (known: {', '.join(sorted(load_all()))})",
    ]


def test_run_exits_0_and_writes_manifest_and_cells(run, spec_path):
    result, run_dir = run
    assert result.returncode == 0, result.stdout + result.stderr
    no_traceback(result)
    assert (run_dir / MANIFEST).is_file() and (run_dir / CELLS).is_file()
    manifest = json.loads((run_dir / MANIFEST).read_text())
    assert manifest["run_id"] == RUN_ID and manifest["name"] == "test"
    assert manifest["spec"] == load_spec(spec_path, set(load_all())).model_dump(mode="json", by_alias=True)
    assert manifest["spec_hash"] == load_spec(spec_path, set(load_all())).digest()
    assert manifest["ended_at"] and manifest["started_at"] <= manifest["ended_at"]
    assert manifest["machine"]["platform"] == "cpu" and manifest["machine"]["versions"]["jax"]
    assert manifest["cells_planned"] == 10
    lines = (run_dir / CELLS).read_text().splitlines()
    assert len(lines) == 10 and all(isinstance(json.loads(line), dict) for line in lines)


def test_run_cells_are_ok_on_cpu_and_cudnn_is_skipped_with_its_reason(run, spec_path):
    _, run_dir = run
    loaded = read_run(run_dir)
    assert loaded.problems == []
    planned = expand(load_spec(spec_path, set(load_all())))
    assert [c.key for c in loaded.cells] == [c.key for c in planned]
    for cell in loaded.cells:
        if cell.variant == "cudnn":
            assert (cell.status, cell.reason) == ("skipped", CPU_SKIP)
            assert cell.timings == [] and cell.correctness is None
        else:
            assert cell.status == "ok", f"{cell.variant}: {cell.reason}"
            assert cell.median_s > 0 and cell.tflops > 0 and cell.correctness.rel_err <= cell.correctness.tolerance
            assert 2 <= cell.timings[0].samples <= 3
            if cell.params.causal and cell.params.pass_ == "fwd":
                assert cell.correctness.causal_first_changed and cell.correctness.causal_last_unchanged


def test_run_logs_one_plain_line_per_cell_and_a_summary(run):
    result, run_dir = run
    progress = [line for line in result.stdout.splitlines() if line.startswith("[")]
    assert len(progress) == 10
    assert progress[0].startswith("[1/10] variants/naive B1 T8 N4 K2 H8 float32 fwd: ok ")
    assert progress[3] == f"[4/10] variants/cudnn B1 T8 N4 K2 H8 float32 fwd: skipped: {CPU_SKIP}"
    assert "10 cells: 8 ok, 2 skipped" in result.stdout
    assert f"results: {run_dir}" in result.stdout


# --- show ---------------------------------------------------------------------------------------------


def test_show_prints_a_table_per_experiment(run):
    _, run_dir = run
    result = attnbench("show", run_dir)
    assert result.returncode == 0, result.stderr
    assert "variants" in result.stdout and "backward" in result.stdout
    assert "10 cells: 8 ok, 2 skipped" in result.stdout
    assert "cudnn needs an NVIDIA GPU" in result.stdout  # the note column may wrap the rest
    assert result.stderr == ""


def test_show_csv_has_one_row_per_cell(run, capsys):
    _, run_dir = run
    code, out, err = in_process(capsys, "show", run_dir, "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["key"] for r in rows] == [c.key for c in read_run(run_dir).cells]
    assert {r["status"] for r in rows if r["variant"] == "cudnn"} == {"skipped"}
    assert all(float(r["median_s"]) > 0 for r in rows if r["variant"] != "cudnn")


def test_show_markdown_and_parquet(run, tmp_path, capsys):
    _, run_dir = run
    code, out, err = in_process(capsys, "show", run_dir, "--format", "markdown")
    assert code == 0, err
    assert len(out.splitlines()) == 2 + 10
    dest = tmp_path / "cells.parquet"
    assert in_process(capsys, "show", run_dir, "--format", "parquet", "--output", dest)[0] == 0
    assert len(pd.read_parquet(dest)) == 10
    result = attnbench("show", run_dir, "--format", "parquet")  # binary needs a file
    assert result.returncode == 2
    assert error_lines(result) == ["error: --format parquet: give --output FILE (parquet is binary)"]


def test_show_missing_folder_exits_2(tmp_path):
    result = attnbench("show", tmp_path / "no-such-run")
    assert result.returncode == 2
    no_traceback(result)
    assert len(error_lines(result)) == 1 and "missing" in result.stderr


def test_show_output_into_a_missing_folder_is_bad_input(run, tmp_path):
    _, run_dir = run
    result = attnbench("show", run_dir, "--format", "csv", "--output", tmp_path / "no-such-folder" / "cells.csv")
    no_traceback(result)
    assert len(error_lines(result)) == 1
    assert result.returncode == 2


def test_show_warns_about_a_bad_line_and_shows_the_rest(run, tmp_path, capsys):
    _, run_dir = run
    copy = tmp_path / RUN_ID
    copy.mkdir()
    (copy / MANIFEST).write_text((run_dir / MANIFEST).read_text())
    (copy / CELLS).write_text((run_dir / CELLS).read_text() + "{torn\n")
    code, out, err = in_process(capsys, "show", copy)
    assert code == 0, err
    assert "not valid JSON" in out
    assert "10 cells: 8 ok, 2 skipped" in out


# --- list, env, schema --------------------------------------------------------------------------------


def test_list_shows_every_variant_and_why_it_cannot_run_here(capsys):
    code, out, err = in_process(capsys, "list")
    assert code == 0, err
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    here = {row[0]: row[1] for row in cells if row[0]}  # a wrapped cell continues on rows with no name
    assert set(here) == set(load_all())
    assert {name for name, verdict in here.items() if verdict == "yes"} == {"naive", "xla", "auto"}
    assert all(verdict.startswith("no: ") for name, verdict in here.items() if name not in ("naive", "xla", "auto"))
    assert here["cudnn"].startswith("no: cudnn needs an NVIDIA GPU")


def test_env_prints_the_machine():
    result = attnbench("env")
    assert result.returncode == 0, result.stderr
    described = json.loads(result.stdout)
    assert described["platform"] == "cpu" and described["compute_capability"] is None
    assert described["versions"]["jax"] and described["versions"]["pydantic"]


def test_schema_prints_json_schema():
    result = attnbench("schema")
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    assert schema["title"] == "Spec" and {"name", "experiments"} <= set(schema["required"])


# --- a run killed mid-way -----------------------------------------------------------------------------


def test_a_run_killed_mid_way_leaves_a_readable_cells_jsonl(tmp_path):
    many = spec_data({"name": "long", "variants": ["naive", "xla"], "sweep": {"seq_len": list(range(4, 84, 4)), "causal": [False, True]}})
    path = write_spec(tmp_path / "long.yaml", many)
    out, run_id = tmp_path / "out", "killed"
    cells_path = out / run_id / CELLS
    env = environment(ATTNBENCH_SPOOL=str(tmp_path / "spool"))
    process = subprocess.Popen(
        command("run", path, "--out", out, "--run-id", run_id),
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and process.poll() is None:
            if cells_path.is_file() and len(cells_path.read_text().splitlines()) >= 2:
                break
            time.sleep(0.02)
        assert process.poll() is None, "the run ended before it could be killed"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    lines = cells_path.read_text().splitlines()
    assert 2 <= len(lines) < 80
    assert all(isinstance(json.loads(line), dict) for line in lines)
    killed = read_run(out / run_id)
    assert killed.problems == []
    assert len(killed.cells) >= 2
    assert killed.manifest is not None and killed.manifest.ended_at is None and killed.manifest.cells_planned == 80
    assert all(cell.status == "ok" for cell in killed.cells)
