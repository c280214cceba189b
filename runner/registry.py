"""Variant registry: each variant is one decorated function, with all its rules beside it.

A variant's build function takes the cell's Params and returns `attend(q, k, v) -> out` with q of shape
(B, T, N, H) and k, v of shape (B, S, K, H), all in the cell's dtype; the output has q's shape. A variant whose
timed call takes other inputs (FP8 tensors and their scales) returns a Staged; one with a configuration to
search returns a Tuned; one whose library tunes its own kernels (tokamax.autotune) returns an Autotuned. A
variant declines a cell it cannot run, with a reason: statically by its Requires and its `check(params)`, on a GPU
by its `gpu_check(params, compute capability)` (a kernel that GPU lacks), or at build time by raising Skip (nvbench's
`state.skip`) for what only the build can find.

Importing this module, or any module of runner.variants, imports no GPU library: those load inside the build
(or preload) functions, so validating a spec or reading results never pays for them.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import pkgutil
import sys
from dataclasses import dataclass, field
from types import MappingProxyType
from pathlib import Path
from typing import Any, Callable, get_args

from runner import BadVariant, counted, shape
from runner.cells import cell_problem
from runner.machine import Device
from runner.metrics import FP8_MATMULS
from runner.record import VariantInfo
from runner.shape import Fp8Matmul, Params, default_params

Attend = Callable  # (q, k, v) -> out
GpuCheck = Callable[[Params, float], str | None]  # (params, the GPU's compute capability) -> why it declines, or None


@dataclass(frozen=True)
class KvCopy:
    """Copies of a cell's K and V that a variant's call makes beside the cell's own (a paged cell's gathered cache, a
    pool laid out again, XLA's layout of K for its dot, K and V repeated to the query heads): the memory rule counts
    them (memory.too_large), so the run's plan skips a cell whose copies cannot fit."""

    what: str  # the copies as a skip line names them: "xla_paged's gathered K and V and XLA's copy of one"
    bytes: Callable[[Params], int]  # its size (runner.metrics)


def first_line(error: BaseException, limit: int = 500) -> str:
    """An error as a reason shows it: `Type: message`, its first line, at most `limit` characters."""
    return f"{type(error).__name__}: {str(error).strip()}".splitlines()[0][:limit]


class Skip(Exception):
    """Raised by a variant's build (or a worker's preload): this cell cannot run here, for the reason given."""


@dataclass(frozen=True)
class Staged:
    """prepare (untimed) -> attend (timed, compiled and inspected) -> finish (untimed)."""

    prepare: Callable  # (q, k, v[, dout under fwd_bwd]) -> tuple of attend's arguments (and dout, last)
    attend: Callable
    finish: Callable  # attend's output -> the output in the cell's dtype
    twin: Callable | None = None  # attend without its collectives (same arguments, same local work): a cell split
    # across devices times it too, for its communication (runner/communication.py)


@dataclass(frozen=True)
class Tuned:
    """A configuration search: each config is built, compiled and briefly timed; the fastest is measured.

    A config that cannot compile for this shape (it does not fit in shared memory, say) is skipped with the error.
    """

    configs: list[dict[str, Any]]
    build: Callable[[dict[str, Any]], Attend | Staged]


@dataclass(frozen=True)
class Autotuned:
    """A call its library tunes for the cell's shape before it is compiled: `tune(fn, args)` runs the library's
    autotuner on the timed call `fn` (args: shapes) and returns its result as text (JSON); `apply(text)` is the
    context the call is lowered in, with that result in force; `chosen(text)` reads it as (config, candidates)
    for the record; `in_force(lowered)` reads back the config each op was lowered with. The text is what the
    tuning cache keeps (runner/tuning_cache.py)."""

    attend: Attend | Staged
    tuner: str  # the autotuner, named in the record: "tokamax.autotune"
    tune: Callable[[Callable, tuple], str]
    apply: Callable[[str], Any]  # text -> a context manager
    chosen: Callable[[str], tuple[dict[str, Any], list[dict[str, Any]]]]  # text -> (config, Candidate fields)
    in_force: Callable[[Any], dict[str, Any]]  # a lowered call -> the config each tuned op was lowered with


def none_fits(name: str, problems: list[str | None]) -> str | None:
    """A Tuned variant's rule: decline a shape that none of its configurations fits, naming the first's problem."""
    if problems and all(problems):
        return f"none of {name}'s {len(problems)} configurations fits this shape ({problems[0]})"
    return None


@dataclass(frozen=True)
class Requires:
    """What a variant needs; anything unmet makes its cells `skipped` with a reason."""

    gpu: bool = False
    min_compute_capability: float | None = None
    dtypes: tuple[str, ...] | None = None
    head_dim_multiple: int = 1
    max_head_dim: int | None = None
    passes: tuple[str, ...] = ("fwd", "fwd_bwd")
    package: str | None = None
    install: str | None = None  # how to install `package`, said where it is missing
    max_devices: int = 1  # a variant that splits the sequence across devices (the `devices` axis) says how many
    options: tuple[str, ...] = ()  # the OPTIONS it implements; a cell setting any other is declined
    why_not: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))  # option -> why it declines it
    score_bytes: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))  # pass -> dtype -> device
    # memory its program keeps per (B, N, T, S) score, where it materialises them: the memory rule counts them
    # (memory.too_large)

    def words(self) -> list[str]:
        """The requirements as a reader of the manifest sees them: what it needs, then the model options it takes."""
        takes = self.takes()
        return self.needs() + [f"of the model options, only {', '.join(takes)}" if takes else NO_OPTIONS]

    def takes(self) -> list[str]:
        """The model options it implements, in words; it declines every other."""
        return [OPTIONS[name] for name in self.options]

    def why(self, option: str) -> str:
        """Why it declines a model option it does not take."""
        return self.why_not.get(option, "it implements none")

    def needs(self) -> list[str]:
        """What it needs of the device, the cell's dtype, head_dim and pass, the installation, the devices and the
        memory for the scores it materialises."""
        found = []
        if self.gpu or self.min_compute_capability:
            at_least = f" with compute capability >= {self.min_compute_capability:.1f}" if self.min_compute_capability else ""
            found.append(f"NVIDIA GPU{at_least}")
        if self.dtypes:
            found.append(f"dtype {' or '.join(self.dtypes)}")
        if self.head_dim_multiple > 1 or self.max_head_dim:
            limit = f", <= {self.max_head_dim}" if self.max_head_dim else ""
            found.append(f"head_dim a multiple of {self.head_dim_multiple}{limit}")
        if tuple(self.passes) != ("fwd", "fwd_bwd"):
            found.append(f"pass {' or '.join(self.passes)}")
        if self.package:
            found.append(f"the {self.package} package")
        if self.max_devices > 1:
            found.append(f"splits the sequence across up to {self.max_devices} devices")
        if self.score_bytes:
            each = "; ".join(f"{phase}: " + ", ".join(f"{size} bytes each {dtype}" for dtype, size in sizes.items())
                             for phase, sizes in self.score_bytes.items())
            found.append(f"device memory for its (B, N, T, S) scores ({each})")
        return found


# The shape axes a library may or may not implement, in words, each with its article ("declines an ALiBi bias"): how
# a phrase is said, not its first letter, picks a or an. At their default every variant runs them.
OPTIONS = {"window": "a sliding window", "fill": "a padded batch (fill < 1)", "bias": "an ALiBi bias",
           "softcap": "a logit soft cap", "v_head_dim": "a V head dimension other than head_dim",
           "kv_lengths": "a serving batch (per-request KV lengths, causal aligned to each request's end)",
           "page_size": "a paged KV cache", "documents": "a packed row (documents > 1)",
           "deterministic": "a deterministic backward", "tune": "a tuned kernel (tune: true, the library's autotuner)"}
NO_OPTIONS = "none of the model options"  # what a variant that implements none of OPTIONS takes, in words


JAX_WORKER = "jax"  # the worker (library set: JAX's alone) that a variant's cells run in unless it names its own


@dataclass(frozen=True)
class Variant:
    name: str
    build: Callable[[Params], Attend | Staged | Tuned | Autotuned]
    requires: Requires
    doc: str
    backend: str | None = None  # what its custom calls prove; None: decided when compiled (auto)
    fp8_baseline: str | None = None  # promises FP8: compared with this bf16 variant, verdict recorded
    check: Callable[[Params], str | None] | None = None  # why it declines these params, or None
    gpu_check: GpuCheck | None = None  # why it declines these params on a GPU of this compute capability, or None
    worker: str = JAX_WORKER  # cells run in a worker process per library set
    preload: Callable[[], None] | None = None  # imports that must come before JAX's GPU backend starts
    probe: Callable[[], str | None] | None = None  # why a needed API is missing here, or None
    rules: list[str] = field(default_factory=list)  # `check`'s and `gpu_check`'s rules in words, for the manifest
    legacy: str | None = None  # its library's deprecation and what replaces it, said wherever it is listed
    fp8_matmuls: tuple[Fp8Matmul, ...] = FP8_MATMULS  # FP8 variants: the matmuls run on f8 values (Q·Kᵀ, P·V)
    kv_copy: KvCopy | None = None  # the copies of the cell's K and V its call makes beside them

    def info(self) -> VariantInfo:
        return VariantInfo(doc=self.doc, backend=self.backend, fp8_baseline=self.fp8_baseline,
                           requires=self.requires.words() + self.rules, worker=self.worker, legacy=self.legacy)


VARIANTS: dict[str, Variant] = {}
BACKENDS: dict[str, tuple[str, ...]] = {}  # backend -> custom-call target prefixes that prove it ran
BROKEN: dict[str, str] = {}  # variant module -> why it could not be imported
VARIANTS_ENV = "ATTNBENCH_VARIANTS"  # more variant files, outside the package (a team's own, or a test's)


def variant(name: str, requires: Requires = Requires(), *, backend: str | None = None, proves: tuple[str, ...] = (),
            fp8_baseline: str | None = None, check: Callable[[Params], str | None] | None = None,
            gpu_check: GpuCheck | None = None, rules: tuple[str, ...] = (), worker: str = JAX_WORKER,
            preload: Callable[[], None] | None = None, probe: Callable[[], str | None] | None = None,
            legacy: str | None = None, fp8_matmuls: tuple[Fp8Matmul, ...] = FP8_MATMULS,
            kv_copy: KvCopy | None = None):
    """Register `build(params) -> attend | Staged | Tuned | Autotuned` under `name`, with every rule of the
    variant: `backend` and the custom-call prefixes that `prove` it, `check(params)` and its `rules` in words, the
    `gpu_check(params, capability)` for the rules a GPU's compute capability decides (cuDNN's packed rows from Hopper,
    say: the plan, the dry run and the leaderboard's reasons say them before a worker is asked), the
    `worker` (library set) it runs in and that worker's `preload`, for FP8 the bf16 variant it replaces and the
    matmuls it runs on f8 values (`fp8_matmuls`, of metrics.FP8_MATMULS: its record's MMA peak is set by them), for
    a variant on a deprecated library, `legacy`: the deprecation and its replacement, and for one whose call copies the
    cell's K and V, `kv_copy`: what the memory rule counts of them."""
    if unknown := set(fp8_matmuls) - set(FP8_MATMULS):
        raise ValueError(f"variant {name}: fp8_matmuls {sorted(unknown)} are not of {FP8_MATMULS}")
    if problem := (_options_problem(requires) or _scores_problem(requires) or _proof_problem(backend, proves)
                   or _worker_problem(worker, preload) or _rules_problem(check or gpu_check, rules)):
        raise ValueError(f"variant {name}: {problem}")

    def register(build: Callable) -> Callable:
        if problem := _build_problem(name, build):
            raise ValueError(f"variant {name}: {problem}")
        doc = build.__doc__.strip().splitlines()[0]
        if backend and proves:
            BACKENDS.setdefault(backend, tuple(proves))
        VARIANTS[name] = Variant(name, build, requires, doc, backend, fp8_baseline, check, gpu_check, worker, preload,
                                 probe, list(rules), legacy, tuple(fp8_matmuls), kv_copy)
        return build

    return register


def _options_problem(requires: Requires) -> str | None:
    """Why the model options a variant's Requires takes or declines cannot be read, or None: a name that is no model
    option would fail the manifest's words at run time, and a reason for an option it takes would never be shown."""
    if unknown := (set(requires.options) | set(requires.why_not)) - set(OPTIONS):
        return f"Requires names {sorted(unknown)}, which are not model options (those are {', '.join(OPTIONS)})"
    if taken := set(requires.options) & set(requires.why_not):
        return f"Requires gives a reason to decline {sorted(taken)} (why_not), which it takes (options)"
    return None


def _scores_problem(requires: Requires) -> str | None:
    """Why the score bytes a variant's Requires declares cannot be read, or None: they are given for each pass it runs
    and no other, and within each for each dtype it runs and no other, so the memory rule counts the scores of every
    cell it runs (a pass or dtype left out would count none)."""
    if not requires.score_bytes:
        return None
    if set(requires.score_bytes) != set(requires.passes):
        return f"Requires gives score_bytes for {sorted(requires.score_bytes)}, not for the passes it runs " \
               f"({', '.join(requires.passes)})"
    dtypes = requires.dtypes or get_args(shape.DType)
    for phase, sizes in requires.score_bytes.items():
        if set(sizes) != set(dtypes):
            return f"Requires gives {phase}'s score_bytes for {sorted(sizes)}, not for the dtypes it runs " \
                   f"({', '.join(dtypes)})"
    return None


def _proof_problem(backend: str | None, proves: tuple[str, ...]) -> str | None:
    """Why the custom calls said to prove `backend` cannot, or None: a str alone (a tuple's comma missing) would be
    read as one-letter prefixes claiming other variants' custom calls, prefixes beside xla or no backend would be
    ignored, a backend other than xla that nothing proves would be listed while every record said xla, and prefixes
    other than its known ones would be dropped."""
    if not isinstance(proves, (tuple, list)) or not all(isinstance(p, str) and p for p in proves):
        return (f"proves={proves!r} is not a tuple of custom-call prefixes (non-empty strings); "
                "one prefix is written ('prefix',), with its comma")
    proves, known = tuple(proves), BACKENDS.get(backend)
    if proves and backend in (None, "xla"):
        return (f"proves={proves} has no effect beside backend {backend!r} (what no custom call proves reads as xla): "
                "name the backend they prove, or drop proves")
    if backend not in (None, "xla") and not (proves or known):
        return f"nothing proves backend {backend!r}: give proves=(the prefixes of its custom-call targets)"
    if known and proves and proves != known:
        return f"backend {backend!r} is proved by {known} already, not by {proves}"
    return None


def _rules_problem(check: Callable[[Params], str | None] | None, rules: tuple[str, ...]) -> str | None:
    """Why `rules` cannot be given, or None: they are the checks' rules in words, so without a check (or gpu_check)
    they are words the manifest would show that nothing applies."""
    if rules and check is None:
        return f"rules={tuple(rules)} without a check: give check= (or gpu_check=) the same rules in code, or drop " \
               "rules"
    return None


def _worker_problem(worker: str, preload: Callable[[], None] | None) -> str | None:
    """Why `worker` names no worker, or None: a worker of its own is a process that loads a library set before JAX's
    GPU backend starts, by the preload this variant, or one registered before it, gives; a name that none gives (a
    typo) would run the variant's cells in a process of their own, silently."""
    known = {JAX_WORKER} | {v.worker for v in VARIANTS.values() if v.preload}
    if worker in known or preload:
        return None
    return (f"worker {worker!r} is none of the workers ({', '.join(sorted(known))}); a worker of its own is named "
            "with the preload= that loads its libraries before JAX's GPU backend starts")


def _build_problem(name: str, build: Callable) -> str | None:
    """Why `build` cannot be registered under `name`, or None: another owns the name (a second would replace it
    unseen, and its cells would time another kernel under that name), or it has no docstring (its first line is the
    variant's description)."""
    if name in VARIANTS:
        return f"the name is registered already, by {_origin(VARIANTS[name])}"
    if not (build.__doc__ or "").strip():
        return (f"{build.__name__} has no docstring: its first line is the description that `attnbench list`, "
                "the manifest and the dashboard show")
    return None


def _extra_files() -> list[Path]:
    """Variant files named by $ATTNBENCH_VARIANTS: .py files or folders of them, separated like PATH."""
    found = []
    for entry in filter(None, os.environ.get(VARIANTS_ENV, "").split(os.pathsep)):
        path = Path(entry)
        found += sorted(path.glob("*.py")) if path.is_dir() else [path]
    return found


def _import(name: str, load: Callable[[], object]) -> None:
    """Import one variant file, all or nothing: where it fails (a decorator refused, an error below one, a check that
    breaks its contract on the default cell: a bool returned, a field no cell has read, which every command that plans
    its cells would end on), what its decorators registered is unregistered, so the file is `broken` as its line
    says, not half loaded, and each later file is judged against the files that did load."""
    before = set(VARIANTS)
    try:
        load()
        for registered in [n for n in VARIANTS if n not in before]:  # asked as a run asks it: a default cell
            static_decline(VARIANTS[registered], default_params())  # its Requires decline never reaches the check
    except Exception as error:  # one broken variant file must not take the others down
        _unload(name, f"{type(error).__name__}: {error}", [n for n in VARIANTS if n not in before])


def _unload(name: str, why: str, variants: list[str]) -> None:
    """Unregister a file that cannot load, with why in BROKEN: its `variants`, and each backend that no variant left
    names (those whose prefixes it alone gave), so no record's backend is read from a file that is not loaded."""
    BROKEN[name] = why
    for registered in variants:
        del VARIANTS[registered]
    named = {v.backend for v in VARIANTS.values()}
    for backend in [b for b in BACKENDS if b not in named]:
        del BACKENDS[backend]


def _import_file(path: Path) -> None:
    """Import a variant file as a module named after its resolved path: a file of the same name in another folder
    (two teams' attention.py) is a module of its own, where it was taken for the first and skipped without a word,
    and the same file named twice (itself and its folder) is imported once."""
    where = path.resolve()
    module_name = f"attnbench_variants_{path.stem}_{hashlib.sha256(str(where).encode()).hexdigest()[:8]}"
    if module_name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)


def load_all() -> dict[str, Variant]:
    """Import every module of runner.variants, and the files $ATTNBENCH_VARIANTS names, so their decorators run;
    a module that fails to import is kept in BROKEN with its error, as is the file of a variant whose FP8 baseline is
    missing or whose check breaks its contract on the default cell."""
    import runner.variants as package

    for module in pkgutil.iter_modules(package.__path__):
        name = f"{package.__name__}.{module.name}"
        _import(name, lambda: importlib.import_module(name))
    for path in _extra_files():
        if not path.is_file() or path.suffix != ".py":  # importlib would fail it as "'NoneType' has no 'loader'"
            BROKEN[str(path)] = "no such file or folder" if not path.exists() else "not a .py file"
        else:
            _import(str(path), lambda: _import_file(path))
    _drop_unsound()
    return VARIANTS


def _drop_unsound() -> None:
    """Unregister, as if it had been refused, the file of each variant left unsound once every file has loaded: its
    FP8 baseline names no variant (every cell would fail on that name), or its worker's preload left with a dropped
    file (its cells would run in a process of their own, without its libraries). A drop may leave another unsound
    (a variant of that file was a baseline, or gave the preload), so until none is; each has why in BROKEN."""
    while found := next(((v, why) for v in VARIANTS.values() if (why := _baseline_problem(v) or _preload_problem(v))),
                        None):
        v, why = found
        _unload(_origin(v), why, [n for n, o in VARIANTS.items() if o.build.__module__ == v.build.__module__])


def _preload_problem(v: Variant) -> str | None:
    """Why v's worker has no preload, or None: the variant that gave it was not loaded."""
    if v.worker == JAX_WORKER or any(o.worker == v.worker and o.preload for o in VARIANTS.values()):
        return None
    return f"ValueError: variant {v.name}: worker {v.worker!r} has no preload: the file that gave it is not loaded"


def _baseline_problem(v: Variant) -> str | None:
    """Why v's fp8_baseline cannot be compared with, or None: it names no variant (every cell would fail on that
    name), a check that waits for every file, as a baseline may be registered in a later one."""
    if v.fp8_baseline and v.fp8_baseline not in VARIANTS:
        return f"ValueError: variant {v.name}: its fp8_baseline {v.fp8_baseline!r} is no registered variant"
    return None


def _origin(v: Variant) -> str:
    """The name BROKEN keeps a variant's file under: its module in runner.variants, else the file's path."""
    module = sys.modules[v.build.__module__]
    return module.__name__ if module.__name__.startswith(f"{__package__}.variants.") else module.__file__


def unloaded_files() -> dict[str, str]:
    """The files $ATTNBENCH_VARIANTS names that load_all could not load, with why."""
    return {name: why for name, why in BROKEN.items() if not name.startswith(f"{__package__}.variants.")}


def backend_of(custom_calls: list[str]) -> str:
    """The backend the compiled program's custom calls prove, else xla."""
    for backend, prefixes in BACKENDS.items():
        if any(call.startswith(prefixes) for call in custom_calls):
            return backend
    return "xla"


def _needs_gpu(name: str, req: Requires) -> str:
    capability = f" with compute capability ≥ {req.min_compute_capability:.1f}" if req.min_compute_capability else ""
    return f"{name} needs an NVIDIA GPU{capability}"


def unmet(v: Variant, device: Device) -> str | None:
    """Why `v` cannot run on this device at all, or None (its probe, which may import GPU libraries, aside)."""
    req = v.requires
    capability, needed = device.compute_capability, req.min_compute_capability
    if (req.gpu or needed) and (capability is None or (needed and capability < needed)):
        return f"{_needs_gpu(v.name, req)}; the device here is {device.describe()}"
    if req.package and importlib.util.find_spec(req.package) is None:
        how = f" ({req.install})" if req.install else ""
        return f"{v.name} needs the Python package '{req.package}', which is not installed here{how}"
    return None


def decline(v: Variant, params: Params, device: Device) -> str | None:
    """Why `v` declines this cell here, or None when it can run it (a build may still raise Skip): what this device
    lacks, and beside it any rule the cell breaks wherever the variant runs, so a CPU's skip says which cells a GPU
    would still decline; on a GPU, the rules its compute capability decides (gpu_check)."""
    rule = static_decline(v, params)
    if lack := unmet(v, device):
        return f"{lack}; where it can run, it declines this cell all the same: {rule}" if rule else lack
    return rule or gpu_checked(v, params, device) or _too_few_devices(params, device)


def static_decline(v: Variant, params: Params) -> str | None:
    """Why `v` declines this cell on any device (the cell breaks a rule of the variant's), or None."""
    req = v.requires
    if req.dtypes and params.dtype not in req.dtypes:
        return f"{v.name} runs {' / '.join(req.dtypes)} only, not {params.dtype}"
    if params.head_dim % req.head_dim_multiple:
        return f"{v.name} needs head_dim a multiple of {req.head_dim_multiple}, not {params.head_dim}"
    if req.max_head_dim and params.head_dim > req.max_head_dim:
        return f"{v.name} supports head_dim up to {req.max_head_dim}, not {params.head_dim}"
    if reason := _no_pass(v, params.pass_):
        return reason
    if reason := _too_many_devices(v, params) or cell_problem(params):
        return reason
    return option_decline(v, params) or checked(v, params)


def _no_pass(v: Variant, pass_: str) -> str | None:
    """Why `v` declines a cell of this pass: it has not that pass; else None."""
    if pass_ not in v.requires.passes:
        return f"{v.name} has no {pass_} pass (it supports {' / '.join(v.requires.passes)})"
    return None


def passes_lacked(v: Variant) -> list[str]:
    """Why `v` declines each pass it has not, in static_decline's words: what `attnbench list` says after its
    description, which leaves them to its Requires."""
    return [reason for pass_ in get_args(shape.Pass) if (reason := _no_pass(v, pass_))]


def checked(v: Variant, params: Params) -> str | None:
    """Why v's check declines these params, or None, held to its contract (_held)."""
    return _held(v, "check", v.check, params) if v.check else None


def gpu_checked(v: Variant, params: Params, device: Device) -> str | None:
    """Why v's gpu_check declines these params on this device's GPU, or None (no GPU here: nothing to decide)."""
    if v.gpu_check is None or device.compute_capability is None:
        return None
    return _held(v, "gpu_check", v.gpu_check, params, device.compute_capability)


def _held(v: Variant, what: str, check: Callable, *args) -> str | None:
    """check(*args) held to its contract (a reason, a str, or None): else BadVariant, one line naming the variant and
    the check's file, where the check's own error ended the command as an internal error naming neither."""
    try:
        reason = check(*args)
    except Exception as error:
        raise BadVariant(f"variant {v.name}: its {what} ({_where(v, check)}) raised {first_line(error)}") from None
    if reason is None or isinstance(reason, str):
        return reason
    raise BadVariant(f"variant {v.name}: its {what} ({_where(v, check)}) returned {reason!r}, not a reason (a str) "
                     "or None")


def _where(v: Variant, check: Callable) -> str:
    """The file and line of a check of v's; the file of its build where the check is no plain function (a partial)."""
    code = getattr(check, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else sys.modules[v.build.__module__].__file__


def option_decline(v: Variant, params: Params) -> str | None:
    """Why `v` declines a model option the cell sets (one not in its Requires.options), or None: a rule of the
    variant's own, whatever the device, library or version."""
    name = declined_option(v, params)
    return name and f"{v.name} declines {OPTIONS[name]}: {v.requires.why(name)}"


def declined_option(v: Variant, params: Params) -> str | None:
    """The first model option the cell sets that `v` does not take, or None."""
    values = params.as_dict()  # once a cell: validate and a run's plan ask it of every cell
    return next((name for name in OPTIONS
                 if name not in v.requires.options and not shape.at_default(shape.BY_NAME[name], values)), None)


@dataclass
class Probes:
    """Each variant's probe, run once in this process: why a needed API is missing here, or None."""

    found: dict[str, str | None] = field(default_factory=dict)

    def __call__(self, v: Variant) -> str | None:
        if v.name not in self.found:
            self.found[v.name] = v.probe() if v.probe else None
        return self.found[v.name]


def _too_many_devices(v: Variant, params: Params) -> str | None:
    """Why the variant cannot split the cell across its `devices`: it runs on fewer."""
    if params.devices > v.requires.max_devices:
        most = "one device" if v.requires.max_devices == 1 else f"at most {v.requires.max_devices} devices"
        return f"{v.name} runs on {most}, not {params.devices} (it does not split the sequence)"
    return None


def _too_few_devices(params: Params, device: Device) -> str | None:
    """Why this worker cannot give the cell its `devices`: it sees fewer."""
    if params.devices > device.count:
        sees = counted(device.count, f"{device.platform} device")
        return f"the cell needs {params.devices} devices; this worker sees {sees}"
    return None
