"""The dashboard's data and drawing pieces without streamlit: dashboard/data.py (the store snapshot and its run
cache), dashboard/tables.py (what views compute) and dashboard/charts.py (axis ticks, colours)."""

from __future__ import annotations

import datetime as dt
import re
import shutil
from types import SimpleNamespace

import pandas as pd
import pytest

from helpers import REPO
from dashboard import charts, data, tables
from conftest import BUCKET
from runner.record import NO_POLICY
from runner.results import CELLS, MANIFEST, assemble, misnamed
from runner.store import open_store
from stores import CPU_LAB5, H200_LAB5, H200_LAB5_NO_TE, H200_LONG, SHIPPED, copy_files, copy_run, shipped, write_run
from test_results import RUN_ID, manifest, some_records
from test_store import lines


def rated(*folders: str, timer: str = "device") -> pd.DataFrame:
    """The shipped runs' cells as the views get them: rated by `timer`, speed-ups over xla."""
    snap = data.snapshot(str(SHIPPED), data.RunCache())
    keys = tuple(f.rpartition("/")[2] for f in folders)
    cells = tables.with_rates(snap.cells(keys), snap.runs, timer)
    return cells.assign(speedup=tables.speedup(cells, "xla"))


def manifests(*folders: str) -> dict:
    """The shipped runs' manifests by the dashboard's run key."""
    snap = data.snapshot(str(SHIPPED), data.RunCache())
    return {key: snap.manifests[key] for key in (f.rpartition("/")[2] for f in folders)}


# --- charts ------------------------------------------------------------------------------------------------------

def test_the_dashboards_charts_draw_their_grid_in_the_reports_colour():
    import plotly.graph_objects as go
    from matplotlib.colors import to_hex
    from runner import figures

    chart = figures.Chart("c", "t", "s", "x", "y", (figures.Series("cudnn", "cudnn", ((1024.0, 1.0), (2048.0, 2.0))),),
                          ("r",))
    report = figures.figure_of(chart).axes[0].xaxis.get_gridlines()[0].get_color()
    dashboard = charts._layout(go.Figure(), "t", "s", "seq_len", "median_ms").layout
    assert to_hex(report) == dashboard.xaxis.gridcolor == dashboard.yaxis.gridcolor


def test_log_ticks_are_1_2_5_with_one_beyond_each_end():
    assert charts.log_ticks(0.004, 0.13) == [0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2]
    assert charts.log_ticks(3, 4) == [2, 5]  # within one decade there are still labels
    assert charts.log_ticks(3e-4, 900) == [1e-4, 1e-3, 1e-2, 0.1, 1, 10, 100, 1000]  # decades past four of them
    assert charts.log_ticks(1, 9000)[:4] == [0.5, 1, 2, 5]  # four decades: 1-2-5 still
    assert charts.log_ticks(1, 2e4) == [0.1, 1, 10, 100, 1000, 1e4, 1e5]  # past four, short of five: decades


def test_colours_are_fixed_for_known_variants_and_never_repeat():
    others = [f"kernel_{i}" for i in range(20)]
    colours = charts.colours(["cudnn", *others])
    assert colours["cudnn"] == charts.VARIANT_COLOURS["cudnn"] == charts.colours([])["cudnn"]
    assert len({colours[v] for v in [*charts.VARIANT_COLOURS, *others]}) == len(charts.VARIANT_COLOURS) + 20


# --- rates and tables --------------------------------------------------------------------------------------------

def test_rates_follow_the_chosen_timer_and_the_runs_measured_peak():
    snap = data.snapshot(str(SHIPPED), data.RunCache())
    recorded = snap.cells(("hopper-long-20261202-110136",))
    device = tables.with_rates(recorded, snap.runs, "device")
    ok = recorded["status"] == "ok"
    # the record's headline timer is device: the same rates as the runner computed, from the run's own peak
    assert device.loc[ok, "tflops"].tolist() == pytest.approx(recorded.loc[ok, "tflops"].tolist())
    assert device.loc[ok, "pct_of_peak"].tolist() == pytest.approx(recorded.loc[ok, "pct_of_peak"].tolist())
    wall = tables.with_rates(recorded, snap.runs, "wall")
    assert wall.loc[ok, "latency_ms"].tolist() == pytest.approx((recorded.loc[ok, "wall_median_s"] * 1e3).tolist())
    # by another timer, the same columns hold that timer's rates: a frame never holds two names for one rate
    assert wall.loc[ok, "tflops"].tolist() == pytest.approx(
        (recorded.loc[ok, "flops"] / recorded.loc[ok, "wall_median_s"] / 1e12).tolist())
    assert wall.loc[ok, "gbps"].tolist() == pytest.approx(
        (recorded.loc[ok, "bytes_min"] / recorded.loc[ok, "wall_median_s"] / 1e9).tolist())
    assert not {"tflop_s", "gb_s", "tflop_per_j"} & set(wall.columns)
    assert device.loc[~ok, "latency_ms"].isna().all()
    assert wall["us_per_token"].isna().all()  # no serving cell: no time per generated token


def test_the_share_of_the_mma_peak_at_the_clock_is_only_the_timer_whose_samples_the_clock_was_read_over():
    """% MMA@clock is a timer's TFLOP/s over the MMA peak at the SM clock NVML read while that timer sampled: the
    telemetry spans the headline's samples (device), so by wall, sampled after it under another clock, there is none
    (a record of schema 14 and before names its telemetry's timer by step 14 -> 15)."""
    snap = data.snapshot(str(SHIPPED), data.RunCache())
    recorded = snap.cells(("hopper-long-burst-20261202",))  # with NVML telemetry, written at schema 3
    timed = recorded["clock_peak_tflops"].notna() & recorded["wall_median_s"].notna()
    assert timed.any() and set(recorded.loc[timed, "telemetry_timer"]) == {"device"}
    device, wall = (tables.with_rates(recorded, snap.runs, timer)[timed] for timer in ("device", "wall"))
    assert device["pct_of_clock_peak"].tolist() == pytest.approx(
        (100 * device["tflops"] / recorded.loc[timed, "clock_peak_tflops"]).tolist())
    assert device["pct_of_clock_peak"].tolist() == pytest.approx(recorded.loc[timed, "pct_of_clock_peak"].tolist())
    assert wall["tflops"].notna().all() and wall["pct_of_clock_peak"].isna().all()


@pytest.mark.parametrize("schema", [11, 12])
def test_a_split_cells_shares_by_any_timer_are_of_all_its_devices_ceilings(schema):
    """As the record has them (schema 12, or 11 read through its step): a split cell's rates over D ceilings."""
    fixture = REPO / "tests" / "fixtures" / f"schema{schema}-split"
    snap = data.snapshot(str(fixture), data.RunCache())
    recorded = snap.cells(tuple(snap.runs.index))
    wall = tables.with_rates(recorded, snap.runs, "wall")
    assert recorded["devices"].max() == 4 and recorded["pct_of_peak"].notna().all()
    assert wall["pct_of_peak"].tolist() == pytest.approx(recorded["pct_of_peak"].tolist())
    assert wall["pct_of_bandwidth"].tolist() == pytest.approx(recorded["pct_of_bandwidth"].tolist())
    peak = recorded["run"].map(snap.runs["peak_tflops"])
    assert wall["pct_of_peak"].tolist() == pytest.approx((100 * wall["tflops"] / (peak * recorded["devices"])).tolist())


@pytest.mark.parametrize("fixture, rate", [("schema10-packed", "tflops"), ("serving-cpu", "gbps")])
def test_the_throughput_tab_says_what_a_packed_rows_flops_or_a_serving_cells_bytes_count_as_show_does(fixture, rate):
    """The sentences `show` and the report print under such a table (runner.report.table_notes), where the tab
    draws that rate, and only there: a packed row's TFLOP/s, a serving cell's GB/s."""
    from runner import report

    snap = data.snapshot(str(REPO / "tests" / "fixtures" / fixture), data.RunCache())
    cells = tables.with_rates(snap.cells(tuple(snap.runs.index)), snap.runs, "wall")
    said = {"tflops": [report.PACKED_FLOPS], "gbps": [report.SERVING_BYTES]}
    assert {y: tables.rate_notes(cells, y) for y in said} == {y: said[y] if y == rate else [] for y in said}
    assert tables.rate_notes(cells[cells["variant"] == "none"], rate) == []  # no such cell drawn: nothing said


def test_speedups_compare_with_the_baseline_at_the_same_run_experiment_and_shape():
    cells = rated(H200_LAB5, H200_LAB5_NO_TE)
    seq = cells[(cells["experiment"] == "seq-len") & (cells["seq_len"] == 1024)].set_index(["run", "variant"])
    for run in ("lab5-20261202-110556", "lab5-20261202-104743"):
        assert seq.loc[(run, "cudnn"), "speedup"] == pytest.approx(
            seq.loc[(run, "xla"), "latency_ms"] / seq.loc[(run, "cudnn"), "latency_ms"])
        assert seq.loc[(run, "xla"), "speedup"] == 1.0


def test_the_summary_table_has_swept_values_down_and_variants_across():
    cells = rated(H200_LAB5)
    seq = tables.measured(cells[cells["experiment"] == "seq-len"])
    table = tables.summary(seq.assign(unsettled=seq["seq_len"] == 512))
    assert list(table.columns) == ["T", "naive", "xla", "cudnn"] and list(table["T"]) == ["64", "128", "256", "512",
                                                                                        "1024"]
    cudnn = seq[(seq["variant"] == "cudnn") & (seq["seq_len"] == 1024)].iloc[0]
    assert table.set_index("T").loc["1024", "cudnn"] == (
        f"{cudnn['latency_ms']:.3g} ±{cudnn['noise']:.1%} ·{cudnn['speedup']:.2f}×")
    assert "⚠" in table.set_index("T").loc["512", "xla"] and "⚠" not in table.set_index("T").loc["256", "xla"]
    markdown = tables.markdown(table).splitlines()
    assert markdown[0] == "| T | naive | xla | cudnn |" and len(markdown) == 7


def test_the_summary_marks_a_time_that_did_not_converge_and_its_legend_names_only_the_marks_shown():
    """A CPU run reads no clock: its legend said '⚠: SM clock unstable' all the same. Each mark and its meaning have
    one owner (runner.marks); a time whose noise never met its target is marked †, by the timer the page shows."""
    seq = tables.measured(rated(H200_LAB5).query("experiment == 'seq-len'"))
    assert not seq["unsettled"].any() and not seq["unconverged"].any() and tables.legend(seq) == ""
    slow = seq["seq_len"] == 512
    marked = seq.assign(unconverged=slow)
    table = tables.summary(marked).set_index("T")
    assert table.loc["512", "xla"].split(" ·")[0].endswith(" †") and "†" not in table.loc["256", "xla"]
    assert tables.legend(marked) == ("† not converged: noise above its target when sampling stopped, or under 5 "
                                     "samples")
    both = tables.legend(marked.assign(unsettled=slow))
    assert both.startswith("⚠ unsettled: sampled before its power state settled or on an SM clock that moved more "
                           "than 2 %; † not converged: ")
    wall = tables.measured(rated(H200_LAB5, timer="wall"))  # the wall timer ran out of budget on most H200 cells
    assert wall["unconverged"].any() and not tables.measured(rated(H200_LAB5))["unconverged"].all()


def test_a_summary_row_reads_an_axis_as_show_does():
    """The causal experiment sweeps causal: its rows read no / yes, as `attnbench show` and the report write them
    (runner.shape.text), where the dashboard read False / True."""
    causal = tables.measured(rated(H200_LAB5).query("experiment == 'causal'"))
    assert list(tables.summary(causal)["causal"]) == ["no", "yes"]


def test_a_summary_keeps_the_rows_whose_swept_axis_is_null():
    """page_size [16, null] (serving.yaml's cpu experiment) or window [null, W]: a null row reads as show writes it
    ('dense', 'no window'), where pandas' pivot dropped it and a variant whose every cell was dense failed the view;
    a dense row's page order, which it has none of, reads '-' as in show, not 'contiguous'."""
    seq = tables.measured(rated(H200_LAB5).query("experiment == 'seq-len' and seq_len == 1024"))
    paged = seq.assign(page_size=seq["variant"].map({"cudnn": 16}))  # naive and xla dense
    table = tables.summary(paged).set_index("P")
    assert list(table.index) == ["dense", "16"] and table.loc["dense", "xla"].startswith(
        f"{seq.set_index('variant').loc['xla', 'latency_ms']:.3g} ")
    windowed = seq.assign(window=seq["variant"].map({"xla": 128}))
    assert list(tables.summary(windowed)["W"]) == ["no window", "128"]
    shuffled = paged.assign(page_order=paged["variant"].map({"cudnn": "shuffled"}).fillna("contiguous"))
    assert tables.summary(shuffled)[["P", "page_order"]].values.tolist() == [["dense", "-"], ["16", "shuffled"]]


def test_failures_group_by_reason_numbers_aside_and_keep_skips_apart():
    cells = pd.DataFrame({
        "key": list("abcdef"), "run": ["r1", "r1", "r2", "r1", "r1", "r2"], "experiment": ["e"] * 6,
        "variant": ["fp8", "fp8", "fp8", "te", "te", "te"],
        "status": ["incorrect", "incorrect", "incorrect", "crashed", "skipped", "timeout"],
        "reason": ["out relative error 12.4 > tolerance 0.1", "out relative error 2.85 > tolerance 0.1",
                   "out relative error 2.85 > tolerance 0.1", "worker exited\ntraceback...",
                   "te needs the Python package 'transformer_engine'", "still running after 120 s"],
    })
    failed, skipped = tables.failures(cells)
    assert failed[["variant", "status", "cells", "runs"]].values.tolist() == [
        ["fp8", "incorrect", 3, 2], ["te", "crashed", 1, 1], ["te", "timeout", 1, 1]]
    assert failed.loc[1, "reason"] == "worker exited"  # the first line of a long error
    assert skipped[["variant", "status", "cells"]].values.tolist() == [["te", "skipped", 1]]


def test_steps_are_each_move_from_one_point_to_the_next_that_compares_rule_calls_a_move():
    flat = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0]
    assert tables.steps(flat, [0.01] * 7) == []
    there, back = tables.steps([1.0, 1.0, 1.0, 1.5, 1.0, 1.0, 1.0], [0.01] * 7)  # a run slow alone: there and back
    assert (there, back) == ((3, 1.5), (4, pytest.approx(1 / 1.5)))
    (step,) = tables.steps([1.0, 1.01, 0.99, 1.1, 1.11, 1.09, 1.1], [0.01] * 7)
    assert step[0] == 3 and step[1] == pytest.approx(1.1 / 0.99)
    assert tables.steps([1.0, 1.01, 0.99, 1.1, 1.11, 1.09], [0.2] * 6) == []  # within the noise
    assert tables.steps([1.0, 1.01, 0.99, 1.1, 1.11, 1.09], [float("nan")] * 6) == []  # a noise not known
    assert tables.steps([1.0, 1.0, 2.0, 4.0, 4.0, 4.0], [0.01] * 6) == [(2, 2.0), (3, 2.0)]  # neither hides the other


def test_history_lists_every_step_that_compare_of_its_two_runs_calls_slower(tmp_path):
    """Six runs of lab5 in a store made here, one cudnn cell 1, 1, 2, 4, 4, 4 times slower and another drifting 6 %
    a run: `attnbench compare` of neighbouring runs calls r1 → r2 and r2 → r3 slower for the first and each of the
    five for the second; History listed one 2x step and one 1.06x step, its steps a window of 3 runs apart (review
    s11, finding 2). Now each of those pairs is a row of its regressions, at compare's ratio."""
    from runner import compare

    template = shipped(H200_LAB5_NO_TE)
    jump, drift = [c.key for c in template.cells if c.variant == "cudnn" and c.status == "ok"][:2]
    runs = [f"lab5-{i}" for i in range(6)]
    for i, (run_id, times) in enumerate(zip(runs, [1, 1, 2, 4, 4, 4])):
        factor = {jump: times, drift: 1.06 ** i}
        write_run(tmp_path / "h200" / run_id, *copy_run(template, run_id, dt.datetime(2026, 11, 1 + i,
                                                                                      tzinfo=dt.timezone.utc),
                                                        factor=lambda c: factor.get(c.key, 1.0)))
    snap = data.snapshot(str(tmp_path), data.RunCache())
    cells = snap.cells(tuple(snap.runs.index))
    worst = tables.regressions(tables.judged_steps(tables.history(cells, snap.runs, "device"), snap.manifests), 20)
    slower = {}
    for before, after in zip(runs, runs[1:]):
        found = compare.compare(cells[cells["run"] == before], cells[cells["run"] == after], snap.manifests[before],
                                snap.manifests[after]).cells
        slower.update({(key, before, after): ratio for key, ratio, verdict in
                       zip(found["key"], found["ratio"], found["verdict"]) if verdict == "slower"})
    assert {(key, before) for key, before, _ in slower} == {(jump, "lab5-1"), (jump, "lab5-2"),
                                                            *[(drift, run) for run in runs[:-1]]}
    assert dict(zip(zip(worst["key"], worst["before"], worst["after"]), worst["ratio"])) == pytest.approx(slower)


def test_the_history_says_the_threshold_its_steps_apply():
    from dashboard import views

    said = float(re.search(r"more than ([\d.]+) %", views.NO_REGRESSIONS)[1]) / 100
    before = [1.0] * 3
    assert tables.steps(before + [1 + said * 1.2] * 3, [0.0] * 6)  # past what the text says: a step
    assert not tables.steps(before + [1 + said * 0.8] * 3, [0.0] * 6)  # short of it: none


def test_series_and_the_run_to_compare_follow_spec_gpu_power_policy_and_date():
    snap = data.snapshot(str(SHIPPED), data.RunCache())
    runs = snap.runs
    assert tables.comparable(snap.manifests, "lab5-20261202-110556", []) == "lab5-20261202-104743"  # its spec identity
    assert tables.comparable(snap.manifests, "lab5-20261202-104743", ["decode-20261202", "lab5-warm-20261203-023042"]
                             ) == "lab5-warm-20261203-023042"  # the first selected of its spec name and GPU
    # its predecessor: the warm run of the sitting before (compare.previous), not its cold twin of 53 s before
    assert tables.comparable(snap.manifests, "lab5-warm-20261203-023042", []) == "lab5-warm-20261202-182308"
    # the runs table says a run from before the choice of power policy as every view names it (record.NO_POLICY)
    assert runs.loc["lab5-20261202-104743", "power"] == NO_POLICY
    assert tables.series(runs)[f"lab5 · NVIDIA H200 · {NO_POLICY}"][:2] == ["lab5-20261202-104743",
                                                                          "lab5-20261202-110556"]  # 2 hashes
    long = [keys for label, keys in tables.series(runs).items()
            if label.startswith(f"hopper-long · NVIDIA H200 · {NO_POLICY} · spec")]
    assert sorted(long) == [["hopper-long-20261202-105336"], ["hopper-long-20261202-110136"]]  # 2 identities
    assert "lab5-warm-20261203-023042" in tables.series(runs)["lab5 · NVIDIA H200 · steady (after settling)"]
    burst, steady = (tables.series(runs)[f"llama3.1-70b · NVIDIA H200 · {p}"] for p in ("burst", "steady (in load)"))
    assert "llama3.1-70b-20261206-burst" in burst and not set(burst) & set(steady)  # holds as runs are shipped


def test_a_series_label_spelt_without_policy_none_is_known_by_its_label_now():
    """Before a run from before the choice of policy was labelled '· none', its series read 'lab5 · NVIDIA H200':
    former_labels maps each such spelling (the spec identity's digits kept) to today's, and no other label."""
    runs = data.snapshot(str(SHIPPED), data.RunCache()).runs
    former = tables.former_labels(runs)
    assert former["lab5 · NVIDIA H200"] == f"lab5 · NVIDIA H200 · {NO_POLICY}"
    long = {old: now for old, now in former.items() if old.startswith("hopper-long · NVIDIA H200 · spec ")}
    assert len(long) == 2 and all(now == old.replace(" · spec", f" · {NO_POLICY} · spec") for old, now in long.items())
    assert set(former.values()) == {label for label in tables.series(runs).index if f" · {NO_POLICY}" in label}


# --- the store snapshot ------------------------------------------------------------------------------------------

def test_a_refresh_parses_again_only_the_runs_whose_files_changed(monkeypatch, tmp_path):
    for folder in (H200_LONG, H200_LAB5):
        shutil.copytree(SHIPPED / folder, tmp_path / folder)
    parsed = []
    monkeypatch.setattr(data, "assemble", lambda where, objects: parsed.append(where) or assemble(where, objects))
    cache = data.RunCache()
    first = data.snapshot(str(tmp_path), cache)
    first.cells(("hopper-long-20261202-110136", "lab5-20261202-110556"))
    with open(tmp_path / H200_LAB5 / CELLS, "a") as f:
        f.write((SHIPPED / H200_LAB5 / CELLS).read_text().splitlines()[0] + "\n")  # a repeated line: new bytes
    again = data.snapshot(str(tmp_path), cache)
    cells = again.cells(("hopper-long-20261202-110136", "lab5-20261202-110556"))
    assert [p.rpartition("/")[2] for p in parsed] == ["hopper-long-20261202-110136", "lab5-20261202-110556",
                                                       "lab5-20261202-110556"]
    assert len(cells) == 24 + 76 and "repeated cell keys" in again.run_problems(["lab5-20261202-110556"])[0]


def test_listing_runs_reads_manifests_only(monkeypatch, tmp_path):
    copy_files(H200_LONG, tmp_path / "h200" / "a", "a", "2026-12-01T00:00:00+00:00")
    (tmp_path / "h200" / "a" / CELLS).write_text("not json\n")
    snap = data.snapshot(str(tmp_path), data.RunCache())
    assert list(snap.runs.index) == ["a"] and snap.problems == [] and snap.parsed == {}
    assert "not valid JSON" in snap.run_problems(["a"])[0]


def test_a_sharded_run_lists_as_one_from_its_manifests(tmp_path):
    run = tmp_path / "h200" / "hopper-long-20261202-110136"
    run.mkdir(parents=True)
    for index in range(2):
        shutil.copy(SHIPPED / H200_LONG / MANIFEST, run / f"manifest-{index}-of-2.json")
    snap = data.snapshot(str(tmp_path), data.RunCache())
    assert list(snap.runs.index) == ["hopper-long-20261202-110136"]
    assert snap.runs.loc["hopper-long-20261202-110136", "planned"] == 48  # the two shards' planned cells


@pytest.fixture(params=["local", "gcs"])
def results(request, tmp_path) -> str:
    """An empty store: a local folder, or a bucket of the GCS emulator."""
    if request.param == "local":
        return str(tmp_path / "results")
    request.getfixturevalue("emulator")
    return f"gs://{BUCKET}/results"


def test_a_run_in_progress_shows_every_cell_once_with_those_still_in_objects_of_their_own(results):
    """A part in progress keeps its newest cells in objects of their own (cells/KEY.json) until it ends: the
    dashboard lists and reads them with the rest, each cell once, and names a stray under cells/ as a problem."""
    records, store = some_records(), open_store(results)
    store.put(f"h200/{RUN_ID}/{MANIFEST}", manifest(ended_at=None).model_dump_json().encode())
    store.put(f"h200/{RUN_ID}/{CELLS}", lines(records[:3]))
    store.put(f"h200/{RUN_ID}/cells/{records[3].key}.json", lines(records[2:4]))  # uploads overlap after SIGTERM
    store.put(f"h200/{RUN_ID}/cells/{records[4].key}.json", lines(records[3:]))
    store.put(f"h200/{RUN_ID}/cells/notes.txt", b"a stray")
    store.put(f"cpu/new/{MANIFEST}", manifest(run_id="new", ended_at=None).model_dump_json().encode())
    store.put(f"cpu/new/cells/{records[1].key}.json", lines(records[:2]))  # nothing consolidated yet
    snap = data.snapshot(results, data.RunCache())
    assert snap.error is None and sorted(snap.runs.index) == ["new", RUN_ID]
    assert snap.problems == [f"{store.location(f'h200/{RUN_ID}')}/cells/notes.txt: {misnamed('cells/notes.txt')}; "
                             "left out"]
    for run, expected in ((RUN_ID, records), ("new", records[:2])):
        assert sorted(snap.cells((run,))["key"]) == sorted(r.key for r in expected) and snap.run_problems([run]) == []




def test_a_chart_of_one_shape_stands_its_bars_under_that_shape():
    """h200-models' alibi experiment sweeps nothing: views.figure's bars are labelled with the shape, not ''."""
    from dashboard import views

    cells = rated("h200/h200-models-steady-20261203")
    cells = tables.measured(cells[cells["experiment"] == "alibi"])
    run = cells["run"].iloc[0]
    sel = views.Selection([run], cells, {}, "device", None, charts.Style(charts.colours(set(cells["variant"])), (run,)))
    fig = views.figure(cells, sel, "latency_ms", "latency", low="q1_ms", high="q3_ms")
    categories = {x for trace in fig.data if trace.showlegend is False for x in trace.x}  # not the legend keys
    assert categories == {"B2 T4096 N32 K8 H128 bfloat16 causal fwd alibi"}, categories
    assert fig.layout.xaxis.title.text == "shape" and len(fig.data) >= 2


def test_a_published_figure_is_rated_as_the_cells_are():
    from dashboard import published

    found = published.matched(rated(H200_LONG), manifests(H200_LONG))
    assert len(found) and found["published_tflops"].tolist() == pytest.approx(
        (found["flops"] / (found["published_ms"] / 1e3) / 1e12).tolist())


def test_a_decode_cell_at_a_published_shape_draws_the_published_gbps():
    """A dense serving cell at decode_sweep's B1 / KV 2k shape: the published figure rated by the cell's own bytes,
    drawn on a GB/s chart (the Throughput tab's GB/s rate)."""
    import plotly.graph_objects as go

    from dashboard import published
    from runner import metrics
    from helpers import params

    cells = rated(H200_LONG)
    cells = cells[cells["status"] == "ok"].head(1).copy()
    p = params(batch=1, seq_len=1, kv_seq_len=2048, heads=64, kv_heads=8, head_dim=128, dtype="bfloat16", causal=True,
               kv_lengths="equal")
    for name, value in p.as_dict().items():
        cells[name] = [value]
    cells["bytes_min"] = metrics.bytes_min(p)
    found = published.matched(cells, manifests(H200_LONG))
    assert found["published_gbps"].tolist() == pytest.approx([1309.3], rel=1e-3)  # the file's gbps
    fig = published.draw(go.Figure(), cells, "kv_seq_len", "gbps", manifests(H200_LONG))
    assert [t.name for t in fig.data] == ["published: cuDNN 9.27.0 decode, dense K and V (cudnn-frontend attention_inference), NVIDIA H200"]
    assert list(fig.data[0].y) == pytest.approx([1309.3], rel=1e-3)
    from dashboard import views

    assert views.RATES["GB/s"] == "gbps"


def test_the_decode_sweep_grid_draws_every_published_line_at_every_batch():
    """Dense cells on decode_sweep's whole grid (B 1-128 x KV 2k-128k x T 1 and 8): the chart along B draws a line
    per KV length and T, and so does the published series, each line the file's gbps at its own KV and T (so
    4,504 GB/s at B128 / KV 128k / T1), not one line of whichever KV came first."""
    import csv

    import plotly.graph_objects as go

    from dashboard import published, views
    from runner import metrics
    from helpers import params

    rows = list(csv.DictReader(open(REPO / "docs" / "reference" / "cudnn-frontend-h200-decode-sweep-llama3.1.csv")))
    grid = [params(batch=int(r["batch_size"]), seq_len=int(r["q_tokens"]), kv_seq_len=int(r["kv_len"]), heads=64,
                   kv_heads=8, head_dim=128, dtype="bfloat16", causal=True, kv_lengths="equal") for r in rows]
    cells = pd.DataFrame([{**p.as_dict(), "run": "r", "experiment": "dense", "variant": v, "flops": metrics.flops(p),
                           "bytes_min": metrics.bytes_min(p), "latency_ms": 1.0} for p in grid for v in ("xla", "cudnn")])
    x = views.size_axis(cells)
    assert x == "batch" and set(tables.line_axes(cells, x)) == {"seq_len", "kv_seq_len"}
    fig = published.draw(go.Figure(), cells, x, "gbps", {"r": shipped(H200_LONG).manifest})
    drawn = {(t.hovertemplate.split("<br>")[0], b): y for t in fig.data for b, y in zip(t.x, t.y)}
    series = "published: cuDNN 9.27.0 decode, dense K and V (cudnn-frontend attention_inference), NVIDIA H200"
    expected = {(f"{series} · T{r['q_tokens']} S{r['kv_len']}", int(r["batch_size"])): float(r["gbps"]) for r in rows}
    assert drawn.keys() == expected.keys()
    assert [drawn[k] for k in expected] == pytest.approx(list(expected.values()), rel=2e-3)
    assert len(fig.data) == 8 and all(len(t.x) == 4 for t in fig.data)
    assert [t.showlegend for t in fig.data] == [True] + [False] * 7  # one legend entry for the series
    assert drawn[(f"{series} · T1 S131072", 128)] == pytest.approx(4504, rel=1e-3)


def test_a_window_sweep_from_null_is_swept_and_draws_its_windowed_cells_on_their_own_line():
    """window [null, 8] beside documents [2, 8] (training.yaml's packed-small): a null window is a value of the
    sweep (NaN in the frame), so windowed and unwindowed cells never share a line, and no line runs along it."""
    from dashboard import views
    from helpers import params

    grid = [params(seq_len=32, causal=True, documents=d, window=w) for d in (2, 8) for w in (None, 8)]
    cells = pd.DataFrame([{**p.as_dict(), "run": "r", "experiment": "packed-small", "variant": "naive",
                           "latency_ms": 1.0} for p in grid])
    assert tables.swept(cells) == ["window", "documents"]
    assert views.size_axis(cells) == "documents" and tables.line_axes(cells, "documents") == ["window"]
    assert list(tables.case(cells, ["window"])) == ["no window", "W8"] * 2
    assert "W8" not in tables.fixed_shape(cells.iloc[::-1]).split()  # W8 first: still not held fixed
    pages = pd.DataFrame([{**params(seq_len=1, kv_seq_len=64, page_size=p).as_dict(), "variant": "xla"}
                          for p in (16, None)])
    assert views.size_axis(pages) is None and list(tables.case(pages, ["page_size"])) == ["P16", "dense"]


def test_the_dashboard_board_marks_unsettled_and_fp8_cells_as_the_cli_board_does():
    snap = data.snapshot(str(SHIPPED), data.RunCache())
    recorded = snap.cells(("hopper-long-20261202-110136",))
    fwd_32k = (recorded["seq_len"] == 32768) & (recorded["pass"] == "fwd")
    rough = recorded.assign(power_settled=~(fwd_32k & recorded["variant"].eq("cudnn_fp8")))

    def row(frame: pd.DataFrame) -> pd.Series:
        cells = tables.with_rates(frame, snap.runs, "device")
        return tables.board(cells, tables.standings(cells), {}).set_index("shape").loc[
            "B1 T32768 N64 K8 H128 bfloat16 causal fwd"]

    assert row(rough)["fastest"] == "cudnn_fp8 (FP8, unsettled)" and row(rough)["margin"].endswith("(unsettled)")
    assert row(recorded)["fastest"] == "cudnn_fp8 (FP8)" and "unsettled" not in row(recorded)["margin"]


def test_the_dashboard_board_marks_fp8_and_two_cudnn_releases_as_the_cli_board_does():
    """One FP8 rule (runner.leaderboard.fp8_mark): te_fp8's records say it ran bf16, so the tab names it '(not FP8)'
    where it said '(FP8)' for any FP8 variant; where the winner and the next ran two cuDNN releases (TE's worker's
    9.14.0 beside jax's 9.19.0) each is named with its own. The tab's names are the CLI board's, row for row."""
    from runner import leaderboard

    run = "llama3.1-70b-20261206-burst"
    snap = data.snapshot(str(SHIPPED), data.RunCache())
    cells = tables.with_rates(snap.cells((run,)), snap.runs, "device")
    shown = tables.board(cells, leaderboard.contested(tables.standings(cells, snap.manifests)), {})
    recorded = shipped(f"h200/{run}")
    cli = leaderboard.rows(leaderboard.contested(leaderboard.leaderboard(recorded.cells, manifest=recorded.manifest)))
    assert shown[["fastest", "next"]].values.tolist() == [[row["fastest"], row["next"]] for row in cli]
    assert shown["next"].str.startswith("te_fp8 (not FP8, cuDNN 9.14.0").any()  # '…, not converged)': 2-3 samples
    assert not shown["next"].str.contains("te_fp8 (FP8", regex=False).any()
    padded = shown.set_index("shape").loc["B8 T4096 N64 K8 H128 bfloat16 causal fwd fill0.8"]
    assert (padded["fastest"], padded["next"]) == ("te (cuDNN 9.14.0)", "cudnn (cuDNN 9.19.0, not converged)")


def test_the_dashboard_board_marks_a_not_converged_time_as_the_cli_board_does():
    """The CPU lab5 run's times mostly never converged: the tab names them '(not converged)' and says so of their
    margins, row for row as `show`'s board (with_rates' `unconverged` column: runner.marks' rule, by the timer)."""
    from runner import leaderboard

    run = CPU_LAB5.rpartition("/")[2]
    snap = data.snapshot(str(SHIPPED), data.RunCache())
    cells = tables.with_rates(snap.cells((run,)), snap.runs, "wall")
    shown = tables.board(cells, leaderboard.contested(tables.standings(cells, snap.manifests)), {})
    recorded = shipped(CPU_LAB5)
    cli = leaderboard.rows(leaderboard.contested(leaderboard.leaderboard(recorded.cells, manifest=recorded.manifest)))
    assert shown[["fastest", "next", "margin"]].values.tolist() == [[r["fastest"], r["next"], r["margin"]] for r in cli]
    assert shown["margin"].str.endswith("(not converged)").any()


def test_the_dashboard_board_reads_a_missing_noise_as_unknown_never_as_quiet():
    """A cell whose noise (IQR / median) is missing: its margin is not decisive and says the noise is unknown, as
    runner.leaderboard.beyond_noise rules for the CLI's board and compare's verdicts, where it read as 0."""
    snap = data.snapshot(str(SHIPPED), data.RunCache())
    recorded = snap.cells(("hopper-long-20261202-110136",))
    shape = "B1 T32768 N64 K8 H128 bfloat16 causal fwd"

    def standing(frame: pd.DataFrame) -> tuple[bool, str]:
        cells = tables.with_rates(frame, snap.runs, "device")
        (found,) = [s for s in tables.standings(cells) if s.shape == shape]
        return found.decisive, tables.board(cells, [found], {})["margin"][0]

    at_shape = tables.shape_labels(recorded) == shape
    assert standing(recorded)[0]  # every noise known: decisive
    quiet = recorded.assign(device_noise=recorded["device_noise"].mask(at_shape & recorded["variant"].eq("cudnn_fp8")))
    decisive, margin = standing(quiet)
    assert not decisive and margin.endswith("(noise unknown)")


def test_the_dashboard_board_reads_whether_a_cell_is_unsettled_from_its_rated_column():
    """with_rates owns a cell's `unsettled` mark (runner.marks' rule, the nvbench tables' ⚠ and the charts' ring); the
    board reads that column, so a cell the column marks is named unsettled there and its margin is not decisive,
    where standings worked the rule out again from the record's columns."""
    snap = data.snapshot(str(SHIPPED), data.RunCache())
    cells = tables.with_rates(snap.cells(("hopper-long-20261202-110136",)), snap.runs, "device")
    shape = "B1 T32768 N64 K8 H128 bfloat16 causal fwd"

    def standing(frame: pd.DataFrame):
        (found,) = [s for s in tables.standings(frame) if s.shape == shape]
        return found

    assert standing(cells).decisive and not standing(cells).unsettled
    marked = cells.assign(unsettled=cells["unsettled"] | (tables.shape_labels(cells) == shape))
    assert standing(marked).unsettled and not standing(marked).decisive


def test_a_cell_that_went_from_ok_to_incorrect_is_a_regression_of_the_history_as_compare_says():
    """lab5 on cuDNN 9.19 then 9.14: two cudnn_fp8 cells turn incorrect, which `attnbench compare` exits 1 on;
    History's worst regressions list them, not only slower ok cells (runner.compare.status_changes' rule)."""
    from dashboard import views
    from runner import compare

    snap = data.snapshot(str(SHIPPED), data.RunCache())
    before, after = (f.rpartition("/")[2] for f in (H200_LAB5_NO_TE, H200_LAB5))
    cells = snap.cells((before, after))
    broken = tables.status_regressions(cells, snap.runs)
    found = compare.compare(cells[cells["run"] == before], cells[cells["run"] == after], snap.manifests[before],
                            snap.manifests[after])
    assert len(broken) == 2 and set(broken["key"]) == set(found.no_longer_ok["key"])
    assert set(broken["variant"]) == {"cudnn_fp8"} and set(zip(broken["a"], broken["b"])) == {("ok", "incorrect")}
    assert {(b, a) for b, a in zip(broken["before"], broken["after"])} == {(before, after)}
    assert tables.status_regressions(cells[cells["run"] == after], snap.runs).empty  # one run: nothing to go from
    line = views.regressions_markdown(broken).splitlines()[2]
    assert "| cudnn_fp8 |" in line and "| ok → incorrect |" in line and f"[{before} → {after}]" in line


def test_a_history_step_on_another_cudnn_kernel_is_marked_as_compare_marks_it(tmp_path):
    """Two runs of lab5 (cuDNN 9.19) in a store made here, B a day later with two cudnn cells 50 % slower, one of
    them on another cuDNN kernel (knob_32 for knob_7, as cuDNN 9.14 picked): History's worst regressions mark that
    one 'another kernel' (runner.compare.kernel_change, as the Compare tab and `attnbench compare` mark it), the
    other nothing, and their table shows the marks in a `kernel` column."""
    from dashboard import views

    template = shipped(H200_LAB5_NO_TE)
    renamed, same = [c.key for c in template.cells if c.variant == "cudnn" and c.status == "ok"][:2]
    for run_id, day, factor in (("lab5-a", 1, 1.0), ("lab5-b", 2, 1.5)):
        manifest, cells = copy_run(template, run_id, dt.datetime(2026, 11, day, tzinfo=dt.timezone.utc),
                                   factor=lambda c: factor if c.key in (renamed, same) else 1.0)
        cells = [c.model_copy(update={"kernels": [k.replace("knob_7", "knob_32") for k in c.kernels]})
                 if c.key == renamed and factor > 1 else c for c in cells]
        write_run(tmp_path / "h200" / run_id, manifest, cells)
    snap = data.snapshot(str(tmp_path), data.RunCache())
    cells = snap.cells(tuple(snap.runs.index))
    worst = tables.regressions(tables.judged_steps(tables.history(cells, snap.runs, "device"), snap.manifests))
    assert dict(zip(worst["key"], worst["kernel"])) == {renamed: "another kernel", same: ""}
    marked = [line for line in views.regressions_markdown(worst).splitlines() if "1.50×" in line]
    assert len(marked) == 2 and sum("| another kernel |" in line for line in marked) == 1


def test_history_judges_a_step_as_compare_judges_its_runs_an_unconfirmed_one_named_not_a_regression(tmp_path):
    """Two runs of lab5 in a store made here, B a day later with two cudnn cells slower: one 3x on 3 samples that did
    not converge (as a --budget 0.2 run leaves a slow cell), one 1.5x converged. `attnbench compare` of the two calls
    the first unconfirmed and the second slower; History's steps said both were regressions (its own 2x noise, no
    sample floor): now it asks compare (runner.compare.moves), lists the second alone among its regressions and names
    the first apart, as the Compare tab and `attnbench compare` do."""
    from runner import compare
    from test_compare import unconverged

    template = shipped(H200_LAB5_NO_TE)
    few, real = [c.key for c in template.cells if c.variant == "cudnn" and c.status == "ok"][:2]
    for run_id, day, factor in (("lab5-a", 1, {}), ("lab5-b", 2, {few: 3.0, real: 1.5})):
        manifest, cells = copy_run(template, run_id, dt.datetime(2026, 11, day, tzinfo=dt.timezone.utc),
                                   factor=lambda c: factor.get(c.key, 1.0))
        write_run(tmp_path / "h200" / run_id, manifest, [unconverged(c, 3, 0.05) if c.key == few and factor else c
                                                        for c in cells])
    snap = data.snapshot(str(tmp_path), data.RunCache())
    cells = snap.cells(tuple(snap.runs.index))
    found = compare.compare(cells[cells["run"] == "lab5-a"], cells[cells["run"] == "lab5-b"],
                            snap.manifests["lab5-a"], snap.manifests["lab5-b"])
    said = dict(zip(found.cells["key"], found.cells["verdict"]))
    assert (said[few], said[real]) == ("unconfirmed", "slower")
    judged = tables.judged_steps(tables.history(cells, snap.runs, "device"), snap.manifests)
    assert dict(zip(judged["key"], judged["verdict"])) == {few: said[few], real: said[real]}  # compare's, each
    assert tables.regressions(judged)["key"].tolist() == [real]
    assert tables.unconfirmed(judged)[["key", "before", "after"]].values.tolist() == [[few, "lab5-a", "lab5-b"]]


def test_historys_worst_regressions_name_the_runs_their_cells_stepped_between_as_compare_of_those_says():
    """lab5's steady H200 series (8 runs): its naive and xla cells stepped from 12-02's last run to 12-03's first;
    History named two of the three one run early or late, between runs compare finds within noise
    (docs/evidence/analyst-walk-20261207.txt, finding 2). Each row names that pair, with compare's ratio of it."""
    from runner import compare

    snap = data.snapshot(str(SHIPPED), data.RunCache())
    cells = snap.cells(tuple(tables.series(snap.runs)["lab5 · NVIDIA H200 · steady (after settling)"]))
    worst = tables.regressions(tables.judged_steps(tables.history(cells, snap.runs, "device"), snap.manifests))
    before, after = "lab5-warm-ahead-off-20261202-182308", "lab5-cold-20261203-023042"
    assert len(worst) == 3 and set(zip(worst["before"], worst["after"])) == {(before, after)}
    found = compare.compare(cells[cells["run"] == before], cells[cells["run"] == after], snap.manifests[before],
                            snap.manifests[after]).cells.set_index("key")
    assert found.loc[worst["key"], "verdict"].eq("slower").all()
    assert found.loc[worst["key"], "ratio"].tolist() == pytest.approx(worst["ratio"].tolist())


def test_history_leaves_a_recheck_out_of_its_series_and_judges_the_run_it_rechecks_by_it(tmp_path):
    """Runs a, b (two cudnn cells 1.5x slower) and c of lab5, and b-recheck (those two cells measured again: one as
    in A, one 1.5x slower again): the series holds a, b and c, never the recheck (whose two cells cut every mean to
    them, and whose step from b read 0.67x faster); the step a -> b of the cell the recheck did not find slower is
    `not reproduced`, as `attnbench compare a b` says, the other still a regression."""
    from dashboard import views
    from runner import compare

    template = shipped(H200_LAB5_NO_TE)
    gone, real = [c.key for c in template.cells if c.variant == "cudnn" and c.status == "ok"][:2]
    made = (("lab5-a", 1, {}), ("lab5-b", 2, {gone: 1.5, real: 1.5}), ("lab5-b-recheck", 2.5, {real: 1.5}),
            ("lab5-c", 3, {}))
    for run_id, day, factor in made:
        manifest, cells = copy_run(template, run_id, dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
                                   + dt.timedelta(days=day), factor=lambda c: factor.get(c.key, 1.0))
        if run_id.endswith(compare.RECHECK):
            manifest = manifest.model_copy(update={"rechecks": "lab5-b", "cell_order": [gone, real]})
            cells = [c for c in cells if c.key in (gone, real)]
        write_run(tmp_path / "h200" / run_id, manifest, cells)
    snap = data.snapshot(str(tmp_path), data.RunCache())
    keys, = tables.series(snap.runs).tolist()
    assert keys == ["lab5-a", "lab5-b", "lab5-c"]
    points = tables.history(snap.cells(tuple(keys)), snap.runs, "device")
    judged = tables.judged_steps(points, snap.manifests, views.rechecks_of(snap, keys, {}, "device"))
    assert tables.regressions(judged)[["key", "before", "after"]].values.tolist() == [[real, "lab5-a", "lab5-b"]]
    assert tables.not_reproduced(judged)[["key", "before", "after"]].values.tolist() == [[gone, "lab5-a", "lab5-b"]]
    assert views.rechecks_of(snap, ["lab5-a", "lab5-c"], {}, "device") is None
    cells = snap.cells(("lab5-a", "lab5-b"))
    found = views.judged(snap, "lab5-a", "lab5-b", cells[cells["run"] == "lab5-a"], cells[cells["run"] == "lab5-b"])
    assert found.not_reproduced["key"].tolist() == [gone] and found.slower["key"].tolist() == [real]  # compare's
    moved = views._move(snap, "lab5-b", SimpleNamespace(timer=None))  # the Overview's line counts it as compare does
    assert moved.startswith("vs `lab5-a`: 1 slower, 0 faster, 1 not reproduced (slower, not when measured again) of ")


def test_history_clears_a_step_by_its_recheck_only_where_compare_does(tmp_path):
    """History judges a recheck by compare's own rule (runner.compare.rechecked): of four cudnn cells 1.5x slower in
    b, the recheck finds one within noise on a side that never converged (20 samples, 10 % either side), one 1.3x on 3
    samples (unconfirmed), one as in a and converged, and does not time the fourth; only the converged one is `not
    reproduced`, the other three stay regressions, as `attnbench compare a b` says of the same runs."""
    from dashboard import views
    from test_compare import unconverged

    template = shipped(H200_LAB5_NO_TE)
    noisy, few, settled, untimed = [c.key for c in template.cells if c.variant == "cudnn" and c.status == "ok"][:4]
    shape = {noisy: (20, 0.1), few: (3, 0.05)}
    made = (("lab5-a", 1, {}), ("lab5-b", 2, dict.fromkeys([noisy, few, settled, untimed], 1.5)),
            ("lab5-b-recheck", 2.5, {few: 1.3}))
    for run_id, day, factor in made:
        manifest, cells = copy_run(template, run_id, dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
                                   + dt.timedelta(days=day), factor=lambda c: factor.get(c.key, 1.0))
        if run_id == "lab5-b-recheck":
            manifest = manifest.model_copy(update={"rechecks": "lab5-b", "cell_order": [noisy, few, settled]})
            cells = [unconverged(c, *shape[c.key]) if c.key in shape else c for c in cells
                     if c.key in (noisy, few, settled)]
        write_run(tmp_path / "h200" / run_id, manifest, cells)
    snap = data.snapshot(str(tmp_path), data.RunCache())
    points = tables.history(snap.cells(("lab5-a", "lab5-b")), snap.runs, "device")
    judged = tables.judged_steps(points, snap.manifests, views.rechecks_of(snap, ["lab5-a", "lab5-b"], {}, "device"))
    assert sorted(tables.regressions(judged)["key"]) == sorted([noisy, few, untimed])
    assert tables.not_reproduced(judged)["key"].tolist() == [settled]
    cells = snap.cells(("lab5-a", "lab5-b"))
    found = views.judged(snap, "lab5-a", "lab5-b", cells[cells["run"] == "lab5-a"], cells[cells["run"] == "lab5-b"])
    assert sorted(found.slower["key"]) == sorted([noisy, few, untimed])
    assert found.not_reproduced["key"].tolist() == [settled]
