"""What this process runs on: platform, device, compute capability, versions, GPU facts."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import socket
import subprocess
from dataclasses import dataclass

import jax

from runner.record import Machine


@dataclass(frozen=True)
class Device:
    """The facts a variant's requirements are checked against."""

    platform: str  # "cpu" or "gpu"
    kind: str
    compute_capability: float | None  # e.g. 9.0 on Hopper; None off NVIDIA GPUs

    def describe(self) -> str:
        if self.compute_capability is None:
            return self.platform
        return f"{self.kind} (compute capability {self.compute_capability:.1f})"


@functools.cache
def current_device() -> Device:
    """The first JAX device."""
    device = jax.devices()[0]
    capability = getattr(device, "compute_capability", None)
    return Device(device.platform, device.device_kind, float(capability) if capability else None)


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cuda_versions() -> dict[str, str]:
    try:
        from jax._src.lib import cuda_versions  # private: present in CUDA builds of jaxlib
    except ImportError:
        return {}
    if cuda_versions is None:
        return {}
    found = {}
    try:
        found["cuda_runtime"] = cuda_dotted(cuda_versions.cuda_runtime_get_version())
        found["cudnn"] = _cudnn_dotted(cuda_versions.cudnn_get_version())
    except Exception:  # a missing getter or library only hides a version string
        pass
    return found


def cuda_dotted(version: int) -> str:
    """CUDA's 13000 -> 13.0."""
    return f"{version // 1000}.{version % 1000 // 10}"


def _cudnn_dotted(version: int) -> str:
    """cuDNN 9's 91900 -> 9.19.0 (cuDNN 8 used 8906 -> 8.9.6)."""
    major, rest = divmod(version, 10000) if version >= 90000 else divmod(version, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def versions() -> dict[str, str]:
    """Versions of everything that decides what runs."""
    found = {name: _package_version(name) for name in ("jax", "jaxlib", "flax", "pydantic", "numpy")}
    found["transformer_engine"] = _package_version("transformer_engine") or _package_version("transformer-engine")
    found.update(_cuda_versions() if current_device().platform == "gpu" else {})
    return {k: v for k, v in found.items() if v}


def git_sha() -> str | None:
    """The checkout's commit, or ATTNBENCH_GIT_SHA baked into an image."""
    if sha := os.environ.get("ATTNBENCH_GIT_SHA"):
        return sha
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def gpu_readings() -> dict:
    """NVML readings now (clock, temperature); {} off NVIDIA GPUs."""
    if current_device().compute_capability is None:
        return {}
    from runner import gpu

    return gpu.readings(jax.devices()[0].id)


def describe_here() -> Machine:
    """The machine record, with GPU facts and a measured bf16 matmul ceiling on an NVIDIA GPU."""
    if current_device().compute_capability is None:
        return describe()
    from runner import gpu

    return describe(gpu.facts(), gpu.matmul_peak_tflops())


def describe(gpu_facts: dict | None = None, matmul_peak_tflops: float | None = None) -> Machine:
    """The machine record for a run's manifest."""
    device = current_device()
    return Machine(
        host=socket.gethostname(),
        platform=device.platform,
        device_kind=device.kind,
        device_count=jax.device_count(),
        compute_capability=f"{device.compute_capability:.1f}" if device.compute_capability else None,
        versions=versions(),
        gpu=gpu_facts or {},
        matmul_peak_tflops=matmul_peak_tflops,
    )
