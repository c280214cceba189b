"""Nothing heavy is imported to validate a spec, print its schema or ask for help: each command runs in a fresh
process (as a user's does) and reports which GPU libraries it loaded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import REPO

HEAVY = ("jax", "jaxlib", "flax", "transformer_engine", "pynvml")
PROBE = """
import contextlib, io, json, sys
from runner.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as stop:  # --help
        code = stop.code
print(json.dumps({"code": code, "loaded": sorted({m.split('.')[0] for m in sys.modules} & set(%r))}))
""" % (HEAVY,)


@pytest.mark.parametrize("argv", [["validate", "specs/lab5.yaml"], ["validate", "specs/kernels.yaml"], ["schema"],
                                  ["list", "--help"], ["run", "--help"], ["validate", "no-such-spec.yaml"]])
def test_quick_commands_load_no_gpu_library(argv):
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=REPO, timeout=60)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["loaded"] == [], done.stderr
    assert result["code"] == (2 if "no-such" in argv[-1] else 0)
