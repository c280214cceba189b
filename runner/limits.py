"""Why a spec cannot run anywhere, told before its first cell (validate, run, the dry run): more cells than its limit,
a cell whose inputs alone no GPU holds, an experiment no variant can run any cell of. Apart from runner.cells, which
the dashboard reads, because it asks the variant registry what each variant declines."""

from __future__ import annotations

from runner.cells import cell_fault, count, input_bytes, largest, points, resolve
from runner.registry import VARIANTS, declined_option, option_decline
from runner.shape import Params
from runner.spec import MAX_CELLS, Experiment, Spec, set_at

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
    declined = {i: fault for i, exp in enumerate(spec.experiments)
                if cells <= limit and (fault := declined_throughout(spec, exp))}
    inherited = _defaults_fault(spec) if declined else None
    heirs = [spec.experiments[i].name for i, fault in declined.items() if fault == inherited]
    for i, exp in enumerate(spec.experiments):
        params = largest(spec, exp)
        if (size := input_bytes(params)) > MAX_INPUT_BYTES:
            problems.append(f"experiments[{i}]: cell {exp.name} {params.label()} needs {size / 2**40:,.1f} TiB for "
                            f"Q, K and V alone; no GPU holds {MAX_INPUT_BYTES >> 40} TiB")
        if exp.name in heirs[:1]:  # the defaults' problem, said once where it is set
            (field,), reason = inherited
            problems.append(f"defaults.{field}: {reason}; no variant can run any cell of {', '.join(heirs)}, "
                            f"which {'inherits' if len(heirs) == 1 else 'inherit'} it")
        elif i in declined and exp.name not in heirs:
            fields, reason = declined[i]  # each at the first point's value
            at = ", ".join(set_at(f"experiments[{i}]", field, exp.overrides(), exp.sweep.axes(), 0) for field in fields)
            problems.append(f"{at}: no variant can run any cell of {exp.name}: {reason}")
    return problems


def _defaults_fault(spec: Spec) -> tuple[tuple[str], str] | None:
    """The defaults' field that makes no variant able to run their own cell and why (cells.cell_fault), or None."""
    try:
        return _cell_fault(resolve(spec.defaults.model_dump(by_alias=True)))
    except ValueError:  # heads that tp leaves none of: the experiments set their own
        return None


def declined_throughout(spec: Spec, exp: Experiment) -> tuple[tuple[str, ...], str] | None:
    """The fields the first point's reason is about, and that reason, when no variant can run any point of the
    experiment (cells.cell_fault, or a model option each of its variants declines whatever the device:
    runner.registry.option_decline), else None; stops at the first point that can run."""
    first = None
    for params in points(spec, exp):
        if (fault := _cell_fault(params) or _options_declined(exp.variants, params)) is None:
            return None
        first = first or fault
    return first


def _cell_fault(params: Params) -> tuple[tuple[str], str] | None:
    """cells.cell_fault with its one field as the fields a fault names."""
    return (fault := cell_fault(params)) and ((fault[0],), fault[1])


def _options_declined(variants: list[str], params: Params) -> tuple[tuple[str, ...], str] | None:
    """The options the variants decline (each variant's first, once each, in the variants' order) and each variant's
    reason, when every one declines a model option the cell sets, else None (a variant not registered here is taken
    to run it): the reason names them all, so the path names them all."""
    reasons = {name: option_decline(VARIANTS[name], params) if name in VARIANTS else None
               for name in dict.fromkeys(variants)}
    if not all(reasons.values()):
        return None
    by_why: dict[str, list[str]] = {}  # one reason said once for the variants that give it
    for name, reason in reasons.items():
        by_why.setdefault(reason.removeprefix(f"{name} declines "), []).append(name)
    fields = tuple(dict.fromkeys(declined_option(VARIANTS[name], params) for name in reasons))
    return fields, "; ".join(
        f"{', '.join(names)} decline{'s' if len(names) == 1 else ''} {why}" for why, names in by_why.items())
