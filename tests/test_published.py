"""runner/published.py: cudnn-frontend's H200 figures read with their source, matched to cells by shape, printed by
`attnbench show` beside the shipped H200 run at their shape."""

from __future__ import annotations

import csv

import pytest
import yaml

from runner import metrics, published
from helpers import REPO, in_process, params
from stores import H200_LONG, shipped

REFERENCE = REPO / "docs" / "reference"
LLAMA = dict(batch=1, heads=64, kv_heads=8, head_dim=128, dtype="bfloat16")


def _entry(file: str) -> dict:
    return next(e for e in yaml.safe_load((REFERENCE / "sources.yaml").read_text()) if e["file"] == file)


def test_the_reference_file_is_the_source_verbatim_and_names_it():
    entry = _entry("cudnn-frontend-h200-llama3.1.csv")
    assert entry["commit"] in entry["url"] and entry["path"] in entry["url"]
    assert "9.19.1" in entry["series"] and "H200" in entry["series"]
    text = (REFERENCE / entry["file"]).read_text()
    assert len(text) == 3235 and text.startswith("config_name,model_name,backend,data_type,attn_mask")


def test_every_published_row_gives_the_files_tflops_under_attnbenchs_flop_count():
    """The CSV's own fwd_tflops from attnbench's FLOPs over the CSV's time: the same convention, the same shape."""
    rows = list(csv.DictReader(open(REFERENCE / "cudnn-frontend-h200-llama3.1.csv")))
    for row in rows:
        p = params(**LLAMA, seq_len=int(row["q_seqlen"]), causal=row["attn_mask"] == "top_left")
        (figure,) = published.lookup(p.as_dict(), row["data_type"] == "fp8")
        assert figure.median_s == pytest.approx(float(row["fwd_time_ms"]) / 1e3)
        rounding = 5e-4 / float(row["fwd_time_ms"])  # the file gives milliseconds to 3 decimals
        assert metrics.flops(p) / figure.median_s / 1e12 == pytest.approx(float(row["fwd_tflops"]), rel=3e-3 + rounding)
    series = _entry("cudnn-frontend-h200-llama3.1.csv")["series"]
    ours = [f for found in published.figures().values() for f in found if f.source == series]
    assert len(ours) == 2 * len(rows)  # fwd and fwd + bwd per row


def test_a_cell_matches_only_at_the_very_shape():
    p = dict(**LLAMA, seq_len=8192, causal=True)
    (both,) = published.lookup(params(**p, pass_="fwd_bwd").as_dict(), False)
    assert both.median_s == pytest.approx((1.708 + 5.083) / 1e3)
    for other in (dict(window=4096), dict(tp=2), dict(fill=0.5), dict(softcap=50.0), dict(batch=3), dict(documents=2)):
        assert published.lookup(params(**{**p, **other}).as_dict(), False) == []


def test_a_sdpa_row_with_a_deterministic_backward_meets_only_deterministic_cells(tmp_path, monkeypatch):
    """sdpa_benchmark_training's CSV says per row whether its backward was deterministic (all False in the shipped
    file): a True row's fwd + bwd is the deterministic cell's figure, never the plain cell's."""
    import shutil

    shutil.copytree(REFERENCE, tmp_path, dirs_exist_ok=True)
    file = tmp_path / "cudnn-frontend-h200-llama3.1.csv"
    rows = list(csv.DictReader(open(file)))
    rows[0]["deterministic_bwd"] = "True"
    with open(file, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    monkeypatch.setenv(published.REFERENCE_ENV, str(tmp_path))
    shape = dict(**LLAMA, seq_len=int(rows[0]["q_seqlen"]), causal=rows[0]["attn_mask"] == "top_left")
    both_s = (float(rows[0]["fwd_time_ms"]) + float(rows[0]["bwd_time_ms"])) / 1e3
    (steady,) = published.lookup(params(**shape, pass_="fwd_bwd", deterministic=True).as_dict(), False)
    assert steady.median_s == pytest.approx(both_s)
    assert published.lookup(params(**shape, pass_="fwd_bwd").as_dict(), False) == []
    assert published.lookup(params(**shape).as_dict(), False) == []  # its forward: the plain row's, none here


def test_every_published_decode_row_gives_the_files_gbps_under_attnbenchs_byte_count():
    """decode_sweep's gbps from attnbench's bytes_min (Q and O of the new tokens, K and V of the cache once) over the
    file's time, at the dense serving cell of the row's shape; a paged or ragged cell has no published figure."""
    entry = _entry("cudnn-frontend-h200-decode-sweep-llama3.1.csv")
    assert entry["commit"] in entry["url"] and "9.27" in entry["versions"]
    rows = list(csv.DictReader(open(REFERENCE / entry["file"])))
    assert len(rows) == 32 and {r["q_tokens"] for r in rows} == {"1", "8"}
    for row in rows:
        p = params(batch=int(row["batch_size"]), seq_len=int(row["q_tokens"]), kv_seq_len=int(row["kv_len"]),
                   heads=64, kv_heads=8, head_dim=128, dtype="bfloat16", causal=True, kv_lengths="equal")
        (figure,) = published.lookup(p.as_dict(), False)
        assert figure.source == entry["series"]
        assert metrics.bytes_min(p) / figure.median_s / 1e9 == pytest.approx(float(row["gbps"]), rel=2e-3)
        for other in (dict(page_size=16), dict(kv_lengths="uniform"), dict(causal=False)):
            assert published.lookup(params(**{**p.as_dict(), **other}).as_dict(), False) == []


def test_no_reference_folder_means_no_published_series(tmp_path, monkeypatch):
    monkeypatch.setenv(published.REFERENCE_ENV, str(tmp_path))
    assert published.lookup(params(**LLAMA, seq_len=8192, causal=True).as_dict(), False) == []


def test_a_run_on_a_gpu_says_why_it_has_no_published_figure_where_the_folder_holds_none(tmp_path, monkeypatch):
    """An image or install without docs/reference/: no GPU's figures are known, so a GPU's run says so; a CPU's run
    expects none and says nothing."""
    run = shipped(H200_LONG)
    assert published.absent(run.manifest) is None  # the checkout's folder: read
    monkeypatch.setenv(published.REFERENCE_ENV, str(tmp_path))
    for gpu in ("NVIDIA H200", "NVIDIA L4"):
        assert published.absent(on(run.manifest, gpu)) == (
            f"no published figures: {tmp_path} holds no sources.yaml (an image or install without docs/reference/; "
            "$ATTNBENCH_REFERENCE names the folder)")
    assert published.absent(on(run.manifest, None)) is None and published.absent(None) is None


def test_a_file_of_the_runs_gpu_missing_from_the_folder_is_named_and_the_others_still_read(tmp_path, monkeypatch):
    run = shipped(H200_LONG)
    entries = yaml.safe_load((published.CHECKOUT / "sources.yaml").read_text())
    *kept, gone = [entry["file"] for entry in entries]  # gone: the training figures; kept: the sdpa ones
    for name in ["sources.yaml", *kept]:
        (tmp_path / name).write_bytes((published.CHECKOUT / name).read_bytes())
    monkeypatch.setenv(published.REFERENCE_ENV, str(tmp_path))
    note = published.absent(run.manifest)
    assert note == f"published figures of the NVIDIA H200 not read: {gone} missing in {tmp_path}"
    assert published.absent(on(run.manifest, "NVIDIA L4")) is None  # sources.yaml lists no L4 figure
    assert published.figures() and published.beside(run.cells, run.manifest)


def test_show_says_why_a_gpus_run_has_no_published_figure(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv(published.REFERENCE_ENV, str(tmp_path))
    result = in_process(capsys, "show", REPO / "examples" / "results" / "h200" / "hopper-long-20261202-110136")
    assert result.code == 0
    assert "published: measured / published" not in result.out
    assert f"no published figures: {tmp_path} holds no sources.yaml" in " ".join(result.out.split())


def test_show_prints_measured_over_published_for_the_shipped_h200_run(capsys):
    run = REPO / "examples" / "results" / "h200" / "hopper-long-20261202-110136"
    result = in_process(capsys, "show", run)
    assert result.code == 0
    table = result.out[result.out.index("published: measured / published"):]
    assert "cudnn_fp8" in table and "B1 T32768 N64 K8 H128 bfloat16 causal fwd" in table
    assert "cuDNN 9.19.1" in table


def test_the_published_table_names_the_power_policy_the_measured_side_ran_under(capsys):
    """A steady time reads behind a burst one at heavy shapes, which flips measured / published: show's (and the
    report's) published table says which the run's cells are; a run from before the choice says nothing of it."""
    from runner.report import published_title

    run = REPO / "examples" / "results" / "h200" / "llama3.1-70b-20261206-burst"
    out = " ".join(in_process(capsys, "show", run).out.split())
    assert "published: measured / published at the same shape, measured under power burst (below 1: faster" in out
    assert published_title(None) == ("published: measured / published at the same shape (below 1: faster than published; "
                                     "each published figure times the kernel its `published` column names, beside "
                                     "every variant of ours)")


def test_the_dashboard_finds_published_figures_in_a_frame_with_null_axes():
    import pandas as pd

    from dashboard.published import matched, table
    from dashboard.tables import SHAPE
    from runner.record import power_policy

    fp8 = {"fp8_verdict": "FP8 attention: f8 types in the compiled program", "fp8_in_hlo": True}  # as recorded
    cells = pd.DataFrame([{**params(**LLAMA, seq_len=s, causal=True).as_dict(), "run": "r", "experiment": "e",
                           "variant": v, "flops": 1e12, "bytes_min": 1e9, "latency_ms": 1.0, "backend": "cudnn",
                           **(fp8 if v == "cudnn_fp8" else {})}
                          for s in (4096, 8192) for v in
                          ("cudnn", "cudnn_fp8")])
    assert cells["window"].isna().all() and set(SHAPE) <= set(cells)
    h200 = {"r": shipped(H200_LONG).manifest}  # an H200's run
    found = matched(cells, h200)
    assert len(found) == 4 and found.loc[found["variant"] == "cudnn_fp8", "published_fp8"].all()
    timed = cells.assign(timer="device", median_s=1e-3)
    assert table(timed, h200)["published ms"].tolist() == pytest.approx([0.465, 0.322, 1.708, 1.141])
    # the power column: each run's policy (a steady time reads behind a burst one), record.NO_POLICY before the choice
    burst = {"r": shipped("h200/llama3.1-70b-20261206-burst").manifest}
    assert set(table(timed, burst)["power"]) == {"burst"}
    assert power_policy(h200["r"]) is None and set(table(timed, h200)["power"]) == {"none"}


def test_an_fp8_variant_that_ran_bf16_stands_beside_the_bf16_figure_named_not_fp8():
    """te_fp8's records say no f8 type reached its program (runner.leaderboard.fp8_mark): show's published table and
    the dashboard's set it beside cudnn-frontend's bf16 figure, as te's, named 'te_fp8 (not FP8)', where they set it
    beside the FP8 figure as a slow FP8 (measured / published 1.42); cudnn_fp8, whose FP8 ran, keeps the FP8 one."""
    from dashboard import published as dashboard_published
    from dashboard.data import RunCache, snapshot
    from stores import SHIPPED

    run = shipped("h200/llama3.1-70b-20261206-burst")
    rows = published.beside(run.cells, run.manifest)
    figure = {(r["variant"], r["shape"]): r["published ms"] for r in rows}
    shape = "B1 T4096 N64 K8 H128 bfloat16 causal fwd"
    assert figure["te_fp8 (not FP8)", shape] == figure["te", shape] > figure["cudnn_fp8", shape]
    assert not any(variant == "te_fp8" for variant, _ in figure)
    snap = snapshot(str(SHIPPED), RunCache())
    shown = dashboard_published.table(snap.cells((run.run_id,)), snap.manifests).set_index(["variant", "shape"])
    assert shown.loc[("te_fp8 (not FP8)", shape), "published ms"] == shown.loc[("te", shape), "published ms"]


def test_the_overlay_says_which_cudnn_each_side_ran():
    """Ours: the cuDNN of the worker that ran the cell's variant (the run's machine's where the manifest lists no
    workers) where the cell's backend is cuDNN's attention, "—" where it ran none; the publisher's: its CSV's
    cudnn_backend_version (91901: 9.19.1), "—" for FlashAttention-4's rows."""
    import pandas as pd

    from dashboard import published as dashboard_published
    from runner.store import read_run

    run = read_run(REPO / "examples" / "results" / "h200" / "hopper-long-20261202-110136")  # cuDNN 9.14.0, no workers
    cells = [c if c.variant != "te" else c.model_copy(update={"backend": "pallas_triton"}) for c in run.cells]
    rows = published.beside(cells, run.manifest)
    sides = {(r["variant"], r["our cuDNN"], r["published cuDNN"]) for r in rows}
    assert sides == {("cudnn", "9.14.0", "9.19.1"), ("cudnn_fp8", "9.14.0", "9.19.1"), ("te", "—", "9.19.1")}
    assert all(r["our cuDNN"] == "—" for r in published.beside(run.cells, None))  # no manifest, no version
    # TE's worker loads its own cuDNN: 9.14.0 here, beside the jax worker's (and the machine's) 9.19.0
    two = read_run(REPO / "examples" / "results" / "h200" / "hopper-long-warm-20261203-023241")
    assert {w: info.versions["cudnn"] for w, info in two.manifest.workers.items()} == {
        "jax": "9.19.0", "transformer_engine": "9.14.0"}
    rows = published.beside(two.cells, two.manifest)
    assert {(r["variant"], r["our cuDNN"]) for r in rows} == {("cudnn", "9.19.0"), ("cudnn_fp8", "9.19.0"),
                                                            ("te", "9.14.0")}
    training = {f.source.split(":")[1].split()[0]: f.cudnn for f in published.lookup(params(**{**LLAMA, "batch": 2},
                seq_len=16384, causal=True).as_dict(), False)}
    assert training == {"cuDNN": "9.27.0", "FlashAttention-4": None}
    frame = pd.DataFrame([{**params(**LLAMA, seq_len=4096, causal=True).as_dict(), "run": "r", "experiment": "e",
                           "variant": variant, "flops": 1e12, "bytes_min": 1e9, "latency_ms": 1.0, "backend": backend}
                          for variant, backend in (("cudnn", "cudnn"), ("xla", "xla"), ("te", "transformer_engine"))])
    shown = dashboard_published.table(frame.assign(timer="device", median_s=1e-3), {"r": two.manifest})
    assert shown[["variant", "our cuDNN", "published cuDNN"]].values.tolist() == [
        ["cudnn", "9.19.0", "9.19.1"], ["xla", "—", "9.19.1"], ["te", "9.14.0", "9.19.1"]]
    assert set(shown["power"]) == {"steady (after settling)"}  # the measured side's policy, beside each cell


@pytest.mark.slow
def test_show_prints_a_dense_decode_cell_beside_the_published_decode_figure(tmp_path, capsys):
    """serving.yaml's dense cell at decode_sweep's B1 / KV 2k shape, run by xla on a CPU: `show` sets no H200 figure
    beside it; its manifest naming an H200, `show` prints it beside cuDNN 9.27's published 0.006432 ms."""
    import json

    from helpers import attnbench

    done = attnbench("run", REPO / "specs" / "serving.yaml", "--only", "dense", "--variants", "xla", "--where",
                     "batch=1", "kv_seq_len=2048", "seq_len=1", "--out", tmp_path, "--run-id", "d",
                     "--compile-cache", "off")
    assert done.returncode == 0, done.stderr
    result = in_process(capsys, "show", str(tmp_path / "d"))
    assert result.code == 0, result.err
    assert "0.006432" not in result.out and "cuDNN 9.27.0 decode" not in result.out
    manifest = tmp_path / "d" / "manifest.json"
    facts = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**facts, "machine": {**facts["machine"], "gpu": {"name": "NVIDIA H200"}}}))
    result = in_process(capsys, "show", str(tmp_path / "d"))
    assert result.code == 0, result.err
    assert "0.006432" in result.out and "cuDNN 9.27.0 decode" in result.out


TRAINING = "cudnn-frontend-h200-attention-training-llama3.1.csv"


def test_the_training_figures_name_their_source_and_each_backend_is_a_series():
    entry = _entry(TRAINING)
    assert entry["commit"] in entry["url"] and entry["path"] in entry["url"] and "9.27.0" in entry["versions"]
    assert set(entry["series"]) == {"cudnn", "flash_attention_4"}
    rows = list(csv.DictReader(open(REFERENCE / TRAINING)))
    assert len(rows) == 88 and {r["batch_size"] for r in rows} == {"2"}


def test_every_training_row_gives_the_files_tflops_and_its_peak_is_the_mma_rate_at_a_clock():
    """The file's tflops from attnbench's FLOPs over its time (bwd rows: 2.5 x the forward's FLOPs, so fwd + bwd is
    attnbench's 3.5), and its peak_mma_tflops is runner.metrics.peak_mma_tflops at one clock for both types."""
    for row in csv.DictReader(open(REFERENCE / TRAINING)):
        p = params(batch=2, heads=64, kv_heads=8, head_dim=128, seq_len=int(row["q_seqlen"]),
                   causal=row["attn_mask"] == "top_left")
        work = metrics.flops(p) * (2.5 if row["profile_pass"] == "bwd" else 1)
        rounding = 5e-4 / float(row["time_ms"])
        assert work / float(row["time_ms"]) / 1e9 == pytest.approx(float(row["tflops"]), rel=2e-3 + rounding)
        data_type = "fp8" if row["data_type"] == "fp8" else "bfloat16"
        assert round(metrics.peak_mma_tflops("9.0", 132, data_type, 1980)) == float(row["peak_mma_tflops"])


def test_a_training_cell_finds_its_forward_its_backward_and_its_deterministic_backward():
    shape = dict(batch=2, heads=64, kv_heads=8, head_dim=128, seq_len=16384, causal=True, dtype="bfloat16")
    series = _entry(TRAINING)["series"]
    forward = {f.source: f for f in published.lookup(params(**shape).as_dict(), False)}
    assert forward[series["cudnn"]].median_s == pytest.approx(13.888e-3)
    assert forward[series["flash_attention_4"]].median_s == pytest.approx(12.527e-3)
    assert forward[series["cudnn"]].peak_tflops == 1071.0
    both = {f.source: f for f in published.lookup(params(**shape, pass_="fwd_bwd").as_dict(), False)}
    assert both[series["cudnn"]].median_s == pytest.approx((13.888 + 40.803) / 1e3)
    steady = {f.source: f for f in published.lookup(params(**shape, pass_="fwd_bwd", deterministic=True).as_dict(),
                                                    False)}
    assert steady[series["cudnn"]].median_s == pytest.approx((13.888 + 48.440) / 1e3)
    (fp8,) = published.lookup(params(**shape).as_dict(), True)
    assert fp8.median_s == pytest.approx(8.819e-3) and fp8.peak_tflops == 2141.0
    assert all("attention_training" not in f.source for f in published.lookup(params(**{**shape, "batch": 1})
                                                                                 .as_dict(), False))  # batch 1: 9.19.1


def test_the_mma_peak_follows_the_clock_and_knows_only_what_it_is_told():
    assert metrics.peak_mma_tflops("9.0", 132, "bfloat16", 1980) == pytest.approx(1070.5, abs=0.1)
    assert metrics.peak_mma_tflops("9.0", 132, "bfloat16", 1650) == pytest.approx(4096 * 132 * 1650 / 1e6)
    assert metrics.peak_mma_tflops("10.0", 148, "bfloat16", 1965) == pytest.approx(8192 * 148 * 1965 / 1e6)
    for unknown in (("9.0", None, "bfloat16", 1980), ("9.0", 132, "float32", 1980), (None, 132, "bfloat16", 1980),
                    ("9.0", 132, "bfloat16", None), ("10.0", 148, "fp8", 1965), ("9.0", 132, "bfloat16", float("nan"))):
        assert metrics.peak_mma_tflops(*unknown) is None
    # a row holds for the GPUs its source covers (runner.metrics.MMA_PER_CLOCK_PER_SM): not for an H20, whose sm90
    # tensor rate is cut, nor for an sm120 card but the RTX PRO 6000 (503.8 dense BF16 TFLOP/s at 188 SMs, 2617 MHz)
    assert metrics.peak_mma_tflops("9.0", 132, "bfloat16", 1980, "NVIDIA H200") == pytest.approx(1070.5, abs=0.1)
    assert metrics.peak_mma_tflops("9.0", 78, "bfloat16", 1980, "NVIDIA H20") is None
    pro = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    assert metrics.peak_mma_tflops("12.0", 188, "bfloat16", 2617, pro) == pytest.approx(503.8, abs=0.1)
    for other in ("NVIDIA GeForce RTX 5090", None):
        assert metrics.peak_mma_tflops("12.0", 170, "bfloat16", 2407, other) is None
    assert metrics.clock_peak_share(535.25, metrics.peak_mma_tflops("9.0", 132, "bfloat16", 1980)) == pytest.approx(
        50.0, abs=0.01)
    assert metrics.clock_peak_share(535.25, None) is None and metrics.clock_peak_share(float("nan"), 1070.5) is None


def test_show_and_the_frames_give_each_cell_its_share_of_the_mma_peak_at_its_own_clock(capsys):
    from runner import frames
    from runner.store import read_run

    folder = REPO / "examples" / "results" / "h200" / "hopper-long-burst-20261202"  # with NVML telemetry
    run = read_run(folder)
    table = frames.cells(run.cells, run.manifest.machine)
    for variant, per_clock in (("cudnn", 4096), ("cudnn_fp8", 8192)):  # FP8 reached these cells' programs
        timed = table[table["sm_clock_median_mhz"].notna() & (table["variant"] == variant)]
        assert len(timed)
        expected = 100 * timed["tflops"] / (per_clock * 132 * timed["sm_clock_median_mhz"] / 1e6)
        assert timed["pct_of_clock_peak"].tolist() == pytest.approx(expected.tolist())
    assert frames.cells(run.cells)["pct_of_clock_peak"].isna().all()  # no machine, no peak
    result = in_process(capsys, "show", folder)
    assert result.code == 0 and "% MMA@clock" in result.out


def test_the_dashboards_leaderboard_gives_the_winners_share_of_the_mma_peak_at_its_clock():
    import pandas as pd

    from dashboard import tables

    cells = pd.DataFrame([{**params(**LLAMA, seq_len=4096, causal=True).as_dict(), "run": "r", "experiment": "e",
                           "variant": variant, "status": "ok", "latency_ms": ms, "noise": 0.0, "backend": "cudnn",
                           "unsettled": False, "unconverged": False, "pct_of_clock_peak": share}
                          for variant, ms, share in (("cudnn", 1.0, 61.0), ("te", 1.5, 40.0))])
    board = tables.board(cells, tables.standings(cells), {})
    assert board["fastest"].tolist() == ["cudnn"] and board["% MMA@clock"].tolist() == ["61"]
    no_peak = cells.drop(columns="pct_of_clock_peak")
    assert "% MMA@clock" not in tables.board(no_peak, tables.standings(no_peak), {})


def on(manifest, name: str | None):
    """The manifest as if its run had been on another GPU (`name`), or on a CPU (None)."""
    machine = manifest.machine
    gpu = machine.gpu.model_copy(update={"name": name}) if name else None
    return manifest.model_copy(update={"machine": machine.model_copy(update={"gpu": gpu})})


def test_published_figures_stand_only_beside_cells_of_the_gpu_they_were_measured_on():
    """sources.yaml's `gpu` (NVIDIA H200) against the run's manifest's GPU name: an L4's run (cc 8.9) or a CPU's
    gets no H200 figure, in show's table and the dashboard's alike."""
    import pandas as pd

    from dashboard import published as dashboard_published

    run = shipped(H200_LONG)
    entries = yaml.safe_load((published.folder() / "sources.yaml").read_text())
    assert {e["gpu"] for e in entries} == {"NVIDIA H200"}
    assert all(f.gpu == "NVIDIA H200" for figures in published.figures().values() for f in figures)
    assert published.beside(run.cells, run.manifest)  # the H200's own run: beside its figures
    for elsewhere in (on(run.manifest, "NVIDIA L4"), on(run.manifest, None), None):
        assert published.beside(run.cells, elsewhere) == []
    frame = pd.DataFrame([{**params(**LLAMA, seq_len=4096, causal=True).as_dict(), "run": "r", "experiment": "e",
                           "variant": "cudnn", "flops": 1e12, "bytes_min": 1e9, "latency_ms": 1.0, "backend": "cudnn",
                           "timer": "device", "median_s": 1e-3}])
    assert len(dashboard_published.matched(frame, {"r": run.manifest})) == 1  # cuDNN 9.19.1 sdpa at batch 1
    for elsewhere in (on(run.manifest, "NVIDIA L4"), on(run.manifest, None)):
        assert dashboard_published.matched(frame, {"r": elsewhere}).empty
        assert dashboard_published.table(frame, {"r": elsewhere}).empty
    assert dashboard_published.matched(frame, {}).empty  # no manifest: no GPU known


def test_the_chart_hover_says_which_cudnn_each_side_ran_and_the_table_times_by_the_headline():
    """The published star's hover: the figure's cuDNN and each measured variant's there (9.19.0 beside 9.19.1 is two
    libraries as well as two runs); the table's measured ms is the record's headline timer's, as show prints it,
    whatever timer the dashboard rates by."""
    import pandas as pd
    import plotly.graph_objects as go

    from dashboard import published as dashboard_published

    two = shipped("h200/hopper-long-warm-20261203-023241")  # jax's cuDNN 9.19.0, TE's 9.14.0
    frame = pd.DataFrame([{**params(**LLAMA, seq_len=4096, causal=True).as_dict(), "run": "r", "experiment": "e",
                           "variant": variant, "flops": 1e12, "bytes_min": 1e9, "latency_ms": 5.0, "backend": backend,
                           "timer": "device", "median_s": 1e-3}
                          for variant, backend in (("cudnn", "cudnn"), ("xla", "xla"), ("te", "transformer_engine"))])
    fig = dashboard_published.draw(go.Figure(), frame, "seq_len", "latency_ms", {"r": two.manifest})
    hover = {t.name: t.customdata[0] for t in fig.data}
    sdpa = next(name for name in hover if "9.19.1" in name)
    assert hover[sdpa] == ("published: cuDNN 9.19.1 · ours: cudnn 9.19.0, te 9.14.0 · measured under power steady "
                           "(after settling)")
    assert all("%{customdata}" in t.hovertemplate for t in fig.data)
    shown = dashboard_published.table(frame, {"r": two.manifest})
    assert set(shown["measured ms"]) == {1.0} and set(shown["timer"]) == {"device"}  # latency_ms (5, wall) unused
