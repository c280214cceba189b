"""The leaderboard: at each shape of a run, the fastest correct variant and by how much it wins.

A shape is every parameter of a cell (runner.shape's axes: B, T, S, N, K, H, dtype, causal, pass); only cells
with status `ok` (ran and agreed with the reference) compete. For each shape the board gives the winner, its
margin over the next fastest variant and over `auto` (jax.nn.dot_product_attention with implementation=None:
what JAX picks by itself), and whether the margin over the next is beyond both variants' noise. A time whose power
state never settled (power.settled false, docs/timing.md) or whose SM clock moved more than 2 % (clock_unstable)
ranks but is named "unsettled" (runner.marks' rule, ⚠ in tables), and one whose noise never met its target is named
"not converged" (†): a margin either takes part in is never decisive, as no rerun need keep its order; a time whose
record says FP8 ran (fp8_mark) ranks beside bf16 ones but is named "(FP8)", as it computes in another precision, and
one whose variant asked for FP8 that never reached its program is named "(not FP8)": it ran, and ranks, in its
shape's dtype. Where the winner and the next ran two cuDNN releases (TE's worker loads its own), each is
named with its own. Light on purpose (no pandas, no JAX): `attnbench show` prints it and the dashboard draws it
from the same functions.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

from runner.marks import NOT_CONVERGED, NOT_CONVERGED_WHY, UNSETTLED, UNSETTLED_WHY, noise_unmet, unsettled
from runner.record import CellRecord, cudnn_ran
from runner.shape import label

AUTO = "auto"


@dataclass(frozen=True)
class Time:
    """One variant's median time at one shape of one run, and its relative noise (IQR / median)."""

    run_id: str
    shape: str
    variant: str
    seconds: float
    noise: float  # NaN: not known (a table's missing IQR / median), never read as quiet
    backend: str | None = None
    clock_peak: float | None = None  # % of its GPUs' dense MMA rate at the SM clock read while this timer sampled
    unsettled: bool = False  # its power state never settled, or its SM clock moved more than 2 % while sampled
    fp8_mark: str | None = None  # fp8_mark: FP8 (it computed in FP8), NOT_FP8 (asked for FP8, ran without), None
    cudnn: str | None = None  # the cuDNN release its variant ran (runner.record.cudnn_ran); None: not cuDNN's kernel
    unconverged: bool = False  # its noise never met its target, or too few samples (runner.marks.noise_unmet)


@dataclass(frozen=True)
class Standing:
    """One shape's result: the winner, and its margins as fractions (0.12: the other takes 12 % longer)."""

    run_id: str
    shape: str
    winner: Time
    runner_up: Time | None
    auto: Time | None
    variants: int  # correct variants timed at this shape
    unmixed: Standing | None = None  # where the winner computed in FP8: the race of those that did not (te_fp8 not FP8)

    @property
    def margin(self) -> float | None:
        """How much longer the next fastest variant takes."""
        return self.runner_up.seconds / self.winner.seconds - 1 if self.runner_up else None

    @property
    def over_auto(self) -> float | None:
        """How much longer `auto` takes (0 when auto wins); None where auto was not timed here."""
        return self.auto.seconds / self.winner.seconds - 1 if self.auto else None

    @property
    def sides(self) -> tuple[Time, ...]:
        """The times its margin is between: the winner, and the runner-up where there is one."""
        return (self.winner, self.runner_up) if self.runner_up else (self.winner,)

    @property
    def unsettled(self) -> bool:
        """The winner or the runner-up was sampled unsettled (or on an unstable clock)."""
        return any(t.unsettled for t in self.sides)

    @property
    def unconverged(self) -> bool:
        """The winner's or the runner-up's noise never met its target."""
        return any(t.unconverged for t in self.sides)

    @property
    def cudnn_differs(self) -> bool:
        """The winner and the runner-up ran two cuDNN releases (TE's worker loads its own): the margin is in part
        the releases'."""
        sides = (self.winner.cudnn, self.runner_up.cudnn if self.runner_up else None)
        return all(sides) and sides[0] != sides[1]

    @property
    def noise_unknown(self) -> bool:
        """The winner's or the runner-up's noise is not known."""
        return any(t.noise != t.noise for t in self.sides)

    @property
    def decisive(self) -> bool:
        """The margin over the next exceeds both variants' noise (beyond_noise: a noise not known is never
        exceeded), both sampled in a settled state and converged: rerunning would likely keep the order."""
        if self.runner_up is None or self.unsettled or self.unconverged:
            return False
        return bool(beyond_noise(self.margin, self.winner.noise, self.runner_up.noise))


def beyond_noise(gap, *noises):
    """Whether a gap exceeds every noise (floats or pandas Series alike): a noise not known (NaN) is never exceeded,
    so a gap beside one is never beyond noise, never read as a perfectly quiet time's. The one rule of the board's
    decisive margins, the dashboard's standings and runner.compare's verdicts."""
    beyond = True
    for noise in noises:
        beyond = beyond & (gap > noise)  # NaN compares False
    return beyond


FP8, NOT_FP8 = "FP8", "not FP8"


def fp8_mark(verdict, in_hlo) -> str | None:
    """A time's FP8 mark from its record's `fp8` (verdict, in_hlo; a frame's fp8_verdict, fp8_in_hlo, NaN where the
    record has none): FP8 where an f8 type reached the compiled program (the rule runner.metrics sets an FP8 peak by),
    NOT_FP8 where the variant asked for FP8 (the record has a verdict) and none did, None where none was asked. The one
    rule of the board's marks (`show`, the report, the dashboard's Leaderboard), the results pages' lines and the
    published figure a cell is set beside (runner.published)."""
    if not isinstance(verdict, str):
        return None
    return FP8 if in_hlo is not None and in_hlo == in_hlo and bool(in_hlo) else NOT_FP8  # NaN: no f8 recorded


def cell_fp8_mark(cell: CellRecord) -> str | None:
    """fp8_mark of a record."""
    return fp8_mark(cell.fp8.verdict, cell.fp8.in_hlo) if cell.fp8 else None


def time_of(cell: CellRecord, timer: str | None = None, manifest=None) -> Time | None:
    """A correct cell's time by `timer` (default: the record's headline timer), with that time's share of the MMA
    peak at the SM clock read while that timer sampled, where the run's `manifest` (its machine) and the cell's
    telemetry give it (telemetry spans one timer's samples, the headline's: by another timer, no share;
    runner.metrics.clock_of), whether it was sampled unsettled, its FP8 mark (fp8_mark), with the manifest the cuDNN
    its variant ran, and whether that timer did not converge; None if it has no time."""
    if cell.status != "ok":
        return None
    summary = next((t for t in cell.timings if t.timer == (timer or cell.timer)), None)
    if summary is None:
        return None
    from runner import metrics  # here: it imports numpy, which the board's other callers never need

    machine = manifest.machine if manifest else None
    tflops = metrics.rates(cell.flops, 0, summary.median_s)["tflops"] if cell.flops else None
    share = metrics.clock_peak_share(tflops, metrics.clock_peak_tflops(cell, machine, summary.timer))
    return Time(cell.run_id, label(cell.params.as_dict()), cell.variant, summary.median_s, summary.noise, cell.backend,
                share, unsettled(cell), cell_fp8_mark(cell), cudnn_ran(cell.variant, cell.backend, manifest),
                noise_unmet(summary))


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
        unmixed = [t for t in ordered if t.fp8_mark != FP8] if ordered[0].fp8_mark == FP8 else []
        standings.append(_standing(ordered, variants.get(AUTO), _standing(unmixed, variants.get(AUTO))))
    return standings


def _standing(ordered: list[Time], auto: Time | None, unmixed: Standing | None = None) -> Standing | None:
    """The standing of times fastest first (None where there are none)."""
    if not ordered:
        return None
    return Standing(ordered[0].run_id, ordered[0].shape, ordered[0], ordered[1] if len(ordered) > 1 else None, auto,
                    len(ordered), unmixed)


def leaderboard(cells: Iterable[CellRecord], timer: str | None = None, manifest=None) -> list[Standing]:
    """The standings of these cells, by `timer` (default: each record's headline timer); with the run's `manifest`,
    each time's share of the MMA peak at its clock and the cuDNN its variant ran."""
    return rank(t for t in (time_of(c, timer, manifest) for c in cells) if t is not None)


BOARD = "the fastest correct variant per shape where two or more variants ran correctly"  # contested's, in words


def contested(standings: Iterable[Standing]) -> list[Standing]:
    """The shapes a board shows: those where two or more variants ran correctly (one alone has no race to win). The
    one rule of `show`'s board, `show --format leaderboard`, the report and the dashboard's overview and Leaderboard
    tab."""
    return [s for s in standings if s.variants > 1]


AUTO_CLOSE = 0.05  # `auto` this close to the fastest counts as having picked well


def winners(standings: list[Standing], strong=str) -> str:
    """Which variant is fastest where, in a line: 'cudnn fastest at 12, te at 8 of 20 shapes; auto within 5 % of the
    fastest at 6 of 14', each winner as `strong` writes it (a printer's bold) with its FP8 mark; where any winner
    computed in FP8, the winners of the race of those that did not too (Standing.unmixed, the board's `fastest
    non-FP8`): 'cudnn_fp8 (FP8) fastest at 8, cudnn at 4 of 12 shapes; fastest non-FP8: cudnn at 10, te at 2 of 12'."""
    text = f"{_wins([s.winner for s in standings], strong, 'fastest ')} of {len(standings)} shapes"
    if any(s.unmixed for s in standings):
        unmixed = [t for t in map(_unmixed_winner, standings) if t]
        text += f"; fastest non-FP8: {_wins(unmixed, strong)} of {len(unmixed)}"
    with_auto = [s for s in standings if s.over_auto is not None]
    if with_auto:
        close = sum(s.over_auto <= AUTO_CLOSE for s in with_auto)
        text += f"; auto within {100 * AUTO_CLOSE:g} % of the fastest at {close} of {len(with_auto)}"
    return text


def _wins(fastest: list[Time], strong, first: str = "") -> str:
    """'cudnn_fp8 (FP8) fastest at 8, te at 4': how many shapes each variant, with its FP8 mark, is fastest at, most
    first, `first` after the first's name."""
    wins = Counter((t.variant, t.fp8_mark) for t in fastest).most_common()
    return ", ".join(f"{strong(v)}{f' ({mark})' if mark else ''} {first if i == 0 else ''}at {n}"
                     for i, ((v, mark), n) in enumerate(wins))


def _unmixed_winner(standing: Standing) -> Time | None:
    """The fastest time at the shape that did not compute in FP8; None where every one did."""
    if standing.unmixed:
        return standing.unmixed.winner
    return None if standing.winner.fp8_mark == FP8 else standing.winner


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


def _named(time: Time, legacy: Mapping[str, str], cudnn: bool = False) -> str:
    """The variant's name with its marks: legacy, FP8 or not FP8 (fp8_mark), its cuDNN where `cudnn` (the standing's
    two sides ran two releases), unsettled (its power state or clock), not converged: 'te (cuDNN 9.14.0, unsettled)'."""
    marks = [m for m, on in (("legacy", time.variant in legacy), (time.fp8_mark, time.fp8_mark),
                             (f"cuDNN {time.cudnn}", cudnn), (UNSETTLED, time.unsettled),
                             (NOT_CONVERGED, time.unconverged)) if on]
    return f"{time.variant} ({', '.join(marks)})" if marks else time.variant


def _not_decisive(standing: Standing) -> str | None:
    """Why a margin over the next is not decisive: unsettled, else not converged, else a noise not known, else within
    noise; None where it is decisive or there is no next."""
    if standing.runner_up is None or standing.decisive:
        return None
    if standing.unsettled or standing.unconverged:
        return UNSETTLED if standing.unsettled else NOT_CONVERGED
    return "noise unknown" if standing.noise_unknown else "within noise"


def _margin(standing: Standing) -> str:
    """The margin over the next, and why it is not decisive where it is not (_not_decisive)."""
    why = _not_decisive(standing)
    return _percent(standing.margin) + (f" ({why})" if why else "")


def _raced(standings: list[Standing]) -> list[Standing]:
    """The standings and the non-FP8 races within them (Standing.unmixed): every standing whose sides a board names."""
    return [*standings, *(s.unmixed for s in standings if s.unmixed)]


def _unmixed(standing: Standing, legacy: Mapping[str, str]) -> str:
    """The fastest variant that did not compute in FP8, by how much it beats the next such one and over which:
    'cudnn +4% over te_fp8 (not FP8)' (the fastest alone where no other ran); '—' where the winner did not compute in
    FP8."""
    race = standing.unmixed
    if race is None:
        return "—"
    fastest = _named(race.winner, legacy, race.cudnn_differs)
    if race.runner_up is None:
        return fastest
    return f"{fastest} {_margin(race)} over {_named(race.runner_up, legacy, race.cudnn_differs)}"


def legacy_notes(standings: list[Standing], legacy: Mapping[str, str]) -> list[str]:
    """A line for each legacy variant the board names: what deprecated it and what replaces it."""
    named = {t.variant for s in _raced(standings) for t in s.sides}
    return [f"{name} (legacy): {legacy[name]}" for name in sorted(named & legacy.keys())]


def marks_key(standings: list[Standing]) -> str:
    """One line saying what the board's marks mean, each only where the board shows it ('' where none does): FP8, not
    FP8, unsettled and not converged on a variant's name, noise unknown on a margin. The one wording of `show`'s board,
    the report's and the dashboard's Leaderboard tab; unsettled and not converged in runner.marks' words."""
    standings = _raced(standings)
    shown = [t for s in standings for t in s.sides]
    meanings = [
        ("(FP8)", any(t.fp8_mark == FP8 for t in shown), "computes in FP8, another precision than the bf16 variants "
         "it ranks beside; where it is fastest, `fastest non-FP8` names the race of the others, by the same rules"),
        ("(not FP8)", any(t.fp8_mark == NOT_FP8 for t in shown), "asked for FP8, but no f8 type reached its compiled "
         "program (its record's fp8.verdict): it ran in the shape's dtype, and ranks as that"),
        ("(cuDNN …)", any(s.cudnn_differs for s in standings), "the fastest and the next ran two cuDNN releases "
         "(TE's worker loads its own): their margin is in part the releases'"),
        (f"({UNSETTLED})", any(t.unsettled for t in shown), f"{UNSETTLED_WHY}: a margin it takes part in is never "
         "decisive"),
        (f"({NOT_CONVERGED})", any(t.unconverged for t in shown), f"{NOT_CONVERGED_WHY}: a margin it takes part in is "
         "never decisive"),
        ("(noise unknown)", any(_not_decisive(s) == "noise unknown" for s in standings),
         "a noise (IQR / median) not recorded: the margin is never decisive"),
    ]
    said = [f"{mark} {meaning}" for mark, on, meaning in meanings if on]
    return "Marks: " + "; ".join(said) + "." if said else ""


def notes(standings: list[Standing], legacy: Mapping[str, str], machine=None) -> list[str]:
    """The lines under a board: what its marks mean (marks_key), what deprecated each legacy variant it names, and
    with the run's `machine`, why it has no `% MMA@clock` where that GPU has no cited MMA rate (metrics.no_mma_rate)."""
    from runner import metrics  # here: it imports numpy, which the board's other callers never need

    unrated = metrics.no_mma_rate(machine) if standings else None
    return [line for line in [marks_key(standings), *legacy_notes(standings, legacy), unrated] if line]


def rows(standings: list[Standing], legacy: Mapping[str, str] = MappingProxyType({})) -> list[dict[str, str]]:
    """One text row per shape, for a table or markdown; a legacy, FP8, not FP8, unsettled or not converged variant is
    named so
    (`_named`), each side with its cuDNN where the two ran two releases, and a margin that is not decisive says why;
    `% MMA@clock`: the winner's
    time as a % of its GPUs' MMA peak at the SM clock read while the board's timer took its samples, where any winner
    has one (NVML reads the clock over the headline timer's samples only: a board by another timer, wall, has none);
    `fastest non-FP8` where any winner computed in FP8: the race of the variants that did not (_unmixed)."""
    clocked = any(s.winner.clock_peak is not None for s in standings)
    mixed = any(s.unmixed for s in standings)
    return [{
        "shape": s.shape, "fastest": _named(s.winner, legacy, s.cudnn_differs), "ms": f"{s.winner.seconds * 1e3:.4g}",
        "next": _named(s.runner_up, legacy, s.cudnn_differs) if s.runner_up else "—", "margin": _margin(s),
        "auto": ("—" if s.auto is None else f"{_percent(s.over_auto)} ({s.auto.backend or '?'})"),
        "variants": str(s.variants),
        **({"% MMA@clock": _share(s.winner.clock_peak)} if clocked else {}),
        **({"fastest non-FP8": _unmixed(s, legacy)} if mixed else {}),
    } for s in standings]


def _share(percent: float | None) -> str:
    return "—" if percent is None or percent != percent else f"{percent:.3g}"  # NaN: a table's unknown
