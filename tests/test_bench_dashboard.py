"""scripts/bench_dashboard.py: a first chart and its parts read on one clock, the page's."""

from __future__ import annotations

import time

import pytest

from helpers import script


@pytest.fixture(scope="module")
def bench():
    return script("scripts/bench_dashboard.py")


class Page:
    """A page whose clock (milliseconds after navigation started) says what happened when; Python's clock moves on
    while it is asked for the page, as a browser's answers take time."""

    clocks = {"message": 410.0, "plotly": 1900.0, "chart": 2350.0}
    plotly = {"startTime": 1200.0, "responseEnd": 1500.0}

    def add_init_script(self, script: str) -> None:
        self.script = script

    def goto(self, url: str) -> None:
        time.sleep(0.05)

    def wait_for_function(self, expression: str, timeout: float) -> None:
        time.sleep(0.05)

    def evaluate(self, expression: str):
        return {"window.clocks": self.clocks, "window.longTasks": [90.0, 640.0]}.get(expression, self.plotly)


def test_a_first_chart_and_its_parts_are_all_on_the_pages_clock(bench):
    page = Page()
    parts = bench.first_chart(page, "http://dashboard")
    assert parts == {"first chart": 2.35, "websocket's first message": 0.41, "plotly.js asked for": 1.2,
                     "plotly.js loaded": 1.5, "plotly.js evaluated": 1.9, "longest task": 0.64}
