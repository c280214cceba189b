"""runner/run.py's loop on its own: one decline verdict per cell, the look-ahead found by position, declined cells
spooled together. A real spool and store in a temporary folder; no worker is started (every cell here either
declines or is only looked ahead at)."""

from __future__ import annotations

import threading

import pytest
from rich.console import Console

from helpers import params
from runner import run
from runner.cells import Cell
from runner.machine import current_device
from runner.shape import Params
from runner.registry import VARIANTS, variant
from runner.spool import Spool, Uploader, spool_store
from runner.store import LocalStore

CALLS: list[Params] = []


@pytest.fixture
def counted():
    """A variant whose rule counts its calls and declines odd seq_len; removed afterwards."""
    def check(p: Params) -> str | None:
        CALLS.append(p)
        return f"test_counted declines odd seq_len {p.seq_len}" if p.seq_len % 2 else None

    CALLS.clear()
    variant("test_counted", check=check)(lambda p: None)
    yield "test_counted"
    VARIANTS.pop("test_counted")


def context(tmp_path, stop: threading.Event | None = None) -> run.Context:
    store = LocalStore(tmp_path / "out")
    spool = Spool(spool_store(tmp_path / "spool", store), "r", None)
    uploader = Uploader(spool, store, 30.0)
    return run.Context(None, spool, uploader, None, current_device(), None, None, 60.0, stop or threading.Event())


def test_each_cells_verdict_is_evaluated_once_and_declined_cells_are_spooled(tmp_path, counted):
    cells = [Cell("e", counted, params(seq_len=n)) for n in range(1, 200, 2)]  # all odd: all declined
    ctx = context(tmp_path)
    assert run.measure_all(ctx, cells, set(), Console(file=open("/dev/null", "w")))
    assert len(CALLS) == len(cells)  # once each, not once per look, per look-ahead and per worker
    records = ctx.spool.records()
    assert [r.key for r in records] == [c.key for c in cells]
    assert {(r.status, r.reason) for r in records[:1]} == {("skipped", "test_counted declines odd seq_len 1")}


def test_the_look_ahead_is_the_next_runnable_cells_of_the_same_worker(tmp_path, counted):
    cells = [Cell("e", counted, params(seq_len=n)) for n in range(2, 80)]  # every other one declines
    ctx = context(tmp_path)
    work = run.plan(cells, ctx.device)
    ctx.uploader.store_keys = {cells[2].key}  # the store holds one already
    job = run._job(ctx, work, 0)
    expected = [c for c in cells[1:] if c.params.seq_len % 2 == 0 and c.key != cells[2].key][:run.AHEAD_CELLS]
    assert list(job.ahead) == expected
    assert job.upcoming is None  # the next cell declines: the worker is told of nothing to start
    runnable = [Cell("e", counted, params(seq_len=n)) for n in (2, 4)]
    assert run._job(ctx, run.plan(runnable, ctx.device), 0).upcoming == runnable[1]  # it may start this one early
    ctx.compile_ahead = False
    assert run._job(ctx, work, 0).ahead == ()
