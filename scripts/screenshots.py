"""The screenshots in docs/screenshots/, taken anew from committed files in Debian's chromium (headless, through
playwright: scripts/install-test-tools.sh installs both), each the way it was first taken, so that one whose page
changed (a legend, a caption) is shot again rather than left showing the old words:

- history-llama3.1-70b.png: the dashboard's History of the shipped llama3.1-70b runs, 1600 px wide and the page's
  height, as tests/test_dashboard_browser.py shoots it into test-artifacts/ while it checks that no text stands on
  another (this script runs that test and copies its shot);
- report.png: `attnbench report` of two shipped H200 runs, 1400 x 1000, as tests/test_report_browser.py shoots it
  while it checks that the page opens offline (run and copied the same way);
- home.png, results-power.png: the docs site (mkdocs build, as tests/test_docs.py builds it) at its home page and at
  docs/results/power.md, 1280 x 900.

    python scripts/screenshots.py [NAME ...]     # NAME: a file's stem (home, report, ...); every one by default
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path(os.environ.get("ATTNBENCH_CHROMIUM") or "/usr/bin/chromium")
# the browser tests that take a shot while they check its page: the test, and the file it writes in ARTIFACTS
TESTED = {"history-llama3.1-70b": ("tests/test_dashboard_browser.py::"
                                   "test_history_of_llama_70b_has_no_overlapping_text_and_is_photographed",
                                   "dashboard-history-llama3.1-70b.png"),
          "report": ("tests/test_report_browser.py::test_the_report_opens_offline_with_its_charts", "report.png")}
SITE_PAGES = {"home": "index.html", "results-power": "results/power/index.html"}  # in the built site
SITE_VIEW = {"width": 1280, "height": 900}


def missing() -> str | None:
    """What the shots need and this machine lacks (chromium, playwright), with how to get it; None where both are."""
    if not CHROMIUM.is_file():
        return f"chromium is missing at {CHROMIUM}: run make test-tools (or name one in ATTNBENCH_CHROMIUM)"
    if importlib.util.find_spec("playwright") is None:
        return f"playwright is missing from {sys.executable}: run make screenshots (its venv has it, the dev extra)"
    return None


def tested(name: str) -> None:
    """Run the browser test that shoots `name` (it fails, and so does this, where its page is wrong) and copy its
    shot into docs/screenshots/."""
    test, shot = TESTED[name]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], cwd=ROOT)
    if done.returncode:
        sys.exit(f"{name}.png not taken: {test} failed (its output above)")
    shutil.copy(ARTIFACTS / shot, OUT / f"{name}.png")


def site_shots(names: list[str]) -> None:
    """Build the docs site into a temporary folder and shoot each of `names`' pages there, opened as files."""
    from playwright import sync_api  # a test tool: only this part needs it

    with tempfile.TemporaryDirectory(prefix="attnbench-site-") as folder:
        site = Path(folder) / "site"
        subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
                       cwd=ROOT, check=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport=SITE_VIEW)
            for name in names:
                page.goto((site / SITE_PAGES[name]).as_uri())
                page.wait_for_load_state("load")
                page.screenshot(path=OUT / f"{name}.png")
            browser.close()


def main() -> None:
    known = [*TESTED, *SITE_PAGES]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"any of {', '.join(known)} (default: all)")
    names = parser.parse_args().names or known
    if unknown := [n for n in names if n not in known]:
        parser.error(f"no screenshot named {', '.join(unknown)}: one of {', '.join(known)}")
    if lacking := missing():
        sys.exit(f"screenshots: {lacking}")
    for name in (n for n in names if n in TESTED):
        tested(name)
    if site := [n for n in names if n in SITE_PAGES]:
        site_shots(site)
    print(f"wrote {', '.join(f'docs/screenshots/{n}.png' for n in names)}")


if __name__ == "__main__":
    main()
