"""Measure the dashboard as a team meets it: `streamlit run` on a store, drawn by Debian's headless chromium.

Stores of N runs x M cells are made from the shipped records (tests/stores.py: each a shipped run copied under a
new run id, date and git sha, its times jittered, its experiments repeated to reach M cells). Per store and
repetition, on a freshly started server:

- first chart (cold): a browser opens the default view (the newest run, Latency) and waits for the first chart
  to be drawn; the server reads the store for this first session;
- first chart (warm): a second session opens the same view; (returning browser): a third, in the first session's
  browser context, so with plotly.js and the page's code in the browser's cache;
- timer toggle: device -> wall -> device in that session, each until every chart says the new timer;
- server RSS after all of that, and its peak (VmHWM);
- 200 runs: History opened (it reads a series' 80 runs); then every run selected, until fully drawn (the
  memory figures include all of it); stores of more runs (500x100) measure the first chart, the toggle and memory;
- for scale, streamlit's own floor on this machine: the first chart of an app that draws only one tiny chart
  (`floor`), and the same app served with the dashboard's preloading of plotly.js (`floor-preloaded`: an st.App
  with dashboard/preload.py's middleware, as dashboard/serve.py has);
- where a first chart's seconds go (`parts`): the websocket's first message (the page's code loaded and the session
  opened), plotly.js asked for (Streamlit loads plotly's 4.7 MB chunk when the first chart's element arrives; the
  dashboard's page asks for it at once) and loaded, plotly.js evaluated (when it set `window.Plotly`, the end of its
  one main-thread task) and the longest main-thread task.

A first chart and its parts are read on one clock, the page's (seconds after its navigation started): the first chart
is when the page's first plot drew its svg, as the browser saw it. The toggle and the views fully drawn are timed on
Python's clock around the browser's actions.

The dashboard is served as `attnbench dashboard` serves it: `streamlit run dashboard/serve.py`, which prepares itself
(imports, the store's manifests) before it answers; the measurement starts once the server answers.

    .venv/bin/python scripts/bench_dashboard.py                        # shipped, 40x400, 200x400, 500x100; 3 reps
    .venv/bin/python scripts/bench_dashboard.py --stores 200x400 --repeat 1
    .venv/bin/python scripts/bench_dashboard.py --import-only          # `import dashboard.data`, 7 fresh interpreters
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright import sync_api

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the stores the dashboard's tests read, made the same way
from stores import SHIPPED, generate  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
EXTRA_VIEWS_UP_TO = 200  # runs in a store beyond which only the first chart, the toggle and memory are measured
PLOTS = ".js-plotly-plot"
DRAWN = ("document.querySelector('[data-testid=stApp]')?.dataset.testScriptState === 'notRunning' "
         "&& !document.querySelector('[data-testid=stSkeleton]') "  # elements whose code is still loading
         "&& [...document.querySelectorAll('.js-plotly-plot')].every(p => p.querySelector('.main-svg'))")
# A chart's text as a person reads it: a wrapped subtitle's lines joined by spaces (its textContent runs them together:
# 'devicetimer' where charts.fit_titles broke the line after 'device')
READ = "(t => [...t.querySelectorAll('tspan.line')].map(l => l.textContent).join(' ') || t.textContent)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FLOOR_APP = """import plotly.graph_objects as go
import streamlit as st

st.title("attnbench results")
st.tabs(["Latency"])[0].plotly_chart(go.Figure(go.Scatter(x=[1, 2], y=[1, 2])), theme=None)
"""
FLOOR_PRELOADED = """import streamlit as st
from starlette.middleware import Middleware

from dashboard.preload import PreloadPlotly

app = st.App("floor_app.py", middleware=[Middleware(PreloadPlotly)])
"""


@contextlib.contextmanager
def server(results: Path, app: Path):
    """`streamlit run APP` on `results`; yields its URL and process id."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(app), "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--server.port", str(port), "--server.address", "127.0.0.1",
         "--", "--results", str(results)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                break
            time.sleep(0.2)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def memory_mib(pid: int) -> tuple[float, float]:
    """(resident, peak resident) of a process, MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))


LONG_TASKS = """window.longTasks = [];
new PerformanceObserver(list => list.getEntries().forEach(e => window.longTasks.push(e.duration)))
  .observe({type: 'longtask', buffered: true});"""
# The page's own clock (performance.now(): milliseconds since navigation started) at its websocket's first message,
# when plotly.js has been evaluated (its last act sets window.Plotly) and at its first chart's first drawn element, so
# that every part of a first chart is read on one clock
CLOCKS = """window.clocks = {};
const NativeWebSocket = window.WebSocket;
window.WebSocket = class extends NativeWebSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', () => { window.clocks.message ??= performance.now(); }, {once: true});
  }
};
Object.defineProperty(window, 'Plotly', {configurable: true, set(value) {
  window.clocks.plotly = performance.now();
  Object.defineProperty(window, 'Plotly', {value, writable: true, configurable: true});
}});
new MutationObserver((_, observer) => {
  if (document.querySelector('.js-plotly-plot .main-svg')) {
    window.clocks.chart = performance.now();
    observer.disconnect();
  }
}).observe(document, {childList: true, subtree: true});"""
PLOTLY_JS = """() => performance.getEntriesByType('resource').find(e => /PlotlyChart[.][^/]*[.]js$/.test(e.name))"""


PARTS = [f"{part} (cold)" for part in ("websocket's first message", "plotly.js asked for", "plotly.js loaded",
                                       "plotly.js evaluated", "longest task")]
METHOD = ("first chart: seconds from navigation start to the first chart's drawn svg, on the page's clock "
          "(performance.now()), as are its parts; the timer toggle and the views fully drawn: Python's clock around "
          "the browser's actions")


def first_chart(page, url: str) -> dict[str, float]:
    """Seconds from asking for the page (its navigation start) to its first drawn chart, and its parts, all on the
    page's clock; then waits for the page to finish."""
    page.add_init_script(LONG_TASKS + "\n" + CLOCKS)
    page.goto(url)
    page.wait_for_function("window.clocks.chart !== undefined", timeout=300_000)
    clocks, plotly = page.evaluate("window.clocks"), page.evaluate(PLOTLY_JS)
    parts = {"first chart": clocks["chart"] / 1000, "websocket's first message": clocks["message"] / 1000,
             "plotly.js asked for": plotly["startTime"] / 1000, "plotly.js loaded": plotly["responseEnd"] / 1000,
             "plotly.js evaluated": clocks["plotly"] / 1000,
             "longest task": max(page.evaluate("window.longTasks"), default=0) / 1000}
    drawn(page)
    return parts


def drawn(page) -> None:
    """Wait until the script run is over, every element has loaded and plotly has drawn every chart."""
    page.wait_for_function(DRAWN, timeout=600_000)


def fully_drawn(page, url: str) -> float:
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_selector(f"{PLOTS} .main-svg", timeout=600_000)
    drawn(page)
    return time.perf_counter() - start


def toggle(page, timer: str) -> float:
    """Seconds from clicking a timer to every chart redrawn by it."""
    start = time.perf_counter()
    page.locator(".st-key-timer label", has_text=timer).click()
    page.wait_for_function(f"[...document.querySelectorAll('{PLOTS} text.gtitle-subtitle')].map({READ})"
                           f".every(t => t.includes('{timer} timer'))", timeout=120_000)
    return time.perf_counter() - start


def first_charts(browser, url: str):
    """The first session's first chart (cold) with its parts, then a second session's (warm), each in a fresh
    browser context (nothing cached); then a third session in the first one's context (a returning browser: plotly.js
    and the page's code from its cache, as Streamlit serves them immutable for a year); and the second one's page."""
    returning = browser.new_context(viewport={"width": 1600, "height": 1000})
    cold = first_chart(returning.new_page(), url)
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    warm = first_chart(page, url)
    again = first_chart(returning.new_page(), url)
    return {**{f"{part} (cold)": s for part, s in cold.items()}, "first chart (warm)": warm["first chart"],
            "first chart (returning browser)": again["first chart"]}, page


def repetition(results: Path, extra: dict[str, str], app: Path) -> dict[str, float]:
    """One fresh server: cold and warm first chart, three toggles, extra views (name -> query), memory."""
    with server(results, app) as (url, pid), sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        found, page = first_charts(browser, url)
        found["timer toggle"] = statistics.median(toggle(page, t) for t in ("wall", "device", "wall"))
        for name, query in extra.items():
            found[name] = fully_drawn(browser.new_page(viewport={"width": 1600, "height": 1000}), f"{url}/?{query}")
        found["server RSS (MiB)"], found["server peak RSS (MiB)"] = memory_mib(pid)
        browser.close()
    return found


def floor(app: Path) -> dict[str, float]:
    """First chart, cold and warm, of an app that draws one tiny chart: what any streamlit page costs here."""
    with server(SHIPPED, app) as (url, pid), sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        found = first_charts(browser, url)[0]
        found["server RSS (MiB)"], found["server peak RSS (MiB)"] = memory_mib(pid)
        browser.close()
    return found


def bench(name: str, where: Path, extra: dict[str, str] | None, repeat: int, app: Path) -> dict[str, list[float]]:
    """`repeat` repetitions of `app` on the store at `where` (for the floor: the app at `where`)."""
    runs = [floor(where) if extra is None else repetition(where, extra, app) for _ in range(repeat)]
    print(f"{name}: " + "; ".join(f"{k} {', '.join(f'{r[k]:.2f}' for r in runs)}" for k in runs[0]), flush=True)
    return {k: [r[k] for r in runs] for k in runs[0]}


def import_seconds(times: int = 7) -> list[float]:
    """`import dashboard.data` in fresh interpreters (the first warms the bytecode cache and is dropped)."""
    code = "import time; t = time.perf_counter(); import dashboard.data; print(time.perf_counter() - t)"
    out = [float(subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                                check=True).stdout) for _ in range(times + 1)]
    return out[1:]


def store(spec: str, root: Path) -> tuple[Path, dict[str, str] | None]:
    """'shipped', 'NxM', 'floor' or 'floor-preloaded': the results folder (a floor: the app) and the extra views to
    time there (a floor: None)."""
    if spec == "shipped":
        return SHIPPED, {}
    if spec.startswith("floor"):
        (root / "floor_app.py").write_text(FLOOR_APP)
        (root / "floor_preloaded.py").write_text(FLOOR_PRELOADED)
        return root / {"floor": "floor_app.py", "floor-preloaded": "floor_preloaded.py"}[spec], None
    runs, cells = map(int, spec.split("x"))
    out = root / spec
    ids = generate(out, runs, cells)
    if runs > EXTRA_VIEWS_UP_TO:  # the first chart alone: what a person opening the dashboard meets
        return out, {}
    extra = {"History opened": "tab=History"} if runs >= 100 else {}
    extra["all runs selected, fully drawn"] = "&".join(f"run={r}" for r in ids)
    return out, extra


def cell(values: list[float], mib: bool) -> str:
    """'1.23 s (1.10–1.40)': the median, then the range over repetitions."""
    text = "{:.0f} MiB" if mib else "{:.2f} s"
    spread = f" ({min(values):.2f}–{max(values):.2f})" if len(values) > 1 else ""
    return text.format(statistics.median(values)) + spread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", nargs="+", default=["floor", "shipped", "40x400", "200x400", "500x100"],
                        help="floor (a one-chart app, for scale), floor-preloaded (the same served with "
                             "dashboard/preload.py), shipped (examples/results) or RUNSxCELLS")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--import-only", action="store_true")
    parser.add_argument("--app", type=Path, default=REPO / "dashboard" / "serve.py",
                        help="what streamlit runs for every store but the floor (dashboard/app.py: unprepared)")
    args = parser.parse_args()
    seconds = import_seconds()
    print(f"import dashboard.data: median {statistics.median(seconds):.2f} s "
          f"(min {min(seconds):.2f}, max {max(seconds):.2f}, {len(seconds)} fresh interpreters)", flush=True)
    if args.import_only:
        return
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    root = Path(tempfile.mkdtemp(prefix="attnbench-bench-"))
    try:
        results = {spec: bench(spec, *store(spec, root), repeat=args.repeat, app=args.app.resolve())
                   for spec in args.stores}
    finally:
        shutil.rmtree(root)
    print(f"load average at end: {os.getloadavg()[0]:.1f}\n\n{METHOD}\n\nmedian of {args.repeat} (min–max)\n")
    keys = sorted({k for r in results.values() for k in r}, key=lambda k: ("MiB" in k, "first" not in k, k))
    table(results, [k for k in keys if k not in PARTS])
    print("\nwhere the cold first chart's seconds went (seconds after navigation started, the page's clock; longest "
          "task: its length)\n")
    table(results, ["first chart (cold)", *PARTS])


def table(results: dict[str, dict[str, list[float]]], keys: list[str]) -> None:
    print("| store | " + " | ".join(keys) + " |\n|---|" + "---|" * len(keys))
    for spec, found in results.items():
        print(f"| {spec} | " + " | ".join(cell(found[k], "MiB" in k) if k in found else "—" for k in keys) + " |")


if __name__ == "__main__":
    main()
