"""The result record: the one contract between the runner, the stores and the dashboard.

Writers are strict, readers tolerant: building a record with a field this module does not define is an error,
while a stored record with fields this reader does not know (written by a newer attnbench) reads, its extra
fields kept as they were. Any change an older reader would misread bumps SCHEMA_VERSION and adds a step to
MIGRATIONS, so that every record and manifest ever written reads through `upgrade` (as asv's update_to_N).
"""

from __future__ import annotations

import copy
import datetime as dt
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import ConfigDict, Field

from runner.arguments import run_argv
from runner.shape import READING, Cotangent, Fp8Matmul, Params, Strict

SCHEMA_VERSION = 16
Status = Literal["ok", "skipped", "failed", "oom", "incorrect", "crashed", "timeout"]


def utc_now() -> str:
    """The timestamp format of every record: UTC, ISO 8601, seconds."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class TimerSummary(Strict):
    """One timer's samples summarised, in seconds per call."""

    timer: str = Field(description="wall (host clock around call + block_until_ready), device or device_cold.")
    median_s: float
    q1_s: float
    q3_s: float
    min_s: float
    samples: int
    noise: float = Field(description="Relative noise: IQR / median.")
    converged: bool = Field(description="Whether noise reached the target before the budget or cap ran out.")


class Correctness(Strict):
    """Agreement with the float32 reference on the same (dtype-rounded) inputs."""

    # a kernel that writes NaN has a NaN error, which JSON spells only as a string ("NaN", "Infinity"); every reader
    # takes those back as the floats (pydantic's lax floats), where null, the default, failed every reader
    model_config = ConfigDict(ser_json_inf_nan="strings")

    max_abs_err: float
    rel_err: float = Field(description="||out - ref|| / ||ref|| for the output.")
    grad_rel_err: dict[str, float] | None = Field(None, description="Same for dq, dk, dv under fwd_bwd.")
    cotangent: Cotangent | None = Field(None, description="fwd_bwd: the output cotangent dO the gradients were taken "
                                        "with: 'normal' (seeded normals), or 'normal, zero at padded query rows' for a "
                                        "padded batch (runner.inputs.cotangent: the only values ever written). None: "
                                        "not recorded (before 2026-12-06; the manifest's git_sha tells: from 44c74fc a "
                                        "padded cell's dO was already zero there, before it normal).")
    tolerance: float
    grad_tolerance: float | None = None
    causal_first_changed: bool | None = Field(None, description="Causal: row 0 differs from unmasked attention.")
    causal_last_unchanged: bool | None = Field(None, description="Causal: the last row equals unmasked attention.")
    bitwise_repeat: bool | None = Field(None, description="Cells asking for a deterministic backward: whether a "
                                        "second call on the same inputs gave the output and gradients bit for bit.")


class Fp8Info(Strict):
    """What FP8 really did in a cell whose variant promises FP8."""

    baseline: str | None = Field(None, description="The bf16 variant this FP8 variant is compared with.")
    in_hlo: bool = Field(description="Whether any f8 type appears in the compiled program.")
    in_kernels: bool | None = Field(None, description="Whether a kernel name that ran says f8/fp8/e4m3.")
    rel_err_vs_bf16: float | None = Field(None, description="||out - out_bf16|| / ||out_bf16|| on the same inputs.")
    matmuls: list[Fp8Matmul] | None = Field(None, description="The matmuls the variant runs on f8 values: 'qk' "
                                            "(Q·Kᵀ), 'pv' (P·V) (runner.shape.Fp8Matmul: no shipped variant declared "
                                            "another, and registration refuses one since fd7c08e); what its % of the "
                                            "MMA peak is set against (runner.metrics). None: both, as cudnn_fp8 and "
                                            "te_fp8 run them (no tokamax_triton_fp8 record was written before this "
                                            "field: that variant had not run on a GPU).")
    verdict: str = Field(description="One sentence a person can read.")


class Compilation(Strict):
    """How the timed program came to be."""

    seconds: float = Field(description="Wall time of lowering and compiling it, wherever that was spent.")
    cached: bool | None = Field(None, description="Loaded from the persistent compilation cache (None: no cache).")
    shared_with: str | None = Field(None, description="The variant of this shape whose identical executable "
                                    "(same HLO fingerprint) was reused instead of compiling again.")
    ahead: bool = Field(False, description="Compiled before the cell's turn, while the previous record was stored.")


class Candidate(Strict):
    """One configuration a tuned variant tried."""

    config: dict[str, Any]
    status: Literal["ok", "skipped"]
    median_s: float | None = Field(None, description="Device (else wall) median of a short sample.")
    reason: str = ""


class Tuning(Strict):
    """A variant's configuration search for this shape: the winner and what each candidate took."""

    config: dict[str, Any] = Field(description="The configuration that was timed (the fastest candidate); a "
                                   "library's autotuner: its chosen config per tuned op, by op name.")
    candidates: list[Candidate]
    tuner: str | None = Field(None, description="The library's autotuner that searched (tokamax.autotune); None: "
                              "attnbench's own search of the variant's configurations.")
    cached: bool | None = Field(None, description="A library's tuning read from the tuning cache (True) or run in "
                                "this cell (False); None: attnbench's own search, run every time.")


class Span(Strict):
    """Least, typical and largest value of a reading over the timed window."""

    min: float
    median: float
    max: float
    mean: float | None = None


class Telemetry(Strict):
    """The GPU's state while the headline timer sampled (NVML, read every few milliseconds from a thread)."""

    source: str = Field(description="nvml")
    timer: str | None = Field(None, description="The timer whose samples the readings span: the headline the sampling "
                              "takes first (runner.sampling.time_step; device on a GPU). The clock is that timer's "
                              "alone: no other timer's time is rated at it (runner.metrics.clock_of). None: not known.")
    samples: int
    sm_clock_mhz: Span
    mem_clock_mhz: Span | None = None
    power_w: Span | None = Field(None, description="NVML's power readings: a trailing one-second average, so they "
                                 "lag a short window (a burst sample reads low).")
    drawn_w: float | None = Field(None, description="Mean power over the window from NVML's energy counter: what "
                                  "was drawn, however short the window.")
    power_limit_w: float | None = None
    temperature_c: Span | None = None
    throttle: list[str] = Field(default_factory=list, description="Throttle reasons seen, in words.")
    clock_spread: float = Field(description="(max - min) / max of the SM clock during the samples.")


class PowerState(Strict):
    """Which power regime the cell was sampled in, and how it got there."""

    policy: Literal["steady", "burst"]
    settled: bool | None = Field(None, description="steady: the load reached a steady state (`rule`); burst: the "
                                 "GPU was back at its idle clock and temperature. None: not observable.")
    wait_s: float = Field(0.0, description="Seconds spent settling (steady) or cooling (burst) before sampling.")
    note: str = ""
    rule: Literal["held", "capped", "light", "unsettled"] | None = Field(
        None, description="steady: how the state was judged: the SM clock held within 1 % for 0.5 s, the GPU held its "
        "power cap at a steady power, a load too light to be capped, or none within settle_max_s.")
    sampled_in_load: bool | None = Field(
        None, description="steady: the samples are calls of the same unbroken stream of back-to-back calls that "
        "brought the GPU to its state, with no host gap before or between them (False: sampled after the settling, "
        "as attnbench did before schema 5; a gap of 20 ms hands the clock back on an H200).")
    load_s: float | None = Field(None, description="steady: seconds of unbroken load before the first timed call.")
    sample_s: float | None = Field(None, description="Seconds the timed calls spanned.")
    busy: float | None = Field(None, description="steady: the share of the stream's wall time its kernels ran "
                               "(CUPTI's kernel times over the host's clock); near 1 when the GPU never waited.")
    temperature_c: float | None = Field(None, description="The GPU's temperature at the first timed call.")
    carried_s: float | None = Field(
        None, description="steady, in load: seconds the cells before had kept the GPU under load when this cell's "
        "stream began (their streams joined across host gaps of at most 1 s); 0 after a longer gap or as a worker's "
        "first cell. None before 2026-12-06. At the first timed call the GPU had run load_s of this cell's stream, "
        "and before it, gap_s earlier, carried_s of the cells before.")
    gap_s: float | None = Field(None, description="steady, in load: seconds from the end of the previous cell's "
                                "stream to the start of this one (the host's bookkeeping); None as a worker's first.")


class SoakPoint(Strict):
    """One bin of a soak: the calls that ended in it and the GPU's state over it."""

    t_s: float = Field(description="Seconds of unbroken load at the bin's end.")
    calls: int
    tflops: float | None = Field(None, description="The median call's kernel time as TFLOP/s.")
    median_s: float | None = Field(None, description="Median kernel time of the bin's calls (CUPTI).")
    sm_clock_mhz: float | None = None
    power_w: float | None = Field(None, description="NVML's power reading (a trailing average).")
    drawn_w: float | None = Field(None, description="Power from the energy counter over the bin.")
    temperature_c: float | None = None
    throttle: list[str] = Field(default_factory=list)


class Soak(Strict):
    """One cell run back to back for `seconds` after its samples: throughput and the GPU's state against time."""

    seconds: float
    bin_s: float
    points: list[SoakPoint]


class Communication(Strict):
    """How a cell split across devices spent a call: moving data between the devices, and computing."""

    source: Literal["kernels", "twin"] = Field(description="kernels: the collective (NCCL) kernels the device "
                                               "timer saw, against the others, per device; twin: the cell's wall "
                                               "time against its variant's program without collectives.")
    communication_s: float = Field(description="Seconds per call: collective kernels per device (kernels), or the "
                                   "time the collectives added, not hidden behind compute (twin).")
    compute_s: float = Field(description="Seconds per call: the other kernels per device (kernels), or the "
                             "program without collectives (twin).")


class Window(Strict):
    """A span of the host's clock, in seconds since the epoch (comparable across a run's processes)."""

    start: float
    end: float


class CellRecord(Strict):
    """One measured (or skipped) cell."""

    schema_version: int = SCHEMA_VERSION
    key: str
    run_id: str
    experiment: str
    variant: str
    params: Params
    status: Status
    reason: str = ""
    started_at: str
    duration_s: float = Field(description="Wall time spent on the whole cell, compile and checks included.")
    compile_s: float | None = Field(None, description="Seconds spent compiling the timed program.")
    compilation: Compilation | None = None
    phases: dict[str, float] = Field(default_factory=dict, description="Seconds of duration_s per phase: inputs, "
                                     "reference, compile, check, tune, fp8, settle, communication (a split "
                                     "cell's twin) and one per timer.")
    timings: list[TimerSummary] = Field(default_factory=list)
    timer: str | None = Field(None, description="The timer that median_s, tflops and gbps come from.")
    median_s: float | None = None
    flops: int = Field(description="2*B*N*(H + Hv)*(score elements the mask keeps: causal, window, padding); "
                       "x3.5 for fwd_bwd.")
    bytes_min: int = Field(description="Q, K, V read once and O written once (plus gradients for fwd_bwd), over the "
                           "rows that take part: real tokens, and keys some query keeps (window, causal, padding).")
    kv_cache_bytes: int = Field(description="Bytes of K and V: 2*B*S*K*H*itemsize.")
    tflops: float | None = None
    gbps: float | None = None
    pct_of_peak: float | None = Field(None, description="tflops as % of the machine's measured matmul ceiling (a "
                                      "cell split across D GPUs: of D such ceilings, since schema 12).")
    pct_of_bandwidth: float | None = Field(None, description="gbps as % of the machine's measured copy bandwidth (a "
                                           "cell split across D GPUs: of D such ceilings, since schema 12).")
    temp_bytes: int | None = Field(None, description="compiled.memory_analysis().temp_size_in_bytes.")
    custom_calls: list[str] = Field(default_factory=list, description="HLO custom-call targets of the executable.")
    backend: str | None = Field(None, description="What the compiled program runs, proved by its custom calls: "
                                "a backend a variant declares (cudnn, transformer_engine, pallas_triton, ...) or xla.")
    kernels: list[str] = Field(default_factory=list, description="GPU kernels seen by the device timer.")
    correctness: Correctness | None = None
    fp8: Fp8Info | None = None
    tuning: Tuning | None = None
    communication: Communication | None = Field(None, description="Cells split across devices, where measurable.")
    power: PowerState | None = None
    telemetry: Telemetry | None = None
    soak: Soak | None = Field(None, description="The cell run back to back for timing.soak_s (a thermal curve).")
    load: Window | None = Field(None, description="When the timers kept the GPU busy: from the first call of the "
                                "headline's stream (its settling included; after a burst's cool-down) to the end of "
                                "the last timer's samples. The gaps between cells' windows are the GPU's idle time "
                                "between cells (scripts/bench_runner.py). None before 2026-12-06 and for cells not "
                                "timed.")
    telemetry_reason: str | None = Field(None, description="Why there is no telemetry (no NVIDIA GPU, no NVML).")
    clock_unstable: bool | None = Field(None, description="The SM clock moved more than 2 % during the samples.")
    energy_j: float | None = Field(None, description="Joules per call: mean power x median kernel time; the power is "
                                   "the energy counter's over a sample of 0.5 s or more, else NVML's reading after "
                                   "a second or more of steady back-to-back calls, else unknown (None).")
    tflops_per_j: float | None = Field(None, description="TFLOP per joule: flops / 1e12 / energy_j.")
    worker: str | None = Field(None, description="The worker (library set) that measured the cell.")
    attempts: int = Field(1, description="Processes that started this cell: more than 1 after a crash.")

    def row(self) -> dict:
        """A flat dict for tables: params, correctness, telemetry inlined; one column per timer and phase."""
        row = self.model_dump(exclude={"params", "correctness", "timings", "fp8", "phases", "compilation", "tuning",
                                       "power", "telemetry", "communication", "soak", "load"})
        row.update(self.params.as_dict())
        row.update(self.correctness.model_dump() if self.correctness else {})
        for t in self.timings:
            row.update({f"{t.timer}_{k}": getattr(t, k) for k in ("median_s", "q1_s", "q3_s", "noise", "samples",
                                                                  "converged")})
        row.update({f"phase_{name}_s": seconds for name, seconds in self.phases.items()})
        if self.fp8:
            row.update({f"fp8_{k}": v for k, v in self.fp8.model_dump().items()})
        if self.compilation:
            row.update({f"compile_{k}": v for k, v in self.compilation.model_dump().items() if k != "seconds"})
        if self.tuning:  # text to read, not to decode: the record holds the config itself
            row["tuning_config"] = " ".join(f"{k}={v}" for k, v in sorted(self.tuning.config.items()))
        if self.power:
            row.update({"power_policy": self.power.policy, "power_settled": self.power.settled,
                        "power_rule": self.power.rule, "power_in_load": self.power.sampled_in_load,
                        "power_load_s": self.power.load_s, "power_temperature_c": self.power.temperature_c})
        if self.communication:
            row.update({f"comm_{k}": v for k, v in self.communication.model_dump().items()})
        row.update(_telemetry_columns(self.telemetry))
        if self.load:
            row.update(load_start=self.load.start, load_end=self.load.end)
        row["soak_points"] = len(self.soak.points) if self.soak else None  # the points: runner.frames.soak_points
        row["custom_calls"] = ";".join(self.custom_calls)
        row["kernels"] = ";".join(self.kernels)
        return row


def _telemetry_columns(t: Telemetry | None) -> dict:
    if t is None:
        return {}
    columns = {f"sm_clock_{k}_mhz": v for k, v in t.sm_clock_mhz.model_dump().items()}
    if t.power_w:
        columns.update(power_mean_w=t.power_w.mean, power_max_w=t.power_w.max)
    if t.temperature_c:
        columns["temperature_max_c"] = t.temperature_c.max
    return columns | {"telemetry_timer": t.timer, "power_limit_w": t.power_limit_w, "throttle": ";".join(t.throttle),
                      "clock_spread": t.clock_spread}


class GpuFacts(Strict):
    """NVML (or nvidia-smi) readings of one GPU at a moment."""

    name: str | None = None
    uuid: str | None = Field(None, description="NVML's GPU-… id of this very GPU; None before 2026-12-06.")
    memory_total_mib: int | None = None
    driver: str | None = None
    cuda_driver: str | None = None
    sm_count: int | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_mhz: int | None = None
    sm_clock_app_mhz: int | None = Field(None, description="The SM application clock in force (a cap set with "
                                         "`nvidia-smi -ac`); None where the GPU has none, or before 2026-12-06.")
    mem_clock_app_mhz: int | None = Field(None, description="The memory application clock in force.")
    temperature_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    source: str | None = Field(None, description="nvml or nvidia-smi.")


class CeilingsOrigin(Strict):
    """Where a run's ceilings (matmul_peak_tflops, memory_bandwidth_gbps) came from."""

    reused: bool = Field(description="Read from those kept beside the compile cache, measured by an earlier start on "
                         "the same GPU and key (runner/ceilings_cache.py); False: measured at this run's start.")
    run_id: str = Field(description="The run whose start measured them: this one, or the earlier one reused.")
    measured_at: str = Field(description="When they were measured (UTC).")
    note: str = Field("", description="Why they were measured (none kept for the key, too old, --measure-ceilings, "
                      "no compile cache), or how old the reused ones are; after '; not kept: ', why ceilings measured "
                      "here were not kept for later runs (not plausible: docs/timing.md).")


NOT_RECORDED = "not recorded"  # a fact older runners did not write (None), never to be read as none set
NONE_SET = "(none)"


class Machine(Strict):
    """Where a run ran."""

    host: str
    platform: str = Field(description="jax platform: cpu or gpu.")
    device_kind: str
    device_count: int
    compute_capability: str | None = None
    versions: dict[str, str] = Field(default_factory=dict, description="jax, jaxlib, flax, cuda, cudnn, te, ...")
    gpu: GpuFacts | None = Field(None, description="NVML facts at the start: name, memory, SMs, driver, clocks.")
    matmul_peak_tflops: float | None = Field(None, description="Measured bf16 matmul ceiling on this device (at "
                                             "this run's start or an earlier one's: ceilings_origin).")
    memory_bandwidth_gbps: float | None = Field(None, description="Measured device-memory copy bandwidth "
                                                "(read + write bytes of a large copy over its kernel time).")
    ceilings_origin: CeilingsOrigin | None = Field(None, description="Where the two ceilings came from: measured at "
                                                   "this run's start or reused, and when; None without ceilings.")
    xla_flags: list[str] | None = Field(None, description="The XLA_FLAGS that can change the run's kernels, as its "
                                        "environment gave them, normalised as the ceilings' key has them (runner."
                                        "machine.kernel_flags: each flag's last setting, sorted; the CPU's fake "
                                        "devices, dumps and the other platform's flags left out); [] where none is "
                                        "set. None: not recorded (runs before 2026-12-07).")
    kernel_env: dict[str, str] | None = Field(None, description="The environment variables that can change the run's "
                                              "kernels (runner.machine.kernel_variable: TransformerEngine's NVTE_* but "
                                              "build, path and logging ones, JAX's settings of what XLA compiles, "
                                              "NVIDIA_TF32_OVERRIDE), by name; {} where none is set. None: not "
                                              "recorded (runs before 2026-12-07).")

    def kernel_settings(self) -> dict[str, str]:
        """xla_flags and kernel env as text ('--xla_gpu_autotune_level=0', 'NVTE_FUSED_ATTN=0'): NONE_SET where the
        run recorded none set, NOT_RECORDED where its runner did not record them."""
        flags, env = self.xla_flags, self.kernel_env
        return {"xla_flags": NOT_RECORDED if flags is None else " ".join(flags) or NONE_SET,
                "kernel env": NOT_RECORDED if env is None else " ".join(f"{k}={v}" for k, v in env.items()) or NONE_SET}


class VariantInfo(Strict):
    """What a reader needs to know about a variant, kept with the run so old runs never need today's code."""

    doc: str = ""
    backend: str | None = Field(None, description="The backend its custom calls prove; None: decided when compiled.")
    fp8_baseline: str | None = Field(None, description="FP8 variants: the bf16 variant it is compared with.")
    requires: list[str] = Field(default_factory=list, description="Its requirements, in words.")
    worker: str = Field("jax", description="The worker (library set) its cells run in.")
    legacy: str | None = Field(None, description="A variant on a deprecated library: the deprecation and what "
                               "replaces it; None otherwise, and in runs before 2026-12-06 (an older reader keeps it "
                               "as an extra field).")


class WorkerInfo(Strict):
    """One worker process: the libraries it loaded and the variants it ran."""

    versions: dict[str, str] = Field(default_factory=dict)
    variants: list[str] = Field(default_factory=list)
    error: str | None = Field(None, description="Why the worker's libraries could not be loaded.")
    start_s: dict[str, float] = Field(default_factory=dict, description="Seconds of each step of the worker's "
                                      "start (libraries, backend, compile_cache, machine: the ceilings measured or "
                                      "read, measurer), outside every cell; a spare's libraries loaded while another "
                                      "worker measured.")


class Manifest(Strict):
    """What a run was: its spec, machine and times. Stored beside cells.jsonl."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    name: str
    spec: dict
    spec_hash: str
    started_at: str
    ended_at: str | None = None
    machine: Machine
    git_sha: str | None = None
    shard: str | None = Field(None, description="i/n when the run is one shard of several.")
    gpu_at_end: GpuFacts | None = Field(None, description="SM clock and temperature at the end.")
    cells_planned: int = 0
    argv: list[str] = Field(default_factory=list)
    variants: dict[str, VariantInfo] = Field(default_factory=dict, description="Every variant the spec names.")
    workers: dict[str, WorkerInfo] = Field(default_factory=dict, description="Worker processes by library set.")
    phases: dict[str, float] = Field(default_factory=dict, description="Seconds per phase over every cell measured.")
    compile_cache: str | None = Field(None, description="The persistent compilation cache used, or 'off'.")
    cell_order: list[str] | None = Field(None, description="Keys of the whole run's cells (every shard's) in run "
                                         "order, for readers to present them without today's spec model; absent "
                                         "from runs before 2026-12-03 (readers re-expand their spec).")
    earlier_facts: dict[str, list[str]] | None = Field(None, description="Facts of the machine that earlier processes "
                                                       "or shards of this run measured cells under, where they differ "
                                                       "from this manifest's and the resume went on (RESUMABLE: the "
                                                       "GPU driver), as compare names them ('gpu driver'), each with "
                                                       "its earlier values. None: no such difference (and runs before "
                                                       "2026-12-07; an older reader keeps it as an extra field).")
    sampled_after_settling: bool | None = Field(False, description="steady: the run's cells were sampled after the "
                                                "load settled, in CUPTI sessions after host gaps, not inside the load "
                                                "(every steady run before schema 5: the 4 -> 5 step sets it, as it "
                                                "sets each cell's power.sampled_in_load false). False for every run "
                                                "since, and for a burst run. None means one thing: a sharded run "
                                                "whose shards sampled under the two rules (STEADY_RULES), which only "
                                                "the shards' merged manifest says (runner.results.merged_manifest); "
                                                "no part's manifest is written with it, each saying its own rule.")
    rechecks: str | None = Field(None, description="The run whose slower cells this run measured again (`attnbench "
                                 "recheck`: these cells alone, the same spec, on the same machine); None: an ordinary "
                                 "run (and runs before 2026-12-07). Written with no step at schema 15, stepped at 16 "
                                 "(_v15_to_v16), so that an older reader says a recheck is a newer attnbench's.")


# The material facts (runner.compare.MATERIAL) a resume goes on across, where every other one refuses it
# (runner.resume), each named as compare names it and read off a machine: on GKE a node pool upgrades its driver on its
# own and a retried shard may land on a node of a newer one, while the image pins every library. A run's manifest keeps
# the values its earlier cells ran under (earlier_facts), and a sharded run's merged manifest its other shards'.
RESUMABLE = {"gpu driver": lambda machine: machine.gpu.driver if machine.gpu else None}


def resumable_facts(machine: Machine) -> dict[str, str]:
    """The machine's RESUMABLE facts, where it records them."""
    return {fact: value for fact, read in RESUMABLE.items() if (value := read(machine)) is not None}


def merged_earlier(earlier: Iterable[Mapping[str, list[str]]], now: Mapping[str, str]) -> dict[str, list[str]]:
    """Each fact's earlier values (earlier_facts) gathered from `earlier` in order, each once, but the value it has
    `now`; a fact left with none is dropped."""
    merged: dict[str, list[str]] = {}
    for facts in earlier:
        for fact, values in facts.items():
            merged.setdefault(fact, []).extend(value for value in values if value != now.get(fact))
    return {fact: list(dict.fromkeys(values)) for fact, values in merged.items() if values}


def gpu_model(manifest: Manifest) -> str | None:
    """The GPU's name as NVML read it; None on a machine without one (cpu)."""
    gpu = manifest.machine.gpu
    return gpu.name if gpu and gpu.name else None


def gpu_name(manifest: Manifest) -> str:
    """The GPU's name, else the device kind (cpu): how every reader tells machines apart (compare, runs, report)."""
    return gpu_model(manifest) or manifest.machine.device_kind


CUDNN_BACKENDS = ("cudnn", "transformer_engine")  # our backends whose attention kernel is cuDNN's (TE's fused attention)


def cudnn_ran(variant: str, backend: str | None, manifest) -> str | None:
    """The cuDNN our cell ran, where its backend is cuDNN's attention: that of the worker that ran its variant (TE's
    worker loads its own cuDNN: 9.14.0 beside jax's 9.19.0 in the shipped H200 runs), else the run's machine's (runs
    before the manifest listed its workers); None elsewhere."""
    if backend not in CUDNN_BACKENDS or manifest is None:
        return None
    worker = next((w for w in manifest.workers.values() if variant in w.variants), None)
    return (worker and worker.versions.get("cudnn")) or manifest.machine.versions.get("cudnn")


def power_policy(manifest: Manifest) -> str | None:
    """The power state the run's spec sampled cells in, with the steady rule that sampled it: 'burst', 'steady (in
    load)' or 'steady (after settling)' (every steady run before schema 5, which read faster than the GPU sustains
    at heavy shapes: docs/timing.md), or both where a sharded run's shards differ; None for runs from before the
    choice. How every reader names a run's policy (compare, runs, show's and the report's header, the dashboard)."""
    timing = manifest.spec.get("timing") if isinstance(manifest.spec, dict) else None
    return policy_named(timing.get("power") if isinstance(timing, dict) else None, manifest.sampled_after_settling)


NO_POLICY = "none"  # a run from before the choice of power policy, wherever its policy is named (policy_said)


def policy_said(manifest: Manifest) -> str:
    """The run's power policy in words: power_policy's, else NO_POLICY."""
    return power_policy(manifest) or NO_POLICY


# A steady run's rule by its manifest's sampled_after_settling: today's runs sample in the load, a steady run before
# schema 5 after settling; a sharded run whose shards sampled under both is labelled as neither, so compare refuses it
# against a run of either rule as it refuses the two rules against each other.
STEADY_RULES = {False: "in load", True: "after settling", None: "two rules: in load, after settling"}


def policy_named(power: str | None, after_settling: bool | None = False) -> str | None:
    """A spec's timing.power as a policy, with the steady rule (STEADY_RULES)."""
    if power != "steady":
        return power
    return f"steady ({STEADY_RULES[after_settling]})"


# The options of `attnbench run` that set how a run made its cells beyond its spec (the runner's own choices; its
# compile cache is the manifest's, said only when off, since each run may name a folder of its own) and which of the
# spec's cells it planned; the rest say where it stored them (--out, --run-id, --spool) or are in the stored spec
# (--power, --budget).
HOW_OPTIONS = ("--compile-ahead", "--compile-cache", "--measure-ceilings")
PLAN_OPTIONS = ("--only", "--variants", "--where")


def run_settings(manifest: Manifest, options: tuple[str, ...] = HOW_OPTIONS + PLAN_OPTIONS) -> str:
    """The run's settings among `options` (arguments.run_argv: as run's own parser read its argv, the default
    --compile-ahead on left out, '--compile-cache off' where its compile cache was off) as a shell reads them, a value
    that holds a space quoted; '' where none: what sets apart runs of one spec (`runs`, compare.previous)."""
    return shlex.join(run_argv(manifest, options))


# --- migrations: one step per schema_version, applied in order --------------------------------------------------

# What schema 1 could not say about its variants (all that attnbench 0.1 shipped), frozen here so that old runs
# read the same whatever variants exist today.
V1_VARIANTS = {
    "naive": VariantInfo(doc="From scratch: matmul, softmax, matmul; materialises the (B, N, T, S) weights.",
                         backend="xla"),
    "xla": VariantInfo(doc='jax.nn.dot_product_attention(implementation="xla").', backend="xla"),
    "cudnn": VariantInfo(doc='jax.nn.dot_product_attention(implementation="cudnn"): cuDNN\'s fused kernel.',
                         backend="cudnn", requires=["NVIDIA GPU with compute capability >= 8.0",
                                                    "dtype bfloat16 or float16", "head_dim a multiple of 8, <= 128"]),
    "auto": VariantInfo(doc="jax.nn.dot_product_attention(implementation=None): JAX picks."),
    "te": VariantInfo(doc="TransformerEngine flax DotProductAttention.", backend="transformer_engine",
                      requires=["NVIDIA GPU with compute capability >= 8.0", "the transformer_engine package"]),
    "te_fp8": VariantInfo(doc="The same module under te.autocast(DelayedScaling).", backend="transformer_engine",
                          fp8_baseline="te", requires=["NVIDIA GPU with compute capability >= 8.9",
                                                       "the transformer_engine package"]),
    "cudnn_fp8": VariantInfo(doc="cuDNN FP8 flash attention (e4m3, per-tensor amax scales).", backend="cudnn",
                             fp8_baseline="cudnn", requires=["NVIDIA GPU with compute capability >= 9.0",
                                                             "dtype bfloat16", "forward only"]),
}


class BadRecord(ValueError):
    """A stored field a migration step reads is of a shape no writer gave it (a string where the spec's mapping was):
    the record is bad input, as a bad line is. Any other error inside a step is the step's bug and raises as one."""


NUMBER = (int, float)


def _field(mapping: dict, path: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    """The field `path` names (its last part is the key in `mapping`), `default` where missing or null; BadRecord
    where it is of another kind."""
    value = mapping.get(path.rsplit(".", 1)[-1])
    if value is None:
        return default
    if not isinstance(value, kind):
        names = kind if isinstance(kind, tuple) else (kind,)
        raise BadRecord(f"{path} is {type(value).__name__}, not {' or '.join(n.__name__ for n in names)}")
    return value


def _items(mapping: dict, path: str, kind: type) -> list:
    """The list `path` names ([] where missing or null), each of its items of `kind`, else BadRecord."""
    values = _field(mapping, path, list, [])
    if bad := [v for v in values if not isinstance(v, kind)]:
        raise BadRecord(f"{path} holds a {type(bad[0]).__name__}, not {kind.__name__}")
    return values


def _v1_to_v2(data: dict, kind: str) -> dict:
    """Schema 2: manifests carry what a reader needs about each variant; GPU facts are typed (empty is None);
    FP8 cells name their baseline."""
    if kind == "manifest":
        experiments = _items(_field(data, "spec", dict, {}), "spec.experiments", dict)
        names = [v for exp in experiments for v in _items(exp, "spec.experiments.variants", str)]
        data["variants"] = {n: V1_VARIANTS[n].model_dump() for n in dict.fromkeys(names) if n in V1_VARIANTS}
        if isinstance(data.get("machine"), dict):
            data["machine"]["gpu"] = data["machine"].get("gpu") or None
        data["gpu_at_end"] = data.get("gpu_at_end") or None
    elif isinstance(data.get("fp8"), dict) and data["fp8"].get("baseline") is None:
        known = V1_VARIANTS.get(_field(data, "variant", str))
        data["fp8"]["baseline"] = known.fp8_baseline if known else None
    return data


def _v2_to_v3(data: dict, kind: str) -> dict:
    """Schema 3 adds fields an older reader would refuse (phases, compilation, tuning, power, telemetry, energy,
    worker, attempts, workers, memory bandwidth) and the statuses `crashed` and `timeout`; nothing old changes."""
    return data


def _v3_to_v4(data: dict, kind: str) -> dict:
    """Schema 4: a cell's energy as the runner derives it since 2026-12-03. NVML's energy counter moves in steps of
    about 100 ms on an H200 (27 ms, this said until 2026-12-07: docs/benchmarks.md), so a `telemetry.drawn_w` over
    a headline sample shorter than half a second is no figure (on an H200 such samples read 0 to 2084 W); NVML's power reading, a trailing one-second average, stands for the
    sample only after a second or more of steady back-to-back calls (a burst, or a light load settled in 0.1-0.5 s,
    had it lagging). Where neither holds, a cell has no energy. The numbers are this step's own, frozen: the
    Recorder's window lies within the headline timer's phase, `phases.device`."""
    telemetry = data.get("telemetry") if kind == "cell" else None
    if not isinstance(telemetry, dict):
        return data
    device_s = _field(_field(data, "phases", dict, {}), "phases.device", NUMBER, 0.0)
    if _field(telemetry, "telemetry.drawn_w", NUMBER) is not None and device_s < 0.5:
        telemetry["drawn_w"] = None
    state, power_w = _field(data, "power", dict, {}), _field(telemetry, "telemetry.power_w", dict, {})
    watts = telemetry.get("drawn_w")
    if watts is None and state.get("policy") == "steady" and (_field(state, "power.wait_s", NUMBER) or 0.0) >= 1.0:
        watts = _field(power_w, "telemetry.power_w.mean", NUMBER)
    seconds, flops = _field(data, "median_s", NUMBER), _field(data, "flops", NUMBER)
    if watts and seconds and data.get("timer") != "wall":
        data["energy_j"] = watts * seconds
        data["tflops_per_j"] = flops / 1e12 / data["energy_j"] if flops else None
    else:
        data["energy_j"] = data["tflops_per_j"] = None
    return data


def _v4_to_v5(data: dict, kind: str) -> dict:
    """Schema 5: a steady cell says whether its samples were taken inside the load (`power.sampled_in_load`).
    Before, they never were: the runner settled the GPU, then sampled in CUPTI sessions after host gaps, which on
    an H200 let the clock recover (at T=16k it read 18 % above what the GPU sustains, docs/benchmarks.md); so a
    stored steady record reads as sampled after the load. Its telemetry stays what it was: the samples' window. A
    steady run's manifest says the same of its run (sampled_after_settling), so the readers that see only manifests
    (compare's power policy, runs, a report's header) tell the two steady rules apart."""
    state = data.get("power") if kind == "cell" else None
    if isinstance(state, dict) and state.get("policy") == "steady":
        state.setdefault("sampled_in_load", False)
    spec = data.get("spec") if kind == "manifest" else None
    timing = spec.get("timing") if isinstance(spec, dict) else None
    if isinstance(timing, dict) and timing.get("power") == "steady":
        data.setdefault("sampled_after_settling", True)
    return data


def _v5_to_v6(data: dict, kind: str) -> dict:
    """Schema 6: a cell's params gain window, fill, bias, softcap, v_head_dim and tp; a cell written before them
    ran none of them (no window, no padding, no bias, no cap, V as wide as K, the whole model's heads on one GPU).
    The defaults are this step's own, frozen; a cell's key leaves them out, so it stays the key it was written with."""
    params = data.get("params") if kind == "cell" else None
    if isinstance(params, dict):
        _v6_model_axes(params)
    return data


def _v6_model_axes(params: dict) -> None:
    """Schema 6's model axes at what a cell written before them ran, where they are missing."""
    for name, default in {"window": None, "fill": 1.0, "bias": "none", "softcap": None, "tp": 1}.items():
        params.setdefault(name, default)
    params.setdefault("v_head_dim", params.get("head_dim"))


def _v6_to_v7(data: dict, kind: str) -> dict:
    """Schema 7: a cell's params name the devices its sequence is split across (the `devices` axis); every earlier
    cell ran on one. Its key is unchanged: a quiet axis at its default is left out of the key. Cells split across
    devices may carry `communication`, which no earlier cell has.

    Two branches wrote schema 6 on 2026-12-03 before their merge numbered them 6 and 7: the model axes (what step 6
    adds), and the devices alone (attnbench at 5c929e5): a cell of the second has `devices` and none of the model
    axes, which it ran without, so they are given here too."""
    if kind == "cell" and isinstance(data.get("params"), dict):
        data["params"].setdefault("devices", 1)
        _v6_model_axes(data["params"])
    return data


# Schema 8's count of a cell's least traffic, frozen here as runner.metrics.bytes_min (and runner.masks) counted
# it when schema 8 came in: a later change to today's count must not rewrite old records (asv's update_to_N never
# imports the live model).
V8_ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}


def _v8_lengths(batch: int, length: int, fill: float) -> list[int]:
    """Real tokens of each sequence of a padded batch: the widest even spread of fractions whose mean is `fill`."""
    spread = min(fill, 1 - fill)
    fractions = [fill] if batch == 1 else [fill - spread + 2 * spread * b / (batch - 1) for b in range(batch)]
    return [max(1, min(length, round(f * length))) for f in fractions]


def _v8_keys_kept(q_len: int, kv_len: int, causal: bool, window: int | None) -> int:
    """Keys of one sequence that some query keeps: the first kv_len (none past the last query under a top-left
    causal mask, none past its window's reach otherwise)."""
    if causal:
        return min(q_len, kv_len)
    return kv_len if window is None else min(q_len + window - 1, kv_len)


def v8_bytes_min(p: dict) -> int:
    """Schema 8's least traffic of a cell of stored params: Q, K, V read and O written once over the rows that take
    part (real tokens, keys some query keeps), at the mean of the two head dimensions; 3x that with backward."""
    width = V8_ITEMSIZE[p["dtype"]] * (p["head_dim"] + p["v_head_dim"]) / 2
    sequences = [(p["seq_len"], p["kv_seq_len"])] * p["batch"]
    if p["fill"] < 1:
        sequences = list(zip(_v8_lengths(p["batch"], p["seq_len"], p["fill"]),
                             _v8_lengths(p["batch"], p["kv_seq_len"], p["fill"])))
    queries = sum(q_len for q_len, _ in sequences)
    keys = sum(_v8_keys_kept(q_len, kv_len, p["causal"], p["window"]) for q_len, kv_len in sequences)
    q, kv = int(queries * p["heads"] * width), int(keys * p["kv_heads"] * width)
    return 6 * q + 6 * kv if p["pass"] == "fwd_bwd" else 2 * q + 2 * kv


def _v7_to_v8(data: dict, kind: str) -> dict:
    """Schema 8: `bytes_min` counts only the rows that take part (v8_bytes_min): a padded batch's real tokens and the
    keys some query keeps. Before, it counted every row of Q, K and V, so a kernel that skips a window's or the
    padding's keys was credited with bytes it never read: a decode with a window of 4096 keys over a cache of 128k
    read 53,560 GB/s on an H200 whose copy bandwidth is 4,285. The step recounts the cell's bytes from its params by
    schema 8's rule and scales gbps and pct_of_bandwidth by new / old; a cell whose every row takes part (no
    padding, no window, not causal with T < S) is left as it was."""
    if kind != "cell" or not isinstance(data.get("params"), dict) or not _field(data, "bytes_min", NUMBER):
        return data
    try:
        recounted = v8_bytes_min(data["params"])
    except (KeyError, TypeError, ValueError):  # params it cannot count: the record keeps what it was written with
        return data
    ratio = recounted / data["bytes_min"]
    if ratio != 1:
        data["bytes_min"] = recounted
        for name in ("gbps", "pct_of_bandwidth"):
            if isinstance(data.get(name), (int, float)):
                data[name] *= ratio
    return data


def _v8_to_v9(data: dict, kind: str) -> dict:
    """Schema 9: a cell's params gain the serving axes (kv_lengths, kv_spread, page_size, page_order); a cell written
    before them was no serving cell: every sequence S keys, a dense cache, causal top-left. The defaults are this
    step's own, frozen; a cell's key leaves them out, so it stays the key it was written with."""
    if kind == "cell" and isinstance(data.get("params"), dict):
        for name, default in {"kv_lengths": None, "kv_spread": 0.5, "page_size": None,
                              "page_order": "contiguous"}.items():
            data["params"].setdefault(name, default)
    return data


def _v9_to_v10(data: dict, kind: str) -> dict:
    """Schema 10: a cell's params name the documents packed in each row (`documents`) and whether its backward was
    asked to be deterministic (`deterministic`); every earlier cell ran one document a row, with the backward as
    the libraries chose. Its key is unchanged (quiet axes at their default are left out of keys)."""
    if kind == "cell" and isinstance(data.get("params"), dict):
        data["params"].setdefault("documents", 1)
        data["params"].setdefault("deterministic", False)
    return data


def _v10_to_v11(data: dict, kind: str) -> dict:
    """Schema 11: a cell's params say whether the library tuned its kernel for the shape first (`tune`); every
    earlier cell ran the library's untuned defaults. Its key is unchanged (a quiet axis at its default)."""
    if kind == "cell" and isinstance(data.get("params"), dict):
        data["params"].setdefault("tune", False)
    return data


def _v11_to_v12(data: dict, kind: str) -> dict:
    """Schema 12: a cell split across D GPUs (params.devices) has pct_of_peak and pct_of_bandwidth as shares of D
    GPUs' measured ceilings, as its TFLOP/s and GB/s are the whole call's (D GPUs' work over one wall time). Before,
    they were shares of one GPU's ceilings, and read up to D x 100 %; the step divides both by D, so an old split
    cell reads what a new one of the same rates would. A cell on one GPU, or without a share, is left as it was."""
    params = data.get("params") if kind == "cell" else None
    devices = params.get("devices", 1) if isinstance(params, dict) else 1
    if not isinstance(devices, int) or isinstance(devices, bool) or devices <= 1:
        return data
    for name in ("pct_of_peak", "pct_of_bandwidth"):
        if isinstance(data.get(name), (int, float)) and not isinstance(data[name], bool):
            data[name] /= devices
    return data


def _v12_to_v13(data: dict, kind: str) -> dict:
    """Schema 13: a machine's ceilings may be reused, measured at an earlier run's start on the same GPU and key, and
    the machine says where they came from (`ceilings_origin`). Before, every run measured its own at its start, so a
    manifest with a ceiling reads as measured in its own run at its start time (a resumed run's were measured when
    it resumed, a time schema 12 did not keep). Cells are unchanged."""
    machine = data.get("machine") if kind == "manifest" else None
    if not isinstance(machine, dict) or machine.get("ceilings_origin") is not None:
        return data
    if machine.get("matmul_peak_tflops") is not None or machine.get("memory_bandwidth_gbps") is not None:
        machine["ceilings_origin"] = {"reused": False, "run_id": data.get("run_id"), "measured_at":
                                      data.get("started_at"), "note": "measured at the run's start, or at its "
                                      "resume for a resumed run (schema 12 and before measured them at every start and "
                                      "kept no time of a resume: measured_at is the run's start)"}
    return data


def _v13_to_v14(data: dict, kind: str) -> dict:
    """Schema 14: no steady cell pairs a "light" or "no throttle" note with a throttle reason. Before, a load was
    judged light from the readings that came before its samples, and the samples' telemetry could then list the
    power cap (two schema-3 H200 cells shipped so: hopper-long-cold-20261203-023241's te, kernels-20261202's
    pallas_mgpu). Such a cell keeps its reasons, and its note says what is true: the load was not light while it
    sampled, which an old runner judged it from earlier readings (their watts kept); its settling is not known to have
    held (settled False, a light rule unsettled). The words are this step's own, frozen; "idle" is no reason."""
    state, telemetry = (data.get("power"), data.get("telemetry")) if kind == "cell" else (None, None)
    if not isinstance(state, dict) or not isinstance(telemetry, dict) or state.get("policy") != "steady":
        return data
    reasons = [r for r in _items(telemetry, "telemetry.throttle", str) if r != "idle"]
    note = _field(state, "power.note", str, "")
    if reasons and ("light" in note or "no throttle" in note):
        drawn = re.search(r"\d+ W of \d+ W", note)
        state["note"] = (f"not light while sampled: its samples' telemetry saw {', '.join(reasons)}; a runner before "
                         f"schema 14 judged the load light{f' ({drawn[0]})' if drawn else ''} from readings before them")
        state["settled"] = False
        if state.get("rule") == "light":
            state["rule"] = "unsettled"
    return data


def _v14_to_v15(data: dict, kind: str) -> dict:
    """Schema 15: a cell's telemetry names the timer whose samples it spans (`telemetry.timer`). Every runner that
    wrote telemetry (schema 3 on, from 6b3c339) read it over its first timer's samples only (time_step's headline,
    timers[0]) and kept the timings in the order it sampled them, so an older cell's is its first timing's timer
    (device on a GPU; a split cell's headline `timer` is wall all the same). The rule is this step's own, frozen."""
    telemetry, timings = (data.get("telemetry"), data.get("timings")) if kind == "cell" else (None, None)
    if isinstance(telemetry, dict) and telemetry.get("timer") is None and isinstance(timings, list) and timings \
            and isinstance(timings[0], dict):
        telemetry["timer"] = timings[0].get("timer")
    return data


def _v15_to_v16(data: dict, kind: str) -> dict:
    """Schema 16: a manifest may say that its run measured another run's slower cells again (`rechecks`: attnbench
    recheck's B-recheck), which changes how it is read (never a night of its series, never the run before B). Schema
    15's recheck wrote it with no step, so a reader from before it read B-recheck silently as an ordinary run; from
    16 on, such a reader says the run is a newer attnbench's. A manifest that lacks it is an ordinary run's, as every
    one before the field was (its default, None); one that has it, schema 15's recheck's, keeps it: nothing to move."""
    return data


# version N -> the step that makes it N + 1
MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5, 5: _v5_to_v6, 6: _v6_to_v7, 7: _v7_to_v8,
              8: _v8_to_v9, 9: _v9_to_v10, 10: _v10_to_v11, 11: _v11_to_v12, 12: _v12_to_v13,
              13: _v13_to_v14, 14: _v14_to_v15, 15: _v15_to_v16}


def upgrade(data: dict, kind: Literal["cell", "manifest"]) -> dict:
    """Bring a stored record or manifest of any earlier schema_version to this one, step by step.

    A version newer than this reader's is left as it is: its known fields read and the rest are kept. A record whose
    fields a step cannot read (a string where the spec's mapping was: BadRecord, which each step raises for the
    shapes it reads) is a ValueError, as a bad line is; any other error of a step is a bug and raises as it is.
    """
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"schema_version {version!r} is not a version")
    if version < SCHEMA_VERSION:
        data = copy.deepcopy(data)  # the steps edit nested objects in place
    while version < SCHEMA_VERSION:
        try:
            data = MIGRATIONS[version](data, kind)
        except BadRecord as error:
            raise ValueError(f"not a valid record (upgrading schema_version {version} to {version + 1}: "
                             f"{error})") from None
        version += 1
        data["schema_version"] = version
    return data


def read_cell(data: dict) -> CellRecord:
    """A stored cell record, upgraded and validated as a reader (unknown fields kept)."""
    return CellRecord.model_validate(upgrade(data, "cell"), context=READING)


def read_manifest(data: dict) -> Manifest:
    """A stored manifest, upgraded and validated as a reader (unknown fields kept)."""
    return Manifest.model_validate(upgrade(data, "manifest"), context=READING)
