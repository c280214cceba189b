"""The shape of one attention call, defined once.

Each axis is a field of the spec's `defaults`, of an experiment's overrides, of a sweep (as a list) and of a
record's `params`; those models, the table columns and the cell label are all derived from AXES here, so a new
axis is one line below (and, since records carry it, a schema_version step in runner/record.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, create_model

DType = Literal["float32", "bfloat16", "float16"]
Pass = Literal["fwd", "fwd_bwd"]


def size(limit: int) -> Any:
    """A positive integer up to `limit`; strict, so YAML `true` or `2.0` is not a size."""
    return Annotated[int, Field(strict=True, gt=0, le=limit)]


@dataclass(frozen=True)
class Axis:
    name: str  # in specs and records ("pass" is `pass_` in Python)
    type: Any
    default: Any  # None: derived from another axis (`follows`)
    description: str
    short: str = ""  # label prefix: B8, T1024; "" prints the value alone (bfloat16, causal)
    follows: str | None = None  # the axis this one copies when unset
    absent: Any = None  # an axis added after records existed: the value those records meant; a cell at it keeps
    # the key and label it had then

    def silent(self, value: Any) -> bool:
        """At the value records before this axis meant: left out of the cell key and the label."""
        return self.absent is not None and value == self.absent

    @property
    def attr(self) -> str:
        return "pass_" if self.name == "pass" else self.name


def _power_of_two(count: int) -> int:
    if count & (count - 1):
        raise ValueError(f"must be 1, 2, 4 or 8 (got {count})")
    return count


# Devices a cell's sequence is split across (context parallelism): a node's GPUs, so at most 8, a power of two
Devices = Annotated[int, Field(strict=True, gt=0, le=8), AfterValidator(_power_of_two)]

# Bounds are far beyond any GPU (a T of 16M tokens, 1024 heads) but keep a typo from validating.
AXES = (
    Axis("batch", size(1 << 16), 4, "Batch size B.", "B"),
    Axis("seq_len", size(1 << 24), 128, "Query sequence length T.", "T"),
    Axis("kv_seq_len", size(1 << 24), None, "Key/value sequence length S; defaults to seq_len.", "S", "seq_len"),
    Axis("heads", size(1024), 8, "Query heads N.", "N"),
    Axis("kv_heads", size(1024), None, "Key/value heads K; defaults to heads. K < N is GQA, K = 1 is MQA.", "K",
         "heads"),
    Axis("head_dim", size(1024), 64, "Head dimension H.", "H"),
    Axis("dtype", DType, "bfloat16", "Dtype of Q, K, V and the output."),
    Axis("causal", bool, False, "Apply a causal (lower-triangular, top-left aligned) mask."),
    Axis("pass", Pass, "fwd", "fwd times the forward call; fwd_bwd times forward plus gradients."),
    Axis("devices", Devices, 1, "Devices the sequence is split across (context parallelism): 1, 2, 4 or 8; T and "
         "S must divide by it.", "D", absent=1),
)
NAMES = tuple(axis.name for axis in AXES)
BY_NAME = {axis.name: axis for axis in AXES}
# The axes that size the tensors: B, T, S, N, K, H (not D, the devices a call is split across: drawn apart)
SIZES = tuple(axis.name for axis in AXES if axis.short and axis.name != "devices")


def title(name: str) -> str:
    """An axis in words, for a chart: its description's first clause ("query sequence length T")."""
    words = BY_NAME[name].description.split(";")[0].rstrip(".")
    return words[0].lower() + words[1:]


def _field(axis: Axis, default: Any, **extra) -> Any:
    alias = {"alias": axis.name} if axis.attr != axis.name else {}
    return Field(default, description=axis.description, **alias, **extra)


def shape_fields(kind: str) -> dict[str, tuple]:
    """pydantic field definitions for each axis: `defaults` (with defaults), `overrides` (all optional),
    `sweep` (optional non-empty lists) or `params` (all required, derived ones resolved)."""
    if kind == "defaults":
        return {a.attr: (a.type | None if a.default is None else a.type, _field(a, a.default)) for a in AXES}
    if kind == "overrides":
        return {a.attr: (a.type | None, _field(a, None)) for a in AXES}
    if kind == "sweep":
        return {a.attr: (list[a.type] | None, _field(a, None, min_length=1)) for a in AXES}
    if kind == "params":
        return {a.attr: (a.type, _field(a, ...)) for a in AXES}
    raise ValueError(kind)


def model(name: str, kind: str, base: type, doc: str) -> type:
    """A pydantic model of the shape fields of `kind` on `base`."""
    made = create_model(name, __base__=base, __doc__=doc, **shape_fields(kind))
    made.__module__ = base.__module__
    return made


def resolved(shape: dict) -> dict:
    """Fill each derived axis (S from T, K from N) where unset."""
    shape = dict(shape)
    for axis in AXES:
        if axis.follows and shape.get(axis.name) is None:
            shape[axis.name] = shape[axis.follows]
    return shape


def label(shape: dict, omit: tuple[str, ...] = ()) -> str:
    """'B4 T128 N8 H64 bfloat16 causal fwd D4': derived axes only where they differ, False flags and axes at their
    `absent` value left out."""
    parts = []
    for axis in AXES:
        value = shape[axis.name]
        if axis.name in omit or (axis.follows and value == shape[axis.follows]) or axis.silent(value):
            continue
        if isinstance(value, bool):
            parts += [axis.name] if value else []
        else:
            parts.append(f"{axis.short}{value}")
    return " ".join(parts)


def column(name: str) -> str:
    """A table header for an axis: its short letter, else its name."""
    return BY_NAME[name].short or name


def keyed(shape: dict) -> dict:
    """The shape as a cell key hashes it: axes at their `absent` value left out, so keys written before an axis
    existed still name the same cells."""
    return {name: value for name, value in shape.items() if name not in BY_NAME or not BY_NAME[name].silent(value)}
