"""runner/sampling.py: steady samples taken inside the load, their telemetry, and the soak, with a scripted GPU.

A GPU's clock cannot be arranged, so a Script (tests/test_power.py) stands for NVML and a scripted session for
CUPTI: each call's kernel time follows the script's SM clock at the moment it was made, as a power-capped GPU's
would. The stream, the judging and the choice of samples are the real ones.
"""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from runner import power
from runner.sampling import Stream, _enough, per_call_seconds, sample_in_load, soak
from runner.spec import TimingSettings
from test_power import Script

BOOST_MHZ, CAPPED_MHZ = 1980.0, 1600.0
CALL_S = 0.001  # at the boost clock


class Polled:
    """A Recorder that reads the Script whenever its readings are asked for (each read moves time on a step)."""

    def __init__(self, source: Script):
        self.source, self._readings = source, []

    @property
    def readings(self):
        self._readings.append(self.source.read())
        return self._readings

    def __enter__(self):
        self._readings.append(self.source.read())
        return self

    def __exit__(self, *exc):
        self._readings.append(self.source.read())


class ScriptedTimer:
    """A device timer whose session reports, for each call made inside it, a kernel time that scales with the
    script's SM clock at that moment (two kernels a call, as a fwd_bwd call has several)."""

    name = "device"

    def __init__(self, source: Script):
        self.source, self.calls = source, []

    def call(self, *args):
        self.calls.append(self.source.t)
        return jnp.zeros(())

    def session(self):
        timer = self

        class Session:
            def __enter__(self):
                timer.calls.clear()
                return self

            def __exit__(self, *exc):
                self.timings = [(name, ms) for t in timer.calls
                                for name, ms in (("fwd", 0.4e3 * CALL_S * BOOST_MHZ / timer.source.sm(t)),
                                                 ("bwd", 0.6e3 * CALL_S * BOOST_MHZ / timer.source.sm(t)))]

        return Session()


def capping(after_s: float = 0.6, throttle_from: float = 0.15):
    """A GPU that boosts, then settles at the power cap: the clock falls to CAPPED_MHZ by `after_s`."""
    return Script(sm=lambda t: max(CAPPED_MHZ, BOOST_MHZ - (BOOST_MHZ - CAPPED_MHZ) * t / after_s),
                  throttle=lambda t: 0x4 if t >= throttle_from else 0, drawn=lambda t: 690.0, step=0.01)


def in_load(source: Script, carry=None, **timing):
    timer = ScriptedTimer(source)
    settings = TimingSettings(**{"min_samples": 10, "budget_s": 2.0} | timing)
    made = sample_in_load(timer, timer.call, (), source, settings, pace_s=CALL_S, clock=lambda: source.t,
                          recorder=Polled(source), carry=carry)
    return made, timer


def test_steady_samples_are_the_calls_of_the_unbroken_load_once_its_state_held():
    made, timer = in_load(capping())
    capped_s = CALL_S * BOOST_MHZ / CAPPED_MHZ
    assert made.sampled.summary.median_s == pytest.approx(capped_s)  # none of the boost-clock calls before
    assert made.power.sampled_in_load and made.power.rule == "held" and made.power.settled
    assert made.power.load_s >= 1.0 and made.power.sample_s >= 0.45
    assert made.telemetry.sm_clock_mhz.median == CAPPED_MHZ and made.telemetry.throttle == ["power cap"]
    assert made.sampled.summary.samples >= 10 and made.sampled.kernels == ["fwd", "bwd"]
    # the last call's kernels, each timed: what a split cell's communication is read from (runner/communication.py)
    assert made.sampled.kernel_s == pytest.approx([0.4 * capped_s, 0.6 * capped_s])


def test_the_telemetry_is_of_the_sampled_calls_not_of_the_settling():
    made, _ = in_load(capping(after_s=0.6))
    # the boost clock (1980 MHz) was read during the settling: it is not the samples' state
    assert made.telemetry.sm_clock_mhz.max == CAPPED_MHZ and made.telemetry.drawn_w == pytest.approx(690.0)
    assert made.power.temperature_c == 60.0


def test_a_light_load_is_sampled_from_past_the_counters_lag_and_never_beside_a_throttle_reason():
    light = Script(sm=lambda t: BOOST_MHZ, drawn=lambda t: 200.0, power_w=lambda t: 150.0, step=0.01)
    made, _ = in_load(light)
    assert made.power.rule == "light" and made.power.note.startswith("light load (200 W of 700 W")
    assert power.LIGHT_RAMP_S <= made.power.load_s <= 0.2 and made.telemetry.throttle == []
    capped_once = Script(sm=lambda t: BOOST_MHZ, drawn=lambda t: 200.0, throttle=lambda t: 0x4 if t > 0.3 else 0,
                         step=0.01)
    made, _ = in_load(capped_once)
    assert made.power.rule != "light" and "light" not in made.power.note


def test_calls_too_slow_for_the_window_stream_on_until_three_are_inside():
    slow = Script(sm=lambda t: 1700.0, drawn=lambda t: 690.0, throttle=lambda t: 0x4, step=0.2)  # a read per chunk
    timer = ScriptedTimer(slow)
    settings = TimingSettings(min_samples=10, budget_s=2.0)
    made = sample_in_load(timer, timer.call, (), slow, settings, pace_s=0.5, clock=lambda: slow.t,
                          recorder=Polled(slow))
    assert made.sampled.summary.samples >= 3 and made.power.sampled_in_load


def test_an_unsettled_load_is_sampled_at_the_cap_and_says_so():
    drifting = Script(sm=lambda t: BOOST_MHZ - 40 * t, drawn=lambda t: 690.0 - 10 * t, step=0.01)
    made, _ = in_load(drifting, settle_max_s=2.0)
    assert not made.power.settled and made.power.rule == "unsettled" and "still moving" in made.power.note


def test_the_stream_never_waits_on_the_newest_chunks():
    waited = []

    class Out:
        def __init__(self, i):
            self.i = i

        def block_until_ready(self):
            waited.append(self.i)
            return self

    made = iter(range(100))
    stream = Stream(lambda: Out(next(made)), (), per_chunk=2)
    for _ in range(5):
        stream.push()
    assert waited == [1, 3, 5] and len(stream.pending) == 2  # chunks 0-2 ended (calls 1, 3, 5); 3 and 4 queued
    stream.drain()
    assert waited == [1, 3, 5, 7, 9] and stream.dispatched == 10


def test_kernels_split_into_calls_or_the_session_is_refused():
    seconds, names = per_call_seconds([("a", 1.0), ("b", 2.0)] * 3, 3)
    assert seconds == pytest.approx([0.003] * 3) and names == ["a", "b"]
    with pytest.raises(RuntimeError, match="5 kernels over 2 calls"):
        per_call_seconds([("a", 1.0)] * 5, 2)
    with pytest.raises(RuntimeError, match="no kernel"):
        per_call_seconds([], 2)


def test_a_soak_records_throughput_clock_power_and_temperature_against_time():
    heating = Script(sm=lambda t: max(CAPPED_MHZ, BOOST_MHZ - 400 * t), temperature=lambda t: 40 + 5 * t,
                     drawn=lambda t: min(690.0, 300 + 600 * t), throttle=lambda t: 0x4 if t > 0.5 else 0,
                     step=0.01)
    timer, recorder = ScriptedTimer(heating), Polled(heating)
    made = soak(timer, timer.call, (), heating, 3.0, pace_s=CALL_S, clock=lambda: recorder.readings[-1].t,
                recorder=recorder)
    assert made.seconds >= 3.0 and made.bin_s == 0.25 and len(made.points) >= 12
    first, last = made.points[0], made.points[-1]
    assert first.median_s < last.median_s == pytest.approx(CALL_S * BOOST_MHZ / CAPPED_MHZ)
    assert first.sm_clock_mhz > last.sm_clock_mhz == CAPPED_MHZ
    assert first.temperature_c < last.temperature_c and last.throttle == ["power cap"]
    assert last.drawn_w == pytest.approx(690.0) and all(p.calls > 0 for p in made.points)


def test_a_burst_sample_ends_before_the_power_cap_can_act():
    from runner.sampling import BURST_FLOOR, burst_calls

    assert burst_calls(0.030, 10) == BURST_FLOOR  # T = 32k on an H200: two calls, not ten
    assert burst_calls(0.0017, 10) == 10  # T = 8k: 17 fit in 30 ms, the spec asks for 10
    assert burst_calls(0.006, 10) == 5 and burst_calls(None, 10) == 10


def test_time_step_returns_the_seconds_of_each_timer_it_ran():
    """The step returns its phases with what it sampled (nothing written into a stopwatch it was handed)."""
    from runner.sampling import PowerEnv, time_step
    from runner.timers import WallTimer

    class Second(WallTimer):
        name = "second"

    x = jnp.ones((8, 8))
    settings = TimingSettings(warmup=0, min_samples=2, max_samples=3, budget_s=0.05)
    timed = time_step([WallTimer(), Second()], lambda a: a @ a, (x,), settings, PowerEnv())
    assert [s.summary.timer for s in timed.sampled] == ["wall", "second"]
    assert set(timed.phases) == {"wall", "second"} and all(seconds > 0 for seconds in timed.phases.values())


def test_time_step_says_when_its_timers_loaded_the_gpu():
    """The load window spans every timer's samples (the gaps between cells' windows are the GPU's idle time)."""
    import time

    from runner.sampling import PowerEnv, time_step
    from runner.timers import WallTimer

    x = jnp.ones((8, 8))
    settings = TimingSettings(warmup=0, min_samples=5, max_samples=5, budget_s=0.05)
    before = time.time()
    timed = time_step([WallTimer(), WallTimer()], lambda a: a @ a, (x,), settings, PowerEnv())
    after = time.time()
    assert before <= timed.load.start <= timed.load.end <= after
    assert timed.load.end - timed.load.start >= sum(timed.phases.values()) * 0.99


def at_the_cap(cap_from: float = 0.0):
    """A GPU at its power cap from `cap_from` on: the cap's reason in every reading, a steady power, a dithering clock."""
    return Script(sm=lambda t: 1650.0 + (40.0 if int(t * 20) % 2 else 0.0), throttle=lambda t: 0x4 if t >= cap_from
                  else 0, drawn=lambda t: 690.0, step=0.01)


def test_a_stream_that_continues_a_capped_load_is_judged_by_the_caps_own_proof_without_the_wait():
    from runner.sampling import Carry

    fresh, _ = in_load(at_the_cap())
    assert fresh.power.rule == "capped" and fresh.power.load_s >= 1.0  # judged at 1.5 s: a cap that may have yet to act
    assert fresh.power.carried_s == 0.0 and fresh.power.gap_s is None
    off, _ = in_load(at_the_cap(), Carry("capped", since=-5.0, ended=-0.05))  # carry_cap unset: the wait, as before
    assert off.power.load_s >= 1.0 and "carried" not in off.power.note and off.power.carried_s == pytest.approx(4.95)
    carried, _ = in_load(at_the_cap(), Carry("capped", since=-5.0, ended=-0.05), carry_cap=True)
    assert carried.power.rule == "capped" and 0.5 <= carried.power.load_s < 0.6  # judged at 1 s: two windows of cap
    assert "carried from the cell before" in carried.power.note
    assert carried.power.carried_s == pytest.approx(4.95) and carried.power.gap_s == pytest.approx(0.06, abs=0.02)
    assert carried.carry.rule == "capped" and carried.carry.since == -5.0  # one load, cell after cell
    assert carried.carry.ended >= carried.power.load_s


def test_a_carry_after_a_long_gap_or_from_a_light_load_or_without_the_caps_reason_throughout_waits():
    from runner.sampling import Carry
    from runner.spec import CARRY_GAP_S, TimingSettings

    assert f"within {CARRY_GAP_S:g} s of a capped cell's" in TimingSettings.model_fields["carry_cap"].description
    late, _ = in_load(at_the_cap(), Carry("capped", since=-5.0, ended=-CARRY_GAP_S - 0.1), carry_cap=True)
    assert late.power.load_s >= 1.0 and late.power.carried_s == 0.0 and late.carry.since >= 0.0
    light, _ = in_load(at_the_cap(), Carry("light", since=-5.0, ended=-0.05), carry_cap=True)
    assert light.power.load_s >= 1.0 and light.power.carried_s == pytest.approx(4.95)
    acting, _ = in_load(at_the_cap(cap_from=0.2), Carry("capped", since=-5.0, ended=-0.05), carry_cap=True)
    assert acting.power.rule == "capped" and acting.power.load_s >= 0.65  # two windows from 0.2 s, each at its cap


class Paced:
    """A device timer whose calls take scripted seconds each (`seconds(i)` for the i-th): waiting on a call moves the
    script's time on by its seconds, as a GPU finishes the calls queued before, and the session reports each call's
    time."""

    name = "device"

    def __init__(self, source: Script, seconds):
        self.source, self.seconds, self.taken = source, seconds, []

    def call(self, *args):
        self.taken.append(self.seconds(len(self.taken)))
        return Done(self.source, self.taken[-1])

    def session(self):
        timer = self

        class Session:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.timings = [("attention", 1e3 * s) for s in timer.taken]

        return Session()


class Done:
    """A call's output: the host that waits on it sees the GPU's time move on by the call's seconds."""

    def __init__(self, source: Script, seconds: float):
        self.source, self.seconds = source, seconds

    def block_until_ready(self):
        self.source.t += self.seconds
        return self


def paced(seconds, **timing):
    """A steady cell of 0.1 s calls (a chunk is one call) on a GPU at its cap, its clock held."""
    held = Script(sm=lambda t: 1700.0, throttle=lambda t: 0x4, drawn=lambda t: 690.0, step=0.01)
    timer = Paced(held, seconds)
    made = sample_in_load(timer, timer.call, (), held, TimingSettings(**timing), pace_s=0.1, clock=lambda: held.t,
                          recorder=Polled(held))
    return made.sampled.summary, made.power


def test_a_steady_cell_streams_on_past_min_samples_until_its_noise_meets_the_target():
    settling = lambda i: 0.1 + (0.04 if i < 25 and i % 2 else 0.0)  # noisy for its first 25 calls, then steady
    summary, state = paced(settling, min_samples=10, budget_s=6.0)
    assert summary.converged and summary.noise <= 0.05 and summary.samples >= 30  # min_samples alone: 10, noise 0.4
    assert state.rule == "held" and state.sample_s < 6.0


def test_a_steady_cell_that_never_meets_its_noise_stops_at_the_budget_or_the_cap_and_says_so():
    noisy = lambda i: 0.1 + 0.04 * (i % 2)
    summary, state = paced(noisy, min_samples=5, budget_s=1.0)
    assert not summary.converged and 1.0 <= state.sample_s < 1.3 and 5 <= summary.samples <= 10
    summary, _ = paced(noisy, min_samples=3, max_samples=6, budget_s=100.0)
    assert not summary.converged and summary.samples == 6
    summary, state = paced(lambda i: 0.3, min_samples=10, budget_s=0.1)  # the floor: 3 calls past the budget
    assert summary.samples == 3 and state.sample_s > 0.1


def test_a_light_verdict_that_a_throttle_reason_contradicts_is_judged_again():
    capped_late = Script(sm=lambda t: BOOST_MHZ, drawn=lambda t: 200.0, throttle=lambda t: 0x4 if t > 0.45 else 0,
                         step=0.01)  # judged light at 0.4 s; the cap's reason from 0.45 s
    made, _ = in_load(capped_late, min_samples=1500, max_samples=2000)  # its stream runs on past the reason
    assert made.power.rule == "held" and not made.power.note.startswith("light")
    assert made.telemetry.throttle == ["power cap"]


def test_a_headline_sampled_after_a_light_settling_never_reads_light_beside_the_cap_it_met():
    """The wall clock cannot sample inside the load: it samples after power.settle, whose light verdict came from
    the readings before (how two schema-3 H200 cells came to say "light load ... no throttle" beside the cap)."""
    import time

    from runner.sampling import PowerEnv, time_step
    from runner.timers import WallTimer

    capped_after = Script(sm=lambda t: BOOST_MHZ, drawn=lambda t: 200.0, throttle=lambda t: 0x4 if t > 0.52 else 0,
                          step=0.05)  # light by 0.5 s of settling, the cap from the next reading: the samples'
    settings = TimingSettings(warmup=0, min_samples=3, max_samples=3, budget_s=5.0)
    timed = time_step([WallTimer()], lambda: time.sleep(0.005) or jnp.zeros(()), (), settings, PowerEnv(capped_after))
    assert timed.telemetry.throttle == ["power cap"] and not timed.power.sampled_in_load
    assert timed.power.rule == "unsettled" and timed.power.note.startswith("not light while sampled")


def test_a_light_stream_whose_samples_telemetry_shows_a_reason_reads_unsettled():
    """The recorder's thread may append a reading the stream's last look did not see: where that reading, inside the
    samples' window, first shows the cap (here at 0.42 s, just after the light verdict), there is nothing left to
    judge again by, and the cell says so."""

    class Lagging(Polled):  # each look misses the newest reading
        @property
        def readings(self):
            self._readings.append(self.source.read())
            return self._readings[:-1]

    light = Script(sm=lambda t: BOOST_MHZ, drawn=lambda t: 200.0, throttle=lambda t: 0x4 if t > 0.42 else 0,
                   step=0.01)
    timer = ScriptedTimer(light)
    made = sample_in_load(timer, timer.call, (), light, TimingSettings(min_samples=10), pace_s=CALL_S,
                          clock=lambda: light.t, recorder=Lagging(light))
    assert made.telemetry.throttle == ["power cap"] and made.power.rule == "unsettled" and not made.power.settled
    assert made.power.note.startswith("not light while sampled: its samples' telemetry saw power cap; sampled "
                                      "anyway after the readings before them read light load")
    assert made.carry.rule == "unsettled"  # the next cell carries no light load


def test_the_chunks_noise_stops_a_stream_only_over_three_chunks_at_least():
    """One chunk's noise is none (IQR 0 of one value): a window of short calls that holds min_samples in one chunk
    streams on until FLOOR_SAMPLES chunks show their spread, then stops where they meet target_noise."""
    stream = Stream(None, (), per_chunk=20)
    stream.start, stream.ends = 0.0, [0.05, 0.10, 0.15]
    settings = TimingSettings(min_samples=10, budget_s=2.0)
    assert not _enough(stream, [0], 10, settings) and not _enough(stream, [0, 1], 10, settings)
    assert _enough(stream, [0, 1, 2], 10, settings)
    stream.ends = [0.05, 0.15, 0.20]  # a chunk twice as long: IQR/median 0.5
    assert not _enough(stream, [0, 1, 2], 10, settings)


def test_the_telemetry_names_the_timer_whose_samples_it_spans_the_headline_alone():
    """NVML is read over the headline's samples only (the first timer): the telemetry says so, so that no reader
    rates another timer's time at its clock (runner.metrics.clock_of)."""
    import time

    from runner.sampling import PowerEnv, time_step
    from runner.timers import WallTimer

    class Second(WallTimer):
        name = "second"

    steady = Script(sm=lambda t: BOOST_MHZ, drawn=lambda t: 200.0, step=0.05)
    settings = TimingSettings(warmup=0, min_samples=3, max_samples=3, budget_s=5.0)
    timed = time_step([WallTimer(), Second()], lambda: time.sleep(0.005) or jnp.zeros(()), (), settings,
                      PowerEnv(steady))
    assert [s.summary.timer for s in timed.sampled] == ["wall", "second"] and timed.telemetry.timer == "wall"
