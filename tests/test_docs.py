"""The README and the docs site (mkdocs.yml, docs/, scripts/docs_hooks.py, scripts/results_pages.py): the site builds
with warnings as errors and its links checked, its references are generated from the code, the results pages are
what their command writes now, and every command the README and Getting started give is run by a test."""

from __future__ import annotations

import inspect
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, environment, params, script

README = REPO / "README.md"
GETTING_STARTED = REPO / "docs" / "getting-started.md"
RESULTS = REPO / "docs" / "results"
README_LINES = 250
# Commands run by another test or by CI, not here: the line's start -> (the file that runs it, what shows it there).
RUN_ELSEWHERE = {
    "make test": (".ci/run", "make test"),
    "make dashboard": ("tests/test_makefile.py", 'planned("dashboard"'),
    "make deploy": ("tests/test_k8s.py", "--apply"),  # the render make deploy applies, with a fake kubectl
    "make submit": ("tests/test_k8s.py", '"render", "SPEC=specs/lab5.yaml"'),  # submit = render + kubectl apply
    "make nightly": ("tests/test_k8s.py", '"nightly", "SPEC=specs/lab5.yaml", "GPU=l4"'),
    # terraform's configuration is checked (fmt, the provider's schema, checkov), never applied: no cloud project here
    "terraform -chdir=terraform": ("tests/test_terraform.py", "def test_terraform_fmt_check"),
    "cp terraform/terraform.tfvars.example": ("tests/test_terraform.py", "terraform.tfvars.example"),
    # the cuda12 extra's packages are the runner image's pin list, installed and imported by this test
    ".venv/bin/pip install -e '.[cuda12]'": ("tests/test_runner_image.py", 'extras["cuda12"]'),
    # the training and serving specs' cells as an H200 would plan them (a CPU would run their large shapes for hours)
    ".venv/bin/attnbench run specs/training.yaml": ("tests/test_packed.py", "def test_the_training_spec_runs_cudnn"),
    ".venv/bin/attnbench run specs/serving.yaml": ("tests/test_paged_variants.py",
                                                   "def test_the_serving_specs_kernel_cells_run_on_an_h200"),
    "git clone": (".ci/run", "a clean clone"),
    "rm -rf results build/spool && time make demo": ("tests/test_docs.py", "def test_the_demo_and_what_follows"),
    "time make demo": ("tests/test_docs.py", "def test_the_demo_and_what_follows"),
    "time make test": (".ci/run", "make test"),
}
COMMAND = re.compile(r"^(make|\.venv/bin/|attnbench|terraform|cp |git |rm |time )")


def commands(path: Path) -> list[str]:
    """The command lines in a page's code blocks (indented or fenced), comments dropped."""
    found, fenced = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            text = line.strip().split("  #")[0].strip()
            found += [text] if COMMAND.match(text) else []
    return found


def site(tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=environment(NO_MKDOCS_2_WARNING="1"))


def hooks():
    return script("scripts/docs_hooks.py")


# --- the site ------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_the_site_builds_strictly_with_its_references_generated(tmp_path):
    from runner.registry import load_all
    from runner.spec import Spec

    built = site(tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    specs = (tmp_path / "site" / "specs" / "index.html").read_text()
    schema = Spec.model_json_schema(by_alias=True)
    for model in [schema, *schema["$defs"].values()]:
        assert all(f"<code>{field}</code>" in specs for field in model["properties"]), model.get("title")
    variants = (tmp_path / "site" / "variants" / "index.html").read_text()
    assert all(f"<td><code>{name}</code></td>" in variants for name in load_all())
    assert "attnbench:" not in specs + variants  # every marker replaced


@pytest.mark.slow
def test_a_broken_link_fails_the_build(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copy(REPO / "mkdocs.yml", copy)
    shutil.copytree(REPO / "scripts", copy / "scripts")
    page = copy / "docs" / "design.md"
    page.write_text(page.read_text() + "\nSee [the missing page](nowhere.md).\n")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "s")],
                           cwd=copy, capture_output=True, text=True, timeout=300,
                           env=environment(NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(REPO)))
    assert built.returncode != 0 and "nowhere.md" in built.stderr


def test_the_spec_reference_has_a_row_per_field_with_its_limits():
    reference = hooks().spec_reference({"properties": {"seq_len": {"type": "integer", "exclusiveMinimum": 0,
                                                                   "maximum": 16, "description": "T | tokens"}}})
    assert "| `seq_len` | integer | required | > 0, ≤ 16 | T \\| tokens |" in reference


def test_the_variant_reference_says_what_each_declines():
    from runner.registry import load_all

    table = hooks().variant_reference(load_all())
    row = next(line for line in table.splitlines() if line.startswith("| `cudnn_fp8` |"))
    needs, takes, declines = row.split(" | ")[4:7]
    assert "pass fwd" in needs and "model options" not in needs  # words() says the options; needs() does not
    assert takes == "none of the model options" and "logit soft cap: it implements none" in declines


def hand_tables(page: str) -> list[list[str]]:
    """The header and rows of each table the page writes by hand (the generated reference is a marker until built)."""
    return [block.strip().splitlines() for block in re.findall(r"(?m)(?:^\|.*\|\n)+", page)]


def variant_table_faults(page: str, registered: set[str]) -> list[str]:
    """What the page's hand-written tables say that is not theirs to say: a column the generated reference owns (what
    a variant needs, takes and declines restated Requires, and nothing held it to the code: contributor walk, finding
    11), a row naming a variant not registered. Every table of the page is one of variants, whatever its header: the
    check read those headed `| variant |` alone, and a table headed otherwise went unread."""
    generated = set(hooks().variant_reference({}).splitlines()[0].strip("| ").split(" | ")) - {"variant", "what runs"}
    faults = []
    for table in hand_tables(page):
        faults += [f"{table[0]}: the reference's {column}" for column in table[0].strip("| ").split(" | ")
                   if column in generated]
        faults += [f"{row[:40]}: {name} is not registered" for row in table[2:]
                   for name in re.findall(r"`(\w+)`", row.split(" | ")[0]) if name not in registered]
    return faults


def test_the_variants_pages_tables_say_what_runs_and_name_registered_variants_alone():
    """A variant with no row is fine."""
    from runner.registry import load_all

    page = (REPO / "docs" / "variants.md").read_text()
    assert variant_table_faults(page, set(load_all())) == []
    assert len(variant_table_faults(page, set())) >= 20  # the rows do name variants
    kernels = "| kernel | needs |\n|---|---|\n| `flash` | a GPU |\n"  # a table of variants headed otherwise
    assert variant_table_faults(kernels, {"xla"}) == ["| kernel | needs |: the reference's needs",
                                                      "| `flash` | a GPU |: flash is not registered"]


def test_the_variant_a_contributor_copies_from_the_page_registers_with_the_reason_it_gives():
    from runner.machine import current_device
    from runner.registry import VARIANTS, decline

    page = (REPO / "docs" / "variants.md").read_text()
    example = re.search(r"## Adding a variant\n.*?```python\n(.*?)```", page, re.S).group(1)
    exec(compile(example, "docs/variants.md", "exec"), {"__name__": "docs_example"})
    assert decline(VARIANTS["xla_blocked"], params(documents=2, causal=True), current_device()) == (
        "xla_blocked declines a packed row (documents > 1): its query blocks split at T/2, not where a document ends")


# --- the numbers the pages quote from the code -----------------------------------------------------------------------

# The code owns each of these numbers; a page quotes it in its prose, where it reads on GitHub as on the site, and is
# held to it here (a marker the build fills in would leave a gap in the sentence on GitHub). A row: the page, its
# phrase with the number as {} (whitespace as any), and the code's value in the phrase's unit. Every place the
# phrase stands must say the value, and it must stand somewhere: a reworded sentence updates its row.
def quoted() -> list[tuple[str, str, float]]:
    import runner
    from runner import artifacts, ceilings_cache, cli, gpu, limits, metrics, power, run, sampling, shard, spec, spool
    from runner import store, termination
    from dashboard import charts, data

    timing, shape = spec.TimingSettings(), spec.Shape.model_json_schema()["properties"]
    commands = cli.build_parser()._subparsers._group_actions[0].choices

    def default(command: str, dest: str):
        return next(action.default for action in commands[command]._actions if action.dest == dest)

    def parameter(function, name: str):
        return inspect.signature(function).parameters[name].default

    return [
        ("timing.md", "while NVML is read every {} ms", 1e3 * power.INTERVAL_S),
        ("timing.md", "A background thread reads NVML every {} ms", 1e3 * power.INTERVAL_S),
        ("timing.md", "only once {} more are queued", sampling.QUEUED),
        ("timing.md", "the SM clock within {} % for", 100 * power.SETTLE_TOLERANCE),
        ("timing.md", "the SM clock within 1 % for {} s, over a window", power.SETTLE_WINDOW_S),
        ("timing.md", "`heavy_after_s` ({} s)", timing.heavy_after_s),
        ("timing.md", "the power drawn over the last {} s within", power.SETTLE_WINDOW_S),
        ("timing.md", "within {} % of the 0.5 s before", 100 * power.CAP_TOLERANCE),
        ("timing.md", "the mean clock of the two within {} %", 100 * power.SETTLE_TOLERANCE),
        ("timing.md", "`light_after_s` ({} s)", timing.light_after_s),
        ("timing.md", "`light_share` ({} %)", 100 * timing.light_share),
        ("timing.md", "the energy counter read from {} s into the load", power.LIGHT_RAMP_S),
        ("timing.md", "its samples are the calls from {} s on", power.LIGHT_RAMP_S),
        ("timing.md", "at least `min_samples` ({}, `FLOOR_SAMPLES`", spec.FLOOR_SAMPLES),
        ("timing.md", "a chunk of calls of {} ms or more is one call", 1e3 * sampling.CHUNK_S),
        ("timing.md", "within {} s (`CARRY_GAP_S`)", spec.CARRY_GAP_S),
        ("timing.md", "its two {} s windows", power.SETTLE_WINDOW_S),
        ("timing.md", "it is judged after {} s of its load", 2 * power.SETTLE_WINDOW_S),
        ("timing.md", "of its load instead of {} s", timing.heavy_after_s + power.SETTLE_WINDOW_S),
        ("timing.md", "back within {} °C", power.COOL_MARGIN_C),
        ("timing.md", "a margin in proportion to the power limit: {} W at", power.IDLE_MARGIN_W),
        ("timing.md", "W at the H200's {} W, which every committed burst run", power.IDLE_MARGIN_LIMIT_W),
        ("timing.md", "their calls spanning at most {} ms", 1e3 * sampling.BURST_S),
        ("timing.md", "(`sampling.BURST_S`, at least {} calls", sampling.BURST_FLOOR),
        ("timing.md", "flags `clock_unstable` when the SM clock moved more than {} %", 100 * power.UNSTABLE_SPREAD),
        ("timing.md", "records per {} s bin", sampling.SOAK_BIN_S),
        ("timing.md", "`attnbench soak SPEC [--seconds {}]", default("soak", "soak")),
        ("timing.md", "the median CUPTI kernel time of an {}³ bf16 matmul", parameter(gpu.matmul_peak_tflops, "size")),
        ("timing.md", "and of a {} GiB copy", parameter(gpu.memory_bandwidth_gbps, "size_bytes") / 2**30),
        ("timing.md", "older than {} days (`MAX_AGE_DAYS`)", ceilings_cache.MAX_AGE_DAYS),
        ("timing.md", "(more than {} days old)", ceilings_cache.MAX_AGE_DAYS),
        ("timing.md", "at least half (`SHARE_OF_MMA`, {})", ceilings_cache.SHARE_OF_MMA),
        ("timing.md", "each new ceiling is at least {} % (`SHARE_OF_KEPT`)", 100 * ceilings_cache.SHARE_OF_KEPT),
        ("results.md", "group commits, {} ms apart at most", 1e3 * spool.GROUP_S),
        ("results.md", "those of the last {} ms", 1e3 * spool.GROUP_S),
        ("results.md", "its probe of `--out` and its first read of the store wait at most {} s", cli.PROBE_TIMEOUT_S),
        ("results.md", "its first read of the store wait at most {} s each", spool.PULL_TIMEOUT_S),
        ("results.md", "`--store-timeout` seconds (default {})", store.DEFAULT_TIMEOUT_S),
        ("results.md", "(the last upload gets {} s;", termination.SIGTERM_UPLOAD_S),
        ("results.md", "`--flush-every` apart (default {})", default("run", "flush_every")),
        ("results.md", "`clock_unstable` when the SM clock moved more than {} %", 100 * power.UNSTABLE_SPREAD),
        ("results.md", "SM clock moved more than {} % while it was sampled", 100 * power.UNSTABLE_SPREAD),
        ("results.md", "| {} | stdout's reader went away", cli.EXIT_PIPE),
        ("command-line.md", "tables grow up to {} columns", cli.PIPE_WIDTH),
        ("command-line.md", "the table as a pipe reads it (no colour, up to {} columns)", cli.PIPE_WIDTH),
        ("command-line.md", "one line per problem (at most {}, then a count)", spec.MAX_PROBLEMS),
        ("command-line.md", "are retried every {} s for up to", store.AUTH_PAUSE_S),
        ("command-line.md", "for up to {} s (`AUTH_GRACE_S`", store.AUTH_GRACE_S),
        ("command-line.md", "reach after about {} s (someone is waiting)", store.READ_TIMEOUT_S),
        ("command-line.md", "`run` keeps the {} s of `--store-timeout`", store.DEFAULT_TIMEOUT_S),
        ("command-line.md", "up to {} characters: a name and the time", spec.RUN_ID_MAX_LENGTH),
        ("command-line.md", "ends the output quietly with exit {} (128 + SIGPIPE", cli.EXIT_PIPE),
        ("command-line.md", "more than max_cells ({})", spec.DEFAULT_MAX_CELLS),
        ("command-line.md", "raise max_cells (at most {})", spec.MAX_CELLS),
        ("specs.md", "a spec file of at most {} MiB", spec.MAX_SPEC_BYTES / 2**20),
        ("specs.md", "nested at most {} levels", spec.MAX_DEPTH),
        ("specs.md", "holding at most {} values once YAML aliases are expanded", spec.MAX_VALUES),
        ("specs.md", "integers of at most {} digits", spec.MAX_DIGITS),
        ("specs.md", "(`batch` ≤ {},", shape["batch"]["maximum"]),
        ("specs.md", "and `head_dim` ≤ {})", shape["head_dim"]["maximum"]),
        ("specs.md", "at most `max_cells` cells (default {},", spec.DEFAULT_MAX_CELLS),
        ("specs.md", "or with `--max-cells`, up to {});", spec.MAX_CELLS),
        ("specs.md", "alone need more than {} TiB", limits.MAX_INPUT_BYTES / 2**40),
        ("specs.md", "(nor {}; [results](results.md), shards)", shard.MAX_SHARDS),
        ("specs.md", "×{} with backward", metrics.BWD_FLOP_FACTOR),
        ("specs.md", "`documents` D (default {})", shape["documents"]["default"]),
        ("specs.md", "`kv_spread` s in [0, 1] (default {})", shape["kv_spread"]["default"]),
        ("regressions.md", "(`--threshold`, default {} %)", runner.COMPARE_THRESHOLD_PERCENT),
        ("regressions.md", "an SM clock that moved more than {} % (`clock_unstable`)", 100 * power.UNSTABLE_SPREAD),
        ("regressions.md", "clock that moved more than {} %)\"): their ratio", 100 * power.UNSTABLE_SPREAD),
        ("regressions.md", "at most {} charts inline", artifacts.MAX_CHARTS),
        ("dashboard.md", "beyond both runs' noise and {} %", runner.COMPARE_THRESHOLD_PERCENT),
        ("dashboard.md", "never settled or its SM clock moved more than {} %) and †", 100 * power.UNSTABLE_SPREAD),
        ("dashboard.md", "they draw up to {} runs", charts.MAX_RUNS),
        ("dashboard.md", "in the runs the chart draws (the newest {})", charts.MAX_RUNS),
        ("dashboard.md", "a bucket: every {} minutes", data.REMOTE_TTL_S / 60),
        ("design.md", "compiles the programs of its next {} cells together", run.AHEAD_CELLS),
    ]


NUMBER = r"(\d[\d,]*(?:\.\d+)?|one|two|three|four|five)"
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def quote_drift(pages: dict[str, str], rows: list[tuple[str, str, float]]) -> list[str]:
    """Each row whose phrase stands nowhere on its page, or says another number there than the code's."""
    problems = []
    for page, phrase, value in rows:
        text = " ".join(pages[page].split())
        pattern = r"\s+".join(map(re.escape, " ".join(phrase.split()).split(" "))).replace(re.escape("{}"), NUMBER)
        said = re.findall(pattern, text)
        if not said:
            problems.append(f"{page}: no longer says {phrase!r} (reworded? update tests/test_docs.py's quoted())")
        problems += [f"{page}: {phrase.replace('{}', n)!r}, where the code says {value:g}"
                     for n in said if not math.isclose(WORDS.get(n) or float(n.replace(",", "")), value)]
    return problems


def test_every_number_a_page_quotes_from_the_code_is_the_codes():
    rows = quoted()
    pages = {page: (REPO / "docs" / page).read_text() for page, _, _ in rows}
    assert quote_drift(pages, rows) == []


def test_a_page_that_quotes_another_number_or_drops_the_phrase_is_named():
    pages = {"p.md": "a stream that starts\n  within 2 s (`CARRY_GAP_S`) of the end, and three samples"}
    assert quote_drift(pages, [("p.md", "within {} s (`CARRY_GAP_S`)", 1.0), ("p.md", "and {} samples", 3),
                               ("p.md", "the cap carried", 1)]) == [
        "p.md: 'within 2 s (`CARRY_GAP_S`)', where the code says 1",
        "p.md: no longer says 'the cap carried' (reworded? update tests/test_docs.py's quoted())"]


def test_a_page_that_quotes_a_notes_mark_gives_its_symbol():
    """getting-started.md quoted show's note as `[not converged: …]` after the note became `[† not converged: …]`:
    every `[word: …]` a page quotes of a mark (runner.marks.MARKS) opens with the mark's symbol, as show writes it."""
    from runner.marks import MARKS

    bare = [f"{page.name}: [{mark.word}:" for page in sorted((REPO / "docs").glob("*.md")) for mark in MARKS
            for _ in re.finditer(rf"\[(?!{mark.symbol} ){mark.word}:", page.read_text())]
    assert bare == []


def test_the_clock_under_the_cap_that_benchmarks_quotes_is_the_committed_probes():
    """benchmarks.md said the probe saw 1665-1845 MHz at 16k, a figure no committed file holds: the SM clock it quotes
    (in "Settling at the power cap" and the constants' table) is the range of probe-stream-20261203.json's NVML
    readings from 1.5 s into each stream to its end."""
    import json

    probe = json.loads((REPO / "docs" / "evidence" / "probe-stream-20261203.json").read_text())
    page = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())
    for run in (run for run in probe["probes"] if run["T"] in (8192, 16384)):
        start, end = run["stream"]["t0"], run["stream"]["t0"] + run["stream"]["chunk_done"][-1]
        mhz = [row[1] for row in probe["nvml"] if start + 1.5 <= row[0] <= end]  # row: time, SM MHz, W, ...
        assert page.count(f"{min(mhz)}–{max(mhz)} MHz at {run['T'] // 1024}k") == 2, run["T"]


# --- the results pages ---------------------------------------------------------------------------------------------

def results_pages():
    return script("scripts/results_pages.py")


@pytest.mark.slow
def test_the_committed_results_pages_are_what_their_command_writes_now():
    made = results_pages().generate()
    pages = {name: data.decode() for name, data in made.items() if name.endswith(".md")}
    assert pages == {p.name: p.read_text() for p in RESULTS.glob("*.md")}, "run make results-pages and commit"
    figures = {name for name in made if name.startswith("figures/")}
    assert figures == {f"figures/{p.name}" for p in (RESULTS / "figures").glob("*.png")}
    for name, text in pages.items():  # each figure names the runs it came from, as committed folders
        for folders in re.findall(r"· from (.*) \(run ids", text):
            assert all((REPO / f).is_dir() for f in re.findall(r"`([^`]+)`", folders)), name


def test_a_results_table_holds_the_numbers_its_figure_draws():
    from runner import figures

    chart = figures.Chart("c", "t", "s", "query sequence length T", "TFLOP/s",
                          (figures.Series("cudnn", "cudnn", ((4096, 515.94), (8192, 560.8))),
                           figures.Series("te", "te", ((8192, 498.0),))), ("r",))
    assert results_pages().table(chart).splitlines() == [
        "| query sequence length T | cudnn | te |", "|---|---|---|", "| 4096 | 515.9 | — |", "| 8192 | 560.8 | 498 |"]


def test_a_results_table_marks_an_unsettled_or_unconverged_number_as_show_does_and_says_what_the_marks_mean():
    """hopper.md printed 515.9 and 870.4 TFLOP/s plain where their cells' clocks moved (show and the board mark
    them): the pages mark each number as runner.marks does and say under the table what the marks it shows mean."""
    from runner import figures
    from runner.store import read_run

    run = read_run(REPO / "docs" / "evidence" / "runs-20261203" / "hopper-long-warm-20261203-102524")
    cells = [c for c in run.cells if c.experiment == "fwd" and c.variant in ("cudnn", "cudnn_fp8")]
    chart = figures.sweep_chart("c", "fwd", [(run.run_id, "", cells)], "tflops")
    lines = results_pages().table(chart).splitlines()
    assert lines[2:4] == ["| 4096 | 515.9⚠ | 815.7⚠† |", "| 8192 | 560.8⚠ | 870.4⚠ |"]
    assert lines[-1] == ("*⚠ unsettled: sampled before its power state settled or on an SM clock that moved more than "
                         "2 %; † not converged: noise above its target when sampling stopped, or under 5 "
                         "samples.*")


# --- the README ----------------------------------------------------------------------------------------------------

def test_the_readme_is_a_front_door():
    text = README.read_text()
    assert len(text.splitlines()) <= README_LINES
    images = re.findall(r"!\[[^]]*\]\(([^)]+\.png)\)", text)
    assert images and all(image.startswith("docs/results/figures/") and (REPO / image).is_file() for image in images)
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert links and all((REPO / link).is_file() for link in links), [l for l in links if not (REPO / l).is_file()]
    assert "make test" in commands(README)  # .ci/run runs it


def beyond_the_lab(text: str) -> list[str]:
    """The rows of a page's "the lab | attnbench" table."""
    start = text.index("| the lab | attnbench |")
    return text[start:].split("\n\n", 1)[0].splitlines()


def test_the_sites_home_says_what_the_readme_adds_to_the_lab():
    """docs/index.md's table of what attnbench adds to the lab is the README's, row for row: the home page had kept
    an older one (Pallas with a configuration search, no training or serving row) after the README moved on."""
    assert beyond_the_lab((REPO / "docs" / "index.md").read_text()) == beyond_the_lab(README.read_text())


def test_a_section_a_page_sends_the_reader_to_by_name_is_there():
    """`(see "Node sizes")` names a heading of the same page, `(see "--against previous" in regressions.md)` a heading
    or bold lead-in of that page: the command line page sent readers to a "Catching regressions" no page has, and
    gke.md to a "GPU evidence" that is timing.md's."""
    def titles(page: str) -> set[str]:
        text = (REPO / "docs" / page).read_text()
        return {" ".join(t.split()) for t in re.findall(r"^#+ (.+)$|\*\*`?([^*`]+)`?\*\*", text, re.MULTILINE)
                for t in t if t}

    sent = [(page.name, " ".join(title.split()), other or page.name) for page in (REPO / "docs").glob("*.md")
            for title, other in re.findall(r'\(see "([^"]+)"(?: in ([a-z-]+\.md))?\)', page.read_text())]
    assert len(sent) >= 5 and [s for s in sent if s[1] not in titles(s[2])] == []


def test_every_command_of_the_readme_and_getting_started_is_run_by_a_test():
    assert set(RUN_HERE) <= set(commands(README))  # what the test below runs is what the README says
    unrun = []
    for command in commands(README) + commands(GETTING_STARTED):
        if command in RUN_HERE or command.startswith(tuple(RUN_HERE)):
            continue
        where = next((RUN_ELSEWHERE[k] for k in RUN_ELSEWHERE if command.startswith(k)), None)
        if where is None or where[1] not in (REPO / where[0]).read_text():
            unrun.append(command)
    assert unrun == []


# Run below, in order, in a folder of their own (the results/ and build/ they make land there).
RUN_HERE = (
    "make demo",
    ".venv/bin/attnbench runs",
    ".venv/bin/attnbench report RUN_ID --out results --output build/report",
    ".venv/bin/attnbench list",
    ".venv/bin/attnbench run specs/hopper-long.yaml",
)


@pytest.mark.slow
def test_the_demo_and_what_follows_run_as_written(tmp_path):
    """make demo (on the smoke spec, a CPU's seconds), then the README's next commands as written, from a folder
    where the demo's results are results/; the GPU section's commands too: on a CPU every hopper cell is skipped."""
    env = environment(ATTNBENCH_SPOOL=str(tmp_path / "spool"))
    demo = subprocess.run(["make", "--no-print-directory", "--old-file=.venv/.installed", "-C", str(REPO), "demo",
                           "DEMO_SPEC=specs/smoke.yaml", f"DEMO_RESULTS={tmp_path}/results",
                           f"DEMO_SPOOL={tmp_path}/spool"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert demo.returncode == 0, demo.stderr[-2000:]
    (run_id,) = [p.name for p in (tmp_path / "results").iterdir()]
    outputs = {}
    for command in RUN_HERE[1:]:
        argv = command.replace("RUN_ID", run_id).replace(".venv/bin/", f"{REPO}/.venv/bin/").split()
        argv = [str(REPO / a) if a.startswith("specs/") else a for a in argv]
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, (command, done.stderr[-2000:])
        outputs[command] = done.stdout
    assert run_id in outputs[RUN_HERE[1]]
    assert (tmp_path / "build" / "report" / "index.html").is_file()
    assert "cudnn" in outputs[RUN_HERE[3]]
    assert len(list((tmp_path / "results").iterdir())) == 2  # the demo's run and the hopper run



def test_every_screenshot_in_the_docs_is_one_its_script_takes_anew():
    """scripts/screenshots.py (make screenshots) shoots each file in docs/screenshots/ again, so none is left showing
    a page's old words: one added without a way to take it again fails here."""
    taken = script("scripts/screenshots.py")
    shown = sorted(p.stem for p in (REPO / "docs" / "screenshots").glob("*.png"))
    assert shown == sorted([*taken.TESTED, *taken.SITE_PAGES])


def test_the_screenshots_script_without_chromium_says_so_in_one_line():
    """Where it ended in a traceback (pytest's CalledProcessError, or playwright's where the site was shot)."""
    done = subprocess.run([sys.executable, "scripts/screenshots.py", "report"], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env=environment(ATTNBENCH_CHROMIUM="/nonexistent"))
    assert done.returncode != 0
    assert done.stdout + done.stderr == ("screenshots: chromium is missing at /nonexistent: run make test-tools (or "
                                         "name one in ATTNBENCH_CHROMIUM)\n")


# --- the scripts' own help -----------------------------------------------------------------------------------------

HELPED_SCRIPTS = sorted(str(p.relative_to(REPO)) for p in [*(REPO / "scripts").glob("*.py"), REPO / "k8s" / "render.py"]
                        if "ArgumentParser(" in p.read_text())


@pytest.mark.parametrize("path", HELPED_SCRIPTS)
def test_a_scripts_help_opens_with_its_docstrings_whole_first_paragraph(path):
    """`--help` says what the script is in whole sentences: bench_runner's stopped at 'then warm (and,', the first
    line of a paragraph that went on."""
    opening = " ".join((REPO / path).read_text().split('"""')[1].split("\n\n")[0].split())
    done = subprocess.run([sys.executable, path, "--help"], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env=environment(COLUMNS="2000"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert opening in " ".join(done.stdout.split())


# --- outputs the pages copy ----------------------------------------------------------------------------------------

def transcripts() -> list[tuple[str, str, list[str]]]:
    """Each `    $ attnbench ARGS` block of a page (not the evidence log, whose outputs are history): the page, the
    arguments, and the lines shown after it, `...` (an elision) dropped."""
    found = []
    for page in sorted((REPO / "docs").glob("*.md")):
        if page.name == "benchmarks.md":
            continue
        for block in re.findall(r"^    \$ attnbench (.+)\n((?:    (?!\$).*\n)*)", page.read_text(), re.MULTILINE):
            shown = [line.strip() for line in block[1].splitlines() if line.strip() not in ("", "...")]
            found.append((page.name, block[0], shown))
    return found


def test_the_pages_have_transcripts_to_hold():
    assert [(page, args.split()[0]) for page, args, _ in transcripts()] == [("regressions.md", "compare")]


@pytest.mark.parametrize("page,args,shown", transcripts(), ids=lambda v: v if isinstance(v, str) else None)
def test_an_output_a_page_copies_is_what_the_command_prints_now(capsys, page, args, shown):
    """A transcript on a page (`$ attnbench compare A B` and its verdict) is run as written on the shipped runs;
    every line it shows is in today's output, so a verdict that changes is found here, not by a reader."""
    from helpers import in_process

    outcome = in_process(capsys, *args.split())
    printed = " ".join((outcome.out + outcome.err).split())
    assert shown and [line for line in shown if " ".join(line.split()) not in printed] == []
