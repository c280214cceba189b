"""NVIDIA GPU facts for the manifest: NVML (or nvidia-smi) readings and a measured bf16 matmul ceiling."""

from __future__ import annotations

import subprocess

import jax
import jax.numpy as jnp

from runner.machine import cuda_dotted
from runner.timers import DeviceTimer

SMI_FIELDS = {
    "name": "name",
    "memory_total_mib": "memory.total",
    "driver": "driver_version",
    "sm_clock_mhz": "clocks.sm",
    "sm_clock_max_mhz": "clocks.max.sm",
    "temperature_c": "temperature.gpu",
    "power_limit_w": "power.limit",
}
# nvidia-smi prints text; give each reading NVML's type
SMI_TYPES = {"memory_total_mib": int, "sm_clock_mhz": int, "sm_clock_max_mhz": int, "temperature_c": int,
             "power_limit_w": float}


def _nvml_facts(index: int) -> dict:
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        return {
            "name": _text(pynvml.nvmlDeviceGetName(handle)),
            "memory_total_mib": pynvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20,
            "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
            "cuda_driver": cuda_dotted(pynvml.nvmlSystemGetCudaDriverVersion()),
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "temperature_c": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000,
            "source": "nvml",
        }
    finally:
        pynvml.nvmlShutdown()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _smi_facts(index: int) -> dict:
    query = ",".join(SMI_FIELDS.values())
    out = subprocess.run(
        ["nvidia-smi", f"--id={index}", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, timeout=20, check=True,
    ).stdout
    values = zip(SMI_FIELDS, (v.strip() for v in out.strip().split(",")))
    return {key: _typed(key, value) for key, value in values} | {"source": "nvidia-smi"}


def _typed(key: str, value: str):
    """A reading in NVML's type; text such as '[N/A]' stays as printed."""
    try:
        return SMI_TYPES.get(key, str)(value)
    except ValueError:
        return value


def readings(index: int = 0) -> dict:
    """Name, memory, driver, SM clock and temperature now; {} when neither NVML nor nvidia-smi answers."""
    for read in (_nvml_facts, _smi_facts):
        try:
            return read(index)
        except Exception:  # no NVML library, no nvidia-smi, or a driver that refuses: try the next
            continue
    return {}


def facts() -> dict:
    """Static facts of device 0 (SM count from JAX) plus its readings at this moment."""
    device = jax.devices()[0]
    found = readings(device.id)
    if cores := getattr(device, "core_count", None):
        found["sm_count"] = cores
    return found


def matmul_peak_tflops(size: int = 8192, calls: int = 20) -> float:
    """Measured bf16 ceiling: median kernel time of one size^3 matmul, as TFLOP/s."""
    a, b = (jax.random.normal(jax.random.PRNGKey(i), (size, size), jnp.bfloat16) for i in (1, 2))
    matmul = jax.jit(jnp.matmul).lower(a, b).compile()
    samples = sorted(DeviceTimer()(matmul, (a, b), calls))
    return 2 * size**3 / samples[len(samples) // 2] / 1e12
