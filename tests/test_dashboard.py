"""The dashboard (dashboard/) under streamlit's AppTest, and its data functions on real and made-up runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from conftest import BUCKET, free_port
from helpers import DASHBOARD_APP as APP
from helpers import charts, open_app
from dashboard import data
from runner.cli import build_parser, dashboard_argv
from runner.record import Fp8Info, Timing
from runner.results import CELLS, MANIFEST
from runner.store import read_run

CPU_RUN = next((data.SHIPPED_RESULTS / "cpu").iterdir())
VIEWS = ["Latency", "Throughput", "Memory", "MHA / GQA / MQA", "TransformerEngine vs cuDNN vs XLA (causal)",
         "FP8 truth table", "Cells", "Skipped, failed and incorrect cells", "Compare two runs", "Runs"]


def cell_lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / CELLS).read_text().splitlines()]




def table(app: AppTest, column: str, without: str = "") -> pd.DataFrame:
    """The first table on the page with `column` (and without `without`)."""
    return next(d.value for d in app.dataframe if column in d.value and without not in d.value)


def cell_table(app: AppTest) -> pd.DataFrame:
    return table(app, "duration_s")


@pytest.fixture(autouse=True)
def fresh_cache():
    """Each test reads its store anew (the app caches by location, and tests reuse bucket names)."""
    st.cache_data.clear()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A results folder holding a copy of the shipped CPU run, laid out <machine>/<run_id>."""
    shutil.copytree(CPU_RUN, tmp_path / "cpu" / CPU_RUN.name)
    return tmp_path


def test_shipped_results_render_every_view(monkeypatch):
    app = open_app(monkeypatch)
    assert not app.exception and not app.error
    assert [h.value for h in app.header] == VIEWS
    assert charts(app) >= 5


def test_cpu_run_shows_its_sweeps_and_says_what_is_absent(monkeypatch, store):
    app = open_app(monkeypatch, store)
    assert not app.exception and not app.error
    assert charts(app) == 9  # against T (seq-len and te-causal): latency, TFLOP/s, memory; against B; GQA x2
    infos = " ".join(i.value for i in app.info)
    assert "no % of peak" in infos and "two or more backends" in infos
    assert "Comparing needs two runs" in infos
    fp8 = next(d.value for d in app.dataframe if "verdict" in d.value)  # FP8 variants are listed even when skipped
    assert set(fp8["variant"]) == {"cudnn_fp8", "te_fp8"}
    assert fp8["verdict"].str.startswith("skipped: ").all()


def test_cell_table_has_every_cell_and_problem_table_every_skip(monkeypatch, store):
    app = open_app(monkeypatch, store)
    lines = cell_lines(CPU_RUN)
    cells, problems = cell_table(app), table(app, "reason", without="duration_s")
    assert len(cells) == len(lines)
    assert {"key", "run_id", "median_s", "wall_median_s", "temp_bytes", "reason", "rel_err"} <= set(cells.columns)
    skipped = [line for line in lines if line["status"] != "ok"]
    assert len(problems) == len(skipped) and problems["reason"].str.len().min() > 0


def test_filters_change_what_is_shown(monkeypatch, store):
    app = open_app(monkeypatch, store)
    before = charts(app)
    app.multiselect(key="experiment").set_value(["seq-len"]).run()
    seq_len_cells = [line for line in cell_lines(CPU_RUN) if line["experiment"] == "seq-len"]
    assert len(cell_table(app)) == len(seq_len_cells)
    assert charts(app) == 3 < before  # latency, TFLOP/s and memory against T
    app.multiselect(key="variant").set_value(["xla"]).run()
    assert set(cell_table(app)["variant"]) == {"xla"}


def test_selection_is_read_from_the_query_parameters(monkeypatch, store):
    app = open_app(monkeypatch, store, experiment=["gqa", "batch"], causal="False", timer="wall")
    assert app.multiselect(key="experiment").value == ["gqa", "batch"]
    assert app.multiselect(key="causal").value == [False]
    assert app.radio(key="timer").value == "wall"
    assert set(cell_table(app)["experiment"]) == {"gqa", "batch"}


def test_empty_store_says_so(monkeypatch, tmp_path):
    app = open_app(monkeypatch, tmp_path)
    assert not app.exception
    assert "No runs under" in app.info[0].value


def test_unreachable_bucket_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setattr(data, "STORE_TIMEOUT_S", 1.0)
    app = open_app(monkeypatch, f"gs://{BUCKET}/results")
    assert not app.exception
    assert f"gs://{BUCKET}/results: unreachable" in app.error[0].value and not app.info


def test_a_bad_location_says_why(monkeypatch):
    app = open_app(monkeypatch, "gs://No_Such-Bucket!")
    assert not app.exception
    assert "not a bucket URI" in app.error[0].value and not app.info


def test_runs_in_a_bucket(monkeypatch, emulator):
    for path in CPU_RUN.iterdir():
        emulator.bucket().blob(f"results/cpu/{CPU_RUN.name}/{path.name}").upload_from_filename(path)
    app = open_app(monkeypatch, f"gs://{BUCKET}/results")
    assert not app.exception and not app.error
    assert charts(app) == 9
    assert len(cell_table(app)) == len(cell_lines(CPU_RUN))


def test_corrupted_files_are_reported_and_the_rest_renders(monkeypatch, store):
    run_dir = store / "cpu" / CPU_RUN.name
    with open(run_dir / CELLS, "a") as f:
        f.write('{"schema_version": 1, "key": "trunc\n')
        f.write(json.dumps({**cell_lines(CPU_RUN)[0], "schema_version": 99}) + "\n")
    broken = store / "cpu" / "broken-run"
    broken.mkdir()
    (broken / MANIFEST).write_text("{ not json")
    app = open_app(monkeypatch, store)
    assert not app.exception and not app.error
    warning = app.warning[0].value
    assert "problem(s) reading results" in warning and "not valid JSON" in warning and "schema_version 99" in warning
    assert "broken-run/manifest.json" in warning
    assert len(cell_table(app)) == len(cell_lines(CPU_RUN))  # every good line still loads
    assert charts(app) == 9


def fake_gpu_run(out: Path, run_id: str, scale: float = 1.0) -> Path:
    """A run shaped like a GPU run's: a causal te/cudnn/xla sweep over T and FP8 cells beside their bf16 twins."""
    template = read_run(CPU_RUN)
    started = f"2026-12-0{2 + int(scale)}T10:00:00+00:00"
    machine = template.manifest.machine.model_copy(update={"gpu": {"name": "NVIDIA H200"}, "matmul_peak_tflops": 700.0})
    manifest = template.manifest.model_copy(update={"run_id": run_id, "machine": machine, "started_at": started})
    base = next(c for c in template.cells if c.status == "ok")
    cells = [
        *[("te-causal", v, b, t, None, t * k * 1e-6)
          for v, b, k in (("te", "transformer_engine", 1), ("cudnn", "cudnn", 2), ("xla", "xla", 4))
          for t in (128, 256, 512)],
        ("fp8", "te", "transformer_engine", 2048, None, 2e-3),
        ("fp8", "te_fp8", "transformer_engine", 2048, "te", 1e-3),
        ("fp8", "cudnn", "cudnn", 2048, None, 2e-3), ("fp8", "cudnn_fp8", "cudnn", 2048, "cudnn", 1.6e-3),
    ]
    records = []
    for experiment, variant, backend, seq_len, fp8_baseline, seconds in cells:
        seconds *= scale
        params = base.params.model_copy(update={"seq_len": seq_len, "kv_seq_len": seq_len, "causal": True})
        timing = Timing(timer="device", median_s=seconds, q1_s=seconds * 0.99, q3_s=seconds * 1.01, min_s=seconds,
                        samples=50, noise=0.02, converged=True)
        real = fp8_baseline == "cudnn"
        fp8 = fp8_baseline and Fp8Info(in_hlo=real, in_kernels=real, rel_err_vs_bf16=0.01, verdict="FP8 attention"
                                       if real else f"not FP8: output differs from {fp8_baseline} by 0.01")
        records.append(base.model_copy(update={
            "key": f"{experiment}-{variant}-{seq_len}", "run_id": run_id, "experiment": experiment, "variant": variant,
            "params": params, "backend": backend, "timings": [timing], "timer": "device", "median_s": seconds,
            "fp8": fp8 or None, "started_at": started,
        }))
    run_dir = out / run_id
    run_dir.mkdir(parents=True)
    (run_dir / MANIFEST).write_text(manifest.model_dump_json(by_alias=True))
    (run_dir / CELLS).write_text("".join(r.model_dump_json(by_alias=True) + "\n" for r in records))
    return run_dir


def test_gpu_shaped_run_draws_backends_peak_and_fp8_truth_table(monkeypatch, tmp_path):
    fake_gpu_run(tmp_path / "h200", "h200-run")
    app = open_app(monkeypatch, tmp_path)
    assert not app.exception and not app.error
    assert "NVIDIA H200 · 2026-12-03 10:00" in app.multiselect(key="run").format_func("h200-run")
    fp8 = table(app, "speedup_vs_bf16").set_index("variant")
    assert fp8.loc["te_fp8", "baseline"] == "te" and fp8.loc["cudnn_fp8", "baseline"] == "cudnn"
    assert fp8.loc["te_fp8", "speedup_vs_bf16"] == pytest.approx(2.0)
    assert fp8.loc["cudnn_fp8", "fp8_in_program"] and not fp8.loc["te_fp8", "fp8_in_program"]
    infos = " ".join(i.value for i in app.info)
    assert "two or more backends" not in infos and "no % of peak" not in infos


def test_compare_flags_only_differences_beyond_both_runs_noise():
    a, b = read_run(CPU_RUN), read_run(CPU_RUN)

    def retime(run, key: str, median: float, spread: float) -> None:
        cell = next(c for c in run.cells if c.key == key)
        cell.timings = [Timing(timer="wall", median_s=median, q1_s=median - spread, q3_s=median + spread,
                               min_s=median - spread, samples=10, noise=2 * spread / median, converged=True)]

    keys = [c.key for c in a.cells if c.status == "ok"][:3]
    for key in keys:
        retime(a, key, 1.0, 0.1)
    retime(b, keys[0], 1.5, 0.1)  # beyond both IQRs (0.2 each)
    retime(b, keys[1], 1.05, 0.1)  # within a's noise
    retime(b, keys[2], 1.5, 1.0)  # beyond a's IQR but within b's
    table = data.compare(a, b, "wall").set_index(pd.Index([c.key for c in a.cells if c.status == "ok"]))
    assert table.loc[keys, "beyond_noise"].tolist() == [True, False, False]
    assert table.loc[keys[0], "ratio_b_over_a"] == pytest.approx(1.5)


def test_compare_view_between_two_runs(monkeypatch, tmp_path):
    fake_gpu_run(tmp_path / "h200", "before")
    fake_gpu_run(tmp_path / "h200", "after", scale=2.0)
    app = open_app(monkeypatch, tmp_path, a="before", b="after")
    assert not app.exception and not app.error
    caption = next(c.value for c in app.caption if c.value.startswith("A = "))
    assert "timer device · 13 of 13 cells differ" in caption  # every cell took twice as long
    ratios = table(app, "ratio_b_over_a")["ratio_b_over_a"]
    assert ratios.to_numpy() == pytest.approx(2.0)


def test_results_uri_from_argv_env_or_shipped(monkeypatch):
    monkeypatch.delenv(data.RESULTS_ENV, raising=False)
    assert data.results_uri([]) == str(data.SHIPPED_RESULTS)
    assert data.results_uri(["--results", "gs://bucket/prefix"]) == "gs://bucket/prefix"
    monkeypatch.setenv(data.RESULTS_ENV, "/elsewhere")
    assert data.results_uri(["-q", "--res", "x"]) == "/elsewhere"


def test_cli_dashboard_runs_streamlit_on_the_app():
    args = build_parser().parse_args(["dashboard", "--results", "gs://b/p", "--port", "9999", "--address", "0.0.0.0"])
    argv = dashboard_argv(args)
    assert argv[1:4] == ["-m", "streamlit", "run"] and Path(argv[4]) == APP
    assert argv[argv.index("--server.port") + 1] == "9999" and argv[argv.index("--server.address") + 1] == "0.0.0.0"
    assert argv[-3:] == ["--", "--results", "gs://b/p"]
    assert "--" not in dashboard_argv(build_parser().parse_args(["dashboard"]))
