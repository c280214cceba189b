"""The sampling step: bring the GPU to the spec's power state and take the timers' samples in it.

Under `steady` the headline's samples are calls of the same unbroken stream that brought the GPU to its state;
under `burst` the GPU cools back to idle first and the sample is short. The GPU's state while the headline sampled
comes back with the samples.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import jax

from runner import power
from runner.record import PowerState, Soak, SoakPoint, Telemetry, Window
from runner.spec import CARRY_GAP_S, FLOOR_SAMPLES, TimingSettings
from runner.timers import Limits, Sampled, Stopwatch, Timer, limits, sample, summarise


@dataclass
class PowerEnv:
    """What the power policy needs: a telemetry source (None off NVIDIA GPUs, with why) and the idle state."""

    source: power.Source | None = None
    reason: str | None = "no NVIDIA GPU: clocks and power are not observable"
    idle: power.Idle | None = None


@dataclass(frozen=True)
class Timed:
    """What the timers made: one Sampled per timer (headline first), the GPU's state while the headline sampled, the
    seconds each phase of the sampling took (settle, each timer's name, soak), when the timers loaded the GPU, and
    the load a steady stream left for the next cell (None: no stream, or one the GPU rested after)."""

    sampled: list[Sampled]
    power: PowerState | None = None
    telemetry: Telemetry | None = None
    soak: Soak | None = None
    phases: dict[str, float] = field(default_factory=dict)
    load: Window | None = None
    carry: Carry | None = None

    @property
    def kernels(self) -> list[str]:
        return next((s.kernels for s in self.sampled if s.kernels), [])


CHUNK_S = 0.05  # a chunk of back-to-back calls keeps the GPU busy about this long
CHUNK_CALLS = 1000  # ... and holds at most this many calls
QUEUED = 2  # the host waits on the chunk this many back, so the GPU never waits for the host
BURST_S = 0.03  # a burst sample: its calls span at most this long, before the power cap pulls the clock down ...
BURST_FLOOR = 2  # ... and it has at least this many (docs/benchmarks.md, "The numbers behind the runner's constants")
SOAK_BIN_S = 0.25  # a soak's points: the calls that ended in each bin of this many seconds (more for long soaks)
SOAK_POINTS = 400


def burst_calls(pace_s: float | None, min_samples: int) -> int:
    """burst: min_samples calls, but no more than BURST_S of them (at least BURST_FLOOR), with no warm-up beyond
    the timer's own call: the power cap takes the clock within a fraction of a second of load."""
    if not pace_s:
        return min_samples
    return max(BURST_FLOOR, min(min_samples, int(BURST_S / pace_s)))


def calls_per_chunk(pace_s: float | None) -> int:
    """Calls in one chunk, from the seconds one call took (dispatch included: an overestimate, so chunks err short)."""
    return max(1, min(CHUNK_CALLS, int(CHUNK_S / max(pace_s or CHUNK_S, 1e-6))))


class Stream:
    """Back-to-back calls dispatched a chunk at a time. The host waits on a chunk only once QUEUED more are behind
    it, so the GPU runs the calls with no gap; ends[i] is the host's time when chunk i was seen done, and chunk i
    ran between about ends[i - 1] and ends[i] (starts[0]: the first dispatch)."""

    def __init__(self, fn: Callable, args: tuple, per_chunk: int, clock: Callable[[], float] = time.monotonic):
        self.fn, self.args, self.per_chunk, self.clock = fn, args, per_chunk, clock
        self.pending: deque = deque()
        self.ends: list[float] = []
        self.start: float | None = None

    @property
    def dispatched(self) -> int:
        return (len(self.ends) + len(self.pending)) * self.per_chunk

    def push(self) -> None:
        if self.start is None:
            self.start = self.clock()
        out = None
        for _ in range(self.per_chunk):
            out = self.fn(*self.args)
        self.pending.append(out)
        if len(self.pending) > QUEUED:
            self._wait()

    def drain(self) -> None:
        while self.pending:
            self._wait()

    def _wait(self) -> None:
        jax.block_until_ready(self.pending.popleft())
        self.ends.append(self.clock())

    def chunk_start(self, i: int) -> float:
        return self.ends[i - 1] if i else self.start

    def chunks_within(self, begin: float, end: float) -> list[int]:
        """The chunks that ran wholly between begin and end."""
        return [i for i, e in enumerate(self.ends) if self.chunk_start(i) >= begin and e <= end]


def per_call_seconds(timings: list[tuple[str, float]], calls: int) -> tuple[list[float], list[str]]:
    """A session's kernels split into its calls (every call launches the same kernels): seconds per call, and the
    last call's kernel names."""
    if not timings:
        raise RuntimeError("CUPTI saw no kernel launched by this call")
    if calls <= 0 or len(timings) % calls:
        raise RuntimeError(f"CUPTI saw {len(timings)} kernels over {calls} calls: not the same kernels per call")
    k = len(timings) // calls
    names = [name for name, _ in timings[:k]]
    if any(timings[i][0] != names[i % k] for i in range(0, len(timings), max(1, len(timings) // 97))):
        raise RuntimeError("CUPTI saw different kernels from one call to the next")
    return [sum(ms for _, ms in timings[i * k:(i + 1) * k]) / 1e3 for i in range(calls)], names


def _window(readings: list[power.Reading], begin: float, end: float) -> list[power.Reading]:
    """The readings between begin and end, with the last one before and the first one after, so the energy
    counter's difference spans the whole window."""
    inside = [i for i, r in enumerate(readings) if begin <= r.t <= end]
    lo = max(0, (inside[0] if inside else next((i for i, r in enumerate(readings) if r.t > end), len(readings))) - 1)
    hi = min(len(readings), (inside[-1] + 2) if inside else lo + 2)
    return readings[lo:hi]


@dataclass(frozen=True)
class Carry:
    """The load a steady cell left the GPU in, on the Source's clock: its verdict's rule, when the load began (joined
    across gaps of at most CARRY_GAP_S with the cells before) and when its stream ended."""

    rule: str
    since: float
    ended: float

    def joins(self, start: float) -> bool:
        """A stream starting at `start` continues this load."""
        return start - self.ended <= CARRY_GAP_S


@dataclass(frozen=True)
class InLoad:
    """A steady headline sampled inside the load: the samples, the state and the telemetry of their span, and the load
    it leaves for the next cell."""

    sampled: Sampled
    power: PowerState
    telemetry: Telemetry
    settle_s: float  # seconds of load before the first timed call
    carry: Carry | None = None


def sample_in_load(timer, fn: Callable, args: tuple, source: power.Source, settings: TimingSettings,
                   pace_s: float | None, clock: Callable[[], float] = time.monotonic, recorder=None,
                   carry: Carry | None = None) -> InLoad:
    """steady: one CUPTI session around one unbroken stream of back-to-back calls. The stream runs until the GPU's
    readings reach a steady state (power.judge; a light one that a throttle reason then contradicts is judged
    again); the samples are the calls that ran wholly inside the window over which the state held, the stream going
    on until there are enough (`_enough`). The telemetry is of the same window. `carry`: the load the previous cell
    left; a stream that continues one at the power cap is judged without waiting for the cap to act."""
    rules = power.Rules.of(settings)
    per_chunk = calls_per_chunk(pace_s)
    slow = pace_s is not None and pace_s * settings.min_samples > settings.budget_s
    need = FLOOR_SAMPLES if slow else settings.min_samples
    recorder = recorder or power.Recorder(source)
    with timer.session() as session, recorder:
        stream = Stream(fn, args, per_chunk, clock)
        stream.push()
        load_start, verdict = stream.start, None
        joined = carry is not None and carry.joins(load_start)
        carried_cap = settings.carry_cap and joined and carry.rule == "capped"
        while True:
            stream.push()
            readings = list(recorder.readings)
            if verdict is not None and not power.revoked(verdict, readings, load_start):
                until = stream.ends[-1]
            elif verdict := power.judge(readings, load_start, source.power_limit_w, rules, settings.settle_max_s,
                                        carried=carried_cap):
                until = readings[-1].t
            else:
                continue
            chunks = stream.chunks_within(verdict.since, until)
            if _enough(stream, chunks, need, settings):
                break
        stream.drain()
    seconds, kernels = per_call_seconds(session.timings, stream.dispatched)
    kernel_s = [ms / 1e3 for _, ms in session.timings[-len(kernels):]]  # the last call's, kernel by kernel
    timed = [s for i in chunks for s in seconds[i * per_chunk:(i + 1) * per_chunk]]
    begin, end = stream.chunk_start(chunks[0]), stream.ends[chunks[-1]]
    readings = _window(recorder.readings, begin, end)
    telemetry = power.summarise(readings, source.power_limit_w)
    state = power.not_light(PowerState(
        policy="steady", settled=verdict.settled, wait_s=begin - load_start, note=verdict.note, rule=verdict.rule,
        sampled_in_load=True, load_s=begin - load_start, sample_s=end - begin,
        busy=min(1.0, sum(seconds) / max(stream.ends[-1] - load_start, 1e-9)),
        temperature_c=readings[0].temperature_c if readings else None,
        carried_s=carry.ended - carry.since if joined else 0.0,
        gap_s=load_start - carry.ended if carry is not None else None), telemetry)
    summary = summarise(timer.name, timed, settings.target_noise)
    left = Carry(state.rule, carry.since if joined else load_start, stream.ends[-1])
    return InLoad(Sampled(summary, kernels, stream.ends[-1] - load_start, kernel_s), state, telemetry,
                  begin - load_start, left)


def _enough(stream: Stream, chunks: list[int], need: int, settings: TimingSettings) -> bool:
    """The steady window holds enough calls: at least `need` (the floor, however long they take), then until their
    noise meets target_noise or they reach max_samples or span budget_s. CUPTI gives the calls' own times only when
    its session ends, so the noise here is the chunks' on the host's clock, over FLOOR_SAMPLES chunks at least (a
    chunk of calls 50 ms or longer is one call; a shorter call's chunk averages several, and its window holds
    dozens); the record's `converged` is the calls' own."""
    calls = len(chunks) * stream.per_chunk
    if calls < need:
        return False
    if calls >= settings.max_samples or stream.ends[chunks[-1]] - stream.chunk_start(chunks[0]) >= settings.budget_s:
        return True
    seconds = [stream.ends[i] - stream.chunk_start(i) for i in chunks]
    return len(seconds) >= FLOOR_SAMPLES and summarise("chunks", seconds, settings.target_noise).converged


def soak(timer, fn: Callable, args: tuple, source: power.Source, seconds: float, pace_s: float | None,
         clock: Callable[[], float] = time.monotonic, recorder=None) -> Soak:
    """The cell back to back for `seconds` in one CUPTI session and one unbroken stream, from wherever the GPU is:
    per bin, the median kernel time of the calls that ran in it and the GPU's readings over it."""
    per_chunk = calls_per_chunk(pace_s)
    recorder = recorder or power.Recorder(source)
    with timer.session() as session, recorder:
        stream = Stream(fn, args, per_chunk, clock)
        stream.push()
        while stream.ends[-1:] == [] or stream.ends[-1] - stream.start < seconds:
            stream.push()
        stream.drain()
    per_call, _ = per_call_seconds(session.timings, stream.dispatched)
    bin_s = max(SOAK_BIN_S, seconds / SOAK_POINTS)
    points, start = [], stream.start
    for b in range(int(-(-(stream.ends[-1] - start) // bin_s))):
        begin, end = start + b * bin_s, start + (b + 1) * bin_s
        chunks = [i for i, e in enumerate(stream.ends) if begin < e <= end]
        calls = [s for i in chunks for s in per_call[i * per_chunk:(i + 1) * per_chunk]]
        readings = _window(recorder.readings, begin, end)
        points.append(_soak_point(end - start, calls, readings))
    return Soak(seconds=stream.ends[-1] - start, bin_s=bin_s, points=points)


def _soak_point(t_s: float, calls: list[float], readings: list[power.Reading]) -> SoakPoint:
    inside = readings[1:-1] or readings
    watts = power.drawn_w(readings, readings[-1].t - readings[0].t) if len(readings) >= 2 else None
    bits = 0
    for r in inside:
        bits |= r.throttle
    return SoakPoint(
        t_s=t_s, calls=len(calls), median_s=statistics.median(calls) if calls else None,
        sm_clock_mhz=statistics.fmean(r.sm_mhz for r in inside) if inside else None,
        power_w=statistics.fmean(r.power_w for r in inside if r.power_w is not None)
        if any(r.power_w is not None for r in inside) else None,
        drawn_w=watts,
        temperature_c=max((r.temperature_c for r in inside if r.temperature_c is not None), default=None),
        throttle=power.throttle_words(bits & ~0x1),
    )


def _back_to_back(fn: Callable, args: tuple) -> Callable[[], None]:
    """Enough calls to keep the GPU busy for ~50 ms, then wait for them."""
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    calls = calls_per_chunk(time.perf_counter() - start)

    def run() -> None:
        for _ in range(calls - 1):
            fn(*args)
        jax.block_until_ready(fn(*args))

    return run


def time_step(timers: list[Timer], fn: Callable, args: tuple, settings: TimingSettings, env: PowerEnv,
              ran_s: float | None = None, carry: Carry | None = None) -> Timed:
    """Bring the GPU to the spec's power state and sample the headline timer in it under telemetry, then the
    others (ran_s: the seconds of the untimed call made just before: the pace of the calls, and where the warm-up
    would take more than half the budget, the warm-up). Under `steady`, a headline that can sample inside the load
    (a timer with a session: every kernel of a stream) does; one that cannot (the wall clock syncs each call) is
    sampled after the settling, and its record says so. `carry`: the load the previous cell's stream left (it
    continues into this one's when the gap is short: sample_in_load)."""
    headline, watch = timers[0], Stopwatch()
    state = telemetry = soaked = loaded = left = None
    sampled = []
    if env.source is not None and settings.power == "steady" and hasattr(headline, "session"):
        started, loaded = time.perf_counter(), time.time()
        made = sample_in_load(headline, fn, args, env.source, settings, ran_s, carry=carry)
        left = made.carry
        watch.count("settle", made.settle_s)
        watch.count(headline.name, time.perf_counter() - started - made.settle_s)
        sampled.append(made.sampled)
        state, telemetry = made.power, made.telemetry
    elif env.source is not None:
        with watch.phase("settle"):
            if settings.power == "steady":
                loaded = time.time()
                state = power.settle(_back_to_back(fn, args), env.source, settings.settle_max_s,
                                     power.Rules.of(settings))
            else:
                state = power.cool(env.source, env.idle or power.Idle(None, None), settings.settle_max_s)
    loaded = time.time() if loaded is None else loaded  # burst: after the cool-down
    for timer in timers[len(sampled):]:
        limit = limits(timer.name, headline.name, settings)
        if settings.power == "burst" and timer is headline:
            calls = burst_calls(ran_s, limit.min_samples)
            limit = Limits(0, calls, calls, limit.target_noise, limit.budget_s)
        with watch.phase(timer.name):
            if timer is headline and env.source is not None:
                with power.Recorder(env.source) as recorder:
                    sampled.append(sample(timer, fn, args, limit, ran_s=ran_s))
                telemetry = power.summarise(recorder.readings, env.source.power_limit_w)
                span = recorder.readings[-1].t - recorder.readings[0].t
                state = power.not_light(state.model_copy(update={
                    "sample_s": span, "temperature_c": recorder.readings[0].temperature_c}), telemetry)
            else:
                sampled.append(sample(timer, fn, args, limit, ran_s=ran_s))
    load = Window(start=loaded, end=time.time())
    if telemetry is not None:  # read over the headline's samples alone: its clock is no other timer's
        telemetry = telemetry.model_copy(update={"timer": headline.name})
    if settings.soak_s and env.source is not None and hasattr(headline, "session"):
        with watch.phase("soak"):
            power.cool(env.source, env.idle or power.Idle(None, None), settings.settle_max_s)
            soaked = soak(headline, fn, args, env.source, settings.soak_s, ran_s)
        left = None  # the soak began from a cooled GPU, and its load is not a cell's steady state
    return Timed(sampled, state, telemetry, soaked, watch.phases, load, left)
