"""The tables of docs/benchmarks.md, read from the committed H200 runs (so every figure there can be re-derived).

    python scripts/evidence.py power    STEADY_RUN BURST_RUN      # steady against burst, with the clocks behind
    python scripts/evidence.py kernels  RUN                       # per shape: each variant, fastest first
    python scripts/evidence.py decode   RUN                       # GB/s and % of the measured copy bandwidth
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner.leaderboard import contested, leaderboard  # noqa: E402
from runner.report import leaderboard_markdown  # noqa: E402
from runner.record import CellRecord  # noqa: E402
from runner.store import read_run  # noqa: E402


def _clock(c: CellRecord) -> str:
    t = c.telemetry
    return f"{t.sm_clock_mhz.min:.0f}–{t.sm_clock_mhz.max:.0f} (median {t.sm_clock_mhz.median:.0f})" if t else "-"


def _per_ghz(c: CellRecord) -> float | None:
    return c.tflops / (c.telemetry.sm_clock_mhz.median / 1000) if c.tflops and c.telemetry else None


def power(steady_dir: Path, burst_dir: Path) -> str:
    """Forward cells of both runs by variant and T: TFLOP/s, SM clock, mean power, settling, TFLOP/s per GHz."""
    burst = {c.key: c for c in read_run(burst_dir).cells}
    head = ["variant", "T", "steady TFLOP/s", "steady SM MHz", "steady W", "settled (s)", "burst TFLOP/s",
            "burst SM MHz", "steady vs burst", "TFLOP/s per GHz steady / burst"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in read_run(steady_dir).cells:
        b = burst.get(s.key)
        if s.status != "ok" or b is None or b.status != "ok" or s.params.pass_ != "fwd":
            continue
        settled = f"{'yes' if s.power.settled else 'no'} ({s.power.wait_s:.1f})"
        watts = f"{s.telemetry.power_w.mean:.0f}" if s.telemetry.power_w else "-"
        lines.append("| " + " | ".join([
            s.variant, f"{s.params.seq_len // 1024}k", f"{s.tflops:.0f}", _clock(s), watts, settled, f"{b.tflops:.0f}",
            _clock(b), f"{100 * (s.tflops / b.tflops - 1):+.1f} %", f"{_per_ghz(s):.0f} / {_per_ghz(b):.0f}"]) + " |")
    return "\n".join(lines)


def kernels(run_dir: Path) -> str:
    """Per shape: the leaderboard (fastest correct variant, margin over the next and over auto), then every
    tuned variant's winning configuration."""
    run = read_run(run_dir)
    cells = run.cells
    lines = [leaderboard_markdown(contested(leaderboard(cells, manifest=run.manifest))), "",
             "| experiment | shape | variant | TFLOP/s | configuration (of candidates that ran) |",
             "|---|---|---|---|---|"]
    for c in cells:
        if c.tuning and c.status == "ok":
            ran = sum(1 for candidate in c.tuning.candidates if candidate.status == "ok")
            config = ", ".join(f"{k}={v}" for k, v in c.tuning.config.items())
            lines.append(f"| {c.experiment} | {c.params.label()} | {c.variant} | {c.tflops:.0f} | {config} "
                         f"({ran} of {len(c.tuning.candidates)}) |")
    return "\n".join(lines)


def decode(run_dir: Path) -> str:
    """Decode cells: GB/s of the KV cache read and % of the measured copy bandwidth, by experiment and shape."""
    run = read_run(run_dir)
    ceiling = run.manifest.machine.memory_bandwidth_gbps
    head = ["experiment", "B", "S", "K", "dtype", "variant", "ms", "GB/s", "% of measured bandwidth", "KV cache MiB"]
    lines = [f"measured copy bandwidth: {ceiling:.0f} GB/s", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for c in run.cells:
        p = c.params
        if c.status != "ok":
            lines.append(f"| {c.experiment} | {p.batch} | {p.kv_seq_len} | {p.kv_heads} | {p.dtype} | {c.variant} | "
                         f"{c.status}: {c.reason[:80]} | | | |")
            continue
        lines.append("| " + " | ".join([c.experiment, str(p.batch), str(p.kv_seq_len), str(p.kv_heads), p.dtype,
                                        c.variant, f"{c.median_s * 1e3:.3f}", f"{c.gbps:.0f}",
                                        f"{c.pct_of_bandwidth:.0f} %", f"{c.kv_cache_bytes / 2**20:.0f}"]) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", choices=["power", "kernels", "decode"])
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    print({"power": power, "kernels": kernels, "decode": decode}[args.table](*args.runs))


if __name__ == "__main__":
    main()
