"""What this process runs on: platform, device, compute capability, package versions, git sha.

JAX is imported only by `current_device`, so the registry can name the Device type without loading JAX.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from runner.record import CeilingsOrigin, GpuFacts, Machine

PACKAGES = ("jax", "jaxlib", "flax", "pydantic", "numpy", "tokamax")


@dataclass(frozen=True)
class Device:
    """The facts a variant's requirements are checked against."""

    platform: str  # "cpu" or "gpu"
    kind: str
    compute_capability: float | None  # e.g. 9.0 on Hopper; None off NVIDIA GPUs
    memory_bytes: int | None = None  # device memory, where known
    count: int = 1  # devices of this platform the process sees: a cell's `devices` must not exceed it

    def describe(self) -> str:
        if self.compute_capability is None:
            return self.platform
        return f"{self.kind} (compute capability {self.compute_capability:.1f})"


def capability() -> float | None:
    """The first JAX device's compute capability (9.0 on Hopper), or None off NVIDIA GPUs; read afresh each call."""
    import jax

    found = getattr(jax.devices()[0], "compute_capability", None)
    return float(found) if found else None


HOPPER = 9.0  # sm90: the H100 and H200
BLACKWELL = 10.0  # sm100: the B200 (no wgmma, sm_90a's alone)
AFTER_BLACKWELL = 11.0  # past sm10x


@functools.cache
def current_device() -> Device:
    """The first JAX device."""
    import jax

    device = jax.devices()[0]
    found = capability()
    try:
        memory = (device.memory_stats() or {}).get("bytes_limit")
    except Exception:  # a backend without memory stats (the CPU's)
        memory = None
    return Device(device.platform, device.device_kind, found, memory,
                  len(jax.devices()))


FAKE_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def fake_host_devices(count: int) -> None:
    """Before JAX starts its backends: give the CPU platform `count` devices, so a cell split across devices runs
    on a CPU too (JAX's fake devices; a GPU's platform is untouched). A count already in XLA_FLAGS is kept."""
    flags = os.environ.get("XLA_FLAGS", "")
    if count > 1 and FAKE_DEVICES_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {FAKE_DEVICES_FLAG}={count}".strip()


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str]:
    """Versions of the Python packages that decide what runs."""
    found = {name: package_version(name) for name in PACKAGES}
    found["transformer_engine"] = package_version("transformer_engine") or package_version("transformer-engine")
    return {k: v for k, v in found.items() if v}


# XLA_FLAGS that cannot change a platform's compiled kernels: the CPU platform's fake devices (added above for
# the spec's largest split, so they would re-key a run of another spec), dumps, the locations of caches (a pod's own
# path, as kernel_env leaves out *DIR*/*PATH* variables: a cache keeps what compiling would make), and the other
# platform's backend flags (a GPU's ceilings and cells compile nothing for the CPU backend, a CPU's nothing for the
# GPU's). A path that picks code stays: --xla_gpu_cuda_data_dir chooses the toolkit whose ptxas and libdevice compile.
CACHE_FLAGS = ("--xla_gpu_per_fusion_autotune_cache_dir", "--xla_gpu_kernel_cache_file")
NO_KERNEL_FLAGS = (FAKE_DEVICES_FLAG, "--xla_dump_", "--xla_gpu_dump_", *CACHE_FLAGS)
OTHER_BACKEND = {"gpu": ("--xla_cpu_",), "cpu": ("--xla_gpu_",)}


def kernel_flags(xla_flags: str, platform: str = "gpu") -> list[str]:
    """XLA_FLAGS that can change the kernels of `platform` (jax's: gpu or cpu), normalised: each flag's last setting
    (XLA's), sorted. The manifest's machine.xla_flags and the ceilings' key (runner.ceilings_cache) both read them
    so."""
    left_out, last = NO_KERNEL_FLAGS + OTHER_BACKEND.get(platform, ()), {}
    for flag in xla_flags.split():
        if not flag.startswith(left_out):
            last[flag.split("=", 1)[0]] = flag
    return sorted(last.values())


# Environment variables that can change which kernels the run's libraries compile or pick, recorded in the manifest
# (machine.kernel_env) as the run's environment gave them: TransformerEngine's runtime settings (NVTE_*: its attention
# backend, NVTE_FUSED_ATTN, NVTE_FLASH_ATTN, NVTE_FUSED_ATTN_BACKEND, NVTE_ALLOW_NONDETERMINISTIC_ALGO, FP8 recipes...)
# but its build's, paths and logging; JAX's settings that change what XLA compiles; and NVIDIA_TF32_OVERRIDE (cuBLAS's
# and cuDNN's TF32). XLA_FLAGS is recorded apart (machine.xla_flags); memory fractions, caches, paths, platforms and
# credentials are not about kernels.
KERNEL_ENV_PREFIXES = ("NVTE_",)
NOT_KERNEL_ENV = ("BUILD", "CCACHE", "CMAKE", "FRAMEWORK", "ARCHS", "DIR", "PATH", "HOME", "DEBUG", "LOG", "UNITTEST")
KERNEL_ENV = frozenset({
    "JAX_DEFAULT_MATMUL_PRECISION", "JAX_ENABLE_X64", "JAX_ENABLE_PGLE", "JAX_PGLE_PROFILING_RUNS",
    "JAX_OPTIMIZATION_LEVEL", "JAX_EXEC_TIME_OPTIMIZATION_EFFORT", "JAX_USE_SHARDY_PARTITIONER",
    "JAX_PALLAS_USE_MOSAIC_GPU", "NVIDIA_TF32_OVERRIDE"})


def kernel_variable(name: str) -> bool:
    """Whether an environment variable can change the kernels a run measures (KERNEL_ENV's rule)."""
    words = name.split("_")[1:]
    return name in KERNEL_ENV or (name.startswith(KERNEL_ENV_PREFIXES) and
                                  not any(word in NOT_KERNEL_ENV for word in words))


def kernel_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` that can change the kernels a run measures, by name."""
    return {name: environ[name] for name in sorted(environ) if kernel_variable(name)}


DIRTY = "-dirty"  # after a commit whose tracked files were edited (`git describe --dirty`'s suffix)
SHA_CHARS = 12  # of a git sha where a run is named in a line: enough to tell commits apart, short enough to fit


def short_sha(sha: str) -> str:
    """A run's git sha cut to SHA_CHARS, its -dirty kept: a run of edited code must not pass for the commit (show's
    header, the dashboard's overview)."""
    commit = sha.removesuffix(DIRTY)
    return commit[:SHA_CHARS] + sha[len(commit):]


def git_sha() -> str | None:
    """The checkout's commit, or ATTNBENCH_GIT_SHA baked into an image; `-dirty` after it (as `git describe
    --dirty` says it) where tracked files differ from that commit, so a run of edited code never passes for it."""
    if sha := os.environ.get("ATTNBENCH_GIT_SHA"):
        return sha
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True)
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                 text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = head.stdout.strip()
    return (sha + DIRTY if changed.stdout.strip() else sha) or None


def describe(device: Device, device_count: int, found_versions: dict[str, str], gpu: GpuFacts | None = None,
             matmul_peak_tflops: float | None = None, memory_bandwidth_gbps: float | None = None,
             ceilings_origin: CeilingsOrigin | None = None) -> Machine:
    """The machine record for a run's manifest, with the settings of this process's environment that can change its
    kernels (read before any cell: the runner's own per-cell settings are not among them)."""
    return Machine(
        host=socket.gethostname(),
        platform=device.platform,
        device_kind=device.kind,
        device_count=device_count,
        compute_capability=f"{device.compute_capability:.1f}" if device.compute_capability else None,
        versions=found_versions,
        gpu=gpu,
        matmul_peak_tflops=matmul_peak_tflops,
        memory_bandwidth_gbps=memory_bandwidth_gbps,
        ceilings_origin=ceilings_origin,
        xla_flags=kernel_flags(os.environ.get("XLA_FLAGS", ""), device.platform),
        kernel_env=kernel_env(os.environ),
    )
