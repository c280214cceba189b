"""The README and the docs site (mkdocs.yml, docs/, scripts/docs_hooks.py, scripts/results_pages.py): the site builds
with warnings as errors and its links checked, its references are generated from the code, the results pages are
what their command writes now, and every command the README and Getting started give is run by a test."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, environment, script

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
    assert "logit soft cap: not implemented" in row and "pass fwd" in row


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


# --- the README ----------------------------------------------------------------------------------------------------

def test_the_readme_is_a_front_door():
    text = README.read_text()
    assert len(text.splitlines()) <= README_LINES
    images = re.findall(r"!\[[^]]*\]\(([^)]+\.png)\)", text)
    assert images and all(image.startswith("docs/results/figures/") and (REPO / image).is_file() for image in images)
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert links and all((REPO / link).is_file() for link in links), [l for l in links if not (REPO / l).is_file()]
    assert "make test" in commands(README)  # .ci/run runs it


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

