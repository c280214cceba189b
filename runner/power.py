"""The GPU's power state around a cell's samples.

A GPU under sustained load hits its power limit and lowers its SM clock, so a kernel time means little without
the state it was taken in. A Recorder reads NVML from a background thread while the headline timer samples;
`steady` runs the call back to back until the clock settles before sampling, `burst` waits for the GPU to cool
back to its idle state and takes a short sample. Every reading comes from a Source, so the policies are tested
with a scripted one.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from typing import Callable, Protocol

from runner import gpu
from runner.record import PowerState, Span, Telemetry
from runner.spec import TimingSettings

# NVML's clock event (throttle) reason bits, in words
THROTTLE = {
    0x1: "idle",
    0x2: "application clocks setting",
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "thermal (software)",
    0x40: "thermal (hardware)",
    0x80: "power brake (hardware)",
    0x100: "display clock setting",
    0x200: "board limit",
    0x400: "reliability",
}
INTERVAL_S = 0.01  # NVML updates power and clocks about this often
SETTLE_WINDOW_S = 0.5  # steady: the clock must hold for this long ...
SETTLE_TOLERANCE = 0.01  # ... within 1 % ...
SPEC_DEFAULTS = TimingSettings()  # the steady rules' numbers are the spec's (timing.*), owned there, not here
HEAVY_MIN_S = SPEC_DEFAULTS.heavy_after_s  # ... after at least this long back to back (a cap can take a second to act)
POWER_CAP = 0x4
# at the cap: the power drawn over the last window within 5 % of the window before, less than a ramp from idle to
# the cap moves it. Replayed on the committed H200 probe (docs/evidence/energy-step-replay-20261207.txt) a 0.5 s
# window's bound (ENERGY_SPAN_S) reached 7.9 %, and the windows' means wander -6.1 to +4.5 % about each stream's
# whole mean under the cap, so the test fails 34-97 of some 200 window pairs a stream there (docs/benchmarks.md,
# "The numbers behind the runner's constants")
CAP_TOLERANCE = 0.05
LIGHT_LOAD = SPEC_DEFAULTS.light_share  # drawing less than this share of the power limit, no throttle reason: uncapped
LIGHT_AFTER_S = SPEC_DEFAULTS.light_after_s  # ... judged only once the load has run this long
LIGHT_RAMP_S = 0.15  # the energy counter is read from this far into a load, past its lag
# the least sample drawn_w is asked of: its figure comes from the counter's first and last change in the sample, each
# dated to within a reading, so it is off by up to a reading interval over the seconds between them (at least half
# the sample, drawn_w); on the committed H200 probe (a change every 100 ms, read every 13-31 ms) that bound reached
# 7.9 % in a 0.5 s window (docs/evidence/energy-step-replay-20261207.txt)
ENERGY_SPAN_S = 0.5
NVML_AVERAGE_S = 1.0  # NVML's power reading is a trailing average over about this long
UNSTABLE_SPREAD = 0.02  # a clock that moved more than 2 % while sampling flags the cell
COOL_MARGIN_C = 5  # burst: back within 5 °C of the idle temperature (the last degrees take minutes)
IDLE_MARGIN_W = 10.0  # burst: back near idle power under 1.5 x idle + this many watts (idle_margin_w) ...
IDLE_MARGIN_LIMIT_W = 700.0  # ... at this power limit, the H200's, which every committed burst run waited under


@dataclass(frozen=True)
class Reading:
    t: float
    sm_mhz: float
    mem_mhz: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    throttle: int = 0  # NVML clock event reason bits
    energy_mj: float | None = None  # the energy counter: what was drawn, where NVML's power is a trailing average


class Source(Protocol):
    power_limit_w: float | None

    def read(self) -> Reading: ...


def throttle_words(bits: int) -> list[str]:
    return [word for bit, word in THROTTLE.items() if bits & bit]


class NvmlSource:
    """Readings of one GPU through NVML (nvidia-ml-py)."""

    def __init__(self, index: int = 0):
        import pynvml

        self.nvml = pynvml
        pynvml.nvmlInit()
        self.handle = gpu.nvml_handle(pynvml, index)  # this process's GPU `index`, under CUDA_VISIBLE_DEVICES too
        self.reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        self.power_limit_w = pynvml.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1000

    def read(self) -> Reading:
        nvml, handle = self.nvml, self.handle
        return Reading(
            t=time.monotonic(),
            sm_mhz=nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            mem_mhz=nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            power_w=nvml.nvmlDeviceGetPowerUsage(handle) / 1000,
            temperature_c=nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            throttle=self.reasons(handle),
            energy_mj=self._energy(),
        )

    def _energy(self) -> float | None:
        try:
            return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception:  # before Volta, or a driver that does not count it
            return None


def open_source(index: int, on_gpu: bool) -> tuple[Source | None, str | None]:
    """NVML for device `index`, or None and why there is no telemetry."""
    if not on_gpu:
        return None, "no NVIDIA GPU: clocks and power are not observable"
    try:
        return NvmlSource(index), None
    except Exception as error:  # no nvidia-ml-py, or a driver without NVML
        return None, f"NVML unavailable ({type(error).__name__}: {error})"


class Recorder:
    """Reads a Source every INTERVAL_S from a thread while inside `with`."""

    def __init__(self, source: Source, interval_s: float = INTERVAL_S):
        self.source, self.interval_s = source, interval_s
        self.readings: list[Reading] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="attnbench-telemetry", daemon=True)

    def __enter__(self) -> Recorder:
        self.readings.append(self.source.read())
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.readings.append(self.source.read())

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.readings.append(self.source.read())


def _span(values: list[float]) -> Span | None:
    if not values:
        return None
    return Span(min=min(values), median=statistics.median(values), max=max(values), mean=statistics.fmean(values))


def summarise(readings: list[Reading], power_limit_w: float | None) -> Telemetry:
    """Spans of every reading over the window, the throttle reasons seen, how far the SM clock moved, and the power
    drawn by the energy counter where the window is long enough for its steps (ENERGY_SPAN_S)."""
    clocks = [r.sm_mhz for r in readings]
    bits = 0
    for r in readings:
        bits |= r.throttle
    return Telemetry(
        source="nvml",
        samples=len(readings),
        sm_clock_mhz=_span(clocks),
        mem_clock_mhz=_span([r.mem_mhz for r in readings if r.mem_mhz is not None]),
        power_w=_span([r.power_w for r in readings if r.power_w is not None]),
        drawn_w=drawn_w(readings, span) if (span := readings[-1].t - readings[0].t) >= ENERGY_SPAN_S else None,
        power_limit_w=power_limit_w,
        temperature_c=_span([r.temperature_c for r in readings if r.temperature_c is not None]),
        throttle=throttle_words(bits),
        clock_spread=(max(clocks) - min(clocks)) / max(clocks) if max(clocks) > 0 else 0.0,
    )


def unstable(telemetry: Telemetry) -> bool:
    return telemetry.clock_spread > UNSTABLE_SPREAD


def mean_power_w(telemetry: Telemetry | None, state: PowerState | None) -> float | None:
    """The power the headline sample drew: the energy counter's over a long enough sample, else NVML's reading where
    it can be trusted (a trailing one-second average, so only after a second or more of steady back-to-back calls);
    None rather than a wrong figure otherwise (a burst, or a light load settled in 0.1-0.5 s)."""
    if telemetry is None:
        return None
    if telemetry.drawn_w is not None:
        return telemetry.drawn_w
    settled_long = state is not None and state.policy == "steady" and state.wait_s >= NVML_AVERAGE_S
    return telemetry.power_w.mean if settled_long and telemetry.power_w else None


def _held(history: list[Reading], window_s: float) -> bool:
    """The SM clock stayed within SETTLE_TOLERANCE over the last window_s of readings."""
    if not history or history[-1].t - history[0].t < window_s:
        return False
    recent = [r.sm_mhz for r in history if r.t >= history[-1].t - window_s]
    return (max(recent) - min(recent)) <= SETTLE_TOLERANCE * max(recent)


def _changes(history: list[Reading]) -> list[tuple[Reading, float]]:
    """(reading, seconds since the reading before) for each reading at which the energy counter had moved: the
    counter was updated within those seconds before it."""
    counted = [r for r in history if r.energy_mj is not None]
    return [(r, r.t - before.t) for before, r in zip(counted, counted[1:]) if r.energy_mj != before.energy_mj]


def _counted(history: list[Reading], window_s: float) -> tuple[float, float, float]:
    """(watts, seconds, stale_s): the energy counter's mean power between its first and last update in the last
    window_s, the seconds between the readings that showed them, and how far either update may lie before its
    reading (the sampling interval there), so the true seconds are within stale_s of these; (0, 0, 0) when the
    counter moved fewer than two times, both at one timestamp, or fell between them (a reset: NVML counts since the
    driver loaded), as where it was not read. Between updates the counter stands still (100 ms on an H200), so the
    first and last readings of a window are up to a step stale: only its change points date what it counted."""
    moved = [(r, gap) for r, gap in _changes(history) if r.t >= history[-1].t - window_s]
    if len(moved) < 2:
        return 0.0, 0.0, 0.0
    (first, first_gap), (last, last_gap) = moved[0], moved[-1]
    seconds = last.t - first.t
    fell = any(b.energy_mj < a.energy_mj for (a, _), (b, _) in zip(moved, moved[1:]))
    if seconds <= 0 or fell:  # a coarse or repeated timestamp: no span to divide by; a reset: no energy to count
        return 0.0, 0.0, 0.0
    return (last.energy_mj - first.energy_mj) / 1000 / seconds, seconds, max(first_gap, last_gap)


def drawn_w(history: list[Reading], window_s: float) -> float | None:
    """Mean power over the last window_s from the energy counter (NVML's power reading lags by about a second)."""
    watts, seconds, _ = _counted(history, window_s)
    return watts if seconds > 0 and seconds >= window_s / 2 else None


def _reason_since(history: list[Reading], load_start: float) -> bool:
    """A throttle reason in a reading since the load began ("idle" is no reason): what no light load may have."""
    return any(r.throttle & ~0x1 for r in history if r.t >= load_start)


def _light(history: list[Reading], load_start: float, limit_w: float | None, rules: Rules) -> float | None:
    """The watts drawn when a load that has run for rules.light_after_s is far below the power limit with no
    throttle reason since it began (nothing can pull the clock down), else None.

    The energy counter lags the load (by how much: docs/benchmarks.md, "The numbers behind the runner's constants"),
    so it is read only from LIGHT_RAMP_S into the load. It is read between its change points (_counted): over w
    seconds between them, an update may lie up to stale_s (a sampling interval) before the reading that showed it,
    so the counter may have counted only w - stale_s of the load, and the watts drawn may be w / (w - stale_s) times
    what it says. A load counts as light only when that much would still be below light_share of the limit. A heavy
    kernel meets the power cap's reason within a fraction of a second, which a light verdict may never have seen."""
    if limit_w is None or not history or history[-1].t - load_start < rules.light_after_s:
        return None
    if _reason_since(history, load_start):
        return None
    watts, seconds, stale_s = _counted([r for r in history if r.t >= load_start + LIGHT_RAMP_S], rules.light_after_s)
    if seconds <= stale_s:
        return None
    return watts if watts * seconds / (seconds - stale_s) < rules.light_share * limit_w else None


def _capped(history: list[Reading], window_s: float) -> float | None:
    """The watts drawn when the GPU sits at its power cap, else None: the power-cap reason in every reading of the
    last two windows, the energy counter's power over the last window within CAP_TOLERANCE of the window before,
    and the mean SM clock of the two within SETTLE_TOLERANCE (no trend). The cap's controller moves the clock by
    more than that from one reading to the next (docs/benchmarks.md, "The numbers behind the runner's constants"),
    so under the cap a steady power and an untrending clock, not a clock within 1 %, is the steady state."""
    end = history[-1].t
    if end - history[0].t < 2 * window_s:
        return None
    if not all(r.throttle & POWER_CAP for r in history if r.t >= end - 2 * window_s):
        return None
    earlier = [r for r in history if r.t <= end - window_s]
    last, before = drawn_w(history, window_s), drawn_w(earlier, window_s)
    if last is None or before is None or abs(last - before) > CAP_TOLERANCE * max(last, before):
        return None
    clock_now = statistics.fmean(r.sm_mhz for r in history if r.t > end - window_s)
    clock_before = statistics.fmean(r.sm_mhz for r in earlier if r.t >= end - 2 * window_s)
    return last if abs(clock_now - clock_before) <= SETTLE_TOLERANCE * max(clock_now, clock_before) else None


@dataclass(frozen=True)
class Rules:
    """When a load has reached its steady state (the spec's timing settings; the windows are this module's)."""

    heavy_after_s: float = HEAVY_MIN_S
    light_after_s: float = LIGHT_AFTER_S
    light_share: float = LIGHT_LOAD
    window_s: float = SETTLE_WINDOW_S

    @classmethod
    def of(cls, settings) -> Rules:
        return cls(settings.heavy_after_s, settings.light_after_s, settings.light_share)


@dataclass(frozen=True)
class Verdict:
    """The steady state a load reached: by which rule, since when it held (the samples' window), in words."""

    rule: str  # "held", "capped", "light" or "unsettled"
    since: float  # the Source's time from which the state held
    note: str = ""

    @property
    def settled(self) -> bool:
        return self.rule != "unsettled"


def judge(history: list[Reading], load_start: float, limit_w: float | None, rules: Rules,
          max_s: float, carried: bool = False) -> Verdict | None:
    """The state of a load that began at load_start, from the readings so far, or None while it is still on its way:
    the SM clock held within 1 % for a window, or the GPU held its power cap at a steady power, over a window that
    began rules.heavy_after_s or more into the load; after rules.light_after_s, a load too light to be capped; after
    max_s, unsettled. The verdict's `since` is where the window began: the samples are the calls after it.

    `carried`: the load follows, after a short host gap, one that ended at the power cap. The wait of
    rules.heavy_after_s is for a cap that has yet to act; a GPU that carries the cap needs only the cap rule's own
    proof, over this load's readings: the cap's reason in every one of two windows at a steady power and clock."""
    now = history[-1].t
    waited = now - load_start
    recent = [r for r in history if r.t >= load_start]
    heavy = waited >= min(rules.heavy_after_s + rules.window_s, max_s)
    if heavy and _held(recent, rules.window_s):
        return Verdict("held", now - rules.window_s)
    if (heavy or carried) and (watts := _capped(recent, rules.window_s)):
        clocks = [r.sm_mhz for r in recent if r.t >= now - rules.window_s]
        carry = "" if heavy else f"; the cap carried from the cell before, judged after {waited:.2f} s"
        return Verdict("capped", now - rules.window_s,
                       f"at the power cap ({watts:.0f} W drawn, steady within {CAP_TOLERANCE:.0%}; SM clock "
                       f"{min(clocks):.0f}-{max(clocks):.0f} MHz{carry})")
    if watts := _light(recent, load_start, limit_w, rules):
        return Verdict("light", load_start + LIGHT_RAMP_S,
                       f"light load ({watts:.0f} W of {limit_w:.0f} W, no throttle reason since the load began)")
    if waited >= max_s:
        moved = f"{min(r.sm_mhz for r in recent[-5:]):.0f}-{max(r.sm_mhz for r in recent[-5:]):.0f} MHz"
        return Verdict("unsettled", now - rules.window_s,
                       f"the SM clock was still moving ({moved}) after {max_s:g} s; sampled anyway")
    return None


def revoked(verdict: Verdict, history: list[Reading], load_start: float) -> bool:
    """A light verdict that a throttle reason seen since the load began contradicts: something did pull the clock."""
    return verdict.rule == "light" and _reason_since(history, load_start)


def not_light(state: PowerState, telemetry: Telemetry) -> PowerState:
    """A steady state judged light whose samples' telemetry lists a throttle reason: unsettled, saying both, never
    "light" beside a reason (the readings that judged it came before the samples)."""
    reasons = [r for r in telemetry.throttle if r != "idle"]
    if state.rule != "light" or not reasons:
        return state
    return state.model_copy(update={"rule": "unsettled", "settled": False, "note": (
        f"not light while sampled: its samples' telemetry saw {', '.join(reasons)}; sampled anyway after the readings "
        f"before them read {state.note}")})


def settle(run_calls: Callable[[], None], source: Source, max_s: float, rules: Rules = Rules()) -> PowerState:
    """steady for a timer that cannot sample inside the load (the wall clock syncs every call): run the call back to
    back until `judge` gives the state, at most max_s. The samples that follow come after a host gap."""
    history = [source.read()]
    start = history[0].t
    while True:
        run_calls()
        history.append(source.read())
        if verdict := judge(history, start, source.power_limit_w, rules, max_s):
            return PowerState(policy="steady", settled=verdict.settled, wait_s=history[-1].t - start,
                              note=verdict.note, rule=verdict.rule, load_s=history[-1].t - start,
                              sampled_in_load=False)


@dataclass(frozen=True)
class Idle:
    """The GPU's state before the run's first cell: what `burst` waits to get back to."""

    temperature_c: float | None
    power_w: float | None


def cool(source: Source, idle: Idle, max_s: float, sleep: Callable[[float], None] = time.sleep) -> PowerState:
    """burst: wait (at most max_s) until the GPU is back within COOL_MARGIN_C of its idle temperature and its
    power near idle, so the short sample that follows starts at the boost clock."""
    first = reading = source.read()
    while True:
        warm = idle.temperature_c is not None and reading.temperature_c is not None and \
            reading.temperature_c > idle.temperature_c + COOL_MARGIN_C
        busy = idle.power_w is not None and reading.power_w is not None and \
            reading.power_w > 1.5 * idle.power_w + idle_margin_w(source.power_limit_w)
        waited = reading.t - first.t
        if not (warm or busy):
            return PowerState(policy="burst", settled=True, wait_s=waited)
        if waited >= max_s:
            return PowerState(policy="burst", settled=False, wait_s=waited,
                              note=f"not back to idle after {max_s:g} s ({_state(reading.temperature_c, reading.power_w)}"
                                   f"; idle {_state(idle.temperature_c, idle.power_w)}); sampled anyway")
        sleep(0.1)
        reading = source.read()


def idle_margin_w(limit_w: float | None) -> float:
    """burst's margin over 1.5 x the idle power, in proportion to the GPU's power limit: IDLE_MARGIN_W at the H200's
    IDLE_MARGIN_LIMIT_W, about 1 W at an L4's 72 W, where a fixed 10 W was 14 % of its limit; IDLE_MARGIN_W where
    no limit was read."""
    return IDLE_MARGIN_W * limit_w / IDLE_MARGIN_LIMIT_W if limit_w else IDLE_MARGIN_W


def _state(temperature_c: float | None, power_w: float | None) -> str:
    return " / ".join(f"{value:.0f} {unit}" for value, unit in ((temperature_c, "°C"), (power_w, "W"))
                      if value is not None)
