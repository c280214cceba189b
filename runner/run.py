"""A run: the spec's cells measured by worker processes, each record spooled and stored as it finishes (what a kill
or a crash can lose: runner/spool.py).

A rerun with the same run id resumes: cells the store or the spool already holds are skipped, and a cell that
took the whole process down twice (its in-flight marker says so) is recorded `crashed` rather than tried again. A
rerun on a machine, or under kernel settings, other than the ones the manifests of the run's parts record is refused
(runner/resume.py).
A worker that dies or overruns the cell's time limit costs only its cell. On SIGTERM the cell in flight is
abandoned (measured again on resume), what is done is uploaded, and the process exits within 10 s.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import itertools
import sys
import threading
import time
from dataclasses import dataclass, field

from rich.console import Console

from runner import counted
from runner.assembly import cell_record, ceilings
from runner.cells import Cell, family, run_class
from runner.metrics import Ceilings
from runner.machine import Device, git_sha
from runner.plan import Plan, plan
from runner.progress import progress_for
from runner.record import CellRecord, Machine, Manifest, WorkerInfo, policy_named, power_policy, utc_now
from runner.shape import Params
from runner.registry import JAX_WORKER, VARIANTS
from runner.spec import Spec, TimingSettings, identity
from runner.resume import Resume
from runner.spool import PULL_TIMEOUT_S, OtherRun, Refused, Spool, Uploader
from runner.store import Store, StoreUnavailable
from runner.supervisor import Pool, Stopped, WorkerLost
from runner.termination import TERMINATION
from runner.worker import Job, Settings

COMMIT_WAIT_S = 10.0  # a finished cell that waits for the store (runner/spool.py) waits this long at most
MAX_ATTEMPTS = 2  # a cell in flight when the process died is tried once more, then recorded crashed
AHEAD_CELLS = 16  # cells whose programs a worker compiles side by side, ahead of their turn
DECLINED_BATCH = 1000  # declined cells spooled in one write
WORKER_START_S = 900.0  # importing the libraries and measuring the machine's ceilings, cold caches included


def new_run_id(spec: Spec) -> str:
    return f"{spec.name}-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}"


def same_run(manifest: Manifest, spec: Spec) -> bool:
    """Whether a run id's stored part measures what `spec` measures, so that a rerun under the id resumes it: the same
    power policy as this code samples `spec` under, the steady rule too (a steady run from before schema 5 sampled
    after settling, so its cells and today's would be two rules under one label), and the same spec hash, or after an
    attnbench upgrade (which changes the hash) the same identity. The cells chosen (--only, --variants, --where,
    --shard) are no part of it; --budget, --power and soak's --seconds are."""
    if power_policy(manifest) != policy_named(spec.timing.power):
        return False
    stored = manifest.spec if isinstance(manifest.spec, dict) else {}
    return manifest.spec_hash == spec.digest() or (bool(stored) and identity(stored) == spec.identity())


def cell_timeout_s(settings: TimingSettings) -> float:
    """The spec's cell_timeout_s, else room for a cold compile plus every timer's budget and the power wait."""
    if settings.cell_timeout_s:
        return settings.cell_timeout_s
    return 300.0 + 3 * (settings.budget_s * 3 + settings.settle_max_s) + 2 * (settings.soak_s or 0.0)


@dataclass
class Options:
    flush_every_s: float = 30.0
    compile_cache: str | None = None
    compile_ahead: bool = True
    measure_ceilings: bool = False  # measure the machine's ceilings even where ones kept for it could be reused
    unreachable: str | None = None  # the store out of reach at start-up, said then: not said again until it answers
    rechecks: str | None = None  # the run whose slower cells these are, measured again (`attnbench recheck`)


@dataclass
class Outcome:
    """How a run ended: every cell done or stopped by SIGTERM, and whether the store holds it all."""

    finished: bool
    uploaded: bool
    done: int  # cells of this run (or shard) the spool holds
    planned: int
    error: str | None = None  # why the upload failed
    refused: Refused | None = None  # the store held a run of another spec, or cells of another machine: none uploaded


@dataclass
class Context:
    """What measuring one cell needs from the run."""

    spec: Spec
    spool: Spool
    uploader: Uploader
    pool: Pool
    device: Device
    ceilings: Ceilings  # the machine's, that every record's rates are shares of
    resumed: dict | None  # the in-flight marker this part's last process left
    timeout_s: float
    stop: threading.Event
    compile_ahead: bool = True  # off for the rest of the run once a worker died with cells compiling ahead
    next_group: dict[str, str] = field(default_factory=dict)  # worker group -> the group measured after it


def first_pull(uploader: Uploader, store: Store) -> set[str]:
    """Keys of the cells the store or the spool holds; the store is asked briefly, then retried in the background."""
    try:
        done = uploader.pull(store.with_timeout(PULL_TIMEOUT_S))
    except StoreUnavailable as error:
        if uploader.error is None:  # else said at start-up, with what the run does about it
            print(f"warning: {error}; measuring meanwhile, resuming from the spool {uploader.spool.dir}",
                  file=sys.stderr, flush=True)
        uploader.said(error)  # the uploader's failures of this kind go unsaid until the store answers
        done = set()
    except OtherRun:  # uploader.refused: the run ends before its first cell
        done = set()
    return done | uploader.spool.keys()


def in_run_order(cells: list[Cell]) -> list[Cell]:
    """Cells grouped by worker (JAX's first: one worker measuring at a time, few switches); within a worker by power
    class (of the shape's forward+backward), lightest first, so that cells of a class follow each other and the GPU's
    load climbs; within a class a family's cells together (one set of inputs and reference serves them, whichever
    experiments they are in, deterministic or not, paged or dense: cells.family), its forward+backward cells just
    before its forward ones, families and cells otherwise in the spec's order. Keys, and so resuming, do not depend
    on the order."""
    in_order = dict.fromkeys([JAX_WORKER, *(VARIANTS[c.variant].worker for c in cells)])
    groups = {group: i for i, group in enumerate(in_order)}
    families = [family(cell.params) for cell in cells]
    first: dict[Params, int] = {}  # a family's first position
    for i, shape in enumerate(families):
        first.setdefault(shape, i)
    classes = {shape: run_class(shape) for shape in first}  # once a family: a family's own family is itself

    def place(i: int) -> tuple:
        cell, shape = cells[i], families[i]
        return groups[VARIANTS[cell.variant].worker], classes[shape], first[shape], cell.params.pass_ != "fwd_bwd", i

    return [cells[i] for i in sorted(range(len(cells)), key=place)]


def _attempt(ctx: Context, cell: Cell) -> int:
    """Which attempt at this cell the next one is: a marker left by a dead process counts its attempts."""
    marker = ctx.resumed
    return (int(marker.get("attempts", 1)) if marker and marker.get("key") == cell.key else 0) + 1


@dataclass(frozen=True)
class Recorded:
    """A cell's record and, when a worker made it, its JSON line as the worker wrote it: spooled and stored as it
    arrived, not dumped again."""

    record: CellRecord
    line: str | None = None


def _lost(ctx: Context, cell: Cell, started: str, clock: float, status: str, reason: str, attempts: int) -> Recorded:
    """The record of a cell the run did not have measured: declined, given up, or lost with its worker."""
    return Recorded(cell_record(cell, ctx.spool.run_id, started, time.perf_counter() - clock, status, reason,
                            ctx.ceilings, worker=VARIANTS[cell.variant].worker, attempts=attempts))


def measure_one(ctx: Context, cell: Cell, declined: str | None, job: Job) -> Recorded:
    """One cell: declined here (the plan's verdict), given up as poison, or measured by its worker (crashed /
    timeout if it is lost). A worker that dies while it was also compiling the job's `ahead` cells is not allowed
    to blame this one: the cell is measured again, alone, by a new worker, and the run compiles nothing ahead from
    then on."""
    started, clock = utc_now(), time.perf_counter()
    group = VARIANTS[cell.variant].worker
    if declined:
        return _lost(ctx, cell, started, clock, "skipped", declined, 1)
    attempts = _attempt(ctx, cell)
    if attempts > MAX_ATTEMPTS:
        return _lost(ctx, cell, started, clock, "crashed", f"the process died {attempts - 1} times while measuring "
                     "this cell (the pod or runner was killed under it); recorded instead of tried again", attempts - 1)
    ctx.uploader.mark({"key": cell.key, "attempts": attempts, "cell": cell.label(), "since": started})
    job = dataclasses.replace(job, attempts=attempts)  # the worker's record says which attempt it was
    while True:
        if not ctx.compile_ahead:
            job = Job(cell, attempts=attempts)
        try:
            worker = ctx.pool.worker(group)
            ctx.pool.prepare(ctx.next_group.get(group))  # the next group's libraries load meanwhile
            if worker.hello.error:
                recorded = _lost(ctx, cell, started, clock, "skipped", worker.hello.error, attempts)
            else:
                line = worker.measure(job, ctx.timeout_s)
                recorded = Recorded(CellRecord.model_validate_json(line), line)  # read once: progress, totals
        except WorkerLost as lost:
            ctx.pool.lose()
            if job.ahead:
                print(f"warning: the {group} worker died while compiling {counted(len(job.ahead), 'cell')} ahead with "
                      f"{cell.label()}; measuring it again alone, and compiling nothing ahead from here on",
                      file=sys.stderr, flush=True)
                ctx.compile_ahead = False
                continue
            recorded = _lost(ctx, cell, started, clock, lost.status, lost.reason, attempts)
        break
    ctx.uploader.mark(None)
    return recorded


def _will_measure(ctx: Context, work: Plan, i: int) -> bool:
    """A worker will measure the cell when its turn comes: not declined here, not given up as poison."""
    return work.declined[i] is None and _attempt(ctx, work.cells[i]) <= MAX_ATTEMPTS


def _ahead(ctx: Context, work: Plan, i: int) -> tuple[Cell, ...]:
    """The next AHEAD_CELLS cells after the i-th of the same worker that it will measure (and the store does not
    hold yet), found from the worker's runnable positions on: a few steps per cell, not a pass over the rest."""
    positions = work.runnable.get(work.groups[i], [])
    after = range(bisect.bisect_right(positions, i), len(positions))  # not a slice: that copies the rest each cell
    later = (work.cells[positions[k]] for k in after if _will_measure(ctx, work, positions[k]))
    return tuple(itertools.islice((c for c in later if c.key not in ctx.uploader.store_keys), AHEAD_CELLS))


def _job(ctx: Context, work: Plan, i: int) -> Job:
    """The i-th cell, the cell after it if the same worker will measure it (the worker may start it early, so the
    run must then send it next), and the cells to compile ahead; nothing ahead when compiling ahead is off."""
    if not ctx.compile_ahead:
        return Job(work.cells[i])
    after = i + 1
    upcoming = after < len(work.cells) and work.groups[after] == work.groups[i] and _will_measure(ctx, work, after)
    return Job(work.cells[i], work.cells[after] if upcoming else None, _ahead(ctx, work, i))


def measure_all(ctx: Context, cells: list[Cell], done: set[str], console: Console) -> bool:
    """Measure and commit each cell not done yet; False when SIGTERM ended it early. A cell declined here is
    spooled with the declined cells around it in one write, and not waited for in the store: a rerun redoes it in
    microseconds, and a run of 100,000 such cells is not held to one store round trip each."""
    work = plan([c for c in in_run_order(cells) if c.key not in done], ctx.device)
    groups = list(work.runnable)
    ctx.next_group = dict(zip(groups, groups[1:]))
    announced: set[str] = set()  # cells a worker was told come next: it may have started them
    declined: list[CellRecord] = []  # recorded, not yet spooled
    with progress_for(len(work.cells), console) as progress:
        try:
            for i, cell in enumerate(work.cells):
                if ctx.stop.is_set() or ctx.uploader.refused:
                    return False
                if cell.key in ctx.uploader.store_keys and cell.key not in announced:  # the store answered late
                    continue
                progress.started(cell)
                if work.declined[i]:
                    declined.append(measure_one(ctx, cell, work.declined[i], Job(cell)).record)
                    progress.finished(cell, declined[-1])
                    if len(declined) >= DECLINED_BATCH:
                        declined = _spool_declined(ctx, declined)
                    continue
                declined = _spool_declined(ctx, declined)
                job = _job(ctx, work, i)
                if job.upcoming:
                    announced.add(job.upcoming.key)
                try:
                    recorded = measure_one(ctx, cell, None, job)
                except Stopped:
                    return False
                ctx.uploader.commit(recorded.record, COMMIT_WAIT_S, ctx.stop, recorded.line)
                progress.finished(cell, recorded.record)
        finally:
            _spool_declined(ctx, declined)
    return not ctx.stop.is_set()


def _spool_declined(ctx: Context, records: list[CellRecord]) -> list[CellRecord]:
    if records:
        ctx.uploader.spool.add_quietly(records)
    return []


def new_manifest(spec: Spec, spool: Spool, planned: int, argv: list[str], machine: Machine, cache: str,
                 order: list[str], earlier: dict[str, list[str]] | None = None,
                 rechecks: str | None = None) -> Manifest:
    """This run's (or shard's) manifest; a resumed one keeps the first start time. `order`: the run's cell keys;
    `earlier`: the machine facts its earlier cells were measured under, where they differ (runner.resume.Resume);
    `rechecks`: the run whose cells this one measures again."""
    previous = spool.manifest()
    names = dict.fromkeys(v for exp in spec.experiments for v in exp.variants)
    return Manifest(
        run_id=spool.run_id,
        name=spec.name,
        spec=spec.content(),
        spec_hash=spec.digest(),
        started_at=previous.started_at if previous else utc_now(),
        machine=machine,
        git_sha=git_sha(),
        shard=spool.shard,
        cells_planned=planned,
        argv=argv,
        variants={name: VARIANTS[name].info() for name in names if name in VARIANTS},
        compile_cache=cache,
        cell_order=order,
        earlier_facts=earlier or None,
        rechecks=rechecks,
    )


def close_manifest(manifest: Manifest, ctx: Context, finished: bool, earlier: dict[str, list[str]]) -> Manifest:
    """Workers, phase totals, the GPU at the end, the end time once every cell is done, and the machine facts that
    earlier cells were measured under (`earlier`: found since start-up too, once the store answered)."""
    from runner import gpu

    workers = {group: WorkerInfo(versions=h.versions, error=h.error, start_s=h.start_s,
                                 variants=sorted({v.name for v in VARIANTS.values() if v.worker == group}))
               for group, h in ctx.pool.hellos.items()}
    at_end = gpu.readings() if ctx.device.compute_capability else None
    return manifest.model_copy(update={"workers": workers, "phases": dict(ctx.spool.totals.phases),
                                       "gpu_at_end": at_end, "ended_at": utc_now() if finished else None,
                                       "earlier_facts": earlier or None})


def execute(spec: Spec, cells: list[Cell], store: Store, spool: Spool, console: Console, argv: list[str],
            options: Options, order: list[str] | None = None) -> Outcome:
    """Measure the cells that neither the store nor the spool holds yet, each committed before the next. `order`:
    the keys of the whole run's cells in run order (every shard's), for readers; None: these cells'."""
    uploader = Uploader(spool, store, options.flush_every_s, lambda manifest: same_run(manifest, spec),
                        options.unreachable)
    done = first_pull(uploader, store)
    if uploader.refused:
        return Outcome(False, False, len(spool.keys() & {c.key for c in cells}), len(cells), uploader.error,
                       uploader.refused)
    closed = _closed(uploader, spec, cells)
    resumed = max([m for m in (spool.inflight(), uploader.store_inflight) if m],
                  key=lambda m: m.get("attempts", 1), default=None)
    with TERMINATION.flagging() as stop:
        pool = Pool(Settings(spec, spool.run_id, options.compile_cache, options.measure_ceilings), stop, WORKER_START_S)
        uploader.start()
        finished = False
        try:
            if closed:  # what the store still needs (a consolidation a killed pod left) is done on closing
                every = "the 1 cell was" if len(cells) == 1 else f"all {counted(len(cells), 'cell')} were"
                console.print(f"{spool.run_id}: {every} done and the run ended at {closed}; "
                              "nothing to measure, its manifest stays as it was")
                finished = True
            else:
                finished = _measure(spec, cells, done, resumed, uploader, pool, console, argv, options, order)
        finally:
            pool.kill() if stop.is_set() else pool.close()
            if not uploader.refused:  # a refused resume leaves the marker as it found it: it measured nothing of it
                uploader.mark(None)  # a cell abandoned on SIGTERM is no poison
            uploaded = uploader.close(stop, lambda: store.with_timeout(TERMINATION.left()))
    held = len(spool.keys() & {c.key for c in cells})
    return Outcome(finished and not stop.is_set(), uploaded, held, len(cells), uploader.error, uploader.refused)


def _closed(uploader: Uploader, spec: Spec, cells: list[Cell]) -> str | None:
    """When the store holds every cell and the ended manifest of this very spec: that end time. A resume that finds
    nothing to do leaves the run as it was: its end time, machine and GPU readings stay the ones it ended with."""
    manifest = uploader.store_manifest
    if manifest is None or manifest.ended_at is None or manifest.spec_hash != spec.digest():
        return None
    return manifest.ended_at if {c.key for c in cells} <= uploader.store_keys else None


def _measure(spec: Spec, cells: list[Cell], done: set[str], resumed: dict | None, uploader: Uploader, pool: Pool,
             console: Console, argv: list[str], options: Options, order: list[str] | None) -> bool:
    """Start the first worker (it describes the machine), write the manifest, measure, close the manifest."""
    try:
        hello = pool.worker(JAX_WORKER).hello
    except Stopped:
        return False
    spool = uploader.spool
    resume = Resume(spool, hello.machine)
    if not uploader.measuring_on(resume):
        return False
    manifest = new_manifest(spec, spool, len(cells), argv, hello.machine, hello.compile_cache,
                            order if order is not None else [c.key for c in cells], resume.earlier, options.rechecks)
    spool.write_manifest(manifest)
    resume.manifest_written = True
    uploader.notify()
    # after a process died mid-cell, nothing is compiled ahead: a batch that took the pod down would blame that cell
    ctx = Context(spec, spool, uploader, pool, hello.device, ceilings(hello.machine), resumed,
                  cell_timeout_s(spec.timing), pool.stop_event, options.compile_ahead and not resumed)
    if already := len(done & {c.key for c in cells}):
        console.print(f"resuming {spool.run_id}: {already:,} of {counted(len(cells), 'cell')} already done")
    finished = measure_all(ctx, cells, done, console)
    spool.write_manifest(close_manifest(manifest, ctx, finished, resume.earlier))
    return finished
