"""Two runs compared cell by cell: what `attnbench compare` reports and the dashboard's Compare tab draws, and the
one rule (moves) by which the dashboard's History judges the runs either side of a step.

One implementation for both, over flat cell frames (CellRecord.row, a row a cell) and the runs' manifests, with
pandas alone: the dashboard imports this and never imports JAX. A cell is slower (or faster) only when B / A of its
median passes the threshold (asv's --factor, as a percentage) and the gap exceeds both runs' noise (each run's
interquartile range of that cell); anything less is within noise. A pair either side of which did not converge (its
noise stayed above timing.target_noise when its budget or max_samples ran out) moves only beyond twice each side's
noise, on CONFIRM_SAMPLES samples a side or more; a move short of that is `unconfirmed`, named and never a regression.
Where B's slower cells were measured again (`attnbench recheck`: a run of their own, RECHECK, whose manifest names B),
a slower cell that A against that run finds clearly not slower (faster, or within noise on a converged pair) is `not
reproduced`, named and never a regression; an unconverged or unconfirmed recheck leaves it slower.

Like with like: a comparison is over the cells both runs hold (by cell key) and says how many; "the previous run" is
the last earlier run of the same spec identity (runner.spec.identity: what the spec measures, the same across
attnbench versions), GPU, power policy and timer that planned a cell in common; and the facts that change what a time
means (power policy, library, driver and attnbench versions, the GPU's power limit, the spec identity, the XLA_FLAGS
and environment variables that can change kernels) are named beside every verdict. A cell ok in both that the
compared timer did not time in both (a device timer that failed in one run) is counted and named, never a verdict;
a compared cell that ran another implementation in B (its backend, or its library kernels: kernel_change) keeps its
verdict and is marked and counted.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from runner import COMPARE_THRESHOLD_PERCENT, counted, shape
from runner.leaderboard import beyond_noise
from runner.marks import FEW_SAMPLES, NOT_CONVERGED
from runner.record import (HOW_OPTIONS, NO_POLICY, NONE_SET, NOT_RECORDED, CeilingsOrigin, Manifest, gpu_name,
                           policy_said, power_policy, run_settings)
from runner.spec import identity, setting_changes

SHAPE = list(shape.NAMES)
DEFAULT_THRESHOLD = COMPARE_THRESHOLD_PERCENT / 100  # B / A beyond 1.05 (or below 1 / 1.05): slower (faster)
TIMER_ORDER = ["device", "wall", "device_cold"]
NOT_REPRODUCED = "not reproduced"  # slower in B, not slower when measured again (recheck): never a regression
VERDICTS = ("faster", "slower", "within noise", "unconfirmed", NOT_REPRODUCED)
OCCASIONAL = ("unconfirmed", NOT_REPRODUCED)  # verdicts a summary shows a column of only where a cell has it
UNCONFIRMED_WHY = f"a side {NOT_CONVERGED}"  # why a move is unconfirmed, in runner.marks' word, wherever it is said
RECHECK = "-recheck"  # B's slower cells measured again: the run B + RECHECK, its manifest's `rechecks` B
# A pair a side of which did not converge: its noise is an estimate from a noisy window (on 3 samples, two of its
# quartiles are interpolated), so a move counts only beyond CONFIRM_NOISES times each side's noise, on CONFIRM_SAMPLES
# samples a side (the default timing.min_samples: where the sampler first tests the noise); short of that, unconfirmed.
CONFIRM_NOISES, CONFIRM_SAMPLES = 2, 10
CELL_COLUMNS = ["key", "experiment", "variant", "shape"]
# Facts whose difference changes what a time means: named beside every verdict (the CLI, the dashboard, the report).
MATERIAL = {"power policy", "spec identity", "run settings", "attnbench", "gpu driver", "gpu power_limit_w", "gpu name",
            "device", "compute capability", "devices", "xla_flags", "kernel env"}
# A fact a run's manifest does not record (Machine.NOT_RECORDED: a field older runners did not write) is unknown, so no
# difference of it is said to change the times, while the environment table shows it beside the other run's value.
# In `version X` and `worker W: X` facts: the libraries that compile or run a cell (the CUDA runtime re-keys the kept
# ceilings too, runner.ceilings_cache.VERSIONED; tokamax's kernels are variants of their own).
MATERIAL_LIBRARIES = {"jax", "jaxlib", "cudnn", "transformer_engine", "cuda_runtime", "tokamax"}
ABSENT = "—"  # a fact one run has and another has not, in the environments table
# Facts of one run alone (its identity, times, momentary readings), never a difference of environment.
IDENTITY = {"run id", "started", "ended", "command", "gpu temperature_c", "gpu sm_clock_mhz",
            "gpu power_w", "gpu mem_clock_mhz", "matmul peak (TFLOP/s)", "memory bandwidth (GB/s)"}


# --- which timer -------------------------------------------------------------------------------------------------

def timers(cells: pd.DataFrame) -> list[str]:
    """Timers with a median column, in the order device, wall, device_cold, then others."""
    found = [c.removesuffix("_median_s") for c in cells.columns if c.endswith("_median_s")]
    return sorted(found, key=lambda t: (TIMER_ORDER.index(t) if t in TIMER_ORDER else len(TIMER_ORDER), t))


def headline(cells: pd.DataFrame) -> str | None:
    """The timer most of the run's cells report as theirs (the record's `timer`): device on a GPU, wall on a CPU."""
    named = cells["timer"].dropna() if "timer" in cells else pd.Series(dtype=object)
    return named.mode().iloc[0] if len(named) else None


def shared_timer(a: pd.DataFrame, b: pd.DataFrame, preferred: str | None) -> str | None:
    """`preferred` if both runs measured with it, else the first timer they share."""
    common = set(timers(a)) & set(timers(b))
    return next((t for t in [preferred, *TIMER_ORDER, *sorted(common)] if t in common), None)


# --- cells -------------------------------------------------------------------------------------------------------

def labels(cells: pd.DataFrame, axes: list[str] | None = None) -> pd.Series:
    """Each cell's shape as text: every axis ('B4 T128 N8 H64 bfloat16 fwd'), or only `axes` ('T128 causal')."""
    omit = tuple(a for a in SHAPE if axes is not None and a not in axes)
    return pd.Series([shape.label(p, omit) for p in cells[SHAPE].to_dict("records")], index=cells.index, dtype=str)


def unsettled(cells: pd.DataFrame) -> pd.Series:
    """Cells sampled before their power state settled (power.settled false) or on an SM clock that moved more than
    2 % (clock_unstable): runner.marks.unsettled's rule, on a frame."""
    return _flag(cells, "power_settled", lambda c: c.eq(False)) | _flag(cells, "clock_unstable", lambda c: c.eq(True))


def unconverged(cells: pd.DataFrame, timer: str) -> pd.Series:
    """Cells whose `timer` did not converge (its record's `converged` false: the noise stayed above target_noise when
    the budget or max_samples ran out) or took fewer than FEW_SAMPLES samples: runner.marks.noise_unmet's rule, on a
    frame; a timer that records neither is not said to."""
    return (_flag(cells, f"{timer}_converged", lambda c: c.eq(False))
            | _flag(cells, f"{timer}_samples", lambda n: pd.to_numeric(n).lt(FEW_SAMPLES)))


def _flag(cells: pd.DataFrame, name: str, rule: Callable[[pd.Series], pd.Series]) -> pd.Series:
    """`rule` of the frame's column `name`; False for every cell where the frame has no such column."""
    return rule(cells[name]) if name in cells else pd.Series(False, index=cells.index)


def _text(cells: pd.DataFrame, name: str) -> pd.Series:
    return cells[name] if name in cells else pd.Series(None, index=cells.index, dtype=object)


def timed(cells: pd.DataFrame, timer: str | None) -> pd.DataFrame:
    """Cells ok in the run and timed by `timer`: their shape, `order`, the timer's median, q1, q3 and samples, whether
    they were sampled `unsettled` or `unconverged`, and what ran (`backend`, `kernels`: None where the record names
    none)."""
    columns = {f"{timer}_{k}_s": k for k in ("median", "q1", "q3")}
    if timer is None or f"{timer}_median_s" not in cells:
        return pd.DataFrame(columns=["run", "key", "experiment", "variant", *SHAPE, "order", *columns.values(),
                                     "samples", "unsettled", "unconverged", "backend", "kernels"])
    ok = cells[(cells["status"] == "ok") & cells[f"{timer}_median_s"].notna()]
    return ok[["run", "key", "experiment", "variant", *SHAPE, "order", *columns]].rename(columns=columns).assign(
        samples=pd.to_numeric(_text(ok, f"{timer}_samples")), unsettled=unsettled(ok).astype(bool),
        unconverged=unconverged(ok, timer).astype(bool), backend=_text(ok, "backend"), kernels=_text(ok, "kernels"))


def timers_of(cells: pd.DataFrame) -> pd.Series:
    """Each cell's timers that hold a median, as text ('device, wall'; '—' where none)."""
    names = timers(cells)
    held = cells[[f"{t}_median_s" for t in names]].notna().to_numpy()
    return pd.Series([", ".join(t for t, on in zip(names, row) if on) or "—" for row in held], index=cells.index,
                     dtype=object)


def not_compared(a: pd.DataFrame, b: pd.DataFrame, timer: str | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cells ok in both runs and not timed by `timer` in both, none a verdict, each counted and named (key,
    experiment, variant, shape, the timers each run holds), in A's order, in two kinds: timed by different timers
    (device in A, wall alone in B: the device timer failed in one run), whose ratio is not like with like; and timed
    by the same timers in both, `timer` not among them (wall alone in both: it failed in both runs)."""
    ok_a, ok_b = a[a["status"].eq("ok")], b[b["status"].eq("ok")]
    compared = set(timed(a, timer)["key"]) & set(timed(b, timer)["key"])
    both = ok_a.merge(ok_b.assign(timers_b=timers_of(ok_b))[["key", "timers_b"]], on="key")
    both = both.assign(timers_a=timers_of(both))
    apart = both[~both["key"].isin(compared)].sort_values("order")
    named = pd.DataFrame({**{c: apart[c] for c in CELL_COLUMNS[:3]}, "shape": labels(apart),
                          "timers A": apart["timers_a"], "timers B": apart["timers_b"]},
                         columns=[*CELL_COLUMNS, "timers A", "timers B"])
    differ = named["timers A"].ne(named["timers B"])
    return named[differ].reset_index(drop=True), named[~differ].reset_index(drop=True)


# XLA names a kernel it generates after the HLO fusion or op it made ('loop_multiply_fusion_2', 'wrapped_transpose',
# 'gemm_fusion_dot_5', 'triton_softmax_2'): where it stands in the program, renumbered as the program changes, never
# which kernel it is. A wrapped op is 'wrapped_' and its opcode, underscores and digits in it
# ('wrapped_dynamic_slice_2', 'wrapped_select_and_scatter', 'wrapped_atan2': xla's fusion_wrapper_base.cc). A library
# names its kernel for what it is (cuDNN's, cuBLAS' nvjet_*, TransformerEngine's, a Pallas mha_forward).
XLA_NAMED = re.compile(r"(wrapped_[a-z0-9_]+|[a-z_]*fusion|gemm_fusion_dot|triton_softmax)(_\d+)?")


def library_kernels(kernels: object) -> frozenset[str] | None:
    """The library kernels among a cell's (CellRecord.row's ';'-joined names; XLA_NAMED's left out); None where the
    record names no kernel (a wall timer, a CPU): unknown, not none."""
    names = [k for k in kernels.split(";") if k] if isinstance(kernels, str) else []
    return frozenset(k for k in names if not XLA_NAMED.fullmatch(k)) if names else None


# A GEMM library's kernel, by the plain name it starts with: cuBLAS' nvjet_* (Hopper's), its split-K reduction, and
# cuBLAS' and CUTLASS's gemm kernels (sm90_xmma_gemm_…, cutlass3x_sm90_tensorop_gemm_…). A mangled or templated name
# (an attention kernel built on CUTLASS names cutlass::gemm in its arguments) is not one. Which GEMM kernel runs a
# matmul is XLA's GEMM autotuner's pick, made afresh as a program compiles: of two nights of lab5 on the same
# libraries (h200 lab5-warm 12-02 and 12-03), 9 xla and naive cells ran another nvjet tile, or nvjet in place of
# XLA's Triton gemm_fusion_dot, while their attention ran as before.
GEMM_NAMED = re.compile(r"nvjet_\w*|splitKreduce\w*|(sm\d+|ampere|turing|volta|cutlass)\w*gemm\w*")
ANOTHER_GEMM, ANOTHER_KERNEL = "another GEMM", "another kernel"
# What kernel_change's marks mean, in one line: the key beside every table that shows them (the dashboard's Compare tab
# and History).
KERNEL_KEY = (f"backend xla → cudnn: the compiled programs took other backends; {ANOTHER_KERNEL}: the kernels a "
              "library names differ (cuDNN, cuBLAS, TransformerEngine, Pallas; XLA's fusions left out); "
              f"{ANOTHER_GEMM}: only the GEMM kernels differ (XLA's GEMM autotuner's pick)")


def kernel_change(backend_a: object, backend_b: object, kernels_a: object, kernels_b: object) -> str:
    """What ran in B in place of what ran in A, by the records' own fields: 'backend xla → cudnn' where the backends
    the compiled programs prove differ, else where the library kernels seen by the device timer differ as sets,
    'another GEMM' where the kernels that differ are all GEMM kernels (GEMM_NAMED: the autotuner's pick) and
    'another kernel' where any other differs (the attention kernel: another knob of cuDNN's); '' where nothing
    differs or a side does not say (no backend, no kernels)."""
    if isinstance(backend_a, str) and isinstance(backend_b, str) and backend_a != backend_b:
        return f"backend {backend_a} → {backend_b}"
    seen_a, seen_b = library_kernels(kernels_a), library_kernels(kernels_b)
    if seen_a is None or seen_b is None or seen_a == seen_b:
        return ""
    return ANOTHER_GEMM if all(GEMM_NAMED.fullmatch(k) for k in seen_a ^ seen_b) else ANOTHER_KERNEL


def kernels_of(table: pd.DataFrame, a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The kernels each of `table`'s cells ran in A and in B (the records' ';'-joined names), by its key."""
    return tuple(table["key"].map(dict(zip(run["key"], _text(run, "kernels")))) for run in (a, b))


def xla_generated(a: pd.DataFrame, b: pd.DataFrame, table: pd.DataFrame) -> frozenset[str]:
    """The keys of `table`'s cells whose kernels, in A and in B, are all XLA-generated (XLA_NAMED: no library kernel
    on either side, so none changed): which tile XLA's autotuner chose at each compile is in neither record."""
    kernels_a, kernels_b = kernels_of(table, a, b)
    return frozenset(key for key, x, y in zip(table["key"], kernels_a, kernels_b)
                     if library_kernels(x) == library_kernels(y) == frozenset())


def kernels_apart(a: object, b: object) -> tuple[str, str]:
    """The library kernels only A ran and only B ran, each as ';'-joined text ('' where none)."""
    seen_a, seen_b = library_kernels(a) or frozenset(), library_kernels(b) or frozenset()
    return ";".join(sorted(seen_a - seen_b)), ";".join(sorted(seen_b - seen_a))


def verdicts(ratio: pd.Series, beyond: pd.Series, threshold: float, confirmed: pd.Series) -> np.ndarray:
    """'slower' past 1 + threshold, 'faster' below 1 / (1 + threshold), either only `beyond` noise; such a move that
    is not `confirmed` (a side did not converge, and the move is short of the stricter rule: confirmed) is
    'unconfirmed'."""
    moved = beyond & ((ratio > 1 + threshold) | (ratio < 1 / (1 + threshold)))
    return np.where(moved & ~confirmed, "unconfirmed",
                    np.where(moved & (ratio > 1), "slower", np.where(moved, "faster", "within noise")))


def confirm_samples(manifest: Manifest | None) -> int:
    """The samples a side needs for an unconverged move to count: CONFIRM_SAMPLES, or fewer for a burst run, whose
    sampler takes timing.min_samples and stops (it never aims at target_noise), so no burst cell could reach more."""
    if manifest is None or power_policy(manifest) != "burst":
        return CONFIRM_SAMPLES
    taken = manifest.spec.get("timing", {}).get("min_samples", CONFIRM_SAMPLES)
    return min(CONFIRM_SAMPLES, taken) if isinstance(taken, int) else CONFIRM_SAMPLES


def confirmed(both: pd.DataFrame, gap: pd.Series, iqr_a: pd.Series, iqr_b: pd.Series,
              floors: tuple = (CONFIRM_SAMPLES, CONFIRM_SAMPLES)) -> pd.Series:
    """Whether a pair's move can be trusted: both sides converged, or the gap is beyond CONFIRM_NOISES times each
    side's noise on each side's `floors` samples or more (confirm_samples: a count for every pair, or a Series of
    each pair's)."""
    settled = ~(both["unconverged_a"].astype(bool) | both["unconverged_b"].astype(bool))
    sampled = both["samples_a"].ge(floors[0]) & both["samples_b"].ge(floors[1])
    return settled | (sampled & beyond_noise(gap, CONFIRM_NOISES * iqr_a, CONFIRM_NOISES * iqr_b))


def moves(both: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD,
          floors: tuple = (CONFIRM_SAMPLES, CONFIRM_SAMPLES)) -> pd.DataFrame:
    """Per pair of `timed` rows side by side (A's columns suffixed _a, B's _b): B's median over A's (`ratio`), each
    run's noise (IQR / median) and the verdict (verdicts, confirmed): the one rule of whether a cell moved, which
    `cells` applies and the dashboard's History asks of the runs either side of a step."""
    gap = (both["median_b"] - both["median_a"]).abs()
    iqr_a, iqr_b = both["q3_a"] - both["q1_a"], both["q3_b"] - both["q1_b"]
    ratio = both["median_b"] / both["median_a"]
    verdict = verdicts(ratio, beyond_noise(gap, iqr_a, iqr_b), threshold, confirmed(both, gap, iqr_a, iqr_b, floors))
    return pd.DataFrame({"ratio": ratio, "noise_a": iqr_a / both["median_a"], "noise_b": iqr_b / both["median_b"],
                         "verdict": verdict}, index=both.index)


def flagged_sides(a: pd.Series, b: pd.Series) -> list[str]:
    """Which side each pair's flag holds on: 'A', 'B', 'A, B', or '' where neither."""
    return [", ".join(side for side, on in (("A", x), ("B", y)) if on) for x, y in zip(a.astype(bool), b.astype(bool))]


def side_by_side(a: pd.DataFrame, b: pd.DataFrame, timer: str | None) -> pd.DataFrame:
    """The cells correct and timed by `timer` in both runs, in A's order, as the pairs `moves` judges: A's columns
    suffixed _a beside B's times, flags and kernels suffixed _b."""
    both = timed(a, timer).merge(timed(b, timer)[["key", "median", "q1", "q3", "samples", "unsettled", "unconverged",
                                                  "backend", "kernels"]], on="key", suffixes=("_a", "_b"))
    return both.sort_values("order").reset_index(drop=True)


def cells(a: pd.DataFrame, b: pd.DataFrame, timer: str | None, threshold: float = DEFAULT_THRESHOLD,
          floors: tuple[int, int] = (CONFIRM_SAMPLES, CONFIRM_SAMPLES)) -> pd.DataFrame:
    """Per cell correct and timed by `timer` in both runs (in A's order; none without a timer): B's median over A's, each run's noise (IQR / median)
    and the verdict: 'faster', 'slower', 'within noise' or 'unconfirmed' (verdicts, confirmed); `unsettled` names the
    side(s) sampled unsettled or on an unstable clock ('A', 'B', 'A, B'; '' where both settled), whose ratio is power
    state as well as code; `unconverged` the side(s) whose noise never met its target; `kernel`
    says where B ran another implementation than A (kernel_change: 'backend xla → cudnn', 'another kernel'; ''
    where not), whose ratio is another kernel's as well as this code's."""
    both = side_by_side(a, b, timer)
    return pd.DataFrame({
        "key": both["key"], "experiment": both["experiment"], "variant": both["variant"], "shape": labels(both),
        "a_ms": both["median_a"] * 1e3, "b_ms": both["median_b"] * 1e3, **moves(both, threshold, floors),
        "unsettled": flagged_sides(both["unsettled_a"], both["unsettled_b"]),
        "unconverged": flagged_sides(both["unconverged_a"], both["unconverged_b"]),
        "kernel": [kernel_change(*sides) for sides in zip(both["backend_a"], both["backend_b"], both["kernels_a"],
                                                            both["kernels_b"])],
        **{axis: both[axis] for axis in SHAPE},
    })


def reproduced(table: pd.DataFrame, a: pd.DataFrame, again: pd.DataFrame | None, timer: str | None,
               threshold: float, floors: tuple[int, int]) -> pd.DataFrame:
    """`table` (cells' A against B) with `recheck_ratio`, the median of the cells measured `again` (B's recheck) over
    A's (NaN where not measured again), and each slower cell that A against its recheck finds clearly not slower by
    the same rule (cells) as 'not reproduced': faster (a confirmed move), or within noise on a pair both sides of
    which converged. A slower cell the recheck did not time, or timed unconfirmed or within a noise that never met its
    target, stays slower: such a recheck proves nothing, and a gate it passed would hide a real regression."""
    if again is None:
        return table.assign(recheck_ratio=math.nan)
    both = side_by_side(a, _with_columns(again), timer)
    judged = rechecked(both, threshold, floors).assign(key=both["key"]).rename(columns={"ratio": "recheck_ratio"})
    found = table.merge(judged, on="key", how="left")
    gone = found["verdict"].eq("slower") & found["refuted"].eq(True)  # NaN: a cell not measured again
    return found.assign(verdict=found["verdict"].mask(gone, NOT_REPRODUCED)).drop(columns="refuted")


def rechecked(both: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD,
              floors: tuple = (CONFIRM_SAMPLES, CONFIRM_SAMPLES)) -> pd.DataFrame:
    """Per pair of `timed` rows side by side, A's (_a) against B's recheck's (_b), as `moves` takes them: the
    recheck's ratio to A and whether it finds the cell clearly not slower (`refuted`): faster (a move confirmed), or
    within noise on a pair both sides of which converged. The one rule by which a slower cell is not reproduced, here
    (reproduced) and in the dashboard's History, whose pairs hold NaN where the recheck did not time a cell: within
    noise of nothing, and not converged, so never refuted."""
    moved = moves(both, threshold, floors)
    unconverged = both["unconverged_a"].astype(bool) | both["unconverged_b"].astype(bool)  # NaN: True
    refuted = moved["verdict"].eq("faster") | (moved["verdict"].eq("within noise") & ~unconverged)
    return pd.DataFrame({"ratio": moved["ratio"], "refuted": refuted}, index=both.index)


def kernel_changes(a: pd.DataFrame, b: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """The cells of `table` (compared, with their verdicts) that ran another kernel in B: key, experiment, variant,
    shape, verdict, the change, and the library kernels only A ran and only B ran."""
    changed = table[table["kernel"].ne("")]
    kernels_a, kernels_b = kernels_of(changed, a, b)
    apart = [kernels_apart(x, y) for x, y in zip(kernels_a, kernels_b)]
    return pd.DataFrame({**{c: changed[c] for c in CELL_COLUMNS}, "verdict": changed["verdict"],
                         "change": changed["kernel"], "only A ran": [x for x, _ in apart],
                         "only B ran": [y for _, y in apart]},
                        columns=[*CELL_COLUMNS, "verdict", "change", "only A ran", "only B ran"]).reset_index(drop=True)


def geomean(values: pd.Series) -> float:
    return float(np.exp(np.log(values).mean())) if len(values) else math.nan


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per experiment and variant: the geometric mean of B / A and how many cells got faster or slower, or were within
    noise; how many moved unconfirmed, and how many were not reproduced, where any were."""
    counts = pd.crosstab([table["experiment"], table["variant"]], table["verdict"])
    means = table.groupby(["experiment", "variant"], sort=False)["ratio"].agg(geomean).rename("geomean B/A")
    joined = means.to_frame().join(counts).fillna(0)
    for verdict in VERDICTS:
        joined[verdict] = joined[verdict].astype(int) if verdict in joined else 0
    shown = [v for v in VERDICTS if v not in OCCASIONAL or joined[v].any()]
    return joined[["geomean B/A", *shown]].reset_index()


def planned(manifest: Manifest | None) -> list[str] | None:
    """The keys of every cell the run planned (its manifest's cell order, every shard's); None for a run from before
    manifests carried it (its cells_planned counts only the shards that wrote a manifest)."""
    return manifest.cell_order if manifest else None


def lost(a: pd.DataFrame, b: pd.DataFrame, b_planned: list[str] | None) -> pd.Series:
    """Whether each of A's cells is ok in A and absent from B though B planned it (a shard that never uploaded, a
    run cut short): a regression. A cell B did not plan (another --only) is only in A."""
    return a["status"].eq("ok") & ~a["key"].isin(b["key"]) & a["key"].isin(b_planned or ())


def only_in(a: pd.DataFrame, b: pd.DataFrame, kept: pd.Series | None = None) -> pd.DataFrame:
    """A's cells that B lacks (key, experiment, variant, shape, status), in A's order; only those `kept`, if given."""
    missing = a[~a["key"].isin(b["key"]) & (True if kept is None else kept)].reset_index(drop=True)
    return pd.DataFrame({**{c: missing[c] for c in CELL_COLUMNS[:3]}, "shape": labels(missing),
                         "status": missing["status"]}, columns=[*CELL_COLUMNS, "status"])


def status_changes(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Cells in both whose status changed, in A's order, with B's reason; `regression`: it was ok and is not now."""
    shared = a.merge(b[["key", "status", "reason"]], on="key", suffixes=("", "_b"))
    changed = shared[shared["status"] != shared["status_b"]]
    return pd.DataFrame({
        **{c: changed[c] for c in CELL_COLUMNS[:3]}, "shape": labels(changed), "a": changed["status"],
        "b": changed["status_b"], "reason": changed["reason_b"].fillna("").astype(str).str.split("\n").str[0],
        "regression": changed["status"].eq("ok") & changed["status_b"].ne("ok"),
    }, columns=[*CELL_COLUMNS, "a", "b", "reason", "regression"]).reset_index(drop=True)


# --- environments ------------------------------------------------------------------------------------------------

def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _capability(value: str | None) -> str | None:
    """A compute capability as today's runs write it, 9.0: schema 1 manifests hold '9' and '9.0' for one GPU."""
    try:
        return f"{float(value):.1f}"
    except (TypeError, ValueError):
        return value


def _measured(origin: CeilingsOrigin | None) -> str | None:
    """The start that measured a run's ceilings (the same in every run that reused them)."""
    return None if origin is None else f"{origin.run_id} at {origin.measured_at}"


def facts(m: Manifest | None) -> dict[str, str]:
    """Where and how a run ran, as text: machine, GPU, versions, power policy, workers, spec and times."""
    if m is None:
        return {}
    gpu = m.machine.gpu.model_dump(exclude_none=True) if m.machine.gpu else {}
    found = {
        "run id": m.run_id, "spec": m.name, "spec identity": spec_identity(m), "spec hash": m.spec_hash,
        "started": m.started_at, "ended": m.ended_at, "attnbench": m.git_sha, "cells planned": m.cells_planned,
        "shard": m.shard, "host": m.machine.host,
        "platform": m.machine.platform, "device": m.machine.device_kind, "devices": m.machine.device_count,
        "compute capability": _capability(m.machine.compute_capability), "power policy": policy_said(m),
        "run settings": run_settings(m, HOW_OPTIONS) or NONE_SET,
        "matmul peak (TFLOP/s)": _round(m.machine.matmul_peak_tflops),
        "memory bandwidth (GB/s)": _round(m.machine.memory_bandwidth_gbps),
        "ceilings measured": _measured(m.machine.ceilings_origin), **m.machine.kernel_settings(),
        **{f"gpu {k}": v for k, v in gpu.items()},
        **{f"version {k}": v for k, v in m.machine.versions.items()},
        **{f"worker {name}: {k}": v for name, w in m.workers.items() for k, v in w.versions.items()},
        **{f"worker {name} start s": round(sum(w.start_s.values()), 1) for name, w in m.workers.items() if w.start_s},
        **{f"seconds {phase}": round(seconds, 1) for phase, seconds in m.phases.items()},
        **{f"earlier {fact}": ", ".join(values) for fact, values in (m.earlier_facts or {}).items()},
        "compile cache": m.compile_cache, "command": " ".join(m.argv), "schema_version": m.schema_version,
    }
    return {k: str(v) for k, v in found.items() if v is not None}


def momentary(fact: str) -> bool:
    """A fact of this run alone (its identity, times, readings, seconds spent), not of its environment."""
    return fact in IDENTITY or fact.startswith("seconds ") or fact.endswith(" start s")


def reused_ceilings(manifests: Mapping[str, Manifest | None]) -> bool:
    """Whether a run among these reused kept ceilings: where none did, each run measured its own, and their
    `ceilings measured` differ as any two starts do (noise, its values beside it), not in their environment."""
    return any(m.machine.ceilings_origin.reused for m in manifests.values() if m and m.machine.ceilings_origin)


def environments(manifests: Mapping[str, Manifest | None]) -> pd.DataFrame:
    """Runs side by side, one column each, a row per fact; `differs` marks environment facts (not the run's
    identity, times or momentary readings) that are not the same in every run, and those rows come first."""
    columns = {key: facts(m) for key, m in manifests.items()}
    table = pd.DataFrame(columns).fillna(ABSENT)
    differs = (table.nunique(axis=1) > 1) & ~table.index.map(momentary).astype(bool)
    if not reused_ceilings(manifests):
        differs &= table.index != "ceilings measured"
    return table.assign(differs=differs).sort_values("differs", ascending=False, kind="stable")


def differences(a: Manifest | None, b: Manifest | None) -> pd.DataFrame:
    """The environment facts that differ between A and B (fact, a, b): versions, GPU, driver, power policy..."""
    table = environments({"a": a, "b": b})
    return table[table["differs"]].drop(columns="differs").rename_axis("fact").reset_index()


def material(fact: str) -> bool:
    """A fact whose difference changes what a time means: power policy, spec identity, attnbench's version (its git
    sha), the GPU (name, compute capability, device count), driver, power limit, the XLA_FLAGS and environment
    variables that can change kernels, and the versions of jax, jaxlib, cuDNN, TransformerEngine, the CUDA runtime
    and tokamax (the run's or a worker's); and the earlier values of any of them (`earlier gpu driver`: some of the
    run's cells ran on another driver than its manifest's machine, the fact a resume goes on across)."""
    if fact.startswith("earlier "):
        return material(fact.removeprefix("earlier "))
    library = fact.rpartition(" ")[2]
    return fact in MATERIAL or (fact.startswith(("version ", "worker ")) and library in MATERIAL_LIBRARIES)


def material_of(found: pd.DataFrame) -> pd.DataFrame:
    """The differences (fact, a, b) that change what a time means: not those where a run did not record the fact
    (unknown, not known to differ)."""
    recorded = ~found[["a", "b"]].eq(NOT_RECORDED).any(axis=1)
    return found[found["fact"].map(material).astype(bool) & recorded]


def said(found: pd.DataFrame) -> str:
    """Differences (fact, a, b) as one line: 'power policy steady → burst; version cudnn 9.14.0 → 9.19.0'."""
    return "; ".join(f"{r.fact} {r.a} → {r.b}" for r in found.itertuples())


# --- which run came before ---------------------------------------------------------------------------------------

def started(manifest: Manifest) -> datetime:
    """When the run started, as an aware datetime (pandas' parser costs ~3 ms a call: a store has hundreds)."""
    when = datetime.fromisoformat(manifest.started_at)
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def headline_timer(manifest: Manifest) -> str:
    """The timer a run's cells report as theirs: device on a GPU (compute capability known), else wall."""
    return "device" if manifest.machine.compute_capability else "wall"


# A stored spec's identity by the spec object read (held, so that its id stays its own): each page of the dashboard
# matches every run of its store again.
_IDENTITIES: dict[int, tuple[dict, str]] = {}
IDENTITIES_KEPT = 20_000


def spec_identity(manifest: Manifest) -> str:
    """What the run's spec measures, as a hash that an attnbench upgrade keeps (runner.spec.identity), computed from
    the stored spec on read; its spec hash where the manifest holds no spec to read."""
    spec = manifest.spec
    if not isinstance(spec, dict):
        return manifest.spec_hash
    known = _IDENTITIES.get(id(spec))
    if known is None:  # an id held here is its spec's alone: the entry holds the spec
        if len(_IDENTITIES) >= IDENTITIES_KEPT:
            _IDENTITIES.clear()
        known = _IDENTITIES[id(spec)] = spec, identity(spec)
    return known[1]


def series_key(manifest: Manifest) -> tuple[str, str, str | None, str]:
    """(spec identity, GPU, power policy, timer): runs that agree on all four measure like with like."""
    return spec_identity(manifest), gpu_name(manifest), power_policy(manifest), headline_timer(manifest)


def same_series(a: Manifest, b: Manifest) -> bool:
    """Runs of the same spec identity, GPU, power policy and timer: the runs one can take as each other's previous."""
    return series_key(a) == series_key(b)


NO_CELL_SHARED = "it planned no cell this run planned (another --only, --variants or --where)"


@dataclass(frozen=True)
class Previous:
    """The run before another (None where there is none) and the newer runs of its series passed over, with why."""

    run: str | None
    skipped: list[tuple[str, str]]


def shares_cells(manifest: Manifest, keys: frozenset[str] | None) -> bool:
    """Whether the run planned a cell among `keys` (its manifest's cell order); so taken where either side lists
    none (runs stored before 2026-12-03)."""
    return keys is None or not manifest.cell_order or not keys.isdisjoint(manifest.cell_order)


def previous(manifests: Mapping[str, Manifest | None], key: str) -> Previous:
    """The run of the same spec identity, GPU, power policy and timer that started last before `key` and planned a
    cell `key` planned, never a recheck (its cells are another run's, measured again), of an earlier sitting than
    `key`'s where one is stored (the newer ones of `key`'s sitting passed over: "did last night regress" asks of the
    night before, not of tonight's cold twin), made with `key`'s run settings (record.HOW_OPTIONS: --compile-ahead off
    against off) where one was, else the newest of any; the newer runs of that series passed over, each with why."""
    run = manifests[key]
    if run is None:
        return Previous(None, [])
    series = series_key(run)
    earlier = [k for _, k in sorted([(started(m), k) for k, m in manifests.items() if m and not m.rechecks
                                      and started(m) < started(run) and series_key(m) == series],
                                     key=lambda found: found[0], reverse=True)]
    sitting = [k for k in earlier if same_sitting(manifests[k], run)]
    before = _newest_like(manifests, run, [k for k in earlier if k not in sitting])
    if before.run is None:
        return _newest_like(manifests, run, earlier)
    return Previous(before.run, [(k, in_sitting(manifests[k], run)) for k in sitting] + before.skipped)


def _newest_like(manifests: Mapping[str, Manifest | None], run: Manifest, earlier: list[str]) -> Previous:
    """The first of `earlier` (newest first) that planned a cell `run` planned, made with its run settings where one
    was, else the first that planned one; those passed over before it, each with why."""
    keys = frozenset(run.cell_order) if run.cell_order else None
    settings, skipped, fallback = run_settings(run, HOW_OPTIONS), [], None
    for candidate in earlier:
        theirs = run_settings(manifests[candidate], HOW_OPTIONS)
        if not shares_cells(manifests[candidate], keys):
            skipped.append((candidate, NO_CELL_SHARED))
        elif theirs == settings:
            return Previous(candidate, skipped)
        else:
            fallback = fallback or Previous(candidate, list(skipped))
            skipped.append((candidate, f"run settings {theirs or NONE_SET} → {settings or NONE_SET}"))
    return fallback or Previous(None, skipped)


SITTING_S = 3600  # runs started this close: one sitting (a benchmark's cold, warm and ahead-off runs), not two nights


def _gap(a: Manifest, b: Manifest) -> str:
    """How long before B run A started, where within one sitting ('83 s', '18 min'); '' otherwise."""
    seconds = (started(b) - started(a)).total_seconds()
    if not 0 <= seconds < SITTING_S:
        return ""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def same_sitting(a: Manifest, b: Manifest) -> str:
    """Where A started within SITTING_S before B, one clause that says so ('A started 53 s before B, in the same
    sitting, not on an earlier night'): beside the verdict (report.verdict), since a benchmark's cold and warm twins
    read alike where a night apart they differ; '' otherwise."""
    gap = _gap(a, b)
    return f"A started {gap} before B, in the same sitting, not on an earlier night" if gap else ""


def in_sitting(a: Manifest, b: Manifest) -> str:
    """Why `previous` passed over A, a run of B's sitting, for a run of an earlier sitting."""
    return f"started {_gap(a, b)} before it, in its sitting: an earlier sitting's run is taken"


def previous_run(manifests: Mapping[str, Manifest | None], key: str) -> str | None:
    """The run `previous` finds before `key`, if any."""
    return previous(manifests, key).run


def next_run(manifests: Mapping[str, Manifest | None], key: str) -> str | None:
    """The oldest run of `key`'s series whose run before (`previous`) is `key`, if any."""
    run = manifests[key]
    later = sorted((started(m), k) for k, m in manifests.items()
                   if run and m and started(m) > started(run) and same_series(m, run))
    return next((k for _, k in later if previous_run(manifests, k) == key), None)


def _setting(value: object) -> str:
    return "default" if value is None else json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def settings_said(a: Manifest, b: Manifest) -> str:
    """The stored specs' settings in which A's and B's spec identities differ, as one line: 'timing.budget_s 0.2 →
    1.0'; '' where their identities agree (or a manifest holds no spec to read)."""
    if not (isinstance(a.spec, dict) and isinstance(b.spec, dict)) or spec_identity(a) == spec_identity(b):
        return ""
    return "; ".join(f"{path} {_setting(x)} → {_setting(y)}" for path, x, y in setting_changes(a.spec, b.spec))


def apart(a: Manifest, b: Manifest) -> str:
    """How two runs of one spec name and GPU fall in different series: their settings, power policy or timer."""
    pairs = [("spec identity", spec_identity(a), spec_identity(b)), ("power policy", policy_said(a), policy_said(b)),
             ("timer", headline_timer(a), headline_timer(b))]
    parts = [f"{what} {x} → {y}" for what, x, y in pairs if x != y]
    if settings := settings_said(a, b):
        parts[0] = settings  # the settings that make the identities differ, rather than their hashes
    return "; ".join(parts)


def nearest_named(manifests: Mapping[str, Manifest | None], key: str) -> str | None:
    """The newest run started before `key` of its spec name and GPU, whatever its series."""
    run = manifests[key]
    named = [(started(m), k) for k, m in manifests.items() if run and m and started(m) < started(run)
             and (m.name, gpu_name(m)) == (run.name, gpu_name(run))]
    return max(named, key=lambda found: found[0])[1] if named else None


def passed_over(found: Previous) -> str:
    """The newer runs of the series `previous` passed over, as one clause: 'passed over p2 (why)'; '' where none."""
    return "; ".join(f"passed over {run}: {why}" for run, why in found.skipped)


def recheck_id(run_id: str) -> str:
    """The id of the run that measures `run_id`'s slower cells again (`attnbench recheck`)."""
    return run_id + RECHECK


def rechecks(manifest: Manifest | None, run_id: str) -> bool:
    """Whether the run of `manifest` is run `run_id`'s recheck: named recheck_id(run_id), its manifest saying it
    measured `run_id`'s cells again (a run copied under that name from elsewhere is not)."""
    return manifest is not None and manifest.run_id == recheck_id(run_id) and manifest.rechecks == run_id


def recheck_of(manifests: Mapping[str, Manifest | None], key: str) -> str | None:
    """The run among `manifests` that measured `key`'s slower cells again (RECHECK), if any."""
    run = manifests.get(key)
    return next((k for k, m in manifests.items() if run and rechecks(m, run.run_id)), None)


# --- the whole comparison ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Comparison:
    """A against B: what differs in their environments, cells in one run only, status changes, then every timed
    cell in both with its verdict, and the geometric means per experiment and variant."""

    a: Manifest | None
    b: Manifest | None
    timer: str | None
    threshold: float
    environment: pd.DataFrame  # fact, a, b
    only_a: pd.DataFrame
    only_b: pd.DataFrame
    changes: pd.DataFrame
    cells: pd.DataFrame
    summary: pd.DataFrame
    common: int  # cells (keys) in both runs, whatever their status
    missing: pd.DataFrame  # ok in A, planned by B and absent from it: a regression
    planned_b: int | None  # the cells B planned (every shard's), None where its manifest does not list them
    other_timers: pd.DataFrame  # ok in both, timed by different timers (not_compared): no verdict, no regression
    without_timer: pd.DataFrame  # ok in both, the same timers in both, `timer` not among them: no verdict either
    kernels: pd.DataFrame  # compared cells that ran another kernel in B (kernel_changes)
    recheck: Manifest | None = None  # the run that measured B's slower cells again (reproduced), if any
    xla_only: frozenset[str] = frozenset()  # compared cells that ran XLA-generated kernels alone (xla_generated)

    @property
    def material(self) -> pd.DataFrame:
        """The environment differences that change what a time means (fact, a, b), said beside the verdict."""
        return material_of(self.environment)

    @property
    def settings(self) -> str:
        """The spec settings in which A's and B's identities differ, as one line ('' where they agree)."""
        return settings_said(self.a, self.b) if self.a and self.b else ""

    @property
    def sitting(self) -> str:
        """That A started within the hour before B (same_sitting), or ''."""
        return same_sitting(self.a, self.b) if self.a and self.b else ""

    @property
    def policies(self) -> tuple[str, str]:
        """Each run's power policy in words (record.policy_said; NO_POLICY for a run from before the choice)."""
        return tuple(policy_said(m) if m else NO_POLICY for m in (self.a, self.b))

    @property
    def slower(self) -> pd.DataFrame:
        return self.cells[self.cells["verdict"] == "slower"]

    @property
    def slower_xla_only(self) -> pd.DataFrame:
        """Slower cells that ran XLA-generated kernels alone in both runs: no kernel name the records keep moved."""
        return self.slower[self.slower["key"].isin(self.xla_only)]

    @property
    def unconfirmed(self) -> pd.DataFrame:
        """Cells that moved beyond noise and the threshold, a side not converged, short of `confirmed`'s rule."""
        return self.cells[self.cells["verdict"] == "unconfirmed"]

    @property
    def not_reproduced(self) -> pd.DataFrame:
        """Cells slower in B that the recheck, measured again, did not find slower than A (reproduced)."""
        return self.cells[self.cells["verdict"] == NOT_REPRODUCED]

    @property
    def no_longer_ok(self) -> pd.DataFrame:
        return self.changes[self.changes["regression"]]

    @property
    def regressed(self) -> bool:
        """Slower beyond noise and the threshold (never unconfirmed, nor not reproduced), ok in A and not in B, or ok
        in A and missing from B, which planned it."""
        return bool(len(self.slower) or len(self.no_longer_ok) or len(self.missing))


def _some(count: int) -> str:
    return "no cell" if not count else counted(count, "cell")


def nothing_compared(found: Comparison, filtered: bool = False) -> str:
    """Why no cell has a verdict, as a clause: 'their plans share no cell', or 'their plans share 40 cells, none timed
    ok in both' (their manifests' cell_order; where a run lists none, stored before 2026-12-03, the cells both hold
    instead: 'they hold 40 cells in common, ...'), naming the cells timed by different timers and those with no time
    of the compared timer in either run where any were. Where
    `filtered` (a filter cut the frames compared: the dashboard's), the plans are not what was compared, so the cells
    both frames hold are counted: 'the filters keep no cell both runs hold', or 'the filters keep 4 cells both runs
    hold, none timed ok in both'."""
    plans = [m.cell_order if m else None for m in (found.a, found.b)]
    if filtered:
        shared = found.common
        clause = f"the filters keep {_some(shared)} both runs hold"
    elif all(plans):
        shared = len(set(plans[0]) & set(plans[1]))
        clause = f"their plans share {_some(shared)}"
    else:
        shared = found.common
        clause = f"they hold {_some(shared)} in common"
    if not shared:
        return clause
    differ, alike = len(found.other_timers), len(found.without_timer)
    why = [f"{_some(differ)} timed by different timers" if differ else "",
           f"{_some(alike)} with no {found.timer or 'shared'} time in either" if alike else ""]
    said = "; ".join(w for w in why if w)
    return clause + ", none timed ok in both" + (f" ({said})" if said else "")


def compare(a: pd.DataFrame, b: pd.DataFrame, manifest_a: Manifest | None, manifest_b: Manifest | None,
            threshold: float = DEFAULT_THRESHOLD, timer: str | None = None, again: pd.DataFrame | None = None,
            recheck: Manifest | None = None) -> Comparison:
    """A against B (frames of runner.frames.cells' columns); the timer is `timer` if both runs have it, else A's
    headline timer, else one they share; `again`, B's slower cells measured again (the run `recheck`), judges them
    again (reproduced)."""
    a, b = _with_columns(a), _with_columns(b)
    timer = shared_timer(a, b, timer or headline(a))
    floors = confirm_samples(manifest_a), confirm_samples(manifest_b)
    table = reproduced(cells(a, b, timer, threshold, floors), a, again, timer, threshold,
                       (floors[0], confirm_samples(recheck)))
    b_planned = planned(manifest_b)
    gone = lost(a, b, b_planned)
    return Comparison(manifest_a, manifest_b, timer, threshold, differences(manifest_a, manifest_b),
                      only_in(a, b, ~gone), only_in(b, a), status_changes(a, b), table, summary(table),
                      len(set(a["key"]) & set(b["key"])), only_in(a, b, gone).drop(columns="status"),
                      None if b_planned is None else len(b_planned), *not_compared(a, b, timer),
                      kernel_changes(a, b, table), recheck if again is not None else None,
                      xla_generated(a, b, table))


def _with_columns(cells: pd.DataFrame) -> pd.DataFrame:
    """A run of no cells as a frame with the columns every record has; `run` its run id unless a reader named it."""
    needed = ["run", "key", "experiment", "variant", "status", "reason", "order", *SHAPE]
    if not len(cells):
        return pd.DataFrame(columns=needed)
    return cells if "run" in cells else cells.assign(run=cells["run_id"])
