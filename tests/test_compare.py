"""runner/compare.py and `attnbench compare` (runner/cli.py, printed by runner/report.py) on copies of the shipped runs: the verdicts, the
exit codes a pipeline acts on, the three formats, --against previous, and the facts both sides show."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pandas as pd
import pytest
from markdown_it import MarkdownIt

from helpers import REPO, in_process
from runner import cli, compare, frames
from runner import report as report_module
from runner.report import differing
from runner.results import CELLS, MANIFEST
from runner.store import open_store
from stores import (CPU_LAB5, H200_LAB5, H200_LAB5_NO_TE, H200_LONG, H200_LONG_TE_FAILED, SHIPPED, broken, copy_run,
                    shipped, write_run)

TEMPLATE = "h200/lab5-warm-20261203-023042"  # 75 ok cells, device timer, noise at most 4.6 %
DECODE = "h200/decode-20261202"  # another spec on the same GPU: no cell in common with lab5
DAY = dt.datetime(2026, 12, 10, tzinfo=dt.timezone.utc)


def ok_keys(run) -> list[str]:
    return [c.key for c in run.cells if c.status == "ok"]


def three_slower(run) -> list[str]:
    """Three ok cells of three experiments: the ones a test makes slower."""
    ok = [c for c in run.cells if c.status == "ok"]
    picked = {}
    for cell in ok:
        picked.setdefault(cell.experiment, cell.key)
    return list(picked.values())[1:4]


def copied(tmp_path, run_id: str, started: dt.datetime, template: str = TEMPLATE, factor=lambda cell: 1.0,
           change=lambda cell: cell, policy: str | None = None, kept: slice = slice(None),
           order: list[str] | None = None) -> str:
    """A copy of a shipped run in tmp_path/results/RUN_ID, each cell `factor(cell)` times slower, then `change`d;
    under another power `policy` if given (its spec hash kept: the policy alone differs); only its `kept` cells;
    planning the cells `order` lists, if given (its manifest's cell_order)."""
    manifest, cells = copy_run(shipped(template), run_id, started, factor=factor)
    if order is not None:
        manifest = manifest.model_copy(update={"cell_order": order})
    if policy:
        spec = manifest.spec
        manifest = manifest.model_copy(update={"spec": {**spec, "timing": {**spec["timing"], "power": policy}}})
    write_run(tmp_path / "results" / run_id, manifest, [change(c) for c in cells[kept]])
    return str(tmp_path / "results" / run_id)


@pytest.fixture
def pair(tmp_path):
    """(A, B, the three cells B is 30 % slower in)."""
    slower = three_slower(shipped(TEMPLATE))
    a = copied(tmp_path, "lab5-a", DAY)
    b = copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), factor=lambda c: 1.3 if c.key in slower else 1.0)
    return a, b, slower


def report(capsys, *args):
    """`attnbench compare ARGS --format json`: (exit code, the document)."""
    done = in_process(capsys, "compare", *args, "--format", "json")
    return done.code, json.loads(done.out) if done.out else None


# --- the Done-when cases ---------------------------------------------------------------------------------------

def test_three_cells_30_percent_slower_exit_1_naming_exactly_those_cells(capsys, pair):
    a, b, slower = pair
    code, found = report(capsys, a, b)
    assert code == 1 and found["regressed"] is True
    assert found["regressions"] == slower
    verdicts = {c["key"]: c["verdict"] for c in found["cells"]}
    assert {k for k, v in verdicts.items() if v == "slower"} == set(slower)
    assert {c["key"]: c["ratio"] for c in found["cells"] if c["key"] in slower} == pytest.approx(
        dict.fromkeys(slower, 1.3))
    table = in_process(capsys, "compare", a, b)
    assert table.code == 1 and table.out.splitlines()[-1].startswith("REGRESSION: 3 cells slower, 0 ok in A")
    regressions = table.out.split("Slower (regressions)")[1].split("Geometric mean")[0]
    assert {k for k in ok_keys(shipped(TEMPLATE)) if k in regressions} == set(slower)


def test_a_run_against_itself_exits_0(capsys, pair):
    a, _, _ = pair
    code, found = report(capsys, a, a)
    assert code == 0 and not found["regressed"] and found["regressions"] == []
    assert {c["verdict"] for c in found["cells"]} == {"within noise"}
    assert len(found["cells"]) == len(ok_keys(shipped(TEMPLATE)))


def test_a_threshold_of_40_percent_lets_30_percent_pass(capsys, pair):
    a, b, slower = pair
    code, found = report(capsys, a, b, "--threshold", "40")
    assert code == 0 and found["threshold"] == 0.4 and found["regressions"] == []
    assert report(capsys, a, b, "--threshold", "29")[0] == 1


def unconverged(cell, samples: int, spread: float):
    """The cell as one whose headline timer ran out of budget: `samples` samples, q1 and q3 `spread` either side of
    its median, its noise above any target (`converged` false)."""
    def timing(t):
        if t.timer != cell.timer:
            return t
        return t.model_copy(update={"samples": samples, "q1_s": t.median_s * (1 - spread), "noise": 2 * spread,
                                    "q3_s": t.median_s * (1 + spread), "converged": False})
    return cell.model_copy(update={"timings": [timing(t) for t in cell.timings]})


def test_a_pair_that_did_not_converge_is_marked_counted_and_a_regression_only_beyond_twice_its_noise(capsys,
                                                                                                     tmp_path):
    """B's slower cells did not converge. 2x on 3 samples (as --budget 0.2 leaves a slow CPU cell) and 1.3x on 20
    samples at 20 % noise (beyond that noise once, not twice) are unconfirmed: named and counted, the gate passes;
    2x on 20 samples at 20 % noise is beyond twice it: still a regression, marked. docs/regressions.md's rule."""
    few, noisy, real = three_slower(shipped(TEMPLATE))
    factor = {few: 2.0, noisy: 1.3, real: 2.0}
    shape = {few: (3, 0.05), noisy: (20, 0.1), real: (20, 0.1)}  # (samples, q1 and q3 this far from the median)
    a = copied(tmp_path, "lab5-a", DAY)
    b = copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), factor=lambda c: factor.get(c.key, 1.0),
               change=lambda c: unconverged(c, *shape[c.key]) if c.key in shape else c)
    code, found = report(capsys, a, b)
    verdicts = {c["key"]: (c["verdict"], c["unconverged"]) for c in found["cells"] if c["key"] in shape}
    assert verdicts == {few: ("unconfirmed", "B"), noisy: ("unconfirmed", "B"), real: ("slower", "B")}
    assert code == 1 and found["regressions"] == [real] and found["unconfirmed"] == [few, noisy]
    assert ", 2 unconfirmed (a side not converged);" in found["verdict"]
    assert "; 3 of those not converged in A or B" in found["verdict"]
    table = in_process(capsys, "compare", a, b)
    unconfirmed = table.out.split("Unconfirmed (moved")[1].split("Geometric mean")[0]
    assert few in unconfirmed and noisy in unconfirmed and real not in unconfirmed and "not converged" in unconfirmed
    del factor[real], shape[real]
    without_real = copied(tmp_path, "lab5-c", DAY + dt.timedelta(days=2), factor=lambda c: factor.get(c.key, 1.0),
                          change=lambda c: unconverged(c, *shape[c.key]) if c.key in shape else c)
    code, found = report(capsys, a, without_real)
    assert code == 0 and not found["regressed"] and found["unconfirmed"] == [few, noisy]  # the gate passes, not silently
    assert found["verdict"].startswith("no regression: ") and "2 unconfirmed" in found["verdict"]


def test_a_burst_run_confirms_a_move_on_the_samples_its_policy_takes():
    """A burst run takes timing.min_samples and stops, so its unconverged cells are judged on that many samples (not
    CONFIRM_SAMPLES, which no burst cell of hopper-long's 5 could reach: a 3x slow-down passed the gate)."""
    manifest = shipped(TEMPLATE).manifest
    def policy(**timing):
        return manifest.model_copy(update={"spec": {**manifest.spec, "timing": timing}})
    assert [compare.confirm_samples(m) for m in (None, manifest, policy(power="steady", min_samples=5),
                                                  policy(power="burst", min_samples=5),
                                                  policy(power="burst", min_samples=20))] == [10, 10, 10, 5, 10]

    def cell(median, samples):
        return {"run": "r", "key": "k", "experiment": "e", "variant": "cudnn", "status": "ok", "order": 0,
                **dict.fromkeys(compare.SHAPE, 1), "dtype": "bfloat16", "causal": True, "pass": "fwd",
                "device_median_s": median, "device_q1_s": median * 0.95, "device_q3_s": median * 1.05,
                "device_samples": samples, "device_converged": False}
    a, b = pd.DataFrame([cell(1.0, 5)]), pd.DataFrame([cell(3.0, 5)])
    assert compare.cells(a, b, "device")["verdict"].tolist() == ["unconfirmed"]
    assert compare.cells(a, b, "device", floors=(5, 5))["verdict"].tolist() == ["slower"]


def test_a_cell_that_turned_incorrect_exits_1(capsys, tmp_path):
    turned = ok_keys(shipped(TEMPLATE))[5]
    a = copied(tmp_path, "lab5-a", DAY)
    b = copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), change=lambda c: broken(
        c, "incorrect", "out relative error 0.3 > tolerance 0.02") if c.key == turned else c)
    code, found = report(capsys, a, b)
    assert code == 1 and found["regressions"] == [turned]
    (change,) = found["status_changes"]
    assert (change["key"], change["a"], change["b"], change["regression"]) == (turned, "ok", "incorrect", True)
    assert change["reason"] == "out relative error 0.3 > tolerance 0.02"
    assert not [c for c in found["cells"] if c["verdict"] == "slower"]


def test_a_run_whose_every_cell_failed_exits_1_naming_each_cell_it_lost_never_2(capsys, tmp_path):
    """B shares every cell with A and timed none: its cells are no longer ok, a regression, not runs of another spec
    (which share no cell at all)."""
    a = copied(tmp_path, "lab5-a", DAY)
    b = copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), change=lambda c: broken(c, "failed", "worker died"))
    code, found = report(capsys, a, b)
    assert (code, found["cells"]) == (1, []) and found["regressions"] == ok_keys(shipped(TEMPLATE))


def test_without_threshold_a_cell_is_slower_past_5_percent(capsys, tmp_path):
    keys = ok_keys(shipped(TEMPLATE))
    a = copied(tmp_path, "lab5-a", DAY)
    b = copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), factor=lambda c: 1.07 if c.key == keys[0] else 1.0)
    code, found = report(capsys, a, b)
    assert (code, found["threshold"], found["regressions"]) == (1, 0.05, [keys[0]])


def test_two_runs_with_no_common_cell_exit_2(capsys, tmp_path):
    a = copied(tmp_path, "decode-a", DAY, template=DECODE)
    b = copied(tmp_path, "lab5-b", DAY)
    done = in_process(capsys, "compare", a, b)
    assert (done.code, done.out) == (2, "")
    assert done.errors == [f"error: A (decode-a, 56 cells) and B (lab5-b, 76 cells) share no cell (the same "
                           "experiment, variant and shape): are they runs of the same spec?"]


def test_markdown_output_renders_as_tables(capsys, pair):
    a, b, slower = pair
    done = in_process(capsys, "compare", a, b, "--format", "markdown")
    assert done.code == 1
    html = MarkdownIt("commonmark").enable("table").render(done.out)
    tables = html.split("<table>")[1:]
    assert len(tables) == 2  # the regressions and the geometric means: nothing else differs
    head, body = tables[0].split("</thead>")
    assert [h.split("</th>")[0] for h in head.split("<th>")[1:]] == [
        "key", "experiment", "variant", "shape", "A ms", "B ms", "B / A", "noise A", "noise B"]
    assert [row.split("</td>")[0] for row in body.split("<tr>\n<td>")[1:]] == slower
    assert "<strong>REGRESSION: 3 cells slower" in html.split("<table>")[0]  # the answer before the tables


def test_two_runs_sharing_some_cells_are_compared_over_those_alone_and_say_how_many(capsys, tmp_path):
    """B holds cells 20 on of A's first 50, the shared ones as fast as in A and its own 30 % slower: no cell is
    slower and the geomean is 1 (the cells B alone holds move nothing), and the verdict names the counts."""
    keys = [c.key for c in shipped(TEMPLATE).cells]
    a = copied(tmp_path, "lab5-a", DAY, kept=slice(0, 50))
    b = copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), kept=slice(20, None),
               factor=lambda c: 1.3 if c.key not in keys[:50] else 1.0)
    code, found = report(capsys, a, b)
    total = len(keys)
    assert code == 0 and {c["key"] for c in found["cells"]} == set(keys[20:50]) & set(ok_keys(shipped(TEMPLATE)))
    assert found["cells"] and all(c["ratio"] == 1.0 for c in found["cells"])
    assert f"30 cells in both (A 50, B {total - 20})" in found["verdict"]
    assert "geomean B / A over those 1.000×" in found["verdict"]


def test_a_cell_ok_in_a_that_b_planned_and_lacks_is_a_regression_one_b_did_not_plan_is_only_in_a(capsys, tmp_path):
    """B planned every cell (its manifest's cell order, every shard's: a shard that never uploaded) and holds cells 20
    on: A's ok cells among the first 20 are regressions, in a table of their own, and the verdict says B holds fewer
    than it planned. C planned cells 10 on (another --only): cells 0-9 are only in A, as before."""
    keys, ok = [c.key for c in shipped(TEMPLATE).cells], ok_keys(shipped(TEMPLATE))
    a = copied(tmp_path, "lab5-a", DAY, order=keys)
    b = copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), kept=slice(20, None), order=keys)
    code, found = report(capsys, a, b)
    lost = [k for k in keys[:20] if k in ok]
    assert code == 1 and found["regressions"] == lost and [c["key"] for c in found["missing_in_b"]] == lost
    assert [c["key"] for c in found["only_in_a"]] == [k for k in keys[:20] if k not in ok]
    assert f"{len(lost)} ok in A and missing from B" in found["verdict"]
    assert f"(A {len(keys)}, B {len(keys) - 20} of {len(keys)} planned)" in found["verdict"]
    assert "Missing from B" in in_process(capsys, "compare", a, b).out
    c = copied(tmp_path, "lab5-c", DAY + dt.timedelta(days=2), kept=slice(20, None), order=keys[10:])
    code, found = report(capsys, a, c)
    assert code == 1 and found["regressions"] == [k for k in keys[10:20] if k in ok]
    assert [c["key"] for c in found["only_in_a"]] == keys[:10] + [k for k in keys[10:20] if k not in ok]
    d = copied(tmp_path, "lab5-d", DAY + dt.timedelta(days=3), kept=slice(20, None), order=keys[20:])
    code, found = report(capsys, a, d)
    assert code == 0 and len(found["only_in_a"]) == 20 and "planned" not in found["verdict"]


# --- comparable runs --------------------------------------------------------------------------------------------

def wall_only(cell):
    """The cell as a run whose device timer failed (CUPTI) records it: timed by wall alone, 2x slower."""
    wall = [t.model_copy(update={k: getattr(t, k) * 2 for k in ("median_s", "q1_s", "q3_s", "min_s")})
            for t in cell.timings if t.timer == "wall"]
    return cell.model_copy(update={"timings": wall, "timer": "wall", "median_s": wall[0].median_s, "kernels": []})


def test_a_cell_timed_by_different_timers_in_a_and_b_is_counted_and_named_never_a_verdict(capsys, tmp_path):
    """Two cells whose device timer failed in B (wall alone, twice as slow): no ratio of theirs is like with like, so
    they are neither slower nor within noise, and the verdict, a table and the json name them."""
    apart = ok_keys(shipped(TEMPLATE))[4:6]
    a = copied(tmp_path, "lab5-a", DAY)
    b = copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), change=lambda c: wall_only(c) if c.key in apart else c)
    code, found = report(capsys, a, b)
    assert code == 0 and found["timer"] == "device" and not {c["key"] for c in found["cells"]} & set(apart)
    assert [(c["key"], c["timers A"], c["timers B"]) for c in found["different_timers"]] == [
        (key, "device, wall", "wall") for key in apart]
    assert "; 2 cells timed by different timers (not compared)" in found["verdict"]
    table = in_process(capsys, "compare", a, b)
    shown = table.out.split("Timed by different timers (not compared: no device time in both)")[1].split("Geometric")[0]
    assert table.code == 0 and [k for k in ok_keys(shipped(TEMPLATE)) if k in shown] == apart
    assert report(capsys, a, a)[1]["different_timers"] == []
    assert "different timers" not in report(capsys, a, a)[1]["verdict"]


def test_a_cell_timed_by_wall_alone_in_both_runs_is_counted_apart_from_different_timers(capsys, tmp_path):
    """Its timers are the same in both (wall, wall): it was listed and counted as 'different timers', which means
    device in A and wall in B; it has no device time in either run, said so in its own words and table."""
    both, b_only = ok_keys(shipped(TEMPLATE))[4:6]
    a = copied(tmp_path, "lab5-a", DAY, change=lambda c: wall_only(c) if c.key == both else c)
    b = copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1),
               change=lambda c: wall_only(c) if c.key in (both, b_only) else c)
    code, found = report(capsys, a, b)
    assert code == 0 and found["timer"] == "device" and not {c["key"] for c in found["cells"]} & {both, b_only}
    assert [(c["key"], c["timers A"], c["timers B"]) for c in found["different_timers"]] == [
        (b_only, "device, wall", "wall")]
    assert [(c["key"], c["timers A"], c["timers B"]) for c in found["no_timer_in_either"]] == [(both, "wall", "wall")]
    assert found["verdict"].endswith("; 1 cell timed by different timers (not compared); 1 cell with no device time "
                                     "in either run (not compared)")
    shown = in_process(capsys, "compare", a, b).out
    assert both in shown.split("No device time in either run (not compared: the same timers in both)")[1]


def test_a_cell_that_ran_another_backend_or_library_kernel_in_b_is_marked_and_counted(capsys, tmp_path):
    """Compared all the same, but marked: one cell whose backend changed (auto: xla in A, cudnn in B), one whose
    cuDNN kernel changed (another knob); a cell whose XLA fusions were renumbered ran no other kernel."""
    cells = shipped(TEMPLATE).cells
    auto, cudnn, xla = (next(c.key for c in cells if c.status == "ok" and c.variant == v) for v in ("auto", "cudnn",
                                                                                                  "xla"))

    def changed(cell):
        if cell.key == auto:
            return cell.model_copy(update={"backend": "cudnn", "kernels": ["cudnn_generated_fort_native_sdpa_x"]})
        if cell.key == cudnn:
            return cell.model_copy(update={"kernels": [k.replace("knob_7", "knob_32") for k in cell.kernels]})
        renumbered = [k.rstrip("0123456789").rstrip("_") + "_9" for k in cell.kernels]
        return cell.model_copy(update={"kernels": renumbered}) if cell.key == xla else cell
    a = copied(tmp_path, "lab5-a", DAY)
    b = copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), change=changed)
    code, found = report(capsys, a, b)
    marks = {c["key"]: c["kernel"] for c in found["cells"] if c["kernel"]}
    assert code == 0 and marks == {auto: "backend xla → cudnn", cudnn: "another kernel"}
    assert "; of those, 2 cells ran another kernel in B" in found["verdict"]
    (row,) = [r for r in found["another_kernel"] if r["key"] == cudnn]
    assert "knob_7" in row["only A ran"] and "knob_32" in row["only B ran"] and row["verdict"] == "within noise"
    assert row["only A ran"].startswith("cudnn_generated_fort_native_sdpa_sm90_flash_fprop")  # json: whole names
    shown = in_process(capsys, "compare", a, b).out.split("Ran another kernel in B")[1].split("Geometric")[0]
    (line,) = [line for line in shown.splitlines() if cudnn in line]
    assert "cudnn_…_knob_7_" in line and "cudnn_…_knob_32_" in line  # cut alike at 40 characters, A and B read the same
    assert report(capsys, a, a)[1]["another_kernel"] == []


@pytest.mark.parametrize("a, b, told", [
    ("loop_multiply_fusion;gemm_fusion_dot_5;nvjet_sm90_x", "loop_multiply_fusion_2;gemm_fusion_dot;nvjet_sm90_x", ""),
    ("wrapped_transpose;mha_forward", "wrapped_transpose_1;triton_softmax_2", "another kernel"),
    ("wrapped_dynamic_slice_2;mha_forward", "wrapped_dynamic_slice;mha_forward", ""),
    ("wrapped_dynamic_update_slice;mha_forward", "wrapped_dynamic_update_slice_3;mha_forward", ""),
    ("wrapped_select_and_scatter_1;wrapped_atan2;mha_forward", "wrapped_select_and_scatter;mha_forward", ""),
    ("cudnn_generated_knob_7", "", ""),  # B names no kernel (a wall timer): unknown, not another
    ("_ZN5cudnn6fusion21lean_reduction_kernel", "_ZN5cudnn6fusion21lean_reduction_kernel;fusion_3", ""),
    # GEMM kernels alone differ: the GEMM autotuner's pick, not the attention kernel
    ("gemm_fusion_dot_3;loop_fusion", "nvjet_sm90_tst_128x64_64x8_2x1_v_bz_TNT;loop_fusion", "another GEMM"),
    ("nvjet_sm90_tss_256x128_64x4_1x2_h_bz_coopA_NNT", "nvjet_sm90_tss_128x160_64x5_2x1_v_bz_NNT", "another GEMM"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel", "cutlass3x_sm90_tensorop_gemm_bf16_x;"
     "splitKreduce_kernel", "another GEMM"),
    ("cudnn_generated_knob_7;nvjet_sm90_a", "cudnn_generated_knob_32;nvjet_sm90_b", "another kernel"),  # both
    ("mha_forward;nvjet_sm90_a", "nvjet_sm90_a", "another kernel"),
    ("_ZN7cutlass4gemm6kernel_fmha_fwd", "_ZN7cutlass4gemm6kernel_fmha_fwd_v2", "another kernel"),  # mangled: no GEMM
])
def test_another_kernel_is_a_library_kernel_set_that_differs_never_an_xla_fusions_number(a, b, told):
    assert compare.kernel_change("xla", "xla", a, b) == told
    assert compare.kernel_change("xla", None, a, a) == ""  # a backend not recorded: unknown, not another


@pytest.mark.parametrize("width", [80, 120])
def test_a_terminal_too_narrow_for_the_kernel_names_folds_them_never_cuts_them(capsys, monkeypatch, tmp_path, width):
    """At 80 and 120 columns (a terminal's: compare prints as wide as the pipe width) the cells of `only A ran` and
    `only B ran` read, joined line by line, as the whole cut names: 'knob_7' and 'knob_32' both there."""
    cudnn = next(c.key for c in shipped(TEMPLATE).cells if c.status == "ok" and c.variant == "cudnn")
    a = copied(tmp_path, "lab5-a", DAY)
    b = copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), change=lambda c: c.model_copy(update={
        "kernels": [k.replace("knob_7_64x128x64", "knob_32_64x256x64") for k in c.kernels]}) if c.key == cudnn else c)
    monkeypatch.setattr(cli, "PIPE_WIDTH", width)
    shown = in_process(capsys, "compare", a, b).out.split("Ran another kernel in B")[1].split("Geometric")[0]
    rows = [line.split("│")[1:-1] for line in shown.splitlines() if line.startswith("│")]
    assert rows and max(len(line) for line in shown.splitlines()) <= width
    assert ["".join(row[i].strip() for row in rows) for i in (-2, -1)] == ["cudnn_…_knob_7_64x128x64_…",
                                                                           "cudnn_…_knob_32_64x256x64_…"]


@pytest.mark.parametrize("width", [60, 80, 120])
def test_compares_prose_folds_between_clauses_at_a_terminals_width_never_inside_a_number_or_a_run_id(width):
    """lab5's H200 pair (cuDNN 9.19, then 9.14 and TransformerEngine) on a terminal COLUMNS wide: the runs, the rule
    and the verdict, each longer than the terminal, fold between their clauses, each line after the first indented
    (runner.report.folded, as print_comparison prints them): no line wider, a material difference whole on one line,
    no word cut (a number, a run id), no number parted from its unit, and the lines read back as the pipe's one."""
    import io

    from rich.console import Console

    a, b = shipped(H200_LAB5_NO_TE), shipped(H200_LAB5)
    found = compare.compare(frames.cells(a.cells), frames.cells(b.cells), a.manifest, b.manifest)
    console = Console(file=io.StringIO(), force_terminal=True, width=width, record=True)
    report_module.print_comparison(found, console)
    printed = console.export_text().splitlines()
    prose = [*report_module.comparison_heading(found), report_module.verdict(found)]
    for line in prose:
        lines = report_module.folded(line, width)
        assert " ".join(part.strip() for part in lines) == line and all(len(part) <= width for part in lines)
        assert [part.startswith("  ") for part in lines] == [False] + [True] * (len(lines) - 1)
        assert all(part in printed for part in lines)  # printed so, in this order of lines
        assert not any(part.lstrip().startswith(("%", "×")) for part in lines)
    assert any(len(line) > width for line in prose)
    folded = report_module.folded(report_module.verdict(found), width)
    for fact in compare.said(found.material).split("; "):
        assert any(fact in part for part in folded), fact
    assert all(any(run in part for part in printed) for run in (a.manifest.run_id, b.manifest.run_id))


def test_prose_keeps_a_number_with_its_unit_and_a_short_aside_whole():
    assert report_module.folded("noise beyond 5 % and both", 14) == ["noise beyond", "  5 % and both"]
    assert report_module.folded("in both (A 76, B 76), then", 20) == ["in both", "  (A 76, B 76), then"]
    assert report_module.folded("a-run-id-longer-than-the-terminal x", 10) == ["a-run-id-longer-than-the-terminal",
                                                                               "  x"]


def test_prose_with_a_double_space_stays_within_the_width():
    """A clause after a double space began with a space: its first word measured empty, it was carried onto the line
    before, which it overran ('a x; longword' at 12); a run of spaces folds as one."""
    lines = report_module.folded("a x;  longword longword", 12)
    assert lines == ["a x;", "  longword", "  longword"] and all(len(part) <= 12 for part in lines)


@pytest.mark.parametrize("a, b, shown", [
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
     "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_32_64x256x64_4x1x1_cga1x1x1_kernel0_0",
     ("cudnn_…_knob_7_64x128x64_…", "cudnn_…_knob_32_64x256x64_…")),
    ("nvjet_sm90_tst_256x96_64x4_2x1_v", "nvjet_sm90_tst_256x128_64x4_1x2_h",
     ("nvjet_…_tst_256x96_64x4_2x1_v", "nvjet_…_tst_256x128_64x4_1x2_h")),
    ("x_y_1", "x_z_1", ("x_y_…", "x_z_…")),
    ("", "nvjet_sm90_tss_256x128", ("", "nvjet_sm90_tss_256x128")),  # only B ran one: nothing shared to cut
    ("mha_forward", "mha_forward_fused", ("mha_forward", "mha_forward_fused")),  # a cut would leave A nothing
    ("x_1", "y_1", ("x_1", "y_1")),  # nothing but the last word shared
])
def test_the_kernels_two_runs_ran_are_shown_from_where_they_differ(a, b, shown):
    assert differing(a, b) == shown


def test_a_list_of_kernels_is_shown_with_a_space_after_each_semicolon_where_a_page_may_wrap_it():
    """The te-causal xla cell of lab5's H200 pair: B ran two nvjet kernels, 80 characters with no space in them."""
    kernels = pd.DataFrame({"only A ran": ["nvjet_sm90_tss_128x128_64x6_2x1_v_bz_NNT"],
                            "only B ran": ["nvjet_sm90_tss_128x128_64x6_2x1_v_bz_TNT;"
                                           "nvjet_sm90_tst_128x64_64x8_2x1_v_bz_TNT"]})
    shown = report_module.kernels_shown(kernels)
    assert shown.iloc[0].tolist() == ["nvjet_…_bz_NNT", "nvjet_…_bz_TNT; nvjet_sm90_tst_128x64_64x8_2x1_v_bz_TNT"]


def test_two_nights_on_the_same_libraries_differ_in_gemm_kernels_alone():
    """h200 lab5-warm of 12-02 and 12-03 (jax, cuDNN, CUDA alike): 9 xla and naive cells ran another nvjet tile, or
    nvjet in place of XLA's Triton gemm_fusion_dot; their attention kernels ran as before."""
    a, b = (shipped(f"h200/lab5-warm-{run}") for run in ("20261202-182308", "20261203-023042"))
    found = compare.compare(frames.cells(a.cells), frames.cells(b.cells), a.manifest, b.manifest)
    assert found.kernels["change"].value_counts().to_dict() == {"another GEMM": 9}
    assert set(found.kernels["variant"]) == {"xla", "naive"}
    assert "; of those, 9 cells ran another GEMM in B" in report_module.verdict(found)


def test_slower_cells_that_ran_xla_generated_kernels_alone_are_said_to_have_no_kernel_in_the_record():
    """The same two nights: 3 naive and xla cells slower whose kernels, XLA's fusions and Triton GEMMs alone, have
    the same names in both (analyst walk 12-07, finding 8): the verdict and the json point at XLA's autotuner, whose
    pick no record names; a cell that ran a library's kernel (cuDNN's) is never among them."""
    a, b = (shipped(f"h200/lab5-warm-{run}") for run in ("20261202-182308", "20261203-023042"))
    found = compare.compare(frames.cells(a.cells), frames.cells(b.cells), a.manifest, b.manifest)
    assert len(found.slower) == 3 and set(found.slower["variant"]) == {"naive", "xla"}
    assert list(found.slower_xla_only["key"]) == list(found.slower["key"])
    assert ("; 3 of the slower cells ran only XLA-generated kernels (fusions, Triton GEMMs): which tile XLA's "
            "autotuner chose is not in the record") in report_module.verdict(found)
    assert json.loads(report_module.comparison_json(found))["slower_xla_only"] == list(found.slower["key"])
    cudnn = {c.key for c in b.cells if c.variant == "cudnn" and c.status == "ok"}
    assert cudnn and not cudnn & found.xla_only


def test_why_nothing_was_compared_says_whether_plans_share_no_cell_or_share_cells_none_timed_in_both():
    """By the manifests' plans where both list one, else by the cells both runs hold (runs before 2026-12-03)."""
    template = shipped(TEMPLATE)
    keys = [c.key for c in template.cells]
    manifest = template.manifest.model_copy(update={"cell_order": keys})
    a = frames.cells(template.cells)
    failed = a.assign(status="failed")
    found = compare.compare(a, failed, manifest, manifest)
    assert compare.nothing_compared(found) == f"their plans share {len(keys)} cells, none timed ok in both"
    apart = compare.compare(a, failed, manifest.model_copy(update={"cell_order": keys[:3]}),
                            manifest.model_copy(update={"cell_order": keys[3:]}))
    assert compare.nothing_compared(apart) == "their plans share no cell"
    unplanned = compare.compare(a, failed.iloc[:1], None, None)
    assert compare.nothing_compared(unplanned) == "they hold 1 cell in common, none timed ok in both"
    kept = compare.compare(a.iloc[:4], failed.iloc[:4], manifest, manifest)  # a filter kept 4 cells of each run
    assert compare.nothing_compared(kept, filtered=True) == (
        "the filters keep 4 cells both runs hold, none timed ok in both")
    cut = compare.compare(a.iloc[:0], failed.iloc[:0], manifest, manifest)
    assert compare.nothing_compared(cut, filtered=True) == "the filters keep no cell both runs hold"
    wall = a.assign(device_median_s=float("nan"))  # every cell timed by wall alone in B
    assert compare.nothing_compared(compare.compare(a, wall, None, None)).endswith(
        f"none timed ok in both ({len(ok_keys(template))} cells timed by different timers)")
    alike = compare.compare(wall, wall, None, None)  # wall alone in both: no device time in either, not "different"
    assert compare.nothing_compared(alike).endswith(
        f"none timed ok in both ({len(ok_keys(template))} cells with no device time in either)")


def test_runs_of_different_power_policies_are_refused_unless_allowed(capsys, tmp_path):
    steady = copied(tmp_path, "lab5-steady", DAY)
    burst = copied(tmp_path, "lab5-burst", DAY + dt.timedelta(days=1), policy="burst")
    done = in_process(capsys, "compare", steady, burst)
    assert done.code == 2 and done.errors == [
        "error: A ran under power policy steady (after settling), B under burst: their times are not like with like; "
        "give --allow-policy-change to compare them anyway"]
    code, found = report(capsys, steady, burst, "--allow-policy-change")
    assert code == 0 and found["verdict"].endswith(" · differs: power policy steady (after settling) → burst")
    assert found["material_differences"] == [{"fact": "power policy", "a": "steady (after settling)", "b": "burst"}]


def test_steady_runs_of_two_steady_rules_are_refused_as_two_policies_unless_allowed(capsys, tmp_path):
    """A steady run sampled after settling (schema 3 and 4: the clock recovered in host gaps) against one sampled in
    the load is not like with like: refused as steady against burst is, and named as the power policy, not blamed
    on attnbench's sha."""
    settled = copied(tmp_path, "lab5-settled", DAY)
    manifest, cells = copy_run(shipped(TEMPLATE), "lab5-in-load", DAY + dt.timedelta(days=1))
    write_run(tmp_path / "results" / "lab5-in-load", manifest.model_copy(update={"sampled_after_settling": False}),
              cells)
    in_load = str(tmp_path / "results" / "lab5-in-load")
    done = in_process(capsys, "compare", settled, in_load)
    assert done.code == 2 and done.errors[0].startswith(
        "error: A ran under power policy steady (after settling), B under steady (in load): ")
    code, found = report(capsys, settled, in_load, "--allow-policy-change")
    assert {"fact": "power policy", "a": "steady (after settling)", "b": "steady (in load)"} in found[
        "material_differences"]


def test_a_sharded_run_whose_shards_sampled_under_the_two_steady_rules_is_refused_against_either(capsys, tmp_path):
    """Shard 0 sampled in the load, shard 1 after settling (a steady shard from before schema 5): the run read back as
    one is labelled with both rules, not shard 0's, and compare refuses it against a run of either rule as it refuses
    the two rules against each other."""
    from runner.results import part_names

    manifest, cells = copy_run(shipped(TEMPLATE), "lab5-mixed", DAY + dt.timedelta(days=1))
    folder = tmp_path / "results" / "lab5-mixed"
    folder.mkdir(parents=True)
    for index, settled in enumerate((False, True)):
        names = part_names(f"{index}/2")
        part = manifest.model_copy(update={"shard": f"{index}/2", "sampled_after_settling": settled})
        (folder / names[0]).write_text(part.model_dump_json(by_alias=True))
        (folder / names[1]).write_text("".join(c.model_dump_json(by_alias=True) + "\n" for c in cells[index::2]))
    mixed = "steady (two rules: in load, after settling)"
    for rule, other in (("after settling", copied(tmp_path, "lab5-settled", DAY)), ("in load", in_load(tmp_path))):
        done = in_process(capsys, "compare", other, folder)
        assert done.code == 2 and done.errors[0].startswith(
            f"error: A ran under power policy steady ({rule}), B under {mixed}: "), done.errors


def in_load(tmp_path) -> str:
    """A copy of TEMPLATE sampled in the load, as today's steady runs are."""
    manifest, cells = copy_run(shipped(TEMPLATE), "lab5-in-load", DAY)
    write_run(tmp_path / "results" / "lab5-in-load", manifest.model_copy(update={"sampled_after_settling": False}),
              cells)
    return str(tmp_path / "results" / "lab5-in-load")


def test_material_differences_stand_beside_the_verdict(capsys, tmp_path):
    """A newer cuDNN and a lower power limit are named on the verdict's line; a host name or a start time is not."""
    a = copied(tmp_path, "lab5-a", DAY)
    manifest, cells = copy_run(shipped(TEMPLATE), "lab5-b", DAY + dt.timedelta(days=1))
    machine = manifest.machine.model_copy(update={
        "versions": {**manifest.machine.versions, "cudnn": "9.99.0"}, "host": "elsewhere",
        "gpu": manifest.machine.gpu.model_copy(update={"power_limit_w": 600.0})})
    b = write_run(tmp_path / "results" / "lab5-b", manifest.model_copy(update={"machine": machine}), cells)
    last = in_process(capsys, "compare", a, b).out.strip().splitlines()[-1]
    before = shipped(TEMPLATE).manifest.machine
    assert last.startswith("no regression: ") and last.endswith(
        f" · differs: gpu power_limit_w {before.gpu.power_limit_w} → 600.0; version cudnn "
        f"{before.versions['cudnn']} → 9.99.0")


def with_kernel_settings(tmp_path, run_id: str, started: dt.datetime, xla_flags: list[str] | None,
                         kernel_env: dict[str, str] | None) -> str:
    """A copy of the template run whose manifest records these XLA_FLAGS and kernel environment (None: not recorded,
    as the shipped runs, written before the fields were)."""
    manifest, cells = copy_run(shipped(TEMPLATE), run_id, started)
    machine = manifest.machine.model_copy(update={"xla_flags": xla_flags, "kernel_env": kernel_env})
    return str(write_run(tmp_path / "results" / run_id, manifest.model_copy(update={"machine": machine}), cells))


def test_xla_flags_or_a_kernel_environment_variable_that_differ_stand_beside_the_verdict(capsys, tmp_path):
    """Two nightly runs that differ only by a flag that changes kernels are not like with like: the verdict names it,
    in the order the runs give their flags (normalised: sorted, each flag's last setting)."""
    a = with_kernel_settings(tmp_path, "lab5-a", DAY, ["--xla_gpu_autotune_level=0"], {})
    b = with_kernel_settings(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), [], {"NVTE_FUSED_ATTN": "0"})
    last = in_process(capsys, "compare", a, b).out.strip().splitlines()[-1]
    assert last.startswith("no regression: ") and last.endswith(
        " · differs: xla_flags --xla_gpu_autotune_level=0 → (none); kernel env (none) → NVTE_FUSED_ATTN=0")
    same = with_kernel_settings(tmp_path, "lab5-c", DAY + dt.timedelta(days=2), [], {"NVTE_FUSED_ATTN": "0"})
    code, found = report(capsys, b, same)
    assert code == 0 and found["material_differences"] == [] and " · differs" not in found["verdict"]


def test_a_run_that_did_not_record_its_kernel_settings_says_not_recorded_and_no_difference_of_them_is_material(
        capsys, tmp_path):
    """Runs written before the fields were: unknown, never read as none set. Beside a run that recorded them, the
    environment table shows 'not recorded' against its value, and the verdict names no difference of them."""
    a = copied(tmp_path, "lab5-a", DAY)
    b = with_kernel_settings(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), ["--xla_gpu_autotune_level=0"], {})
    code, found = report(capsys, a, b)
    assert code == 0 and found["material_differences"] == [] and " · differs" not in found["verdict"]
    assert {"fact": "xla_flags", "a": "not recorded", "b": "--xla_gpu_autotune_level=0"} in found["environment"]
    assert {"fact": "kernel env", "a": "not recorded", "b": "(none)"} in found["environment"]
    both_old = compare.environments({"a": shipped(TEMPLATE).manifest, "b": shipped(H200_LAB5).manifest})
    assert both_old.loc[["xla_flags", "kernel env"], ["a", "b"]].eq("not recorded").all().all()


def test_previous_skips_a_run_of_another_power_policy(capsys, tmp_path):
    copied(tmp_path, "lab5-steady-before", DAY - dt.timedelta(days=2), factor=lambda c: 0.5)
    copied(tmp_path, "lab5-burst-nearer", DAY - dt.timedelta(days=1), policy="burst")
    copied(tmp_path, "lab5-steady", DAY)
    code, found = report(capsys, "lab5-steady", "--against", "previous", "--out", tmp_path / "results")
    assert found["a"]["run_id"] == "lab5-steady-before" and code == 1 and found["material_differences"] == []
    store = open_store(str(tmp_path / "results"))
    manifests = {run_id: store.read(run_id).manifest for run_id in store.runs()}
    assert compare.previous_run(manifests, "lab5-steady") == "lab5-steady-before"
    assert compare.previous_run(manifests, "lab5-burst-nearer") is None


def test_previous_skips_a_run_timed_by_another_timer():
    """A run on an H200's host whose JAX fell back to the CPU (NVML still names the GPU; JAX gives no compute
    capability) reports the wall timer: it is neither the previous run of a run the device timer timed nor theirs."""
    template = shipped(TEMPLATE)
    before, now, fell_back = (copy_run(template, run_id, DAY + dt.timedelta(days=day))[0]
                              for run_id, day in (("lab5-before", -2), ("lab5-now", 0), ("lab5-on-cpu", -1)))
    on_cpu = fell_back.machine.model_copy(update={"compute_capability": None, "platform": "cpu", "device_kind": "cpu"})
    fell_back = fell_back.model_copy(update={"machine": on_cpu})
    manifests = {m.run_id: m for m in (before, fell_back, now)}
    assert compare.gpu_name(fell_back) == compare.gpu_name(now) and compare.headline_timer(fell_back) == "wall"
    assert compare.previous_run(manifests, "lab5-now") == "lab5-before"
    assert compare.previous_run(manifests, "lab5-on-cpu") is None


# --- what else is bad input ------------------------------------------------------------------------------------

def test_runs_of_different_gpus_are_refused_unless_allowed(capsys):
    cpu, gpu = SHIPPED / "cpu" / "lab5-20261202-104832", SHIPPED / H200_LAB5
    done = in_process(capsys, "compare", cpu, gpu)
    assert done.code == 2 and done.errors == [
        "error: A ran on cpu, B on NVIDIA H200: times of different GPUs are no regression; give "
        "--allow-different-gpu to compare them anyway"]
    allowed = in_process(capsys, "compare", cpu, gpu, "--allow-different-gpu", "--format", "json")
    assert allowed.code == 0 and json.loads(allowed.out)["timer"] == "wall"  # the CPU run's headline timer


def test_unreadable_runs_and_wrong_arguments_exit_2_in_one_line_each(capsys, tmp_path, pair):
    a, b, _ = pair
    (tmp_path / "empty").mkdir()
    missing = in_process(capsys, "compare", tmp_path / "empty", b)
    assert missing.code == 2 and missing.errors[0].startswith("error: A: ") and "manifest.json: missing" in missing.err
    (tmp_path / "results" / "lab5-b" / MANIFEST).write_text("{not json")
    bad = in_process(capsys, "compare", a, b)
    assert bad.code == 2 and bad.errors == [f"error: B: {b}/{MANIFEST}: not valid JSON (Expecting property name "
                                            "enclosed in double quotes)"]
    assert in_process(capsys, "compare", a).code == 2
    assert in_process(capsys, "compare", a, b, "--against", "previous").code == 2
    assert in_process(capsys, "compare", a, a, "--threshold", "-1").code == 2


def test_against_previous_of_a_run_unread_exits_2_naming_it_never_1_a_regression(capsys, tmp_path):
    missing = in_process(capsys, "compare", "--against", "previous", tmp_path / "nowhere")
    assert (missing.code, missing.errors) == (2, [f"error: B: {tmp_path}/nowhere/{MANIFEST}: missing (is "
                                                  f"{tmp_path}/nowhere a run folder?)"])
    b = copied(tmp_path, "lab5-b", DAY)
    (tmp_path / "results" / "lab5-b" / MANIFEST).write_text("{not json")
    for args in ([b], ["lab5-b", "--out", tmp_path / "results"]):
        corrupt = in_process(capsys, "compare", "--against", "previous", *args)
        assert corrupt.code == 2 and corrupt.errors[0].startswith("error: B: ") and "not valid JSON" in corrupt.err


@pytest.mark.parametrize("gate", ["compare", "recheck"])
def test_an_internal_error_of_a_gate_exits_2_never_1_a_regression(gate, capsys, monkeypatch, pair):
    """compare and recheck (cli.GATES) exit 1 only where B regressed: their internal errors exit 2."""
    a, b, _ = pair
    monkeypatch.setattr(compare, "compare", lambda *args, **kwargs: 1 / 0)
    done = in_process(capsys, *([gate, a, b] if gate == "compare" else [gate, b, "--against", a]))
    assert (done.code, done.errors) == (2, ["attnbench: internal error: ZeroDivisionError: division by zero "
                                            "(ATTNBENCH_DEBUG=1 shows where)"])


def test_a_recheck_without_jax_exits_2_never_1_a_regression(capsys, monkeypatch, pair):
    a, b, _ = pair
    monkeypatch.setitem(sys.modules, "jax", None)  # as in a core install
    done = in_process(capsys, "recheck", b, "--against", a)
    assert (done.code, done.errors) == (2, ["error: recheck needs jax: pip install -e '.[jax]' (on an NVIDIA GPU "
                                            "'.[cuda12]' or '.[cuda13]')"])


def test_status_changes_cells_in_one_run_and_environment_come_before_the_times(capsys, tmp_path):
    a = copied(tmp_path, "lab5-a", DAY)
    manifest, cells = copy_run(shipped(TEMPLATE), "lab5-b", DAY + dt.timedelta(days=1), factor=lambda c: 1.5)
    machine = manifest.machine.model_copy(update={"versions": {**manifest.machine.versions, "cudnn": "9.99.0"}})
    write_run(tmp_path / "results" / "lab5-b", manifest.model_copy(update={"machine": machine}), cells[2:])
    done = in_process(capsys, "compare", a, tmp_path / "results" / "lab5-b")
    out = done.out
    order = [out.index(title) for title in ("Environment differences", "Cells only in A", "Slower (regressions)",
                                            "Geometric mean")]
    assert done.code == 1 and order == sorted(order)
    assert "version cudnn" in out.split("Cells only in A")[0] and "9.99.0" in out
    assert all(cell.key in out.split("Slower")[0] for cell in shipped(TEMPLATE).cells[:2])


# --- --against previous ------------------------------------------------------------------------------------------

def test_against_previous_takes_the_newest_earlier_run_of_the_spec_on_the_gpu(capsys, tmp_path):
    copied(tmp_path, "lab5-old", DAY - dt.timedelta(days=2))
    copied(tmp_path, "lab5-before", DAY - dt.timedelta(days=1), factor=lambda c: 0.5)
    copied(tmp_path, "lab5-later", DAY + dt.timedelta(days=1))  # after B: never its baseline
    cpu, _ = copy_run(shipped("cpu/lab5-20261202-104832"), "lab5-cpu", DAY - dt.timedelta(hours=1))
    write_run(tmp_path / "results" / "lab5-cpu", cpu, [])  # the same spec on another device, nearer in time
    copied(tmp_path, "decode-nearer", DAY - dt.timedelta(hours=2), template=DECODE)  # another spec
    b = copied(tmp_path, "lab5-b", DAY)
    code, found = report(capsys, "lab5-b", "--against", "previous", "--out", tmp_path / "results")
    assert found["a"]["run_id"] == "lab5-before" and code == 1  # B takes twice as long as the run before it
    by_folder = report(capsys, b, "--against", "previous")  # B's parent folder is the store
    assert by_folder[1]["a"]["run_id"] == "lab5-before"


def test_against_previous_with_no_earlier_run_has_nothing_to_compare(capsys, tmp_path):
    b = copied(tmp_path, "lab5-first", DAY)
    done = in_process(capsys, "compare", b, "--against", "previous")
    assert (done.code, done.out) == (0, "")
    assert done.errors == ["no earlier run of lab5 on NVIDIA H200 than lab5-first with its spec identity, power "
                           "policy steady (after settling) and timer device: nothing to compare with"]


def test_against_previous_with_no_earlier_run_still_gives_json_and_markdown(capsys, tmp_path):
    """A pipeline's first night reads a document, never an empty stdout: json with every night's keys (A and what
    needs it null, each section empty, no regression, the reason as the verdict), where it held 6 of a night's 20;
    markdown with the reason under the heading."""
    b = copied(tmp_path, "lab5-first", DAY)
    reason = ("no earlier run of lab5 on NVIDIA H200 than lab5-first with its spec identity, power policy steady "
              "(after settling) and timer device: nothing to compare with")
    code, found = report(capsys, b, "--against", "previous", "--threshold", "7")
    said = {key: found[key] for key in ("a", "timer", "threshold", "regressed", "verdict", "settings")}
    assert (code, said) == (0, {"a": None, "timer": None, "threshold": 0.07, "regressed": False, "verdict": reason,
                                "settings": None})
    assert found["b"]["run_id"] == "lab5-first"
    assert all(value == [] for value in found.values() if isinstance(value, list))
    copied(tmp_path, "lab5-second", DAY + dt.timedelta(days=1))
    second = report(capsys, "lab5-second", "--against", "previous", "--out", tmp_path / "results")[1]
    assert found.keys() == second.keys() and second["cells"]
    done = in_process(capsys, "compare", b, "--against", "previous", "--format", "markdown")
    assert (done.code, done.out, done.errors) == (0, f"### attnbench compare\n\n**{reason}**\n", [reason])


def test_runs_in_a_bucket_by_run_id(capsys, tmp_path, emulator):
    copied(tmp_path, "lab5-a", DAY)
    copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), factor=lambda c: 1.3)
    store = open_store("gs://attnbench-test/nightly")
    for run_id in ("lab5-a", "lab5-b"):
        for name in (MANIFEST, CELLS):
            store.put(f"{run_id}/{name}", (tmp_path / "results" / run_id / name).read_bytes())
    code, found = report(capsys, "lab5-a", "lab5-b", "--out", "gs://attnbench-test/nightly")
    assert code == 1 and len(found["regressions"]) == len(ok_keys(shipped(TEMPLATE)))
    code, found = report(capsys, "lab5-b", "--against", "previous", "--out", "gs://attnbench-test/nightly")
    assert code == 1 and found["a"]["run_id"] == "lab5-a"


# --- the pieces the dashboard shares -------------------------------------------------------------------------------

def cell_frames(*folders: str) -> list[pd.DataFrame]:
    return [frames.cells(shipped(f).cells) for f in folders]


def test_a_cell_is_slower_only_beyond_both_runs_noise_and_the_threshold():
    def cell(key, median, spread):
        return {"run": "r", "key": key, "experiment": "e", "variant": "xla", "status": "ok", "order": ord(key),
                **dict.fromkeys(compare.SHAPE, 1), "dtype": "bfloat16", "causal": False, "pass": "fwd",
                "wall_median_s": median, "wall_q1_s": median - spread, "wall_q3_s": median + spread}

    a = pd.DataFrame([cell(k, 1.0, 0.01) for k in "abcde"])
    b = pd.DataFrame([cell("a", 1.5, 0.01), cell("b", 1.04, 0.01), cell("c", 1.5, 1.0), cell("d", 0.9, 0.01),
                      cell("e", 0.97, 0.001)])  # beyond; within the threshold; within B's noise; faster; within
    table = compare.cells(a, b, "wall")
    assert table["verdict"].tolist() == ["slower", "within noise", "within noise", "faster", "within noise"]
    assert table["ratio"].tolist() == pytest.approx([1.5, 1.04, 1.5, 0.9, 0.97])
    assert compare.cells(a, b, "wall", threshold=0.03)["verdict"].tolist()[:2] == ["slower", "slower"]
    summary = compare.summary(table)
    assert summary[["slower", "within noise", "faster"]].values.tolist() == [[1, 3, 1]]
    assert summary["geomean B/A"][0] == pytest.approx((1.5 * 1.04 * 1.5 * 0.9 * 0.97) ** (1 / 5))


def _timed(key, median, spread, status="ok", **timers):
    """A cell's row timed by wall (and by `timers`, name -> median), its q1 and q3 `spread` either side."""
    medians = {"wall": median, **timers}
    quartiles = {"median": 0, "q1": -spread, "q3": spread}
    return {"run": "r", "key": key, "experiment": "e", "variant": "xla", "status": status, "reason": None,
            "order": ord(key), "timer": "wall", **dict.fromkeys(compare.SHAPE, 1), "dtype": "bfloat16",
            "causal": False, "pass": "fwd",
            **{f"{t}_{q}_s": m + d for t, m in medians.items() for q, d in quartiles.items()}}


def test_the_threshold_is_passed_only_beyond_1_plus_it_or_below_its_inverse():
    """At 25 %: 1.25 and 0.8 (1 / 1.25, not 0.75) are the edges, not yet slower or faster; by default 5 %: 1.06 is
    slower and 0.951 faster (1 / 1.05 = 0.952)."""
    a = pd.DataFrame([_timed(k, 1.0, 0.001) for k in "abcdef"])
    b = pd.DataFrame([_timed(k, m, 0.001) for k, m in zip("abcdef", (1.25, 1.26, 0.8, 0.79, 1.06, 0.951))])
    assert compare.cells(a, b, "wall", threshold=0.25)["verdict"].tolist() == [
        "within noise", "slower", "within noise", "faster", "within noise", "within noise"]
    assert compare.cells(a, b, "wall")["verdict"].tolist()[4:] == ["slower", "faster"]


def test_each_runs_noise_is_its_iqr_over_its_own_median():
    """noise A and noise B (compare and the dashboard show them beside each ratio): IQR / median, each run's own."""
    table = compare.cells(pd.DataFrame([_timed("a", 2.0, 0.1)]), pd.DataFrame([_timed("a", 4.0, 0.2)]), "wall")
    assert table[["noise_a", "noise_b"]].values.tolist() == [pytest.approx([0.1, 0.1])]


def test_each_pair_shows_its_times_in_ms_and_names_the_side_sampled_unsettled():
    a = pd.DataFrame([_timed("a", 2e-3, 1e-5), _timed("b", 2e-3, 1e-5)])
    b = pd.DataFrame([{**_timed("a", 3e-3, 1e-5), "power_settled": False}, {**_timed("b", 3e-3, 1e-5),
                                                                             "power_settled": True}])
    table = compare.cells(a, b, "wall")
    assert table[["a_ms", "b_ms"]].values.tolist() == [pytest.approx([2.0, 3.0])] * 2
    assert table["unsettled"].tolist() == ["B", ""]


def test_a_gap_inside_the_first_runs_noise_is_within_noise_and_a_cell_not_ok_has_no_verdict():
    """B half as fast again as a noisy A is within A's noise; a cell incorrect in both runs has no verdict, however
    its times read."""
    a = pd.DataFrame([_timed("a", 1.0, 1.0), _timed("b", 1.0, 0.001, status="incorrect")])
    b = pd.DataFrame([_timed("a", 1.5, 0.001), _timed("b", 2.0, 0.001, status="incorrect")])
    table = compare.cells(a, b, "wall")
    assert table[["key", "verdict"]].values.tolist() == [["a", "within noise"]]


def test_a_gap_beside_a_noise_not_known_is_within_noise_never_beyond_a_quiet_one():
    """A cell whose quartiles one run did not record: its noise is not known, and no gap is beyond it
    (runner.leaderboard.beyond_noise, the board's rule too)."""
    a = pd.DataFrame([_timed("a", 1.0, 0.001)]).assign(wall_q1_s=float("nan"), wall_q3_s=float("nan"))
    b = pd.DataFrame([_timed("a", 1.5, 0.001)])
    assert compare.cells(a, b, "wall")["verdict"].tolist() == ["within noise"]
    assert compare.cells(b.assign(wall_median_s=1.0), b, "wall")["verdict"].tolist() == ["slower"]


def test_a_regression_is_a_cell_ok_in_a_and_not_in_b_not_any_change_of_status():
    a = pd.DataFrame([_timed("a", 1.0, 0.001), _timed("b", 1.0, 0.001, status="skipped")])
    b = pd.DataFrame([_timed(k, 1.0, 0.001, status="failed") for k in "ab"])
    found = compare.compare(a, b, None, None)
    assert found.changes[["key", "regression"]].values.tolist() == [["a", True], ["b", False]]
    assert found.no_longer_ok["key"].tolist() == ["a"] and found.regressed
    assert not compare.compare(a.iloc[1:], b, None, None).regressed  # skipped, now failed: no ok cell lost


def test_a_timer_both_runs_measured_is_the_one_compared_whatever_the_headline():
    a = pd.DataFrame([_timed(k, 1.0, 0.001, device=1.0) for k in "ab"])
    b = pd.DataFrame([_timed(k, 2.0, 0.001, device=1.0) for k in "ab"])
    assert compare.compare(a, b, None, None).timer == "wall"  # A's headline: its cells' `timer`
    assert compare.compare(a.assign(timer="device"), b, None, None, timer="wall").regressed
    assert not compare.compare(a, b, None, None, timer="device").regressed
    mixed = pd.DataFrame([_timed(k, 1.0, 0.001) for k in "abc"]).assign(timer=["wall", "device", "device"])
    assert compare.headline(mixed) == "device"


def test_the_facts_that_change_what_a_time_means_are_material_the_runs_or_a_workers():
    """A driver, a power limit or a jax version (the run's, or one worker's) changes what a time means; a host, a
    worker's numpy or a temperature does not."""
    a = shipped(TEMPLATE).manifest
    te = a.workers["transformer_engine"]
    workers = {**a.workers, "transformer_engine": te.model_copy(update={
        "versions": {**te.versions, "jax": "9.9.9", "numpy": "9.9.9"}, "start_s": {"libraries": 99.0}})}
    gpu = a.machine.gpu.model_copy(update={"driver": "999.1", "power_limit_w": 600.0, "temperature_c": 80})
    machine = a.machine.model_copy(update={"gpu": gpu, "host": "elsewhere",
                                           "versions": {**a.machine.versions, "jaxlib": "9.9.9"}})
    b = a.model_copy(update={"machine": machine, "workers": workers})
    found = compare.differences(a, b)["fact"]
    assert set(found[found.map(compare.material)]) == {"gpu driver", "gpu power_limit_w", "version jaxlib",
                                                       "worker transformer_engine: jax"}
    assert {"host", "worker transformer_engine: numpy"} <= set(found)
    assert "worker transformer_engine start s" not in set(found)  # the seconds it took are the run's own


def test_the_gpu_its_count_the_cuda_runtime_and_tokamax_are_material_and_stand_beside_an_allowed_gpu_change(
        capsys, tmp_path):
    """Another GPU (name, compute capability, device count), CUDA runtime or tokamax changes what a time means: with
    --allow-different-gpu the verdict names them, as the dashboard's 'not like with like' does."""
    a = copied(tmp_path, "lab5-a", DAY)
    manifest, cells = copy_run(shipped(TEMPLATE), "lab5-b", DAY + dt.timedelta(days=1))
    m = manifest.machine
    machine = m.model_copy(update={
        "gpu": m.gpu.model_copy(update={"name": "NVIDIA L4"}), "compute_capability": "8.9", "device_count": 2,
        "versions": {**m.versions, "cuda_runtime": "12.8", "tokamax": "9.9.9"}})
    write_run(tmp_path / "results" / "lab5-b", manifest.model_copy(update={"machine": machine}), cells)
    code, found = report(capsys, a, str(tmp_path / "results" / "lab5-b"), "--allow-different-gpu")
    named = {d["fact"] for d in found["material_differences"]}
    assert {"gpu name", "compute capability", "devices", "version cuda_runtime", "version tokamax"} <= named
    assert "gpu name NVIDIA H200 → NVIDIA L4" in found["verdict"]


def test_environments_put_what_differs_first_and_ignore_times_and_ids():
    manifests = {"a": shipped(H200_LAB5_NO_TE).manifest, "b": shipped(H200_LAB5).manifest}
    table = compare.environments(manifests)
    differs = list(table.index[table["differs"]])
    assert "version cudnn" in differs and "version transformer_engine" in differs
    assert table.loc["compute capability", ["a", "b"]].tolist() == ["9.0", "9.0"]  # stored as '9' and '9.0'
    assert not {"run id", "started", "ended", "gpu temperature_c"} & set(differs)
    assert not [fact for fact in differs if fact.startswith("seconds ")]  # time spent is the run's, not its setting
    assert list(table.index[:len(differs)]) == differs
    assert compare.differences(*manifests.values()).set_index("fact").loc["version cudnn"].tolist() == [
        "9.19.0", "9.14.0"]


def test_the_power_policy_is_an_environment_difference():
    steady = shipped("h200/hopper-long-warm-20261202").manifest
    burst = shipped("h200/hopper-long-burst-20261202").manifest
    assert compare.differences(steady, burst).set_index("fact").loc["power policy"].tolist() == [
        "steady (after settling)", "burst"]


def test_a_runs_facts_carry_its_seconds_by_phase_and_its_workers_start():
    found = compare.facts(shipped("h200/lab5-warm-20261203-023042").manifest)
    assert found["seconds settle"] == "8.6" and found["worker transformer_engine start s"] == "0.4"


def test_previous_run_follows_spec_identity_gpu_power_policy_and_date():
    manifests = {f.rpartition("/")[2]: shipped(f).manifest for f in (
        H200_LAB5, H200_LAB5_NO_TE, "cpu/lab5-20261202-104832", "h200/lab5-warm-20261202-182308", TEMPLATE,
        H200_LONG, H200_LONG_TE_FAILED)}
    assert compare.previous_run(manifests, "lab5-warm-20261203-023042") == "lab5-warm-20261202-182308"
    # another spec hash (tolerances.gradient_factor came in between, at its default), the same spec identity
    assert compare.previous_run(manifests, "lab5-20261202-110556") == "lab5-20261202-104743"
    assert compare.previous_run(manifests, "lab5-20261202-104743") is None  # the CPU lab5 run is another GPU
    assert compare.previous_run(manifests, "lab5-warm-20261202-182308") is None  # 110556's power policy: none
    assert compare.previous_run(manifests, "hopper-long-20261202-110136") is None  # 105336 sampled for longer


def test_the_headline_timer_is_the_one_most_cells_report():
    gpu, cpu = cell_frames(H200_LAB5, "cpu/lab5-20261202-104832")
    assert (compare.headline(gpu), compare.headline(cpu)) == ("device", "wall")
    assert compare.compare(gpu, gpu, None, None).timer == "device"


def test_compare_needs_no_jax(tmp_path):
    """A pipeline's image may hold the core install only: `compare` runs with `import jax` failing."""
    a = copied(tmp_path, "lab5-a", DAY)
    b = copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), factor=lambda c: 1.3)
    script = ("import sys; sys.modules.update(dict.fromkeys(['jax', 'jaxlib', 'flax'])); from runner.cli import main; "
              f"code = main(['compare', {a!r}, {b!r}, '--format', 'json']); "
              "print([m for m, v in sys.modules.items() if v and m.startswith(('jax', 'runner.registry'))]); "
              "sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    *report, imported = done.stdout.splitlines()
    assert (done.returncode, imported) == (1, "[]"), done.stderr[-2000:]
    assert json.loads("\n".join(report))["regressed"] is True


def test_the_cli_s_default_threshold_is_compare_s_read_without_pandas():
    """One default for `compare --threshold` (percent), compare.DEFAULT_THRESHOLD (its fraction) and the dashboard,
    which reads the latter; the CLI reads it where starting up imports no pandas."""
    from runner.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["compare", "a", "b"]).threshold / 100 == compare.DEFAULT_THRESHOLD
    sub = next(a for a in parser._actions if a.dest == "command").choices["compare"]
    assert f"(default: {100 * compare.DEFAULT_THRESHOLD:g})" in " ".join(sub.format_help().split())
    script = "import sys, runner.cli; print(sorted({'pandas', 'numpy'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


# --- runs of one spec across attnbench upgrades ----------------------------------------------------------------------

LAB5_RUNS = (CPU_LAB5, H200_LAB5_NO_TE, H200_LAB5, "h200/lab5-cold-20261202-182308", TEMPLATE)


def lab5_today():
    from runner.registry import load_all
    from runner.spec import load_spec

    return load_spec(REPO / "specs" / "lab5.yaml", set(load_all()))


def test_lab5s_shipped_runs_of_three_attnbench_versions_share_one_spec_identity():
    """lab5 run on 12-02 (two attnbench versions), on 12-02/12-03 (a third) and lab5.yaml as today's attnbench runs
    it: four spec hashes, the same cells, one identity; hopper-long's two runs of other timing settings: two."""
    from runner.cells import expand

    runs, today = [shipped(f) for f in LAB5_RUNS], lab5_today()
    assert len({run.manifest.spec_hash for run in runs} | {today.digest()}) == 4
    assert all({c.key for c in run.cells} == {c.key for c in expand(today)} for run in runs)
    assert {compare.spec_identity(run.manifest) for run in runs} == {today.identity()}
    longer, shorter = (shipped(f).manifest for f in (H200_LONG_TE_FAILED, H200_LONG))
    assert compare.spec_identity(longer) != compare.spec_identity(shorter)
    assert compare.differences(longer, shorter).set_index("fact").loc["spec identity"].tolist() == [
        compare.spec_identity(longer), compare.spec_identity(shorter)]
    assert compare.material("spec identity") and not compare.material("spec hash")


def test_an_earlier_value_of_a_material_fact_is_material_too():
    """A resumed run's `earlier gpu driver` (some cells ran on another driver) changes what a time means as the
    driver does; an earlier value of a fact that is not material is not."""
    assert compare.material("earlier gpu driver") and compare.material("earlier version cudnn")
    assert not compare.material("earlier host") and not compare.material("earlier version numpy")


def test_previous_finds_the_run_before_an_upgrade_and_names_attnbench_beside_the_verdict(capsys, tmp_path):
    """Last night's lab5 ran on an older attnbench (its spec hash 368e31dd…); tonight's, on today's, has another spec
    hash and the same identity: it is the previous run, and the attnbench version stands beside the verdict."""
    copied(tmp_path, "lab5-night-1", DAY - dt.timedelta(days=1))
    manifest, cells = copy_run(shipped(TEMPLATE), "lab5-night-2", DAY, git_sha="0ld")
    write_run(tmp_path / "results" / "lab5-night-2", manifest, cells)
    manifest, cells = copy_run(shipped(TEMPLATE), "lab5-night-3", DAY + dt.timedelta(days=1), git_sha="n3w")
    today = lab5_today()
    manifest = manifest.model_copy(update={"spec": today.content(), "spec_hash": today.digest()})
    write_run(tmp_path / "results" / "lab5-night-3", manifest, cells)
    code, found = report(capsys, "lab5-night-3", "--against", "previous", "--out", tmp_path / "results")
    assert code == 0 and found["a"]["run_id"] == "lab5-night-2"
    assert found["material_differences"] == [{"fact": "attnbench", "a": "0ld", "b": "n3w"}]
    assert found["verdict"].endswith(" · differs: attnbench 0ld → n3w")
    assert {"fact": "spec hash", "a": "368e31dd7f4dae7f", "b": today.digest()} in found["environment"]


def test_previous_passes_over_a_newer_run_of_the_series_that_planned_no_cell_b_planned_and_says_so(capsys, tmp_path):
    """p1 and p3 ran --only the first 40 cells, p2 between them the rest (--only, --variants and --where leave the
    spec identity as it is): p3's previous run is p1, and p2 is named as passed over, with why."""
    keys = [c.key for c in shipped(TEMPLATE).cells]
    copied(tmp_path, "p1", DAY, kept=slice(0, 40), order=keys[:40])
    copied(tmp_path, "p2", DAY + dt.timedelta(hours=1), kept=slice(40, None), order=keys[40:])
    copied(tmp_path, "p3", DAY + dt.timedelta(hours=2), kept=slice(0, 40), order=keys[:40])
    code, found = report(capsys, "p3", "--against", "previous", "--out", tmp_path / "results")
    assert code == 0 and found["a"]["run_id"] == "p1"
    assert len(found["cells"]) == len(set(keys[:40]) & set(ok_keys(shipped(TEMPLATE))))
    said = in_process(capsys, "compare", "p3", "--against", "previous", "--out", tmp_path / "results").errors
    assert said == [f"--against previous: passed over p2: {compare.NO_CELL_SHARED}"]
    manifests = {run: open_store(str(tmp_path / "results")).read(run).manifest for run in ("p1", "p2", "p3")}
    assert compare.previous(manifests, "p3") == compare.Previous("p1", [("p2", compare.NO_CELL_SHARED)])
    assert compare.previous(manifests, "p2") == compare.Previous(None, [("p1", compare.NO_CELL_SHARED)])
    legacy = {**manifests, "p2": manifests["p2"].model_copy(update={"cell_order": None})}
    assert compare.previous_run(legacy, "p3") == "p2"  # a run listing no plan is taken, as before


def _budget(tmp_path, run_id: str, started: dt.datetime, budget_s: float) -> str:
    """A copy of TEMPLATE that sampled each cell for `budget_s` (its spec's timing.budget_s): another identity."""
    manifest, cells = copy_run(shipped(TEMPLATE), run_id, started)
    spec = manifest.spec
    manifest = manifest.model_copy(update={"spec": {**spec, "timing": {**spec["timing"], "budget_s": budget_s}}})
    return str(write_run(tmp_path / "results" / run_id, manifest, cells))


def test_runs_of_other_settings_are_told_by_the_settings_that_differ_not_only_their_hashes(capsys, tmp_path):
    """Last night sampled 0.2 s a cell, tonight 1 s: --against previous finds no run of tonight's series and says
    which of last night's settings differ; comparing the two names them beside the spec identities' hashes."""
    a, b = _budget(tmp_path, "lab5-short", DAY, 0.2), _budget(tmp_path, "lab5-long", DAY + dt.timedelta(days=1), 1.0)
    done = in_process(capsys, "compare", "lab5-long", "--against", "previous", "--out", tmp_path / "results")
    assert done.code == 0 and done.errors[0] == ("--against previous: lab5-short, the newest earlier run of lab5 on "
                                                 "this GPU, is of another series: timing.budget_s 0.2 → 1.0")
    code, found = report(capsys, a, b)
    assert found["settings"] == "timing.budget_s 0.2 → 1.0" and found["verdict"].endswith(" · settings: " +
                                                                                         found["settings"])
    assert " · differs: spec identity " in found["verdict"]
    assert compare.settings_said(*(open_store(str(tmp_path / "results")).read(r).manifest
                                   for r in ("lab5-short", "lab5-short"))) == ""


def _with_ceilings(manifest, run_id: str, measured_by: str, reused: bool):
    """`manifest` as run `run_id`, its ceilings measured by `measured_by`'s start (reused, or its own)."""
    origin = manifest.machine.ceilings_origin.model_copy(update={"reused": reused, "run_id": measured_by,
                                                                 "measured_at": f"{measured_by}'s start"})
    return manifest.model_copy(update={"run_id": run_id,
                                       "machine": manifest.machine.model_copy(update={"ceilings_origin": origin})})


def test_runs_that_share_one_measurement_of_the_ceilings_do_not_differ_in_it():
    """A run that reused another's ceilings names the start that measured them, as that run does."""
    a = shipped(H200_LAB5).manifest
    reused = a.machine.ceilings_origin.model_copy(update={"reused": True})
    b = a.model_copy(update={"run_id": "later", "machine": a.machine.model_copy(update={"ceilings_origin": reused})})
    assert compare.facts(b)["ceilings measured"] == f"{a.run_id} at {a.started_at}"
    assert "ceilings measured" not in compare.differences(a, b)["fact"].tolist()


@pytest.mark.parametrize("a_by, a_reused, b_by, b_reused, told", [
    ("a", False, "b", False, False),  # each measured its own: two starts' noise, no difference of environment
    ("a", False, "older", True, True),  # one measured now, one reused another start's
    ("first", True, "second", True, True),  # reused from different entries
    ("first", True, "first", True, False),  # reused from one entry
])
def test_ceilings_measured_differs_only_where_a_run_reused_them(a_by, a_reused, b_by, b_reused, told):
    """Two runs that each measured their own ceilings differ in `ceilings measured` as any two starts do: that is no
    difference of environment. It is one where a run reused kept ones, measured by another start than the other's;
    the ceilings' values stay beside it, as the runs' own facts."""
    run = shipped(H200_LAB5).manifest
    a, b = _with_ceilings(run, "a", a_by, a_reused), _with_ceilings(run, "b", b_by, b_reused)
    assert ("ceilings measured" in compare.differences(a, b)["fact"].tolist()) is told
    table = compare.environments({"a": a, "b": b})
    assert table.loc["ceilings measured", "differs"] == told
    assert table.loc["matmul peak (TFLOP/s)", "a"] == str(round(run.machine.matmul_peak_tflops, 1))


def test_the_regressions_pages_example_is_what_compare_prints_now(capsys):
    """docs/regressions.md shows `attnbench compare A B` on two shipped runs and its verdict line: run it, so the
    page cannot go stale."""
    block = (REPO / "docs" / "regressions.md").read_text().split("    $ attnbench compare ", 1)[1].split("\n\n")[0]
    lines = block.splitlines()
    result = in_process(capsys, "compare", *lines[0].split())
    assert result.code == 1, result.err
    assert result.out.splitlines()[-1] == lines[-1].strip()



def test_a_resume_goes_on_across_the_driver_alone_and_keeps_the_earlier_values():
    """Which facts refuse a resume (resume.refuses_resume): the GPU, its power limit and the libraries do, the driver
    (RESUMABLE: a GKE node pool upgrades it on its own) does not; its earlier values are kept, with those a manifest
    kept of processes before it, but not one equal to this machine's."""
    from runner.record import GpuFacts, Machine, Manifest
    from runner.resume import resumed_across

    machine = Machine(host="h", platform="gpu", device_kind="H200", device_count=1, versions={"jax": "0.8.0"},
                      gpu=GpuFacts(name="NVIDIA H200", driver="580.95", power_limit_w=700))
    run = Manifest(run_id="r", name="t", spec={}, spec_hash="0" * 16, started_at="2026-12-07T00:00:00+00:00",
                   machine=machine.model_copy(update={"gpu": machine.gpu.model_copy(update={"driver": "570.10"})}),
                   earlier_facts={"gpu driver": ["560.1", "580.95"]})
    assert resumed_across([run], machine) == ("", {"gpu driver": ["570.10", "560.1"]})
    assert resumed_across([run.model_copy(update={"earlier_facts": None})], machine) == (
        "", {"gpu driver": ["570.10"]})
    capped = machine.model_copy(update={"gpu": machine.gpu.model_copy(update={"power_limit_w": 500.0})})
    assert resumed_across([run], capped)[0] == "gpu power_limit_w 700.0 → 500.0"
    upgraded = machine.model_copy(update={"versions": {"jax": "0.9.0"}})
    assert resumed_across([run, run], upgraded)[0] == "version jax 0.8.0 → 0.9.0"


def test_previous_prefers_a_run_made_with_the_same_settings_of_an_earlier_sitting(capsys, tmp_path):
    """A benchmark's cold, warm and --compile-ahead off runs share a series: the ahead-off run's previous is the
    ahead-off run of the night before, its twins of tonight named as passed over; where the earlier sitting holds no
    run made so, its newest of any; where no earlier sitting is stored, the twin, said to be of the same sitting."""
    def made(run_id: str, started: dt.datetime, *argv: str) -> None:
        manifest, cells = copy_run(shipped(TEMPLATE), run_id, started)
        write_run(tmp_path / "results" / run_id,
                  manifest.model_copy(update={"argv": ["attnbench", "run", "specs/lab5.yaml", *argv]}), cells)

    night = DAY + dt.timedelta(days=1)
    made("off-1", DAY, "--compile-ahead", "off")
    made("cold-2", night)
    made("warm-2", night + dt.timedelta(seconds=53), "--compile-ahead", "on")  # the default, given
    made("off-2", night + dt.timedelta(seconds=80), "--compile-ahead=off")
    store = str(tmp_path / "results")
    done = in_process(capsys, "compare", "off-2", "--against", "previous", "--out", store, "--format", "json")
    assert done.code == 0 and json.loads(done.out)["a"]["run_id"] == "off-1"
    assert done.errors == ["--against previous: passed over warm-2: started 27 s before it, in its sitting: an earlier "
                           "sitting's run is taken; passed over cold-2: started 80 s before it, in its sitting: an "
                           "earlier sitting's run is taken"]
    manifests = {run: open_store(store).read(run).manifest for run in ("off-1", "cold-2", "warm-2", "off-2")}
    assert compare.previous_run(manifests, "warm-2") == "off-1"  # made another way, but of the night before
    tonight = {run: manifests[run] for run in ("cold-2", "warm-2", "off-2")}
    assert compare.previous(tonight, "off-2") == compare.Previous("warm-2", [])  # no ahead-off run before it
    (tmp_path / "results" / "off-1" / "manifest.json").unlink()
    twin = in_process(capsys, "compare", "warm-2", "--against", "previous", "--out", store, "--format", "json")
    sitting = "A started 53 s before B, in the same sitting, not on an earlier night"
    assert twin.errors[-1] == (f"--against previous: cold-2: {sitting}: no run of its series from an earlier sitting "
                               "is stored")
    said = json.loads(twin.out)  # the report, the markdown and the json say it too, where stderr is not kept
    assert said["sitting"] == sitting and said["verdict"].endswith(f" · {sitting}")


def test_against_previous_of_last_night_s_warm_run_takes_the_night_before_not_its_cold_twin(capsys):
    """hopper-long-warm-20261203-023241 started 83 s after its cold twin: its previous is the warm run of the sitting
    before (the shipped pair a lead asks "did last night regress" of), the twin named as passed over."""
    done = in_process(capsys, "compare", "hopper-long-warm-20261203-023241", "--against", "previous",
                      "--out", REPO / "examples" / "results" / "h200", "--format", "json")
    said = json.loads(done.out)
    assert (said["a"]["run_id"], said["sitting"]) == ("hopper-long-warm-20261202", None)
    assert done.errors == ["--against previous: passed over hopper-long-cold-20261203-023241: started 83 s before it, "
                           "in its sitting: an earlier sitting's run is taken"]


# --- a recheck beside B (attnbench recheck) --------------------------------------------------------------------------

def rechecked(tmp_path, b: str, factor, rechecks: str | None = "lab5-b", run_id: str = "lab5-b-recheck",
              keys: list[str] | None = None, git_sha: str | None = None, change=lambda cell: cell) -> str:
    """B's recheck beside it: TEMPLATE's cells among `keys` (every cell where None), each `factor(cell)` times slower,
    then `change`d, as a run of its own started after B whose manifest says it rechecks `rechecks`."""
    manifest, cells = copy_run(shipped(TEMPLATE), run_id, DAY + dt.timedelta(days=1, hours=1), git_sha, factor)
    write_run(tmp_path / "results" / run_id, manifest.model_copy(update={"rechecks": rechecks}),
              [change(c) for c in cells if keys is None or c.key in keys])
    return str(tmp_path / "results" / run_id)


def test_a_slower_cell_the_recheck_does_not_find_slower_is_not_reproduced_never_a_regression(capsys, tmp_path, pair):
    """Of B's three slower cells, its recheck finds one slower again: that one is the regression (exit 1); the two
    it does not are `not reproduced`, listed with both ratios and counted, in every format."""
    a, b, slower = pair
    rechecked(tmp_path, b, lambda c: 1.3 if c.key == slower[0] else 1.0, keys=slower)
    code, found = report(capsys, a, b)
    assert code == 1 and found["regressions"] == slower[:1] and found["not_reproduced"] == slower[1:]
    assert found["recheck"] == "lab5-b-recheck" and "2 not reproduced" in found["verdict"]
    ratios = {c["key"]: (round(c["ratio"], 3), round(c["recheck_ratio"], 3)) for c in found["cells"]
              if c["key"] in slower}
    assert ratios == {slower[0]: (1.3, 1.3), **{key: (1.3, 1.0) for key in slower[1:]}}
    markdown = in_process(capsys, "compare", a, b, "--format", "markdown").out
    assert "#### Not reproduced" in markdown and "recheck / A" in markdown


def test_a_recheck_that_finds_none_slower_again_leaves_no_regression(capsys, tmp_path, pair):
    a, b, slower = pair
    rechecked(tmp_path, b, lambda c: 1.0, keys=slower)
    code, found = report(capsys, a, b)
    assert code == 0 and found["regressions"] == [] and found["not_reproduced"] == slower
    heading = in_process(capsys, "compare", a, b).out
    assert "measured again: lab5-b-recheck (3 cells timed in it and A); a slower cell" in heading


def test_a_recheck_that_differs_from_b_in_what_changes_a_time_says_how(capsys, tmp_path, pair):
    a, b, slower = pair
    rechecked(tmp_path, b, lambda c: 1.0, keys=slower, git_sha="0123abc")
    said = "(3 cells timed in it and A), which differs from B in what changes a time (attnbench — → 0123abc); a slower"
    assert said in in_process(capsys, "compare", a, b).out


def test_a_slower_cell_the_recheck_did_not_time_stays_slower(capsys, tmp_path, pair):
    """A recheck cut short (or one whose cell failed) refutes none of the cells it did not time."""
    a, b, slower = pair
    rechecked(tmp_path, b, lambda c: 1.0, keys=slower[1:])
    code, found = report(capsys, a, b)
    assert code == 1 and found["regressions"] == slower[:1] and found["not_reproduced"] == slower[1:]


def test_a_recheck_that_did_not_converge_or_confirm_leaves_the_cell_slower(capsys, tmp_path, pair):
    """Only a recheck clearly not slower clears a cell: within noise at a noise that never met its target (20 samples,
    10 % either side), or a 1.3x move unconfirmed (3 samples), proves nothing, so the cell stays slower and the gate
    fails; within noise on a converged pair is not reproduced."""
    a, b, slower = pair
    noisy, few, settled = slower
    shape = {noisy: (20, 0.1), few: (3, 0.05)}
    rechecked(tmp_path, b, lambda c: 1.3 if c.key == few else 1.0, keys=slower,
              change=lambda c: unconverged(c, *shape[c.key]) if c.key in shape else c)
    code, found = report(capsys, a, b)
    assert code == 1 and found["regressions"] == [noisy, few] and found["not_reproduced"] == [settled]


def test_a_run_named_like_a_recheck_whose_manifest_rechecks_another_run_is_not_bs_recheck(capsys, tmp_path, pair):
    a, b, slower = pair
    rechecked(tmp_path, b, lambda c: 1.0, rechecks="lab5-other", keys=slower)
    code, found = report(capsys, a, b)
    assert code == 1 and found["regressions"] == slower and found["recheck"] is None


def test_compare_and_the_dashboard_take_the_same_run_for_bs_recheck(capsys, tmp_path, pair):
    """A run copied into the folder B-recheck, whose manifest names B but another run id, is no recheck of B for
    compare, as for the dashboard (compare.recheck_of, one rule): the folder's name alone proves nothing."""
    a, b, slower = pair
    rechecked(tmp_path, b, lambda c: 1.0, run_id="lab5-copy", keys=slower)
    (tmp_path / "results" / "lab5-copy").rename(tmp_path / "results" / "lab5-b-recheck")
    code, found = report(capsys, a, b)
    assert code == 1 and found["regressions"] == slower and found["recheck"] is None


def test_against_previous_never_takes_a_recheck_for_the_run_before(capsys, tmp_path):
    """A recheck holds another run's slower cells measured again: the next night's previous run is B itself."""
    copied(tmp_path, "lab5-b", DAY)
    rechecked(tmp_path, "lab5-b", lambda c: 0.5)  # started after B, and faster: taken, it would hide a regression
    copied(tmp_path, "lab5-c", DAY + dt.timedelta(days=2))
    code, found = report(capsys, "lab5-c", "--against", "previous", "--out", tmp_path / "results")
    assert found["a"]["run_id"] == "lab5-b" and code == 0


def test_bs_recheck_among_a_stores_runs_is_the_one_whose_manifest_says_it_rechecks_b():
    """The dashboard's rule (compare.recheck_of): the run B-recheck whose manifest names B; none by its name alone."""
    b = shipped(TEMPLATE).manifest
    again = b.model_copy(update={"run_id": compare.recheck_id(b.run_id), "rechecks": b.run_id})
    assert compare.recheck_of({"b": b, "r": again}, "b") == "r"
    assert compare.recheck_of({"b": b, "r": again.model_copy(update={"rechecks": None})}, "b") is None


def test_previous_made_another_way_names_the_settings_apart_in_the_verdict(capsys, tmp_path):
    """Where no earlier run was made with B's settings, previous takes the newest of any, and the verdict says how
    they were made apart (a run settings difference is material: the json's material_differences, the report)."""
    for run_id, started, argv in [("off-1", DAY, ["--compile-ahead", "off"]),
                                  ("ceil-2", DAY + dt.timedelta(days=1), ["--measure"])]:
        manifest, cells = copy_run(shipped(TEMPLATE), run_id, started)
        write_run(tmp_path / "results" / run_id,
                  manifest.model_copy(update={"argv": ["attnbench", "run", "specs/lab5.yaml", *argv]}), cells)
    done = in_process(capsys, "compare", "ceil-2", "--against", "previous", "--out", tmp_path / "results",
                      "--format", "json")
    said = json.loads(done.out)
    assert done.code == 0 and said["a"]["run_id"] == "off-1" and said["sitting"] is None
    assert "differs: run settings --compile-ahead off → --measure-ceilings" in said["verdict"]
    assert {"fact": "run settings", "a": "--compile-ahead off", "b": "--measure-ceilings"} in said[
        "material_differences"]


def test_a_run_from_before_the_power_choice_names_its_policy_in_compare_as_show_and_the_dashboard_do():
    """lab5-20261202-104743 chose no power policy: compare's environment table and its not-like-with-like line say
    record.policy_said's NO_POLICY, as show's header and the dashboard's power_of do, where compare said '—'."""
    from dashboard.data import power_of
    from runner.record import NO_POLICY

    old, steady = shipped("h200/lab5-20261202-104743").manifest, shipped("h200/lab5-cold-20261202-182308").manifest
    assert compare.differences(old, steady).set_index("fact").loc["power policy"].tolist() == [
        NO_POLICY, "steady (after settling)"]
    assert f"power policy {NO_POLICY} → steady (after settling)" in compare.apart(old, steady)
    assert f"power {NO_POLICY}" in report_module.run_facts(old, []) and power_of(old) == NO_POLICY
