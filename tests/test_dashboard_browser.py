"""The dashboard served by `streamlit run` and drawn by Debian's chromium, headless, through playwright."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright import sync_api

from conftest import free_port
from dashboard import data
from helpers import DASHBOARD_APP as APP
from helpers import REPO as ROOT
from helpers import charts, open_app

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = ROOT / "test-artifacts" / "dashboard.png"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                 "--disable-quic", "--disable-component-update", "--disable-sync"]
PLOTS = ".js-plotly-plot"

if not CHROMIUM.exists():  # make test installs it: a missing browser is a broken set-up, not a reason to skip
    pytest.fail(f"{CHROMIUM} is missing: run scripts/install-test-tools.sh", pytrace=False)


def wait_healthy(url: str, server: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stdout.read()
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read() == b"ok":
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"streamlit did not answer on {url}")


@pytest.fixture(scope="module")
def server_url():
    """`streamlit run dashboard/app.py` on a free loopback port, headless, no telemetry, on the shipped runs."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(APP), "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--server.port", str(port), "--server.address", "127.0.0.1",
         "--", "--results", str(data.SHIPPED_RESULTS)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """A page of Debian's chromium, headless, with a fresh profile folder."""
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            tmp_path_factory.mktemp("chromium-profile"), executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
            viewport={"width": 1600, "height": 1200},
        )
        yield context.new_page()
        context.close()


def expected_charts(monkeypatch, **query) -> int:
    """How many plotly charts the app draws on the shipped runs, by streamlit's own test harness."""
    return charts(open_app(monkeypatch, data.SHIPPED_RESULTS, **query))


def load(page, url: str, charts: int) -> None:
    page.goto(url)
    page.wait_for_selector("h1:has-text('attnbench results')", timeout=60_000)
    page.wait_for_function(f"document.querySelectorAll('{PLOTS}').length >= {charts}", timeout=60_000)
    page.wait_for_selector("[data-testid='stStatusWidget']", state="detached", timeout=60_000)


def assert_no_error_text(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.locator("[data-testid='stAlertContentError']").all_inner_texts() == []
    assert "Traceback" not in page.inner_text("body")


def test_shipped_results_draw_in_chromium(page, server_url, monkeypatch):
    drawn = expected_charts(monkeypatch)
    load(page, server_url, drawn)
    assert page.locator(PLOTS).count() == drawn
    assert_no_error_text(page)
    screenshot_whole_app(page)


def screenshot_whole_app(page) -> None:
    """Streamlit scrolls inside its main block, so grow the window to that block's height, then shoot."""
    height = page.evaluate("document.querySelector(\"[data-testid='stMain']\").scrollHeight")
    page.set_viewport_size({"width": 1600, "height": height})
    page.wait_for_timeout(1_000)  # plotly re-lays out on resize
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=SCREENSHOT)


def test_a_shared_link_opens_the_same_selection(page, server_url, monkeypatch):
    drawn = expected_charts(monkeypatch, experiment="seq-len")
    load(page, f"{server_url}/?experiment=seq-len", drawn)
    assert page.locator(PLOTS).count() == drawn
    assert "experiment=seq-len" in page.url
    assert_no_error_text(page)
