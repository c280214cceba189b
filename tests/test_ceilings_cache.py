"""runner/ceilings_cache.py: the machine's ceilings measured once per GPU and key, kept beside the compile cache and
reused by a later run's start (runner.worker._machine), measured afresh when a key part differs, when they are too
old, when --measure-ceilings asks, or when the kept entry cannot be read; neither kept nor reused when they are not
plausible (under half the GPU's MMA rate, or a renewal under 90 % of the entry it replaces). A stand-in H200
(helpers.fake_gpu, NVML's facts and the two measurements replaced) describes the machine on a CPU."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from conftest import BUCKET
from helpers import fake_gpu, in_process, spec_data, write_spec
from runner import assembly, ceilings_cache, gpu, machine, run, worker
from runner.ceilings_cache import FOLDER, MAX_AGE_DAYS
from runner.machine import Device
from runner.record import GpuFacts
from runner.spec import parse_spec
from runner.supervisor import Stopped

FACTS = GpuFacts(name="NVIDIA H200", uuid="GPU-5f1c0d2e-0000-4000-8000-000000000001", memory_total_mib=143771,
                 driver="570.195.03", cuda_driver="12.8", sm_count=132, sm_clock_mhz=345, sm_clock_max_mhz=1980,
                 mem_clock_mhz=3201, sm_clock_app_mhz=1980, mem_clock_app_mhz=3201, temperature_c=31, power_w=75.2,
                 power_limit_w=700.0, source="nvml")
VERSIONS = {"jax": "0.11.2", "jaxlib": "0.11.2", "cuda_runtime": "12.9", "cudnn": "9.19.1", "flax": "0.12.0"}


class H200:
    """The stand-in GPU: its NVML facts now (`facts`), and each measurement of the ceilings it was asked for."""

    def __init__(self, monkeypatch):
        self.facts, self.measured, self.peak, self.copy = FACTS, 0, 700.0, 4285.0
        self.capability = 9.0
        fake_gpu(monkeypatch, "9.0")
        monkeypatch.setattr(machine, "current_device", lambda: Device("gpu", "NVIDIA H200", self.capability))
        monkeypatch.setattr(gpu, "facts", lambda: self.facts)
        monkeypatch.setattr(gpu, "matmul_peak_tflops", self._matmul)
        monkeypatch.setattr(gpu, "memory_bandwidth_gbps", lambda: self.copy + self.measured)

    def _matmul(self) -> float:
        self.measured += 1
        return self.peak + self.measured / 7  # each measurement its own digits

    def start(self, cache, run_id: str, versions: dict = VERSIONS, afresh: bool = False):
        """The machine record the run's first worker makes."""
        settings = worker.Settings(parse_spec(spec_data(), {"xla"}), run_id, str(cache), afresh)
        return worker._machine(worker.Start("jax", settings, describe=True), versions, str(cache))


@pytest.fixture
def h200(monkeypatch) -> H200:
    return H200(monkeypatch)


def test_a_second_run_on_the_same_key_reuses_the_first_runs_ceilings(h200, tmp_path):
    first = h200.start(tmp_path, "first")
    assert h200.measured == 1 and first.matmul_peak_tflops == 700.0 + 1 / 7 and first.memory_bandwidth_gbps == 4286.0
    assert not first.ceilings_origin.reused and first.ceilings_origin.run_id == "first"
    assert first.ceilings_origin.note == "measured: none kept for this key"
    second = h200.start(tmp_path, "second")
    assert h200.measured == 1  # nothing measured at the second start
    assert (second.matmul_peak_tflops, second.memory_bandwidth_gbps) == (first.matmul_peak_tflops,
                                                                         first.memory_bandwidth_gbps)
    assert second.ceilings_origin.reused and second.ceilings_origin.run_id == "first"
    assert second.ceilings_origin.measured_at == first.ceilings_origin.measured_at
    assert assembly.ceilings(second) == assembly.ceilings(first)  # rates are shares of the same ceilings
    assert [p.name.startswith(f"{FACTS.uuid}-") for p in (tmp_path / FOLDER).iterdir()] == [True]


@pytest.mark.parametrize("change", [
    {"driver": "580.65.06"}, {"power_limit_w": 600.0}, {"sm_clock_app_mhz": 1500}, {"mem_clock_app_mhz": 2619},
    {"sm_clock_max_mhz": 1755}, {"sm_count": 60}, {"uuid": "GPU-5f1c0d2e-0000-4000-8000-000000000002"},
    {"name": "NVIDIA H100"}])
def test_a_changed_gpu_driver_power_limit_or_clock_cap_measures_them_afresh(h200, tmp_path, change):
    """sm_count: a MIG instance of the GPU reads the whole GPU's uuid in NVML, but CUDA gives it fewer SMs."""
    h200.start(tmp_path, "first")
    h200.facts = FACTS.model_copy(update=change)
    second = h200.start(tmp_path, "second")
    assert h200.measured == 2 and not second.ceilings_origin.reused and second.ceilings_origin.run_id == "second"
    h200.facts = FACTS
    assert h200.start(tmp_path, "third").ceilings_origin.run_id == "first"  # the first key's entry is kept


@pytest.mark.parametrize("library", ["jax", "jaxlib", "cuda_runtime", "cudnn"])
def test_a_changed_library_measures_them_afresh(h200, tmp_path, library):
    h200.start(tmp_path, "first")
    assert not h200.start(tmp_path, "second", VERSIONS | {library: "other"}).ceilings_origin.reused
    assert h200.measured == 2


def test_readings_that_change_no_ceiling_keep_the_key(h200, tmp_path):
    """The temperature, power and clocks of the moment, and a library the measurements do not run, are no key."""
    h200.start(tmp_path, "first")
    h200.facts = FACTS.model_copy(update={"temperature_c": 45, "power_w": 120.0, "sm_clock_mhz": 1980})
    assert h200.start(tmp_path, "second", VERSIONS | {"flax": "0.13.0", "tokamax": "0.0.18"}).ceilings_origin.reused
    assert h200.measured == 1


def test_measure_ceilings_measures_them_afresh_and_keeps_the_new_ones(h200, tmp_path):
    h200.start(tmp_path, "first")
    again = h200.start(tmp_path, "second", afresh=True)
    assert h200.measured == 2 and not again.ceilings_origin.reused
    assert "--measure-ceilings" in again.ceilings_origin.note
    third = h200.start(tmp_path, "third")
    assert third.ceilings_origin.run_id == "second" and third.matmul_peak_tflops == again.matmul_peak_tflops


def _age(tmp_path, days: float) -> None:
    """Make the kept entry `days` old."""
    [path] = (tmp_path / FOLDER).iterdir()
    entry = json.loads(path.read_text())
    entry["measured_at"] = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days)).isoformat(timespec="seconds")
    path.write_text(json.dumps(entry))


def test_ceilings_older_than_the_age_limit_are_measured_afresh(h200, tmp_path):
    h200.start(tmp_path, "first")
    _age(tmp_path, MAX_AGE_DAYS - 0.5)
    young = h200.start(tmp_path, "second")
    assert young.ceilings_origin.reused
    assert young.ceilings_origin.note == f"reused: kept {MAX_AGE_DAYS - 0.5:.1f} days ago for this key"
    _age(tmp_path, MAX_AGE_DAYS + 0.5)
    old = h200.start(tmp_path, "third")
    assert h200.measured == 2 and not old.ceilings_origin.reused
    assert old.ceilings_origin.note == f"measured: those kept are {MAX_AGE_DAYS + 0.5:.1f} days old, more than 7"


@pytest.mark.parametrize("corrupt", [
    b'{"format": 1, "matmul_peak_tfl', b"\xff\xfe not text", b"[1, 2]", b'"a string"',
    lambda entry: {k: v for k, v in entry.items() if k != "memory_bandwidth_gbps"},
    lambda entry: entry | {"matmul_peak_tflops": "fast"}, lambda entry: entry | {"memory_bandwidth_gbps": -1.0},
    lambda entry: entry | {"matmul_peak_tflops": float("inf")},
    lambda entry: entry | {"matmul_peak_tflops": float("nan")},
    lambda entry: entry | {"measured_at": "yesterday"}, lambda entry: entry | {"measured_at": "2026-12-06T10:00:00"},
    lambda entry: entry | {"uuid": "GPU-another"}])
def test_a_corrupt_entry_is_one_warning_line_and_measured_afresh(h200, tmp_path, capsys, corrupt):
    h200.start(tmp_path, "first")
    [path] = (tmp_path / FOLDER).iterdir()
    entry = corrupt if isinstance(corrupt, bytes) else json.dumps(corrupt(json.loads(path.read_text()))).encode()
    path.write_bytes(entry)
    capsys.readouterr()
    second = h200.start(tmp_path, "second")
    warning = capsys.readouterr().err
    assert h200.measured == 2 and not second.ceilings_origin.reused
    assert warning.count("\n") == 1 and warning.startswith(f"warning: ceilings cache: {tmp_path}/")
    assert warning.endswith("; measuring them afresh\n") and "Traceback" not in warning
    assert h200.start(tmp_path, "third").ceilings_origin.run_id == "second"  # the entry is written anew


def test_the_ceilings_travel_in_the_bucket_as_the_compile_cache_does(h200, emulator):
    location = f"gs://{BUCKET}/nightly-jax-cache"  # k8s/render.py's compile cache beside gs://…/nightly
    first = h200.start(location, "first")
    [name] = [b.name for b in emulator.bucket().list_blobs(prefix=f"nightly-jax-cache/{FOLDER}/")]
    assert json.loads(emulator.text(name))["matmul_peak_tflops"] == first.matmul_peak_tflops
    assert h200.start(location, "second").ceilings_origin.run_id == "first" and h200.measured == 1  # the next pod


def test_a_store_that_cannot_be_read_is_warned_about_and_measured(h200, tmp_path, capsys):
    (tmp_path / "file").write_text("not a folder")
    described = h200.start(tmp_path / "file" / "jax", "first")
    assert not described.ceilings_origin.reused and described.matmul_peak_tflops
    assert "could not be written" in capsys.readouterr().err


def test_without_a_compile_cache_or_a_uuid_they_are_measured_at_every_start(h200, tmp_path):
    assert h200.start("off", "first").ceilings_origin.note == "measured: the compile cache is off, so none are kept"
    assert not h200.start("off", "second").ceilings_origin.reused and h200.measured == 2
    h200.facts = FACTS.model_copy(update={"uuid": None})
    assert not h200.start(tmp_path, "third").ceilings_origin.reused
    assert not h200.start(tmp_path, "fourth").ceilings_origin.reused and h200.measured == 4
    assert not (tmp_path / FOLDER).exists()


def test_a_cpu_has_no_ceilings_and_no_origin(tmp_path):
    settings = worker.Settings(parse_spec(spec_data(), {"xla"}), "cpu-run", str(tmp_path))
    described = worker._machine(worker.Start("jax", settings, describe=True), VERSIONS, str(tmp_path))
    assert described.matmul_peak_tflops is None and described.ceilings_origin is None


def test_the_key_names_what_can_change_the_ceilings():
    key = ceilings_cache.key(FACTS, VERSIONS)
    assert key["uuid"] == FACTS.uuid and key["power_limit_w"] == 700.0 and key["timer"] == "device"
    assert key["versions"] == {"jax": "0.11.2", "jaxlib": "0.11.2", "cuda_runtime": "12.9", "cudnn": "9.19.1"}
    assert key["xla_flags"] == [] and ceilings_cache.key(FACTS, VERSIONS, "--xla_gpu_x=1")["xla_flags"] == [
        "--xla_gpu_x=1"]
    assert ceilings_cache.key(None, VERSIONS) is None


@pytest.mark.parametrize("flag", [[], ["--measure-ceilings"]])
def test_the_flag_reaches_the_runs_workers(tmp_path, capsys, monkeypatch, flag):
    """`run --measure-ceilings` is in the Settings every worker of the run is started with."""
    given = []

    class Pool:
        def __init__(self, settings, stop, start_timeout_s):
            given.append(settings)
            self.stop_event = stop

        def worker(self, group):
            raise Stopped

        def close(self):
            pass

        kill = close

    monkeypatch.setattr(run, "Pool", Pool)
    spec = write_spec(tmp_path / "spec.yaml", spec_data())
    in_process(capsys, "run", spec, "--out", tmp_path / "out", "--spool", tmp_path / "spool", "--run-id", "r",
               *flag)
    assert [s.measure_ceilings for s in given] == [bool(flag)]


def test_the_gpus_idle_state_is_read_before_its_ceilings_are_measured(h200, tmp_path, monkeypatch):
    """burst waits to get back to the GPU's state before the run (power.Idle, docs/timing.md). Read after the ceilings'
    seconds of full load, it was a warmer GPU's in a run that measured them than in one that reused them."""
    from runner import compiler, power

    def readings(index: int = 0) -> GpuFacts:  # each measurement leaves the GPU warmer and drawing more
        return FACTS.model_copy(update={"temperature_c": 31 + 9 * h200.measured, "power_w": 75.2 + 300 * h200.measured})

    monkeypatch.setattr(gpu, "readings", readings)
    monkeypatch.setattr(compiler, "configure_cache", lambda location: location)  # JAX's own cache left as it is
    monkeypatch.setattr(worker, "_measurer", lambda *args: None)
    settings = worker.Settings(parse_spec(spec_data(), {"xla"}), "first", str(tmp_path))
    hello, _ = worker.hello(worker.Start("jax", settings, describe=True))
    assert h200.measured == 1 and hello.machine.ceilings_origin.run_id == "first"
    assert hello.idle == power.Idle(31, 75.2)


H200_MMA = 4096 * 132 * 1980 / 1e6  # dense bf16 TFLOP/s at its maximum SM clock (runner.metrics.peak_mma_tflops)


def _kept(tmp_path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (tmp_path / FOLDER).glob("*.json")]


def test_a_matmul_reading_under_half_the_gpus_mma_rate_serves_its_run_and_is_not_kept(h200, tmp_path, capsys):
    """A GPU time-shared with another pod reads about half its matmul: kept, it would spoil a week of runs."""
    h200.peak = 0.49 * H200_MMA
    low = h200.start(tmp_path, "shared")
    assert low.matmul_peak_tflops == h200.peak + 1 / 7 and not low.ceilings_origin.reused  # this run rates against it
    assert low.ceilings_origin.note == ("measured: none kept for this key; not kept: matmul 525 TFLOP/s is under 50% "
                                        "of the GPU's dense bf16 rate at its clock cap (1071 TFLOP/s)")
    warning = capsys.readouterr().err
    assert warning == (f"warning: ceilings cache: {tmp_path}: these are not kept: matmul 525 TFLOP/s is under 50% of "
                       "the GPU's dense bf16 rate at its clock cap (1071 TFLOP/s); this run rates against them\n")
    assert _kept(tmp_path) == []
    h200.peak = 0.51 * H200_MMA
    assert not h200.start(tmp_path, "alone").ceilings_origin.reused and h200.measured == 2
    assert h200.start(tmp_path, "next").ceilings_origin.run_id == "alone"


def test_the_mma_rate_is_at_the_application_clock_where_one_is_set(h200, tmp_path):
    """A GPU held to 1500 MHz application clocks (nvidia-smi -ac) runs its matmul at most at 1500 MHz."""
    h200.peak = 0.45 * H200_MMA  # 59 % of the rate at 1500 MHz
    h200.facts = FACTS.model_copy(update={"sm_clock_app_mhz": 1500})
    assert "not kept" not in h200.start(tmp_path, "capped").ceilings_origin.note and len(_kept(tmp_path)) == 1
    h200.facts = FACTS
    assert "not kept" in h200.start(tmp_path, "uncapped").ceilings_origin.note


@pytest.mark.parametrize("unknown", [{"capability": 8.9}, {"facts": FACTS.model_copy(update={"sm_count": None})},
                                     {"facts": FACTS.model_copy(update={"sm_clock_max_mhz": None,
                                                                        "sm_clock_app_mhz": None})},
                                     {"facts": FACTS.model_copy(update={"name": "NVIDIA H20", "sm_count": 78})},
                                     {"capability": 12.0, "facts": FACTS.model_copy(update={
                                         "name": "NVIDIA GeForce RTX 5090", "sm_count": 170})}])
def test_without_an_expected_rate_any_reading_is_kept_as_before(h200, tmp_path, unknown):
    """No MMA rate for the GPU (an L4's sm89 is not in runner.metrics' table, nor is an H20's or a GeForce RTX 50's
    cut rate, whose sm90 / sm120 rows hold for other GPUs; no SM count or clock): nothing to hold the first reading to,
    so it is kept, as before the rule."""
    for attribute, value in unknown.items():
        setattr(h200, attribute, value)
    h200.peak = 1.0
    assert h200.start(tmp_path, "first").ceilings_origin.note == "measured: none kept for this key"
    assert h200.start(tmp_path, "second").ceilings_origin.reused


def test_a_kept_entry_under_the_floor_is_not_reused(h200, tmp_path, capsys):
    """An entry kept before the rule (or by hand) whose matmul is implausible is measured afresh and replaced."""
    h200.start(tmp_path, "first")
    [path] = (tmp_path / FOLDER).iterdir()
    path.write_text(json.dumps(json.loads(path.read_text()) | {"matmul_peak_tflops": 400.0}))
    capsys.readouterr()
    second = h200.start(tmp_path, "second")
    assert not second.ceilings_origin.reused and h200.measured == 2
    assert second.ceilings_origin.note.startswith("measured: those kept are not plausible (matmul 400 TFLOP/s is under")
    warning = capsys.readouterr().err
    assert warning.count("\n") == 1 and "is not plausible (matmul 400 TFLOP/s" in warning
    assert h200.start(tmp_path, "third").ceilings_origin.run_id == "second"


@pytest.mark.parametrize("reading, told", [({"peak": 0.85 * 700}, "matmul 595 TFLOP/s is under 90% of the 700 "
                                            "TFLOP/s kept for this key before"),
                                           ({"copy": 0.85 * 4285}, "copy 3644 GB/s is under 90% of the 4286 GB/s kept "
                                            "for this key before")])
def test_a_renewal_under_the_entry_it_replaces_is_not_kept(h200, tmp_path, reading, told):
    """A week on, the new reading replaces the old only if each ceiling is at least 90 % of it: a GPU's readings
    spread a few percent, a hot neighbour or a time-shared GPU more. --measure-ceilings replaces it whatever it was."""
    h200.start(tmp_path, "first")
    _age(tmp_path, MAX_AGE_DAYS + 1)
    for attribute, value in reading.items():
        setattr(h200, attribute, value)
    renewed = h200.start(tmp_path, "renewal")
    assert renewed.ceilings_origin.note.endswith(f"; not kept: {told}")
    assert [entry["run_id"] for entry in _kept(tmp_path)] == ["first"]
    assert "not kept" not in h200.start(tmp_path, "asked", afresh=True).ceilings_origin.note
    assert [entry["run_id"] for entry in _kept(tmp_path)] == ["asked"]


def test_the_key_holds_the_xla_flags_that_can_change_a_kernel(h200, tmp_path, monkeypatch):
    """Normalised: the fake devices runner.machine adds for a spec's split, the CPU backend's flags and dumps are no
    part of it; the order flags are given in is none, and a flag given twice counts as XLA reads it (the last)."""
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_enable_triton_gemm=false --xla_gpu_autotune_level=2")
    h200.start(tmp_path, "first")
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_autotune_level=4 --xla_dump_to=/tmp/x --xla_gpu_autotune_level=2 "
                       "--xla_force_host_platform_device_count=8 --xla_cpu_use_thunk_runtime=false "
                       "--xla_gpu_dump_llvmir --xla_gpu_enable_triton_gemm=false")
    assert h200.start(tmp_path, "same").ceilings_origin.run_id == "first"
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_enable_triton_gemm=false")
    assert not h200.start(tmp_path, "other").ceilings_origin.reused and h200.measured == 2
    monkeypatch.delenv("XLA_FLAGS")
    assert not h200.start(tmp_path, "none").ceilings_origin.reused and h200.measured == 3


def test_kernel_flags_are_sorted_and_keep_each_flags_last_setting():
    assert machine.kernel_flags("") == []
    assert machine.kernel_flags("--xla_gpu_b=1 --xla_dump_to=d --xla_gpu_a --xla_gpu_b=2") == [
        "--xla_gpu_a", "--xla_gpu_b=2"]


def test_kernel_flags_of_a_cpu_keep_the_cpu_backends_flags_and_leave_out_the_gpus():
    """A CPU's run compiles for the CPU backend alone, a GPU's ceilings and cells for the GPU's: each keeps its own
    backend's flags and the flags of both, never the other's (the GPU is the default, the ceilings' key)."""
    flags = "--xla_cpu_enable_fast_math=false --xla_gpu_autotune_level=0 --xla_backend_optimization_level=1"
    assert machine.kernel_flags(flags, "cpu") == ["--xla_backend_optimization_level=1",
                                                         "--xla_cpu_enable_fast_math=false"]
    assert machine.kernel_flags(flags) == machine.kernel_flags(flags, "gpu") == [
        "--xla_backend_optimization_level=1", "--xla_gpu_autotune_level=0"]


def test_kernel_flags_leave_out_a_caches_location_and_keep_a_path_that_picks_the_compiler():
    """A per-pod cache folder must not make a resume another machine (nor re-key the ceilings), as kernel_env leaves
    out *DIR*/*PATH* variables; the CUDA toolkit folder picks ptxas and libdevice, which compile the kernels."""
    pod = "--xla_gpu_per_fusion_autotune_cache_dir=/tmp/pod-{} --xla_gpu_kernel_cache_file=/tmp/pod-{}/kernels"
    assert machine.kernel_flags(pod.format("a", "a")) == machine.kernel_flags(pod.format("b", "b")) == []
    toolkit = "--xla_gpu_cuda_data_dir=/usr/local/cuda-{}"
    assert machine.kernel_flags(toolkit.format("12.9")) == ["--xla_gpu_cuda_data_dir=/usr/local/cuda-12.9"]
    assert machine.kernel_flags(toolkit.format("12.9")) != machine.kernel_flags(toolkit.format("13.0"))
