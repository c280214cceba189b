"""runner/frames.py: records as frames, one row per cell and one per soak point, nothing encoded to decode again."""

from __future__ import annotations

import json

from helpers import REPO
from runner import frames, masks, paging, shape
from stores import SHIPPED, shipped, tuned

SOAK = "h200/soak-20261203"
LAB5 = "h200/lab5-20261202-110556"


def test_a_row_per_cell_in_the_runs_order():
    run = shipped(LAB5)
    table = frames.cells(run.cells)
    assert table["key"].tolist() == [c.key for c in run.cells] and table["order"].tolist() == list(range(len(run.cells)))
    assert frames.cells([]).empty


def test_a_rows_packed_and_serving_are_the_records_own():
    """The dashboard reads whether a cell is packed or serving from these columns: the owners' answers
    (runner.masks.packed, runner.paging.serving), not a second rule on the frame's documents or lengths."""
    from runner.store import read_run

    fixtures = REPO / "tests" / "fixtures"
    records = [c for run in (fixtures / "schema10-packed" / "schema10-packed-20261206-000000",
                             fixtures / "serving-cpu" / "serving-cpu-20261206", SHIPPED / LAB5)
               for c in read_run(run).cells]
    table = frames.cells(records)
    assert table["packed"].tolist() == [masks.packed(c.params) for c in records]
    assert table["serving"].tolist() == [paging.serving(c.params) for c in records]
    assert table["packed"].any() and table["serving"].any() and not (table["packed"] | table["serving"]).all()


def test_soak_points_are_a_frame_of_their_own_named_by_the_cells_shape():
    run = shipped(SOAK)
    points = frames.soak_points(run.cells)
    stored = [json.loads(line) for line in (SHIPPED / SOAK / "cells.jsonl").read_text().splitlines()]
    expected = [(c["key"], p["t_s"], p["tflops"]) for c in stored if c.get("soak") for p in c["soak"]["points"]]
    assert list(zip(points["key"], points["t_s"], points["tflops"])) == expected and expected
    first = next(c for c in run.cells if c.soak)
    assert points["case"].iloc[0] == shape.label(first.params.as_dict())
    assert frames.soak_points(shipped(LAB5).cells).columns.tolist() == frames.SOAK_COLUMNS  # none: empty, typed


def test_a_row_holds_no_json_to_decode_again():
    """Soak points leave the row for their own frame; a tuned config is text to read."""
    run = shipped(SOAK)
    rows = frames.cells([tuned(c) for c in run.cells])
    assert "soak" not in rows and rows["soak_points"].notna().any()
    assert set(rows["tuning_config"]) == {"block_kv=128 block_q=128"}
    encoded = [column for column in rows.columns
               if rows[column].map(lambda v: isinstance(v, str) and v.startswith(("{", "["))).any()]
    assert encoded == []


def test_a_split_cells_share_of_the_mma_peak_at_its_clock_is_of_all_its_gpus():
    """A cell split across D GPUs does the whole call's FLOPs on D of them: its share is of D peaks, not one."""
    from runner.store import read_run

    run = read_run(SHIPPED / "h200" / "hopper-long-burst-20261202")  # with NVML telemetry
    one = next(c for c in run.cells if c.telemetry and c.tflops and c.variant == "cudnn")
    split = one.model_copy(update={"params": one.params.model_copy(update={"devices": 2})})
    table = frames.cells([one, split], run.manifest.machine)
    assert table["clock_peak_tflops"][1] == 2 * table["clock_peak_tflops"][0]
    assert table["pct_of_clock_peak"][0] and table["pct_of_clock_peak"][1] == table["pct_of_clock_peak"][0] / 2


def test_a_cell_whose_headline_is_not_the_clocks_timer_has_no_share_at_that_clock():
    """The clock is read over the telemetry's timer's samples (device): a headline by wall (a split cell's) is not
    rated at it, though the peak at that clock stands in its column."""
    from runner.store import read_run

    run = read_run(SHIPPED / "h200" / "hopper-long-burst-20261202")
    one = next(c for c in run.cells if c.telemetry and c.tflops and c.variant == "cudnn")
    assert one.timer == one.telemetry.timer == "device"
    by_wall = one.model_copy(update={"timer": "wall"})
    table = frames.cells([one, by_wall], run.manifest.machine)
    assert table["clock_peak_tflops"][1] == table["clock_peak_tflops"][0]
    assert table["pct_of_clock_peak"][0] and table["pct_of_clock_peak"].isna()[1]
