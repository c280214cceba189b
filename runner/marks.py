"""Marks: what a time does not say of itself, one table for every place that shows a time. ⚠ unsettled: sampled
before its power state settled or on an SM clock that moved more than 2 %; † not converged: its noise never met
timing.target_noise, or it rests on fewer than FEW_SAMPLES samples, too few to estimate a noise from (a burst
cell's 2 or 3, whose record says converged). `show`'s and the report's notes, the leaderboard (which names a time
by its marks' words, '(unsettled)', '(not converged)', and never calls a margin either takes part in decisive), the
results pages' tables (runner.figures) and the dashboard's tables, captions and charts mark a time by these rules and
say what a mark means in these words."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from runner.power import UNSTABLE_SPREAD
from runner.record import CellRecord, TimerSummary

UNSETTLED = "unsettled"
UNSETTLED_WHY = ("sampled before its power state settled or on an SM clock that moved more than "
                 f"{100 * UNSTABLE_SPREAD:g} %")
# The fewest samples whose quartiles are samples themselves: below 5, numpy interpolates q1 and q3 between two samples,
# so the IQR / median is the spread of 2-4 numbers, not an estimate of a noise (docs/timing.md, its opening).
FEW_SAMPLES = 5
NOT_CONVERGED = "not converged"
NOT_CONVERGED_WHY = f"noise above its target when sampling stopped, or under {FEW_SAMPLES} samples"


def noise_text(noise: float) -> str:
    """A noise (IQR / median), or an SM clock's spread, as a reader compares it with a rule of a few percent (a noise
    target, the clock's 2 %): 2.2%, 35%, where 2.3% in whole percent read '2%' under 'more than 2 %'."""
    return f"{noise:.1%}" if noise < 0.1 else f"{noise:.0%}"


def power_unsettled(cell: CellRecord) -> bool:
    """The cell's power state never settled (steady or burst); False where the record did not observe it."""
    return bool(cell.power and cell.power.settled is False)


def unsettled(cell: CellRecord) -> bool:
    """The cell's power state never settled (power_unsettled), or its SM clock moved more than 2 % while sampled."""
    return power_unsettled(cell) or bool(cell.clock_unstable)


def unsettled_said(cell: CellRecord) -> str:
    """What an unsettled cell's record says of it: 'power state not settled, clock moved 9%'."""
    power = ["power state not settled"] if power_unsettled(cell) else []
    clock = [f"clock moved {noise_text(cell.telemetry.clock_spread)}"] if cell.clock_unstable else []
    return ", ".join(power + clock)


def noise_unmet(timing: TimerSummary) -> bool:
    """The timing's noise never met its target, or it rests on fewer than FEW_SAMPLES samples (derived as it is read:
    a record's `converged` is the sampler's own)."""
    return not timing.converged or timing.samples < FEW_SAMPLES


def unconverged(cell: CellRecord) -> TimerSummary | None:
    """The cell's headline timing where its noise is unmet (noise_unmet; None where it is met, or there is none)."""
    headline = next((t for t in cell.timings if t.timer == cell.timer), None)
    return headline if headline and noise_unmet(headline) else None


def unconverged_said(cell: CellRecord) -> str:
    """What an unconverged cell's record says of its headline timing: 'noise 35% on 3 samples'."""
    headline = unconverged(cell)
    return f"noise {noise_text(headline.noise)} on {headline.samples} samples"


@dataclass(frozen=True)
class Mark:
    """A mark: its symbol, its word and why a time gets it, the rule on a record, the column of a frame of cells
    that holds the same rule (runner.compare's frame rules, by the timer a page shows: dashboard.tables.with_rates),
    and what a marked record says of it (a note's words: `show`'s and the report's)."""

    symbol: str
    word: str
    why: str
    of: Callable[[CellRecord], bool]
    column: str
    said: Callable[[CellRecord], str]

    @property
    def meaning(self) -> str:
        return f"{self.word}: {self.why}"


UNSETTLED_MARK = Mark("⚠", UNSETTLED, UNSETTLED_WHY, unsettled, "unsettled", unsettled_said)
UNCONVERGED_MARK = Mark("†", NOT_CONVERGED, NOT_CONVERGED_WHY, lambda c: unconverged(c) is not None, "unconverged",
                        unconverged_said)
MARKS = (UNSETTLED_MARK, UNCONVERGED_MARK)


def marks_of(cell: CellRecord) -> str:
    """The cell's marks, together ('⚠†'; '' where none)."""
    return "".join(mark.symbol for mark in MARKS if mark.of(cell))


def key(shown: Iterable[str]) -> str:
    """What the marks among `shown` (symbols) mean, in MARKS' order: '⚠ unsettled: sampled before ...; † not
    converged: ...' ('' where none is shown). The one key under every table that marks a time."""
    found = set(shown)
    return "; ".join(f"{mark.symbol} {mark.meaning}" for mark in MARKS if mark.symbol in found)
