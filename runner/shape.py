"""The shape of one attention call, defined once.

Each axis is a field of the spec's `defaults`, of an experiment's overrides, of a sweep (as a list) and of a
record's `params`; those models, the table columns and the cell label are all derived from AXES here, so a new
axis is one line below (and, since records carry it, a schema_version step in runner/record.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, ValidationInfo,
                      create_model, model_validator)

from runner import counted

DType = Literal["float32", "bfloat16", "float16"]
Pass = Literal["fwd", "fwd_bwd"]
Bias = Literal["none", "alibi"]
Fill = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
Softcap = Annotated[float, Field(gt=0, allow_inf_nan=False)]
PageOrder = Literal["contiguous", "shuffled"]
KVLengths = Literal["equal", "uniform", "long_tail", "bimodal"]
Spread = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
# Two words a record says of a call, defined at the bottom so that the record (runner.record) and the modules that
# give them meaning (runner.metrics, runner.inputs) share one list without importing each other
Fp8Matmul = Literal["qk", "pv"]  # Q·Kᵀ, P·V: the matmuls an FP8 variant may run on f8 values (metrics.FP8_MATMULS)
Cotangent = Literal["normal", "normal, zero at padded query rows"]  # a fwd_bwd call's dO (inputs.cotangent)


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
    quiet: bool = False  # left out of labels and cell keys at its default: records from before it keep their keys
    null: str = "-"  # what a table or a chart's legend says of a null value ("no window", "dense")

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
    Axis("v_head_dim", size(1024), None, "Head dimension of V and the output; defaults to head_dim (DeepSeek's MLA: "
         "192 for Q and K, 128 for V).", "Hv", "head_dim", quiet=True),
    Axis("dtype", DType, "bfloat16", "Dtype of Q, K, V and the output."),
    Axis("causal", bool, False, "Apply a causal mask: top-left aligned (query i sees keys j <= i), except in a "
         "serving cell (kv_lengths or page_size set), where it is aligned to each request's end: new token i of T "
         "sees the request's first len - T + i + 1 keys."),
    Axis("pass", Pass, "fwd", "fwd times the forward call; fwd_bwd times forward plus gradients."),
    Axis("window", size(1 << 24) | None, None, "Sliding window W (null: none): query i sees key j when "
         "i - W < j <= i (causal) or |i - j| < W (not causal), W keys including itself.", "W", quiet=True,
         null="no window"),
    Axis("fill", Fill, 1.0, "Mean fraction of each sequence that is real tokens in a padded batch (1: no padding); "
         "the lengths follow runner.masks.lengths.", "fill", quiet=True),
    Axis("bias", Bias, "none", "none, or alibi: ALiBi's per-head slopes times -|i - j| added to the logits.",
         quiet=True),
    Axis("softcap", Softcap | None, None, "Logit soft cap c (null: none): logits -> c * tanh(logits / c).", "cap",
         quiet=True, null="no cap"),
    Axis("tp", size(1024), 1, "Tensor-parallel degree emulated on one GPU: the spec's heads and kv_heads are the "
         "model's, a cell runs heads / tp query heads and max(1, kv_heads / tp) KV heads.", "tp", quiet=True),
    Axis("devices", Devices, 1, "Devices the sequence is split across (context parallelism): 1, 2, 4 or 8; T and "
         "S must divide by it.", "D", quiet=True),
    Axis("kv_lengths", KVLengths | None, None, "Serving: each request's KV length around the mean S (null: not a "
         "serving cell, every sequence S keys): equal, uniform, long_tail or bimodal, by the deterministic rule of "
         "runner.paging.lengths; causal is then aligned to each request's end.", "kv-", quiet=True,
         null="not serving"),
    Axis("kv_spread", Spread, 0.5, "The spread of kv_lengths' distribution, a fraction of S (0: all equal); "
         "runner.paging.lengths says what it is for each distribution.", "spread", quiet=True),
    Axis("page_size", size(1 << 16) | None, None, "Tokens per page of a paged KV cache (null: a dense cache); a "
         "paged cell is a serving cell (kv_lengths null reads as equal).", "P", quiet=True, null="dense"),
    Axis("page_order", PageOrder, "contiguous", "Where a request's pages lie in the page pool: contiguous, or "
         "shuffled by runner.paging's deterministic rule (as a long-running server's allocator leaves them).",
         quiet=True),
    Axis("documents", size(1 << 16), 1, "Documents packed in each row (MaxText-style packing, segment ids): a query "
         "sees only keys of its own document (causal within it where causal); their lengths follow "
         "runner.masks.document_lengths.", "docs", quiet=True),
    Axis("deterministic", bool, False, "fwd_bwd with a deterministic backward (XLA's xla_gpu_deterministic_ops, "
         "TE's NVTE_ALLOW_NONDETERMINISTIC_ALGO=0), its gradients checked bit for bit across two calls.",
         quiet=True),
    Axis("tune", bool, False, "Tune the library's kernel for the cell's shape before timing (tokamax.autotune; "
         "the result kept in the tuning cache beside the compile cache); variants without an autotuner decline it.",
         quiet=True),
)
NAMES = tuple(axis.name for axis in AXES)
BY_NAME = {axis.name: axis for axis in AXES}
# The axes that count something (B, T, S, N, K, H, Hv, W, tp), drawn on a log2 axis: a fraction (fill) and a logit
# value (the soft cap) have a label prefix too but count nothing; D, the devices a call is split across, is drawn
# apart (scaling efficiency), not as a size.
SIZES = tuple(axis.name for axis in AXES
              if axis.short and axis.name not in ("fill", "softcap", "devices", "kv_lengths", "kv_spread"))
COUNTS = (*SIZES, "devices")  # the integer axes: a table of cells some of which hold one at null keeps it integer


RAGGED = ("uniform", "long_tail", "bimodal")  # the kv_lengths whose spread changes them
# An axis that changes a cell only beside another: a page order needs pages, a spread ragged lengths. Where the other
# leaves it nothing to change, the cell reads it at its default, so the dense half of a sweep over page_size with
# pages shuffled is not labelled, nor keyed, "shuffled" (the spec refuses an experiment where no cell uses it).
NEEDS = {"page_order": ("page_size", lambda page_size: not is_null(page_size)),  # a table reads a null as NaN
         "kv_spread": ("kv_lengths", lambda kv_lengths: kv_lengths in RAGGED)}


def condition(text: str) -> tuple[str, tuple]:
    """`AXIS=V[,V...]` (run --where) as (axis, values), each value read as YAML reads it and checked as the axis's
    type (`causal=true`, `window=null`, `fill=0.5,1`); a ValueError says what is wrong."""
    name, equals, listed = text.partition("=")
    name = name.strip()
    if not equals or not listed.strip():
        raise ValueError(f"{text!r}: give AXIS=VALUE[,VALUE...], e.g. tp=1 or seq_len=4096,8192")
    if name not in BY_NAME:
        raise ValueError(f"{text!r}: no axis {name!r} (axes: {', '.join(NAMES)})")
    axis, values = BY_NAME[name], []
    choices = f" ({', '.join(get_args(axis.type))})" if get_origin(axis.type) is Literal else ""
    for item in listed.split(","):
        try:  # strict: true is not 1, nor 1 true
            values.append(TypeAdapter(axis.type).validate_python(yaml.safe_load(item.strip()), strict=True))
        except (yaml.YAMLError, ValidationError):
            raise ValueError(f"{text!r}: {item.strip()!r} is not a value of {name}{choices}") from None
    return name, tuple(values)


def title(name: str) -> str:
    """An axis in words, for a chart: its description's first clause ("query sequence length T", "sliding
    window W")."""
    words = re.split(r";|:| \(", BY_NAME[name].description)[0].rstrip(".")
    return words[0].lower() + words[1:]


def nullable(axis: Axis) -> bool:
    """Whether null is a value of the axis (none, derived, or a cell that is not a serving one)."""
    return axis.default is None


def _field(axis: Axis, default: Any, **extra) -> Any:
    alias = {"alias": axis.name} if axis.attr != axis.name else {}
    return Field(default, description=axis.description, **alias, **extra)


def shape_fields(kind: str) -> dict[str, tuple]:
    """pydantic field definitions for each axis: `defaults` (with defaults), `overrides` (all optional),
    `sweep` (optional non-empty lists) or `params` (all required, derived ones resolved)."""
    if kind == "defaults":
        return {a.attr: (a.type | None if nullable(a) else a.type, _field(a, a.default)) for a in AXES}
    if kind == "overrides":  # unset is None (a default pydantic does not check); a null given is a value, taken
        # only by an axis whose null means something (no window, S = T, a dense cache), refused by the rest
        return {a.attr: (a.type | None if nullable(a) else a.type, _field(a, None)) for a in AXES}
    if kind == "sweep":  # a sweep's axis is a list; `page_size: null` there (not [null]) is refused, not dropped
        return {a.attr: (list[a.type], _field(a, None, min_length=1)) for a in AXES}
    if kind == "params":
        return {a.attr: (a.type, _field(a, ...)) for a in AXES}
    raise ValueError(kind)


def model(name: str, kind: str, base: type, doc: str) -> type:
    """A pydantic model of the shape fields of `kind` on `base`."""
    made = create_model(name, __base__=base, __doc__=doc, **shape_fields(kind))
    made.__module__ = base.__module__
    return made


def resolved(shape: dict) -> dict:
    """Fill each derived axis (S from T, K from N) where unset, and each quiet axis missing at its default; an axis
    that changes nothing here (NEEDS) at its default."""
    shape = dict(shape)
    for axis in AXES:
        if axis.follows and shape.get(axis.name) is None:
            shape[axis.name] = shape[axis.follows]
        elif axis.quiet and axis.name not in shape:
            shape[axis.name] = axis.default
    for name, (other, applies) in NEEDS.items():
        if name in shape and not applies(shape.get(other)):
            shape[name] = BY_NAME[name].default
    return shape


def tp_problem(heads: int, kv_heads: int, tp: int) -> str | None:
    """Why `tp` cannot shard these heads (cudnn-frontend's with_tp_shards: query heads split evenly, KV heads
    split or, past their count, replicated), or None."""
    if heads % tp:
        return f"heads ({heads}) must be a multiple of tp ({tp})"
    if kv_heads % tp and tp % kv_heads:
        return f"kv_heads ({kv_heads}) and tp ({tp}): one must divide the other"
    return None


def per_gpu(shape: dict) -> dict:
    """A resolved shape with the model's heads replaced by one tensor-parallel shard's: what the cell runs."""
    tp = shape.get("tp", 1)
    return {**shape, "heads": shape["heads"] // tp, "kv_heads": max(1, shape["kv_heads"] // tp)}


def at_default(axis: Axis, shape: dict) -> bool:
    """A quiet axis at its default (a derived one: equal to the axis it follows); a table's NaN reads as null."""
    value = shape[axis.name]
    value = None if is_null(value) else value
    return axis.quiet and value == (shape[axis.follows] if axis.follows else axis.default)


def keyed(shape: dict) -> dict:
    """The shape as a cell key hashes it: quiet axes at their default left out, so older keys stay valid."""
    return {name: value for name, value in shape.items() if name not in BY_NAME or not at_default(BY_NAME[name], shape)}


def label(shape: dict, omit: tuple[str, ...] = ()) -> str:
    """'B4 T128 N8 H64 bfloat16 causal fwd D4': derived axes only where they differ, False flags and quiet axes at
    their default left out."""
    parts = []
    for axis in AXES:
        if axis.name not in shape:  # a table of older records, before this axis
            continue
        value = shape[axis.name]
        if axis.name in omit or (axis.follows and value == shape[axis.follows]) or at_default(axis, shape):
            continue
        if isinstance(value, bool):
            parts += [axis.name] if value else []
        else:
            parts.append(f"{axis.short}{value:g}" if isinstance(value, float) else f"{axis.short}{value}")
    return " ".join(parts)


def is_null(value: Any) -> bool:
    """None, or a table's NaN (pandas reads an axis at null so)."""
    return value is None or (isinstance(value, float) and value != value)


def text(name: str, value: Any) -> str:
    """An axis's value as a table column shows it: its null word ("no window", "dense"), yes or no, 8 (not 8.0)."""
    if is_null(value):
        return BY_NAME[name].null
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:g}" if isinstance(value, float) else str(value)


def shown(name: str, shape: dict) -> str:
    """An axis's value in a shape as a table column shows it (text), "-" where it changes nothing (NEEDS: a dense
    cell's page order)."""
    if name in NEEDS and not NEEDS[name][1](shape.get(NEEDS[name][0])):
        return "-"
    return text(name, shape[name])


def column(name: str) -> str:
    """A table header for an axis: its short letter, else its name (a label prefix such as kv- is not a header)."""
    short = BY_NAME[name].short
    return short if short and not short.endswith("-") else name



# --- a cell's parameters: the type every layer shares (variants, metrics, records), so it lives at the bottom --------

READING = {"reading": True}  # validation context of a reader: unknown fields are kept, not refused


class Strict(BaseModel):
    """A model whose writers are strict and readers tolerant: building one with a field it does not define is an
    error, while reading one (context READING) written by a newer attnbench keeps its extra fields as they were."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _known_fields_only(cls, data: Any, info: ValidationInfo) -> Any:
        """Refuse unknown fields unless a reader asked (context READING) to keep them."""
        if isinstance(data, dict) and not (info.context or {}).get("reading"):
            known = set(cls.model_fields) | {f.alias for f in cls.model_fields.values() if f.alias}
            if unknown := [str(key) for key in data if key not in known]:
                raise ValueError(f"{counted(len(unknown), 'unknown field')}: {', '.join(unknown)}")
        return data


class _Params(Strict):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    def as_dict(self) -> dict:
        return self.model_dump(by_alias=True)

    def label(self) -> str:
        return label(self.as_dict())


Params = model("Params", "params", _Params, "Every parameter of one cell, with derived axes resolved.")


def default_params() -> Params:
    """The cell whose every axis is at its default: what a spec that sets none makes."""
    return Params(**resolved({axis.name: axis.default for axis in AXES}))


def cell_key(experiment: str, variant: str, params: Params) -> str:
    """Stable identity of a cell: the same experiment, variant and parameters give the same key."""
    blob = json.dumps({"experiment": experiment, "variant": variant, **keyed(params.as_dict())}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
