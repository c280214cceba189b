"""The deploy checks' tools: the binaries scripts/install-test-tools.sh puts in .venv-tools, and checkov's verdicts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from helpers import REPO

TOOLS = REPO / ".venv-tools" / "bin"
DOCKERFILE = REPO / "Dockerfile"


def tool(name: str) -> str:
    """The path of a PyPI-installed tool; a clear failure when the setup has not run (they install anywhere)."""
    path = TOOLS / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make test-tools` (scripts/install-test-tools.sh) first")
    return str(path)


def kustomize(path: Path) -> list[dict]:
    """The objects `kubectl kustomize PATH` renders."""
    done = subprocess.run([tool("kubectl"), "kustomize", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def terraform() -> str:
    """terraform on PATH; skipped where there is none (no registry this project reaches ships it)."""
    path = shutil.which("terraform")
    if path is None:
        pytest.skip("terraform is not on PATH and no package registry reachable here ships it; "
                    "the HCL parse test (python-hcl2) still runs")
    return path


def checkov(*args: str) -> list[dict]:
    """Run checkov offline (no platform download, no guideline lookup) and return its JSON reports."""
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "PATH": f"{TOOLS}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([tool("checkov"), *args, "--skip-download", "--output", "json"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.stdout.strip(), f"checkov printed nothing (exit {done.returncode}):\n{done.stderr[-3000:]}"
    reports = json.loads(done.stdout)
    return reports if isinstance(reports, list) else [reports]


def skips(reports: list[dict]) -> list[str]:
    """'CHECK resource: reason' for each deliberate skip, for the report."""
    return [f"{c['check_id']} {c['resource']}: {c['check_result'].get('suppress_comment', '')}"
            for r in reports for c in r.get("results", {}).get("skipped_checks", [])]


def assert_clean(reports: list[dict]) -> None:
    """Zero failed checks, and every skip carries its reason in place."""
    failed = [f"{c['check_id']} {c['resource']} ({c['file_path']}:{c['file_line_range']})"
              for r in reports for c in r.get("results", {}).get("failed_checks", [])]
    assert not failed, "checkov failed checks:\n" + "\n".join(failed)
    unexplained = [f"{c['check_id']} {c['resource']}" for r in reports
                   for c in r.get("results", {}).get("skipped_checks", [])
                   if not c["check_result"].get("suppress_comment", "").strip()]
    assert not unexplained, f"skips without a reason: {unexplained}"
    assert sum(r["summary"]["passed"] for r in reports) > 0, "checkov passed nothing: did it scan anything?"


def stages() -> dict[str, list[str]]:
    """Each build stage of the Dockerfile: its instructions (continuation lines joined), by stage name."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if match := re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, re.IGNORECASE):
            current = match.group(1)
            found[current] = [line]
        elif line and not line.startswith("#") and current:
            found[current].append(line)
    return found
