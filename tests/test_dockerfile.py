"""Dockerfile: clean under hadolint and checkov, and built the way the k8s manifests expect (no Docker engine here,
so the image itself is not built in CI: these checks read the recipe)."""

from __future__ import annotations

import re
import subprocess
import tomllib

from deploy_tools import DOCKERFILE, assert_clean, checkov, skips, stages, tool
from helpers import REPO


def test_hadolint_is_clean():
    done = subprocess.run([tool("hadolint"), str(DOCKERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_checkov_passes_the_dockerfile():
    reports = checkov("--file", "Dockerfile", "--framework", "dockerfile")
    assert_clean(reports)
    print("\n".join(skips(reports)))


def test_runner_and_dashboard_targets_run_attnbench_under_tini_as_the_pods_user():
    built = stages()
    assert {"runner", "dashboard"} <= built.keys()
    for target in ("runner", "dashboard"):
        lines = built[target]
        assert 'ENTRYPOINT ["tini", "--", "attnbench"]' in lines, target  # tests/test_termination.py says why
        assert any(re.search(r"apt-get install [^&]*\btini\b", line) for line in lines), f"{target}: no tini installed"
        users = [line for line in lines if line.startswith("USER ")]
        assert users[-1] == "USER 10001:10001", "k8s/base runs as uid/gid 10001; the image must agree"
        assert "useradd --uid 10001" in " ".join(lines)


def test_base_images_are_tagged_and_the_dashboard_has_no_cuda():
    text = DOCKERFILE.read_text()
    for image in re.findall(r"^FROM\s+(\S+)", text, re.MULTILINE):
        assert re.search(r":[\w.-]+$|@sha256:", image) and not image.endswith(":latest"), image
    dashboard = stages()["dashboard"]
    assert "cuda" not in dashboard[0].lower(), "the dashboard needs no CUDA base"
    installs = [line for line in dashboard if line.startswith("RUN pip install")]
    assert len(installs) == 1 and '"/src[dashboard]"' in installs[0], "the dashboard installs the [dashboard] extra"


def test_no_secrets_and_a_minimal_context():
    text = DOCKERFILE.read_text()
    assert not re.search(r"^(ENV|ARG)\s+\S*(KEY|SECRET|TOKEN|PASSWORD)", text, re.MULTILINE | re.IGNORECASE)
    ignore = [line for line in (REPO / ".dockerignore").read_text().splitlines() if line and line[0] != "#"]
    assert ignore[0] == "*", ".dockerignore must start from nothing and name what goes in"
    copied = {source for sources in re.findall(r"^COPY (?!--from)(.+) /src/", text, re.MULTILINE)
              for source in sources.split()}
    mounted = set(re.findall(r"--mount=type=bind,source=([^,\s]+),target", text))  # from the context, not a stage
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert mounted, "the runner stage mounts docker/check_runner_env.py from the context"
    assert copied | mounted <= allowed, f"not in .dockerignore's allow list: {(copied | mounted) - allowed}"


def test_the_dashboard_installs_no_jax():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    requirements = [*project["dependencies"], *extras["dashboard"]]
    names = {re.match(r"[A-Za-z0-9._-]+", r).group(0).lower() for r in requirements}
    assert not names & {"jax", "jaxlib", "flax", "attnbench"}, "the dashboard image must not pull JAX"


def test_the_dashboard_installs_pinned_packages_only():
    """Every package of the dashboard image pinned (docker/lock_dashboard.py), as the runner's are."""
    dashboard = stages()["dashboard"]
    installs = [line for line in dashboard if line.startswith("RUN pip install")]
    assert "-c /src/docker/dashboard-requirements.txt" in installs[0] and "pip check" in installs[0]
    pins = {}
    for line in (REPO / "docker" / "dashboard-requirements.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert re.fullmatch(r"[\w.+-]+", version), f"not an exact pin: {line}"
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    needed = {re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", r).group(0)).lower()
              for r in [*project["dependencies"], *project["optional-dependencies"]["dashboard"]]}
    assert needed - pins.keys() == set(), "rerun docker/lock_dashboard.py: pyproject asks for more"


# The commit as runner/machine.py names a checkout's: `-dirty` after it where tracked files differ from it.
SHA = 'SHA="$(git rev-parse HEAD)$(git diff --quiet HEAD || echo -dirty)"'


def test_the_runner_image_names_the_commit_it_was_built_from():
    """runner/machine.py reads ATTNBENCH_GIT_SHA, or git, which the image lacks: the build arg is the only source of a
    record's git_sha, set after the slow steps, so a new commit rebuilds none of them; every runbook line passes it."""
    runner = stages()["runner"]
    assert "ARG ATTNBENCH_GIT_SHA" in runner, "the runner stage takes the commit as a build arg"
    arg = runner.index("ARG ATTNBENCH_GIT_SHA")
    assert "ENV ATTNBENCH_GIT_SHA=${ATTNBENCH_GIT_SHA}" in runner[arg:]
    slow = max(i for i, line in enumerate(runner) if line.startswith(("RUN", "COPY")))
    assert arg > slow, "after every RUN and COPY: a new commit must rebuild none of them"
    for runbook in (REPO / "docs" / "gke.md", REPO / "terraform" / "outputs.tf"):
        lines = [line.strip() for line in runbook.read_text().splitlines()]
        builds = [line for line in lines if "buildx build" in line and "--target runner" in line]
        assert len(builds) == 1 and '--build-arg ATTNBENCH_GIT_SHA="$SHA"' in builds[0], runbook
        assert lines.index(SHA) < lines.index(builds[0]), f"{runbook}: SHA is set before the build"


def test_a_runner_built_without_the_commit_records_none(monkeypatch, tmp_path):
    """The image has no git: built without the build arg, ENV gives an empty ATTNBENCH_GIT_SHA and git_sha is null,
    never an empty string or a guess (docs/gke.md, step 2); with it, the commit as given."""
    from runner.machine import git_sha

    monkeypatch.setenv("PATH", str(tmp_path))  # no git on it, as in the image
    monkeypatch.setenv("ATTNBENCH_GIT_SHA", "")
    assert git_sha() is None
    monkeypatch.setenv("ATTNBENCH_GIT_SHA", "0123abc-dirty")
    assert git_sha() == "0123abc-dirty"


def test_both_images_hold_the_published_figures_where_runner_published_looks():
    """runner/published.py reads ATTNBENCH_REFERENCE, else the checkout's docs/reference, which no image has: the
    runner's compare --report (the nightly's report) and the dashboard draw the published tables beside the runs."""
    from runner.published import REFERENCE_ENV

    for target, lines in stages().items():
        if target == "build":
            continue
        copies = [line.split()[1:] for line in lines if line.startswith("COPY docs/reference ")]
        env = " ".join(line for line in lines if line.startswith("ENV "))
        assert len(copies) == 1, f"{target}: COPY docs/reference into the image"
        assert f"{REFERENCE_ENV}={copies[0][1]}" in env.split(), f"{target}: {REFERENCE_ENV} names where it is"
