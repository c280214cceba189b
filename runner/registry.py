"""Variant registry: each variant is one decorated function with its requirements beside it.

A variant function takes the cell's Params and returns `attend(q, k, v) -> out` with q of shape
(B, T, N, H) and k, v of shape (B, S, K, H), all in the cell's dtype; the output has q's shape.
A variant whose timed call takes other inputs (FP8 tensors and their scales) returns a Staged instead.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass
from typing import Callable

from runner.machine import Device
from runner.record import Params

Attend = Callable  # (q, k, v) -> out


@dataclass(frozen=True)
class Staged:
    """prepare (untimed) -> attend (timed, compiled and inspected) -> finish (untimed)."""

    prepare: Callable  # (q, k, v) -> tuple of attend's arguments
    attend: Callable
    finish: Callable  # attend's output -> the output in the cell's dtype


@dataclass(frozen=True)
class Requires:
    """What a variant needs; anything unmet makes its cells `skipped` with a reason."""

    gpu: bool = False
    min_compute_capability: float | None = None
    dtypes: tuple[str, ...] | None = None
    head_dim_multiple: int = 1
    max_head_dim: int | None = None
    package: str | None = None
    passes: tuple[str, ...] = ("fwd", "fwd_bwd")
    probe: Callable[[], str | None] | None = None  # why a needed API is missing here, or None


@dataclass(frozen=True)
class Variant:
    name: str
    build: Callable[[Params], Attend | Staged]
    requires: Requires
    doc: str
    fp8_baseline: str | None = None  # promises FP8: compared with this bf16 variant, verdict recorded


VARIANTS: dict[str, Variant] = {}


def variant(name: str, requires: Requires = Requires(), fp8_baseline: str | None = None):
    """Register `build(params) -> attend | Staged` under `name`; FP8 variants name the bf16 variant they replace."""

    def register(build: Callable[[Params], Attend | Staged]) -> Callable[[Params], Attend | Staged]:
        doc = build.__doc__.strip().splitlines()[0] if build.__doc__ else ""
        VARIANTS[name] = Variant(name, build, requires, doc, fp8_baseline)
        return build

    return register


def load_all() -> dict[str, Variant]:
    """Import every module of runner.variants so their decorators run."""
    import runner.variants as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    return VARIANTS


def _needs_gpu(name: str, req: Requires) -> str:
    capability = f" with compute capability ≥ {req.min_compute_capability:.1f}" if req.min_compute_capability else ""
    return f"{name} needs an NVIDIA GPU{capability}"


def device_verdict(v: Variant, device: Device) -> str | None:
    """Why `v` cannot run on this device at all, or None."""
    req = v.requires
    capability, needed = device.compute_capability, req.min_compute_capability
    if (req.gpu or needed) and (capability is None or (needed and capability < needed)):
        return f"{_needs_gpu(v.name, req)}; this run is on {device.describe()}"
    if req.package and importlib.util.find_spec(req.package) is None:
        return f"{v.name} needs the Python package '{req.package}', which is not installed here"
    return req.probe() if req.probe else None


def verdict(v: Variant, params: Params, device: Device) -> str | None:
    """Why `v` cannot run this cell here, or None when it can."""
    if reason := device_verdict(v, device):
        return reason
    req = v.requires
    if req.dtypes and params.dtype not in req.dtypes:
        return f"{v.name} runs {' / '.join(req.dtypes)} only, not {params.dtype}"
    if params.head_dim % req.head_dim_multiple:
        return f"{v.name} needs head_dim a multiple of {req.head_dim_multiple}, not {params.head_dim}"
    if req.max_head_dim and params.head_dim > req.max_head_dim:
        return f"{v.name} supports head_dim up to {req.max_head_dim}, not {params.head_dim}"
    if params.pass_ not in req.passes:
        return f"{v.name} has no {params.pass_} pass (it supports {' / '.join(req.passes)})"
    return None
