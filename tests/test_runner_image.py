"""The runner image's Python environment imports what a pod imports, checked here without Docker or a GPU.

scripts/install-test-tools.sh builds .venv-tools/runner-image from docker/runner-requirements.txt, the pin list the
Dockerfile installs; docker/check_runner_env.py, the same check the runner stage runs, then imports TransformerEngine's
library lookups and every runner.variants module in it, with the runner stage's own ENV and a stand-in for the
driver's libcuda. TE's JAX extension, which PyPI ships as source only, is compiled here as the Dockerfile's build stage
compiles it (scripts/build_te_jax.py: its pins, its flags, the headers the image would use; 19 C++ files, no CUDA
kernels, cached in .venv-tools/te-jax on its inputs) and imported through the same check with `--te-jax`.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from deploy_tools import stages
from helpers import REPO, script

RUNNER_VENV = REPO / ".venv-tools" / "runner-image"
PINS = REPO / "docker" / "runner-requirements.txt"
CHECK = REPO / "docker" / "check_runner_env.py"
BUILD_TE_JAX = REPO / "scripts" / "build_te_jax.py"
TE_JAX_BUILD_S = 3600  # 5 min 17 s on 2 idle cores, 17 min on 2 shared ones
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
    needed = {requirement_name(r) for r in [*project["dependencies"], *extras["cuda12"], *extras["gcs"],
                                            *extras["report"]]}
    needed |= {requirement_name(r) for r in extras["te"]}  # the TE metapackage; its JAX extension is compiled
    assert needed - pins().keys() == set(), "docker/lock_runner.py must be rerun: pyproject asks for more"


def test_the_pin_list_holds_what_lock_runner_chose():
    lock_runner = script("docker/lock_runner.py")
    locked = pins()
    for choice in lock_runner.CHOSEN:
        name, version = choice.split("==")
        assert locked.get(requirement_name(name)) == version, f"{choice}: rerun docker/lock_runner.py"


def check_runner_env(tmp_path: Path, *args: str, extra_path: Path | None = None) -> subprocess.CompletedProcess:
    """docker/check_runner_env.py ARGS in the runner environment, with the runner stage's ENV and a libcuda stand-in;
    `extra_path` (a built TE JAX extension) goes on PYTHONPATH before the checkout."""
    python = runner_python()
    site = site_packages(python)
    env = runner_stage_env(site)
    stub = driver_stub(site, tmp_path)
    path = f"{extra_path}:{REPO}" if extra_path else str(REPO)
    env.update(PATH=f"{RUNNER_VENV / 'bin'}:/usr/bin:/bin", HOME=str(tmp_path), PYTHONPATH=path,
               LD_LIBRARY_PATH=f"{stub}:{env.get('LD_LIBRARY_PATH', '')}")
    done = subprocess.run([python, CHECK, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    print(done.stdout)
    return done


def test_runner_environment_imports_te_libraries_and_every_variant(tmp_path):
    done = check_runner_env(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "ok runner.variants" in done.stdout


def build_te_jax(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, BUILD_TE_JAX, *args], capture_output=True, text=True,
                          timeout=TE_JAX_BUILD_S)


def test_te_jax_extension_compiles_as_the_image_builds_it_and_imports(tmp_path):
    """The build stage's TE line, outside Docker (reused from .venv-tools/te-jax while its inputs are the same),
    then the runner stage's import check with `--te-jax`, as the image runs it."""
    runner_python()  # the runner environment the build layers on
    built = build_te_jax()
    print(built.stdout)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-6000:]
    site = REPO / ".venv-tools" / "te-jax" / "site"
    assert list(site.glob("transformer_engine/wheel_lib/transformer_engine_jax*.so")), f"no extension in {site}"
    done = check_runner_env(tmp_path, "--te-jax", extra_path=site)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "ok transformer_engine.jax: imported" in done.stdout


def test_te_jax_build_refuses_the_base_images_own_cudnn_headers(tmp_path):
    """The Dockerfile's TE line before CPLUS_INCLUDE_PATH named the venv's cuDNN: the base's system cuDNN 9.10 in
    /usr/include, which TE 2.20.2 refuses (common/cudnn_min_version.h). Its header check, a second, not the compile."""
    runner_python()
    old, found = re.subn(r"\\\n\s*CPLUS_INCLUDE_PATH=\S+", "", (REPO / "Dockerfile").read_text())
    assert found == 1, "the Dockerfile's TE line changed shape: update this test"
    (tmp_path / "Dockerfile").write_text(old)
    done = build_te_jax("--dockerfile", str(tmp_path / "Dockerfile"), "--preflight-only")
    assert done.returncode == 1
    assert "must be built against cuDNN 9.12.0 or later headers" in done.stderr
    assert "(91002 >= 91200)" in done.stderr  # the base's 9.10.2, against TE's minimum
    assert done.stderr.strip().splitlines()[-1].startswith("build_te_jax: compiling TE's cuDNN version check")


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
