"""The run's plan: each cell's worker and whether it is skipped on the device before a worker is asked (the variant's
rules, the device's compute capability and packages, its memory), computed once for a run, its dry run and a
cross-check (tests/crosscheck.py). No JAX: the run asks it from the device its first worker described. A shard's share
never asks it (runner.shard: the share is the cells' alone)."""

from __future__ import annotations

from dataclasses import dataclass

from runner.cells import Cell
from runner.machine import Device
from runner.memory import too_large
from runner.registry import VARIANTS, Variant, decline
from runner.shape import Params


@dataclass
class Plan:
    """The cells still to measure, in worker order, each with its worker and its decline verdict (computed once:
    a spec may hold 100,000 cells, and every lookup below is by position)."""

    cells: list[Cell]
    groups: list[str]  # each cell's worker
    declined: list[str | None]  # why the cell is skipped here before a worker is asked (skipped_here), or None
    runnable: dict[str, list[int]]  # worker -> positions of the cells it will be sent, in order


def plan(cells: list[Cell], device: Device) -> Plan:
    """Each cell's worker and verdict, and each worker's runnable cells."""
    variants = [VARIANTS[c.variant] for c in cells]
    groups = [v.worker for v in variants]
    declined = [skipped_here(v, c.params, device) for v, c in zip(variants, cells)]
    runnable: dict[str, list[int]] = {}
    for i, (group, reason) in enumerate(zip(groups, declined)):
        if reason is None:
            runnable.setdefault(group, []).append(i)
    return Plan(cells, groups, declined, runnable)


def skipped_here(v: Variant, p: Params, device: Device) -> str | None:
    """Why the cell is skipped on this device before a worker is asked, or None: the variant declines it
    (registry.decline), or the device cannot hold it (memory.too_large: its inputs and float32 reference, and the
    scores of a variant that materialises them). The run and its dry run both say it from here, the run from the
    device its first worker described (no JAX in the supervisor)."""
    return decline(v, p, device) or too_large(p, device.memory_bytes, v)
