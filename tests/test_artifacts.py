"""`attnbench report` (runner/artifacts.py, runner/figures.py): the shipped H200 runs as one self-contained HTML page,
PNG figures and a markdown summary; what a 3,000-cell run's report weighs; `compare --report` as the nightly runs it."""

from __future__ import annotations

import html
import re
import shutil
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from helpers import REPO, attnbench, in_process
from runner.published import FIGURE_IS
from runner.store import open_store
from stores import CPU_LAB5, H200_LONG, copy_run, generate, shipped, write_run

H200 = REPO / "examples" / "results" / "h200"
LAB5_TE = "lab5-20261202-110556"  # its previous run in the folder: lab5-20261202-104743 (the same spec identity)
HOPPER = "hopper-long-warm-20261203-023241"  # its previous run in the folder: hopper-long-warm-20261202 (not its twin)
BEFORE = "lab5-night-before"  # LAB5_TE a day earlier, its first three ok cells twice as fast (nights below)
# What a 3,000-cell run's report may weigh: its page (every cell in a table, at most artifacts.MAX_CHARTS charts
# inline) and all its files. Measured at 3,000 cells (docs/benchmarks.md, "attnbench report"): 2.0 MiB and 2.9 MiB.
PAGE_LIMIT_MIB, FILES_LIMIT_MIB = 3.0, 4.5


def nights(store: Path) -> Path:
    """LAB5_TE in `store` after BEFORE: a regression of three cells, as two nights of the CronJob would leave it."""
    template = shipped("h200/" + LAB5_TE)
    faster = [c.key for c in template.cells if c.status == "ok"][:3]
    manifest, cells = copy_run(template, BEFORE, datetime.fromisoformat(template.manifest.started_at) -
                               timedelta(days=1), factor=lambda c: 0.5 if c.key in faster else 1.0)
    write_run(store / BEFORE, manifest, cells)
    shutil.copytree(H200 / LAB5_TE, store / LAB5_TE)
    return store


def report(capsys, tmp_path, *runs, out=None):
    args = ["report", *runs, "--output", tmp_path / "report", *(["--out", out] if out else [])]
    return in_process(capsys, *args)


def test_the_shipped_runs_make_a_page_with_every_chart_inline_and_their_comparison(capsys, tmp_path):
    done = report(capsys, tmp_path, H200 / LAB5_TE, H200 / HOPPER)
    assert done.code == 0, done.err
    page = (tmp_path / "report" / "index.html").read_text()
    figures = sorted(p.name for p in (tmp_path / "report" / "figures").iterdir())
    assert figures == sorted(f"{run}-{experiment}.png" for run, experiment in [
        (LAB5_TE, "seq-len"), (LAB5_TE, "batch"), (LAB5_TE, "gqa"), (LAB5_TE, "te-causal"),
        (HOPPER, "fwd"), (HOPPER, "fwd-bwd")])
    assert page.count("<figure class='chart'") == len(figures) == page.count("src='data:image/png;base64,")
    assert not re.search(r"""(src|href)=['"](?!data:|#)""", page), "the page refers to nothing outside itself"
    assert "Against lab5-20261202-104743: REGRESSION: 13 cells slower" in page  # LAB5_TE's, of another spec hash
    assert "· differs: version cudnn 9.19.0 → 9.14.0; version transformer_engine — → 2.20.2" in page
    assert "REGRESSION: 1 cell slower, 0 ok in A and not in B (24 cells in both" in page  # HOPPER's
    hopper = page[page.index(f"<section id='{HOPPER}'>"):]  # its verdict first, then its charts, then the detail
    assert hopper.index("REGRESSION") < hopper.index("<figure") < hopper.index("<caption>Slower (regressions)")
    assert "<caption>Leaderboard" in page and page.count("<section id=") == 2 and "GPU NVIDIA H200" in page
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert all(f"](figures/{name})" in summary for name in figures)
    assert "(against hopper-long-warm-20261202)" in summary  # the night before, not its cold twin of 83 s before
    sitting = "A started 18 min before B, in the same sitting, not on an earlier night"  # LAB5_TE's: no earlier night
    assert f"{sitting}** (against lab5-20261202-104743" in summary and f"{sitting}</p>" in page
    assert summary.count("in the same sitting") == 1
    assert f"report: {tmp_path / 'report' / 'index.html'}" in done.err


def test_the_report_gives_a_run_the_tables_show_gives_it_beside_its_cells(capsys, tmp_path):
    """The published figures at hopper-long's shapes and the CPU serving fixture's cost of paging and new tokens (no
    published figure: those are an H200's), on the page and in summary.md, under the run they belong to (runner.report.beside_tables, as `show`)."""
    serving = REPO / "tests" / "fixtures" / "serving-cpu" / "serving-cpu-20261206"
    done = report(capsys, tmp_path, H200 / HOPPER, serving)
    assert done.code == 0, done.err
    page = (tmp_path / "report" / "index.html").read_text()
    sections = {m[1]: m[2] for m in re.finditer(r"<section id='([^']+)'>(.*?)</section>", page, re.S)}
    hopper, served = sections[HOPPER], sections["serving-cpu-20261206"]
    assert "<caption>Published: measured / published at the same shape" in hopper
    assert "<caption>Serving: each cell" not in hopper
    assert "<caption>Serving: each cell beside the same shape without its paging" in served
    assert "<caption>Published" not in served  # a CPU's run: no H200 figure beside it (runner.published.on_gpu)
    assert served.count("<td>paging</td>") == 8 and served.count("<td>new tokens</td>") == 8
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "### Published: measured / published" in summary and "### Serving: each cell beside" in summary
    runs = {part.split("\n")[0]: part for part in summary.split("\n## ")[1:]}
    assert "### Published" in runs[HOPPER] and "### Serving" in runs["serving-cpu-20261206"]
    assert "### Serving" not in runs[HOPPER]


def test_the_report_says_why_a_gpus_run_has_no_published_figure(capsys, tmp_path, monkeypatch):
    """Made where the published figures' folder holds none (an image built without docs/reference/): the run's
    published section is that one line, on the page and in summary.md (runner.published.absent, as `show`)."""
    from runner import published

    monkeypatch.setenv(published.REFERENCE_ENV, str(tmp_path / "none"))
    done = report(capsys, tmp_path, H200 / HOPPER)
    assert done.code == 0, done.err
    note = published.absent(shipped(f"h200/{HOPPER}").manifest)
    assert note.startswith("no published figures: ")
    page = (tmp_path / "report" / "index.html").read_text()
    assert "<h3>Published: measured / published at the same shape, measured under power steady (after settling) " \
           f"(below 1: faster than published; {html.escape(FIGURE_IS, quote=True)})</h3><p class='meta'>" \
           f"{html.escape(note, quote=True)}</p>" in page
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert ("### Published: measured / published at the same shape, measured under power steady (after settling) "
            f"(below 1: faster than published; {FIGURE_IS})\n\n{note}\n") in summary


def test_under_its_verdict_a_run_says_which_variant_is_fastest_and_where_no_shape_had_two_nothing(capsys, tmp_path):
    """runner.leaderboard.winners' line (the dashboard overview's), on the page and in summary.md, before the charts
    and the leaderboard; a run whose every shape ran one correct variant has no leaderboard and no such line."""
    done = report(capsys, tmp_path, H200 / LAB5_TE)
    assert done.code == 0, done.err
    page = (tmp_path / "report" / "index.html").read_text()
    line = ("<p class='fastest'><strong>cudnn</strong> fastest at 17, <strong>xla</strong> at 1 of "
            "18 shapes; auto within 5 % of the fastest at 1 of 2 (every shape: the leaderboard below).</p>")
    assert page.index("REGRESSION") < page.index(line) < page.index("<h3>Charts") < page.index("<caption>Leaderboard")
    summary = (tmp_path / "report" / "summary.md").read_text()
    said = "\n**cudnn** fastest at 17, **xla** at 1 of 18 shapes"
    assert summary.index("REGRESSION") < summary.index(said) < summary.index("### Leaderboard")

    started = datetime.fromisoformat("2026-12-03T00:00:00+00:00")
    manifest, cells = copy_run(shipped("h200/" + LAB5_TE), "lab5-xla-alone", started)
    write_run(tmp_path / "store" / "lab5-xla-alone", manifest, [c for c in cells if c.variant == "xla"])
    alone = report(capsys, tmp_path / "alone", tmp_path / "store" / "lab5-xla-alone")
    assert alone.code == 0, alone.err
    page = (tmp_path / "alone" / "report" / "index.html").read_text()
    assert "<figure class='chart'" in page and "fastest at" not in page and "<caption>Leaderboard" not in page
    assert "fastest at" not in (tmp_path / "alone" / "report" / "summary.md").read_text()


def test_a_cpu_runs_report_says_it_had_no_gpu_and_names_each_chart_once(capsys, tmp_path):
    """'no GPU (cpu)', where the facts said 'GPU cpu'; a chart's title, subtitle and runs are drawn in its PNG alone,
    where a caption under it said them again."""
    done = report(capsys, tmp_path, REPO / "examples" / "results" / CPU_LAB5)
    assert done.code == 0, done.err
    page = (tmp_path / "report" / "index.html").read_text()
    assert "no GPU (cpu)" in page and "GPU cpu" not in page
    assert page.count("<figure class='chart'") == 4 and "<figcaption" not in page
    assert "\n- no GPU (cpu)\n" in (tmp_path / "report" / "summary.md").read_text()


def test_a_run_without_an_earlier_one_says_so(capsys, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(H200 / HOPPER, store / HOPPER)
    done = report(capsys, tmp_path, HOPPER, out=store)
    assert done.code == 0, done.err
    assert "No earlier run of this spec identity, GPU, power policy and timer" in (
        tmp_path / "report" / "index.html").read_text()


def test_a_png_is_the_same_bytes_each_time(capsys, tmp_path):
    from runner import artifacts, figures
    from runner.store import read_run

    chart = artifacts.charts_of(read_run(H200 / HOPPER))[0]
    assert figures.draw(chart) == figures.draw(chart) and figures.draw(chart).startswith(b"\x89PNG")


def test_a_3000_cell_run_stays_under_its_stated_size(capsys, tmp_path):
    (run,) = generate(tmp_path / "store", runs=1, cells_per_run=3000, templates=("h200/" + HOPPER,))
    folder = tmp_path / "store" / "h200" / run
    done = report(capsys, tmp_path, folder)
    assert done.code == 0, done.err
    files = [p for p in (tmp_path / "report").rglob("*") if p.is_file()]
    page = (tmp_path / "report" / "index.html").stat().st_size / 2**20
    total = sum(p.stat().st_size for p in files) / 2**20
    print(f"3,000 cells: index.html {page:.2f} MiB, {len(files)} files {total:.2f} MiB")
    assert page < PAGE_LIMIT_MIB and total < FILES_LIMIT_MIB
    assert (tmp_path / "report" / "index.html").read_text().count("<tr") > 3000  # every cell, in its table


@pytest.mark.parametrize("args, message", [
    (["report", "no-such-run", "--output", "OUT"], "no-such-run: no such run folder"),
    (["report", "examples/results/h200", "--output", "OUT"], "manifest.json: missing (is"),
])
def test_a_run_that_is_not_there_is_one_line(capsys, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(REPO)
    done = in_process(capsys, *[a.replace("OUT", str(tmp_path / "r")) for a in args])
    assert done.code == 2 and len(done.errors) == 1 and message in done.err, done.err
    assert not (tmp_path / "r").exists()


def test_compare_writes_the_report_and_names_it(capsys, tmp_path):
    store = nights(tmp_path / "store")
    done = in_process(capsys, "compare", store / LAB5_TE, "--against", "previous", "--format", "markdown",
                      "--report", tmp_path / "night")
    assert done.code == 1  # the regression is still the gate's verdict
    page = (tmp_path / "night" / "index.html").read_text()
    assert "REGRESSION: 3 cells slower" in page and "REGRESSION: 3 cells slower" in done.out
    assert f"report: {tmp_path / 'night' / 'index.html'}" in done.err
    assert "report:" not in done.out  # stdout holds the markdown alone


def test_compare_reports_page_names_cells_timed_by_different_timers_and_cells_that_ran_another_kernel(capsys,
                                                                                                        tmp_path):
    """The night before timed a cell by wall alone (its device timer failed) and ran another kernel in another: the
    page's verdict counts both and its tables name them, as the CLI's do."""
    store = nights(tmp_path / "store")
    before = open_store(str(store)).read(BEFORE)
    ok = [c for c in before.cells if c.status == "ok" and c.kernels]
    wall, other = ok[5], ok[6]

    def changed(c):
        if c.key == wall.key:
            kept = [t for t in c.timings if t.timer == "wall"]
            return c.model_copy(update={"timings": kept, "timer": "wall", "median_s": kept[0].median_s})
        return c.model_copy(update={"backend": "another"}) if c.key == other.key else c
    write_run(store / BEFORE, before.manifest, [changed(c) for c in before.cells])
    done = in_process(capsys, "compare", store / LAB5_TE, "--against", "previous", "--format", "markdown",
                      "--report", tmp_path / "night")
    page = (tmp_path / "night" / "index.html").read_text()
    said = "of those, 1 cell ran another kernel in B; 1 cell timed by different timers (not compared)"
    assert done.code == 1 and said in done.out and said in page
    timers = page.split("Timed by different timers")[1].split("</table>")[0]
    kernels = page.split("Ran another kernel in B")[1].split("</table>")[0]
    assert wall.key in timers and other.key not in timers and other.key in kernels and wall.key not in kernels
    assert f"backend another → {other.backend}" in kernels


def test_a_report_beside_its_run_in_the_store_leaves_the_run_as_it_read(capsys, tmp_path):
    from runner.store import open_store

    store = nights(tmp_path / "store")
    before = open_store(str(store)).read(LAB5_TE)
    done = in_process(capsys, "compare", LAB5_TE, "--against", "previous", "--out", store,
                      "--report", store / LAB5_TE / "report")  # as the nightly CronJob writes it
    assert done.code == 1 and (store / LAB5_TE / "report" / "index.html").is_file()
    after = open_store(str(store)).read(LAB5_TE)
    assert (after.cells, after.problems) == (before.cells, []) and open_store(str(store)).runs() == sorted(
        [BEFORE, LAB5_TE])


def test_without_matplotlib_the_report_says_which_extra_to_install(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails, as where it is not installed
    done = report(capsys, tmp_path, H200 / HOPPER)
    assert done.code == 1 and done.errors[-1] == "error: report needs matplotlib: pip install -e '.[report]'"
    assert done.errors[:-1] == ["--against previous: passed over hopper-long-cold-20261203-023241: started 83 s "
                                "before it, in its sitting: an earlier sitting's run is taken"]
    assert not (tmp_path / "report").exists()  # nothing half-written


def test_a_report_the_store_refuses_leaves_the_gates_verdict(capsys, tmp_path):
    store = nights(tmp_path / "store")
    (tmp_path / "file").write_text("not a folder")
    done = in_process(capsys, "compare", store / LAB5_TE, "--against", "previous", "--format", "markdown",
                      "--report", tmp_path / "file" / "report")
    assert done.code == 1 and "REGRESSION: 3 cells slower" in done.out  # the regression, not exit 2
    assert done.errors[-1].startswith(f"warning: --report {tmp_path / 'file' / 'report'}: ")
    assert done.errors[-1].endswith("; the comparison stands")


NO_MATPLOTLIB = ("warning: --report {}: not written: --report needs matplotlib: pip install -e '.[report]'; the "
                 "comparison stands")


def test_compare_without_matplotlib_keeps_the_gates_verdict_and_says_which_extra_to_install(capsys, tmp_path,
                                                                                           monkeypatch):
    shim = tmp_path / "shim"  # import matplotlib fails as in an install without the report extra
    shim.mkdir()
    (shim / "matplotlib.py").write_text("raise ModuleNotFoundError('no matplotlib here', name='matplotlib')")
    same = attnbench("compare", H200 / HOPPER, H200 / HOPPER, "--report", tmp_path / "same", PYTHONPATH=str(shim))
    assert (same.returncode, same.stderr.splitlines()) == (0, [NO_MATPLOTLIB.format(tmp_path / "same")])
    assert "no regression" in same.stdout.lower() and not (tmp_path / "same").exists()
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    store = nights(tmp_path / "store")
    slower = in_process(capsys, "compare", store / LAB5_TE, "--against", "previous", "--report", tmp_path / "night")
    assert slower.code == 1 and slower.errors[-1] == NO_MATPLOTLIB.format(tmp_path / "night")  # still the regression


def test_the_pages_leaderboard_names_a_legacy_variant_so_and_says_what_replaces_it():
    from runner.artifacts import leaderboard_html, standings_of

    html = leaderboard_html(standings_of(shipped(H200_LONG)), {"te": "deprecated; tokamax replaces it"})
    assert "<td>te (legacy)</td>" in html and "<p class='meta'>te (legacy): deprecated; tokamax replaces it</p>" in html


@pytest.mark.slow
def test_a_report_in_a_bucket_is_served_as_a_page(capsys, tmp_path, emulator):
    from conftest import BUCKET

    done = in_process(capsys, "report", H200 / HOPPER, "--output", f"gs://{BUCKET}/results/{HOPPER}/report")
    assert done.code == 0, done.err
    served = {b.name: b.content_type for b in emulator.bucket().list_blobs(prefix=f"results/{HOPPER}/report/")}
    prefix = f"results/{HOPPER}/report/"
    assert served[prefix + "index.html"].startswith("text/html") and served[prefix + "summary.md"].startswith(
        "text/markdown")
    assert {served[n] for n in served if n.endswith(".png")} == {"image/png"} and len(served) == 4
    assert "<figure class='chart'" in emulator.text(prefix + "index.html")


COMMITTED = sorted(p.parent for folder in ("examples/results", "docs/evidence", "tests/fixtures")
                   for p in (REPO / folder).rglob("manifest.json"))


def test_every_committed_run_charts_only_numbers_along_x():
    from runner import artifacts
    from runner.store import LocalStore

    for folder in COMMITTED:
        run = LocalStore(folder.parent).read(folder.name)
        for chart in artifacts.charts_of(run):
            assert all(isinstance(x, (int, float)) for s in chart.series for x, _ in s.points), (folder, chart.name)


@pytest.mark.slow
def test_every_committed_run_reports(capsys, tmp_path):
    done = report(capsys, tmp_path, *COMMITTED)
    assert done.code == 0, done.err
    assert len(COMMITTED) > 50 and (tmp_path / "report" / "index.html").stat().st_size > 0


def small_training_spec(path: Path) -> Path:
    """specs/training.yaml's small experiments (those naive runs: every axis a CPU takes) at a CPU's size, their
    sweeps as the spec has them (window [null, W], documents, pass, fill, bias, soft cap)."""
    import yaml

    spec = yaml.safe_load((REPO / "specs" / "training.yaml").read_text())
    small = {"seq_len": 32, "heads": 2, "kv_heads": 1, "head_dim": 16, "dtype": "float32"}
    spec["experiments"] = [{**e, **small, **({"head_dim": 24, "v_head_dim": 16} if "v_head_dim" in e else {}),
                            "variants": [v for v in e["variants"] if v in ("naive", "xla")],
                            "sweep": {k: [8 if v == 128 and k == "window" else v for v in vs]
                                      for k, vs in e.get("sweep", {}).items()}}
                           for e in spec["experiments"] if "naive" in e["variants"]]
    spec["timing"] = {"warmup": 1, "min_samples": 3, "max_samples": 3, "budget_s": 0.1, "wall_max_samples": 3,
                      "wall_budget_s": 0.05}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.slow
def test_a_cpu_run_of_the_training_specs_small_experiments_reports_and_compares(capsys, tmp_path):
    spec, out = small_training_spec(tmp_path / "training-small.yaml"), tmp_path / "out"
    for run_id in ("train-a", "train-b"):
        ran = in_process(capsys, "run", spec, "--out", out, "--run-id", run_id, "--spool", tmp_path / "spool")
        assert ran.code == 0, ran.err
    done = report(capsys, tmp_path, "train-a", out=out)
    assert done.code == 0, done.err
    assert "packed-small" in (tmp_path / "report" / "index.html").read_text()
    compared = in_process(capsys, "compare", "train-a", "train-b", "--out", out, "--report", tmp_path / "compared")
    assert compared.code in (0, 1) and "internal error" not in compared.err, compared.err


def test_the_pages_cell_table_reads_a_swept_axis_as_show_does():
    from runner.artifacts import cells_html
    from test_results import record

    from helpers import params

    cells = [record(params=params(seq_len=8, causal=True, window=w, deterministic=d, pass_="fwd_bwd"))
             for w in (None, 4) for d in (False, True)]
    page = cells_html("e", cells, None)
    assert "<td>no window</td>" in page and "<td>yes</td>" in page and "None" not in page and "True" not in page


def test_the_pages_cell_tables_hold_no_column_only_a_gpu_fills_on_a_cpu_run():
    """A CPU run's page has no % copy or SM MHz column of dashes, as show prints it (report.measurement_columns);
    a GPU's clock shows SM MHz."""
    from runner.artifacts import cells_html
    from stores import CPU_LAB5, H200_LONG, shipped, telemetry

    page = "".join(cells_html("e", [cell], None) for cell in shipped(CPU_LAB5).cells)
    assert "<th>GB/s</th>" in page
    assert [h for h in ("% copy", "SM MHz", "% MMA@clock") if f"<th>{h}</th>" in page] == []
    assert "<th>SM MHz</th>" in cells_html("e", [telemetry(shipped(H200_LONG).cells[0])], None)


def test_the_pages_cell_tables_have_shows_columns_and_a_gpu_without_a_cited_mma_rate_says_so(tmp_path):
    """Issue 37: the report's cell tables had no % MMA@clock, even for an H200 run whose show tables have it
    (report.measurement_columns without the run's machine): each table's columns and rows are show's
    (report.experiment_grid), and on a GPU with no cited MMA rate the line show prints stands under it."""
    from runner import metrics
    from runner.artifacts import by_experiment, cells_html
    from runner.report import experiment_grid
    from stores import H200_WARM, relabelled

    run = shipped(H200_WARM)
    for name, cells in by_experiment(run.cells).items():
        grid, page = experiment_grid(name, cells, run.manifest.machine), cells_html(name, cells, run.manifest.machine)
        assert re.findall("<th>([^<]*)</th>", page) == grid.header
    assert "<th>% MMA@clock</th>" in cells_html("e", run.cells, run.manifest.machine)
    l4 = open_store(str(relabelled(H200_WARM, tmp_path / HOPPER).parent)).read(HOPPER)
    said = html.escape(metrics.no_mma_rate(l4.manifest.machine), quote=True)
    assert f"<p class='meta'>{said}</p>" in cells_html("e", l4.cells, l4.manifest.machine)
    assert "no cited MMA rate" not in cells_html("e", run.cells, run.manifest.machine)


def test_a_reports_header_says_the_runs_power_policy_and_the_cudnn_each_worker_ran():
    """The power policy moves every time by 10-15 % and flips measured / published: the header (show's too) names it,
    and the cuDNN TransformerEngine's worker ran where it is not jax's."""
    from runner import artifacts

    burst = artifacts.facts(shipped("h200/llama3.1-70b-20261206-burst"))
    assert burst[:3] == ["spec llama3.1-70b", "GPU NVIDIA H200", "power burst"]
    assert burst[-5:] == ["jax 0.11.2", "cuDNN 9.19.0 (transformer_engine worker 9.14.0)",
                          "compile cache partly warm: 8 of 66 programs loaded", "took 127 s in cells · 127 s wall",
                          "84 cells: 76 ok, 2 oom, 6 skipped"]
    assert "power steady (after settling)" in artifacts.facts(shipped(f"h200/{HOPPER}"))


def test_a_report_of_a_gpu_without_a_cited_mma_rate_says_so_under_its_leaderboard(capsys, tmp_path):
    """The L4 walk's finding 5: the report of a run on an L4 (sm89, no row in runner.metrics.MMA_PER_CLOCK_PER_SM)
    had no "MMA" at all, where the H200's has a % MMA@clock column in its leaderboard. index.html and summary.md say
    why under the board, where the column stands on an H200, and index.html under its cell tables (issue 37); the
    H200's report says no such thing, and its cell tables have the column."""
    from runner import metrics
    from stores import H200_WARM, relabelled

    l4 = relabelled(H200_WARM, tmp_path / "runs" / HOPPER)
    said = metrics.no_mma_rate(shipped(H200_WARM).manifest.machine.model_copy(update={
        "compute_capability": "8.9", "gpu": shipped(H200_WARM).manifest.machine.gpu.model_copy(
            update={"name": "NVIDIA L4"})}))
    assert report(capsys, tmp_path, l4).code == 0
    page, summary = ((tmp_path / "report" / name).read_text() for name in ("index.html", "summary.md"))
    board = page[page.index("<caption>Leaderboard"):]
    assert f"<p class='meta'>{html.escape(said, quote=True)}</p>" in board and "% MMA@clock</th>" not in board
    assert f"\n\n{said}" in summary[summary.index("### Leaderboard"):]
    assert f"<p class='meta'>{html.escape(said, quote=True)}</p>" in page[page.index("<h3>Cells</h3>"):]
    assert report(capsys, tmp_path / "h200", H200 / HOPPER).code == 0
    page = (tmp_path / "h200" / "report" / "index.html").read_text()
    assert "no cited MMA rate" not in page and "<th>% MMA@clock</th>" in page[page.index("<h3>Cells</h3>"):]
