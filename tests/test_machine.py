"""Machine facts that can be checked off a GPU: version strings, nvidia-smi's readings, the CPU's record."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import fake_gpu
from runner import gpu, machine
from runner.machine import current_device, describe, versions
from runner.record import GpuFacts


@pytest.mark.parametrize("version, text", [(13000, "13.0"), (12090, "12.9"), (11080, "11.8")])
def test_cuda_versions(version, text):
    assert gpu.cuda_dotted(version) == text


@pytest.mark.parametrize("version, text", [(91900, "9.19.0"), (90100, "9.1.0"), (8906, "8.9.6")])
def test_cudnn_versions(version, text):
    assert gpu.cudnn_dotted(version) == text


def test_nvidia_smi_readings_take_nvml_types(monkeypatch):
    printed = "NVIDIA L4, 23034, 570.86.15, [N/A], 2040, 6251, 41, 27.31, 72.00, GPU-0a1b, 2040, [N/A]\n"
    monkeypatch.setattr(gpu.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, printed, ""))
    assert gpu._smi_facts(0) == GpuFacts(
        name="NVIDIA L4", memory_total_mib=23034, driver="570.86.15", sm_clock_mhz=None, sm_clock_max_mhz=2040,
        mem_clock_mhz=6251, temperature_c=41, power_w=27.31, power_limit_w=72.0, uuid="GPU-0a1b", sm_clock_app_mhz=2040,
        mem_clock_app_mhz=None, source="nvidia-smi",
    )


@pytest.mark.parametrize("app_clocks", [True, False])
def test_nvml_readings_name_this_gpus_uuid_and_its_application_clocks(monkeypatch, app_clocks):
    """The ceilings' key reads them (runner/ceilings_cache.py); a GPU that refuses application clocks (NVML's
    NotSupported) has None there and its other readings still."""
    import types

    def applications(handle, clock):
        if not app_clocks:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return {"sm": 1980, "mem": 3201}[clock]

    nvml = types.SimpleNamespace(
        NVML_CLOCK_SM="sm", NVML_CLOCK_MEM="mem", NVML_TEMPERATURE_GPU=0, nvmlInit=lambda: None,
        nvmlShutdown=lambda: None, nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetName=lambda h: b"NVIDIA H200",
        nvmlDeviceGetUUID=lambda h: "GPU-5f1c", nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=2**37),
        nvmlSystemGetDriverVersion=lambda: "570.195.03", nvmlSystemGetCudaDriverVersion=lambda: 12080,
        nvmlDeviceGetClockInfo=lambda h, c: 345, nvmlDeviceGetMaxClockInfo=lambda h, c: 1980,
        nvmlDeviceGetApplicationsClock=applications, nvmlDeviceGetTemperature=lambda h, t: 31,
        nvmlDeviceGetPowerUsage=lambda h: 75200, nvmlDeviceGetEnforcedPowerLimit=lambda h: 700000)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    found = gpu.readings()
    assert (found.source, found.uuid, found.power_limit_w, found.sm_clock_max_mhz) == ("nvml", "GPU-5f1c", 700.0, 1980)
    assert (found.sm_clock_app_mhz, found.mem_clock_app_mhz) == ((1980, 3201) if app_clocks else (None, None))


def test_no_nvml_and_no_nvidia_smi_is_no_readings(monkeypatch):
    def missing(*args, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(gpu.subprocess, "run", missing)
    assert gpu.readings() is None


def test_the_cpu_machine_record_has_no_gpu_facts():
    device = current_device()
    if device.compute_capability is not None:
        pytest.skip("this machine has a GPU")
    machine = describe(device, 1, versions())
    assert machine.platform == "cpu" and machine.compute_capability is None
    assert machine.gpu is None and machine.matmul_peak_tflops is None and machine.memory_bandwidth_gbps is None
    assert {"jax", "jaxlib", "pydantic"} <= set(machine.versions)


def test_git_sha_says_dirty_where_tracked_files_differ_from_the_commit(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTNBENCH_GIT_SHA", raising=False)
    monkeypatch.chdir(tmp_path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], check=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "a.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "untracked.txt").write_text("results\n")
    assert machine.git_sha() == head  # untracked files (results, caches) are not edits of the code
    (tmp_path / "a.py").write_text("x = 2\n")
    assert machine.git_sha() == head + "-dirty"
    monkeypatch.setenv("ATTNBENCH_GIT_SHA", "abc123")
    assert machine.git_sha() == "abc123"


def test_the_versions_name_tokamax_where_it_is_installed(monkeypatch):
    installed = {"jax": "0.11.2", "tokamax": "0.0.17"}
    monkeypatch.setattr(machine, "package_version", installed.get)
    assert versions() == installed  # packages that are not installed are left out


@pytest.mark.parametrize("found", ["8.9", "9.0", "12.0", None])
def test_capability_is_the_first_devices_and_none_off_nvidia_gpus(monkeypatch, found):
    fake_gpu(monkeypatch, found)
    assert machine.capability() == (float(found) if found else None)


@pytest.mark.parametrize("visible, index, found", [
    (None, 0, 0), ("", 0, 0), ("3", 0, 3), ("2,5", 1, 5), ("2, 5", 1, 5), ("GPU-5f1c,1", 0, "GPU-5f1c"),
    ("3", 1, 1),  # past the list: CUDA sees no such GPU; left as asked
])
def test_nvml_names_the_gpu_cuda_numbers_under_cuda_visible_devices(monkeypatch, visible, index, found):
    """NVML sees every GPU of the host: JAX's GPU 0 under CUDA_VISIBLE_DEVICES=3 is NVML's GPU 3, for the facts
    (the ceilings' uuid), nvidia-smi and the power telemetry alike."""
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert gpu.nvml_id(index) == found


def test_telemetry_and_facts_read_the_gpu_cuda_visible_devices_names(monkeypatch):
    import types

    from runner import power

    asked = []
    nvml = types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: asked.append(("index", i)) or i,
        nvmlDeviceGetHandleByUUID=lambda u: asked.append(("uuid", u)) or u,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700000, nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,GPU-5f1c")
    power.NvmlSource(0)
    power.NvmlSource(1)
    assert asked == [("index", 3), ("uuid", "GPU-5f1c")]
    printed = []
    monkeypatch.setattr(gpu.subprocess, "run", lambda argv, **k: printed.append(argv[1]) or subprocess.CompletedProcess(
        argv, 0, ", ".join(["x"] * len(gpu.SMI_FIELDS)) + "\n", ""))
    gpu._smi_facts(0)
    assert printed == ["--id=3"]


@pytest.mark.parametrize("name, kept", [
    ("NVTE_FUSED_ATTN", True), ("NVTE_FLASH_ATTN", True), ("NVTE_FUSED_ATTN_BACKEND", True),
    ("NVTE_ALLOW_NONDETERMINISTIC_ALGO", True), ("NVTE_DPA_FP8_RECIPE", True), ("JAX_DEFAULT_MATMUL_PRECISION", True),
    ("JAX_PALLAS_USE_MOSAIC_GPU", True), ("NVIDIA_TF32_OVERRIDE", True),
    ("NVTE_CUDA_INCLUDE_DIR", False), ("NVTE_BUILD_DEBUG", False), ("NVTE_DEBUG_LEVEL", False),
    ("NVTE_FRAMEWORK", False), ("NVTE_CUDA_ARCHS", False), ("NVTE_USE_CCACHE", False),
    ("NVTE_BUILD_THREADS_PER_JOB", False), ("NVTE_CMAKE_ARGS", False), ("NVTE_CUDNN_LIB_PATH", False),
    ("NVTE_CUDA_HOME", False), ("NVTE_FUSED_ATTN_LOG_CONFIG", False), ("NVTE_UNITTEST_SEED", False),
    ("XLA_FLAGS", False), ("XLA_PYTHON_CLIENT_MEM_FRACTION", False), ("XLA_PYTHON_CLIENT_PREALLOCATE", False),
    ("JAX_COMPILATION_CACHE_DIR", False), ("JAX_PLATFORMS", False), ("JAX_LOG_COMPILES", False),
    ("CUDA_VISIBLE_DEVICES", False), ("GOOGLE_APPLICATION_CREDENTIALS", False), ("AWS_SECRET_ACCESS_KEY", False),
])  # fmt: skip
def test_the_kernel_environment_is_the_libraries_kernel_settings_not_paths_memory_or_secrets(name, kept):
    assert machine.kernel_variable(name) is kept
    assert machine.kernel_env({name: "0", "HOME": "/root"}) == ({name: "0"} if kept else {})


def test_the_cpus_record_holds_the_environments_kernel_settings_and_says_none_set_apart_from_not_recorded(monkeypatch):
    for name in [n for n in machine.os.environ if machine.kernel_variable(n)]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")  # the runner's fake devices: left out
    record = describe(current_device(), 1, {})
    assert (record.xla_flags, record.kernel_env) == ([], {})
    assert record.kernel_settings() == {"xla_flags": "(none)", "kernel env": "(none)"}
    assert record.model_copy(update={"xla_flags": None, "kernel_env": None}).kernel_settings() == {
        "xla_flags": "not recorded", "kernel env": "not recorded"}
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true --xla_gpu_autotune_level=0 "
                       "--xla_cpu_enable_fast_math=false")
    monkeypatch.setenv("NVTE_FUSED_ATTN", "0")
    record = describe(current_device(), 1, {})
    assert (record.xla_flags, record.kernel_env) == (["--xla_cpu_enable_fast_math=false"], {"NVTE_FUSED_ATTN": "0"})
    assert record.kernel_settings() == {"xla_flags": "--xla_cpu_enable_fast_math=false",
                                        "kernel env": "NVTE_FUSED_ATTN=0"}
