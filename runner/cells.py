"""The sweep: a spec expanded into cells, one per (experiment, shape, variant)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

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
        p = self.params
        gqa = f" K{p.kv_heads}" if p.kv_heads != p.heads else ""
        s = f" S{p.kv_seq_len}" if p.kv_seq_len != p.seq_len else ""
        mask = " causal" if p.causal else ""
        return (
            f"{self.experiment}/{self.variant} B{p.batch} T{p.seq_len}{s} N{p.heads}{gqa} H{p.head_dim} "
            f"{p.dtype}{mask} {p.pass_}"
        )


def resolve(shape: dict) -> Params:
    """Fill S from T and K from N where unset."""
    shape = dict(shape)
    if shape.get("kv_seq_len") is None:
        shape["kv_seq_len"] = shape["seq_len"]
    if shape.get("kv_heads") is None:
        shape["kv_heads"] = shape["heads"]
    return Params.model_validate(shape)


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
