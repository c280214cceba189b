"""The dashboard served by `streamlit run` and drawn by Debian's chromium, headless, through playwright: the
links in docs/dashboard.md, every tab on the shipped runs (a screenshot of each in test-artifacts/), the telemetry view."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from playwright import sync_api

from conftest import free_port
from helpers import in_process
from helpers import DASHBOARD_SERVER as SERVER
from helpers import REPO as ROOT
from stores import (CPU_LAB5, H200_LAB5, H200_LONG, broken, copy_files, copy_run, generate, shipped, telemetry,
                    write_run)
from runner.power import UNSTABLE_SPREAD

CHROMIUM = Path(os.environ.get("ATTNBENCH_CHROMIUM") or "/usr/bin/chromium")  # scripts/install-test-tools.sh
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                 "--disable-quic", "--disable-component-update", "--disable-sync"]
PLOTS = ".js-plotly-plot"
DRAWN = ("document.querySelector('[data-testid=stApp]').dataset.testScriptState === 'notRunning' "
         "&& !document.querySelector('[data-testid=stSkeleton]') "
         "&& [...document.querySelectorAll('.js-plotly-plot')].every(p => p.querySelector('.main-svg'))")
TABLES = "[data-testid=stDataFrame], [data-testid=stTable]"
TABS = ["Latency", "Throughput", "Memory", "Heads", "Backends", "FP8", "Leaderboard", "History", "Compare", "Soak", "Cells",
        "Runs"]
CHARTED = {"Latency", "Throughput", "Memory", "Heads", "Backends", "History", "Compare", "Soak"}
SHIPPED = ROOT / "examples" / "results"
STEADY = "hopper-long-steady"
NIGHTLY = "h200/lab5-warm-20261203-023042"  # two nights copied from it: B with three cells 30 % slower, one incorrect

if not CHROMIUM.exists():  # make test installs it: a missing browser is a broken set-up, not a reason to skip
    pytest.fail(f"{CHROMIUM} is missing: run scripts/install-test-tools.sh", pytrace=False)


def docs_links() -> list[str]:
    """The query strings of the links to a running dashboard in docs/dashboard.md."""
    return re.findall(r"<http://localhost:8501/(\?[^>]+)>", (ROOT / "docs" / "dashboard.md").read_text())


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


def serve(results: Path):
    """`streamlit run dashboard/serve.py` (app.py, as `attnbench dashboard` serves it) on a free loopback port, headless, no telemetry, on `results`."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(SERVER), "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--server.port", str(port), "--server.address", "127.0.0.1",
         "--", "--results", str(results)],
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
def url(tmp_path_factory):
    """One server for every test: the shipped runs, plus hopper-long as a steady-power run records telemetry
    (cudnn at 32k clock-unstable); links name their runs, so the extra run changes no shipped view."""
    out = shutil.copytree(SHIPPED, tmp_path_factory.mktemp("store") / "results")
    manifest, cells = copy_run(shipped(H200_LONG), STEADY, pd.Timestamp("2026-12-05T10:00Z"))
    write_run(out / "h200" / STEADY, manifest,
              [telemetry(c, unstable=c.variant == "cudnn" and c.params.seq_len == 32768) for c in cells])
    nights(out / "h200")
    # fifty nights of hopper-long (no sha, as the shipped ones) and of lab5 on a CPU (a sha, as the shipped one), all
    # older than every shipped run
    generate(out / "fifty", 50, 48, templates=(H200_LONG,))
    generate(out / "fifty", 50, 48, templates=(CPU_LAB5,))
    yield from serve(out)


def nights(folder: Path) -> list[str]:
    """lab5-night-a and lab5-night-b (a day later): in B the 4th-6th ok cells 30 % slower and the 11th incorrect;
    the keys of those four."""
    template = shipped(NIGHTLY)
    ok = [c.key for c in template.cells if c.status == "ok"]
    slower, turned = ok[3:6], ok[10]
    for run_id, day, factor in (("lab5-night-a", 10, 1.0), ("lab5-night-b", 11, 1.3)):
        manifest, cells = copy_run(template, run_id, pd.Timestamp(f"2026-11-{day}T03:00Z").to_pydatetime(),
                                   factor=lambda c: factor if c.key in slower else 1.0)
        write_run(folder / run_id, manifest, [broken(c, "incorrect", "out relative error 0.5") if
                                              c.key == turned and factor > 1 else c for c in cells])
    return [*slower, turned]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Debian's chromium, headless, with a fresh profile folder."""
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            tmp_path_factory.mktemp("chromium-profile"), executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
            viewport={"width": 1600, "height": 1000},
        )
        yield context
        context.close()


@pytest.fixture
def page(browser):
    page = browser.new_page()
    yield page
    page.close()


def settle(page) -> None:
    """Wait until the open tab holds something (so a click's rerun has begun), the script has finished, every
    element's code has loaded (streamlit shows skeletons until then) and plotly has drawn every chart."""
    page.wait_for_function(f"document.querySelector('[role=tabpanel]:not([hidden])')?.querySelector('{PLOTS}, "
                           f"{TABLES}, [data-testid=stAlert]')", timeout=60_000)
    page.wait_for_function(DRAWN, timeout=60_000)


def open_view(page, url: str) -> None:
    page.goto(url)
    settle(page)


# How many script runs the page has seen end: Streamlit measures each, from its start to its end, under this name
RUNS = "performance.getEntriesByName('script-run-cycle').length"


def rerun(page, step) -> None:
    """From the page at rest, take `step` (a back) and wait for the script run it asks for to end and draw: settle
    alone passes at once on the page drawn before, when that run has not yet begun."""
    settle(page)
    runs = page.evaluate(RUNS)
    step()
    page.wait_for_function(f"{RUNS} > {runs}", timeout=60_000)
    settle(page)


def chips(page, key: str) -> list[str]:
    """The chosen values a multiselect shows, as a person reads them."""
    return page.locator(f".st-key-{key} [data-tag] > span[title]").all_inner_texts()


def clipped_chips(page) -> list[str]:
    """Run chips whose text does not fit (the issue's 'NVIDIA H200 · 2026-…')."""
    return page.evaluate("[...document.querySelectorAll('.st-key-run [data-tag] > span[title]')]"
                         ".filter(s => s.scrollWidth > s.clientWidth).map(s => s.textContent)")


# A chart's text as a person reads it: the lines plotly draws it in (a wrapped title, a long legend name), joined by
# spaces (SVG text has no inner text, and its textContent runs the lines together)
READ = "(t => [...t.querySelectorAll('tspan.line')].map(l => l.textContent).join(' ') || t.textContent)"


def chart_texts(page, kind: str) -> list[str]:
    """Every chart's title ('gtitle') or subtitle ('gtitle-subtitle') as drawn."""
    return page.evaluate(f"[...document.querySelectorAll('{PLOTS} text.{kind}')].map({READ})")


def open_tab(page) -> str:
    return page.locator("[data-testid=stTab][aria-selected=true]").inner_text()


def in_open_tab(page, selector: str) -> int:
    return page.locator(f"[role=tabpanel]:not([hidden]) :is({selector})").count()


def assert_no_error_text(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.locator("[data-testid='stAlertContentError']").all_inner_texts() == []
    assert "Traceback" not in page.inner_text("body")


def screenshot(page, name: str) -> None:
    """The whole page: streamlit scrolls inside its main block, so the window grows to that block's height."""
    height = page.evaluate("document.querySelector(\"[data-testid='stMain']\").scrollHeight")
    page.set_viewport_size({"width": 1600, "height": min(height, 8000)})
    page.wait_for_timeout(400)  # plotly re-lays out on resize
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / f"dashboard-{name}.png")
    page.set_viewport_size({"width": 1600, "height": 1000})


def test_the_dashboard_page_has_links_to_open():
    assert len(docs_links()) >= 5


@pytest.mark.parametrize("link", docs_links())
def test_a_docs_link_opens_exactly_its_view(page, url, link):
    asked = urllib.parse.parse_qs(link[1:])
    open_view(page, url + "/" + link)
    assert_no_error_text(page)
    assert chips(page, "run") == asked["run"] and not clipped_chips(page)
    assert chips(page, "experiment") == asked.get("experiment", [])
    assert open_tab(page) == asked.get("tab", ["Latency"])[0]
    assert in_open_tab(page, PLOTS if open_tab(page) in CHARTED else TABLES) >= 1
    for key, values in asked.items():  # the URL still names every choice
        assert all(f"{key}={urllib.parse.quote(v, safe='')}" in page.url for v in values)
    if asked.get("tab") == ["Compare"]:  # docs/dashboard.md says the environments' differences come first
        warning = page.locator("[data-testid=stAlertContentWarning]").all_inner_texts()
        assert any("version cudnn: 9.19.0 → 9.14.0" in w for w in warning)


def test_every_tab_renders_with_data_and_is_photographed(page, url):
    open_view(page, f"{url}/?run=lab5-20261202-110556&run=lab5-20261202-104743")
    for tab in [t for t in TABS if t != "Soak"] + ["Soak"]:
        if tab == "Soak":  # on the shipped soak run; every other tab on the two lab5 runs
            open_view(page, f"{url}/?run=soak-20261203&tab=Soak")
        page.locator("[data-testid=stTab]", has_text=re.compile(f"^{tab}$")).click()
        settle(page)
        assert open_tab(page) == tab and (tab == "Latency" or f"tab={tab}" in page.url)
        assert_no_error_text(page)
        assert in_open_tab(page, PLOTS if tab in CHARTED else TABLES) >= 1
        assert page.locator("[data-testid=stAlertContentInfo]").count() == 0  # no "nothing to show here"
        if tab == "History":
            assert_history_marks_another_kernel(page)
        screenshot(page, tab.lower())


def assert_history_marks_another_kernel(page) -> None:
    """lab5's History (cuDNN 9.19, then 9.14): its worst regressions, cuDNN cells 1.09-1.54x slower, each ran another
    cuDNN kernel (knob_32 for knob_7), and say so as `attnbench compare` does, with the key under the table."""
    panel = page.locator("[role=tabpanel]:not([hidden])")
    rows = panel.locator("[data-testid=stMarkdownContainer] table tr", has_text="1.54×").all_inner_texts()
    assert rows and all("another kernel" in row for row in rows), rows
    assert "another GEMM: only the GEMM kernels differ" in panel.inner_text()


def test_the_reports_comparison_of_a_cudnn_version_change_fits_a_1280_px_window(page, capsys, tmp_path):
    """lab5's H200 pair (cuDNN 9.19, then 9.14): its 'ran another kernel' table, of 100-character kernel names,
    widened the page to 1940 px; the names cut to where A's and B's differ and a table too wide scrolling inside
    the page, it fits."""
    out = tmp_path / "report"
    done = in_process(capsys, "compare", SHIPPED / "h200" / "lab5-20261202-104743",
                      SHIPPED / "h200" / "lab5-20261202-110556", "--report", str(out))
    assert done.code == 1  # B regressed
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto((out / "index.html").as_uri())
    assert "knob_32" in page.inner_text("body")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    scrolled = page.evaluate("[...document.querySelectorAll('table')].filter(t => t.scrollWidth > t.clientWidth + 1)"
                             ".map(t => t.caption.textContent)")
    assert scrolled == []  # none needs its scroll bar either


def test_a_report_table_wider_than_the_page_scrolls_inside_it(page, tmp_path):
    """A cell of 400 characters without a space (a kernel list no cut shortens) scrolls its table, not the page."""
    from runner import artifacts

    html = tmp_path / "wide.html"
    html.write_text(f"<style>{artifacts.STYLE}</style>" + artifacts.table_html("wide", ["kernels"], [["k" * 400]]))
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(html.as_uri())
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280


def test_a_choice_goes_into_the_url_and_the_url_opens_it_again(page, browser, url):
    open_view(page, f"{url}/?run=lab5-20261202-110556")
    page.locator(".st-key-timer label", has_text="wall").click()
    page.wait_for_function(f"[...document.querySelectorAll('{PLOTS} text.gtitle-subtitle')].map({READ})"
                           ".every(t => t.includes('wall timer'))", timeout=60_000)
    assert "timer=wall" in page.url and "run=lab5-20261202-110556" in page.url
    again = browser.new_page()
    open_view(again, page.url)
    assert again.get_by_role("radio", name="wall").is_checked()
    subtitles = chart_texts(again, "gtitle-subtitle")
    assert subtitles and all("wall timer" in s for s in subtitles)
    again.close()


LEGEND_TEXTS = f"[...document.querySelectorAll('{PLOTS} text.legendtext')].map({READ})"


def legend(page) -> set[str]:
    """The open tab's charts' legend entries, as drawn."""
    return set(page.evaluate(f"[...document.querySelectorAll('[role=tabpanel]:not([hidden]) {PLOTS} text.legendtext')]"
                             ".map(t => t.textContent)"))


def test_a_filter_chosen_in_the_sidebar_redraws_the_chart_with_it(page, url):
    """A filter chosen in the sidebar, as a person chooses it (typed, Enter), redraws the chart with it and goes into
    the URL."""
    open_view(page, f"{url}/?run=lab5-20261202-110556")
    assert {"naive", "xla", "cudnn"} <= legend(page)
    box = page.locator(".st-key-variant input")
    box.fill("xla")
    box.press("Enter")
    page.wait_for_function(f"[...document.querySelectorAll('{PLOTS} text.legendtext')].every(t => t.textContent !== "
                           "'cudnn')", timeout=60_000)
    settle(page)
    assert chips(page, "variant") == ["xla"] and "variant=xla" in page.url
    assert legend(page) & {"naive", "xla", "cudnn"} == {"xla"}
    assert_no_error_text(page)


def test_the_telemetry_view_draws_clock_power_and_tflop_per_joule(page, url):
    open_view(page, f"{url}/?run={STEADY}&clock=true")
    assert {"fwd: latency vs T", "fwd: SM clock vs T", "fwd: power vs T"} <= set(chart_texts(page, "gtitle"))
    assert (f"1 cell unsettled (sampled before its power state settled or on an SM clock that moved more than "
            f"{100 * UNSTABLE_SPREAD:g} %)") in page.inner_text("body")
    screenshot(page, "telemetry")
    open_view(page, f"{url}/?run={STEADY}&tab=Throughput&rate=TFLOP%2FJ")
    assert "fwd: TFLOP per joule vs T" in chart_texts(page, "gtitle")
    screenshot(page, "tflop-per-joule")


def test_published_figures_are_drawn_beside_the_measured_ones(page, url):
    """hopper-long runs the shape of cudnn-frontend's published H200 figures (docs/reference/): Latency and
    Throughput draw them as a "published" series, the Leaderboard gives measured / published per cell."""
    run = H200_LONG.split("/")[1]
    series = "published: cuDNN 9.19.1 (cudnn-frontend 1.19.0), NVIDIA H200"
    for tab in ("Latency", "Throughput"):
        open_view(page, f"{url}/?run={run}&tab={tab}")
        legends = page.evaluate(LEGEND_TEXTS)  # a long name's two lines read as one
        assert series in legends and f"{series} (FP8)" in legends, (tab, legends)
        assert_no_error_text(page)
        screenshot(page, f"published-{tab.lower()}")
    open_view(page, f"{url}/?run={run}&tab=Leaderboard")
    assert "Beside published figures" in page.inner_text("body")
    assert in_open_tab(page, TABLES) >= 2
    assert_no_error_text(page)
    screenshot(page, "published-leaderboard")


SERVING = ROOT / "tests" / "fixtures" / "serving-cpu"  # README.md there: how the real runner made it on a CPU
SERVING_RUN = "serving-cpu-20261206"
DECODE_SWEEP = ROOT / "docs" / "reference" / "cudnn-frontend-h200-decode-sweep-llama3.1.csv"
TRACES = """() => [...document.querySelectorAll('[role=tabpanel]:not([hidden]) .js-plotly-plot')].map(p => ({
  title: p.layout.title.text, traces: p._fullData.map(t => ({name: (t.name || '').replaceAll('<br>', ' '), hover: t.hovertemplate || '',
                                                             x: Array.from(t.x || []), y: Array.from(t.y || [])}))}))"""


@pytest.fixture(scope="module")
def url_serving(tmp_path_factory):
    """The serving fixture alone: serving.yaml's dense (xla) and paged (xla_paged) cells at decode_sweep's shapes,
    B 1 and 8 x KV 2k and 8k x T 1 and 8, run on a CPU, its manifest naming an H200: a published figure stands only
    beside a run of the GPU it was measured on (runner.published.on_gpu)."""
    store = shutil.copytree(SERVING, tmp_path_factory.mktemp("store-serving") / "results")
    manifest = store / SERVING_RUN / "manifest.json"
    facts = json.loads(manifest.read_text())
    facts["machine"]["gpu"] = {"name": "NVIDIA H200"}
    manifest.write_text(json.dumps(facts))
    yield from serve(store)


def test_the_decode_view_draws_gbps_by_kv_length_and_batch_beside_the_published_decode_sweep(page, url_serving):
    """Issue 38: the Throughput tab's GB/s along the batch, a line per KV length and new tokens for each variant,
    and on the dense experiment cudnn-frontend's decode_sweep beside them, each line the file's GB/s at its own KV
    length and T; the paged experiment has no published figure (the published cudnn reads a dense cache)."""
    open_view(page, f"{url_serving}/?run={SERVING_RUN}&tab=Throughput&rate=GB%2Fs")
    assert_no_error_text(page)
    charts_by_title = {c["title"].replace("<br>", " "): c["traces"] for c in page.evaluate(TRACES)}
    dense, paged = charts_by_title["dense: GB/s (Q, K, V, O once) vs B"], charts_by_title[
        "decode-sweep: GB/s (Q, K, V, O once) vs B"]
    cases = [f"T{t} S{s}" for t in (1, 8) for s in (2048, 8192)]
    for traces, variant in ((dense, "xla"), (paged, "xla_paged")):
        ours = {t["name"] for t in traces if t["name"].startswith(f"{variant} · ")}
        assert ours == {f"{variant} · {SERVING_RUN} · {case}" for case in cases}, ours
    series = "published: cuDNN 9.27.0 decode, dense K and V (cudnn-frontend attention_inference), NVIDIA H200"
    drawn = {(t["hover"].split("<br>")[0], x): y for t in dense if t["name"] == series for x, y in zip(t["x"], t["y"])}
    rows = [r for r in csv.DictReader(open(DECODE_SWEEP)) if r["batch_size"] in ("1", "8") and r["kv_len"] in
            ("2048", "8192")]
    expected = {(f"{series} · T{r['q_tokens']} S{r['kv_len']}", int(r["batch_size"])): float(r["gbps"]) for r in rows}
    assert drawn.keys() == expected.keys()
    assert [drawn[k] for k in expected] == pytest.approx(list(expected.values()), rel=2e-3)
    assert not any(t["name"] == series for t in paged)
    legends = page.evaluate(LEGEND_TEXTS)
    assert legends.count(series) == 1, legends
    screenshot(page, "decode-throughput")


OVERLAPS = """() => {
  const plot = document.querySelector('[role=tabpanel]:not([hidden]) .js-plotly-plot');
  const boxes = [...plot.querySelectorAll('text')].filter(t => t.textContent.trim())
    .map(t => ({text: t.textContent, r: t.getBoundingClientRect()})).filter(b => b.r.width > 0 && b.r.height > 0);
  const hits = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i].r, b = boxes[j].r;
    if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
      hits.push([boxes[i].text, boxes[j].text]);
  }
  return [boxes.length, hits];
}"""


def overlapping_text(page) -> list[list[str]]:
    """Pairs of texts drawn over each other in the open tab's first chart (its titles, ticks, legend, labels)."""
    count, hits = page.evaluate(OVERLAPS)
    assert count > 10  # the chart's texts were found
    return hits


def test_a_series_bookmarked_before_its_label_named_policy_none_opens_it(page, url):
    """A ?series= bookmarked when a run from before the choice of policy left it out of the label opens that
    series in the browser too, by its label now, with no "not found" warning."""
    old, now = "lab5 · NVIDIA H200", "lab5 · NVIDIA H200 · none"
    open_view(page, f"{url}/?run=lab5-20261202-110556&tab=History&hexp=fp8&series={urllib.parse.quote(old)}")
    assert_no_error_text(page)
    assert page.locator(".st-key-series input").input_value() == now
    assert "has no runs in this store" not in page.inner_text("body")

    assert asked_in(page.url)["series"] == [now]  # the bookmark's URL names the series by its label now


def asked_in(address: str) -> dict[str, list[str]]:
    """The query parameters of an address, as the dashboard reads them."""
    return urllib.parse.parse_qs(urllib.parse.urlparse(address).query)


@pytest.fixture
def url_growing(tmp_path):
    """A store of two runs a day apart, lab5 then hopper-long (another series), that a test adds to."""
    copy_files(H200_LAB5, tmp_path / "h200" / "night-1", "night-1", "2026-12-20T03:00:00+00:00")
    copy_files(H200_LONG, tmp_path / "h200" / "night-2", "night-2", "2026-12-21T03:00:00+00:00")
    for url in serve(tmp_path):
        yield url, tmp_path


def test_the_address_bar_of_a_page_opened_bare_keeps_its_view_when_a_newer_run_lands(browser, url_growing):
    """docs/dashboard.md, Links: a page opened with no query chooses the newest run, History its series and Compare
    its runs A and B, and writes each into the URL as it chooses it; that URL, copied and opened after a newer run of
    another series landed, opens the same view, where the page opened bare now shows the newer run."""
    url, store = url_growing
    page = browser.new_page()
    open_view(page, url)
    copied = {"Latency": page.url}
    for tab in ("History", "Compare"):
        page.locator("[data-testid=stTab]", has_text=re.compile(f"^{tab}$")).click()
        page.wait_for_function(f"location.search.includes('tab={tab}')", timeout=60_000)
        settle(page)
        copied[tab] = page.url
    page.close()
    assert asked_in(copied["Latency"])["run"] == ["night-2"]
    assert asked_in(copied["History"])["series"] == ["hopper-long · NVIDIA H200 · none"]
    assert (asked_in(copied["Compare"])["a"], asked_in(copied["Compare"])["b"]) == (["night-1"], ["night-2"])
    copy_files(H200_LAB5, store / "h200" / "night-3", "night-3", "2026-12-22T03:00:00+00:00")
    page = browser.new_page()
    open_view(page, url)
    page.get_by_role("button", name="Reload runs").click()  # the server reads the store again
    page.wait_for_function("document.querySelector('[data-testid=stSidebar]').innerText.includes('3 runs')",
                           timeout=60_000)
    open_view(page, url)
    assert chips(page, "run") == ["night-3"]  # bare, the page now opens the newer run
    for tab, address in copied.items():
        open_view(page, address)
        assert chips(page, "run") == ["night-2"] and open_tab(page) == tab
        assert_no_error_text(page)
    open_view(page, copied["History"])
    assert page.locator(".st-key-series input").input_value() == "hopper-long · NVIDIA H200 · none"
    open_view(page, copied["Compare"])
    assert [page.locator(f".st-key-{key} input").input_value() for key in "ab"] == ["night-1", "night-2"]
    page.close()


def test_a_compare_link_naming_b_alone_writes_bs_run_before_as_a(page, url):
    """docs/dashboard.md, Links: the address bar names B's run before as A (compare --against previous), where it
    named a run paired with the newest run, another spec and policy."""
    open_view(page, f"{url}/?tab=Compare&b=lab5-cold-20261203-023042")
    page.wait_for_function("location.search.includes('a=')", timeout=60_000)
    asked = asked_in(page.url)
    assert (asked["a"], asked["b"]) == (["lab5-warm-20261202-182308"], ["lab5-cold-20261203-023042"])
    assert [page.locator(f".st-key-{key} input").input_value() for key in "ab"] == [*asked["a"], *asked["b"]]


def test_back_from_a_history_opened_bare_steps_through_its_run_then_the_bare_address(browser, url_growing):
    """docs/dashboard.md, Links: each write of a choice is an entry in the browser's history (Streamlit pushes one
    per write, and the run's must come before the sidebar draws, the series' before History does)."""
    url, _ = url_growing
    page = browser.new_page()
    open_view(page, f"{url}/?tab=History")
    page.wait_for_function("location.search.includes('series=')", timeout=60_000)
    rerun(page, page.go_back)
    assert asked_in(page.url) == {"tab": ["History"], "run": ["night-2"]}
    assert page.locator(".st-key-series input").input_value() == ""
    assert "Choose a spec · GPU · power policy to draw its runs." in page.inner_text("body")
    page.go_back()
    page.wait_for_function("!location.search.includes('run=')", timeout=60_000)
    assert asked_in(page.url) == {"tab": ["History"]}
    page.close()


def test_history_of_llama_70b_has_no_overlapping_text_and_is_photographed(page, url):
    """Issue 40: the shipped llama3.1-70b runs (steady) hold different cells; History's mean is over the cells
    every run holds and its steps are a legend entry, so no text stands on another. The screenshot is in docs/."""
    open_view(page, f"{url}/?run=llama3.1-70b-20261206-tefp8&tab=History&hexp=prefill")
    assert_no_error_text(page)
    assert "geometric mean of the cells every run holds" in " ".join(chart_texts(page, "gtitle"))
    assert overlapping_text(page) == []
    screenshot(page, "history-llama3.1-70b")


EVERY_CHART = """() => [...document.querySelectorAll('[role=tabpanel]:not([hidden]) .js-plotly-plot')].map(plot => {
  const svg = plot.querySelector('.main-svg').getBoundingClientRect();
  const boxes = [...plot.querySelectorAll('text')].filter(t => t.textContent.trim())
    .map(t => ({text: t.textContent, legend: t.classList.contains('legendtext'), r: t.getBoundingClientRect()}))
    .filter(b => b.r.width > 0 && b.r.height > 0);
  const hits = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i].r, b = boxes[j].r;
    if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
      hits.push([boxes[i].text, boxes[j].text]);
  }
  const out = boxes.filter(b => b.legend && (b.r.right > svg.right + 1 || b.r.bottom > svg.bottom + 1));
  const area = plot.querySelector('.nsewdrag').getBoundingClientRect();  // the plot area
  const titles = [...plot.querySelectorAll('.gtitle, .gtitle-subtitle')].map(t => t.getBoundingClientRect())
    .filter(r => r.width > 0);
  const titlesOut = titles.filter(r => r.left < svg.left - 1 || r.right > svg.right + 1 || r.top < svg.top - 1
                                       || r.bottom > area.top + 1);
  const legends = ['legend', 'legend2'].map(id => plot.querySelector(`g.${id} > rect.bg`)).filter(r => r)
    .map(r => r.getBoundingClientRect()).filter(r => r.height > 0);  // the blank under each legend: its next's top
  const blank = legends.map((r, i) => Math.round((legends[i + 1]?.top ?? svg.bottom) - r.bottom));
  return {title: plot.querySelector('.gtitle')?.textContent, texts: boxes.length, titles: titles.length, hits,
          out: out.map(b => b.text), titlesOut: titlesOut.length, legends: legends.length, blank};
})"""


# Markdown tables that run past their column (under the chart beside them), or scroll inside it: header, pixels
TABLES_OUT = """[...document.querySelectorAll('[role=tabpanel]:not([hidden]) [data-testid=stMarkdownContainer] table')]
  .map(t => [t.querySelector('th')?.textContent, Math.round(t.getBoundingClientRect().right
    - t.closest('[data-testid=stColumn], [data-testid=stVerticalBlock]').getBoundingClientRect().right)
    + t.scrollWidth - t.clientWidth]).filter(([head, over]) => over > 0)"""


# Text the page cuts off: with an ellipsis (a widget's label too narrow for its column), or a choice's value clipped
CUT = """[...document.querySelectorAll('[data-testid=stMain] *')].filter(e => (getComputedStyle(e).textOverflow ===
  'ellipsis' || e.matches('[data-testid=stSelectbox] input')) && e.scrollWidth > e.clientWidth + 1)
  .map(e => e.textContent || e.value)"""


@pytest.mark.parametrize("tab, width", [("Latency", 1280), ("Throughput", 1280), ("Latency", 1920),
                                        ("History", 1280)])
def test_long_legends_and_titles_wrap_into_rows_of_their_own_and_leave_no_blank_rows(browser, url, tab, width):
    """Three llama3.1-70b runs, three variants, the clock-unstable ring and both published series, in a 1280 px
    window (a chart beside another or beside a table: the narrowest plots a chart gets) and a 1920 px one: in every
    chart of the tab the variants' legend wraps into the rows the figure was given and a published series' long name
    onto lines of its own, so no text stands on another (the runs' legend below it, the axis) and no legend runs out
    of its chart; a long title or subtitle wraps onto lines the top margin was given, inside the chart and above its
    plot. The wider window draws the legends in the same rows (their columns are fractions of the plot's width), so
    no blank row stands under a legend, nor under History's full-width one. The nvbench table beside the chart fits
    its column, where Streamlit's padding ran it 49 px under the next, and no label or chosen value is cut (History's
    spec, GPU and policy)."""
    page = browser.new_page()
    page.set_viewport_size({"width": width, "height": 1000})
    runs = "&".join(f"run=llama3.1-70b-{r}" for r in ("20261206-tefp8", "20261204-padded", "20261204-xla"))
    open_view(page, f"{url}/?{runs}&tab={tab}" + ("&hexp=prefill" if tab == "History" else ""))
    assert_no_error_text(page)
    charts = page.evaluate(EVERY_CHART)
    assert len(charts) >= (6 if tab == "Throughput" else 1) and all(c["texts"] > 10 and c["titles"] == 2 and
                                                                    c["legends"] >= 1 for c in charts)
    assert [(c["title"], c["hits"], c["out"], c["titlesOut"]) for c in charts
            if c["hits"] or c["out"] or c["titlesOut"]] == []
    assert [(c["title"], c["blank"]) for c in charts if max(c["blank"]) > 16] == []  # a gap of 6, 12 at the bottom
    assert page.evaluate(TABLES_OUT) == []  # the nvbench table beside the chart (six columns) fits its column
    assert page.evaluate(CUT) == []  # every label whole ('GPU cloc…', 'Tables as …' at 1280 px)
    page.close()


@pytest.mark.parametrize("run, experiment, axis", [("hopper-long-0049", "fwd", "date"),
                                                    ("lab5-0049", "seq-len", "git sha")])
def test_a_history_of_fifty_runs_stays_readable(page, url, run, experiment, axis):
    """Fifty nights (hopper-long's cudnn 8 % slower from the 30th): no text over another, by date or by git sha."""
    open_view(page, f"{url}/?run={run}&tab=History&hexp={experiment}&hx={urllib.parse.quote(axis)}")
    assert "drawn against their date" not in page.inner_text("body")
    assert_no_error_text(page)
    drawn = re.search(r"· (\d+) runs ·", " ".join(chart_texts(page, "gtitle-subtitle")))
    assert drawn and int(drawn[1]) >= 50
    assert overlapping_text(page) == []
    screenshot(page, f"history-fifty-runs-{axis.replace(' ', '-')}")


# Counts every evaluation of plotly.js (its last act sets window.Plotly)
PLOTLY_SETS = """window.plotlySets = 0;
Object.defineProperty(window, 'Plotly', {configurable: true, get() { return window.plotlyModule; },
                                         set(value) { window.plotlySets += 1; window.plotlyModule = value; }});"""
RESOURCE = "name => performance.getEntriesByType('resource').filter(e => e.name.includes(name)).map(e => e.startTime)"


def test_plotly_js_is_asked_for_before_the_session_starts_and_evaluated_once(page, url):
    """dashboard/preload.py: the page asks for Streamlit's plotly chunk with its own code, before it asks for the
    session (host-config), and the frontend's own import of it finds the same module."""
    page.add_init_script(PLOTLY_SETS)
    open_view(page, url)
    plotly, session = page.evaluate(RESOURCE, "/PlotlyChart."), page.evaluate(RESOURCE, "/_stcore/host-config")
    assert len(plotly) == 1 and plotly[0] < session[0]
    assert page.evaluate("window.plotlySets") == 1 and in_open_tab(page, PLOTS) >= 1


def test_a_view_without_charts_has_plotly_js_evaluated_all_the_same(page, url):
    """The import runs once the page has asked for its script run, whether a chart comes or not."""
    page.add_init_script(PLOTLY_SETS)
    open_view(page, url + "/?tab=Runs")
    assert page.locator(PLOTS).count() == 0
    page.wait_for_function("window.plotlySets === 1", timeout=30_000)


def metric(page, label: str) -> str:
    return page.locator("[data-testid=stMetric]", has_text=label).locator("[data-testid=stMetricValue]").inner_text()


def test_the_compare_tab_flags_a_regression_and_follows_the_threshold(page, url):
    """Issue 23: the tab shows what `attnbench compare` decides (3 cells slower, 1 no longer ok), and its
    Threshold % goes into the URL as --threshold would."""
    open_view(page, f"{url}/?run=lab5-night-b&run=lab5-night-a&tab=Compare&a=lab5-night-a&b=lab5-night-b")
    assert_no_error_text(page)
    assert metric(page, "Slower beyond noise") == "3" and metric(page, "Faster beyond noise") == "0"
    warnings = page.locator("[data-testid=stAlertContentWarning]").all_inner_texts()
    assert any("1 cell was ok in A and is not in B" in w for w in warnings)
    assert in_open_tab(page, PLOTS) == 1 and in_open_tab(page, TABLES) >= 3  # changes, geomeans, cells, environments
    screenshot(page, "compare-regression")
    threshold = page.locator(".st-key-threshold input")
    threshold.fill("40")
    threshold.press("Enter")
    page.wait_for_function("[...document.querySelectorAll('[data-testid=stMetric]')].some(m => "
                           "m.innerText.includes('Slower beyond noise') && m.innerText.trim().endsWith('0'))",
                           timeout=60_000)
    settle(page)
    assert "threshold=40" in page.url and metric(page, "Slower beyond noise") == "0"


@pytest.fixture(scope="module")
def url_500(tmp_path_factory):
    """500 generated runs of 100 cells (the newest a copy of hopper-long grown to nine swept experiments), as
    scripts/bench_dashboard.py's 500x100 store."""
    out = tmp_path_factory.mktemp("store-500")
    generate(out, 500, 100)
    yield from serve(out)


@pytest.mark.slow
def test_at_500_runs_the_first_view_draws_the_headline_and_the_rest_on_one_click(page, url_500):
    """Issue 40: the browser draws every chart of a view before the first is on screen; the first view holds one
    chart, the other eight experiments open under it, and the Runs list offers the newest 100 of 500."""
    open_view(page, url_500)
    assert_no_error_text(page)
    assert chips(page, "run") == ["hopper-long-0499"] and in_open_tab(page, PLOTS) == 1
    assert "Listing the newest 100" in page.inner_text("[data-testid=stSidebar]")
    page.locator(".st-key-more summary", has_text="8 more experiments").click()
    page.wait_for_function(f"document.querySelectorAll('[role=tabpanel]:not([hidden]) {PLOTS}').length > 1",
                           timeout=60_000)
    settle(page)
    assert in_open_tab(page, PLOTS) == 9 and "more=true" in page.url
