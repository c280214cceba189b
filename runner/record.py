"""The result record: the one contract between the runner, the stores and the dashboard.

Bump SCHEMA_VERSION on any change that an older reader would misread, and teach `upgrade` the step.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
Status = Literal["ok", "skipped", "failed", "oom", "incorrect"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Params(_Record):
    """Every parameter of one cell, with defaults resolved (S and K always set)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    batch: int
    seq_len: int
    kv_seq_len: int
    heads: int
    kv_heads: int
    head_dim: int
    dtype: str
    causal: bool
    pass_: str = Field(alias="pass")

    def as_dict(self) -> dict:
        return self.model_dump(by_alias=True)


def utc_now() -> str:
    """The timestamp format of every record: UTC, ISO 8601, seconds."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def cell_key(experiment: str, variant: str, params: Params) -> str:
    """Stable identity of a cell: the same experiment, variant and parameters give the same key."""
    blob = json.dumps({"experiment": experiment, "variant": variant, **params.as_dict()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class Timing(_Record):
    """Summary of one timer's samples, in seconds per call."""

    timer: str = Field(description="wall (host clock around call + block_until_ready), device or device_cold.")
    median_s: float
    q1_s: float
    q3_s: float
    min_s: float
    samples: int
    noise: float = Field(description="Relative noise: IQR / median.")
    converged: bool = Field(description="Whether noise reached the target before the budget or cap ran out.")


class Correctness(_Record):
    """Agreement with the float32 reference on the same (dtype-rounded) inputs."""

    max_abs_err: float
    rel_err: float = Field(description="||out - ref|| / ||ref|| for the output.")
    grad_rel_err: dict[str, float] | None = Field(None, description="Same for dq, dk, dv under fwd_bwd.")
    tolerance: float
    grad_tolerance: float | None = None
    causal_first_changed: bool | None = Field(None, description="Causal: row 0 differs from unmasked attention.")
    causal_last_unchanged: bool | None = Field(None, description="Causal: the last row equals unmasked attention.")


class Fp8Info(_Record):
    """What FP8 really did in a cell whose variant promises FP8."""

    baseline: str | None = Field(None, description="The bf16 variant this FP8 variant is compared with.")
    in_hlo: bool = Field(description="Whether any f8 type appears in the compiled program.")
    in_kernels: bool | None = Field(None, description="Whether a kernel name that ran says f8/fp8/e4m3.")
    rel_err_vs_bf16: float | None = Field(None, description="||out - out_bf16|| / ||out_bf16|| on the same inputs.")
    verdict: str = Field(description="One sentence a person can read.")


class CellRecord(_Record):
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
    compile_s: float | None = None
    timings: list[Timing] = Field(default_factory=list)
    timer: str | None = Field(None, description="The timer that median_s, tflops and gbps come from.")
    median_s: float | None = None
    flops: int = Field(description="4*B*N*H*(unmasked score elements); x3.5 for fwd_bwd.")
    bytes_min: int = Field(description="Q, K, V read once and O written once (plus gradients for fwd_bwd).")
    kv_cache_bytes: int = Field(description="Bytes of K and V: 2*B*S*K*H*itemsize.")
    tflops: float | None = None
    gbps: float | None = None
    pct_of_peak: float | None = Field(None, description="tflops as % of the machine's measured matmul ceiling.")
    temp_bytes: int | None = Field(None, description="compiled.memory_analysis().temp_size_in_bytes.")
    custom_calls: list[str] = Field(default_factory=list, description="HLO custom-call targets of the executable.")
    backend: str | None = Field(None, description="What the compiled program runs: cudnn, transformer_engine or xla.")
    kernels: list[str] = Field(default_factory=list, description="GPU kernels seen by the device timer.")
    correctness: Correctness | None = None
    fp8: Fp8Info | None = None

    def row(self) -> dict:
        """A flat dict for tables: params and correctness inlined, one column per timer's median."""
        row = self.model_dump(exclude={"params", "correctness", "timings", "fp8"})
        row.update(self.params.as_dict())
        row.update(self.correctness.model_dump() if self.correctness else {})
        for t in self.timings:
            row[f"{t.timer}_median_s"] = t.median_s
            row[f"{t.timer}_noise"] = t.noise
            row[f"{t.timer}_samples"] = t.samples
            row[f"{t.timer}_converged"] = t.converged
        if self.fp8:
            row.update({f"fp8_{k}": v for k, v in self.fp8.model_dump().items()})
        row["custom_calls"] = ";".join(self.custom_calls)
        row["kernels"] = ";".join(self.kernels)
        return row


class Machine(_Record):
    """Where a run ran."""

    host: str
    platform: str = Field(description="jax platform: cpu or gpu.")
    device_kind: str
    device_count: int
    compute_capability: str | None = None
    versions: dict[str, str] = Field(default_factory=dict, description="jax, jaxlib, flax, cuda, cudnn, te, ...")
    gpu: dict[str, object] = Field(
        default_factory=dict, description="NVML facts at the start: name, memory, SMs, driver, SM clock, temperature."
    )
    matmul_peak_tflops: float | None = Field(None, description="Measured bf16 matmul ceiling on this device.")


class Manifest(_Record):
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
    gpu_at_end: dict[str, object] = Field(default_factory=dict, description="SM clock and temperature at the end.")
    cells_planned: int = 0
    argv: list[str] = Field(default_factory=list)


def upgrade(data: dict) -> dict:
    """Bring a stored record of an older schema_version to the current one, or refuse."""
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"schema_version {version!r} is not supported (this attnbench reads {SCHEMA_VERSION})")
    return data
