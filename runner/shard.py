"""Shards: a deterministic share of a run's cells for one of n nodes, whole families (the cells that share one set of
inputs and float32 reference: cells.family) balanced by what their cells cost in GPU seconds (runner.cost): a
function of the cells alone. The node's device is not asked: shards' devices may differ in what no machine fact
compares (JAX's memory limit), and shares priced on each would overlap or leave a cell to no shard."""

from __future__ import annotations

import heapq
import os
from collections.abc import Mapping
from dataclasses import dataclass

from runner.cells import Cell, family
from runner.cost import H200, Key, cost_key, price
from runner.shape import Params
from runner.spec import short

MAX_SHARDS = 100_000  # more nodes than any one Job runs; a run is bounded further by its families (assign)


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`, numbered from 0 like a Kubernetes Indexed Job's completion index."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, most: int | None = None) -> Shard:
    """'i/n' with 0 <= i < n (and n <= `most` when given); a ValueError names what is wrong."""
    index, slash, count = (part.strip() for part in text.partition("/"))
    if not (slash and index.isdigit() and count.isdigit()):
        raise ValueError(f"shard must be i/n, e.g. 0/3 (got {short(text)})")
    if most and (len(count) > len(str(most)) or int(count) > most):  # digits first: int() refuses 4,300 or more
        raise ValueError(f"shard {short(text)}: at most {most:,} shards")
    if len(index.lstrip("0")) > len(count) or not int(index) < int(count):
        raise ValueError(f"shard {short(text)}: need 0 <= i < n")
    return Shard(int(index), int(count))


def shard_from_env(environ: Mapping[str, str] = os.environ, most: int | None = None) -> Shard | None:
    """The Indexed Job's shard: JOB_COMPLETION_INDEX of JOB_COMPLETIONS, or None outside one (neither set); one set
    without the other is a ValueError, not a whole run on each pod."""
    index, count = environ.get("JOB_COMPLETION_INDEX"), environ.get("JOB_COMPLETIONS")
    if index is None and count is None:
        return None
    if index is None or count is None:
        given, missing = ("JOB_COMPLETIONS", "JOB_COMPLETION_INDEX") if index is None else (
            "JOB_COMPLETION_INDEX", "JOB_COMPLETIONS")
        raise ValueError(f"{given} is set and {missing} is not: set both (an Indexed Job does) or neither")
    return parse_shard(f"{index}/{count}", most)


def families(cells: list[Cell]) -> list[list[Cell]]:
    """The cells grouped by family, in the order of each family's first cell."""
    grouped: dict[Params, list[Cell]] = {}
    for cell in cells:
        grouped.setdefault(family(cell.params), []).append(cell)
    return list(grouped.values())


def cell_ms(cell: Cell, table: dict[Key, float] = H200) -> int:
    """What a cell costs, in whole milliseconds (sums that no order of the cells can change): its cost key's price
    in `table`, or nothing where its variant declines it on any device (its params break the variant's rules)."""
    from runner.registry import VARIANTS, static_decline  # here: `compare` and `runs` parse shards without it

    v = VARIANTS[cell.variant]
    return 0 if static_decline(v, cell.params) else round(1000 * price(cost_key(v.worker, cell.params), table)[0])


def assign(cells: list[Cell], count: int, table: dict[Key, float] = H200) -> dict[str, int]:
    """Cell key -> shard index: whole families, costliest first (their cells' cell_ms summed; ties by their smallest
    key), each to the least loaded shard (ties to the one holding fewest families, then the lowest index), so a
    family's inputs and reference are made on one node and the same cells give the same shares in any order."""
    costed = sorted((-sum(cell_ms(c, table) for c in group), min(c.key for c in group), group)
                    for group in families(cells))  # keys are unique: the group is never compared
    loads = [(0, 0, index) for index in range(count)]  # (milliseconds so far, families so far, shard index): a heap
    owner = {}
    for cost, _, group in costed:
        load, held, index = heapq.heappop(loads)
        owner.update((cell.key, index) for cell in group)
        heapq.heappush(loads, (load - cost, held + 1, index))
    return owner


def select(cells: list[Cell], shard: Shard) -> list[Cell]:
    """The shard's cells, in run order."""
    owner = assign(cells, shard.count)
    return [c for c in cells if owner[c.key] == shard.index]
