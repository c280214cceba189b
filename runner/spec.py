"""The experiment spec: what to run, on which shapes, and how to time and check it."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import stat
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, ValidationError

from runner import shape

Count = Annotated[int, Field(strict=True, gt=0, le=10_000_000)]
Seconds = Annotated[float, Field(gt=0, le=7 * 24 * 3600)]  # finite, positive, at most a week

SPEC_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"  # a run id starts with the spec's name, so the same rule holds for both
NAME_MAX_LENGTH = 100
RUN_ID_MAX_LENGTH = NAME_MAX_LENGTH + len("-20260101-120000")  # a spec's name and the time its run started
DEFAULT_MAX_CELLS = 100_000
DECLINES_COUNTED = DEFAULT_MAX_CELLS  # validate counts the declines of a spec's first this many cells alone, its
# time and memory bounded where a spec allows up to MAX_CELLS (docs/command-line.md)
MAX_CELLS = 1_000_000  # the most a spec may allow: expanding a million cells takes seconds and a gigabyte
FLOOR_SAMPLES = 3  # the fewest samples a timer takes when the budget cuts min_samples short (runner.timers obeys it)
CARRY_GAP_S = 1.0  # carry_cap: a stream that starts within this long of the last one's end continues its load

# A spec is a page or two of YAML. These bounds stop a file, a nesting or an alias bomb long before it costs
# time or memory; each is far beyond any real spec (lab5.yaml: 2 KiB, 6 levels, 169 values).
MAX_SPEC_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_VALUES = 10_000  # scalars, lists and mappings, each alias counted as the whole value it names (PyYAML reads
# about 10,000 a second here)
MAX_DIGITS = 100  # an integer literal longer than this is no size or seed (and Python refuses past 4300)
MAX_PROBLEMS = 20  # problem lines shown; the rest are counted


class SpecError(Exception):
    """A spec that cannot be run; `problems` holds one 'path: message' line each, after the file (`where`) if given."""

    def __init__(self, problems: list[str], where: str | Path | None = None):
        if len(problems) > MAX_PROBLEMS:
            problems = problems[:MAX_PROBLEMS] + [f"… and {len(problems) - MAX_PROBLEMS:,} more problems"]
        if where is not None:
            problems = [f"{where}: {problem}" for problem in problems]
        super().__init__("\n".join(problems))
        self.problems = problems


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")  # `pass` only: no hidden `pass_` spelling


Shape = shape.model("Shape", "defaults", _Model,
                    "Problem size and numerics shared by every cell unless an experiment overrides them.")
Overrides = shape.model("Overrides", "overrides", _Model, "An experiment's changes to the defaults; unset fields inherit.")


class Sweep(shape.model("_SweepAxes", "sweep", _Model, "")):
    """Axes to sweep; every combination (cartesian product) becomes a cell."""

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
        """The shape fields this experiment sets, by their spec name: a null it gives (`page_size: null`, a dense
        cache) is set, and overrides the defaults' value."""
        return self.model_dump(include=set(Overrides.model_fields), by_alias=True, exclude_unset=True)


class TimingSettings(_Model):
    """How samples are taken, when to stop, and in which power state (the spec's `timing` section)."""

    warmup: int = Field(3, strict=True, ge=0, le=10_000, description="Calls after compilation that are not timed (one, when "
                        "the calls are too slow for the budget).")
    min_samples: Count = Field(10, description="Samples taken before the noise test may stop (within the budget; "
                               f"calls too slow for it stop at {FLOOR_SAMPLES} samples).")
    max_samples: Count = Field(500, description="Hard cap on samples.")
    target_noise: PositiveFloat = Field(0.05, description="Stop once IQR/median is at or below this.")
    budget_s: Seconds = Field(2.0, description="Time budget per cell and timer for sampling, in seconds.")
    wall_max_samples: Count = Field(
        50, description="Cap on the wall timer's samples where a device timer is the headline: host noise at small "
        "shapes rarely converges, so the wall timer would otherwise always run to its budget.")
    wall_budget_s: Seconds = Field(0.5, description="The wall timer's time budget beside a device timer, in seconds.")
    cold: bool = Field(False, description="On a GPU, also take cold samples with L2 flushed before each call.")
    power: Literal["steady", "burst"] = Field(
        "steady", description="steady: run the call back to back until the GPU reaches a steady state and take the "
        "samples from that same unbroken stream (what a sustained job sees); burst: wait for the idle clock and "
        "temperature, then take a short sample (a peak figure).")
    settle_max_s: Seconds = Field(10.0, description="Longest wait for the clock to settle (steady) or the GPU to "
                                  "cool back to idle (burst) before sampling anyway.")
    heavy_after_s: Seconds = Field(1.0, le=60, description="steady: a held clock or a held power cap counts only after "
                                   "this long under load (the cap can take most of a second to act).")
    light_after_s: Seconds = Field(0.4, le=60, description="steady: a load is judged too light to be capped only after "
                                   "this long under load, with no throttle reason since it began (on an H200 a heavy "
                                   "kernel meets the power cap's reason within 0.2 s; the energy counter lags 0.1 s).")
    carry_cap: bool = Field(False, description=f"steady: a stream that starts within {CARRY_GAP_S:g} s of a capped "
                            "cell's stream is judged capped on its own readings, without the heavy_after_s wait (off "
                            "until checked on the H200 against the independent protocol: scripts/steady_crosscheck.py "
                            "--carried).")
    light_share: float = Field(0.8, gt=0, le=1, description="steady: a load is light when it draws less than this "
                               "share of the power limit (by the energy counter, at its worst-case step error).")
    soak_s: Seconds | None = Field(None, le=3600, description="On a GPU, after its samples run each ok cell back to "
                                   "back this long more and record throughput, SM clock, power and temperature "
                                   "against time (a thermal curve; `attnbench soak` sets it).")
    cell_timeout_s: Seconds | None = Field(
        None, description="A cell still running after this long is stopped and recorded `timeout`; default: derived "
        "from the budgets (compile, checks and every timer's budget, with room to spare).")


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

    name: str = Field(min_length=1, max_length=NAME_MAX_LENGTH, pattern=f"^{SPEC_NAME}$",
                      description="Run name (letters, digits, '.', '_', '-'); the run id starts with it.")
    description: str = Field("", description="What this study is for.")
    seed: int = Field(0, ge=0, lt=2**32, description="Seed of the normal random inputs (0 to 2^32-1).")
    defaults: Shape = Field(default_factory=Shape, description="Shape and numerics every experiment starts from.")
    timing: TimingSettings = Field(default_factory=TimingSettings, description="Sampling settings.")
    compile_cache: str | None = Field(
        None, description="Persistent compilation cache: a folder, gs://bucket/prefix or 'off'; default "
        "~/.cache/attnbench/jax (`run --compile-cache` overrides it).")
    max_cells: int = Field(DEFAULT_MAX_CELLS, strict=True, gt=0, le=MAX_CELLS,
                           description="Refuse a spec that expands to more cells than this (`--max-cells` overrides).")
    tolerances: Tolerances = Field(default_factory=Tolerances, description="Correctness tolerances.")
    experiments: list[Experiment] = Field(min_length=1, description="The experiments, run in order.")

    def content(self) -> dict:
        """What the spec says, as stored in a run's manifest: every setting with the value it runs with (a reader with
        other defaults needs them written out), each experiment's overrides and sweep with null where unset (as
        model_dump writes them), and `nulls_given`, only where an experiment gives a null, naming those nulls (a
        given null overrides the defaults' value; an unset field inherits it)."""
        content = self.model_dump(mode="json", by_alias=True)
        nulls = {exp.name: [name for name, value in exp.overrides().items() if value is None]
                 for exp in self.experiments}
        if nulls := {name: given for name, given in nulls.items() if given}:  # a spec without keeps its hash
            content["nulls_given"] = nulls
        return content

    def digest(self) -> str:
        """A hash of the spec's content: it keys a run's resume, and changes with every field attnbench adds (runs
        are matched across versions by `identity`)."""
        return hashlib.sha256(json.dumps(self.content(), sort_keys=True).encode()).hexdigest()[:16]

    def identity(self) -> str:
        """The spec's comparable identity (see `identity`)."""
        return identity(self.content())


# What a spec says that does not change what its cells measure: prose, where compiled programs are kept, a bound on
# its size, and the digest's record of given nulls (read beside the experiments they belong to).
UNMEASURED = {"description", "compile_cache", "max_cells", "nulls_given"}
SECTIONS = {"defaults": Shape, "timing": TimingSettings, "tolerances": Tolerances}
APART = {("timing", "power")}  # matched and named on its own beside the identity (runner.record.power_policy)


def identity(content: dict) -> str:
    """A hash of what a stored spec (Spec.content's form: a manifest's `spec`, of any attnbench version) measures:
    its name, each setting that differs from today's default (but the power policy, matched on its own), and each
    experiment's name, variants, sweep and the overrides it gives that differ from the spec's defaults; no prose. A
    field attnbench adds later (a setting, or a section of them) is absent from older runs and at its default in newer
    ones: left out of both, so an upgrade keeps the identity (docs/regressions.md says what it gets wrong)."""
    return hashlib.sha256(json.dumps(measured(content), sort_keys=True).encode()).hexdigest()[:16]


def measured(content: dict) -> object:
    """What `identity` hashes: the stored spec without its prose and without the settings at today's default."""
    if not isinstance(content, dict):
        return content
    normal = {key: _section(key, value) for key, value in content.items()
              if key not in UNMEASURED and key != "experiments" and not _at_default(Spec, key, value)}
    normal = {key: value for key, value in normal.items() if not (key in SECTIONS and value == {})}  # as absent
    normal["experiments"] = _experiments(content)
    return normal


def setting_changes(a: dict, b: dict) -> list[tuple[str, object, object]]:
    """The settings in which two stored specs' identities differ, as (path, A's value, B's value), a value at its
    default None: ('timing.budget_s', None, 1.0), ('experiments.causal.variants', [...], [...])."""
    flat_a, flat_b = _flat(measured(a)), _flat(measured(b))
    return [(path, flat_a.get(path), flat_b.get(path)) for path in dict.fromkeys([*flat_a, *flat_b])
            if flat_a.get(path) != flat_b.get(path)]


def _flat(value: object, path: str = "") -> dict[str, object]:
    """A measured spec as {dotted path: value}; experiments (a list) by their names."""
    if isinstance(value, list) and all(isinstance(v, dict) and "name" in v for v in value) and value:
        value = {v["name"]: {k: x for k, x in v.items() if k != "name"} for v in value}
    if not isinstance(value, dict) or not value:
        return {path: value}
    return {found: leaf for key, item in value.items()
            for found, leaf in _flat(item, f"{path}.{key}" if path else str(key)).items()}


@functools.cache
def _defaults(model: type[BaseModel]) -> dict:
    """A model's fields by their spec name, each with its default (absent where it has none)."""
    return {field.alias or name: field.get_default(call_default_factory=True)
            for name, field in model.model_fields.items() if not field.is_required()}


def _at_default(model: type[BaseModel], key: str, value: object) -> bool:
    defaults = _defaults(model)
    return key in defaults and not isinstance(defaults[key], BaseModel) and value == defaults[key]


def _section(key: str, value: object) -> object:
    """A section of settings (defaults, timing, tolerances) without the ones at today's default."""
    if key not in SECTIONS or not isinstance(value, dict):
        return value
    return {name: setting for name, setting in value.items()
            if (key, name) not in APART and not _at_default(SECTIONS[key], name, setting)}


def _experiments(content: dict) -> object:
    """Each experiment as what it measures: name, variants, sweep axes given, overrides given (a null only where
    `nulls_given` names it: no manifest before 2026-12-06 says) that differ from the spec's defaults."""
    experiments, nulls = content.get("experiments"), content.get("nulls_given") or {}
    if not isinstance(experiments, list):
        return experiments
    defaults = content.get("defaults") if isinstance(content.get("defaults"), dict) else {}
    shape_values = {**_defaults(Shape), **defaults}
    found = []
    for exp in experiments:
        if not isinstance(exp, dict):
            found.append(exp)
            continue
        given = nulls.get(exp.get("name"), []) if isinstance(nulls, dict) else []
        kept = {}
        for key, value in exp.items():
            if key in shape.BY_NAME:
                if (value is not None or key in given) and value != shape_values.get(key):
                    kept[key] = value
            elif key == "sweep" and isinstance(value, dict):
                kept[key] = {axis: values for axis, values in value.items() if values is not None}
            elif key not in UNMEASURED and not _at_default(Experiment, key, value):
                kept[key] = value
        found.append(kept)
    return found


class _Beyond(yaml.MarkedYAMLError):
    """Valid YAML beyond a bound of the loader: told as 'file:line:column: what'."""

    def __init__(self, problem: str, mark):
        super().__init__(problem=problem, problem_mark=mark)


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML would keep the last silently), and a
    document that nests deeper than MAX_DEPTH or holds more than MAX_VALUES values once its aliases are expanded.

    Both are measured while the document is composed, before any value is built: an alias is a reference to a
    node composed earlier, so its size and depth are known when it is used and a "billion laughs" stops there.
    """

    def __init__(self, stream):
        super().__init__(stream)
        self.depth = 0  # levels open above the node being composed
        self.extent: dict[int, tuple[int, int]] = {}  # id(node) -> (values, levels), aliases expanded

    def compose_node(self, parent, index):
        mark = self.peek_event().start_mark
        alias = self.check_event(yaml.AliasEvent)
        if self.depth >= MAX_DEPTH:
            raise _Beyond(f"nested deeper than {MAX_DEPTH} levels", mark)
        self.depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        if alias and id(node) not in self.extent:
            raise _Beyond("an alias used inside the value it names", mark)
        if id(node) not in self.extent:
            self.extent[id(node)] = _extent(node, self.extent)
        values, levels = self.extent[id(node)]
        if self.depth + levels > MAX_DEPTH:
            raise _Beyond(f"nested deeper than {MAX_DEPTH} levels once its aliases are expanded", mark)
        if values > MAX_VALUES:
            raise _Beyond(f"more than {MAX_VALUES:,} values once its aliases are expanded", mark)
        return node


def _extent(node: yaml.Node, extent: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(values, levels) of a node whose children are all measured already."""
    if isinstance(node, yaml.MappingNode):
        children = [child for pair in node.value for child in pair]
    else:
        children = node.value if isinstance(node, yaml.SequenceNode) else []
    sizes = [extent[id(child)] for child in children]
    return 1 + sum(values for values, _ in sizes), 1 + max((levels for _, levels in sizes), default=0)


def _unique_mapping(loader: _Loader, node: yaml.MappingNode) -> dict:
    seen = set()
    for key_node, _ in node.value:  # the mapping's own keys; `<<: *anchor` merges may be overridden
        own = isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge"
        key = loader.construct_object(key_node) if own else None
        if key is not None and key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


def _bounded_int(loader: _Loader, node: yaml.ScalarNode) -> int:
    digits = len(node.value)
    if digits > MAX_DIGITS:
        raise _Beyond(f"an integer of {digits:,} digits is beyond every bound", node.start_mark)
    return loader.construct_yaml_int(node)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)
_Loader.add_constructor("tag:yaml.org,2002:int", _bounded_int)


def _where(loc: tuple) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "spec"


BOUNDS = {"greater_than": (">", "gt"), "greater_than_equal": (">=", "ge"), "less_than": ("<", "lt"),
          "less_than_equal": ("<=", "le")}


def short(value: object) -> str:
    """A value for an error line as YAML spells it (true, null, .inf; a string quoted), never more than 60 characters
    however large it is."""
    text = _spelled(value)
    return text if len(text) <= 60 else f"{text[:40]}… ({len(text):,} characters)"


def _spelled(value: object) -> str:
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if value != value else ".inf" if value > 0 else "-.inf"
    return repr(value)


SCALAR_TYPES = {"int_type", "float_type", "bool_type", "string_type", "literal_error"}


def _message(err: dict) -> str:
    kind, ctx = err["type"], err.get("ctx", {})
    if err.get("input", "") is None and kind in SCALAR_TYPES:  # a null where null means nothing (a size, a dtype)
        return "must not be null (leave the key out for its default)"
    if err.get("input", "") is None and kind == "list_type" and "sweep" in err["loc"]:
        return "must be a list (got null); a sweep of null alone is [null]"
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required"
    if kind in BOUNDS:
        sign, key = BOUNDS[kind]
        return f"must be {sign} {ctx[key]}" + (f" (got {short(err['input'])})" if sign[0] == "<" else "")
    if kind == "string_pattern_mismatch":
        return f"use letters, digits, '.', '_' and '-', starting with a letter or digit (got {short(err['input'])})"
    if kind == "string_too_long":
        return f"must be at most {ctx['max_length']} characters"
    if kind in ("too_short", "string_too_short"):
        return "must not be empty"
    if kind == "invalid_key":
        return f"key {short(err['input'])} is not a string (quote it)"
    if kind == "value_error":  # a validator's own sentence, without pydantic's "Value error, "
        return str(ctx.get("error", err["msg"]))
    if kind == "literal_error":
        return f"must be one of {ctx['expected']} (got {short(err['input'])})"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be an integer (got {short(err['input'])})"
    if kind == "finite_number":
        return f"must be a finite number (got {short(err['input'])})"
    if kind in ("float_type", "float_parsing"):
        return f"must be a number (got {short(err['input'])})"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false (got {short(err['input'])})"
    if kind in ("string_type",):
        return f"must be a string (got {short(err['input'])})"
    if kind in ("list_type",):
        return f"must be a list (got {short(err['input'])})"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"must be a mapping (got {short(err['input'])})"
    return err["msg"]


def _problems(error: ValidationError) -> list[str]:
    return [f"{_where(e['loc'][:-1] if e['type'] == 'invalid_key' else e['loc'])}: {_message(e)}"  # loc ends in the key
            for e in error.errors()]


def parse_spec(data: object, known_variants: set[str], where: str | Path | None = None) -> Spec:
    """Validate a parsed YAML document; raise SpecError listing every problem (each after `where`, its file)."""
    unknown = _variant_problems(data.get("experiments") if isinstance(data, dict) else None, known_variants)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as error:
        raise SpecError(_problems(error) + unknown, where) from None
    problems = unknown + _cross_field_problems(spec)
    if problems:
        raise SpecError(problems, where)
    return spec


def stored_document(content: dict) -> dict:
    """A run's stored spec (Spec.content) as a document parse_spec reads back to the same digest: each experiment's
    nulls left out but those `nulls_given` names, its sweep's unset axes left out (and a sweep of none)."""
    nulls = content.get("nulls_given") or {}

    def experiment(exp: dict) -> dict:
        given = nulls.get(exp.get("name"), [])
        kept = {key: value for key, value in exp.items() if value is not None or key in given}
        axes = {axis: values for axis, values in (kept.pop("sweep", None) or {}).items() if values is not None}
        return {**kept, "sweep": axes} if axes else kept

    return {**{key: value for key, value in content.items() if key != "nulls_given"},
            "experiments": [experiment(exp) for exp in content.get("experiments") or []]}


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
    """Read and validate a YAML spec file; each problem names the file (and, past reading it, the YAML path)."""
    path = Path(path)
    data = _parse_yaml(path, _read(path))
    if data is None:  # no document, or comments alone
        raise SpecError([f"{path}: empty; a spec is a YAML mapping with name, experiments, ..."])
    if not isinstance(data, dict):
        raise SpecError([f"{path}: must be a YAML mapping with name, experiments, ... (got {type(data).__name__})"])
    return parse_spec(data, known_variants, path)


# What a spec path names when it is neither a regular file nor a pipe: reading it would fail obscurely or never end
# (/dev/zero never ends, a terminal waits for input)
NOT_A_FILE = {stat.S_IFDIR: "a folder", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device", stat.S_IFSOCK: "a socket"}


def _read(path: Path) -> str:
    """The file's text, read no further than MAX_SPEC_BYTES. A pipe is read too (`<(envsubst < spec.yaml)`), opened
    without waiting for a writer, so a FIFO that none holds open yet reads as empty instead of hanging; any other path
    that is not a regular file is refused before it is opened."""
    try:
        mode = path.stat().st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
            raise SpecError([f"{path}: {NOT_A_FILE.get(stat.S_IFMT(mode), 'a special file')}, not a file; a spec is "
                             "a YAML file"])
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO's open waits for a writer; this does not
        os.set_blocking(descriptor, True)  # a writer that holds it open is waited for as it writes
        with os.fdopen(descriptor, "rb") as f:
            data = f.read(MAX_SPEC_BYTES + 1)
    except FileNotFoundError:
        raise SpecError([f"{path}: no such file"]) from None
    except OSError as error:
        raise SpecError([f"{path}: cannot read ({error.strerror})"]) from None
    if not data and stat.S_ISFIFO(mode):
        raise SpecError([f"{path}: a pipe that gave nothing (no writer, or one that wrote nothing, e.g. a generator "
                         "that failed); a spec is a YAML file"])
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError([f"{path}: more than {MAX_SPEC_BYTES >> 20} MiB; a spec is a page or two of YAML"])
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise SpecError([f"{path}: not UTF-8 text"]) from None


def _parse_yaml(path: Path, text: str) -> object:
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.reader.ReaderError as error:  # a control character, which PyYAML places by offset alone
        line, column = text.count("\n", 0, error.position) + 1, error.position - text.rfind("\n", 0, error.position)
        raise SpecError([f"{path}:{line}:{column}: not valid YAML "
                         f"(character #x{error.character:04x} is not allowed)"]) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        if isinstance(error, _Beyond):
            raise SpecError([f"{where}: {error.problem}"]) from None
        problem = (getattr(error, "problem", None) or str(error)).splitlines()[0]
        raise SpecError([f"{where}: not valid YAML ({problem})"]) from None


def _cross_field_problems(spec: Spec) -> list[str]:
    problems = []
    if spec.timing.min_samples > spec.timing.max_samples:
        problems.append(f"timing.min_samples: must be <= max_samples ({spec.timing.max_samples})")
    names, used = set(), set()
    defaults = spec.defaults.model_dump(by_alias=True)
    for i, exp in enumerate(spec.experiments):
        where = f"experiments[{i}]"
        if exp.name in names:
            problems.append(f"{where}.name: duplicate experiment name {exp.name!r}")
        names.add(exp.name)
        if "sweep" in exp.model_fields_set and not exp.sweep.axes():
            problems.append(f"{where}.sweep: must name at least one axis")
        for axis in exp.overrides().keys() & exp.sweep.axes().keys():
            problems.append(f"{where}.{axis}: also swept ({where}.sweep.{axis}); give one or the other")
        problems += _head_problems(where, defaults, exp.overrides(), exp.sweep.axes())
        problems += _devices_problems(where, defaults, exp.overrides(), exp.sweep.axes())
        problems += _tp_problems(where, defaults, exp.overrides(), exp.sweep.axes())
        unused, used_by_some = _unused_problems(where, defaults, exp.overrides(), exp.sweep.axes())
        problems, used = problems + unused, used | used_by_some
    for name in shape.NEEDS.keys() - used:  # a defaults' value no cell of the spec uses
        if defaults[name] != shape.BY_NAME[name].default:
            problems.append(f"defaults.{name}: {_unused_why(name)}")
    return list(dict.fromkeys(problems))  # a clash in defaults is one line, not one per experiment


def set_at(where: str, name: str, overrides: dict, axes: dict, index: int | None = None) -> str:
    """Where an experiment's value of an axis is set: its sweep (at `index`, if given), its overrides, else the
    defaults."""
    if name in axes:
        return f"{where}.sweep.{name}" + (f"[{index}]" if index is not None else "")
    return f"{where}.{name}" if name in overrides else f"defaults.{name}"


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
    """Where the clashing pair is set: the experiment's kv_heads, else its heads, else the defaults' kv_heads."""
    given = axes.keys() | overrides.keys()
    if "heads" in given and "kv_heads" not in given:
        return set_at(where, "heads", overrides, axes, i)
    return set_at(where, "kv_heads", overrides, axes, j)


def _devices_problems(where: str, defaults: dict, overrides: dict, axes: dict) -> list[str]:
    """Each device holds an equal slice of the sequence: T and S must divide by every `devices` value."""
    shape = {**defaults, **overrides}
    problems = []
    for k, devices in enumerate(axes.get("devices", [shape["devices"]])):
        at = set_at(where, "devices", overrides, axes, k)
        for name in ("seq_len", "kv_seq_len"):
            for length in axes.get(name, [shape[name]]):
                if length is not None and length % devices:
                    problems.append(f"{at}: {name} ({length}) must be a multiple of devices ({devices}), each "
                                    f"holding an equal slice of the sequence")
    return problems


def _unused_why(name: str) -> str:
    other = shape.NEEDS[name][0]
    needed = "page_size set" if other == "page_size" else f"kv_lengths {', '.join(shape.RAGGED)}"
    return f"no cell here has {needed}, so {name} would change nothing; drop it or set {other}"


def _unused_problems(where: str, defaults: dict, overrides: dict, axes: dict) -> tuple[list[str], set[str]]:
    """kv_spread or page_order set in the experiment where none of its cells has what it changes (ragged lengths,
    pages), and the names of those some cell uses."""
    shape_values = {**defaults, **overrides}
    problems, used = [], set()
    for name, (other, applies) in shape.NEEDS.items():
        if any(applies(value) for value in axes.get(other, [shape_values[other]])):
            used.add(name)
        elif name in axes or name in overrides and overrides[name] != shape.BY_NAME[name].default:
            problems.append(f"{set_at(where, name, overrides, axes)}: {_unused_why(name)}")
    return problems, used


def _tp_problems(where: str, defaults: dict, overrides: dict, axes: dict) -> list[str]:
    """Each (heads, kv_heads, tp) the experiment makes that tp cannot shard, at the tp it sets (or the defaults')."""
    shape_values = {**defaults, **overrides}
    values = {name: axes.get(name, [shape_values[name]]) for name in ("heads", "kv_heads", "tp")}
    problems = []
    for heads in values["heads"]:
        for kv_heads in values["kv_heads"]:
            for i, tp in enumerate(values["tp"]):
                if problem := shape.tp_problem(heads, heads if kv_heads is None else kv_heads, tp):
                    problems.append(f"{set_at(where, 'tp', overrides, axes, i)}: {problem}")
    return problems
