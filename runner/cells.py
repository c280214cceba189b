"""The sweep: a spec expanded into cells, one per (experiment, shape, variant)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from runner import shape
from runner.record import Params, cell_key
from runner.spec import Spec


@dataclass(frozen=True)
class Cell:
    experiment: str
    variant: str
    params: Params

    @property
    def key(self) -> str:
        return cell_key(self.experiment, self.variant, self.params)

    def label(self) -> str:
        return f"{self.experiment}/{self.variant} {self.params.label()}"


def resolve(values: dict) -> Params:
    """Params from shape values by spec name, derived axes (S from T, K from N) filled where unset."""
    return Params.model_validate(shape.resolved(values))


def count(spec: Spec) -> int:
    """How many cells the spec makes at most, without expanding it (repeated sweep values counted twice)."""
    return sum(len(exp.variants) * math.prod(len(v) for v in exp.sweep.axes().values()) for exp in spec.experiments)


def expand(spec: Spec) -> list[Cell]:
    """Every cell of the spec, in run order: experiments, then sweep points, then variants."""
    cells = []
    defaults = spec.defaults.model_dump(by_alias=True)
    for exp in spec.experiments:
        base = {**defaults, **exp.overrides()}
        axes = exp.sweep.axes()
        for values in itertools.product(*axes.values()):
            params = resolve({**base, **dict(zip(axes, values))})
            cells += [Cell(exp.name, variant, params) for variant in exp.variants]
    return list(dict.fromkeys(cells))  # a value repeated in a sweep is one cell
