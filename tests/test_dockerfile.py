"""Dockerfile: clean under hadolint and checkov, and built the way the k8s manifests expect (no Docker engine here,
so the image itself is not built in CI: these checks read the recipe)."""

from __future__ import annotations

import re
import subprocess

from deploy_tools import assert_clean, checkov, skips, tool
from helpers import REPO

DOCKERFILE = REPO / "Dockerfile"


def stages() -> dict[str, list[str]]:
    """Each build stage's instructions (continuation lines joined), by stage name."""
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


def test_hadolint_is_clean():
    done = subprocess.run([tool("hadolint"), str(DOCKERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_checkov_passes_the_dockerfile():
    reports = checkov("--file", "Dockerfile", "--framework", "dockerfile")
    assert_clean(reports)
    print("\n".join(skips(reports)))


def test_runner_and_dashboard_targets_run_attnbench_as_the_pods_user():
    built = stages()
    assert {"runner", "dashboard"} <= built.keys()
    for target in ("runner", "dashboard"):
        lines = built[target]
        assert 'ENTRYPOINT ["attnbench"]' in lines
        users = [line for line in lines if line.startswith("USER ")]
        assert users[-1] == "USER 10001:10001", "k8s/base runs as uid/gid 10001; the image must agree"
        assert "useradd --uid 10001" in " ".join(lines)


def test_base_images_are_tagged_and_the_gpu_stack_pinned_exactly():
    text = DOCKERFILE.read_text()
    for image in re.findall(r"^FROM\s+(\S+)", text, re.MULTILINE):
        assert re.search(r":[\w.-]+$|@sha256:", image) and not image.endswith(":latest"), image
    for package in ("JAX_VERSION", "TE_VERSION", "CUDNN_VERSION", "FLAX_VERSION"):
        assert re.search(rf"^ARG {package}=\d[\w.]*$", text, re.MULTILINE), f"{package} must be an exact version"
    assert "NVTE_FRAMEWORK=jax" in text and '"transformer-engine[jax]==${TE_VERSION}"' in text
    dashboard = stages()["dashboard"]
    assert "cuda" not in dashboard[0].lower(), "the dashboard needs no CUDA base"
    installs = [line for line in dashboard if line.startswith("RUN pip install")]
    assert len(installs) == 1 and '"/src[dashboard]"' in installs[0], "the dashboard installs the [dashboard] extra"


def test_no_secrets_and_a_minimal_context():
    text = DOCKERFILE.read_text()
    assert not re.search(r"^(ENV|ARG)\s+\S*(KEY|SECRET|TOKEN|PASSWORD)", text, re.MULTILINE | re.IGNORECASE)
    ignore = [line for line in (REPO / ".dockerignore").read_text().splitlines() if line and line[0] != "#"]
    assert ignore[0] == "*", ".dockerignore must start from nothing and name what goes in"
    copied = set(re.findall(r"^COPY (?!--from)(.+) /src/", text, re.MULTILINE))
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for sources in copied:
        assert set(sources.split()) <= allowed, f"COPY {sources}: not in .dockerignore's allow list"
