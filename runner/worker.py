"""A worker process: measures the cells its supervisor sends, with one library set loaded.

The supervisor (runner/supervisor.py) starts a Python process that calls `main`, feeds it cells over a pipe and outlives
it: a segfault, a CUDA error that poisons the context, a hang or a host OOM ends this process and the cell in
flight, never the run. Messages go one way each, as (verb, typed object):

  supervisor -> worker   ("start", Start)  ("measure", Job)  ("stop", None)
  worker -> supervisor   ("ready", Hello)  ("record", record JSON)

A spare worker, started while another group's worker measures, is first sent ("hold", group): it loads its
libraries (TE's import, JAX's) without touching the GPU, then waits for its ("start", Start) as any worker does.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

from runner.cells import Cell
from runner.machine import Device
from runner.power import Idle
from runner.record import Machine
from runner.spec import Spec
from runner.tuning_cache import TuningCache, open_cache

PR_SET_PDEATHSIG = 1
MEMORY_LIMIT_ENV = "ATTNBENCH_WORKER_MEMORY_LIMIT"


@dataclass(frozen=True)
class Settings:
    """What every worker of a run is given alike."""

    spec: Spec
    run_id: str
    compile_cache: str | None  # a folder, gs://... or 'off'; None: the default
    measure_ceilings: bool = False  # measure the machine's ceilings even where ones kept for its key could be reused


@dataclass(frozen=True)
class Start:
    """What a worker needs to begin: the run's settings, and the machine as the run's first worker found it."""

    group: str  # the library set: "jax", or a variant's own worker such as "transformer_engine"
    settings: Settings
    describe: bool = False  # measure the machine's ceilings and report its facts (the run's first worker)
    machine: Machine | None = None  # the run's machine record, for rates against its ceilings
    idle: Idle | None = None  # the GPU before the run: a burst sample's target


@dataclass(frozen=True)
class Hello:
    """What a started worker reports: its libraries and device, the machine (if asked), or why it cannot run."""

    group: str
    versions: dict[str, str]
    device: Device
    compile_cache: str = "off"
    machine: Machine | None = None
    idle: Idle | None = None
    error: str | None = None  # the group's preload failed: every cell of it is skipped with this reason
    start_s: dict[str, float] = field(default_factory=dict)  # seconds of each step of starting, in the worker


@dataclass(frozen=True)
class Job:
    """One cell to measure, which the supervisor found runnable here (its rules' verdict is computed there, once)."""

    cell: Cell
    upcoming: Cell | None = None  # the cell this worker measures next: it may start it once this one is stored
    ahead: tuple[Cell, ...] = ()  # cells whose programs it may compile beside this one's
    attempts: int = 1  # processes that started this cell, this one included: the run's count, for the record
    # upcoming and ahead are empty when the run compiles nothing ahead (--compile-ahead off, or after a worker died
    # while compiling ahead): the run alone decides that


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when its supervisor dies, even by SIGKILL."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the closed pipe still ends the worker at its next read
        pass
    if os.getppid() == 1:  # the supervisor died before prctl took effect
        os._exit(0)


def _preload(group: str) -> str | None:
    """Run the group's preload (before JAX starts its GPU backend); the reason it failed, or None."""
    from runner.registry import Skip, load_all

    preloads = {v.preload for v in load_all().values() if v.worker == group and v.preload}
    for preload in preloads:
        try:
            preload()
        except Skip as reason:
            return str(reason)
    return None


def _machine(start: Start, versions: dict, cache: str) -> Machine | None:
    """The machine record with its ceilings (kept beside the compile cache in use, `cache`, or measured now), when
    this worker is asked to describe it."""
    if not start.describe:
        return start.machine
    import jax

    from runner import ceilings_cache, gpu, machine

    device = machine.current_device()
    if device.compute_capability is None:
        return machine.describe(device, jax.device_count(), versions)
    facts = gpu.facts()
    found, origin = ceilings_cache.ceilings(cache, facts, versions, start.settings.run_id,
                                            start.settings.measure_ceilings, capability=device.compute_capability,
                                            xla_flags=os.environ.get("XLA_FLAGS", ""))
    return machine.describe(device, jax.device_count(), versions, facts, found.peak_tflops, found.bandwidth_gbps,
                            origin)


def _idle(start: Start) -> Idle | None:
    """The GPU's temperature and power before any work: what a burst sample waits to get back to."""
    if start.idle is not None or not start.describe:
        return start.idle
    from runner import gpu

    facts = gpu.readings()
    return Idle(facts.temperature_c, facts.power_w) if facts else None


def hello(start: Start) -> tuple[Hello, object | None]:
    """Load the group's libraries, then JAX; the Hello and the Measurer (None when the libraries failed)."""
    clock, seconds = time.perf_counter(), {}

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[name] = now - clock
        clock = now

    from runner import cells, machine

    machine.fake_host_devices(cells.most_devices(start.settings.spec))  # before any backend starts
    error = _preload(start.group)
    from runner import compiler, gpu

    lap("libraries")
    device = machine.current_device()
    versions = machine.versions() | (gpu.cuda_versions() if device.compute_capability else {})
    lap("backend")
    if error:
        return Hello(start.group, versions, device, error=error, start_s=seconds), None
    cache = compiler.configure_cache(start.settings.compile_cache)
    lap("compile_cache")
    idle = _idle(start)  # before the ceilings' seconds of full load (whether or not they are measured here)
    described = _machine(start, versions, cache)
    lap("machine")
    measurer = _measurer(start.settings, device, described, idle, open_cache(cache, device.kind, versions))
    lap("measurer")
    return Hello(start.group, versions, device, cache, described, idle, start_s=seconds), measurer


def _measurer(settings: Settings, device: Device, described: Machine | None, idle: Idle | None,
              tuning: TuningCache | None = None):
    from runner import power
    from runner.assembly import ceilings
    from runner.measure import Measurer
    from runner.sampling import PowerEnv
    from runner.timers import ColdDeviceTimer, DeviceTimer, WallTimer

    on_gpu = device.compute_capability is not None
    timers = [WallTimer()]  # on a CPU, the only clock there is
    if on_gpu:  # kernel time is the headline; the host clock beside it; L2-cold samples if asked
        timers = [DeviceTimer(), WallTimer(), *([ColdDeviceTimer()] if settings.spec.timing.cold else [])]
    source, reason = power.open_source(0, on_gpu)
    return Measurer(settings.spec, timers, settings.run_id, device, ceilings(described), PowerEnv(source, reason, idle),
                    tuning_cache=tuning)


def _hold(group: str) -> None:
    """A spare's head start: the group's libraries and JAX imported, no GPU backend started (another worker holds
    the GPU); a preload that fails here fails again, and is reported, at the start."""
    _preload(group)
    import jax  # noqa: F401

    import runner.measure  # noqa: F401
    import runner.timers  # noqa: F401


def answer(measurer, job: Job, begun=None) -> str:
    """The job's record, made once here and sent as its JSON line. `begun`: the cell the worker started ahead of its
    turn, if any."""
    return measurer.measure(job.cell, job.ahead, begun, job.attempts).model_dump_json(by_alias=True)


def serve(inbox: Connection, outbox: Connection) -> None:
    """Answer the supervisor until it says stop or goes away."""
    verb, start = inbox.recv()
    if verb == "hold":
        _hold(start)
        try:
            verb, start = inbox.recv()
        except EOFError:
            return
        if verb != "start":
            return
    greeting, measurer = hello(start)
    outbox.send(("ready", greeting))
    begun = None
    while True:
        try:
            verb, payload = inbox.recv()
        except EOFError:  # the supervisor is gone
            return
        if verb == "stop" or measurer is None:  # a worker whose libraries failed is sent no cell, only stop
            return
        outbox.send(("record", answer(measurer, payload, begun)))
        # the run compiles ahead: start the next cell while the record is stored
        begun = measurer.begin(payload.upcoming) if payload.upcoming else None


def memory_limit(environ=os.environ) -> int | None:
    """$ATTNBENCH_WORKER_MEMORY_LIMIT, the bytes of address space each worker may map (the tests' `oom`), or None;
    a ValueError names the variable and what is wrong with its value (the run checks it before its first cell)."""
    text = environ.get(MEMORY_LIMIT_ENV)
    if not text:
        return None
    if not re.fullmatch(r"[0-9]{1,18}", text) or int(text) == 0:
        raise ValueError(f"${MEMORY_LIMIT_ENV} {text[:40]!r}: must be a whole number of bytes above 0")
    return int(text)


def main(argv: list[str]) -> None:
    faulthandler.enable()  # a segfault in a kernel says where on stderr, which the supervisor keeps
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to handle
    os.dup2(2, 1)  # libraries that print to stdout would mix into the supervisor's tables: send it to stderr
    inbox, outbox = Connection(int(argv[0]), writable=False), Connection(int(argv[1]), readable=False)
    if limit := memory_limit():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    serve(inbox, outbox)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: a GPU runtime's atexit hooks can hang after a poisoned context

