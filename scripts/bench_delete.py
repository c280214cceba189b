"""A benchmark of consolidation's deletes (not a timed test): `LocalStore.delete` on each of N empty per-cell objects
of one part folder, then whether the emptied folder is gone.

    python scripts/bench_delete.py [N]        (default 100,000)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runner.store import LocalStore  # noqa: E402  (the checkout this script is in, installed or not)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", nargs="?", type=int, default=100_000, help="objects to delete")
    n = parser.parse_args().n
    root = Path(tempfile.mkdtemp(prefix="bench-delete-"))
    part = root / "run" / "cells.part"
    part.mkdir(parents=True)
    for i in range(n):
        (part / f"{i:06d}.json").touch()
    store = LocalStore(root)
    start = time.perf_counter()
    for i in range(n):
        store.delete(f"run/cells.part/{i:06d}.json")
    seconds = time.perf_counter() - start
    print(f"{n} deletes: {seconds:.2f} s, {n / seconds:.0f}/s, folder gone: {not part.exists()}")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
