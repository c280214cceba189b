"""Why a spec cannot run anywhere, told before its first cell (validate, run, the dry run): more cells than its limit,
a cell whose inputs alone no GPU holds, an experiment no variant can run any cell of. Apart from runner.cells, which
the dashboard reads, because it asks the variant registry what each variant declines."""

from __future__ import annotations

from runner import masks
from runner.cells import cell_problem, count, input_bytes, largest, points, resolve
from runner.registry import VARIANTS, option_decline
from runner.shape import Params
from runner.spec import MAX_CELLS, Experiment, Spec

MAX_INPUT_BYTES = 1 << 40  # no GPU holds 1 TiB: a cell whose inputs alone need more is a typo, refused up front


def limits(spec: Spec, max_cells: int | None = None) -> list[str]:
    """Why the sweep cannot run anywhere: more cells than `max_cells` (else the spec's, counted without expanding),
    a cell whose inputs alone no GPU holds, or an experiment no cell of which any variant can run (a spec that
    clashes only at some sweep points runs the rest, those declined with the reason)."""
    problems = []
    cells, limit = count(spec), max_cells or spec.max_cells
    if cells > limit:
        source = "--max-cells" if max_cells else "max_cells"
        remedy = f"or raise {source} (at most {MAX_CELLS:,})" if limit < MAX_CELLS else "or split the spec"
        problems.append(f"experiments: the sweeps make {cells:,} cells, more than {source} ({limit:,}); sweep fewer "
                        f"values, {remedy}")
    declined = {i: reason for i, exp in enumerate(spec.experiments)
                if cells <= limit and (reason := declined_throughout(spec, exp))}
    field, inherited = _defaults_problem(spec) if declined else ("", None)
    heirs = [spec.experiments[i].name for i, reason in declined.items() if reason == inherited]
    for i, exp in enumerate(spec.experiments):
        params = largest(spec, exp)
        if (size := input_bytes(params)) > MAX_INPUT_BYTES:
            problems.append(f"experiments[{i}]: cell {exp.name} {params.label()} needs {size / 2**40:,.1f} TiB for "
                            f"Q, K and V alone; no GPU holds {MAX_INPUT_BYTES >> 40} TiB")
        if exp.name in heirs[:1]:  # the defaults' problem, said once where it is set
            problems.append(f"defaults.{field}: {inherited}; no variant can run any cell of {', '.join(heirs)}, "
                            f"which {'inherits' if len(heirs) == 1 else 'inherit'} it")
        elif i in declined and exp.name not in heirs:
            problems.append(f"experiments[{i}]: no variant can run any cell of {exp.name}: {declined[i]}")
    return problems


def _defaults_problem(spec: Spec) -> tuple[str, str | None]:
    """Why no variant can run the defaults' own cell (cell_problem), and the defaults' field that makes it so (the
    option a packed row, a serving cell or determinism is asked by); ("", None) where it can run."""
    try:
        params = resolve(spec.defaults.model_dump(by_alias=True))
    except ValueError:  # heads that tp leaves none of: the experiments set their own
        return "", None
    if (reason := cell_problem(params)) is None:
        return "", None
    if params.deterministic and params.pass_ != "fwd_bwd":
        return "deterministic", reason
    if masks.packing_problem(params):
        return "documents", reason
    return ("kv_lengths" if params.kv_lengths is not None else "page_size"), reason


def declined_throughout(spec: Spec, exp: Experiment) -> str | None:
    """The first point's reason when no variant can run any point of the experiment (cell_problem, or a model
    option each of its variants declines whatever the device: runner.registry.option_decline), else None; stops at
    the first point that can run."""
    first = None
    for params in points(spec, exp):
        if (reason := cell_problem(params) or _options_declined(exp.variants, params)) is None:
            return None
        first = first or reason
    return first


def _options_declined(variants: list[str], params: Params) -> str | None:
    """Each variant's reason when every one declines a model option the cell sets, else None (a variant not
    registered here is taken to run it)."""
    reasons = {name: option_decline(VARIANTS[name], params) if name in VARIANTS else None
               for name in dict.fromkeys(variants)}
    if not all(reasons.values()):
        return None
    by_why: dict[str, list[str]] = {}  # one reason said once for the variants that give it
    for name, reason in reasons.items():
        by_why.setdefault(reason.removeprefix(f"{name} declines "), []).append(name)
    return "; ".join(f"{', '.join(names)} decline{'s' if len(names) == 1 else ''} {why}"
                     for why, names in by_why.items())
