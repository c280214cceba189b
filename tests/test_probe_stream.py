"""scripts/probe_stream.py on a CPU: the plan's first measuring step says in one line, at once, that it needs a GPU."""

from __future__ import annotations

import subprocess
import sys
import time

from helpers import REPO, environment


def test_without_a_gpu_it_says_so_in_one_line_within_seconds_and_writes_nothing(tmp_path):
    out = tmp_path / "probe.json"
    start = time.monotonic()
    done = subprocess.run([sys.executable, "scripts/probe_stream.py", str(out), "4", "8192"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, env=environment(JAX_PLATFORMS="cpu"))
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", "probe_stream: measuring needs an NVIDIA GPU; JAX's device here is cpu\n")
    assert time.monotonic() - start < 30 and not out.exists()  # before the probe's 6 s idle and its streams
