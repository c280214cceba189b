"""scripts/steady_crosscheck.py on a CPU: the rows an earlier call wrote are kept, a row to measure without a GPU is
refused in one line, at once, and one whose cell a run would skip on the GPU is said and left out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import REPO

SCRIPT = REPO / "scripts" / "steady_crosscheck.py"
ROWS = 20  # its default rows: cudnn and cudnn_fp8 forward at 4k-32k, cudnn fwd_bwd at 8k and 32k, both policies


def crosscheck(out, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, str(SCRIPT), str(out), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=env)


def held(rows: str, within: bool = True) -> list[dict]:
    """Rows as an earlier call wrote them (the fields that name a row, and its verdict)."""
    return [{"variant": v, "pass": p, "seq_len": int(t), "policy": policy, "within_3pct": within}
            for v, p, t, policy in (row.split(":") for row in rows.split(","))]


def test_without_a_gpu_the_rows_to_measure_are_refused_in_one_line(tmp_path):
    done = crosscheck(tmp_path / "out.json")
    assert (done.returncode, done.stderr) == (
        1, f"steady_crosscheck: measuring needs an NVIDIA GPU (rows to measure: {ROWS}); JAX's device here is cpu\n")
    assert not (tmp_path / "out.json").exists()


def test_the_rows_an_earlier_call_wrote_are_kept_and_not_measured_again(tmp_path):
    out = tmp_path / "out.json"
    out.write_text(json.dumps(held("cudnn:fwd:4096:burst,cudnn:fwd:8192:burst")))
    done = crosscheck(out, "--rows", "cudnn:fwd:4096:burst,cudnn:fwd:8192:burst,cudnn:fwd:8192:steady")
    assert done.stderr == "steady_crosscheck: measuring needs an NVIDIA GPU (rows to measure: 1); JAX's device here is cpu\n"
    out.write_text(json.dumps(held("cudnn:fwd:8192:steady", within=False) + held("cudnn:fwd:4096:burst")))
    done = crosscheck(out, "--rows", "cudnn:fwd:4096:burst,cudnn:fwd:8192:steady")  # all held: no GPU needed
    assert (done.returncode, done.stdout) == (1, "1 of 2 rows within 3 %\n")
    assert len(json.loads(out.read_text())) == 2


def test_a_row_whose_cell_a_run_would_skip_on_this_gpu_is_said_and_left_out(tmp_path, capsys, monkeypatch):
    """A GPU of 1 GiB cannot hold the anchor's inputs and reference: tests/crosscheck.py declines the row as the run's
    plan would, before anything compiles, and the script writes no row for it."""
    import crosscheck
    from helpers import script
    from runner.machine import Device

    monkeypatch.setattr(crosscheck, "current_device", lambda: Device("gpu", "a small GPU", 9.0, 1 << 30))
    done, out = [], tmp_path / "out.json"
    script("scripts/steady_crosscheck.py").measure([("cudnn", "fwd", 4096, "burst")], done, out, False)
    assert done == [] and not out.exists()
    assert capsys.readouterr().out == "skipped, as a run would skip it here: anchor/cudnn B1 T4096 N64 K8 H128 " \
        "bfloat16 causal fwd: inputs and float32 reference need 2.2 GiB; the device has 1.0 GiB\n"


def test_each_row_is_written_beside_out_and_renamed_over_it(tmp_path, monkeypatch):
    """OUT.json is replaced whole after each row, never rewritten in place: a deadline's TERM during a write leaves the
    last whole file (a torn one ended the next call's reading in a traceback); no temporary file is left."""
    import crosscheck
    from helpers import script

    row = {"variant": "cudnn", "pass": "fwd", "seq_len": 4096, "policy": "burst", "runner_tflops": 500.0,
           "direct_tflops": 490.0, "ratio": 500 / 490, "power": None}
    monkeypatch.setattr(crosscheck, "idle", lambda: None)
    monkeypatch.setattr(crosscheck, "crosscheck", lambda *args, **kwargs: dict(row))
    out = tmp_path / "out.json"
    out.write_text("[]")
    before = out.stat().st_ino
    script("scripts/steady_crosscheck.py").measure([("cudnn", "fwd", 4096, "burst")], [], out, False)
    assert json.loads(out.read_text()) == [row | {"within_3pct": True}]
    assert out.stat().st_ino != before and [p.name for p in tmp_path.iterdir()] == ["out.json"]
