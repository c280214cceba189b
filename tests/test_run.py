"""runner/run.py's loop on its own: one decline verdict per cell, the look-ahead found by position, declined cells
spooled together. A real spool and store in a temporary folder; no worker is started (every cell here either
declines or is only looked ahead at)."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from rich.console import Console

import test_results
from helpers import params
from runner import memory, run
from runner.cells import Cell, power_class
from runner.machine import Device, current_device
from runner.metrics import Ceilings
from runner.plan import plan
from runner.shape import Params
from runner.registry import VARIANTS, load_all, variant
from runner.spool import Spool, Uploader, spool_store
from runner.store import LocalStore

load_all()  # the plan and the run order ask each cell's variant: alone, or first, this file had no registry

CALLS: list[Params] = []


@pytest.fixture
def counted():
    """A variant whose rule counts its calls and declines odd seq_len; removed afterwards."""
    def check(p: Params) -> str | None:
        CALLS.append(p)
        return f"test_counted declines odd seq_len {p.seq_len}" if p.seq_len % 2 else None

    def build(p: Params):
        """Never built: the tests plan its cells."""

    CALLS.clear()
    variant("test_counted", check=check)(build)
    yield "test_counted"
    VARIANTS.pop("test_counted")


def context(tmp_path, stop: threading.Event | None = None) -> run.Context:
    store = LocalStore(tmp_path / "out")
    spool = Spool(spool_store(tmp_path / "spool", store), "r", None)
    uploader = Uploader(spool, store, 30.0)
    return run.Context(None, spool, uploader, None, current_device(), Ceilings(), None, 60.0, stop or threading.Event())


def test_each_cells_verdict_is_evaluated_once_and_declined_cells_are_spooled(tmp_path, counted):
    cells = [Cell("e", counted, params(seq_len=n)) for n in range(1, 200, 2)]  # all odd: all declined
    ctx = context(tmp_path)
    assert run.measure_all(ctx, cells, set(), Console(file=open("/dev/null", "w")))
    assert len(CALLS) == len(cells)  # once each, not once per look, per look-ahead and per worker
    records = ctx.spool.records()
    assert [r.key for r in records] == [c.key for c in cells]
    assert {(r.status, r.reason) for r in records[:1]} == {("skipped", "test_counted declines odd seq_len 1")}


def test_the_plan_skips_a_cell_the_device_cannot_hold_with_the_bytes_it_needs():
    """Before a worker is asked, as the dry run says it: the device's memory against the inputs and float32
    reference (a split cell's made whole, on one device)."""
    tiny = Device("gpu", "tiny", 9.0, 1 << 20, count=2)
    cells = [Cell("e", "xla", params(seq_len=n)) for n in (8, 256)] + [Cell("e", "ring", params(seq_len=256, devices=2))]
    work = plan(cells, tiny)
    assert work.declined[0] is None and work.runnable == {"jax": [0]}
    for reason in work.declined[1:]:
        assert reason.startswith("inputs and float32 reference need ") and reason.endswith("MiB; the device has 1.0 MiB")
    assert work.declined[1] == work.declined[2]  # the split cell's reference is its unsplit shape's


def test_the_plan_skips_a_cell_whose_scores_cannot_fit_so_no_worker_begins_or_compiles_it(tmp_path):
    """In bfloat16 naive keeps 4 bytes a score, xla 6 (their Requires.score_bytes), beside a copy of K or V each: on a
    device that holds naive's, xla's cell is skipped with the sizes in the plan, so it is neither a worker's cell nor
    one compiled ahead of another's."""
    p, naive = params(seq_len=256, dtype="bfloat16"), VARIANTS["naive"]
    held = memory.needed_bytes(p) + memory.scores_bytes(p, naive) + naive.kv_copy.bytes(p)
    cells = [Cell("e", "naive", p), Cell("e", "xla", p), Cell("e", "naive", params(seq_len=128))]
    ctx = dataclasses.replace(context(tmp_path), device=Device("gpu", "small", 9.0, held))
    work = plan(cells, ctx.device)
    assert work.declined[1].startswith("xla's (B, N, T, S) scores need 1.5 MiB beside the inputs and float32 ")
    assert work.runnable == {"jax": [0, 2]} and list(run._job(ctx, work, 0).ahead) == [cells[2]]


def test_the_look_ahead_is_the_next_runnable_cells_of_the_same_worker(tmp_path, counted):
    cells = [Cell("e", counted, params(seq_len=n)) for n in range(2, 80)]  # every other one declines
    ctx = context(tmp_path)
    work = plan(cells, ctx.device)
    ctx.uploader.store_keys = {cells[2].key}  # the store holds one already
    job = run._job(ctx, work, 0)
    expected = [c for c in cells[1:] if c.params.seq_len % 2 == 0 and c.key != cells[2].key][:run.AHEAD_CELLS]
    assert list(job.ahead) == expected
    assert job.upcoming is None  # the next cell declines: the worker is told of nothing to start
    runnable = [Cell("e", counted, params(seq_len=n)) for n in (2, 4)]
    assert run._job(ctx, plan(runnable, ctx.device), 0).upcoming == runnable[1]  # it may start this one early
    ctx.compile_ahead = False
    assert run._job(ctx, work, 0).ahead == ()


class InProcessWorker:
    """A worker's answers made in this process by the worker's own code (runner.worker.answer) and a real Measurer."""

    def __init__(self, measurer):
        from runner.worker import Hello

        self.measurer, self.hello, self.lines = measurer, Hello("jax", {}, measurer.device), []

    def measure(self, job, timeout_s):
        from runner.worker import answer

        self.lines.append(answer(self.measurer, job))
        return self.lines[-1]


class OneWorkerPool:
    def __init__(self, worker):
        self.one, self.hellos = worker, {"jax": worker.hello}

    def worker(self, group):
        return self.one

    def prepare(self, group):
        pass


def test_a_record_is_read_once_from_worker_to_store_and_stored_as_the_worker_wrote_it(tmp_path, monkeypatch):
    """Made in the worker, read once by the run (for its progress and totals), spooled and stored as the line that
    arrived: no parse, patch and dump on the way. The attempt is the job's, written by the worker; the run's phase
    totals are the records' as they arrived."""
    from helpers import spec_data
    from runner.measure import Measurer
    from runner.record import CellRecord
    from runner.spec import parse_spec
    from runner.timers import WallTimer

    measurer = Measurer(parse_spec(spec_data(), set(load_all())), [WallTimer()], "r", current_device())
    cells = [Cell("e", "xla", params(seq_len=8)), Cell("e", "xla", params(seq_len=16)),
             Cell("e", "naive", params(seq_len=8))]
    ctx = context(tmp_path)
    ctx.pool = OneWorkerPool(InProcessWorker(measurer))
    ctx.resumed = {"key": cells[1].key, "attempts": 1}  # a process died measuring it once
    cells = run.in_run_order(cells)  # a shape's cells together: seq_len 8's two, then 16's
    reads, dumps, dump = [], [], CellRecord.model_dump_json
    for name in ("model_validate_json", "model_validate"):
        real = getattr(CellRecord, name)
        monkeypatch.setattr(CellRecord, name, classmethod(
            lambda cls, *a, _real=real, _name=name, **k: reads.append(_name) or _real(*a, **k)))
    monkeypatch.setattr(CellRecord, "model_dump_json", lambda self, **k: dumps.append(self.key) or dump(self, **k))
    assert run.measure_all(ctx, cells, set(), Console(file=open("/dev/null", "w")))
    manifest = run.close_manifest(test_results.manifest(run_id="r"), ctx, True, {})
    assert ctx.uploader.close()
    assert reads == ["model_validate_json"] * len(cells)  # the run's one read of each
    assert dumps == [c.key for c in cells]  # the worker's one write of each
    monkeypatch.undo()
    stored = (tmp_path / "out" / "r" / "cells.jsonl").read_text()
    assert stored == "".join(line + "\n" for line in ctx.pool.one.lines)
    records = [CellRecord.model_validate_json(line) for line in ctx.pool.one.lines]
    assert [r.attempts for r in records] == [1, 1, 2] and [r.status for r in records] == ["ok"] * 3
    totals = {name: sum(r.phases.get(name, 0.0) for r in records) for name in ctx.spool.totals.phases}
    assert ctx.spool.totals.phases == pytest.approx(totals) == manifest.phases and "wall" in totals
    assert ctx.spool.totals.cells_s == pytest.approx(sum(r.duration_s for r in records))


def test_the_run_order_groups_power_classes_lightest_first_and_keeps_a_shapes_cells_together():
    """Cells of a worker by the decade of their FLOPs per call, lightest first; a shape's variants stay together
    (one inputs-and-reference), across experiments too; otherwise the spec's order; the same cells every time."""
    long, short = params(seq_len=4096), params(seq_len=64)
    cells = [Cell("a", "xla", long), Cell("a", "naive", long), Cell("a", "xla", short),
             Cell("b", "cudnn", long), Cell("b", "xla", params(seq_len=80)), Cell("b", "naive", short)]
    assert power_class(short) == power_class(params(seq_len=80)) < power_class(long)
    ordered = run.in_run_order(cells)
    assert ordered == [cells[2], cells[5], cells[4], cells[0], cells[1], cells[3]]
    assert run.in_run_order(list(reversed(cells)))[:2] == [cells[5], cells[2]]  # the spec's order within a shape
    assert sorted(c.key for c in ordered) == sorted(c.key for c in cells)


def test_a_shapes_forward_backward_cells_run_just_before_its_forward_ones():
    """One set of inputs and reference serves both passes (runner.inputs.Truths), whichever experiments hold them."""
    forward, both = params(seq_len=4096), params(seq_len=4096, pass_="fwd_bwd")
    cells = [Cell("fwd", "xla", forward), Cell("fwd", "xla", params(seq_len=8192)), Cell("train", "xla", both),
             Cell("train", "naive", both), Cell("fwd", "naive", forward)]
    assert run.in_run_order(cells) == [cells[2], cells[3], cells[0], cells[4], cells[1]]


def test_the_manifest_stores_the_specs_content_and_reads_back_its_identity(tmp_path):
    """A null an experiment gives (a dense cache where the defaults page it) is stored as given: read back, the run
    has the identity of the spec it ran, not of one whose experiment inherits the pages."""
    from helpers import TINY, spec_data
    from runner.compare import spec_identity
    from runner.record import Machine
    from runner.spec import parse_spec

    experiments = [{"name": "dense", "variants": ["xla"], "window": None}, {"name": "b", "variants": ["xla"]}]
    spec = parse_spec(spec_data(*experiments, defaults={**TINY, "window": 4}), {"xla"})
    machine = Machine(host="h", platform="cpu", device_kind="cpu", device_count=1)
    manifest = run.new_manifest(spec, Spool(LocalStore(tmp_path), "r", None), 2, [], machine, "off", [])
    assert manifest.spec == spec.content() and manifest.spec["nulls_given"] == {"dense": ["window"]}
    assert manifest.spec_hash == spec.digest() and spec_identity(manifest) == spec.identity()


def test_a_sharded_run_resumed_under_another_share_measures_each_cell_once(tmp_path, counted):
    """Shard 0 of 2 finished under the cell-by-cell share of attnbench before families; the run resumed under
    today's (runner.shard.assign): each shard skips what any part stored and measures the rest of its new share, so
    every cell is stored once. Declined cells (odd seq_len) need no worker."""
    import heapq

    from runner.metrics import flops
    from runner.shard import Shard, select

    cells = [Cell(e, counted, params(seq_len=n, pass_=e)) for n in (33, 35, 37, 39) for e in ("fwd", "fwd_bwd")]
    loads, before = [(0, 0), (0, 1)], {}  # the old rule: cell by cell, costliest first, to the least loaded shard
    for cell in sorted(cells, key=lambda c: (-flops(c.params), c.key)):
        load, index = heapq.heappop(loads)
        before[cell.key] = index
        heapq.heappush(loads, (load + flops(cell.params), index))
    now = {c.key: i for i in range(2) for c in select(cells, Shard(i, 2))}
    assert {k for k, i in before.items() if i == 0} - {k for k, i in now.items() if i == 0}  # a moved cell

    def part(shard: Shard, share: list[Cell]) -> list[str]:
        store = LocalStore(tmp_path / "out")
        uploader = Uploader(Spool(spool_store(tmp_path / f"spool-{shard.index}", store), "r", str(shard)), store, 30.0)
        ctx = run.Context(None, uploader.spool, uploader, None, current_device(), Ceilings(), None, 60.0,
                          threading.Event())
        done = run.first_pull(uploader, store)
        assert run.measure_all(ctx, share, done, Console(file=open("/dev/null", "w"))) and uploader.close()
        return [c.key for c in share if c.key not in done]

    old = part(Shard(0, 2), [c for c in cells if before[c.key] == 0])
    measured = [part(shard, select(cells, shard)) for shard in (Shard(0, 2), Shard(1, 2))]
    assert sorted(old + measured[0] + measured[1]) == sorted(c.key for c in cells)  # none twice
    stored = LocalStore(tmp_path / "out").read("r")  # (no manifests: measure_all alone writes none)
    assert sorted(c.key for part in stored.parts for c in part.cells) == sorted(c.key for c in cells)


def test_a_run_refused_by_the_store_measures_and_spools_no_further_cell(tmp_path, counted):
    """Once the store answers holding a run of another spec under the run id (spool.OtherRun: nothing of this run
    will be uploaded there), the loop stops before its next cell: here the first."""
    from runner.spool import OtherRun

    ctx = context(tmp_path)
    ctx.uploader.refused = OtherRun(ctx.uploader.store.location("r"), test_results.manifest(name="other"))
    cells = [Cell("e", counted, params(seq_len=n)) for n in range(1, 9, 2)]  # all declined: no worker needed
    assert run.measure_all(ctx, cells, set(), Console(file=open("/dev/null", "w"))) is False
    assert ctx.spool.records() == []


def test_a_store_that_holds_a_run_of_another_spec_at_the_first_pull_starts_no_worker(tmp_path, monkeypatch):
    """The store answered at the first pull though not at the start-up check (the cli's): the run ends there, its
    workers never started, nothing uploaded."""
    from helpers import spec_data
    from runner.cells import expand
    from runner.spec import parse_spec

    store = LocalStore(tmp_path / "out")
    held = test_results.manifest(run_id="r", name="other", spec={"name": "other"}, spec_hash="f" * 16)
    store.put("r/manifest.json", held.model_dump_json().encode())
    spec = parse_spec(spec_data({"name": "a", "variants": ["naive"]}), {"naive"})
    monkeypatch.setattr(run, "Pool", lambda *_: pytest.fail("a worker pool was started"))
    with Spool(spool_store(tmp_path / "spool", store), "r", None) as spool:
        outcome = run.execute(spec, expand(spec), store, spool, Console(file=open("/dev/null", "w")), [],
                              run.Options())
    assert outcome.refused.manifest == held and (outcome.uploaded, outcome.done) == (False, 0)
    assert store.names() == ["r/manifest.json"] and spool.manifest() is None


def test_closing_a_manifest_keeps_the_machine_facts_a_late_store_gave(tmp_path):
    """A store out of reach at start-up that answers mid-run with cells measured on another driver (run.Resume): the
    manifest the run closes keeps that driver, where the one written at start could not know it."""
    import types

    ctx = context(tmp_path)
    ctx.pool = types.SimpleNamespace(hellos={})  # no worker started
    closed = run.close_manifest(test_results.manifest(run_id="r"), ctx, False, {"gpu driver": ["550.54.15"]})
    assert closed.earlier_facts == {"gpu driver": ["550.54.15"]}
    assert run.close_manifest(test_results.manifest(run_id="r"), ctx, False, {}).earlier_facts is None
