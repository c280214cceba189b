"""The runner image's Python environment imports what a pod imports, checked here without Docker or a GPU.

scripts/install-test-tools.sh builds .venv-tools/runner-image from docker/runner-requirements.txt, the pin list the
Dockerfile installs; docker/check_runner_env.py, the same check the runner stage runs, then imports TransformerEngine's
library lookups and every runner.variants module in it, with the runner stage's own ENV and a stand-in for the
driver's libcuda. TE's JAX extension is the one import left to the image build: PyPI ships it as source only, and its
CUDA compile (tens of minutes on 8 cores for the image) does not fit a test run on 2.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from deploy_tools import stages
from helpers import REPO

RUNNER_VENV = REPO / ".venv-tools" / "runner-image"
PINS = REPO / "docker" / "runner-requirements.txt"
CHECK = REPO / "docker" / "check_runner_env.py"
IMAGE_VENV = "/opt/venv"
IMAGE_SITE = f"{IMAGE_VENV}/lib/python3.12/site-packages"  # the runner stage's python3.12
DRIVER_API = re.compile(r"^cu[A-Z]\w*$")  # CUDA driver entry points (cuInit, cuModuleLoadData); cuda* is the runtime


def pins() -> dict[str, str]:
    """docker/runner-requirements.txt as normalised name -> version."""
    found = {}
    for line in PINS.read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            found[normalise(name)] = version
    return found


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return normalise(re.match(r"[A-Za-z0-9._-]+", requirement).group(0))


def runner_python() -> Path:
    """The venv's python, installed from today's pin list; a clear failure when the setup has not run."""
    stamp = RUNNER_VENV / ".installed"
    if not stamp.exists() or stamp.read_text().strip() != hashlib.sha256(PINS.read_bytes()).hexdigest():
        pytest.fail(f"{RUNNER_VENV} is missing or older than {PINS.name}: run `make test-tools`")
    return RUNNER_VENV / "bin" / "python"


def site_packages(python: Path) -> str:
    done = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def runner_stage_env(site: str) -> dict[str, str]:
    """The runner stage's ENV, expanded in order as Docker does, with the image's venv moved to this one's."""
    env: dict[str, str] = {}
    for line in stages()["runner"]:
        if line.startswith("ENV "):
            for key, value in re.findall(r"(\w+)=(\S*)", line[4:]):
                value = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)  # the base's: none here
                env[key] = value.replace(IMAGE_SITE, site).replace(IMAGE_VENV, str(RUNNER_VENV))
    return env


def driver_stub(site: str, folder: Path) -> Path:
    """A libcuda.so.1 that exports every driver entry point the venv's libraries import, each returning an error:
    it satisfies the dynamic linker as the GKE node's driver does, and no CUDA call can succeed through it."""
    tools = {name: shutil.which(name) for name in ("gcc", "nm")}
    if None in tools.values():
        pytest.fail(f"building the libcuda stand-in needs gcc and nm (binutils): missing {tools}")
    libraries = [str(p) for p in Path(site).rglob("*.so*") if p.is_file()]
    listed = subprocess.run([tools["nm"], "-D", "--undefined-only", *libraries], capture_output=True, text=True)
    symbols = sorted({fields[-1] for fields in map(str.split, listed.stdout.splitlines())
                      if fields and DRIVER_API.match(fields[-1])})
    assert symbols, "no library in the venv imports a CUDA driver symbol: is it the CUDA environment?"
    source = folder / "libcuda.c"
    source.write_text("".join(f"int {name}(void) {{ return 999; }}\n" for name in symbols))
    stub = folder / "libcuda.so.1"
    subprocess.run([tools["gcc"], "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", stub, source], check=True)
    return folder


def test_the_pin_list_installs_every_runtime_requirement_of_attnbench():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    needed = {requirement_name(r) for r in [*project["dependencies"], *extras["cuda12"], *extras["gcs"]]}
    needed |= {requirement_name(r) for r in extras["te"]}  # the TE metapackage; its JAX extension is compiled
    assert needed - pins().keys() == set(), "docker/lock_runner.py must be rerun: pyproject asks for more"


def test_the_pin_list_holds_what_lock_runner_chose():
    spec = importlib.util.spec_from_file_location("lock_runner", REPO / "docker" / "lock_runner.py")
    lock_runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lock_runner)
    locked = pins()
    for choice in lock_runner.CHOSEN:
        name, version = choice.split("==")
        assert locked.get(requirement_name(name)) == version, f"{choice}: rerun docker/lock_runner.py"


def test_runner_environment_imports_te_libraries_and_every_variant(tmp_path):
    python = runner_python()
    site = site_packages(python)
    env = runner_stage_env(site)
    stub = driver_stub(site, tmp_path)
    env.update(PATH=f"{RUNNER_VENV / 'bin'}:/usr/bin:/bin", HOME=str(tmp_path), PYTHONPATH=str(REPO),
               LD_LIBRARY_PATH=f"{stub}:{env.get('LD_LIBRARY_PATH', '')}")
    done = subprocess.run([python, CHECK], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "ok runner.variants" in done.stdout


def test_the_dockerfile_installs_the_pin_list_and_runs_the_same_check():
    build, runner = stages()["build"], stages()["runner"]
    installs = [line for line in build if "pip install" in line and "runner-requirements.txt" in line]
    assert any("-r /src/docker/runner-requirements.txt" in line for line in installs), "the venv is the pin list"
    assert any("-c /src/docker/runner-requirements.txt" in line and "transformer-engine[jax]" in line
               for line in installs), "TE's JAX extension builds at the pinned transformer-engine version"
    checks = [line for line in runner if "check_runner_env.py" in line]
    assert len(checks) == 1 and "--te-jax" in checks[0], "the runner stage imports TE's JAX extension too"
    assert not re.search(r"\b(jax|flax|transformer-engine\S*|nvidia-\S+)==", " ".join(build)), \
        "the GPU stack is pinned in docker/runner-requirements.txt only"
