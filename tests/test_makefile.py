"""The Makefile's newcomer targets, as `make -n` prints them: what `make demo` then `make dashboard` opens."""

from __future__ import annotations

import shutil
import subprocess

from helpers import REPO

SHIPPED_RUN = REPO / "examples" / "results" / "cpu" / "lab5-20261202-104832"


def planned(target: str, **variables: str) -> list[str]:
    """The attnbench command lines `make -n TARGET` would run (the venv's own setup, if due, left out)."""
    done = subprocess.run(["make", "-n", "-C", str(REPO), target, *(f"{k}={v}" for k, v in variables.items())],
                          capture_output=True, text=True, check=True)
    return [line for line in done.stdout.splitlines() if "attnbench " in line]


def test_after_the_demo_the_dashboard_opens_its_runs(tmp_path):
    assert planned("dashboard", DEMO_RESULTS=str(tmp_path))[-1].endswith("attnbench dashboard ")  # none yet: shipped
    shutil.copytree(SHIPPED_RUN, tmp_path / SHIPPED_RUN.name)  # what `make demo` leaves in results/
    assert planned("dashboard", DEMO_RESULTS=str(tmp_path))[-1].endswith(f"attnbench dashboard --results {tmp_path}")
    chosen = planned("dashboard", DEMO_RESULTS=str(tmp_path), RESULTS="gs://b/p")[-1]
    assert chosen.endswith("--results gs://b/p")


def test_the_demos_last_line_says_how_to_see_the_run(tmp_path):
    lines = planned("demo", DEMO_RESULTS=str(tmp_path))
    assert f"--out {tmp_path}/" in lines[0]
    assert "see it: make dashboard" in lines[-1]


def test_install_test_tools_can_use_a_chromium_already_there():
    script = (REPO / "scripts" / "install-test-tools.sh").read_text()
    assert 'if [ -z "${ATTNBENCH_CHROMIUM:-}" ] && [ ! -x /usr/bin/chromium ]; then' in script
    browser = (REPO / "tests" / "test_dashboard_browser.py").read_text()
    assert 'os.environ.get("ATTNBENCH_CHROMIUM")' in browser


def test_make_docs_serves_the_site_and_make_results_pages_writes_its_pages():
    serve = subprocess.run(["make", "-n", "--old-file=.venv/.installed", "-C", str(REPO), "docs"], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert "NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs serve" in serve
    pages = subprocess.run(["make", "-n", "--old-file=.venv/.installed", "-C", str(REPO), "results-pages"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert ".venv/bin/python scripts/results_pages.py" in pages
