"""Each shard of a stored run: its cells, the seconds in them, and its manifest's start to end; then the largest/
smallest of each. python docs/evidence/shard-balance-20261206/shard_times.py RUN_DIR"""

import datetime as dt
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from runner.store import read_run  # noqa: E402


def seconds(start: str, end: str | None) -> float:
    return (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds() if end else float("nan")


run = read_run(Path(sys.argv[1]))
rows = [(p.shard, len(p.cells), sum(c.duration_s for c in p.cells), seconds(p.manifest.started_at, p.manifest.ended_at))
        for p in run.parts]
for shard, cells, inside, span in rows:
    print(f"{shard}: {cells} cells, {inside:.1f} s in cells, {span:.1f} s start to end")
for name, column in (("in cells", 2), ("start to end", 3)):
    values = [row[column] for row in rows]
    print(f"largest/smallest {name}: {max(values) / min(values):.2f}")
