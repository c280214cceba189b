"""The runner's steady and burst numbers against an independent direct protocol (tests/direct_protocol.py), on a GPU.

    python scripts/steady_crosscheck.py OUT.json [--rows VARIANT:PASS:T:POLICY,...] [--carried]

Default rows: cudnn and cudnn_fp8 forward at T = 4k, 8k, 16k, 32k under both policies, and cudnn forward+backward
at 8k and 32k; burst rows first, while the GPU is still cool. Writes a list of rows (runner_tflops, direct_tflops,
their ratio, within_3pct, the record's power state) to OUT.json; docs/evidence/steady-crosscheck-<date>.json.
Run it with PYTHONPATH at an older checkout to see how that runner's protocol fares. --carried: each steady row's
cell is measured twice in a row by one Measurer and the second is compared, its stream continuing the first's load
as cells do in a run (its record's power.carried_s and note say whether it did). Rows OUT.json already holds (a call
cut by its deadline, carried back) are kept and not measured again. A row whose cell a run would skip on this GPU (its
plan: the variant's rules, the memory rule) is said and left out, compiled by neither side.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

DEFAULT = [(v, "fwd", t, policy) for policy in ("burst", "steady") for v in ("cudnn", "cudnn_fp8")
           for t in (4096, 8192, 16384, 32768)] + [("cudnn", "fwd_bwd", t, policy) for policy in ("burst", "steady")
                                                    for t in (8192, 32768)]


def rows(text: str | None) -> list[tuple]:
    if not text:
        return sorted(DEFAULT, key=lambda r: r[3] != "burst")
    return [(v, p, int(t), policy) for v, p, t, policy in (row.split(":") for row in text.split(","))]


def measured(path: Path) -> list[dict]:
    """The rows an earlier call wrote to OUT.json."""
    return json.loads(path.read_text()) if path.exists() else []


def to_measure(planned: list[tuple], done: list[dict]) -> list[tuple]:
    """The planned rows that `done` holds no row of."""
    held = {(r["variant"], r["pass"], r["seq_len"], r["policy"]) for r in done}
    return [row for row in planned if row not in held]


def gpu_missing() -> str | None:
    """Why this process cannot measure a row (no NVIDIA GPU under JAX), or None."""
    import jax

    platform = jax.devices()[0].platform
    return None if platform == "gpu" else f"JAX's device here is {platform}"


def measure(pending: list[tuple], done: list[dict], out: Path, carried: bool) -> None:
    """Measure each pending row, appended to `done` and OUT.json written anew after each (what a deadline cuts is
    kept)."""
    from crosscheck import Declined, crosscheck, idle

    idle_state = idle()
    start = time.perf_counter()
    for variant, pass_, seq_len, policy in pending:
        after_itself = carried and policy == "steady"
        try:
            row = crosscheck(variant, policy, idle_state, after_itself, seq_len=seq_len, **{"pass": pass_})
        except Declined as declined:  # the run would skip it here: no row
            print(f"skipped, as a run would skip it here: {declined}", flush=True)
            continue
        row["within_3pct"] = abs(row["ratio"] - 1) < 0.03
        done.append(row)
        print(f"[{time.perf_counter() - start:6.1f}s] {variant} {pass_} T={seq_len} {policy}: runner "
              f"{row['runner_tflops']:.0f} direct {row['direct_tflops']:.0f} TFLOP/s ({row['ratio']:.3f}) "
              f"{row['power'].get('rule') if row['power'] else ''} load {row['power'].get('load_s') if row['power'] else ''}"
              f"{' carried ' + str(row['power'].get('carried_s')) if after_itself and row['power'] else ''}",
              flush=True)
        written(out, done)


def written(out: Path, rows: list[dict]) -> None:
    """OUT.json holding `rows`, written beside it and renamed over it, as the local store writes a record: a deadline's
    TERM during the write leaves the last whole file, where a torn one would end the next call's reading of it."""
    from runner.store import LocalStore

    LocalStore(out.parent).put(out.name, json.dumps(rows, indent=1).encode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--rows")
    parser.add_argument("--carried", action="store_true", help="steady rows measured after the same cell")
    args = parser.parse_args()
    done = measured(args.out)
    if pending := to_measure(rows(args.rows), done):
        if missing := gpu_missing():
            sys.exit(f"steady_crosscheck: measuring needs an NVIDIA GPU (rows to measure: {len(pending)}); {missing}")
        measure(pending, done, args.out, args.carried)
    bad = [r for r in done if not r["within_3pct"]]
    print(f"{len(done) - len(bad)} of {len(done)} rows within 3 %")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
