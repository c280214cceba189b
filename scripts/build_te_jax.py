"""Compile TransformerEngine's JAX extension the way the Dockerfile's build stage does, outside Docker, and cache it.

The image compiles `transformer-engine[jax]` from source (PyPI ships no wheel of it), so a Dockerfile change that
breaks that compile would otherwise surface only in a Docker build. This script reads the build stage and repeats
it on the runner image's Python environment (.venv-tools/runner-image, the same pin list):
- the build tools at the Dockerfile's pins, in a venv of their own layered on the runner environment (a .pth);
- the TE line's environment (NVTE_*, MAX_JOBS, CUDA_HOME, CPLUS_INCLUDE_PATH, ...), with /opt/venv moved here;
- the base image's parts CI lacks: CUDA_HOME becomes a toolkit made of the pinned CUDA wheels (nvcc and the
  toolkit's headers; no cuDNN, as /usr/local/cuda has none), and a `-cudnn-devel` base's system cuDNN, which the
  compiler finds in /usr/include after every -I and CPLUS_INCLUDE_PATH folder, comes from PyPI's wheel of the
  base's cuDNN version and is searched last (-idirafter).
Before the 5-minute compile it compiles TE's own `common/cudnn_min_version.h` with those headers (a second), so a
too-old cuDNN fails at once with TE's message. The result, keyed on its inputs (the build stage, the pin list, this
script), lands in OUT/site, a folder for PYTHONPATH ahead of the runner environment (its transformer_engine package
with the extension added); a second run with the same inputs does nothing. Prints one line per step; a failure
ends in one line naming the step, exit 1.

    python3 scripts/build_te_jax.py [--dockerfile Dockerfile] [--out .venv-tools/te-jax] [--preflight-only]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNNER_VENV = ROOT / ".venv-tools" / "runner-image"
PINS = ROOT / "docker" / "runner-requirements.txt"
IMAGE_VENV = "/opt/venv"
IMAGE_SITE = f"{IMAGE_VENV}/lib/python3.12/site-packages"
IMAGE_CUDA = "/usr/local/cuda"
# The system cuDNN of each `-cudnn-devel` base the build stage may name (its `com.nvidia.cudnn.version` label; the
# headers sit in /usr/include). A base not listed here stops the build until its version is added.
BASE_CUDNN = {"nvidia/cuda:12.9.1-cudnn-devel-ubuntu24.04": "9.10.2.21"}
# The CUDA wheels whose headers /usr/local/cuda/include holds in a toolkit install (cuDNN, NCCL and NVSHMEM are not
# part of the toolkit; the base image puts its cuDNN in /usr/include).
TOOLKIT_WHEELS = ("cuda_runtime", "cuda_nvcc", "cuda_cccl", "cuda_nvrtc", "cuda_cupti", "cublas", "curand",
                  "cufft", "cusolver", "cusparse", "nvjitlink")
# The toolkit's headers that no runner pin brings (the runner never loads NVTX; TE's sources include its header),
# at CUDA 12.9.1's version, installed beside the build tools, not into the runner environment.
TOOLKIT_HEADER_WHEELS = ("nvidia-nvtx-cu12==12.9.79",)
TE_LINE = "transformer-engine[jax]"


class StepFailed(Exception):
    """A step of the build failed; the message is the one line to print."""


def build_stage(dockerfile: Path) -> tuple[str, list[str]]:
    """The build stage's base image and its instructions, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", dockerfile.read_text())
    base, lines = None, []
    for line in map(str.strip, text.splitlines()):
        if match := re.match(r"FROM\s+(\S+)\s+AS\s+(\S+)", line, re.IGNORECASE):
            if base is not None:
                break
            if match.group(2) == "build":
                base = match.group(1)
        elif base is not None and line and not line.startswith("#"):
            lines.append(line)
    if base is None:
        raise StepFailed(f"{dockerfile}: no `FROM ... AS build` stage")
    return base, lines


def build_tool_pins(lines: list[str]) -> list[str]:
    """The `name==version` words of the build stage's pip install that pins pybind11 (the compile's tools)."""
    for line in lines:
        if line.startswith("RUN") and "pybind11==" in line:
            return re.findall(r"\b[A-Za-z][\w.-]*==[\w.]+", line.split("runner-requirements.txt")[0])
    raise StepFailed("the build stage installs no pinned pybind11 (the tools TE's JAX extension compiles with)")


def te_environment(lines: list[str]) -> dict[str, str]:
    """The VAR=value words before `pip` on the RUN line that installs transformer-engine[jax]."""
    for line in lines:
        if line.startswith("RUN") and TE_LINE in line:
            words = shlex.split(line[3:])
            assignments = words[:next(i for i, word in enumerate(words) if "=" not in word)]
            return dict(word.split("=", 1) for word in assignments)
    raise StepFailed(f"the build stage has no RUN line installing {TE_LINE}")


def runner_site() -> Path:
    """The runner environment's site-packages (scripts/install-test-tools.sh made it from the pin list)."""
    python = RUNNER_VENV / "bin" / "python"
    if not python.exists():
        raise StepFailed(f"{RUNNER_VENV} is missing: run `make test-tools`")
    done = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], "runner site")
    return Path(done.stdout.strip())


def run(command: list, step: str, **kwargs) -> subprocess.CompletedProcess:
    """Run a command; a failure raises StepFailed naming the step, with the command's last output printed."""
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        print((done.stdout + done.stderr)[-6000:], file=sys.stderr)
        raise StepFailed(f"{step} failed (exit {done.returncode}): {' '.join(map(str, command))[:200]}")
    return done


def inputs_key(dockerfile: Path, base: str, lines: list[str]) -> str:
    """What the result depends on: the build stage up to the TE line, the pin list, this script, the Python."""
    stage = lines[:next(i for i, line in enumerate(lines) if TE_LINE in line) + 1]
    digest = hashlib.sha256()
    for part in (base, *stage, PINS.read_text(), Path(__file__).read_text(), sys.version):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def toolkit(site: Path, tools: Path, out: Path) -> Path:
    """A CUDA_HOME standing in for /usr/local/cuda: nvcc and the toolkit's headers, from the pinned wheels."""
    home = out / "cuda-home"
    shutil.rmtree(home, ignore_errors=True)
    (home / "include").mkdir(parents=True)
    (home / "bin").mkdir()
    includes = [site / "nvidia" / wheel / "include" for wheel in TOOLKIT_WHEELS]
    includes += sorted((tools / "toolkit-headers" / "nvidia").glob("*/include"))
    for include in includes:
        for entry in sorted(include.iterdir()) if include.is_dir() else []:
            target = home / "include" / entry.name
            if not target.exists():
                target.symlink_to(entry)
    # TE finds CUDA_HOME through nvcc and asks it only for the toolkit's release (`nvcc -V`: the JAX extension has no
    # CUDA sources). CUDA 12's nvcc wheel ships ptxas alone, so this answers for it, from the pinned wheel's version.
    version = re.search(r"^nvidia-cuda-nvcc-cu12==(\d+)\.(\d+)\.(\d+)", PINS.read_text(), re.MULTILINE)
    if version is None:
        raise StepFailed(f"{PINS.name} pins no nvidia-cuda-nvcc-cu12: the CUDA toolkit's version is unknown")
    major, minor, patch = version.groups()
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(f'#!/bin/sh\n[ "$1" = -V ] || {{ echo "stand-in nvcc answers -V only" >&2; exit 1; }}\n'
                    f'echo "Cuda compilation tools, release {major}.{minor}, V{major}.{minor}.{patch}"\n')
    nvcc.chmod(0o755)
    return home


def base_cudnn_headers(base: str, tools: Path, out: Path) -> Path | None:
    """The include folder of the base image's system cuDNN, from PyPI's wheel of that version; None if it has none."""
    if "cudnn" not in base:
        return None
    if base not in BASE_CUDNN:
        raise StepFailed(f"the build stage's base {base} carries a system cuDNN whose version scripts/build_te_jax.py"
                         " does not know: add it to BASE_CUDNN")
    version = BASE_CUDNN[base]
    include = out / f"base-cudnn-{version}" / "include"
    if (include / "cudnn_version.h").exists():
        return include
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        run([tools / "bin" / "pip", "download", "-q", "--no-deps", "-d", scratch, f"nvidia-cudnn-cu12=={version}"],
            f"downloading cuDNN {version}'s headers")
        wheel = next(Path(scratch).glob("*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.startswith("nvidia/cudnn/include/"):
                    (include / Path(name).name).parent.mkdir(parents=True, exist_ok=True)
                    (include / Path(name).name).write_bytes(archive.read(name))
    return include


def build_tools_venv(pins: list[str], site: Path, out: Path) -> Path:
    """A venv with the Dockerfile's build tools that also sees the runner environment (the image's one /opt/venv)."""
    tools = out / "tools"
    stamp, made = tools / ".installed", " ".join([*pins, *TOOLKIT_HEADER_WHEELS, str(site)])  # site: the .pth below
    if stamp.exists() and stamp.read_text() == made:
        return tools
    shutil.rmtree(tools, ignore_errors=True)
    run([sys.executable, "-m", "venv", tools], "creating the build tools' venv")
    run([tools / "bin" / "pip", "install", "-q", *pins], "installing the build tools")
    run([tools / "bin" / "pip", "install", "-q", "--no-deps", "--target", tools / "toolkit-headers",
         *TOOLKIT_HEADER_WHEELS], "installing the toolkit's other headers")
    tools_site = run([tools / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     "build tools' site").stdout.strip()
    Path(tools_site, "runner-image.pth").write_text(f"{site}\n")
    stamp.write_text(made)
    return tools


def compile_environment(te_env: dict[str, str], site: Path, cuda_home: Path, tools: Path,
                        system_cudnn: Path | None) -> dict[str, str]:
    """The TE line's environment with the image's paths moved here, and the base's system headers searched last."""
    env = {key: value for key, value in os.environ.items() if key not in ("CPLUS_INCLUDE_PATH", "CPATH", "CPPFLAGS")}
    for key, value in te_env.items():
        env[key] = value.replace(IMAGE_SITE, str(site)).replace(IMAGE_VENV, str(tools)).replace(IMAGE_CUDA,
                                                                                               str(cuda_home))
    if system_cudnn is not None:
        env["CPPFLAGS"] = f"{env.get('CPPFLAGS', '')} -idirafter {system_cudnn}".strip()
    env["PATH"] = f"{tools / 'bin'}:{env.get('PATH', '')}"
    return env


def te_requirement(tools: Path) -> str:
    """What `transformer-engine[jax]` pulls for its extension, from the pinned metapackage's own metadata."""
    code = ("import importlib.metadata as m, re; print(next(r.split(';')[0].strip() for r in "
            "m.requires('transformer_engine') if re.search('extra *== *.jax.', r)))")
    return run([tools / "bin" / "python", "-c", code], "reading transformer-engine's [jax] extra").stdout.strip()


def preflight(sdist: Path, env: dict[str, str], cuda_home: Path, out: Path) -> None:
    """Compile TE's cuDNN version check alone with the build's headers: a too-old cuDNN fails here, in a second."""
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        run(["tar", "-xzf", sdist, "-C", scratch], "unpacking the sdist")
        headers = next(Path(scratch).glob("*/common_headers"))
        source = Path(scratch, "check.cpp")
        source.write_text('#include "common/cudnn_min_version.h"\n')
        command = ["g++", "-std=c++17", "-fsyntax-only", f"-I{cuda_home / 'include'}", f"-I{headers}",
                   *shlex.split(env.get("CPPFLAGS", "")), source]
        run(command, "compiling TE's cuDNN version check (common/cudnn_min_version.h) with the image's headers",
            env=env)


def overlay_te_package(site: Path, target: Path) -> None:
    """Make TARGET/transformer_engine the runner environment's package with the built extension in its wheel_lib,
    as pip leaves it in the image's /opt/venv: TE loads its JAX extension only from its own package folder, and
    the runner environment itself (the lead's, shared) is not written to. Its entries are symlinks to the original."""
    package, built = site.resolve() / "transformer_engine", target / "transformer_engine"
    for entry in package.iterdir():
        if entry.name != "wheel_lib" and not (built / entry.name).exists():
            (built / entry.name).symlink_to(entry)
    for entry in (package / "wheel_lib").iterdir():
        if not (built / "wheel_lib" / entry.name).exists():
            (built / "wheel_lib" / entry.name).symlink_to(entry)


def build(dockerfile: Path, out: Path, preflight_only: bool) -> Path:
    """OUT/site holding transformer_engine_jax, built (or found built) from this Dockerfile's inputs."""
    base, lines = build_stage(dockerfile)
    key = inputs_key(dockerfile, base, lines)
    stamp = out / "site" / ".installed"
    if not preflight_only and stamp.exists() and stamp.read_text() == key:
        print(f"ok cached: {out / 'site'} (inputs {key[:12]})")
        return out / "site"
    out.mkdir(parents=True, exist_ok=True)
    site = runner_site()
    tools = build_tools_venv(build_tool_pins(lines), site, out)
    print(f"ok build tools: {' '.join(build_tool_pins(lines))}")
    cuda_home = toolkit(site, tools, out)
    system_cudnn = base_cudnn_headers(base, tools, out)
    print(f"ok headers: CUDA from the pinned wheels, system cuDNN {BASE_CUDNN.get(base, 'none')} (base {base})")
    env = compile_environment(te_environment(lines), site, cuda_home, tools, system_cudnn)
    requirement = te_requirement(tools)
    sdists = out / "sdist"
    shutil.rmtree(sdists, ignore_errors=True)
    run([tools / "bin" / "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "--no-build-isolation",
         "-d", sdists, requirement], f"downloading {requirement}'s source", env=env)
    sdist = next(sdists.iterdir())
    preflight(sdist, env, cuda_home, out)
    print(f"ok cuDNN headers: {sdist.name} accepts them")
    if preflight_only:
        return out / "site"
    wheels = out / "wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    run([tools / "bin" / "pip", "wheel", "--no-deps", "--no-build-isolation", "-c", PINS, "-w", wheels, sdist],
        f"compiling {requirement}", env=env)
    shutil.rmtree(out / "site", ignore_errors=True)
    run([tools / "bin" / "pip", "install", "-q", "--no-deps", "--target", out / "site", *wheels.glob("*.whl")],
        "installing the built wheel")
    overlay_te_package(site, out / "site")
    stamp.write_text(key)
    print(f"ok built: {out / 'site'} (inputs {key[:12]})")
    return out / "site"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dockerfile", type=Path, default=ROOT / "Dockerfile")
    parser.add_argument("--out", type=Path, default=ROOT / ".venv-tools" / "te-jax")
    parser.add_argument("--preflight-only", action="store_true",
                        help="stop after the cuDNN header check (no 5-minute compile, nothing cached)")
    args = parser.parse_args()
    try:
        build(args.dockerfile, args.out.resolve(), args.preflight_only)
    except StepFailed as failure:
        print(f"build_te_jax: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
