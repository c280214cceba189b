"""scripts/bench_runner.py: the profile of a run (phase shares, the GPU's idle time between cells) from its records."""

from __future__ import annotations

import pytest

from helpers import script
from runner.record import Window
from runner.store import read_run
from test_results import record


@pytest.fixture(scope="module")
def bench():
    return script("scripts/bench_runner.py")


def loaded(start: float, end: float):
    return record("xla", load=Window(start=start, end=end))


def test_idle_between_cells_is_the_gaps_between_their_load_windows_in_run_order(bench):
    cells = [loaded(103.0, 104.0), loaded(100.5, 101.0), loaded(101.25, 102.5)]  # stored out of order
    gpu = bench.gpu_idle(cells, Window(start=100.0, end=105.0))
    assert gpu["windows"] == 3 and gpu["loaded_s"] == pytest.approx(0.5 + 1.25 + 1.0)
    assert gpu["before_s"] == pytest.approx(0.5) and gpu["after_s"] == pytest.approx(1.0)
    assert gpu["between_s"] == pytest.approx(0.25 + 0.5)
    assert gpu["gap_median_s"] == pytest.approx(0.375) and gpu["gap_max_s"] == pytest.approx(0.5)


def test_runs_without_load_windows_say_so_rather_than_zero(bench):
    gpu = bench.gpu_idle([record("xla"), record("cudnn", "skipped")], Window(start=0.0, end=9.0))
    assert gpu["windows"] == 0 and gpu["between_s"] is None and gpu["loaded_s"] is None
    assert "—" in bench.profile([{"run_id": "old", "process_s": 9.0, "gpu": gpu, "shares": {}}])


def test_phase_shares_add_up_to_the_whole_process(bench):
    parts = bench.shares({"compile": 2.0, "device": 3.0}, in_cells_s=6.0, process_s=10.0)
    assert parts == pytest.approx({"compile": 0.2, "device": 0.3, "cells, other": 0.1, "outside cells": 0.4})


def test_the_profile_table_has_a_row_per_run_with_each_share(bench):
    gpu = bench.gpu_idle([loaded(1.0, 2.0), loaded(2.5, 3.0)], Window(start=0.0, end=4.0))
    rows = [{"run_id": "lab5-warm", "process_s": 4.0, "gpu": gpu, "shares": {"device": 0.25, "outside cells": 0.5}}]
    table = bench.profile(rows)
    assert "| lab5-warm | 4.0 | 1.5 | 1.0 | 0.5 | 500.0 | 500.0 | 1.0 | 25.0 | 50.0 |" in table


def test_a_specs_gpu_time_is_priced_from_measured_cells_of_its_worker_pass_and_power_class(bench, tmp_path):
    """Each cell a worker would measure costs the median of the measured cells of its key; declined cells cost
    nothing; a key never measured takes the nearest class of its worker and pass, and is counted as such."""
    from helpers import spec_data
    from runner.cells import expand
    from runner.machine import Device
    from runner.registry import load_all
    from runner.cells import run_class
    from runner.spec import parse_spec
    from test_results import manifest, write_run

    experiment = {"name": "e", "variants": ["xla", "naive", "cudnn"], "sweep": {"seq_len": [64, 4096, 16]}}
    spec = parse_spec(spec_data(experiment, defaults={"pass": "fwd"}), set(load_all()))
    shape = {c.params.seq_len: c.params for c in expand(spec)}
    assert run_class(shape[16]) < run_class(shape[64]) < run_class(shape[4096])
    measured = [record(name, params=shape[64], duration_s=s, worker="jax")
                for name, s in (("xla", 0.2), ("naive", 0.4))]
    measured += [record("xla", params=shape[4096], duration_s=2.0, worker="jax"),
                 record("cudnn", "skipped", params=shape[4096], duration_s=0.0)]  # declined: no worker, no cost
    run = bench.read_run(write_run(tmp_path, measured, manifest()))  # 60 s long, 2.6 s of it in cells
    [row] = bench.estimate([run], [spec], Device("cpu", "cpu", None))
    assert row["cells"] == 9 and row["measured_cells"] == 6  # cudnn declines on a CPU
    assert row["extrapolated"] == 2  # T = 16: no cell of its class ran; its nearest class is T = 64's
    assert row["cells_s"] == pytest.approx(2 * (0.3 + 2.0 + 0.3))
    assert row["overhead_s"] == pytest.approx(60 - 2.6)
    assert "| all | 9 | 6 | 2 | 5 | 57 | 1.0 |" in bench.estimate_table([row])


def test_the_estimate_prices_cells_in_the_run_order_and_power_classes_of_the_run(bench):
    """One owner: the estimate's cells are runner.run's plan in in_run_order, each priced in the class the run groups
    it in (its forward+backward twin's: a forward cell at T = 64 is class 5 on its own FLOPs, 6 beside its twin)."""
    from helpers import spec_data
    from runner import run
    from runner.cells import expand, power_class, run_class
    from runner.machine import Device
    from runner.registry import load_all
    from runner.spec import parse_spec

    spec = parse_spec(spec_data({"name": "fwd", "variants": ["xla", "cudnn"], "sweep": {"seq_len": [128, 64]}},
                                {"name": "train", "variants": ["xla"], "pass": "fwd_bwd", "seq_len": 64},
                                defaults={**spec_data()["defaults"], "pass": "fwd"}), set(load_all()))
    cpu, cells = Device("cpu", "cpu", None), expand(spec)
    short = next(c.params for c in cells if c.params.seq_len == 64 and c.params.pass_ == "fwd")
    assert power_class(short) == 5 and run_class(short) == 6
    ordered = [c for c in run.in_run_order(cells) if c.variant != "cudnn"]  # cudnn declines on a CPU
    assert bench.run_keys(cells, cpu) == [("jax", c.params.pass_, 6) for c in ordered]
    assert [c.params.pass_ for c in ordered] == ["fwd", "fwd_bwd", "fwd"]  # T = 128, then T = 64's twin first


def test_the_machine_step_says_its_seconds_and_whether_the_ceilings_were_measured_or_reused(bench):
    from runner.record import CeilingsOrigin, Machine, WorkerInfo
    from test_results import manifest

    def run(reused: bool | None):
        origin = CeilingsOrigin(reused=reused, run_id="a", measured_at="2026-12-06T00:00:00") if reused is not None \
            else None
        machine = Machine(host="h", platform="gpu", device_kind="NVIDIA H200", device_count=1, ceilings_origin=origin)
        workers = {"jax": WorkerInfo(start_s={"backend": 1.0, "machine": 4.04 if not reused else 0.02}),
                   "transformer_engine": WorkerInfo(start_s={"backend": 1.0})}
        return manifest(machine=machine, workers=workers)

    assert [bench.machine_step(run(r)) for r in (False, True, None)] == ["4.0 measured", "0.0 reused", "4.0"]
    row = {"run_id": "warm", "process_s": 9.0, "cells": 3, "per_cell_s": 3.0, "in_cells_s": 6.0, "cached": 3,
           "shared": 0, "phases": {}, "worker_start_s": {"jax": 1.0}, "machine": "0.0 reused"}
    assert "| warm | 9.0 | 3 | 3.00 | 3.0 | jax 1.0 | 0.0 reused | 3 | 0 |" in bench.table([row])


SHIPPED = "examples/results/h200/decode-20261202"
UNPRICED = "examples/results/h200/lab5-20261202-110556"  # stored before a cell named its worker: none is priced


@pytest.mark.parametrize("args, problem", [
    (["--estimate", "/nowhere", "--specs", "specs/smoke.yaml"], "--estimate /nowhere: /nowhere/manifest.json: missing"),
    (["--estimate", SHIPPED, "--specs", "BROKEN"], "--specs: BROKEN:2:1: not valid YAML"),
    (["--estimate", SHIPPED, "--specs", "SCHEMA"], "--specs: SCHEMA: experiments[0].batch: must be > 0"),
    (["--estimate", SHIPPED], "--estimate prices the specs given by --specs SPEC...: give at least one"),
    (["--compare", "/nowhere", SHIPPED], "--compare /nowhere: /nowhere/manifest.json: missing"),
    (["--compare", SHIPPED, "examples/results/h200/lab5-20261202-104743"],
     "--compare: decode-20261202 and lab5-20261202-104743 have no cell timed"),
    (["--prices", "TRUNCATED"], "--prices TRUNCATED: TRUNCATED/cells.jsonl:1: not valid JSON"),
    (["--estimate", UNPRICED, "--specs", "specs/smoke.yaml"], f"--estimate: no measured cell in {UNPRICED}"),
    (["--prices", UNPRICED], f"--prices: no measured cell in {UNPRICED}"),
    ([], "give a SPEC to run, or --compare, --estimate or --prices"),
    (["NOSPEC", "--out", "OUT"], "NOSPEC: no such file"),
    (["specs/smoke.yaml", "--root", "/nowhere"],
     "--root /nowhere: not an attnbench checkout (it has no runner/__main__.py)"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, problem):
    from helpers import REPO
    import shutil
    import subprocess
    import sys

    (tmp_path / "broken.yaml").write_text("name: [\n")
    (tmp_path / "schema.yaml").write_text("name: x\nexperiments: [{name: a, variants: [xla], batch: -1}]\n")
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    shutil.copy(REPO / SHIPPED / "manifest.json", truncated)
    (truncated / "cells.jsonl").write_bytes((REPO / SHIPPED / "cells.jsonl").read_bytes()[:200])  # a killed copy
    names = {"BROKEN": tmp_path / "broken.yaml", "SCHEMA": tmp_path / "schema.yaml", "TRUNCATED": truncated,
             "NOSPEC": tmp_path / "nospec.yaml", "OUT": tmp_path / "out"}
    done = subprocess.run([sys.executable, "scripts/bench_runner.py", *(str(names.get(a, a)) for a in args)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    for name, path in names.items():
        problem = problem.replace(name, str(path))
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(f"bench-runner: error: {problem}"), done.stderr


def test_the_benchs_counts_are_shows_compile_cache_and_took_counts(bench):
    """lab5's cold run of 12-02: the bench's programs loaded and seconds in cells and outside them are the counts
    behind show's 'compile cache partly warm: 11 of 66 programs loaded' and 'took … s in cells · … s wall'
    (runner.report), where the bench counted each of its own."""
    from runner import report
    from stores import SHIPPED

    run_id = "lab5-cold-20261202-182308"
    run = read_run(SHIPPED / "h200" / run_id)
    row = bench.summary(SHIPPED / "h200", run_id, Window(start=0.0, end=100.0))
    in_cells, wall = report.in_cells_s(run.cells), report.wall_s(run.manifest)
    assert report.cache_of(run.cells) == f"partly warm: {row['cached']} of 66 programs loaded"
    by_status = ", ".join(f"{n} {status}" for status, n in sorted(row["statuses"].items()))
    assert report.summary_line(run.cells) == f"76 cells: {by_status}" == "76 cells: 75 ok, 1 skipped"
    assert report.took(run).startswith(f"{row['in_cells_s']:,.0f} s in cells · {wall:,.0f} s wall")
    assert bench.overheads([run]) == pytest.approx([wall - in_cells]) and wall > in_cells


def test_runs_over_the_benchs_out_lists_each_of_its_runs_once(tmp_path):
    """The bench's spool is a folder of its own: in --out, `runs` found each run there a second time."""
    import subprocess
    import sys

    from conftest import shapes_spec
    from helpers import REPO, attnbench, environment

    spec, out, temporary = shapes_spec(tmp_path, [8]), tmp_path / "out", tmp_path / "tmp"
    temporary.mkdir()
    done = subprocess.run([sys.executable, "scripts/bench_runner.py", str(spec), "--out", str(out), "--budget", "0.05"],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=environment(TMPDIR=str(temporary)))
    assert done.returncode == 0, done.stderr[-2000:]
    listed = attnbench("runs", "--out", out).stdout
    assert [listed.count(f"shapes-{label}-") for label in ("cold", "warm")] == [1, 1], listed


def test_a_run_the_runner_refuses_ends_the_bench_in_one_line_quoting_the_runners(tmp_path):
    """A spec the runner (of --root, which may be another checkout) refuses: its own error line, after the run id."""
    import re
    import subprocess
    import sys

    from helpers import REPO, environment

    spec = tmp_path / "broken.yaml"
    spec.write_text("name: [\n")
    done = subprocess.run([sys.executable, "scripts/bench_runner.py", str(spec), "--out", str(tmp_path / "out")],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env=environment(TMPDIR=str(tmp_path)))
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert re.fullmatch(rf"bench-runner: broken-cold-\d{{8}}-\d{{6}}: attnbench run exited 2: error: {spec}:2:1: "
                        r"not valid YAML \(.*\)\n", done.stderr), done.stderr
