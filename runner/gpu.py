"""NVIDIA GPU facts for the manifest: NVML (or nvidia-smi) readings, CUDA library versions, and the measured
ceilings a cell's rates are compared with (bf16 matmul TFLOP/s, device-memory copy GB/s)."""

from __future__ import annotations

import os
import subprocess

from runner.record import GpuFacts

SMI_FIELDS = {
    "name": "name",
    "memory_total_mib": "memory.total",
    "driver": "driver_version",
    "sm_clock_mhz": "clocks.sm",
    "sm_clock_max_mhz": "clocks.max.sm",
    "mem_clock_mhz": "clocks.mem",
    "temperature_c": "temperature.gpu",
    "power_w": "power.draw",
    "power_limit_w": "power.limit",
    "uuid": "uuid",
    "sm_clock_app_mhz": "clocks.applications.graphics",
    "mem_clock_app_mhz": "clocks.applications.memory",
}
SMI_TYPES = {"memory_total_mib": int, "sm_clock_mhz": int, "sm_clock_max_mhz": int, "mem_clock_mhz": int,
             "temperature_c": int, "power_w": float, "power_limit_w": float, "sm_clock_app_mhz": int,
             "mem_clock_app_mhz": int}  # nvidia-smi prints text


def cuda_dotted(version: int) -> str:
    """CUDA's 13000 -> 13.0."""
    return f"{version // 1000}.{version % 1000 // 10}"


def cudnn_dotted(version: int) -> str:
    """cuDNN 9's 91900 -> 9.19.0 (cuDNN 8 used 8906 -> 8.9.6)."""
    major, rest = divmod(version, 10000) if version >= 90000 else divmod(version, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _supported(read):
    """A reading that some GPUs refuse (NVML's NotSupported for application clocks): None there."""
    try:
        return read()
    except Exception:
        return None


def nvml_id(index: int = 0) -> int | str:
    """NVML's name (an index, or a uuid) for the GPU that CUDA, and so JAX, numbers `index` in this process. NVML sees
    every GPU of the host whatever CUDA_VISIBLE_DEVICES says, so under `CUDA_VISIBLE_DEVICES=3` JAX's GPU 0 is NVML's
    GPU 3: read at index 0, the clocks, power and throttle the steady rule waits on, and the uuid the ceilings are
    kept under, would be another GPU's. The list's entries are indices or uuids; an index assumes CUDA numbers the
    GPUs in NVML's (PCI) order, true where they are all one model, else with CUDA_DEVICE_ORDER=PCI_BUS_ID."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    entries = [entry.strip() for entry in (visible or "").split(",")]
    if not visible or index >= len(entries):
        return index
    entry = entries[index]
    return int(entry) if entry.isdigit() else entry


def nvml_handle(pynvml, index: int = 0):
    """NVML's handle of the GPU CUDA numbers `index` in this process (nvml_id)."""
    found = nvml_id(index)
    if isinstance(found, int):
        return pynvml.nvmlDeviceGetHandleByIndex(found)
    return pynvml.nvmlDeviceGetHandleByUUID(found)


def _nvml_facts(index: int) -> GpuFacts:
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    try:
        handle = nvml_handle(pynvml, index)
        return GpuFacts(
            name=_text(pynvml.nvmlDeviceGetName(handle)),
            uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
            memory_total_mib=pynvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20,
            driver=_text(pynvml.nvmlSystemGetDriverVersion()),
            cuda_driver=cuda_dotted(pynvml.nvmlSystemGetCudaDriverVersion()),
            sm_clock_mhz=pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            sm_clock_max_mhz=pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            mem_clock_mhz=pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            sm_clock_app_mhz=_supported(lambda: pynvml.nvmlDeviceGetApplicationsClock(handle, pynvml.NVML_CLOCK_SM)),
            mem_clock_app_mhz=_supported(lambda: pynvml.nvmlDeviceGetApplicationsClock(handle,
                                                                                       pynvml.NVML_CLOCK_MEM)),
            temperature_c=pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            power_w=pynvml.nvmlDeviceGetPowerUsage(handle) / 1000,
            power_limit_w=pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000,
            source="nvml",
        )
    finally:
        pynvml.nvmlShutdown()


def _smi_facts(index: int) -> GpuFacts:
    query = ",".join(SMI_FIELDS.values())
    out = subprocess.run(
        ["nvidia-smi", f"--id={nvml_id(index)}", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, timeout=20, check=True,
    ).stdout
    values = dict(zip(SMI_FIELDS, (v.strip() for v in out.strip().split(","))))
    return GpuFacts(**{key: _reading(key, value) for key, value in values.items()}, source="nvidia-smi")


def _reading(key: str, value: str):
    """A printed reading in NVML's type; '[N/A]' and the like are None."""
    try:
        return SMI_TYPES.get(key, str)(value)
    except ValueError:
        return None


def readings(index: int = 0) -> GpuFacts | None:
    """Name, memory, driver, clocks, power and temperature now; None when neither NVML nor nvidia-smi answers."""
    for read in (_nvml_facts, _smi_facts):
        try:
            return read(index)
        except Exception:  # no NVML library, no nvidia-smi, or a driver that refuses: try the next
            continue
    return None


def cuda_versions() -> dict[str, str]:
    """The CUDA runtime and cuDNN versions jaxlib loaded; {} on a build without CUDA."""
    try:
        from jax._src.lib import cuda_versions  # private: present in CUDA builds of jaxlib
    except ImportError:
        return {}
    if cuda_versions is None:
        return {}
    found = {}
    try:
        found["cuda_runtime"] = cuda_dotted(cuda_versions.cuda_runtime_get_version())
        found["cudnn"] = cudnn_dotted(cuda_versions.cudnn_get_version())
    except Exception:  # a missing getter or library only hides a version string
        pass
    return found


def facts() -> GpuFacts | None:
    """Readings of device 0, with its SM count from JAX."""
    import jax

    device = jax.devices()[0]
    found = readings(device.id)
    cores = getattr(device, "core_count", None)
    return found.model_copy(update={"sm_count": cores}) if found and cores else found


def matmul_peak_tflops(size: int = 8192, calls: int = 20) -> float:
    """Measured bf16 ceiling: median kernel time of one size^3 matmul, as TFLOP/s."""
    import jax
    import jax.numpy as jnp

    from runner.timers import DeviceTimer

    a, b = (jax.random.normal(jax.random.PRNGKey(i), (size, size), jnp.bfloat16) for i in (1, 2))
    matmul = jax.jit(jnp.matmul).lower(a, b).compile()
    return 2 * size**3 / DeviceTimer().median(matmul, (a, b), calls) / 1e12


def memory_bandwidth_gbps(size_bytes: int = 4 << 30, calls: int = 20) -> float:
    """Measured device-memory ceiling: bytes read plus written by a large copy over its median kernel time."""
    import jax
    import jax.numpy as jnp

    from runner.timers import DeviceTimer

    source = jnp.zeros(size_bytes // 4, jnp.float32)
    copy = jax.jit(lambda x: x + 1.0).lower(source).compile()  # one read and one write of every element
    return 2 * size_bytes / DeviceTimer().median(copy, (source,), calls) / 1e9
