"""Replay a committed NVML probe through runner/power.py's energy-counter estimator, on the CPU.

Reads the `nvml` rows of a scripts/probe_stream.py output ([t, sm_mhz, power_w, temp_c, throttle bits, energy_mj],
as its Nvml.read writes them) as power.Reading, the way the runner's Recorder builds them, and for each load stream
(probes[i].stream: t0 and chunk_done) reports how often the counter moved, the spread of the 0.5 s window means
that drawn_w gives at the power cap, how many window pairs the cap rule's steadiness test (CAP_TOLERANCE) fails,
judge's verdict on the stream, and the power a soak's bins would record. `--old` puts back the estimator before
2026-12-07 (first and last readings of a window, a step of 27 ms assumed) to compare.

    python scripts/replay_energy.py docs/evidence/probe-stream-20261203.json [--old]
"""
import argparse
import json
import statistics
import sys
from typing import NoReturn

from runner import power, sampling

LIMIT_W = 700.0  # the H200's power limit; the probe did not record it
OLD_STEP_S = 0.027  # what the old estimator assumed the counter's step was
CHANGE_POINTS = power._counted  # the reference over the whole capped stretch, whichever estimator is replayed


def readings(rows: list) -> list[power.Reading]:
    return [power.Reading(t=t, sm_mhz=sm, power_w=w, temperature_c=c, throttle=bits, energy_mj=float(mj))
            for t, sm, w, c, bits, mj in rows]


def first_last(history: list[power.Reading], window_s: float) -> tuple[float, float, float]:
    """The estimator before 2026-12-07: the counter's mean between the window's first and last readings."""
    recent = [r for r in history if r.t >= history[-1].t - window_s and r.energy_mj is not None]
    seconds = recent[-1].t - recent[0].t if len(recent) >= 2 else 0.0
    return ((recent[-1].energy_mj - recent[0].energy_mj) / 1000 / seconds if seconds > 0 else 0.0), seconds, OLD_STEP_S


def stepped(history: list[power.Reading], window_s: float, period_s: float) -> float:
    """The reference: the energy of the counter's whole steps in the window over as many of its periods (the
    stream's mean step, measured over seconds of change points: its error is a sampling interval over those). Its
    energy is the same change points' that power._counted divides, so against it the estimator's error is only how
    well those are dated, not how far it is from the power drawn, which the probe holds no independent figure of."""
    moved = [r for r, _ in power._changes(history) if r.t >= history[-1].t - window_s]
    return (moved[-1].energy_mj - moved[0].energy_mj) / 1000 / ((len(moved) - 1) * period_s)


def apart(a: float, b: float) -> bool:
    """The cap rule's steadiness test fails: two windows' means more than CAP_TOLERANCE apart."""
    return abs(a - b) > power.CAP_TOLERANCE * max(a, b)


def span(values: list[float]) -> str:
    return f"{min(values):.0f} / {statistics.median(values):.0f} / {max(values):.0f}"


def stream_report(stream: list[power.Reading], t0: float) -> list[str]:
    """The counter's steps over one load stream, its windows at the cap, and judge's verdict from the stream's start."""
    moved = [r for r, _ in power._changes(stream)]
    steps = [b.t - a.t for a, b in zip(moved, moved[1:])]
    gaps = [b.t - a.t for a, b in zip(stream, stream[1:])]
    capped_from = next((r.t for r in stream if all(x.throttle & power.POWER_CAP for x in stream if x.t >= r.t)), None)
    if len(moved) < 2 or capped_from is None or stream[-1].t - capped_from < 3 * power.SETTLE_WINDOW_S:
        return [f"  counter moved {len(moved)} times; not at the power cap for 1.5 s to the stream's end, or the "
                "counter still: no window pairs to judge"]
    truth, _, _ = CHANGE_POINTS([r for r in stream if r.t >= capped_from], stream[-1].t - capped_from)
    return [
        f"  readings {len(stream)}, every {span([g * 1e3 for g in gaps])} ms (min / median / max)",
        f"  counter moved {len(moved)} times, every {span([s * 1e3 for s in steps])} ms",
        f"  power-cap reason in every reading from {capped_from - t0:.2f} s; counter's mean from there "
        f"{truth:.1f} W (NVML's trailing power {span([r.power_w for r in stream if r.t >= capped_from])} W)",
        *cap_lines(stream, [i for i, r in enumerate(stream) if r.t - capped_from >= 2 * power.SETTLE_WINDOW_S],
                   (moved[-1].t - moved[0].t) / (len(moved) - 1), truth, capped_from - t0),
        verdict_line(stream, t0),
    ]


def pairs(stream: list[power.Reading], ends: list[int], mean) -> list[tuple[float, float]]:
    """(the last window's mean, the window before's) at each end, as power._capped takes them."""
    window = power.SETTLE_WINDOW_S
    return [(mean(stream[:i + 1]), mean([r for r in stream[:i + 1] if r.t <= stream[i].t - window])) for i in ends]


def cap_lines(stream: list[power.Reading], ends: list[int], period_s: float, truth: float, from_s: float) -> list[str]:
    """The 0.5 s window means that end at `ends`, against the counter's whole steps, and the cap rule's steadiness
    test on both (a spurious outcome: the estimate's differs from the whole steps')."""
    window = power.SETTLE_WINDOW_S
    estimated = pairs(stream, ends, lambda h: power.drawn_w(h, window))
    true = pairs(stream, ends, lambda h: stepped(h, window, period_s))
    means, true_means = [a for a, _ in estimated], [a for a, _ in true]
    errors = [m / t - 1 for m, t in zip(means, true_means)]
    spurious_fail = sum(apart(*p) and not apart(*q) for p, q in zip(estimated, true))
    spurious_pass = sum(apart(*q) and not apart(*p) for p, q in zip(estimated, true))
    bound = [c[2] / (c[1] - c[2]) for c in (power._counted(stream[:i + 1], window) for i in ends)]
    return [
        f"  0.5 s window means at the cap ({len(means)} windows): {span(means)} W, "
        f"{100 * (min(means) / truth - 1):+.1f} % to {100 * (max(means) / truth - 1):+.1f} % of the mean from "
        f"{from_s:.2f} s; the estimator's claimed bound {100 * max(bound):.1f} % (largest over windows)",
        f"  the counter's step: {period_s * 1e3:.1f} ms over the stream; per step, the windows' reference means "
        f"(the same change points' energy over as many steps: it checks their dating, not the power) {span(true_means)} W; the estimator's error against them "
        f"{100 * min(errors):+.1f} % to {100 * max(errors):+.1f} % (median |error| "
        f"{100 * statistics.median(abs(e) for e in errors):.1f} %); "
        f"{sum(abs(e) > b for e, b in zip(errors, bound))} windows beyond the estimator's own bound",
        f"  cap rule's steadiness (within {power.CAP_TOLERANCE:.0%} of the window before): failed "
        f"{sum(apart(*p) for p in estimated)} of {len(estimated)} window pairs; the reference means fail "
        f"{sum(apart(*q) for q in true)}; spuriously failed {spurious_fail}, spuriously passed {spurious_pass}",
    ]


def verdict_line(stream: list[power.Reading], t0: float) -> str:
    """power.judge's first verdict on the stream's readings, from its start (the H200's limit, LIMIT_W)."""
    for i in range(1, len(stream)):
        if verdict := power.judge(stream[:i + 1], t0, LIMIT_W, power.Rules(), max_s=10.0):
            return f"  judge from the stream's start: {verdict.rule} at {stream[i].t - t0:.2f} s ({verdict.note})"
    return "  judge from the stream's start: no verdict"


def soak_report(rows: list[power.Reading], t0: float, end: float) -> str:
    """The power drawn in each of a soak's bins (sampling.SOAK_BIN_S, its readings as sampling._window takes them)."""
    bins = [sampling._window(rows, t0 + b * sampling.SOAK_BIN_S, t0 + (b + 1) * sampling.SOAK_BIN_S)
            for b in range(int((end - t0) // sampling.SOAK_BIN_S))]
    watts = [power.drawn_w(w, w[-1].t - w[0].t) for w in bins]
    drawn = [w for w in watts if w is not None]
    return (f"  a soak's {sampling.SOAK_BIN_S} s bins: power drawn in {len(drawn)} of {len(watts)}"
            + (f", {span(drawn)} W" if drawn else ""))


def _numbers(values, count: int | None = None) -> bool:
    """A non-empty list of numbers (`count` of them, where given)."""
    return (isinstance(values, list) and bool(values) and (count is None or len(values) == count)
            and all(isinstance(v, (int, float)) for v in values))


def _stream(entry) -> bool:
    """One entry of `probes` as probe_stream.probe writes it: its T, and a stream with t0 and each chunk's end."""
    stream = entry.get("stream") if isinstance(entry, dict) else None
    return (isinstance(stream, dict) and isinstance(entry.get("T"), int) and isinstance(stream.get("t0"), (int, float))
            and _numbers(stream.get("chunk_done")))


def unlike_a_probe(probe) -> str | None:
    """What keeps the JSON `probe` from being a scripts/probe_stream.py output, or None."""
    if missing := [key for key in ("nvml", "probes") if not isinstance(probe, dict) or not probe.get(key)]:
        return f"has no {' and no '.join(repr(k) for k in missing)} rows"
    if not isinstance(probe["nvml"], list) or not all(_numbers(row, 6) for row in probe["nvml"]):
        return "has an 'nvml' row that is not 6 numbers (t, sm_mhz, power_w, temp_c, throttle, energy_mj)"
    if not isinstance(probe["probes"], list) or not all(_stream(p) for p in probe["probes"]):
        return "has a 'probes' entry without its T and a stream of t0 and chunk_done"
    return None


def refuse(problem: str) -> NoReturn:
    """Bad input: one line, exit 2."""
    print(f"replay_energy.py: {problem}", file=sys.stderr)
    sys.exit(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe")
    parser.add_argument("--old", action="store_true", help="the estimator before 2026-12-07")
    args = parser.parse_args()
    if args.old:
        power._counted = first_last
    try:
        with open(args.probe) as f:
            probe = json.load(f)
    except (OSError, ValueError) as error:
        refuse(f"cannot read {args.probe}: {error}")
    if problem := unlike_a_probe(probe):
        refuse(f"{args.probe} {problem}: not a scripts/probe_stream.py output")
    rows = readings(probe["nvml"])
    print(f"{args.probe}: {'old estimator (first and last readings)' if args.old else 'change points'}")
    for p in probe["probes"]:
        t0 = p["stream"]["t0"]
        end = t0 + p["stream"]["chunk_done"][-1]
        print(f"T={p['T']}: stream {end - t0:.2f} s")
        print("\n".join(stream_report([r for r in rows if t0 <= r.t <= end], t0)))
        print(soak_report(rows, t0, end))


if __name__ == "__main__":
    main()
