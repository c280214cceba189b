"""`attnbench compare`: the run before B in a store, what must hold before two runs are compared, and the report
as a terminal table, markdown (a PR or ticket comment) or json. The comparison itself is runner/compare.py's, the
one the dashboard's Compare tab draws."""

from __future__ import annotations

import json

import pandas as pd
from rich.console import Console
from rich.markup import escape

from runner import compare
from runner.record import Manifest
from runner.report import markdown, rich_table
from runner.results import Run
from runner.store import Store

SHOWN = ["key", "experiment", "variant", "shape"]


# --- which runs ----------------------------------------------------------------------------------------------------

def previous(store: Store, b: Run) -> str | None:
    """The folder in `store` of the run before B: its spec hash's on its GPU, power policy and timer, started last
    before it (the dashboard's rule, runner.compare.previous_run)."""
    found = {folder: listed.manifest for folder, listed in store.listing().items()}
    found["\0B"] = b.manifest  # B itself, wherever it was read from; a key no folder has
    return compare.previous_run(found, "\0B")


def problems(a: Run, b: Run, allow_different_gpu: bool, allow_policy_change: bool = False) -> list[str]:
    """Why A and B cannot be compared: a run unread, no manifest, different GPUs or power policies (unless
    allowed)."""
    found = []
    for which, run in (("A", a), ("B", b)):
        if run.manifest is None:
            found += [f"{which}: {p}" for p in run.problems[:3]] or [f"{which}: {run.dir}: no manifest"]
    if found:
        return found
    gpus = compare.gpu_name(a.manifest), compare.gpu_name(b.manifest)
    if gpus[0] != gpus[1] and not allow_different_gpu:
        found.append(f"A ran on {gpus[0]}, B on {gpus[1]}: times of different GPUs are no regression; give "
                     "--allow-different-gpu to compare them anyway")
    policies = compare.power_policy(a.manifest), compare.power_policy(b.manifest)
    if policies[0] != policies[1] and not allow_policy_change:
        found.append(f"A ran under power policy {policies[0] or 'none (before the choice)'}, B under "
                     f"{policies[1] or 'none (before the choice)'}: their times are not like with like; give "
                     "--allow-policy-change to compare them anyway")
    return found


def no_common_cell(a: Run, b: Run) -> str:
    return (f"A ({a.run_id}, {len(a.cells)} cells) and B ({b.run_id}, {len(b.cells)} cells) share no cell (the same "
            "experiment, variant and shape): are they runs of the same spec?")


# --- the report ----------------------------------------------------------------------------------------------------

def _ms(value: float) -> str:
    return f"{value:.4g}"


def _times(table: pd.DataFrame) -> pd.DataFrame:
    """Timed cells as text: A and B in ms, B / A, each run's noise."""
    return pd.DataFrame({
        **{c: table[c] for c in SHOWN}, "A ms": table["a_ms"].map(_ms), "B ms": table["b_ms"].map(_ms),
        "B / A": table["ratio"].map("{:.3f}×".format), "noise A": table["noise_a"].map("{:.1%}".format),
        "noise B": table["noise_b"].map("{:.1%}".format)}, columns=[*SHOWN, "A ms", "B ms", "B / A", "noise A",
                                                                  "noise B"])


def sections(found: compare.Comparison) -> list[tuple[str, pd.DataFrame]]:
    """What differs before the times (environment, status, cells in one run only), then the regressions, the cells
    that got faster and the geometric means; the cells within noise are only counted."""
    summary = found.summary.assign(**{"geomean B/A": found.summary["geomean B/A"].map("{:.3f}×".format)})
    changes = found.changes.assign(regression=found.changes["regression"].map({True: "yes", False: "no"}))
    return [
        ("Environment differences", found.environment.rename(columns={"a": "A", "b": "B"})),
        ("Status changes (A → B)", changes.rename(columns={"a": "A", "b": "B"})),
        ("Cells only in A", found.only_a),
        ("Cells only in B", found.only_b),
        ("Slower (regressions)", _times(found.slower)),
        ("Faster", _times(found.cells[found.cells["verdict"] == "faster"])),
        ("Geometric mean of B / A per experiment and variant", summary),
    ]


def _describe(m: Manifest) -> str:
    return f"{m.run_id} ({m.name} · {compare.gpu_name(m)} · started {m.started_at})"


def heading(found: compare.Comparison) -> list[str]:
    return [f"A: {_describe(found.a)}", f"B: {_describe(found.b)}",
            f"{found.timer or 'no shared'} timer; slower or faster: B / A beyond {100 * found.threshold:g} % and both "
            "runs' noise (IQR)"]


def verdict(found: compare.Comparison) -> str:
    """One line: the regressions, or that there is none, over the cells both runs hold; then the material
    differences of their environments, if any."""
    counts = found.cells["verdict"].value_counts()
    tally = (f"{found.common} cells in both (A {found.common + len(found.only_a)}, B {found.common + len(found.only_b)})"
             f", {len(found.cells)} timed in both: {counts.get('slower', 0)} slower, {counts.get('faster', 0)} faster, "
             f"{counts.get('within noise', 0)} within noise; geomean B / A over those "
             f"{compare.geomean(found.cells['ratio']):.3f}×")
    line = f"no regression: {tally}" if not found.regressed else (
        f"REGRESSION: {len(found.slower)} cell(s) slower, {len(found.no_longer_ok)} ok in A and not in B ({tally})")
    return line + (f" · differs: {compare.said(found.material)}" if len(found.material) else "")


def print_table(found: compare.Comparison, console: Console) -> None:
    for line in heading(found):
        console.print(escape(line))
    for title, table in sections(found):
        if len(table):
            rows = [list(map(escape, row)) for row in table.astype(str).itertuples(index=False)]
            console.print(rich_table(title, list(map(str, table.columns)), rows, right=("A ms", "B ms", "B / A")))
    console.print(escape(verdict(found)))


def markdown_text(found: compare.Comparison) -> str:
    """The report as GitHub markdown: the heading, a table per section that has rows, the verdict in bold."""
    parts = ["### attnbench compare", "\n".join(f"- {line}" for line in heading(found))]
    parts += [f"#### {title}\n\n{markdown(table).rstrip()}" for title, table in sections(found) if len(table)]
    return "\n\n".join(parts + [f"**{verdict(found)}**"]) + "\n"


def _records(table: pd.DataFrame) -> list[dict]:
    return json.loads(table.to_json(orient="records"))  # NaN as null


def _run(m: Manifest) -> dict:
    return {"run_id": m.run_id, "spec": m.name, "gpu": compare.gpu_name(m), "started_at": m.started_at}


def json_text(found: compare.Comparison) -> str:
    """Every section and every cell timed in both (its verdict, key and shape), for a pipeline to read."""
    document = {
        "a": _run(found.a), "b": _run(found.b), "timer": found.timer, "threshold": found.threshold,
        "regressed": found.regressed, "verdict": verdict(found),
        "regressions": [*found.slower["key"], *found.no_longer_ok["key"]],
        "material_differences": _records(found.material), "environment": _records(found.environment), "status_changes": _records(found.changes),
        "only_in_a": _records(found.only_a), "only_in_b": _records(found.only_b),
        "cells": _records(found.cells.drop(columns=compare.SHAPE)), "summary": _records(found.summary),
    }
    return json.dumps(document, indent=2) + "\n"
