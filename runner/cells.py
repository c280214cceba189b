"""The sweep: a spec expanded into cells, one per (experiment, shape, variant)."""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Iterator

from runner import masks, paging, shape
from runner.metrics import ITEMSIZE, flops, tensor_bytes
from runner.shape import Params, cell_key
from runner.spec import Experiment, Spec

def cell_problem(params: Params) -> str | None:
    """Why no variant can run these params (cell_fault's reason), or None."""
    return (fault := cell_fault(params)) and fault[1]


def cell_fault(params: Params) -> tuple[str, str] | None:
    """The spec field that makes no variant able to run these params and why (determinism without a backward, a
    packed row that cannot be cut, a serving cell with what it cannot take), or None: the one rule of a cell declined
    whatever its variant. The field is where a refused spec's line points (runner.limits)."""
    if params.deterministic and params.pass_ != "fwd_bwd":
        return "deterministic", "deterministic asks for a deterministic backward: it needs pass fwd_bwd"
    return masks.packing_problem(params) or paging.serving_problem(params)


@dataclass(frozen=True)
class Cell:
    experiment: str
    variant: str
    params: Params

    @functools.cached_property  # hashing the cell's JSON is most of what a run loop does per cell: once each
    def key(self) -> str:
        return cell_key(self.experiment, self.variant, self.params)

    def label(self) -> str:
        return f"{self.experiment}/{self.variant} {self.params.label()}"


def resolve(values: dict) -> Params:
    """Params from shape values by spec name, derived axes (S from T, K from N) filled where unset, heads one
    tensor-parallel shard's (the spec's are the model's)."""
    return Params.model_validate(shape.per_gpu(shape.resolved(values)))


def count(spec: Spec) -> int:
    """How many cells the spec makes (expand's), without expanding it: each experiment's distinct variants times
    its distinct sweep points (experiment names are unique, and two sweep points differ in a value they set)."""
    return sum(len(set(exp.variants)) * _points_count(spec, exp) for exp in spec.experiments)


def _points_count(spec: Spec, exp: Experiment) -> int:
    """The experiment's distinct sweep points: the product of each axis's distinct values, where an axis that
    changes a cell only beside another (shape.NEEDS: a page order needs pages) is one point beside the other's values
    that leave it nothing to change (page_order [contiguous, shuffled] beside page_size [16, null]: 3 points)."""
    base = {**spec.defaults.model_dump(by_alias=True), **exp.overrides()}
    axes = {name: set(values) for name, values in exp.sweep.axes().items()}
    factors = {name: len(values) for name, values in axes.items()}
    for name, (other, applies) in shape.NEEDS.items():
        if name in axes:
            factors[name] = 1
            factors[other] = sum(len(axes[name]) if applies(value) else 1 for value in axes.get(other, {base[other]}))
    return math.prod(factors.values())


def largest(spec: Spec, exp: Experiment) -> Params:
    """The experiment's shape with the most input bytes: the largest value of each swept axis (one sweep point)."""
    values = {**spec.defaults.model_dump(by_alias=True), **exp.overrides()}
    for name, swept in exp.sweep.axes().items():
        if name == "dtype":
            values[name] = max(swept, key=ITEMSIZE.get)
        elif name == "tp":  # the fewest shards leave the most heads on one GPU
            values[name] = min(swept)
        else:  # null (no window, no cap) sorts first; it changes no input's size
            values[name] = max(swept, key=lambda value: (value is not None, value))
    return resolve(values)


def most_devices(spec: Spec) -> int:
    """The most devices any cell of the spec splits its sequence across: what a worker must see."""
    return max(largest(spec, exp).devices for exp in spec.experiments)


def unsplit(p: Params) -> Params:
    """The shape whose one-device cell a split cell's scaling is measured against: the cell's, on one device."""
    return p.model_copy(update={"devices": 1}) if p.devices != 1 else p


def with_backward(p: Params) -> Params:
    """The forward+backward twin of a shape: its Q, K and V are the same draws (runner.inputs), and its reference's
    output is the forward one's."""
    return p.model_copy(update={"pass_": "fwd_bwd"})


# Axes that change neither a cell's inputs nor its float32 reference, only how its call runs: the devices it is split
# across, a deterministic backward, a tuned kernel. (A paged cell's K and V are its page pools, drawn as they are:
# runner.inputs; a paged cell with no kv_lengths reads them as equal.)
HOW_IT_RUNS = {shape.BY_NAME[name].attr: shape.BY_NAME[name].default for name in ("devices", "deterministic", "tune")}


def reference_shape(p: Params) -> Params:
    """The shape whose inputs and float32 reference a cell is given: its own with HOW_IT_RUNS at their defaults, and
    tp at 1 but under ALiBi (the cell's heads are one GPU's already; only ALiBi's slopes are the model's)."""
    return _plain(p)


def family(p: Params) -> Params:
    """The shape whose inputs and reference a cell can take: its reference shape's forward+backward twin (a forward
    cell takes the twin's Q, K, V and output when the twin was measured just before). The cells of one family are
    run together and on one shard."""
    return _plain(p, pass_="fwd_bwd")


def power_class(p: Params) -> int:
    """How hard a cell's call is expected to drive the GPU, before it runs: the decade of its FLOPs per call (more work
    per call keeps the GPU busier between launches and nearer its power cap)."""
    return int(math.log10(max(1, flops(p))))


def run_class(p: Params) -> int:
    """The power class a cell is run in: its family's, so a forward cell runs beside its forward+backward twin, in
    the twin's class (runner.run.in_run_order)."""
    return power_class(family(p))


def _plain(p: Params, **update) -> Params:
    """reference_shape(p) with `update` too; p itself when that changes nothing (a run asks for every cell's)."""
    update |= HOW_IT_RUNS
    if p.page_size is not None and p.kv_lengths is None:
        update["kv_lengths"] = "equal"
    if p.bias == "none":
        update["tp"] = 1
    changed = {name: value for name, value in update.items() if getattr(p, name) != value}
    return p.model_copy(update=changed) if changed else p


def input_bytes(p: Params) -> int:
    """Bytes of Q, K and V."""
    query, key = tensor_bytes(p)
    return query + 2 * key


def points(spec: Spec, exp: Experiment) -> Iterator[Params]:
    """The experiment's sweep points, in order (a value repeated in a sweep gives the same point again)."""
    return (params for _, params in swept_points(spec, exp))


def swept_points(spec: Spec, exp: Experiment) -> Iterator[tuple[tuple, Params]]:
    """points, each after the values its sweep gives it (in the order of exp.sweep.axes())."""
    base = {**spec.defaults.model_dump(by_alias=True), **exp.overrides()}
    axes = exp.sweep.axes()
    for values in itertools.product(*axes.values()):
        yield values, resolve({**base, **dict(zip(axes, values))})


def expand(spec: Spec) -> list[Cell]:
    """Every cell of the spec, in run order: experiments, then sweep points, then variants."""
    return first(spec, None)


def first(spec: Spec, limit: int | None) -> list[Cell]:
    """The spec's first `limit` cells (all where None), in run order, without making the rest."""
    return list(first_swept(spec, limit))


def first_swept(spec: Spec, limit: int | None) -> dict[Cell, tuple]:
    """first's cells, each with the sweep values of the point that made it (the first, where two points make one)."""
    cells = {}  # a value repeated in a sweep is one cell
    for exp in spec.experiments:
        for values, params in swept_points(spec, exp):
            for variant in exp.variants:
                if len(cells) == limit:
                    return cells
                cells.setdefault(Cell(exp.name, variant, params), values)
    return cells
