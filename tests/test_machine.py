"""Machine facts that can be checked off a GPU: version strings and nvidia-smi's readings."""

from __future__ import annotations

import subprocess

import pytest

from runner import gpu
from runner.machine import cuda_dotted, current_device, describe


@pytest.mark.parametrize("version, text", [(13000, "13.0"), (12090, "12.9"), (11080, "11.8")])
def test_cuda_versions(version, text):
    assert cuda_dotted(version) == text


def test_nvidia_smi_readings_take_nvml_types(monkeypatch):
    printed = "NVIDIA L4, 23034, 570.86.15, [N/A], 2040, 41, 72.00\n"
    monkeypatch.setattr(gpu.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, printed, ""))
    assert gpu._smi_facts(0) == {
        "name": "NVIDIA L4", "memory_total_mib": 23034, "driver": "570.86.15", "sm_clock_mhz": "[N/A]",
        "sm_clock_max_mhz": 2040, "temperature_c": 41, "power_limit_w": 72.0, "source": "nvidia-smi",
    }  # fmt: skip


def test_the_cpu_machine_record_has_no_gpu_facts():
    if current_device().compute_capability is not None:
        pytest.skip("this machine has a GPU")
    machine = describe()
    assert machine.platform == "cpu" and machine.compute_capability is None
    assert machine.gpu == {} and machine.matmul_peak_tflops is None
    assert {"jax", "jaxlib", "pydantic"} <= set(machine.versions)
