"""The dashboard (dashboard/) under streamlit's AppTest, on the shipped runs and on stores copied from them.

The tests named after issue 14's findings (links, run identity, charts, compare, scale) each failed on the
dashboard as it stood before the issue; the figures are read as the JSON the browser receives.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st

from conftest import BUCKET, free_port
from helpers import DASHBOARD_APP as APP
from helpers import DASHBOARD_SERVER
from helpers import REPO, charts, figures, in_process, open_app
from dashboard import data
from dashboard.charts import VERDICT_COLOURS
from runner.cli import build_parser, dashboard_argv
from runner.power import UNSTABLE_SPREAD
from runner.record import NO_POLICY
from runner.results import CELLS
from runner.store import LocalStore
from stores import (CPU_LAB5, H200_LAB5, H200_LAB5_NO_TE, H200_LONG, SHIPPED, broken, copy_files, copy_run,
                    generate, shipped, telemetry, tuned, write_run)

LAB5 = H200_LAB5.rpartition("/")[2]
LAB5_NO_TE = H200_LAB5_NO_TE.rpartition("/")[2]
LLAMA_70B = "llama3.1-70b-20261203"  # the preset run whose prefill sweeps T, causal and tp
SOAK = "soak-20261203"  # the shipped soak run
LONG = H200_LONG.rpartition("/")[2]
TABS = ["Latency", "Throughput", "Memory", "Heads", "Backends", "FP8", "Leaderboard", "History", "Compare", "Soak", "Cells",
        "Runs"]


@pytest.fixture(autouse=True)
def fresh_cache():
    """Each test reads its store anew (stores are cached per location, and bucket tests reuse one location)."""
    st.cache_resource.clear()


def cell_lines(folder: str) -> list[dict]:
    return [json.loads(line) for line in (SHIPPED / folder / CELLS).read_text().splitlines()]


def tables_with(app, column: str) -> list[pd.DataFrame]:
    """The tables (st.dataframe or st.table) with `column`, in page order within each kind."""
    return [t.value for t in [*app.dataframe, *app.table] if column in t.value]


def table(app, column: str) -> pd.DataFrame:
    return tables_with(app, column)[0]


def heading(figure: dict, part: str = "title") -> str:
    """A figure's title (or "subtitle") as a person reads it: its lines (charts.fit wraps it) joined by spaces."""
    title = figure["layout"].get("title", {})
    return (title.get("subtitle", {}) if part == "subtitle" else title).get("text", "").replace("<br>", " ")


def titled(app, words: str) -> dict:
    """The figure whose title holds `words`."""
    return next(f for f in figures(app) if words in heading(f))


def texts(elements) -> str:
    return " ".join(e.value for e in elements)


def lab5_trio(tmp_path: Path) -> Path:
    """The two shipped H200 lab5 runs and a third copied from the newer one, as three nightly runs."""
    for source in (H200_LAB5, H200_LAB5_NO_TE):
        shutil.copytree(SHIPPED / source, tmp_path / source)
    copy_files(H200_LAB5, tmp_path / "h200" / "lab5-20261203-110556", "lab5-20261203-110556",
               "2026-12-03T11:05:56+00:00", 1.02)
    return tmp_path


def select(app, *runs: str):
    """Pick runs through the widget (as a person would), whatever the link said."""
    return app.multiselect(key="run").set_value(list(runs)).run()


# --- every tab, as shipped ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("tab", TABS)
def test_every_tab_renders_with_data_on_the_shipped_runs(monkeypatch, tab):
    app = open_app(monkeypatch, run=[LAB5, LONG, LAB5_NO_TE, *([SOAK] if tab == "Soak" else [])], tab=tab)
    assert not app.exception and not app.error
    assert [t.label for t in app.tabs] == TABS
    assert charts(app) + len(app.dataframe) >= 1
    assert not app.info, texts(app.info)  # no "nothing to show" on runs that have it all


def test_the_first_screen_says_which_variant_is_fastest_in_the_newest_run(monkeypatch):
    """Above the tabs, under the counts: the newest selected run's winners over the shapes two or more correct variants
    ran, as runner.leaderboard ranks its records by their headline (device) timer; the runs' table keeps a run to a
    line (a git sha cut to 12 characters)."""
    from dashboard import views
    from runner.leaderboard import contested, leaderboard

    app = open_app(monkeypatch, run=[LAB5, LAB5_NO_TE])
    newest = shipped(H200_LAB5)
    board = contested(leaderboard(newest.cells))
    said = [m.value for m in app.markdown if m.value.startswith("By the ")]
    assert said == [f"By the device timer in `{LAB5}`: {views.board_summary(board)} (every shape: Leaderboard)"]
    assert ("**cudnn** fastest at 17, **xla** at 1 of 18 shapes; auto within 5 % of the fastest at 1 of 2"
            in said[0])
    llama = open_app(monkeypatch, run=["llama3.1-70b-20261206-tefp8"])
    sha = shipped("h200/llama3.1-70b-20261206-tefp8").manifest.git_sha
    assert len(sha) == 40 and f"| {sha[:12]} |" in texts(llama.markdown) and sha not in texts(llama.markdown)
    assert "| llama3.1-70b-20261206-tefp8 | llama3.1-70b | NVIDIA H200 | steady (in load) |" in texts(llama.markdown)


def test_the_first_screens_winners_are_over_the_shapes_two_variants_ran_correctly(monkeypatch):
    """The CPU lab5 run timed 17 shapes, 4 of them by one correct variant alone: its first screen counts the 13 that
    runner.leaderboard.contested holds, as show's board does, not every shape timed."""
    from runner.leaderboard import leaderboard

    run = shipped(CPU_LAB5)
    assert len(leaderboard(run.cells)) == 17
    app = open_app(monkeypatch, run=[CPU_LAB5.rpartition("/")[2]])
    said = [m.value for m in app.markdown if m.value.startswith("By the ")]
    assert len(said) == 1 and " of 13 shapes" in said[0], said


def test_the_runs_table_keeps_the_dirty_suffix_of_edited_code(monkeypatch, tmp_path):
    """A run of edited code (runner.machine.git_sha's `-dirty` after the commit) reads so in the runs' table, where
    the sha is cut to 12 characters: the cut takes the commit, not the suffix."""
    sha = "0123456789abcdef" * 2 + "01234567"
    for run_id, started, git_sha in (("clean", "2026-12-20", sha), ("edited", "2026-12-21", sha + "-dirty")):
        run = copy_run(shipped(H200_LONG), run_id, datetime.fromisoformat(f"{started}T03:00:00+00:00"), git_sha)
        write_run(tmp_path / "h200" / run_id, *run)
    said = texts(open_app(monkeypatch, tmp_path, run=["edited", "clean"]).markdown)
    assert "| edited |" in said and f"| {sha[:12]}-dirty |" in said and f"| {sha[:12]} |" in said


def test_throughput_without_a_measured_ceiling_says_so_once_and_draws_the_rates_two_to_a_row(monkeypatch):
    """The CPU run has no measured matmul peak or bandwidth: one sentence says so, where each experiment's rate stood
    beside the same sentence; the rates stand two to a row, plots level, in spec order. No FP8 cell is drawn, so
    nothing explains FP8 above the bf16 peak (a run with FP8 cells keeps that line)."""
    cpu = CPU_LAB5.rpartition("/")[2]
    app = open_app(monkeypatch, run=cpu, tab="Throughput")
    assert not app.exception and not app.error
    assert [i.value for i in app.info] == ["No measured matmul peak or memory bandwidth in these runs (the runner "
                                           "measures them on GPUs), so no % of either."]
    drawn = figures(app)
    assert len(drawn) >= 3 and all(heading(f).endswith(("vs T", "vs B", "vs K")) for f in drawn)
    assert drawn[0]["layout"]["margin"]["t"] == drawn[1]["layout"]["margin"]["t"]  # beside each other: level
    assert "FP8 tensor cores" not in texts(app.caption)  # no FP8 cell drawn: nothing to explain
    assert "FP8 tensor cores" in texts(open_app(monkeypatch, run=LAB5, tab="Throughput").caption)


def test_throughput_says_why_a_decode_cell_passes_100_percent_of_the_measured_bandwidth(monkeypatch):
    """The shipped decode run reads up to 108.2 % of the copy's rate (pallas_decode 4636.5 of 4285.2 GB/s): a line
    says why, as FP8 above the bf16 peak has one, `attnbench show`'s (runner.report.copy_passed), naming the GPU the
    copy was measured on, not an H200's nominal rate whatever the GPU; a run whose cells stay under it gets none."""
    from runner.report import copy_passed

    said = texts(open_app(monkeypatch, run="decode-20261202", tab="Throughput").caption)
    assert copy_passed("NVIDIA H200") in said and "4,800" not in said
    assert "read-mostly" not in texts(open_app(monkeypatch, run=LAB5, tab="Throughput").caption)


def test_throughput_says_what_a_packed_rows_flops_and_a_serving_cells_bytes_count_as_show_does(monkeypatch):
    """runner.report's sentences, where the tab draws a packed row's TFLOP/s or a serving cell's GB/s
    (dashboard.tables.rate_notes says which)."""
    from runner.report import PACKED_FLOPS, SERVING_BYTES

    fixtures = REPO / "tests" / "fixtures"
    packed = texts(open_app(monkeypatch, fixtures / "schema10-packed", tab="Throughput").caption)
    serving = texts(open_app(monkeypatch, fixtures / "serving-cpu", tab="Throughput", rate="GB/s").caption)
    assert PACKED_FLOPS in packed and SERVING_BYTES not in packed and SERVING_BYTES in serving


def test_the_soak_tab_draws_the_shipped_curve_and_says_so_where_there_is_none(monkeypatch):
    app = open_app(monkeypatch, run=[SOAK], tab="Soak")
    assert not app.exception and not app.error and not app.info
    drawn = figures(app)
    assert len(drawn) == 4  # throughput, SM clock, power, temperature against seconds of load
    throughput = drawn[0]["data"][0]
    record = json.loads((SHIPPED / "h200" / SOAK / CELLS).read_text().splitlines()[0])["soak"]["points"]
    assert list(throughput["x"]) == [p["t_s"] for p in record] and list(throughput["y"]) == [p["tflops"] for p in record]
    for figure in drawn:  # the house's legends: the variant by its colour under the plot, the cell in the subtitle
        legend, keys = figure["layout"]["legend"], [t for t in figure["data"] if t.get("showlegend")]
        assert (legend["orientation"], legend["title"]["text"], legend["yref"]) == ("h", "variant ", "container")
        assert [t["name"] for t in keys] == ["cudnn"] and figure["data"][0]["showlegend"] is False
        assert heading(figure, "subtitle") == "B1 T16384 N64 K8 H128 bfloat16 causal fwd"
    none = open_app(monkeypatch, run=[LAB5], tab="Soak")
    assert "No cell of the selection has a soak" in texts(none.info)


def test_a_run_that_has_written_only_its_manifest_renders_every_tab(monkeypatch, tmp_path):
    folder = copy_files(H200_LONG, tmp_path / "h200" / "just-started", "just-started", "2026-12-09T00:00:00+00:00")
    (folder / CELLS).unlink()
    for tab in TABS:
        app = open_app(monkeypatch, tmp_path, tab=tab)
        assert not app.exception and not app.error, tab
    assert app.markdown[0].value.startswith("**1 of 1 run** · NVIDIA H200 · cells: **0 ok**")


def two_nights(folder: Path) -> tuple[str, str]:
    """Copies of two shipped runs a day apart, lab5 then hopper-long: (older, newer)."""
    copy_files(H200_LAB5, folder / "h200" / "night-1", "night-1", "2026-12-20T03:00:00+00:00")
    copy_files(H200_LONG, folder / "h200" / "night-2", "night-2", "2026-12-21T03:00:00+00:00")
    return "night-1", "night-2"


def test_the_newest_run_is_shown_when_the_link_names_none(monkeypatch, tmp_path):
    older, newer = two_nights(tmp_path)
    app = open_app(monkeypatch, tmp_path)
    assert app.multiselect(key="run").value == [newer]
    status = pd.Series([c.status for c in shipped(H200_LONG).cells])
    assert app.markdown[0].value.startswith(
        f"**1 of 2 runs** · NVIDIA H200 · cells: **{(status == 'ok').sum()} ok**, {(status == 'skipped').sum()} "
        "skipped (expected)")



def test_each_choice_the_page_makes_for_a_link_that_names_none_is_written_into_the_url(monkeypatch, tmp_path):
    """docs/dashboard.md, Links: the newest run, History's series and Compare's runs A and B, chosen for a link that
    names none, go into the URL, so the address copied from the browser keeps naming them when a newer run lands."""
    older, newer = two_nights(tmp_path)
    history = open_app(monkeypatch, tmp_path, tab="History").query_params
    assert (history["run"], history["series"]) == (newer, "hopper-long · NVIDIA H200 · none")
    compare = open_app(monkeypatch, tmp_path, tab="Compare").query_params
    assert (compare["run"], compare["a"], compare["b"]) == (newer, older, newer)

def test_a_compare_link_naming_one_run_chooses_the_other_from_it_and_writes_it(monkeypatch):
    """docs/dashboard.md, Links: B alone chooses its run before as A, A alone its run after as B (as `attnbench
    compare --against previous` pairs them), where A and B came from the newest run, another spec and policy."""
    named_b = open_app(monkeypatch, tab="Compare", b="lab5-cold-20261203-023042").query_params
    assert (named_b["a"], named_b["b"]) == ("lab5-warm-20261202-182308", "lab5-cold-20261203-023042")
    named_a = open_app(monkeypatch, tab="Compare", a="lab5-20261202-104743").query_params
    assert (named_a["a"], named_a["b"]) == ("lab5-20261202-104743", "lab5-20261202-110556")
    last = open_app(monkeypatch, tab="Compare", a="lab5-warm-20261203-023042")
    assert "b" not in last.query_params
    assert "No run after `lab5-warm-20261203-023042` in its series" in texts(last.info)


def test_a_bare_compare_pairs_two_runs_of_one_series_where_the_newest_has_none(monkeypatch, tmp_path):
    older, newer = two_nights(tmp_path)  # lab5, then hopper-long: no cell in common
    copy_files(H200_LAB5, tmp_path / "h200" / "night-0", "night-0", "2026-12-19T03:00:00+00:00")
    compare = open_app(monkeypatch, tmp_path, tab="Compare").query_params
    assert (compare["a"], compare["b"]) == ("night-0", older)


def test_a_history_with_no_series_chosen_asks_for_one(monkeypatch, tmp_path):
    """Back from a bare History open shows the step before it chose its series (docs/dashboard.md, Links), where the
    page said 'No timed cell in the runs of None.'"""
    two_nights(tmp_path)
    app = open_app(monkeypatch, tmp_path, tab="History").selectbox(key="series").set_value(None).run()
    assert texts(app.info) == "Choose a spec · GPU · power policy to draw its runs."


def test_a_soak_newer_than_every_other_run_is_passed_over_by_default(monkeypatch, tmp_path):
    older, newer = two_nights(tmp_path)
    copy_files(f"h200/{SOAK}", tmp_path / "h200" / SOAK, SOAK, "2026-12-22T03:00:00+00:00")
    app = open_app(monkeypatch, tmp_path)
    runs = data.snapshot(str(tmp_path), data.RunCache()).runs
    assert runs["started"].idxmax() == SOAK and runs.loc[SOAK, "soak"]
    assert app.multiselect(key="run").value == [newer]


def test_a_recheck_newer_than_every_other_run_is_passed_over_by_default(monkeypatch, tmp_path):
    """A night's recheck (its slower cells measured again) is newer than the night, and holds those cells alone."""
    older, newer = two_nights(tmp_path)
    manifest, cells = copy_run(shipped(H200_LONG), f"{newer}-recheck", pd.Timestamp("2026-12-21T04:00Z").to_pydatetime())
    write_run(tmp_path / "h200" / f"{newer}-recheck", manifest.model_copy(update={"rechecks": newer}), cells[:1])
    app = open_app(monkeypatch, tmp_path)
    assert app.multiselect(key="run").value == [newer]


def test_a_cpu_run_says_what_it_cannot_show(monkeypatch):
    cpu = CPU_LAB5.rpartition("/")[2]
    assert "two or more backends" in texts(open_app(monkeypatch, run=cpu, tab="Backends").info)
    fp8 = table(open_app(monkeypatch, run=cpu, tab="FP8"), "verdict")  # FP8 variants are listed even when skipped
    assert set(fp8["variant"]) == {"cudnn_fp8", "te_fp8"} and fp8["verdict"].str.startswith("skipped: ").all()
    app = open_app(monkeypatch, run=cpu, tab="Throughput")
    assert "so no % of either" in texts(app.info) and charts(app) == 4  # TFLOP/s of seq-len, batch, gqa, te-causal


def test_every_cell_is_in_the_cells_tab_and_failures_are_grouped_by_reason(monkeypatch):
    app = open_app(monkeypatch, run=[LAB5, LAB5_NO_TE], tab="Cells")
    every = table(app, "duration_s")
    lines = cell_lines(H200_LAB5) + cell_lines(H200_LAB5_NO_TE)
    assert len(every) == len(lines)
    assert {"key", "run_id", "wall_median_s", "device_median_s", "temp_bytes", "reason", "rel_err"} <= set(every)
    failed, skipped = tables_with(app, "reason")[:2]
    # cuDNN 9.14's cudnn_fp8: two cells, 'out relative error 12.4' and '2.85', one reason
    assert failed[["variant", "status", "cells"]].values.tolist() == [["cudnn_fp8", "incorrect", 2]]
    te = skipped[skipped["variant"] == "te"].iloc[0]
    assert "not installed" in te["reason"] and te["cells"] == 7
    assert skipped["cells"].sum() == sum(line["status"] == "skipped" for line in lines)


def test_filters_narrow_what_is_drawn(monkeypatch):
    app = open_app(monkeypatch, run=LAB5, more="true")
    before = charts(app)
    app.multiselect(key="experiment").set_value(["seq-len"]).run()
    assert charts(app) == 1 < before
    app.multiselect(key="variant").set_value(["xla"]).run()
    assert {t["name"] for t in figures(app)[0]["data"] if t.get("showlegend")} == {"xla"}


def test_a_column_of_one_value_has_no_filter_unless_a_link_chose_it(monkeypatch):
    keys = {w.key for w in open_app(monkeypatch, run=LAB5).sidebar.multiselect}
    assert {"experiment", "variant"} <= keys and "pass" not in keys  # LAB5 times the forward pass only
    chosen = open_app(monkeypatch, run=LAB5, **{"pass": "bwd"})
    assert chosen.multiselect(key="pass").value == ["bwd"]
    assert "Pass: bwd is in none of the selected runs" in [w.value for w in chosen.sidebar.warning]


def test_the_view_is_read_from_the_query_parameters(monkeypatch):
    app = open_app(monkeypatch, run=LAB5, experiment=["gqa", "batch"], causal="False", timer="wall", tab="Cells")
    assert app.multiselect(key="experiment").value == ["gqa", "batch"]
    assert app.multiselect(key="causal").value == [False] and app.radio(key="timer").value == "wall"
    assert set(table(app, "duration_s")["experiment"]) == {"gqa", "batch"}


def test_summary_tables_come_as_markdown_to_copy_when_asked(monkeypatch):
    plain = open_app(monkeypatch, run=[LAB5, LAB5_NO_TE], experiment="seq-len")
    assert not plain.code and [m.value for m in plain.markdown if m.value.startswith("| T |")][0].startswith(
        "| T | naive | xla | cudnn |\n|---|---|---|---|\n| 64 | ")
    asked = open_app(monkeypatch, run=[LAB5, LAB5_NO_TE], experiment="seq-len", md="true")
    copied = asked.code[0].value
    assert copied.startswith(f"{LAB5}\n\n| T | naive | xla | cudnn |") and f"\n\n{LAB5_NO_TE}\n\n| T |" in copied


def test_an_empty_store_says_so(monkeypatch, tmp_path):
    app = open_app(monkeypatch, tmp_path)
    assert not app.exception and "No runs under" in app.info[0].value


def test_an_unreachable_bucket_says_why(monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setattr(data, "STORE_TIMEOUT_S", 1.0)
    app = open_app(monkeypatch, f"gs://{BUCKET}/results")
    assert not app.exception
    assert f"gs://{BUCKET}/results: unreachable" in app.error[0].value and not app.info


def test_a_bad_location_says_why(monkeypatch):
    app = open_app(monkeypatch, "gs://No_Such-Bucket!")
    assert not app.exception and "not a bucket URI" in app.error[0].value and not app.info


def test_runs_in_a_bucket(monkeypatch, emulator):
    for path in (SHIPPED / H200_LONG).iterdir():
        emulator.bucket().blob(f"results/h200/{LONG}/{path.name}").upload_from_filename(path)
    app = open_app(monkeypatch, f"gs://{BUCKET}/results", tab="Cells")
    assert not app.exception and not app.error
    assert len(table(app, "duration_s")) == len(cell_lines(H200_LONG))


def test_bad_lines_and_a_missing_manifest_are_reported_at_the_top_and_the_rest_renders(monkeypatch, tmp_path):
    run_dir = shutil.copytree(SHIPPED / H200_LONG, tmp_path / H200_LONG)
    with open(run_dir / CELLS, "a") as f:
        f.write('{"schema_version": 1, "key": "trunc\n')
        f.write(json.dumps({**cell_lines(H200_LONG)[0], "schema_version": "x"}) + "\n")
    (tmp_path / "h200" / "no-manifest").mkdir()
    shutil.copy(run_dir / CELLS, tmp_path / "h200" / "no-manifest" / CELLS)
    app = open_app(monkeypatch, tmp_path, run=LONG, tab="Cells")
    assert not app.exception and not app.error
    warning = app.warning[0].value
    assert "problems reading results" in warning and "not valid JSON" in warning
    assert "schema_version 'x' is not a version" in warning and "no-manifest/manifest.json: missing" in warning
    assert len(table(app, "duration_s")) == len(cell_lines(H200_LONG))  # every good line still loads
    assert "no-manifest" in app.multiselect(key="run").options


# --- issue 14: links ---------------------------------------------------------------------------------------------

def test_a_docs_link_opens_that_run_not_the_newest(monkeypatch):
    app = open_app(monkeypatch, run=LAB5_NO_TE, experiment="seq-len")  # docs/dashboard.md: ?run=...104743&experiment=seq-len
    assert app.multiselect(key="run").value == [LAB5_NO_TE]
    assert app.multiselect(key="experiment").value == ["seq-len"]
    assert {heading(f) for f in figures(app)} == {"seq-len: latency vs T"}
    assert {n for f in figures(app) for n in (t.get("name") for t in f["data"]) if n and "·" in n} == {
        f"{v} · {LAB5_NO_TE}" for v in ("naive", "xla", "cudnn")}


def test_an_experiment_the_runs_lack_stays_in_the_link_and_is_flagged(monkeypatch):
    app = open_app(monkeypatch, run=LAB5, experiment="fwd")  # fwd is hopper-long's
    assert app.multiselect(key="experiment").value == ["fwd"]
    assert "Experiment: fwd is in none of the selected runs" in texts(app.sidebar.warning)


def test_the_link_names_the_run_it_shows(monkeypatch, tmp_path):
    """A link copied from the default view keeps showing that run after a newer one arrives."""
    older, newer = two_nights(tmp_path)
    app = open_app(monkeypatch, tmp_path)
    assert app.session_state["run"] == [newer] and app.multiselect(key="run").value == [newer]


# --- issue 14: run identity --------------------------------------------------------------------------------------

def test_runs_started_in_the_same_minute_are_told_apart(monkeypatch, tmp_path):
    copy_files(H200_LONG, tmp_path / "h200" / "hopper-long-20261202-110136", "hopper-long-20261202-110136",
               "2026-12-02T11:01:36+00:00")
    copy_files(H200_LONG, tmp_path / "h200" / "hopper-long-20261202-110159", "hopper-long-20261202-110159",
               "2026-12-02T11:01:59+00:00", 2.0)
    app = open_app(monkeypatch, tmp_path, tab="Compare")
    assert len(set(app.multiselect(key="run").options)) == 2  # the labels a person picks from
    select(app, "hopper-long-20261202-110136")
    assert app.multiselect(key="run").value == ["hopper-long-20261202-110136"]
    a, b = app.selectbox(key="a"), app.selectbox(key="b")
    assert len(set(a.options)) == len(a.options) == 2 and a.value != b.value


def test_a_run_id_in_two_folders_is_kept_and_reported(monkeypatch, tmp_path):
    for machine in ("h200", "h200-again"):
        shutil.copytree(SHIPPED / H200_LONG, tmp_path / machine / LONG)
    app = open_app(monkeypatch, tmp_path)
    assert f"run id {LONG} is in 2 folders" in texts(app.warning)
    assert sorted(app.multiselect(key="run").options) == [f"h200-again/{LONG}", f"h200/{LONG}"]


def test_run_choices_read_as_whole_run_ids(monkeypatch):
    app = open_app(monkeypatch, tab="Compare")
    for widget in (app.multiselect(key="run"), app.selectbox(key="a"), app.selectbox(key="b")):
        assert sorted(widget.options) == sorted(d.name for d in SHIPPED.glob("*/*"))  # the labels shown


# --- issue 14: wrong charts ---------------------------------------------------------------------------------------

def test_bars_of_several_runs_stand_side_by_side_not_stacked(monkeypatch, tmp_path):
    app = select(open_app(monkeypatch, lab5_trio(tmp_path), tab="Backends"), LAB5, "lab5-20261203-110556", LAB5_NO_TE)
    fp8 = next(f for f in figures(app) if "cudnn_fp8" in json.dumps(f["data"]) and f["data"][0]["type"] == "bar")
    assert fp8["layout"].get("barmode") == "group"
    bars = [t for t in fp8["data"] if t["type"] == "bar" and t.get("x") != [None]]
    assert all(len(set(t["x"])) == len(t["x"]) for t in bars)  # one bar per category and trace: nothing sums
    no_te = next(t for t in bars if t["name"] == f"cudnn_fp8 · {LAB5_NO_TE}")
    recorded = {c["params"]["causal"]: c["timings"][1]["median_s"] * 1e3 for c in cell_lines(H200_LAB5_NO_TE)
                if c["experiment"] == "fp8" and c["variant"] == "cudnn_fp8"}
    assert no_te["y"] == pytest.approx([recorded[True]])


def test_lines_of_several_runs_do_not_zigzag(monkeypatch, tmp_path):
    app = select(open_app(monkeypatch, lab5_trio(tmp_path), tab="Backends"), LAB5, "lab5-20261203-110556", LAB5_NO_TE)
    lines = [t for f in figures(app) for t in f["data"] if t.get("mode") == "lines+markers" and t.get("x") != [None]]
    assert lines and all(list(t["x"]) == sorted(set(t["x"])) for t in lines)


def test_the_backends_tab_names_each_variants_cudnn_where_they_ran_two_releases(monkeypatch):
    """TE's worker loads cuDNN 9.14.0 beside jax's 9.19.0 (llama3.1-70b-20261206-burst's manifest): the table beside
    the chart names each variant's, "—" for a kernel that is not cuDNN's; a run of one release (no TE) has no column."""
    proved = table(open_app(monkeypatch, run="llama3.1-70b-20261206-burst", tab="Backends"), "custom_calls")
    releases = dict(zip(proved["variant"], proved["cuDNN"]))
    assert (releases["te"], releases["cudnn"], releases["xla"]) == ("9.14.0", "9.19.0", "—")
    assert "cuDNN" not in table(open_app(monkeypatch, run=LAB5_NO_TE, tab="Backends"), "custom_calls")


# --- issue 14: readability ---------------------------------------------------------------------------------------

def test_log_axes_tick_at_1_2_5(monkeypatch):
    app = select(open_app(monkeypatch), CPU_LAB5.rpartition("/")[2])
    app.radio(key="timer").set_value("wall").run()
    app.multiselect(key="experiment").set_value(["seq-len"]).run()
    axis = figures(app)[0]["layout"]["yaxis"]
    assert axis["type"] == "log"
    mantissas = {round(v / 10 ** math.floor(math.log10(v) + 1e-9)) for v in axis.get("tickvals", [])}
    assert mantissas == {1, 2, 5} and len(axis["tickvals"]) >= 4 and axis["ticktext"][0] != ""


def test_a_cpu_runs_tables_mark_times_that_did_not_converge_and_name_no_clock(monkeypatch):
    """The shipped CPU run reads no SM clock and most of its wall times ran out of budget: the legend above its
    nvbench tables says what † means and nothing of a clock, and its entries carry the mark (runner.marks)."""
    app = select(open_app(monkeypatch), CPU_LAB5.rpartition("/")[2])
    app.radio(key="timer").set_value("wall").run()
    legends = [c.value for c in app.caption if c.value.startswith("median (ms)")]
    assert legends and all("† not converged: " in c and "SM clock" not in c for c in legends)
    assert any(" † ·" in m.value for m in app.markdown if m.value.startswith("| T |"))


def test_a_variant_has_one_colour_in_every_chart(monkeypatch, tmp_path):
    app = select(open_app(monkeypatch, lab5_trio(tmp_path), tab="Latency", more="true"), LAB5, LAB5_NO_TE)
    seen = {}
    for figure in figures(app):
        for trace in figure["data"]:
            variant = re.split(r"[ ·]", str(trace.get("name", "")))[0]
            colour = trace.get("line", {}).get("color") or trace.get("marker", {}).get("color")
            if trace.get("legend", "legend") == "legend" and variant and isinstance(colour, str):
                seen.setdefault(variant, set()).add(colour)
    assert {"naive", "xla", "cudnn", "te"} <= set(seen) and all(len(c) == 1 for c in seen.values())
    assert len({next(iter(c)) for c in seen.values()}) == len(seen)


def test_legends_list_variants_and_runs_not_their_product(monkeypatch, tmp_path):
    app = select(open_app(monkeypatch, lab5_trio(tmp_path), tab="Latency"), LAB5, "lab5-20261203-110556", LAB5_NO_TE)
    for figure in figures(app):
        entries = [t["name"] for t in figure["data"] if t.get("showlegend", True)]
        variants = {re.split(r"[ ·]", t["name"])[0] for t in figure["data"]} & {"naive", "xla", "auto", "cudnn", "te"}
        assert len(entries) <= len(variants) + 3 and figure["layout"]["legend"].get("orientation") == "h"
    entries = [t["name"] for t in titled(app, "seq-len")["data"] if t.get("showlegend", True)]
    assert sorted(entries) == sorted(["naive", "xla", "cudnn", LAB5, "lab5-20261203-110556", LAB5_NO_TE])


def test_chart_titles_name_the_experiment_the_fixed_shape_and_the_timer(monkeypatch):
    app = open_app(monkeypatch, run=LAB5, timer="wall", more="true")
    for figure in figures(app):
        assert "latency" in heading(figure) and "wall timer" in heading(figure, "subtitle")
    subtitle = heading(titled(app, "batch: latency vs B"), "subtitle")
    assert subtitle.startswith("T256 N8 H64 bfloat16 fwd")


def test_fp8_above_the_bf16_peak_is_marked_and_explained(monkeypatch):
    app = select(open_app(monkeypatch, tab="Throughput"), LONG)
    app.multiselect(key="experiment").set_value(["fwd"]).run()
    peak = next(f for f in figures(app) if "% of measured bf16 matmul peak" in json.dumps(f["layout"]["yaxis"]))
    fp8 = next(t for t in peak["data"] if str(t.get("name")).startswith("cudnn_fp8"))
    assert max(fp8["y"]) > 100
    notes = [a["text"] for a in peak["layout"].get("annotations", [])]
    assert "bf16 matmul peak (measured)" in notes and any("FP8 tensor cores" in n for n in notes)
    assert "above 100 % of the measured bf16 matmul peak is expected" in texts(app.caption)
    # a label on its line, which the published cuDNN's line crosses at T 4096-8192: legible on a white ground
    assert {a.get("bgcolor") for a in peak["layout"]["annotations"]} == {"rgba(255, 255, 255, 0.85)"}


def test_the_fp8_verdict_stands_beside_its_variant_and_the_kernels_last(monkeypatch):
    """The verdict is what the tab is for: second, beside the variant, so a 1280 px window shows it whole (fifth, past
    the run id, experiment and shape, it was cut off at the window's edge); where the cell stands comes after."""
    fp8 = table(open_app(monkeypatch, run=[LAB5, LAB5_NO_TE], tab="FP8"), "verdict")
    columns = list(fp8.columns)
    assert columns[:3] == ["variant", "verdict", "speed-up vs bf16"] and columns[-1] == "kernels"
    verdicts = fp8.set_index(["run", "variant", "shape"])["verdict"]
    assert verdicts[LAB5, "te_fp8", "B4 T2048 N8 H64 bfloat16 fwd"].startswith("not FP8")
    assert verdicts[LAB5, "cudnn_fp8", "B4 T2048 N8 H64 bfloat16 fwd"].startswith("incorrect")


# --- issue 14: compare ---------------------------------------------------------------------------------------------

def test_compare_draws_horizontal_bars_in_spec_order_coloured_by_direction(monkeypatch, tmp_path):
    copy_files(H200_LONG, tmp_path / "h200" / "a-run", "a-run", "2026-12-01T00:00:00+00:00")
    copy_files(H200_LONG, tmp_path / "h200" / "b-run", "b-run", "2026-12-02T00:00:00+00:00", 0.5)
    app = open_app(monkeypatch, tmp_path, tab="Compare", a="a-run", b="b-run", cexp="fwd")
    chart = next(f for f in figures(app) if "B / A" in json.dumps(f["layout"]))
    bars = chart["data"][0]
    assert bars.get("orientation") == "h" and bars["base"] == 1
    assert [label.split()[0] for label in bars["y"]] == ["cudnn", "cudnn_fp8", "te"] * 4  # spec order, T4k first
    assert set(bars["marker"]["color"]) == {"#2ca02c"}  # B is twice as fast: every bar green
    assert chart["layout"]["height"] >= 12 * 20


def test_compare_gives_the_overall_ratio_and_counts(monkeypatch, tmp_path):
    copy_files(H200_LONG, tmp_path / "h200" / "a-run", "a-run", "2026-12-01T00:00:00+00:00")
    copy_files(H200_LONG, tmp_path / "h200" / "b-run", "b-run", "2026-12-02T00:00:00+00:00", 1.25)
    app = open_app(monkeypatch, tmp_path, tab="Compare", a="a-run", b="b-run")
    metrics = {m.label: m.value for m in app.metric}
    measured = sum(c["status"] == "ok" for c in cell_lines(H200_LONG))
    assert metrics.get("Geomean B / A") == "1.250×" and metrics.get("Slower beyond noise") == str(measured)
    summary = table(app, "geomean B/A")
    assert summary["geomean B/A"].to_numpy() == pytest.approx(1.25)


def test_compares_caption_counts_the_unsettled_pairs_the_clis_verdict_counts(monkeypatch, tmp_path):
    """B's first cell on a clock that moved: the every-cell table's caption counted the pairs not converged and not
    the unsettled ones `attnbench compare`'s verdict counts; it says both, in the CLI's words (report.marks_said)."""
    from runner.marks import UNSETTLED_WHY

    template = shipped(H200_LONG)
    first = next(c.key for c in template.cells if c.status == "ok")
    for run_id, day in (("a-run", 1), ("b-run", 2)):
        manifest, cells = copy_run(template, run_id, pd.Timestamp(f"2026-12-0{day}T00:00Z").to_pydatetime())
        cells = [c.model_copy(update={"clock_unstable": c.key == first and day == 2}) for c in cells]
        write_run(tmp_path / "h200" / run_id, manifest, cells)
    app = open_app(monkeypatch, tmp_path, tab="Compare", a="a-run", b="b-run")
    assert f"1 of those unsettled in A or B ({UNSETTLED_WHY})" in texts(app.caption)
    assert table(app, "unsettled").set_index("key").loc[first, "unsettled"] == "B"


def test_compare_counts_and_draws_a_move_a_side_of_which_did_not_converge_as_unconfirmed(monkeypatch, tmp_path):
    """B's first cell twice as slow on 3 samples that never converged: unconfirmed, as `attnbench compare` says,
    counted beside slower and faster, drawn orange, its side named in the every-cell table."""
    template = shipped(H200_LONG)
    first = next(c.key for c in template.cells if c.status == "ok")
    for run_id, day, factor in (("a-run", 1, 1.0), ("b-run", 2, 2.0)):
        manifest, cells = copy_run(template, run_id, pd.Timestamp(f"2026-12-0{day}T00:00Z").to_pydatetime(),
                                   factor=lambda c: factor if c.key == first else 1.0)
        cells = [c.model_copy(update={"timings": [t.model_copy(update={"samples": 3, "converged": False})
                                                  for t in c.timings]}) if c.key == first and factor > 1 else c
                 for c in cells]
        write_run(tmp_path / "h200" / run_id, manifest, cells)
    app = open_app(monkeypatch, tmp_path, tab="Compare", a="a-run", b="b-run")
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Unconfirmed"] == "1" and metrics["Slower beyond noise"] == "0"
    every = table(app, "unconverged").set_index("key")
    assert every.loc[first, "verdict"] == "unconfirmed" and every.loc[first, "unconverged"] == "B"
    assert "of those not converged in A or B (noise above its target" in texts(app.caption)
    bars = next(f for f in figures(app) if "B / A" in json.dumps(f["layout"]))["data"][0]
    assert VERDICT_COLOURS["unconfirmed"] in bars["marker"]["color"]


def test_compare_takes_bs_recheck_beside_it_a_slower_cell_not_slower_again_is_not_reproduced(monkeypatch, tmp_path):
    """B's first cell twice as slow, its recheck (a run whose manifest rechecks B) as fast as A: not reproduced, as
    `attnbench compare` says, never counted slower, drawn purple, the recheck's ratio in the every-cell table."""
    template = shipped(H200_LONG)
    first = next(c.key for c in template.cells if c.status == "ok")
    for run_id, day, factor in (("a-run", 1, 1.0), ("b-run", 2, 2.0), ("b-run-recheck", 3, 1.0)):
        manifest, cells = copy_run(template, run_id, pd.Timestamp(f"2026-12-0{day}T00:00Z").to_pydatetime(),
                                   factor=lambda c: factor if c.key == first else 1.0)
        if run_id.endswith("-recheck"):
            manifest, cells = manifest.model_copy(update={"rechecks": "b-run"}), [c for c in cells if c.key == first]
        write_run(tmp_path / "h200" / run_id, manifest, cells)
    app = open_app(monkeypatch, tmp_path, tab="Compare", a="a-run", b="b-run")
    assert {m.label: m.value for m in app.metric}["Slower beyond noise"] == "0"
    said = texts(app.info)  # compare's heading line (report.recheck_said), with the count
    assert "measured again: b-run-recheck (1 cell timed in it and A)" in said and "1 cell not reproduced;" in said
    every = table(app, "unconverged").set_index("key")
    assert every.loc[first, "verdict"] == "not reproduced" and every.loc[first, "recheck_ratio"] == pytest.approx(1.0)
    bars = next(f for f in figures(app) if "B / A" in json.dumps(f["layout"]))["data"][0]
    assert VERDICT_COLOURS["not reproduced"] in bars["marker"]["color"]


def test_compare_puts_the_cudnn_version_of_the_shipped_lab5_runs_first(monkeypatch):
    app = open_app(monkeypatch, tab="Compare", a=LAB5_NO_TE, b=LAB5)
    assert "version cudnn**: 9.19.0 → 9.14.0" in texts(app.warning)
    assert re.search(r"\b\d+ environment facts differ: ", texts(app.warning))  # through runner.counted: no 'fact(s)'
    # a cell's key (a hash) last in every table of cells: the reason a status changed, or the times, read first
    changes, shared = table(app, "regression"), table(app, "verdict")
    assert list(changes.columns)[:6] == ["experiment", "variant", "shape", "a", "b", "reason"]
    assert list(changes.columns)[-1] == list(shared.columns)[-1] == "key"
    environment = next(d.value for d in app.dataframe if LAB5_NO_TE in d.value.columns)
    assert "version cudnn" in list(environment.index[:4])


def test_the_compare_tab_and_attnbench_compare_agree_cell_by_cell(monkeypatch, tmp_path, capsys):
    """Issue 23: one implementation. Three cells 30 % slower, one turned incorrect, the rest as they were."""
    template = shipped("h200/lab5-warm-20261203-023042")
    ok = [c.key for c in template.cells if c.status == "ok"]
    slower, turned = ok[3:6], ok[10]
    a, cells = copy_run(template, "lab5-a", pd.Timestamp("2026-12-10T00:00Z").to_pydatetime())
    write_run(tmp_path / "h200" / "lab5-a", a, cells)
    b, cells = copy_run(template, "lab5-b", pd.Timestamp("2026-12-11T00:00Z").to_pydatetime(),
                        factor=lambda c: 1.3 if c.key in slower else 1.02)
    write_run(tmp_path / "h200" / "lab5-b", b, [broken(c, "incorrect", "out relative error 0.5") if c.key == turned
                                                 else c for c in cells])
    cli = in_process(capsys, "compare", tmp_path / "h200" / "lab5-a", tmp_path / "h200" / "lab5-b", "--format", "json")
    found = json.loads(cli.out)
    app = open_app(monkeypatch, tmp_path, tab="Compare", a="lab5-a", b="lab5-b")
    shown = table(app, "verdict").set_index("key")
    assert cli.code == 1 and found["regressions"] == [*slower, turned]
    assert {c["key"]: c["verdict"] for c in found["cells"]} == shown["verdict"].to_dict()
    assert [c["ratio"] for c in found["cells"]] == pytest.approx(shown["ratio"].tolist())
    changes = table(app, "regression")
    assert changes[["key", "a", "b", "regression"]].values.tolist() == [[turned, "ok", "incorrect", True]]
    drawn = next(t for t in app.dataframe if "regression" in t.value)  # its reason's width not set by empty rows
    assert json.loads(drawn.proto.columns)["reason"]["width"] == "large"
    assert "1 cell was ok in A and is not in B" in texts(app.warning)
    lenient = open_app(monkeypatch, tmp_path, tab="Compare", a="lab5-a", b="lab5-b", threshold="40")
    assert set(table(lenient, "verdict")["verdict"]) == {"within noise"}  # as `compare --threshold 40`


def test_the_compare_tab_names_cells_timed_by_different_timers_and_cells_that_ran_another_kernel(monkeypatch,
                                                                                                   tmp_path):
    """Two cells whose device timer failed in B (wall alone) have no verdict and are named; a cell whose cuDNN kernel
    changed keeps its verdict and is marked, as `attnbench compare` counts them."""
    template = shipped("h200/lab5-warm-20261203-023042")
    ok = [c for c in template.cells if c.status == "ok"]
    apart, cudnn = [c.key for c in ok[4:6]], next(c.key for c in ok if c.variant == "cudnn")
    alike = next(c.key for c in ok[6:] if c.key != cudnn)  # wall alone in both: no device time in either

    def changed(c):
        if c.key in [*apart, alike]:
            wall = [t for t in c.timings if t.timer == "wall"]
            return c.model_copy(update={"timings": wall, "timer": "wall", "median_s": wall[0].median_s})
        return c.model_copy(update={"kernels": ["another_cudnn_kernel"]}) if c.key == cudnn else c
    for run, day in (("lab5-a", "2026-12-10"), ("lab5-b", "2026-12-11")):
        manifest, cells = copy_run(template, run, pd.Timestamp(f"{day}T00:00Z").to_pydatetime())
        write_run(tmp_path / "h200" / run, manifest, [changed(c) if run == "lab5-b" or c.key == alike else c
                                                      for c in cells])
    app = open_app(monkeypatch, tmp_path, tab="Compare", a="lab5-a", b="lab5-b")
    warned = texts(app.warning)
    assert "2 cells timed by different timers (not compared): no device time in both runs" in warned
    assert "1 cell with no device time in either run (not compared): timed alike in both" in warned
    assert "1 cell ran another kernel in B, of the " in warned
    assert table(app, "timers B")[["key", "timers A", "timers B"]].values.tolist() == [
        [key, "device, wall", "wall"] for key in apart]
    shared = table(app, "ratio").set_index("key")
    assert not set(apart) & set(shared.index) and shared.loc[cudnn, "kernel"] == "another kernel"
    assert set(shared["kernel"]) == {"", "another kernel"}
    kernels = table(app, "only B ran")
    assert kernels["only B ran"].tolist() == ["another_cudnn_kernel"]
    assert list(kernels.columns) == ["experiment", "variant", "verdict", "change", "only A ran", "only B ran", "shape",
                                     "key"]  # the names where a 1280 px window shows them


# --- issue 14: scale -------------------------------------------------------------------------------------------------

def test_only_the_open_tab_is_built(monkeypatch):
    latency = open_app(monkeypatch, run=[LAB5, LONG], more="true")
    assert charts(latency) == 6  # seq-len, batch, gqa, te-causal; fwd, fwd-bwd: nothing from the other tabs
    assert not latency.tabs[4].children  # Backends holds nothing until opened
    backends = open_app(monkeypatch, run=[LAB5, LONG], tab="Backends")
    assert {heading(f).split(":")[0] for f in figures(backends)} == {"causal", "te-causal", "fp8", "fwd", "fwd-bwd"}


def test_latency_charts_the_headline_first_and_the_other_experiments_when_opened(monkeypatch):
    first = open_app(monkeypatch, run=LAB5)
    assert [heading(f) for f in figures(first)] == ["seq-len: latency vs T"]
    assert [e.label for e in first.main.expander] == ["3 more experiments: batch, gqa, te-causal"]
    assert not first.main.expander[0].children  # not built until opened
    opened = open_app(monkeypatch, run=LAB5, more="true")
    assert [heading(f) for f in figures(opened)] == [
        f"{name}: latency vs {axis}" for name, axis in [("seq-len", "T"), ("batch", "B"), ("gqa", "K"), ("te-causal", "T")]]
    chosen = open_app(monkeypatch, run=LAB5, experiment=["batch", "gqa"])  # the filter's choice is charted at once
    assert charts(chosen) == 2 and not chosen.main.expander


def test_the_runs_list_offers_the_newest_hundred_and_find_runs_reaches_the_others(monkeypatch, tmp_path):
    runs = generate(tmp_path, 103, 4, templates=(CPU_LAB5,))  # six hours apart from 2026-10-01, newest last
    app = open_app(monkeypatch, tmp_path)
    assert app.multiselect(key="run").options == runs[:2:-1]  # the newest 100, newest first
    assert "Listing the newest 100: Find runs reaches the others" in texts(app.sidebar.caption)
    assert runs[0] in open_app(monkeypatch, tmp_path, run=runs[0]).multiselect(key="run").options  # a link's run
    finding = open_app(monkeypatch, tmp_path, find="true")
    oldest = finding.date_input(key="until").set_value(datetime(2026, 10, 1).date()).run()
    assert oldest.multiselect(key="run").options[:4] == runs[3::-1]


def test_find_runs_builds_its_widgets_only_when_open_and_a_link_that_narrows_opens_it(monkeypatch):
    """Five widgets fewer for the browser to draw before the first chart while Find runs is closed."""
    closed = open_app(monkeypatch)
    assert not closed.date_input and not closed.text_input and {"gpu", "spec"}.isdisjoint(
        w.key for w in closed.sidebar.multiselect)
    narrowed = open_app(monkeypatch, gpu="cpu")
    assert narrowed.multiselect(key="gpu").value == ["cpu"] and len(narrowed.date_input) == 2
    assert narrowed.multiselect(key="run").value == ["lab5-20261202-104832"]  # the newest run it matches, shown


def test_find_runs_matching_no_run_shows_no_runs_figures_and_says_so(monkeypatch):
    """`?gpu=NVIDIA+L4` where no L4 ran: the page showed the newest H200 run's charts below the L4 question; now no
    run, and a line that says none matches. A link that names a run shows it whatever Find runs matches."""
    nothing = open_app(monkeypatch, gpu="NVIDIA L4")
    assert nothing.multiselect(key="run").value == [] and charts(nothing) == 0
    assert texts(nothing.info).startswith(f"No run matches Find runs, of {len(data.load(str(SHIPPED)).runs)} runs "
                                          "here: widen it, or name a run under Runs.")
    assert not any("Against the previous run" in m.value for m in nothing.markdown)
    named = open_app(monkeypatch, gpu="NVIDIA L4", run=LAB5)
    assert named.multiselect(key="run").value == [LAB5] and charts(named) and "No run matches" not in texts(named.info)


def test_the_runs_tab_says_how_long_each_selected_run_took_as_show_does(monkeypatch, tmp_path):
    """The Runs tab gave each run's start alone: it says how long each selected run took, in show's words
    (report.took_said), over all its cells whatever the filters."""
    run = "gemma2-27b-20261204"
    shutil.copytree(SHIPPED / "h200" / run, tmp_path / run)
    app = open_app(monkeypatch, tmp_path, run=run, tab="Runs", experiment="decode-global")
    assert (f"| {run} | 219 s in cells · 1,141 s wall (resumed across calls, or paused: 921 s with no cell measured) |"
            in texts(app.markdown))


def test_the_store_is_read_once_and_shared_not_copied(monkeypatch):
    reads = []
    original = LocalStore.get
    monkeypatch.setattr(LocalStore, "get", lambda store, name: reads.append(name) or original(store, name))
    first = open_app(monkeypatch)
    read = len(reads)
    first.radio(key="timer").set_value("wall").run()
    open_app(monkeypatch, timer="wall")  # a second session
    assert len(reads) == read  # nothing read again
    assert data.load(str(SHIPPED)) is data.load(str(SHIPPED))  # every session and rerun holds the same snapshot


def test_forty_runs_share_one_environment_table(monkeypatch, tmp_path):
    runs = [f"hopper-long-{day:02d}" for day in range(1, 41)]
    for day, run in enumerate(runs, 1):
        copy_files(H200_LONG, tmp_path / run, run, f"2026-11-{day % 30 + 1:02d}T{day // 30:02d}:00:00+00:00")
    app = select(open_app(monkeypatch, tmp_path, tab="Runs"), *runs)
    assert not app.exception and not app.error
    environments = [d.value for d in app.dataframe if runs[0] in d.value.columns]
    assert len(environments) == 1 and set(runs) <= set(environments[0].columns)
    assert len(app.table) == 0 and len(app.get("plotly_chart")) == 0
    latency = select(open_app(monkeypatch, tmp_path, more="true"), *runs)
    traces = {t["name"] for f in figures(latency) for t in f["data"] if " · " in str(t.get("name"))}
    assert charts(latency) == 2 and len({name.split(" · ")[1] for name in traces}) == 6  # the 6 newest runs


# --- issue 12: power and clocks ----------------------------------------------------------------------------------

@pytest.fixture
def steady(tmp_path) -> Path:
    """hopper-long as a steady-power run would record it, cudnn at 32k clock-unstable."""
    manifest, cells = copy_run(shipped(H200_LONG), "hopper-long-steady", pd.Timestamp("2026-12-05T10:00Z"))
    cells = [telemetry(c, unstable=c.variant == "cudnn" and c.params.seq_len == 32768) for c in cells]
    write_run(tmp_path / "h200" / "hopper-long-steady", manifest, cells)
    return tmp_path


def test_clock_and_power_are_drawn_beside_latency_when_asked_and_unstable_cells_flagged(monkeypatch, steady):
    plain = open_app(monkeypatch, steady, more="true")  # latency alone, the unstable cell named
    assert {heading(f) for f in figures(plain)} == {"fwd: latency vs T", "fwd-bwd: latency vs T"}
    flagged = f"{100 * UNSTABLE_SPREAD:g} %"  # the rule that flags a cell clock_unstable (runner.power), as said
    assert (f"**fwd**: ⚠ 1 cell unsettled (sampled before its power state settled or on an SM clock that moved more "
            f"than {flagged}), ringed in red") in texts(plain.caption)
    app = open_app(monkeypatch, steady, clock="true")
    assert {heading(f) for f in figures(app)} >= {"fwd: SM clock vs T", "fwd: power vs T", "fwd: latency vs T"}
    ringed = next(t for t in titled(app, "fwd: latency")["data"] if t.get("name") == "⚠ unsettled")
    assert ringed["x"] == [32768]
    limit = [s for s in titled(app, "fwd: power")["layout"]["shapes"] if s.get("y0") == 700.0]
    assert limit
    fwd = next(m.value for m in app.markdown if m.value.startswith("| T | cudnn | cudnn_fp8 | te |"))
    row = next(line for line in fwd.splitlines() if line.startswith("| 32768 |"))
    assert row.split(" | ")[1].endswith("⚠ ·1.00×")


def test_the_rate_toggles_between_tflop_per_second_and_per_joule(monkeypatch, steady):
    app = open_app(monkeypatch, steady, tab="Throughput")
    assert titled(app, "fwd: TFLOP/s vs T")
    app.segmented_control(key="rate").set_value("TFLOP/J").run()
    per_joule = titled(app, "fwd: TFLOP per joule vs T")
    cudnn = next(t for t in per_joule["data"] if t.get("name") == "cudnn · hopper-long-steady")
    record = [c for c in shipped(H200_LONG).cells if c.variant == "cudnn" and c.params.pass_ == "fwd"]
    energy = [telemetry(c).tflops_per_j for c in record]
    assert cudnn["y"] == pytest.approx(energy)


CONTEXT_PARALLEL = Path(__file__).with_name("fixtures") / "context-parallel"  # a CPU run on 8 fake devices


def test_a_split_experiment_draws_rate_and_efficiency_against_the_devices(monkeypatch):
    app = open_app(monkeypatch, CONTEXT_PARALLEL, tab="Throughput")
    assert not app.exception and not app.error
    (run,) = [read for read in LocalStore(CONTEXT_PARALLEL).runs()]
    cells = [c for c in LocalStore(CONTEXT_PARALLEL).read(run).cells if c.status == "ok" and c.experiment == "fwd"]
    wall = {(c.variant, c.params.devices): c.median_s for c in cells}  # a CPU run: the wall clock is its timer
    efficiency = titled(app, "fwd: scaling efficiency vs devices")
    ring = next(t for t in efficiency["data"] if t.get("name") == f"ring · {run}")
    assert ring["x"] == [1, 2, 4, 8]
    assert ring["y"] == pytest.approx([wall["ring", 1] / (d * wall["ring", d]) for d in (1, 2, 4, 8)])
    rate = titled(app, "fwd: TFLOP/s vs devices")
    assert {t.get("name") for t in rate["data"]} >= {f"ring · {run}", f"xla_cp · {run}"}


SERVING = Path(__file__).with_name("fixtures") / "schema9-serving"  # a CPU run of ragged decode cells, T 1 and 4


def test_a_serving_experiment_draws_microseconds_per_generated_token_beside_its_bandwidth(monkeypatch):
    """A decode step's time over the batch's B x T new tokens, by the chosen timer, beside GB/s only."""
    app = open_app(monkeypatch, SERVING, tab="Throughput", rate="GB/s")
    assert not app.exception and not app.error and titled(app, "ragged: GB/s")
    (run,) = LocalStore(SERVING).runs()
    cells = [c for c in LocalStore(SERVING).read(run).cells if c.status == "ok" and c.variant == "xla"]
    drawn = next(t for t in titled(app, "ragged: µs per generated token vs T")["data"] if t.get("name") == f"xla · {run}")
    assert drawn["y"] == pytest.approx([c.median_s * 1e6 / (c.params.batch * c.params.seq_len) for c in cells])
    app.segmented_control(key="rate").set_value("TFLOP/s").run()
    assert not [f for f in figures(app) if "per generated token" in heading(f)]


def test_runs_without_telemetry_say_they_have_no_energy(monkeypatch):
    app = open_app(monkeypatch, run=LONG, tab="Throughput", rate="TFLOP/J")
    assert "No cell of the selection records energy" in texts(app.info) and charts(app) == 0


# --- issue 13: leaderboard, tuning, new statuses -------------------------------------------------------------------

def test_the_leaderboard_tab_names_the_fastest_per_shape(monkeypatch):
    app = open_app(monkeypatch, run=LAB5_NO_TE, tab="Leaderboard", md="true")
    board = table(app, "fastest").set_index("shape")
    assert board.loc["B4 T128 N8 H64 bfloat16 fwd", "fastest"] == "cudnn"
    assert board.loc["B4 T128 N8 H64 bfloat16 fwd", "auto"].endswith("(xla)")
    assert board.loc["B4 T2048 N8 H64 bfloat16 fwd", "fastest"] == "cudnn_fp8 (FP8)"  # an FP8 variant beside bf16 ones
    assert "| shape | fastest |" in app.code[0].value
    key = [c.value for c in app.caption if c.value.startswith("Marks: ")]
    assert key == [board_key(shipped(H200_LAB5_NO_TE).cells)] and key[0].startswith("Marks: (FP8) computes in FP8")
    assert key[0] in app.code[0].value  # the markdown board says it too


def test_the_leaderboard_tab_holds_the_shapes_shows_board_does(monkeypatch):
    """One board: the shapes two or more variants ran correctly (runner.leaderboard.contested), 13 of the CPU run's 17
    timed ones, as show's and the report's; the tab held all 17."""
    from runner.leaderboard import contested, leaderboard

    board = table(open_app(monkeypatch, run=CPU_LAB5.rpartition("/")[2], tab="Leaderboard"), "fastest")
    every = leaderboard(shipped(CPU_LAB5).cells)
    assert sorted(board["shape"]) == sorted(s.shape for s in contested(every)) and (len(board), len(every)) == (13, 17)


def test_the_leaderboard_tab_says_which_run_has_no_board(monkeypatch):
    """A selected run whose every shape ran one correct variant (the soak) has no board, and the tab says so under
    its name, where it left the run out without a word."""
    app = open_app(monkeypatch, run=[LAB5, SOAK], tab="Leaderboard")
    assert LAB5 in [h.value for h in app.subheader] and SOAK not in [h.value for h in app.subheader]
    assert f"{SOAK}: no leaderboard (no shape where two or more variants ran correctly)" in texts(app.caption)


def board_key(cells) -> str:
    from runner import leaderboard

    return leaderboard.marks_key(leaderboard.contested(leaderboard.leaderboard(cells)))


def test_crashed_and_timed_out_cells_are_failures_apart_from_skips(monkeypatch, tmp_path):
    manifest, cells = copy_run(shipped(H200_LONG), "hopper-long-x", pd.Timestamp("2026-12-05T10:00Z"))
    cells = [broken(c, "crashed", "worker exited with SIGSEGV") if c.variant == "te" and c.params.pass_ == "fwd"
             else broken(c, "timeout", "still running after 120 s") if c.variant == "te" else c for c in cells]
    write_run(tmp_path / "h200" / "hopper-long-x", manifest, cells)
    app = open_app(monkeypatch, tmp_path, tab="Cells")
    failed, skipped = tables_with(app, "reason")[:2]
    assert failed[["variant", "status", "cells"]].values.tolist() == [["te", "crashed", 4], ["te", "timeout", 4]]
    assert skipped[["variant", "status", "cells"]].values.tolist() == [["cudnn_fp8", "skipped", 4]]
    assert "cells: **12 ok**, 4 skipped (expected), **8 failed**" in app.markdown[0].value


def test_tuning_and_bandwidth_reach_the_tables(monkeypatch, tmp_path):
    manifest, cells = copy_run(shipped(H200_LONG), "hopper-long-t", pd.Timestamp("2026-12-05T10:00Z"))
    machine = manifest.machine.model_copy(update={"memory_bandwidth_gbps": 4000.0})
    write_run(tmp_path / "h200" / "hopper-long-t", manifest.model_copy(update={"machine": machine}),
              [tuned(c) if c.variant == "cudnn" else c for c in cells])
    app = open_app(monkeypatch, tmp_path, tab="Cells")
    every = table(app, "duration_s")
    assert every.loc[every["variant"] == "cudnn", "tuning_config"].eq("block_kv=128 block_q=128").all()
    board = table(open_app(monkeypatch, tmp_path, tab="Leaderboard"), "fastest").set_index("shape")
    fwd_bwd = board.loc["B1 T8192 N64 K8 H128 bfloat16 causal fwd_bwd"]  # cudnn wins, as measured
    assert fwd_bwd["fastest"] == "cudnn" and fwd_bwd["config"] == "block_kv=128 block_q=128"
    assert board.loc["B1 T8192 N64 K8 H128 bfloat16 causal fwd", "config"] == ""  # cudnn_fp8 wins: untuned, blank
    measured = every.loc[every["status"] == "ok", "pct_of_bandwidth"]
    assert len(measured) and measured.between(0, 100, inclusive="neither").all()
    app = open_app(monkeypatch, tmp_path, tab="Throughput")  # long prefill nears the matmul peak: that ceiling binds
    assert titled(app, "fwd: % of matmul peak") and not [f for f in figures(app) if "% of memory bandwidth" in heading(f)]


def test_the_share_drawn_is_of_the_ceiling_that_binds_the_experiment(monkeypatch):
    """llama3.1-70b's runs measured both ceilings, so every cell records both shares: its prefill (some 60 % of the
    matmul peak, under 7 % of bandwidth) is drawn against the peak, where every experiment was drawn against the
    bandwidth; the decode run's experiments still are. The share of the MMA peak at each cell's clock names its
    100 % line so, not as the measured bf16 peak."""
    from dashboard import views

    app = open_app(monkeypatch, run="llama3.1-70b-20261206-tefp8", tab="Throughput")
    titles = [heading(f) for f in figures(app)]
    assert "prefill: % of matmul peak vs T" in titles and "prefill: % of memory bandwidth vs T" not in titles
    clock = next(f for f in figures(app) if heading(f) == "prefill: % of MMA peak at its clock vs T")
    assert [a["text"] for a in clock["layout"]["annotations"]] == ["MMA peak at its SM clock"]  # not the bf16 peak's
    decode = [heading(f) for f in figures(open_app(monkeypatch, run="decode-20261202", tab="Throughput"))]
    assert "gqa-length: % of memory bandwidth vs S" in decode and not [t for t in decode if "matmul peak" in t]
    both = pd.DataFrame({"pct_of_peak": [60.0, 70.0], "pct_of_bandwidth": [5.0, 6.0]})
    assert not views.bound_by_bandwidth(both) and views.bound_by_bandwidth(both[::-1].set_axis(both.columns[::-1],
                                                                                              axis=1))
    assert views.bound_by_bandwidth(both.assign(pct_of_peak=float("nan")))  # a bandwidth alone
    assert not views.bound_by_bandwidth(both.assign(pct_of_bandwidth=float("nan")))


def test_the_leaderboard_names_a_legacy_variant_so_and_says_what_replaces_it(monkeypatch, tmp_path):
    manifest, cells = copy_run(shipped(H200_LONG), "hopper-long-l", pd.Timestamp("2026-12-05T10:00Z"))
    legacy = "jax 0.11 deprecated jax.experimental.pallas.ops.gpu; its replacement is tokamax"
    te = manifest.variants["te"].model_copy(update={"legacy": legacy})  # te standing in for a legacy variant
    write_run(tmp_path / "h200" / "hopper-long-l", manifest.model_copy(update={"variants": {**manifest.variants,
                                                                                            "te": te}}), cells)
    app = open_app(monkeypatch, tmp_path, tab="Leaderboard")
    names = set(table(app, "fastest")[["fastest", "next"]].values.ravel())
    assert "te (legacy)" in names and "te" not in names and "cudnn" in names
    assert f"te (legacy): {legacy}" in [c.value for c in app.caption]
    described = table(open_app(monkeypatch, tmp_path, tab="Runs"), "legacy").set_index("variant")["legacy"]
    assert described["te"] == legacy and described.drop("te").isna().all()


# --- issue 14: history and the overview ------------------------------------------------------------------------------

def test_history_finds_the_step_and_links_its_runs(monkeypatch, tmp_path):
    generate(tmp_path, 20, 76, templates=(H200_LAB5,))  # cudnn 8 % slower from the 13th run (lab5-0012) on
    app = open_app(monkeypatch, tmp_path, run="lab5-0015", tab="History", hexp="seq-len")
    assert app.selectbox(key="series").value == "lab5 · NVIDIA H200 · none"
    drawn = figures(app)[0]
    assert "annotations" not in drawn["layout"]  # no text on the plot: steps are a legend entry, told on hover
    (steps,) = [t for t in drawn["data"] if t.get("name") == "step to slower"]
    (mark,) = steps["text"]
    variant, step = mark.split()
    assert variant == "cudnn" and 5 <= float(step.strip("+%")) <= 11  # 8 %, give or take the 2 % jitter
    worst = texts(app.markdown)
    assert "| seq-len | cudnn |" in worst
    assert "[lab5-0011 → lab5-0012](?run=lab5-0012&run=lab5-0011&tab=Compare" in worst


def test_history_and_compare_aggregate_only_the_cells_both_runs_hold_and_say_how_many(monkeypatch, tmp_path):
    """Run B measured cells 20 on of run A's first 50, the cells only B holds twice as slow: History's geometric
    mean stays flat and says over how many cells; Compare says how many cells it compares."""
    template = shipped(H200_LAB5)
    keys = [c.key for c in template.cells]
    for run_id, day, kept in (("lab5-a", 1, slice(0, 50)), ("lab5-b", 2, slice(20, None))):
        manifest, cells = copy_run(template, run_id, datetime.fromisoformat(f"2026-12-0{day}T00:00+00:00"),
                                   factor=lambda c: 1.0 if c.key in keys[:50] else 2.0)
        write_run(tmp_path / "h200" / run_id, manifest, cells[kept])
    app = open_app(monkeypatch, tmp_path, run="lab5-b", tab="History", hexp="seq-len")
    drawn = figures(app)[0]
    assert "geometric mean of the cells every run holds" in heading(drawn)
    lines = {t["name"]: t["y"] for t in drawn["data"] if t.get("mode") == "lines+markers" and t["x"] != [None]}
    assert set(lines) == {"naive (3 cells)", "xla (3 cells)", "cudnn (3 cells)"}  # seq-len's cells 20-49 of lab5
    assert all(y[0] == pytest.approx(y[1]) for y in lines.values())
    compared = open_app(monkeypatch, tmp_path, run=["lab5-b", "lab5-a"], tab="Compare", a="lab5-a", b="lab5-b")
    assert f"Over the **30 cells both runs hold** (A 50, B {len(keys) - 20})" in texts(compared.markdown)



def test_a_history_line_over_one_cell_says_1_cell(monkeypatch, tmp_path):
    """lab5's two H200 runs share one cudnn cell of default-shape (bfloat16 alone): its legend says '1 cell'."""
    for run in (H200_LAB5_NO_TE, H200_LAB5):
        shutil.copytree(SHIPPED / run, tmp_path / run)
    app = open_app(monkeypatch, tmp_path, run=H200_LAB5.split("/")[1], tab="History", hexp="default-shape")
    names = {t["name"] for t in figures(app)[0]["data"] if t.get("mode") == "lines+markers" and t["x"] != [None]}
    assert "cudnn (1 cell)" in names and "xla (2 cells)" in names

def test_history_runs_along_git_shas_where_the_runs_have_them(monkeypatch, tmp_path):
    generate(tmp_path, 6, 76, templates=(H200_LAB5,))
    by_sha = open_app(monkeypatch, tmp_path, tab="History", hx="git sha", hexp="seq-len")
    axis = figures(by_sha)[0]["layout"]["xaxis"]
    assert axis["type"] == "category" and axis["title"]["text"] == "git sha (in date order)"
    copy_files(H200_LONG, tmp_path / "no-sha" / "h200" / "long", "long", "2026-12-05T00:00:00+00:00")  # no sha
    no_sha = open_app(monkeypatch, tmp_path / "no-sha", tab="History", hx="git sha")
    assert "record no git sha: drawn against their date" in texts(no_sha.caption)
    assert figures(no_sha)[0]["layout"]["xaxis"]["title"]["text"] == "run date"


def test_the_overview_says_how_a_run_moved_against_its_predecessor(monkeypatch, tmp_path):
    generate(tmp_path, 20, 76, templates=(H200_LAB5,))
    app = open_app(monkeypatch, tmp_path, run=["lab5-0012", "lab5-0000"])  # the first run after cudnn's step
    runs, against = (next(m.value for m in app.markdown if m.value.startswith(start)) for start in ("| run |",
                                                                                                  "**Against"))
    assert runs.splitlines()[2].startswith("| lab5-0012 | lab5 | NVIDIA H200 | none | 2026-10-04 00:00:00 |")
    moves = against.splitlines()[2:]
    assert moves[0].startswith("- `lab5-0012` vs `lab5-0011`: ") and "; worst " in moves[0] and "/cudnn " in moves[0]
    assert ", geomean B / A " in moves[0]  # which way the ratio reads, as compare's verdict and the Compare tab say
    assert moves[1] == "- `lab5-0000` no earlier run to compare"


def test_a_run_with_no_manifest_has_no_power_policy_in_the_overview_and_one_before_the_choice_reads_none(
        monkeypatch, tmp_path):
    """One rule for the policy across the dashboard (data.power_of, which the published table reads too): a run from
    before the choice of policy reads 'none' (record.NO_POLICY); a run with no manifest records no policy, so its
    power reads as its spec and GPU do, not known ('—'), never 'none'."""
    shutil.copytree(SHIPPED / H200_LAB5, tmp_path / H200_LAB5)
    (tmp_path / "h200" / "no-manifest").mkdir()
    shutil.copy(SHIPPED / H200_LAB5 / CELLS, tmp_path / "h200" / "no-manifest" / CELLS)
    app = open_app(monkeypatch, tmp_path, run=[LAB5, "no-manifest"])
    runs = next(m.value for m in app.markdown if m.value.startswith("| run |")).splitlines()
    assert runs[2].startswith(f"| {LAB5} | lab5 | NVIDIA H200 | none |")
    assert runs[3] == "| no-manifest | — | — | — | — | — | — |"  # spec, GPU, power, started, git sha: none recorded
    assert data.power_of(None) == data.NOT_KNOWN != NO_POLICY


def test_the_overview_says_how_warm_each_runs_compile_cache_was(monkeypatch, tmp_path):
    """The shipped cold and warm lab5 runs of one cache folder, and one with the cache off: each run's row says it as
    show's header does (report.cache_said), over all the run's cells."""
    runs = ("lab5-cold-20261202-182308", "lab5-warm-20261202-182308", "lab5-20261202-110556")
    for run in runs:
        shutil.copytree(SHIPPED / "h200" / run, tmp_path / run)
    app = open_app(monkeypatch, tmp_path, run=list(runs))
    table = next(m.value for m in app.markdown if m.value.startswith("| run |"))
    rows = {row.split(" | ")[0].strip("| "): row.split(" | ")[-1].strip(" |") for row in table.splitlines()[2:]}
    assert table.splitlines()[0].endswith("| git sha | compile cache |")
    assert rows == {runs[0]: "partly warm: 11 of 66 programs loaded", runs[1]: "warm: 66 of 66 programs loaded",
                    runs[2]: "—"}


def test_the_overviews_line_of_a_run_against_its_predecessor_says_which_cells_ran_another_kernel(monkeypatch,
                                                                                                  tmp_path):
    """lab5's H200 pair: cuDNN 9.19 then 9.14, whose cudnn cells ran another knob (and six cells another cuBLAS
    GEMM); the worst of them is marked, as compare's verdict counts them."""
    for run in (H200_LAB5_NO_TE, H200_LAB5):
        shutil.copytree(SHIPPED / run, tmp_path / run)
    app = open_app(monkeypatch, tmp_path, run=[H200_LAB5.split("/")[1]])
    (move,) = [line for m in app.markdown for line in m.value.splitlines()
               if line.startswith("- `lab5-20261202-110556")]
    assert ("64 cells both timed, geomean B / A 1.047×; of those, 23 cells ran another kernel in B; 6 cells ran "
            "another GEMM in B; 1 of those not converged in A or B (noise above its target when sampling stopped, or "
            "under 5 samples); "
            "worst ") in move
    assert "/cudnn B4 T128 N8 H64 bfloat16 fwd 1.54× (another kernel);" in move
    assert "; A started 18 min before B, in the same sitting, not on an earlier night" in move  # no earlier night


def test_the_overviews_previous_run_is_of_the_sitting_before_not_its_cold_twin(monkeypatch, tmp_path):
    """hopper-long's warm run of 12-03 started 83 s after its cold twin: its line is against the warm run of 12-02
    (runner.compare.previous, as compare --against previous) and names the twin as passed over."""
    runs = ("hopper-long-warm-20261202", "hopper-long-cold-20261203-023241", "hopper-long-warm-20261203-023241")
    for run in runs:
        shutil.copytree(SHIPPED / "h200" / run, tmp_path / run)
    app = open_app(monkeypatch, tmp_path, run=[runs[2]])
    (move,) = [line for m in app.markdown for line in m.value.splitlines() if line.startswith(f"- `{runs[2]}")]
    assert move.startswith(f"- `{runs[2]}` vs `{runs[0]}`: 1 slower")
    assert f"; passed over {runs[1]}: started 83 s before it, in its sitting" in move and "same sitting" not in move


def test_the_overviews_previous_run_passes_over_a_newer_one_that_planned_no_cell_it_planned(monkeypatch, tmp_path):
    """p2 ran --only the cells p1 and p3 left out: p3's line is against p1 (runner.compare.previous, the CLI's
    --against previous) and names p2 as passed over."""
    template = shipped(H200_LAB5)
    keys, day = [c.key for c in template.cells], datetime.fromisoformat("2026-12-10T00:00:00+00:00")
    for hours, run, kept in ((0, "p1", slice(0, 40)), (1, "p2", slice(40, None)), (2, "p3", slice(0, 40))):
        manifest, cells = copy_run(template, run, day + timedelta(hours=hours))
        write_run(tmp_path / run, manifest.model_copy(update={"cell_order": keys[kept]}), cells[kept])
    app = open_app(monkeypatch, tmp_path, run=["p3"])
    against = next(m.value for m in app.markdown if m.value.startswith("**Against"))
    assert against.splitlines()[2].startswith("- `p3` vs `p1`: ") and "; passed over p2: it planned no cell" in against


def test_the_overview_says_whether_the_previous_runs_plan_shared_no_cell_or_shared_cells_none_timed_in_both(
        monkeypatch, tmp_path):
    """p2 planned p1's cells and every one failed: the plans share them, none timed ok in both, which is not 'no cell
    shared'; the Compare tab of two runs whose plans are apart says that instead."""
    template = shipped(H200_LAB5)
    keys, day = [c.key for c in template.cells], datetime.fromisoformat("2026-12-10T00:00:00+00:00")
    for hours, run, kept in ((0, "p1", slice(0, 40)), (1, "p2", slice(0, 40)), (2, "p3", slice(40, None))):
        manifest, cells = copy_run(template, run, day + timedelta(hours=hours))
        cells = [broken(c, "failed", "worker died") for c in cells] if run == "p2" else cells
        write_run(tmp_path / run, manifest.model_copy(update={"cell_order": keys[kept]}), cells[kept])
    app = open_app(monkeypatch, tmp_path, run=["p2"])
    against = next(m.value for m in app.markdown if m.value.startswith("**Against"))
    assert against.splitlines()[2].startswith("- `p2` nothing to compare with `p1`: their plans share 40 cells, none "
                                              "timed ok in both")
    apart = open_app(monkeypatch, tmp_path, tab="Compare", a="p1", b="p3")
    assert "No cell to compare under the filters: their plans share no cell" in texts(apart.info)


def test_the_compare_tab_says_the_filters_keep_no_cell_both_runs_hold_not_what_their_plans_share(monkeypatch,
                                                                                                  tmp_path):
    """p1 and p2 ran the same 40 cells, every one ok; a filter on an experiment only p3 ran keeps none of them: the
    tab said 'their plans share 40 cells, none timed ok in both' (the plans, not the cells the filters kept)."""
    template = shipped(H200_LAB5)
    keys, day = [c.key for c in template.cells], datetime.fromisoformat("2026-12-10T00:00:00+00:00")
    for hours, run, kept in ((0, "p1", slice(0, 40)), (1, "p2", slice(0, 40)), (2, "p3", slice(40, None))):
        manifest, cells = copy_run(template, run, day + timedelta(hours=hours))
        write_run(tmp_path / run, manifest.model_copy(update={"cell_order": keys[kept]}), cells[kept])
    app = open_app(monkeypatch, tmp_path, run=["p1", "p2", "p3"], experiment="gqa", tab="Compare", a="p1", b="p2")
    assert "No cell to compare under the filters: the filters keep no cell both runs hold" in texts(app.info)
    whole = open_app(monkeypatch, tmp_path, run=["p1", "p2", "p3"], tab="Compare", a="p1", b="p2")
    assert not [t for t in texts(whole.info) if t.startswith("No cell to compare")]


# --- issue 9: light imports ------------------------------------------------------------------------------------------

def test_the_dashboard_never_imports_jax_or_the_variant_registry():
    """In a fresh interpreter (other tests import jax), every tab over the shipped runs."""
    script = f"""
import sys
from streamlit.testing.v1 import AppTest
for tab in {TABS!r}:
    app = AppTest.from_file({str(APP)!r}, default_timeout=60)
    app.query_params["run"] = {[LAB5, LONG]!r}
    app.query_params["tab"] = tab
    assert not app.run().exception
heavy = ("jax", "flax", "transformer_engine", "runner.registry", "runner.variants")
print(sorted(m for m in sys.modules if m.split(".")[0] in heavy or m.startswith(heavy)))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, data.RESULTS_ENV: str(data.SHIPPED_RESULTS)})  # not make demo's results/
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_the_server_imports_the_page_and_reads_the_store_before_it_answers(monkeypatch, tmp_path):
    """serve.py's start-up (st.App's lifespan): app.py's modules imported, the store's snapshot read into the cache
    every session shares, so the first viewer's load reads nothing again."""
    from streamlit import config

    monkeypatch.setattr(config, "_main_script_path", config._main_script_path)  # st.App() pins it for the process
    from dashboard import serve

    generate(tmp_path, 3, 10)
    read, snapshot = [], data.snapshot
    monkeypatch.setattr(data, "snapshot", lambda uri, cache: read.append(uri) or snapshot(uri, cache))
    monkeypatch.setattr(sys, "argv", ["serve.py", "--results", str(tmp_path)])
    monkeypatch.delitem(sys.modules, "dashboard.app", raising=False)
    data.reload()

    async def start():
        async with serve.prepared(serve.app):
            return "dashboard.app" in sys.modules, list(read)

    warned = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = warned.append
    logging.getLogger(serve.NO_SESSION_LOGGER).addHandler(handler)  # Streamlit's loggers do not propagate
    try:
        imported, read_at_start = asyncio.run(start())
    finally:
        logging.getLogger(serve.NO_SESSION_LOGGER).removeHandler(handler)
    assert imported and read_at_start == [str(tmp_path)]
    assert [r.getMessage() for r in warned] == []  # no 'missing ScriptRunContext!' in the server's log
    assert len(data.load(str(tmp_path)).runs) == 3 and read == [str(tmp_path)]  # the session's load: from the cache


def served(app, path: str) -> tuple[dict[bytes, bytes], bytes]:
    """An ASGI app's answer to GET `path`: its headers and body."""
    messages = []
    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "root_path": "",
             "query_string": b"", "headers": [], "scheme": "http", "http_version": "1.1"}

    async def receive():  # the client never leaves (a static file's response listens for that until it is sent)
        await asyncio.Event().wait()

    async def send(message):
        messages.append(message)

    asyncio.run(app(scope, receive, send))
    return dict(messages[0]["headers"]), b"".join(m.get("body", b"") for m in messages[1:])


def test_the_served_page_imports_streamlits_own_plotly_chunk_at_the_url_streamlit_imports_it(monkeypatch):
    """dashboard/preload.py around Streamlit's own static files: the page names a chunk that exists and holds plotly.js,
    by the URL Streamlit's entry script imports it (beside itself), so the browser evaluates it once."""
    from streamlit import file_util
    from streamlit.web.server.starlette.starlette_static_routes import create_streamlit_static_handler

    from dashboard.preload import PreloadPlotly

    static = Path(file_util.get_static_dir())
    app = PreloadPlotly(create_streamlit_static_handler(str(static), None))
    headers, page = served(app, "/")
    chunk = re.search(r'import\("\./(static/js/PlotlyChart\.[^"/]+\.js)"\)', page.decode()).group(1)
    assert f'<link rel="modulepreload" crossorigin href="./{chunk}">'.encode() in page
    assert b"window.Plotly=" in (static / chunk).read_bytes()
    entry = re.search(r'<script type="module" crossorigin src="\./(static/js/[^"]+)"', page.decode()).group(1)
    assert f"import(`./{Path(chunk).name}`)" in (static / entry).read_text()  # the frontend's own import, same folder
    assert int(headers[b"content-length"]) == len(page) and b"etag" not in headers
    assert served(app, f"/{chunk}")[1] == (static / chunk).read_bytes()  # scripts go out as they are


def test_without_a_plotly_chunk_the_page_is_served_unchanged_and_the_log_says_so(tmp_path, caplog):
    from streamlit.web.server.starlette.starlette_static_routes import create_streamlit_static_handler

    from dashboard.preload import PreloadPlotly

    (tmp_path / "index.html").write_text("<html><head><title>Streamlit</title></head><body></body></html>")
    (tmp_path / "manifest.json").write_text(json.dumps({"index.html": {"file": "static/js/index.js", "isEntry": True}}))
    app = PreloadPlotly(create_streamlit_static_handler(str(tmp_path), None), static=tmp_path)
    assert served(app, "/")[1] == (tmp_path / "index.html").read_bytes()
    assert [r.getMessage() for r in caplog.records] == [
        f"no PlotlyChart chunk in {tmp_path}/manifest.json: pages are served without plotly.js preloaded"]


def test_results_uri_from_argv_env_or_shipped(monkeypatch, tmp_path):
    monkeypatch.delenv(data.RESULTS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # no results/ here
    assert data.results_uri([]) == str(data.SHIPPED_RESULTS)
    assert data.results_uri(["--results", "gs://bucket/prefix"]) == "gs://bucket/prefix"
    monkeypatch.setenv(data.RESULTS_ENV, "/elsewhere")
    assert data.results_uri(["-q", "--res", "x"]) == "/elsewhere"


def test_cli_dashboard_runs_streamlit_on_the_app():
    args = build_parser().parse_args(["dashboard", "--results", "gs://b/p", "--port", "9999", "--address", "0.0.0.0"])
    argv = dashboard_argv(args, "gs://b/p")
    assert argv[1:4] == ["-m", "streamlit", "run"] and Path(argv[4]) == DASHBOARD_SERVER
    assert argv[argv.index("--server.port") + 1] == "9999" and argv[argv.index("--server.address") + 1] == "0.0.0.0"
    assert argv[-3:] == ["--", "--results", "gs://b/p"]
    assert argv[argv.index("--client.toolbarMode") + 1] == "viewer"  # no Deploy button, no developer menu


def test_a_line_joins_only_cells_that_differ_in_its_size(monkeypatch):
    """Llama 3.1 70B's prefill sweeps T, causal and tp: a line per variant and case, none zigzagging across cases."""
    app = open_app(monkeypatch, run=LLAMA_70B, experiment="prefill", tab="Latency")
    traces = [t for t in figures(app)[0]["data"] if t.get("name", "").startswith("cudnn · ")]
    assert len(traces) == 8, [t["name"] for t in traces]  # causal or not, at tp 1, 2, 4, 8
    assert all(len(t["x"]) == len(set(t["x"])) == 4 for t in traces)  # T 4k-32k, each once
    assert any(t["name"].endswith("not causal tp8") for t in traces), [t["name"] for t in traces]


def test_a_chart_whose_lines_mix_axes_says_which_in_its_subtitle(monkeypatch):
    """Eight lines per variant in one colour (causal × tp, N and K with tp) were told apart by hover alone: the
    subtitle names the axes they mix, on Throughput as on Latency; a chart of one line per variant says nothing."""
    mixing = open_app(monkeypatch, run=LLAMA_70B, experiment="prefill", tab="Throughput")
    assert "each variant's lines: N × K × causal × tp (8 cases, hover names each)" in heading(
        titled(mixing, "prefill: TFLOP/s"), "subtitle")
    single = open_app(monkeypatch, run="h200-models-steady-20261203", experiment="tp", tab="Latency")
    assert "each variant's lines" not in heading(figures(single)[0], "subtitle")


def test_axes_that_follow_the_size_do_not_split_its_line(monkeypatch):
    """h200-models' tp experiment: N and K follow tp, so one line per variant runs along N."""
    app = open_app(monkeypatch, run="h200-models-steady-20261203", experiment="tp", tab="Latency")
    traces = [t for t in figures(app)[0]["data"] if t.get("name", "").startswith(("cudnn · ", "te · "))]
    assert [len(t["x"]) for t in traces] == [4, 4], [t["name"] for t in traces]


def test_an_experiment_named_with_a_pipe_stays_in_its_cell_of_the_regressions():
    from dashboard import views

    worst = pd.DataFrame([{"experiment": "prefill | decode", "variant": "xla", "shape": "T 8", "ratio": 1.5,
                           "before": "r-1", "after": "r-2", "key": "k", "kernel": ""}])
    lines = views.regressions_markdown(worst).splitlines()
    assert lines[2].startswith("| prefill \\| decode | xla | T 8 | 1.50× | [r-1 → r-2](?")
    assert lines[2].replace("\\|", "").count("|") == lines[0].count("|")


def test_the_leaderboard_sets_each_cell_beside_the_published_figure_with_the_cudnn_its_worker_ran(monkeypatch):
    """hopper-long-warm-20261203-023241's jax worker loaded cuDNN 9.19.0 and its TE worker 9.14.0: each cell says its
    own worker's (runner.record.cudnn_ran, from each run's manifest)."""
    app = open_app(monkeypatch, run="hopper-long-warm-20261203-023241", tab="Leaderboard")
    beside = table(app, "our cuDNN")
    assert set(zip(beside["variant"], beside["our cuDNN"])) == {("cudnn", "9.19.0"), ("cudnn_fp8", "9.19.0"),
                                                                ("te", "9.14.0")}


def test_the_leaderboard_says_why_a_gpus_run_has_no_published_figure(monkeypatch, tmp_path):
    """Served where the published figures' folder holds none (an image built without docs/reference/): the
    Leaderboard tab's published section is that one line (runner.published.absent, as `attnbench show`)."""
    from runner import published

    monkeypatch.setenv(published.REFERENCE_ENV, str(tmp_path))
    app = open_app(monkeypatch, run="hopper-long-warm-20261203-023241", tab="Leaderboard")
    assert "Beside published figures" in texts(app.subheader)
    assert f"no published figures: {tmp_path} holds no sources.yaml" in texts(app.caption)
    assert not any("published ms" in frame.value for frame in app.dataframe)


def test_a_legend_is_given_the_columns_its_widest_entry_allows_and_the_height_its_rows_take():
    """plotly lays a legend of several rows out in columns of its widest entry, as many as its plot's width holds:
    the figure fixes that number (a column is a fraction of the plot's width, so a wider window draws the same rows)
    and is given the height of those rows, a long name wrapped into lines that fit the plot."""
    import plotly.graph_objects as go

    from dashboard import charts

    published = "published: cuDNN 9.19.1 (cudnn-frontend 1.19.0), NVIDIA H200 (FP8)"
    width = charts.plot_px()
    wrapped = charts.legend_name(published, width)
    assert width == 240 and wrapped == "published: cuDNN 9.19.1<br>(cudnn-frontend 1.19.0),<br>NVIDIA H200 (FP8)"
    assert all(charts._entry_px(line) <= width for line in wrapped.split("<br>"))
    assert charts.legend_name("cudnn", width) == "cudnn" and charts.legend_name(wrapped, width) == wrapped
    assert charts.legend_columns(["cudnn", "te", "xla"], width) == 2  # 81 px each of 240
    assert charts.legend_columns(["xla", wrapped], width) == 1
    assert charts.legend_px([], 2) == 0
    assert charts.legend_px(["cudnn", "te", "xla"], 2) == math.ceil(2 * (16.9 + 3) + 10)  # two rows of a line
    assert charts.legend_px(["xla", wrapped, "te"], 1) == math.ceil(2 * (16.9 + 3) + 3 * 16.9 + 3 + 10)
    fig = charts.fit_legends(go.Figure([go.Scatter(name=n, legend="legend") for n in ("a", published)]
                                       + [go.Scatter(name=published, showlegend=False)]).update_layout(
        legend={"title": {"text": "variant "}}, legend2={"title": {"text": "run "}}), width)
    assert {t.name for t in fig.data} == {"a", wrapped}  # a series keeps one name
    assert fig.layout.height == charts.TOP_PX + charts.PLOT_PX + fig.layout.margin.b  # the plot keeps its height
    assert fig.layout.margin.b == charts.AXIS_PX + charts.legend_px(["a", wrapped], 1) + charts.BOTTOM_PX  # no runs
    assert (fig.layout.legend.entrywidthmode, fig.layout.legend.entrywidth) == ("fraction", 1)


def test_a_legend_is_fitted_to_the_width_its_chart_is_drawn_at():
    """A full-width chart (History) has a plot 640 px wide at 1280 px, a chart beside another 272, beside its table
    240: six variants' legend takes three columns, two and one, and the figure the height of those rows, where every
    chart was given the narrowest's (six rows under a full-width plot drawn in two)."""
    import plotly.graph_objects as go

    from dashboard import charts

    names = ["cudnn (32 cells)", "te (32 cells)", "cudnn_fp8 (32 cells)", "pallas_triton (32 cells)", "xla (28 cells)",
             "te_fp8 (32 cells)"]

    def fitted(share: float) -> go.Figure:
        fig = go.Figure([go.Scatter(x=[1], y=[1], name=n, legendgroup=n) for n in names])
        return charts.fit(charts._layout(fig, "prefill: geometric mean", "", "started", "median_ms"), share)

    wide, half, narrow = fitted(1), fitted(1 / 2), fitted(charts.NARROWEST)
    assert [charts.plot_px(s) for s in (1, 1 / 2, charts.NARROWEST)] == [640, 272, 240]
    assert [f.layout.legend.entrywidth for f in (wide, half, narrow)] == [1 / 2, 1, 1]  # 214 px an entry
    assert wide.layout.margin.b == charts.AXIS_PX + charts.legend_px(names, 2) + charts.BOTTOM_PX
    assert narrow.layout.margin.b == charts.AXIS_PX + charts.legend_px(names, 1) + charts.BOTTOM_PX  # 6 rows, not 3
    assert all(f.layout.legend.traceorder == "normal" for f in (wide, half, narrow))  # plotly's grid, not its groups


def test_a_title_wider_than_its_chart_wraps_onto_lines_the_top_margin_is_given():
    """plotly wraps no title: charts.fit breaks a title and subtitle at their spaces into lines that fit the chart's
    column at 1280 px (charts.figure_px), and the top margin and the figure grow by the lines added, so the plot keeps
    its size; a chart of the whole width keeps them on one line each."""
    import plotly.graph_objects as go

    from dashboard import charts

    title, subtitle = "padded-decode: % of memory bandwidth vs N", "B8 T1 S32768 H128 bfloat16 fwd · device timer · q1–q3"

    def drawn(share: float) -> go.Figure:
        fig = charts._layout(go.Figure(go.Scatter(x=[1, 2], y=[1, 2])), title, subtitle, "seq_len", "tflops")
        return charts.fit(fig, share)

    narrow, wide = drawn(charts.NARROWEST), drawn(1)
    assert charts.figure_px() == 320 and charts.figure_px(1 / 2) == 352 and charts.plot_px() == 240
    assert narrow.layout.title.text == "padded-decode: % of memory<br>bandwidth vs N"  # 26 bold letters a line
    assert narrow.layout.title.subtitle.text == "B8 T1 S32768 H128 bfloat16 fwd · device<br>timer · q1–q3"
    room = 0.99 * charts.figure_px() - charts.TITLE_RIGHT_PX
    for text, letter in ((narrow.layout.title.text, 7 * 18 / 13 * 1.2), (narrow.layout.title.subtitle.text, 7.0)):
        assert all(len(line) * letter <= room for line in text.split("<br>"))
    assert narrow.layout.margin.t == charts.TOP_PX + math.ceil(1.3 * (18 + 13))  # a line more of each
    assert narrow.layout.height - narrow.layout.margin.t - narrow.layout.margin.b == charts.PLOT_PX
    assert (1 - narrow.layout.title.y) * narrow.layout.height == pytest.approx(charts.TITLE_BASELINE_PX)
    assert (wide.layout.title.text, wide.layout.title.subtitle.text) == (title, subtitle)
    assert wide.layout.margin.t == charts.TOP_PX and wide.layout.height == narrow.layout.height - 41
    assert charts.wrap(narrow.layout.title.text, room, 7 * 18 / 13 * 1.2) == narrow.layout.title.text  # fits: kept
    short = charts._layout(go.Figure(), "prefill: latency vs T", "B1", "seq_len", "tflops")
    beside = charts._layout(go.Figure(), title, subtitle, "seq_len", "tflops")
    level = charts.fit(short, charts.NARROWEST, beside=(beside,))  # a chart beside a taller title's: plots level
    assert level.layout.title.text == "prefill: latency vs T" and level.layout.margin.t == narrow.layout.margin.t
    assert beside.layout.title.text == title  # only measured here: fitted where it is drawn
    style = charts.Style({}, ())
    soak = charts.fit(charts.soak_lines(pd.DataFrame(columns=["variant", "run", "case", "t_s", "tflops"]), "tflops",
                                        style, "throughput (median kernel time of each bin's calls)", ""))
    assert soak.layout.title.text.count("<br>") == 1 and soak.layout.margin.t == charts.TOP_PX + math.ceil(1.3 * 18)


def test_charts_side_by_side_get_the_top_margin_of_the_taller_titles(monkeypatch):
    """Throughput draws an experiment's rate beside its share of the ceiling, Soak its charts two by two: where one
    title wraps and the other does not, both get the margin the wrapped one needs (plot's `beside`, views.plot_beside),
    so their plots stand level."""
    from dashboard import charts

    app = open_app(monkeypatch, run=["llama3.1-70b-20261206-tefp8", "llama3.1-70b-20261204-padded"], tab="Throughput")
    drawn = {heading(f): f["layout"] for f in figures(app)}
    rate, share = drawn["prefill: TFLOP/s vs T"], drawn["prefill: % of matmul peak vs T"]
    assert "<br>" not in rate["title"]["text"] and "<br>" in share["title"]["text"]
    assert rate["margin"]["t"] == share["margin"]["t"] > charts.TOP_PX
    soak = {heading(f): f["layout"]["margin"]["t"] for f in figures(open_app(monkeypatch, run="soak-20261203",
                                                                             tab="Soak"))}
    assert soak["SM clock"] == soak["throughput (median kernel time of each bin's calls)"] > charts.TOP_PX


def test_a_steady_value_draws_as_one_level_with_round_ticks():
    """An SM clock held at 1980 MHz at every T (min and max too): plotly zoomed to ±1 MHz, ticks half a MHz apart
    (1,979.5); the axis spans ±2 % of the level instead. Values that move more than 1 % keep plotly's range."""
    from dashboard import charts

    style = charts.Style({"xla": "#1f77b4"}, ("r",))
    steady = pd.DataFrame({"variant": "xla", "run": "r", "seq_len": [64, 128, 256], "clock": 1980.0, "low": 1980.0,
                           "high": [1980.0, 1980.0, 1990.0]})
    fig = charts.lines(steady, "seq_len", "clock", style, "t", "s", log_y=False, low="low", high="high")
    assert fig.layout.yaxis.range == pytest.approx((1985 - 0.02 * 1990, 1985 + 0.02 * 1990))
    moving = charts.lines(steady.assign(high=[1980.0, 1980.0, 2010.0]), "seq_len", "clock", style, "t", "s",
                          log_y=False, low="low", high="high")
    assert moving.layout.yaxis.range is None


def test_history_names_an_unconfirmed_step_apart_and_marks_it_in_the_compare_tabs_orange(monkeypatch, tmp_path):
    """B's one slower cudnn cell moved 3x on 3 samples that did not converge: `attnbench compare` of the two runs says
    unconfirmed, so History claims no regression (its success line), names the step apart, linked to the
    comparison, and the cell's chart marks it 'unconfirmed step', orange as the Compare tab draws it."""
    from dashboard import views
    from runner import compare, frames
    from test_compare import unconverged

    template = shipped(H200_LAB5_NO_TE)
    moved = next(c for c in template.cells if c.variant == "cudnn" and c.status == "ok")
    for run_id, day, factor in (("lab5-a", 1, 1.0), ("lab5-b", 2, 3.0)):
        manifest, cells = copy_run(template, run_id, datetime.fromisoformat(f"2026-11-0{day}T00:00:00+00:00"),
                                   factor=lambda c: factor if c.key == moved.key else 1.0)
        write_run(tmp_path / "h200" / run_id, manifest,
                  [unconverged(c, 3, 0.05) if c.key == moved.key and factor > 1 else c for c in cells])
    label = "cudnn · " + compare.labels(frames.cells([moved])).iloc[0]
    app = open_app(monkeypatch, tmp_path, run="lab5-b", tab="History", hexp=moved.experiment, hcell=label)
    assert [s.value for s in app.success] == [views.NO_REGRESSIONS]
    assert "1 unconfirmed step." in texts(app.caption)
    assert "| 3.00× | [lab5-a → lab5-b](?run=lab5-b&run=lab5-a&tab=Compare" in texts(app.markdown)
    (step,) = [t for t in figures(app)[0]["data"] if t.get("name", "").endswith("step")]
    assert step["name"] == "unconfirmed step" and step["marker"]["color"] == VERDICT_COLOURS["unconfirmed"]


def test_a_series_bookmarked_before_its_label_named_policy_none_still_opens_it(monkeypatch):
    """A ?series= link made when a run from before the choice of policy left it out of the label
    ('lab5 · NVIDIA H200') opens that series, now 'lab5 · NVIDIA H200 · none', with no "not found" warning."""
    app = open_app(monkeypatch, run="lab5-20261202-110556", tab="History", hexp="fp8", series="lab5 · NVIDIA H200")
    assert not app.exception
    assert app.selectbox(key="series").value == "lab5 · NVIDIA H200 · none"
    assert "has no runs in this store" not in texts(app.warning)
    assert app.query_params["series"] == "lab5 · NVIDIA H200 · none"  # the URL, copied again, names it so
    now = open_app(monkeypatch, run="lab5-20261202-110556", tab="History", series="lab5 · NVIDIA H200 · burst")
    assert "Spec · GPU · power policy: lab5 · NVIDIA H200 · burst has no runs in this store" in texts(now.warning)


def test_history_lists_a_cell_that_went_from_ok_to_incorrect_among_its_worst_regressions(monkeypatch):
    """The shipped lab5 pair (cuDNN 9.19, then 9.14): two cudnn_fp8 cells ok, then incorrect; `attnbench compare`
    exits 1 on them, and History's worst regressions list them, linked to the comparison."""
    app = open_app(monkeypatch, run="lab5-20261202-110556", tab="History", hexp="fp8")
    assert app.selectbox(key="series").value == "lab5 · NVIDIA H200 · none"
    worst = texts(app.markdown)
    # the kernel column between (its cuDNN steps ran another kernel) is empty: compare marks only cells timed in both
    assert worst.count("| ok → incorrect |  | [lab5-20261202-104743 → lab5-20261202-110556](?") == 2, worst


def test_throughput_says_where_a_gpu_without_a_cited_mma_rate_has_no_mma_chart(monkeypatch, tmp_path):
    """The L4 walk's finding 5: a run on an L4 (no row in runner.metrics.MMA_PER_CLOCK_PER_SM) drew TFLOP/s and the
    % of the measured peak but no "% of MMA peak at its clock" chart, and no line said why; the tab says it as show
    does (runner.metrics.no_mma_rate), by the timer whose clock was read, not by wall (no GPU has that share there),
    not beside GB/s, and the run under its H200 manifest draws the chart and says nothing of it."""
    from stores import H200_WARM, relabelled

    said = "% MMA@clock: no cited MMA rate for NVIDIA L4 (compute capability 8.9)"
    l4 = relabelled(H200_WARM, tmp_path / "l4" / "l4-run")
    app = open_app(monkeypatch, l4.parent, tab="Throughput")
    assert not app.exception and said in texts(app.caption)
    assert not any("MMA peak" in heading(f) for f in figures(app))
    assert said not in texts(open_app(monkeypatch, l4.parent, tab="Throughput", timer="wall").caption)
    assert said not in texts(open_app(monkeypatch, l4.parent, tab="Throughput", rate="GB/s").caption)
    h200 = open_app(monkeypatch, SHIPPED / "h200", run=H200_WARM.rpartition("/")[2], tab="Throughput")
    assert "no cited MMA rate" not in texts(h200.caption) and any("MMA peak" in heading(f) for f in figures(h200))


def test_the_leaderboard_tab_has_shows_mma_column_and_says_where_a_gpu_has_no_cited_rate(monkeypatch, tmp_path):
    """Issue 37: the Leaderboard tab's board is show's (runner.leaderboard.rows): an H200 run's winners have their
    % MMA@clock, and on a GPU with no cited MMA rate the line show prints under its board (runner.metrics.no_mma_rate)
    stands under the tab's, and in its markdown, where the tab left the column missing without a word."""
    from runner import leaderboard, metrics
    from runner.store import LocalStore
    from stores import H200_WARM, relabelled

    run = shipped(H200_WARM)
    shows = pd.DataFrame(leaderboard.rows(leaderboard.contested(leaderboard.leaderboard(run.cells,
                                                                                        manifest=run.manifest))))
    h200 = open_app(monkeypatch, SHIPPED / "h200", run=H200_WARM.rpartition("/")[2], tab="Leaderboard", md="true")
    board = table(h200, "fastest")
    assert board.set_index("shape")["% MMA@clock"].to_dict() == shows.set_index("shape")["% MMA@clock"].to_dict()
    assert "no cited MMA rate" not in texts(h200.caption) + h200.code[0].value
    l4 = relabelled(H200_WARM, tmp_path / "l4" / "l4-run")
    said = metrics.no_mma_rate(LocalStore(l4.parent).read("l4-run").manifest.machine)
    app = open_app(monkeypatch, l4.parent, tab="Leaderboard", md="true")
    assert not app.exception and said in texts(app.caption) and said in app.code[0].value
