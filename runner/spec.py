"""The experiment spec: what to run, on which shapes, and how to time and check it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, ValidationError

DType = Literal["float32", "bfloat16", "float16"]
Pass = Literal["fwd", "fwd_bwd"]
Size = Annotated[int, Field(strict=True, gt=0)]  # strict: YAML `true` or `2.0` is not a size


class SpecError(Exception):
    """A spec that cannot be run; `problems` holds one 'path: message' line each."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")  # `pass` only: no hidden `pass_` spelling


class Shape(_Model):
    """Problem size and numerics shared by every cell unless an experiment overrides them."""

    batch: Size = Field(4, description="Batch size B.")
    seq_len: Size = Field(128, description="Query sequence length T.")
    kv_seq_len: Size | None = Field(None, description="Key/value sequence length S; defaults to seq_len.")
    heads: Size = Field(8, description="Query heads N.")
    kv_heads: Size | None = Field(
        None, description="Key/value heads K; defaults to heads. K < N is GQA, K = 1 is MQA."
    )
    head_dim: Size = Field(64, description="Head dimension H.")
    dtype: DType = Field("bfloat16", description="Dtype of Q, K, V and the output.")
    causal: bool = Field(False, description="Apply a causal (lower-triangular) mask.")
    pass_: Pass = Field(
        "fwd", alias="pass", description="fwd times the forward call; fwd_bwd times forward plus gradients."
    )


class Overrides(_Model):
    """An experiment's changes to the defaults; unset fields inherit."""

    batch: Size | None = Field(None, description="Batch size B.")
    seq_len: Size | None = Field(None, description="Query sequence length T.")
    kv_seq_len: Size | None = Field(None, description="Key/value sequence length S.")
    heads: Size | None = Field(None, description="Query heads N.")
    kv_heads: Size | None = Field(None, description="Key/value heads K.")
    head_dim: Size | None = Field(None, description="Head dimension H.")
    dtype: DType | None = Field(None, description="Dtype of Q, K, V and the output.")
    causal: bool | None = Field(None, description="Apply a causal mask.")
    pass_: Pass | None = Field(None, alias="pass", description="fwd or fwd_bwd.")


class Sweep(_Model):
    """Axes to sweep; every combination (cartesian product) becomes a cell."""

    batch: list[Size] | None = Field(None, min_length=1, description="Batch sizes.")
    seq_len: list[Size] | None = Field(None, min_length=1, description="Query sequence lengths.")
    kv_seq_len: list[Size] | None = Field(None, min_length=1, description="Key/value sequence lengths.")
    heads: list[Size] | None = Field(None, min_length=1, description="Query head counts.")
    kv_heads: list[Size] | None = Field(None, min_length=1, description="Key/value head counts.")
    head_dim: list[Size] | None = Field(None, min_length=1, description="Head dimensions.")
    dtype: list[DType] | None = Field(None, min_length=1, description="Dtypes.")
    causal: list[bool] | None = Field(None, min_length=1, description="Mask settings.")
    pass_: list[Pass] | None = Field(None, alias="pass", min_length=1, description="Passes.")

    def axes(self) -> dict[str, list]:
        """The axes that were given, by their spec name, in declaration order."""
        return self.model_dump(by_alias=True, exclude_none=True)


class Experiment(Overrides):
    """One section of the study: variants run over a sweep of shapes."""

    name: str = Field(min_length=1, description="Experiment name, unique within the spec.")
    description: str = Field("", description="What the experiment shows.")
    variants: list[str] = Field(min_length=1, description="Variant names to run in every cell (see `attnbench list`).")
    sweep: Sweep = Field(default_factory=Sweep, description="Axis -> values; the cartesian product is swept.")

    def overrides(self) -> dict:
        """The shape fields this experiment sets, by their spec name."""
        return self.model_dump(include=set(Overrides.model_fields), by_alias=True, exclude_none=True)


class Timing(_Model):
    """How samples are taken and when to stop."""

    warmup: int = Field(3, ge=0, description="Calls after compilation that are not timed.")
    min_samples: Size = Field(10, description="Samples taken before the noise test may stop.")
    max_samples: Size = Field(500, description="Hard cap on samples.")
    target_noise: PositiveFloat = Field(0.05, description="Stop once IQR/median is at or below this.")
    budget_s: PositiveFloat = Field(2.0, description="Time budget per cell and timer for sampling, in seconds.")
    cold: bool = Field(False, description="On a GPU, also take cold samples with L2 flushed before each call.")


class Tolerances(_Model):
    """Largest relative error ||out - ref|| / ||ref|| against the float32 reference, per dtype."""

    float32: PositiveFloat = Field(2e-3, description="float32 inputs (GPU matmuls may use TF32).")
    bfloat16: PositiveFloat = Field(2e-2, description="bfloat16 inputs.")
    float16: PositiveFloat = Field(5e-3, description="float16 inputs.")
    fp8: PositiveFloat = Field(0.1, description="Variants that compute in FP8 (e4m3 inputs).")
    gradient_factor: PositiveFloat = Field(
        2.5, description="Gradients may err by this multiple of the dtype's tolerance: dK and dV sum over all T queries."
    )


class Spec(_Model):
    """An attnbench experiment spec."""

    name: str = Field(min_length=1, description="Run name; the run id starts with it.")
    description: str = Field("", description="What this study is for.")
    seed: int = Field(0, description="Seed of the normal random inputs.")
    defaults: Shape = Field(default_factory=Shape, description="Shape and numerics every experiment starts from.")
    timing: Timing = Field(default_factory=Timing, description="Sampling settings.")
    tolerances: Tolerances = Field(default_factory=Tolerances, description="Correctness tolerances.")
    experiments: list[Experiment] = Field(min_length=1, description="The experiments, run in order.")

    def digest(self) -> str:
        """A stable hash of the spec's content."""
        blob = json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML would keep the last silently)."""


def _unique_mapping(loader: _Loader, node: yaml.MappingNode) -> dict:
    seen = set()
    for key_node, _ in node.value:  # the mapping's own keys; `<<: *anchor` merges may be overridden
        own = isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge"
        key = loader.construct_object(key_node) if own else None
        if key is not None and key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def _where(loc: tuple) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "spec"


def _message(err: dict) -> str:
    kind, ctx = err["type"], err.get("ctx", {})
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required"
    if kind in ("greater_than", "greater_than_equal"):
        return f"must be {'>' if kind == 'greater_than' else '>='} {ctx.get('gt', ctx.get('ge'))}"
    if kind == "too_short":
        return "must not be empty"
    if kind == "literal_error":
        return f"must be one of {ctx['expected']} (got {err['input']!r})"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be an integer (got {err['input']!r})"
    if kind in ("float_type", "float_parsing"):
        return f"must be a number (got {err['input']!r})"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false (got {err['input']!r})"
    if kind in ("string_type",):
        return f"must be a string (got {err['input']!r})"
    if kind in ("list_type",):
        return f"must be a list (got {err['input']!r})"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"must be a mapping (got {err['input']!r})"
    return err["msg"]


def _problems(error: ValidationError) -> list[str]:
    return [f"{_where(e['loc'])}: {_message(e)}" for e in error.errors()]


def parse_spec(data: object, known_variants: set[str]) -> Spec:
    """Validate a parsed YAML document; raise SpecError listing every problem."""
    unknown = _variant_problems(data.get("experiments") if isinstance(data, dict) else None, known_variants)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as error:
        raise SpecError(_problems(error) + unknown) from None
    problems = unknown + _cross_field_problems(spec)
    if problems:
        raise SpecError(problems)
    return spec


def _variant_problems(experiments: object, known_variants: set[str]) -> list[str]:
    """Unknown variant names, read from the raw document so they are reported beside schema errors too."""
    problems = []
    for i, exp in enumerate(experiments if isinstance(experiments, list) else []):
        variants = exp.get("variants") if isinstance(exp, dict) else None
        for j, name in enumerate(variants if isinstance(variants, list) else []):
            if isinstance(name, str) and name not in known_variants:
                known = ", ".join(sorted(known_variants))
                problems.append(f"experiments[{i}].variants[{j}]: unknown variant {name!r} (known: {known})")
    return problems


def load_spec(path: str | Path, known_variants: set[str]) -> Spec:
    """Read and validate a YAML spec file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecError([f"{path}: no such file"]) from None
    except OSError as error:
        raise SpecError([f"{path}: cannot read ({error.strerror})"]) from None
    except UnicodeDecodeError:
        raise SpecError([f"{path}: not UTF-8 text"]) from None
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise SpecError([f"{where}: not valid YAML ({getattr(error, 'problem', None) or error})"]) from None
    if not isinstance(data, dict):
        raise SpecError([f"{path}: must be a YAML mapping with name, experiments, ... (got {type(data).__name__})"])
    return parse_spec(data, known_variants)


def _cross_field_problems(spec: Spec) -> list[str]:
    problems = []
    if spec.timing.min_samples > spec.timing.max_samples:
        problems.append(f"timing.min_samples: must be <= max_samples ({spec.timing.max_samples})")
    names = set()
    defaults = spec.defaults.model_dump(by_alias=True)
    for i, exp in enumerate(spec.experiments):
        where = f"experiments[{i}]"
        if exp.name in names:
            problems.append(f"{where}.name: duplicate experiment name {exp.name!r}")
        names.add(exp.name)
        if "sweep" in exp.model_fields_set and not exp.sweep.axes():
            problems.append(f"{where}.sweep: must name at least one axis")
        problems += _head_problems(where, defaults, exp.overrides(), exp.sweep.axes())
    return list(dict.fromkeys(problems))  # a clash in defaults is one line, not one per experiment


def _head_problems(where: str, defaults: dict, overrides: dict, axes: dict) -> list[str]:
    shape = {**defaults, **overrides}
    heads_values = axes.get("heads", [shape["heads"]])
    kv_values = axes.get("kv_heads", [shape["kv_heads"]])
    problems = []
    for i, heads in enumerate(heads_values):
        for j, kv_heads in enumerate(kv_values):
            if kv_heads is not None and heads % kv_heads:
                at = _head_path(where, overrides, axes, i, j)
                problems.append(f"{at}: heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    return problems


def _head_path(where: str, overrides: dict, axes: dict, i: int, j: int) -> str:
    """Where the clashing pair is set: the experiment's kv_heads, else its heads, else the defaults."""
    if "kv_heads" in axes:
        return f"{where}.sweep.kv_heads[{j}]"
    if "kv_heads" in overrides:
        return f"{where}.kv_heads"
    if "heads" in axes:
        return f"{where}.sweep.heads[{i}]"
    if "heads" in overrides:
        return f"{where}.heads"
    return "defaults.kv_heads"
