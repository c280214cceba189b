"""runner/timers.py: the adaptive sampler and its limits, with scripted timers and a scripted clock."""

from __future__ import annotations

import pytest

from runner.spec import FLOOR_SAMPLES, TimingSettings
from runner.timers import BATCH, Limits, Samples, limits, sample, summarise


class Scripted:
    """A timer that returns the next samples of a script and counts its calls; kernels name the batch."""

    name = "device"

    def __init__(self, values):
        self.values, self.calls, self.batches = list(values), [], 0

    def __call__(self, fn, args, n):
        self.calls.append(n)
        self.batches += 1
        taken, self.values = self.values[:n], self.values[n:]
        return Samples(taken or [1.0] * n, [f"kernel-{self.batches}"])


class Clock:
    """Each read moves time on by `step` seconds."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


LIMIT = Limits(warmup=2, min_samples=10, max_samples=40, target_noise=0.05, budget_s=100.0)


def test_quiet_samples_stop_at_min_samples_after_warmup():
    timer = Scripted([2.0] * 2 + [1.0] * 100)
    got = sample(timer, None, (), LIMIT, Clock(0.001))
    assert timer.calls[:3] == [1, 1, 10]  # the warm-up (its first call alone, then the rest), not counted; then
    # min_samples at once, the calls being quick
    assert got.summary.samples == 10 and got.summary.converged and got.summary.median_s == 1.0
    assert got.kernels == [f"kernel-{timer.batches}"]  # the last batch's kernels


def test_noisy_samples_run_to_the_cap_unconverged():
    timer = Scripted([1.0, 2.0] * 100)
    got = sample(timer, None, (), Limits(0, 10, 40, 0.05, 100.0), Clock(0.001))
    assert got.summary.samples == 40 and not got.summary.converged
    assert all(n <= BATCH for n in timer.calls)


def test_the_budget_stops_noisy_sampling_after_min_samples():
    timer = Scripted([1.0, 2.0] * 100)
    got = sample(timer, None, (), Limits(0, 10, 1000, 0.05, 1.0), Clock(0.2))
    # the clock is read at the start (0.2), for the deadline (0.4 + 1.0), after each batch (0.6: short of
    # min_samples but within the budget, 0.8, ... 1.6 > 1.4) and for the seconds taken (1.8): six batches of
    # five, far from the cap of 1000
    assert got.summary.samples == 30 and not got.summary.converged
    assert got.seconds == pytest.approx(1.6)


def test_calls_too_slow_for_the_budget_take_one_warm_up_and_the_floor_of_samples_the_spec_states():
    """FLOOR_SAMPLES, which the spec's min_samples states to its readers (schema, docs reference)."""
    timer = Scripted([1.0, 2.0] * 100)  # noisy: only the budget stops it
    got = sample(timer, None, (), Limits(3, 10, 300, 0.05, 0.2), Clock(1.0))  # each call seems to take 1 s
    assert timer.calls == [1] * (1 + FLOOR_SAMPLES)  # one warm-up call, then samples one at a time
    assert got.summary.samples == FLOOR_SAMPLES and not got.summary.converged
    assert f"stop at {FLOOR_SAMPLES} samples" in TimingSettings.model_fields["min_samples"].description


def test_a_slow_untimed_call_just_made_is_the_warm_up():
    timer = Scripted([1.0, 2.0] * 100)
    got = sample(timer, None, (), Limits(3, 10, 300, 0.05, 0.2), Clock(1.0), ran_s=1.0)
    assert timer.calls == [1, 1, 1] and got.summary.samples == 3  # no warm-up call at all
    fast = Scripted([1.0] * 100)
    sample(fast, None, (), Limits(3, 10, 300, 0.05, 100.0), Clock(0.01), ran_s=0.001)
    assert fast.calls[0] == 3  # a fast call warms up as usual, in one go


def test_a_budget_with_room_keeps_min_samples():
    timer = Scripted([1.0, 2.0] * 100)
    got = sample(timer, None, (), Limits(3, 10, 300, 0.05, 100.0), Clock(0.01))
    assert timer.calls[:2] == [1, 2] and got.summary.samples >= 10


def test_summary_statistics():
    summary = summarise("wall", [1.0, 2.0, 3.0, 4.0, 100.0], 0.05)
    assert (summary.median_s, summary.q1_s, summary.q3_s, summary.min_s) == (3.0, 2.0, 4.0, 1.0)
    assert summary.noise == pytest.approx(2 / 3) and not summary.converged and summary.samples == 5


def test_the_wall_timer_beside_a_device_headline_has_its_own_cap():
    settings = TimingSettings(max_samples=500, budget_s=2.0, wall_max_samples=50, wall_budget_s=0.5)
    assert limits("device", "device", settings) == Limits(3, 10, 500, 0.05, 2.0)
    assert limits("wall", "device", settings) == Limits(3, 10, 50, 0.05, 0.5)
    assert limits("wall", "wall", settings) == Limits(3, 10, 500, 0.05, 2.0)  # the headline on a CPU


def test_a_cap_below_min_samples_wins():
    settings = TimingSettings(min_samples=80, max_samples=500, wall_max_samples=20)
    assert limits("wall", "device", settings).min_samples == 20
