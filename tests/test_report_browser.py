"""`attnbench report`'s page opened as a file in Debian's chromium, headless, with every request that is not the page
itself refused: no server, no network, and its charts still drawn (a screenshot in test-artifacts/)."""

from __future__ import annotations

import pytest
from playwright import sync_api

from helpers import REPO, in_process
from test_dashboard_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS

H200 = REPO / "examples" / "results" / "h200"
RUNS = ("lab5-20261202-110556", "hopper-long-warm-20261203-023241")

pytestmark = pytest.mark.slow


def test_the_report_opens_offline_with_its_charts(capsys, tmp_path):
    done = in_process(capsys, "report", *(H200 / run for run in RUNS), "--output", tmp_path / "report")
    assert done.code == 0, done.err
    asked = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(offline=True, viewport={"width": 1400, "height": 1000})
        context.route("**/*", lambda route: (asked.append(route.request.url), route.abort()
                                             if not route.request.url.startswith(("file:", "data:")) else
                                             route.continue_()))
        page = context.new_page()
        page.goto((tmp_path / "report" / "index.html").as_uri())
        page.wait_for_load_state("load")
        drawn = page.eval_on_selector_all("figure.chart img", "imgs => imgs.map(i => i.complete && i.naturalWidth)")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=ARTIFACTS / "report.png", full_page=False)
        sections = page.eval_on_selector_all("section h2", "hs => hs.map(h => h.textContent)")
        browser.close()
    assert len(drawn) == 6 and all(width and width > 600 for width in drawn), drawn
    assert sections == list(RUNS)
    assert [url for url in asked if not url.startswith(("file:", "data:"))] == []
