"""What the views show, computed from cell frames with pandas alone (no Streamlit, no plotting): rates by a timer,
nvbench-like summaries, the FP8 table, failures by reason, run history and the leaderboard. Two runs are compared
by runner/compare.py, which `attnbench compare` shares."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from runner import compare, leaderboard, marks, metrics, report, shape
from runner.record import NO_POLICY, Manifest, cudnn_ran

SHAPE = list(shape.NAMES)
shape_labels = compare.labels  # each cell's shape as text, as `attnbench compare` writes it
SIZES = list(shape.SIZES)  # axes drawn on a log2 x axis
FAILED = ["failed", "oom", "incorrect", "crashed", "timeout"]  # not ok and not an expected skip
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")


# --- rates -------------------------------------------------------------------------------------------------------

def _column(cells: pd.DataFrame, name: str) -> pd.Series:
    return pd.to_numeric(cells[name], errors="coerce") if name in cells else pd.Series(np.nan, index=cells.index)


def _text(cells: pd.DataFrame, name: str) -> pd.Series:
    return cells[name] if name in cells else pd.Series(None, index=cells.index, dtype=object)


def with_rates(cells: pd.DataFrame, runs: pd.DataFrame, timer: str | None) -> pd.DataFrame:
    """Latency (median, q1, q3 in ms), noise, TFLOP/s, GB/s, their % of the run's measured ceilings and the TFLOP/s'
    % of the MMA peak at the clock read while `timer` sampled (a cell's telemetry is its headline's: NaN by another
    timer), by `timer` (NaN where a cell has no such timing); a serving cell's µs per generated token; sizes in MiB;
    each of runner.marks' marks in its column: whether it was sampled `unsettled` and whether `timer` did not converge
    (`unconverged`)."""
    seconds = _column(cells, f"{timer}_median_s")
    peak = pd.to_numeric(cells["run"].map(runs["peak_tflops"]), errors="coerce")
    bandwidth = pd.to_numeric(cells["run"].map(runs["bandwidth_gbps"]), errors="coerce")
    rated = metrics.rates(_column(cells, "flops"), _column(cells, "bytes_min"), seconds,
                          metrics.Ceilings(peak, bandwidth), _column(cells, "devices").fillna(1))
    return cells.assign(
        latency_ms=seconds * 1e3, q1_ms=_column(cells, f"{timer}_q1_s") * 1e3,
        q3_ms=_column(cells, f"{timer}_q3_s") * 1e3, noise=_column(cells, f"{timer}_noise"),
        **rated,  # by the record's own names: the record's headline rates replaced by this timer's
        pct_of_clock_peak=metrics.clock_peak_share(rated["tflops"], _column(cells, "clock_peak_tflops").where(
            _text(cells, "telemetry_timer").eq(timer))),  # the clock is its telemetry's timer's: no other's share
        tflops_per_j=_column(cells, "tflops_per_j"), temp_mib=_column(cells, "temp_bytes") / 2**20,
        kv_cache_mib=_column(cells, "kv_cache_bytes") / 2**20,
        us_per_token=metrics.seconds_per_token(seconds, _column(cells, "batch"), _column(cells, "seq_len")).where(
            _column(cells, "serving").eq(1)) * 1e6,  # a serving cell's, per new token
        unsettled=compare.unsettled(cells),  # power state not settled or SM clock moved: the board's rule too
        unconverged=compare.unconverged(cells, timer),  # by this timer: its noise never met timing.target_noise
    )


def rate_notes(cells: pd.DataFrame, y: str) -> list[str]:
    """What the rate `y` counts, in the report's sentences (report.rate_notes), where a cell of that kind has such a
    rate: a packed row's TFLOP/s (and TFLOP/J), a serving cell's GB/s."""
    rated = cells[_column(cells, y).notna()]
    return report.rate_notes(y in ("tflops", "tflops_per_j") and bool(_column(rated, "packed").eq(1).any()),
                             y == "gbps" and bool(_column(rated, "serving").eq(1).any()))


def unrated_notes(cells: pd.DataFrame, manifests: dict, timer: str | None) -> list[str]:
    """runner.metrics.no_mma_rate's line for each run of `cells` on a GPU with no cited MMA rate, where its TFLOP/s
    are rated by `timer` and their clock was read while it sampled: where the % of the MMA peak at their clock would
    be drawn (never by another timer, the wall's, under which no GPU has that share)."""
    clocked = cells[_column(cells, "tflops").notna() & _text(cells, "telemetry_timer").eq(timer)]
    manifests = [manifests.get(run) for run in clocked["run"].unique()]
    said = (metrics.no_mma_rate(m.machine) for m in manifests if m)
    return list(dict.fromkeys(line for line in said if line))


def filtered(cells: pd.DataFrame, choices: dict[str, list]) -> pd.DataFrame:
    """Rows whose value in each column is among the chosen ones (compared as text, as the URL has them); no
    choice keeps every row."""
    for column, chosen in choices.items():
        if chosen:
            cells = cells[cells[column].astype(str).isin([str(c) for c in chosen])]
    return cells


def measured(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells that ran, agreed with the reference and have a latency: what the charts draw."""
    return cells[(cells["status"] == "ok") & cells["latency_ms"].notna()]


def swept(cells: pd.DataFrame) -> list[str]:
    """The shape axes that take more than one value (a derived axis that only follows its source left out)."""
    varying = [a for a in SHAPE if cells[a].nunique(dropna=False) > 1]  # a window [null, W] sweep varies
    follows = {a.name: a.follows for a in shape.AXES if a.follows}
    return [a for a in varying if not (follows.get(a) in varying and cells[a].equals(cells[follows[a]]))]


def line_axes(cells: pd.DataFrame, x: str) -> list[str]:
    """The swept axes other than x that vary at one size of x: a chart along x draws a line per case of them, so
    cells of different masks (or KV lengths, new tokens) never share a line."""
    at_size = cells.groupby(["variant", "run", x])
    return [a for a in swept(cells) if a != x and at_size[a].nunique(dropna=False).max() > 1]


def case(cells: pd.DataFrame, axes: list[str]) -> pd.Series:
    """A category per cell from the given axes ('bfloat16', 'causal', 'not causal', 'S2048 T1')."""
    parts = [cells[a].map(lambda v, a=a: (a if v else f"not {a}") if isinstance(v, bool) else shape.text(a, v)
                          if shape.is_null(v) else f"{shape.BY_NAME[a].short}{shape.text(a, v)}") for a in axes]
    return pd.concat(parts, axis=1).agg(" ".join, axis=1) if parts else pd.Series("", index=cells.index)


def fixed_shape(cells: pd.DataFrame) -> str:
    """The label of the axes that every cell shares: what a chart's title says is held fixed."""
    first = cells.iloc[0][SHAPE].to_dict()
    return shape.label(first, omit=tuple(a for a in SHAPE if cells[a].nunique(dropna=False) > 1))


def speedup(cells: pd.DataFrame, baseline: str | None) -> pd.Series:
    """The baseline variant's latency over each cell's, at the same run, experiment and shape."""
    if baseline is None:
        return pd.Series(np.nan, index=cells.index)
    cells, keys = keyed(cells)
    base = cells[cells["variant"] == baseline].drop_duplicates(keys).set_index(keys)["latency_ms"]
    return cells.join(base.rename("baseline_ms"), on=keys)["baseline_ms"] / cells["latency_ms"]


def efficiency(cells: pd.DataFrame) -> pd.Series:
    """Scaling efficiency of each cell against its one-device twin (same run, experiment, variant and shape but
    `devices` 1); NaN where that twin has no latency."""
    if "devices" not in cells:
        return pd.Series(np.nan, index=cells.index)
    # the shape as text but for D, as `keyed` does (an axis at null is NaN, and NaN keys do not join)
    cells = cells.assign(shape_id=shape_labels(cells, [a for a in SHAPE if a != "devices"]))
    keys = ["run", "experiment", "variant", "shape_id"]
    one = cells[cells["devices"] == 1].drop_duplicates(keys).set_index(keys)["latency_ms"]
    one_device_ms = cells.join(one.rename("one_device_ms"), on=keys)["one_device_ms"]
    return metrics.scaling_efficiency(one_device_ms, cells["devices"], cells["latency_ms"])


def keyed(cells: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The cells with a `shape_id` (the full label), and the columns that name a cell's run, experiment and shape:
    one text column rather than every axis, since an axis at null (no window) is NaN and NaN keys do not join."""
    return cells.assign(shape_id=shape_labels(cells)), ["run", "experiment", "shape_id"]


# --- summary tables (nvbench) ------------------------------------------------------------------------------------

def _summary_text(row: pd.Series) -> str:
    text = f"{row['latency_ms']:.3g} ±{row['noise']:.1%}" + "".join(f" {mark.symbol}" for mark in marks.MARKS
                                                                    if row[mark.column])
    return text + (f" ·{row['speedup']:.2f}×" if pd.notna(row["speedup"]) else "")


def legend(cells: pd.DataFrame) -> str:
    """What the marks in these cells' summary entries mean (runner.marks.key), each only where a cell carries it (''
    where none does)."""
    return marks.key(mark.symbol for mark in marks.MARKS if mark.column in cells and cells[mark.column].any())


def summary(cells: pd.DataFrame) -> pd.DataFrame:
    """One experiment's nvbench-style table (of one run): a row per swept value (as `show` writes it: yes / no, 'no
    window'), a column per variant, each entry 'median ±noise ·speed-up over the baseline' (column `speedup`), marked
    as runner.marks says."""
    index = swept(cells) or ["shape"]
    table = cells.assign(shape=fixed_shape(cells)).sort_values("order")
    # each axis as show writes it before the pivot, which drops a null key's rows (a dense cell's page_size, no window)
    table = table.assign(entry=table.apply(_summary_text, axis=1),
                         **{a: table.apply(lambda row, a=a: shape.shown(a, row), axis=1) for a in index if a in SHAPE})
    variants = list(dict.fromkeys(table["variant"]))
    pivot = table.pivot_table(index=index, columns="variant", values="entry", aggfunc="first", sort=False)
    pivot = pivot[variants].rename_axis(columns=None).reset_index()
    return pivot.rename(columns={a: shape.column(a) for a in SHAPE})


def markdown(table: pd.DataFrame) -> str:
    """A table as GitHub markdown, for pasting into a note or an issue."""
    text = table.astype(object).where(table.notna(), "—").astype(str)
    return report.markdown_table(list(text.columns), list(text.itertuples(index=False)))


# --- FP8 ---------------------------------------------------------------------------------------------------------

def fp8_variants(manifests: dict[str, Manifest | None]) -> dict[str, str]:
    """FP8 variant -> its bf16 baseline, as the runs' manifests name them."""
    return {name: info.fp8_baseline for m in manifests.values() if m
            for name, info in m.variants.items() if info.fp8_baseline}


def fp8_table(cells: pd.DataFrame, baselines: dict[str, str]) -> pd.DataFrame:
    """Per FP8 cell, its variant and verdict first (a 1280 px window shows them whole), then speed-up and error
    against its bf16 baseline at the same shape, whether f8 reached the program and a kernel, where the cell stands
    (shape, experiment, run), and the kernels last (long)."""
    promised = cells["variant"].isin(list(baselines))
    if "fp8_verdict" in cells:
        promised |= cells["fp8_verdict"].notna()
    fp8 = cells[promised]
    if fp8.empty:
        return pd.DataFrame()
    recorded = fp8["fp8_baseline"] if "fp8_baseline" in fp8 else pd.Series(None, index=fp8.index, dtype=object)
    fp8 = fp8.assign(baseline=recorded.fillna(fp8["variant"].map(baselines)))
    (cells, keys), fp8 = keyed(cells), keyed(fp8)[0]
    bf16 = cells[~promised].drop_duplicates(keys + ["variant"]).set_index(keys + ["variant"])["latency_ms"]
    base_ms = fp8.join(bf16.rename("baseline_ms"), on=keys + ["baseline"])["baseline_ms"]
    verdict = fp8.get("fp8_verdict", pd.Series(None, index=fp8.index, dtype=object))
    return pd.DataFrame({
        "variant": fp8["variant"],
        "verdict": verdict.where(verdict.notna(), fp8["status"] + ": " + fp8["reason"].fillna("")),
        "speed-up vs bf16": base_ms / fp8["latency_ms"], "error vs bf16": fp8.get("fp8_rel_err_vs_bf16"),
        "% of bf16 peak": fp8["pct_of_peak"], "f8 in program": fp8.get("fp8_in_hlo"),
        "f8 kernel ran": fp8.get("fp8_in_kernels"), "shape": shape_labels(fp8), "experiment": fp8["experiment"],
        "run": fp8["run"], "baseline": fp8["baseline"], "status": fp8["status"], "kernels": fp8["kernels"],
    })


# --- failures ----------------------------------------------------------------------------------------------------

def failures(cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(failures, expected skips), each grouped by variant, status and reason (numbers aside, so 'error 12.4' and
    'error 2.85' are one reason) with how many cells and runs, most frequent first."""
    bad = cells[cells["status"] != "ok"]
    reason = bad["reason"].fillna("").str.split("\n").str[0]
    bad = bad.assign(reason=reason, pattern=reason.str.replace(NUMBER, "#", regex=True))
    grouped = (bad.groupby(["status", "variant", "pattern"], sort=False)
               .agg(cells=("key", "size"), runs=("run", "nunique"), reason=("reason", "first"),
                    experiments=("experiment", lambda e: ", ".join(dict.fromkeys(e))))
               .reset_index().sort_values("cells", ascending=False, kind="stable"))
    grouped = grouped[["variant", "status", "reason", "cells", "runs", "experiments"]]
    skipped = grouped["status"] == "skipped"
    return grouped[~skipped].reset_index(drop=True), grouped[skipped].reset_index(drop=True)


# --- runs ----------------------------------------------------------------------------------------------------------

def variants(manifests: dict[str, Manifest | None], runs: list[str]) -> pd.DataFrame:
    """Each variant the runs name, as the first of their manifests that names it describes it."""
    seen = {}
    for run in runs:
        for name, info in (manifests[run].variants.items() if manifests[run] else ()):
            seen.setdefault(name, {"variant": name, "backend": info.backend, "fp8 baseline": info.fp8_baseline,
                                   "requires": "; ".join(info.requires), "worker": info.worker, "what": info.doc,
                                   "legacy": info.legacy})
    return pd.DataFrame(list(seen.values()))


# --- history (asv) -----------------------------------------------------------------------------------------------

def series(runs: pd.DataFrame) -> pd.Series:
    """'spec · GPU · power policy' -> its runs' keys, oldest first: the runs whose history is comparable (the policy
    as the runs table says it, dashboard.data's `power`: 'none' before the choice); where that label's runs are of
    several spec identities (runner.spec.identity: other settings, sweeps or variants), a series each, '· spec' and
    its first 8 digits added to the label. A recheck (`rechecks`: another run's slower cells measured again) is no
    run of a series: judged_steps judges the run it rechecks by it."""
    dated = _dated(runs)
    label = _labels(dated, " · " + dated["power"])
    return dated.index.to_series().groupby(label.to_numpy(), sort=True).agg(list)


def former_labels(runs: pd.DataFrame) -> dict[str, str]:
    """A series' label as links spelt it before the label named policy 'none' -> its label now: the series of runs
    from before the choice of policy ('lab5 · NVIDIA H200', now 'lab5 · NVIDIA H200 · none'), so that a bookmarked
    ?series= keeps opening its series."""
    dated = _dated(runs)
    policy = " · " + dated["power"]
    now, before = _labels(dated, policy), _labels(dated, policy.where(dated["power"].ne(NO_POLICY), ""))
    renamed = before.ne(now)
    return dict(zip(before[renamed], now[renamed]))


def _dated(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs a series may hold (a manifest, no recheck), oldest first."""
    return runs[runs["spec"].notna() & runs["rechecks"].isna()].sort_values("started")


def _labels(dated: pd.DataFrame, policy: pd.Series) -> pd.Series:
    """Each run's series label: 'spec · GPU' and its `policy` (' · burst'), its spec identity added where runs of one
    such label differ in it."""
    label = dated["spec"].astype(str) + " · " + dated["gpu"].astype(str) + policy
    several = dated["identity"].groupby(label).transform("nunique") > 1
    return label.where(~several, label + " · spec " + dated["identity"].astype(str).str[:8])


def comparable(manifests: dict[str, Manifest | None], key: str, others: list[str]) -> str | None:
    """The run to compare `key` with: the first of `others` of its series (spec identity, GPU, power policy, timer),
    else its predecessor, else the first of `others` of its spec name and GPU, else the first of `others`."""
    run = manifests[key]
    known = [o for o in others if run and manifests[o]]
    same = [o for o in known if compare.same_series(manifests[o], run)]
    named = [o for o in known
             if (manifests[o].name, compare.gpu_name(manifests[o])) == (run.name, compare.gpu_name(run))]
    return next(iter(same), None) or compare.previous_run(manifests, key) or next(iter(named + others), None)


def pair(manifests: dict[str, Manifest | None], runs: list[str], chosen: list[str],
         a: str | None = None, b: str | None = None) -> tuple[str | None, str | None]:
    """Compare's runs (A, B) for a link that names `a`, `b`, both or neither (runs: the store's, newest first;
    chosen: the runs selected): B's run before for A; A's run after for B (None where its series has none); for
    neither, the newest chosen run and comparable()'s run for it where that is of its series, else the newest run
    that has a run before, with it, so that a bare open never pairs two series while a pair of one exists."""
    if b:
        return a or comparable(manifests, b, []) or next(r for r in runs if r != b), b
    if a:
        return a, compare.next_run(manifests, a)
    newest = (chosen or runs)[0]
    first = comparable(manifests, newest, chosen[1:])
    alike = first and manifests[first] and manifests[newest]
    if not (alike and compare.same_series(manifests[first], manifests[newest])):
        found = next(((before, run) for run in runs if (before := compare.previous_run(manifests, run))), None)
        if found:
            return found
    return first or next(r for r in runs if r != newest), newest


def history(cells: pd.DataFrame, runs: pd.DataFrame, timer: str) -> pd.DataFrame:
    """Per run and correct cell, oldest run first: the median and its q1-q3 in ms, with the run's date and sha."""
    timed = compare.timed(cells, timer).join(runs[["started", "git_sha"]], on="run")
    return timed.assign(median_ms=timed["median"] * 1e3, q1_ms=timed["q1"] * 1e3,
                        q3_ms=timed["q3"] * 1e3).sort_values(["started", "order"]).reset_index(drop=True)


def common_cells(points: pd.DataFrame) -> pd.DataFrame:
    """The points of the cells that every run drawing their variant holds (a key is one variant's): like with like."""
    runs_of_variant = points.groupby("variant")["run"].transform("nunique")
    return points[points.groupby("key")["run"].transform("nunique") == runs_of_variant]


def experiment_history(points: pd.DataFrame) -> pd.DataFrame:
    """Per run and variant, the geometric mean of an experiment's cells (median, q1 and q3 alike) over the cells
    every run of that variant holds (`cells`: how many), so that a run measuring other cells moves no mean."""
    grouped = common_cells(points).groupby(["run", "variant"], sort=False)
    means = grouped[["median_ms", "q1_ms", "q3_ms"]].agg(compare.geomean).join(grouped.size().rename("cells"))
    first = grouped[["started", "git_sha"]].first()
    return means.join(first).reset_index().sort_values("started")


def steps(values: list[float], spreads: list[float],
          threshold: float = compare.DEFAULT_THRESHOLD) -> list[tuple[int, float]]:
    """Where a series of levels moves, by runner.compare's rule (compare.verdicts: beyond the threshold and both
    points' noise, each its spread (IQR / median) times it; a noise not known is never exceeded), from each point to
    the next: (index of the point after, its level / the one before). A run slow alone is two steps, there and back;
    a drift whose every step is within the noise is none."""
    values, spreads = np.asarray(values, float), np.asarray(spreads, float)
    before, after = values[:-1], values[1:]
    moved = compare.verdicts(after / before, compare.beyond_noise(np.abs(after - before), before * spreads[:-1],
                                                                  after * spreads[1:]),
                             threshold, np.ones(len(before), bool)) != "within noise"
    return [(int(i), float(after[i - 1] / before[i - 1])) for i in np.flatnonzero(moved) + 1]


STEP_COLUMNS = ["experiment", "variant", "shape", "ratio", "verdict", "before", "after", "key", "kernel"]


def judged_steps(points: pd.DataFrame, manifests: dict[str, Manifest | None],
                 again: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each step of each cell's history (`points`, oldest run first) from one run to the next, judged as `attnbench
    compare` judges the two (runner.compare.moves, each run's compare.confirm_samples): experiment, variant, shape,
    compare's B / A and verdict ('slower', 'faster', 'unconfirmed', or 'not reproduced' where the run after's recheck
    among `again` finds the cell clearly not slower: reproduced; a pair compare finds within noise is no step),
    the runs before and after, the key and what the run after ran in place of the run before's (`kernel`:
    runner.compare.kernel_change, '' where the same). Every pair of neighbouring runs is asked, so a step is never
    hidden by another near it; a drift whose each step compare finds within noise is none."""
    previous = pd.Series(np.arange(len(points))).groupby(points["key"].to_numpy(), sort=False).shift()
    has = previous.notna().to_numpy()  # every run of a cell's series but its first
    a = points.iloc[previous[has].astype(int)].reset_index(drop=True)
    b = points.iloc[np.flatnonzero(has)].reset_index(drop=True)
    floor = {run: compare.confirm_samples(manifests.get(run)) for run in points["run"].unique()}
    floors = tuple(side["run"].map(floor).astype(int) for side in (a, b))
    moved = compare.moves(pd.concat([a.add_suffix("_a"), b.add_suffix("_b")], axis=1), floors=floors)
    stepped = moved["verdict"].ne("within noise").to_numpy()  # the rest described only where compare calls a step
    a, b, moved = (frame[stepped].reset_index(drop=True) for frame in (a, b, moved))
    verdict = reproduced(a, b, moved["verdict"], again, manifests)
    return pd.DataFrame({"experiment": a["experiment"], "variant": a["variant"], "shape": shape_labels(a),
                         "ratio": moved["ratio"], "verdict": verdict, "before": a["run"], "after": b["run"],
                         "key": a["key"], "kernel": [compare.kernel_change(*sides) for sides in zip(
                             a["backend"], b["backend"], a["kernels"], b["kernels"])]}, columns=STEP_COLUMNS)


def reproduced(a: pd.DataFrame, b: pd.DataFrame, verdict: pd.Series, again: pd.DataFrame | None,
               manifests: dict[str, Manifest | None]) -> pd.Series:
    """Each step's `verdict` (the points before, `a`, and after, `b`), a slower one 'not reproduced' where the run
    after's recheck (its cells among `again`, history points of the runs whose manifest names the run they recheck)
    finds the cell clearly not slower than the run before: runner.compare.rechecked, as `attnbench compare` of the two
    runs says (compare.reproduced)."""
    if again is None or again.empty:
        return verdict
    rechecks = again.assign(recheck=again["run"], run=again["run"].map(lambda r: manifests[r].rechecks))
    found = b[["run", "key"]].merge(rechecks, on=["run", "key"], how="left")
    floors = (a["run"].map(lambda r: compare.confirm_samples(manifests.get(r))).astype(int),
              found["recheck"].map(lambda r: compare.confirm_samples(manifests.get(r))).astype(int))
    pairs = pd.concat([a.add_suffix("_a"), found.add_suffix("_b")], axis=1)
    gone = verdict.eq("slower").to_numpy() & compare.rechecked(pairs, floors=floors)["refuted"].to_numpy()
    return verdict.mask(gone, compare.NOT_REPRODUCED)


def not_reproduced(judged: pd.DataFrame) -> pd.DataFrame:
    """The steps among `judged` compare calls slower whose run after's recheck did not find slower: named, never a
    regression; the largest first."""
    found = judged[judged["verdict"].eq(compare.NOT_REPRODUCED)]
    return found.sort_values("ratio", ascending=False).reset_index(drop=True)


def regressions(judged: pd.DataFrame, limit: int = 10) -> pd.DataFrame:
    """The largest steps `attnbench compare` calls slower among `judged` (judged_steps), worst first."""
    slower = judged[judged["verdict"].eq("slower")]
    return slower.sort_values("ratio", ascending=False).head(limit).reset_index(drop=True)


def unconfirmed(judged: pd.DataFrame) -> pd.DataFrame:
    """The steps among `judged` whose runs moved but a side did not converge, short of compare's stricter rule
    (runner.compare.confirmed): named, never a regression; the largest move first."""
    found = judged[judged["verdict"].eq("unconfirmed")]
    return found.sort_values("ratio", key=lambda r: -np.abs(np.log(r)), kind="stable").reset_index(drop=True)


def status_regressions(cells: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Cells ok in one run of a history and not ok in the next (incorrect, failed, crashed ...), by runner.compare's
    rule (status_changes' `regression`, the one `attnbench compare` exits 1 on): experiment, variant, shape, a, b,
    reason, the runs before and after, and the key; oldest first. Their `kernel` mark is '' (regressions' column):
    compare marks only the cells timed in both."""
    columns = ["experiment", "variant", "shape", "a", "b", "reason", "before", "after", "key", "kernel"]
    order = runs.loc[runs.index.isin(set(cells["run"]))].sort_values("started").index
    found = [changes[changes["regression"]].assign(before=before, after=after, kernel="")
             for before, after in zip(order, order[1:])
             for changes in [compare.status_changes(cells[cells["run"] == before], cells[cells["run"] == after])]]
    return pd.concat(found, ignore_index=True)[columns] if found else pd.DataFrame(columns=columns)


# --- leaderboard -------------------------------------------------------------------------------------------------

def board(cells: pd.DataFrame, standings: list[leaderboard.Standing], legacy: dict[str, str]) -> pd.DataFrame:
    """The leaderboard's rows as a table (legacy variants named so, the winner's % of the MMA peak at its clock where
    known), with the configuration the winner's search chose where it tuned one (blank where it did not)."""
    table = pd.DataFrame(leaderboard.rows(standings, legacy))
    tuned = measured(cells)
    keys = list(zip(tuned["run"], shape_labels(tuned), tuned["variant"]))
    if "tuning_config" not in tuned or tuned["tuning_config"].isna().all():
        return table
    chosen = {key: config for key, config in zip(keys, tuned["tuning_config"]) if isinstance(config, str)}
    return table.assign(config=[chosen.get((s.run_id, s.shape, s.winner.variant), "") for s in standings])


def cudnn_of(cells: pd.DataFrame, manifests: dict[str, Manifest | None] | None) -> list[str | None]:
    """Per cell, the cuDNN release its variant ran (runner.record.cudnn_ran, from its run's manifest); None where
    it ran no cuDNN kernel or no manifest is given."""
    found = manifests or {}
    return [cudnn_ran(variant, backend if isinstance(backend, str) else None, found.get(run))
            for run, variant, backend in zip(cells["run"], cells["variant"], _text(cells, "backend"))]


def standings(cells: pd.DataFrame, manifests: dict[str, Manifest | None] | None = None) -> list[leaderboard.Standing]:
    """runner.leaderboard's standings of rated cells (with_rates: latency by the chosen timer), per run and shape; a
    cell sampled unsettled or not converged (with_rates' `unsettled` and `unconverged` columns), its FP8 (fp8_mark)
    and, with the runs' `manifests`, the cuDNN its variant ran (cudnn_of), marked as runner.leaderboard.time_of marks
    it; a noise not known stays NaN, which no margin is beyond (runner.leaderboard.beyond_noise, compare's rule too)."""
    ok = measured(cells)
    shares = _column(ok, "pct_of_clock_peak")  # the chosen timer's, at each cell's own clock
    fp8 = [leaderboard.fp8_mark(verdict, in_hlo) for verdict, in_hlo in zip(_text(ok, "fp8_verdict"),
                                                                            _text(ok, "fp8_in_hlo"))]
    times = [leaderboard.Time(run, label, variant, ms / 1e3, float(noise), backend,
                              share if share == share else None, bool(rough), mark, cudnn, bool(loose))
             for run, label, variant, ms, noise, backend, share, rough, mark, cudnn, loose in zip(
                 ok["run"], shape_labels(ok), ok["variant"], ok["latency_ms"], ok["noise"],
                 ok["backend"].where(ok["backend"].notna(), None), shares, ok[marks.UNSETTLED_MARK.column], fp8,
                 cudnn_of(ok, manifests), ok[marks.UNCONVERGED_MARK.column])]
    return leaderboard.rank(times)
