"""The leaderboard: at each shape of a run, the fastest correct variant and by how much it wins.

A shape is every parameter of a cell (runner.shape's axes: B, T, S, N, K, H, dtype, causal, pass); only cells
with status `ok` (ran and agreed with the reference) compete. For each shape the board gives the winner, its
margin over the next fastest variant and over `auto` (jax.nn.dot_product_attention with implementation=None:
what JAX picks by itself), and whether the margin over the next is beyond both variants' noise. Light on
purpose (no pandas, no JAX): `attnbench show` prints it and the dashboard draws it from the same functions.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

from runner.record import CellRecord
from runner.shape import label

AUTO = "auto"


@dataclass(frozen=True)
class Time:
    """One variant's median time at one shape of one run, and its relative noise (IQR / median)."""

    run_id: str
    shape: str
    variant: str
    seconds: float
    noise: float
    backend: str | None = None
    clock_peak: float | None = None  # % of its GPUs' dense MMA rate at the SM clock read while this timer sampled


@dataclass(frozen=True)
class Standing:
    """One shape's result: the winner, and its margins as fractions (0.12: the other takes 12 % longer)."""

    run_id: str
    shape: str
    winner: Time
    runner_up: Time | None
    auto: Time | None
    variants: int  # correct variants timed at this shape

    @property
    def margin(self) -> float | None:
        """How much longer the next fastest variant takes."""
        return self.runner_up.seconds / self.winner.seconds - 1 if self.runner_up else None

    @property
    def over_auto(self) -> float | None:
        """How much longer `auto` takes (0 when auto wins); None where auto was not timed here."""
        return self.auto.seconds / self.winner.seconds - 1 if self.auto else None

    @property
    def decisive(self) -> bool:
        """The margin over the next exceeds both variants' noise: rerunning would likely keep the order."""
        if self.runner_up is None:
            return False
        gap = self.margin
        return gap > self.winner.noise and gap > self.runner_up.noise


def time_of(cell: CellRecord, timer: str | None = None, machine=None) -> Time | None:
    """A correct cell's time by `timer` (default: the record's headline timer), with that time's share of the MMA
    peak at the SM clock read while that timer sampled, where the run's `machine` and the cell's telemetry give it
    (telemetry spans one timer's samples, the headline's: by another timer, no share; runner.metrics.clock_of); None
    if it has no time."""
    if cell.status != "ok":
        return None
    summary = next((t for t in cell.timings if t.timer == (timer or cell.timer)), None)
    if summary is None:
        return None
    from runner import metrics  # here: it imports numpy, which the board's other callers never need

    tflops = metrics.rates(cell.flops, 0, summary.median_s)["tflops"] if cell.flops else None
    share = metrics.clock_peak_share(tflops, metrics.clock_peak_tflops(cell, machine, summary.timer))
    return Time(cell.run_id, label(cell.params.as_dict()), cell.variant, summary.median_s, summary.noise, cell.backend,
                share)


def rank(times: Iterable[Time]) -> list[Standing]:
    """Standings per (run, shape), in the order shapes first appear; a variant timed twice at a shape (in two
    experiments) counts with its faster time."""
    best: dict[tuple[str, str], dict[str, Time]] = defaultdict(dict)
    for t in times:
        variants = best[t.run_id, t.shape]
        if t.variant not in variants or t.seconds < variants[t.variant].seconds:
            variants[t.variant] = t
    standings = []
    for (run_id, shape), variants in best.items():
        ordered = sorted(variants.values(), key=lambda t: t.seconds)
        standings.append(Standing(run_id, shape, ordered[0], ordered[1] if len(ordered) > 1 else None,
                                  variants.get(AUTO), len(ordered)))
    return standings


def leaderboard(cells: Iterable[CellRecord], timer: str | None = None, machine=None) -> list[Standing]:
    """The standings of these cells, by `timer` (default: each record's headline timer); with the run's `machine`,
    each time's share of the MMA peak at its clock."""
    return rank(t for t in (time_of(c, timer, machine) for c in cells) if t is not None)


AUTO_CLOSE = 0.05  # `auto` this close to the fastest counts as having picked well


def winners(standings: list[Standing], strong=str) -> str:
    """Which variant is fastest where, in a line: 'cudnn fastest at 12 of 20 shapes, te at 8; auto within 5 % of the
    fastest at 6 of 14', each winner as `strong` writes it (a printer's bold)."""
    wins = Counter(s.winner.variant for s in standings).most_common()
    text = ", ".join(f"{strong(v)} fastest at {n}" for v, n in wins) + f" of {len(standings)} shapes"
    with_auto = [s for s in standings if s.over_auto is not None]
    if with_auto:
        close = sum(s.over_auto <= AUTO_CLOSE for s in with_auto)
        text += f"; auto within {100 * AUTO_CLOSE:g} % of the fastest at {close} of {len(with_auto)}"
    return text


def _percent(fraction: float | None) -> str:
    """A margin (never negative) in whole percent; one that rounds to none is ±0%, not +0%."""
    if fraction is None:
        return "—"
    shown = f"{fraction:.0%}"
    return "±0%" if shown == "0%" else f"+{shown}"


def legacy_of(manifests: Iterable) -> dict[str, str]:
    """Variant -> its library's deprecation and replacement, as the runs' manifests say (runs before 2026-12-06 say
    nothing of it)."""
    return {name: info.legacy for m in manifests if m for name, info in m.variants.items() if info.legacy}


def _named(variant: str, legacy: Mapping[str, str]) -> str:
    return f"{variant} (legacy)" if variant in legacy else variant


def legacy_notes(standings: list[Standing], legacy: Mapping[str, str]) -> list[str]:
    """A line for each legacy variant the board names: what deprecated it and what replaces it."""
    named = {t.variant for s in standings for t in (s.winner, s.runner_up) if t}
    return [f"{name} (legacy): {legacy[name]}" for name in sorted(named & legacy.keys())]


def rows(standings: list[Standing], legacy: Mapping[str, str] = MappingProxyType({})) -> list[dict[str, str]]:
    """One text row per shape, for a table or markdown; a legacy variant is named so; `% MMA@clock`: the winner's
    time as a % of its GPUs' MMA peak at the SM clock read while the board's timer took its samples, where any winner
    has one (NVML reads the clock over the headline timer's samples only: a board by another timer, wall, has none)."""
    clocked = any(s.winner.clock_peak is not None for s in standings)
    return [{
        "shape": s.shape, "fastest": _named(s.winner.variant, legacy), "ms": f"{s.winner.seconds * 1e3:.4g}",
        "next": _named(s.runner_up.variant, legacy) if s.runner_up else "—",
        "margin": _percent(s.margin) + ("" if s.decisive or s.runner_up is None else " (within noise)"),
        "auto": ("—" if s.auto is None else f"{_percent(s.over_auto)} ({s.auto.backend or '?'})"),
        "variants": str(s.variants),
        **({"% MMA@clock": _share(s.winner.clock_peak)} if clocked else {}),
    } for s in standings]


def _share(percent: float | None) -> str:
    return "—" if percent is None or percent != percent else f"{percent:.3g}"  # NaN: a table's unknown
