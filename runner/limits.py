"""Why a spec cannot run anywhere, told before its first cell (validate, run, the dry run): more cells than its limit,
a cell whose inputs alone no GPU holds, an experiment no variant can run any cell of; and, said by validate, the cells
declined on any device and the swept values none of whose cells runs. Apart from runner.cells, which the dashboard
reads, because it asks the variant registry what each variant declines."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from runner.cells import Cell, cell_fault, cell_problem, count, input_bytes, largest, points, resolve
from runner.registry import VARIANTS, declined_option, option_decline, static_decline
from runner.shape import Params
from runner.spec import MAX_CELLS, Experiment, Spec, set_at, short

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
    fields = tuple(dict.fromkeys(declined_option(VARIANTS[name], params) for name in reasons))
    return fields, said_once(reasons)


def said_once(reasons: dict[str, str]) -> str:
    """Each variant's reason, in one line (said_apart's, joined)."""
    return "; ".join(said_apart(reasons))


def said_apart(reasons: dict[str, str]) -> list[str]:
    """Each variant's reason: one that several give ('declines a paged KV cache: …') said once after their names."""
    return list(_by_rule(reasons.items()))


def _by_rule(given: Iterable[tuple[str, str]]) -> Counter[str]:
    """How often each rule is given (variant name, its reason: pairs, a variant's rule once or more), said once after
    the names of the variants that give it, in the order the rules first come."""
    by_rule: Counter[tuple[str, str]] = Counter()
    named: dict[tuple[str, str], dict[str, None]] = {}
    for name, reason in given:
        rule = _rule(name, reason)
        by_rule[rule] += 1
        named.setdefault(rule, {})[name] = None
    return Counter({_named(named[rule], *rule): n for rule, n in by_rule.items()})


LEADS = (" declines ", ": ")  # how a variant's reason follows its name: an option it declines, a check's or a cell's


def _rule(name: str, reason: str) -> tuple[str, str]:
    """How `reason` follows its variant's name (one of LEADS) and the rest, which other variants may give alike; ''
    and the whole reason where it follows it otherwise ('cudnn runs bfloat16 / float16 only'): said as it is."""
    lead = next((lead for lead in LEADS if reason.startswith(name + lead)), "")
    return lead, reason.removeprefix(name + lead) if lead else reason


def _named(names: Iterable[str], lead: str, rest: str) -> str:
    """A rule said once after the names of the variants that give it ('cudnn, xla decline a logit soft cap: …'), sorted
    as `attnbench list` lists them: one order wherever validate says it, whatever order the cells came in."""
    names = sorted(names)
    verb = " decline " if lead == " declines " and len(names) > 1 else lead
    return f"{', '.join(names)}{verb}{rest}" if lead else rest


def declines_anywhere(cells: Iterable[Cell]) -> list[str | None]:
    """Each cell's reason to be declined on any device (a variant's Requires past the device, its check), led by its
    variant's name where it does not name it, or None, in the cells' order: what validate can know without the
    device, which a run's --dry-run adds."""
    said = []
    for cell in cells:
        reason = static_decline(VARIANTS[cell.variant], cell.params)
        said.append(reason and (reason if reason.startswith(f"{cell.variant} ") else f"{cell.variant}: {reason}"))
    return said


def declines_counted(cells: Iterable[Cell], reasons: list[str | None]) -> Counter[str]:
    """How many of the cells each reason (declines_anywhere's, in the cells' order) declines: one that several variants
    give alike, a rule no variant can run by (cells.cell_problem) or an option they decline, said once after their
    names (`naive, xla: 400 documents need …`)."""
    return _by_rule((cell.variant, reason) for cell, reason in zip(cells, reasons) if reason)


def idle_values(spec: Spec, asked: dict[Cell, tuple], declines: list[str | None], whole: bool) -> list[str]:
    """One line an experiment that has a swept value no cell of which runs on any device (each variant declines each
    of its cells: `documents: [1, 400]` at T 512, a typo), or no cell at all, each said with its reasons. Read from
    what validate asked already: `asked` (cells.first_swept) and their `declines` (in its order); unless `whole`
    (every cell of the spec asked), the last experiment asked may be cut short, and is left unsaid. Two passes that
    keep no object per cell: a list of 80,000 rows cost 0.24 s in the garbage collector alone."""
    ran = {exp.name: set() for exp in spec.experiments}  # each experiment's points a cell runs at
    for (cell, values), reason in zip(asked.items(), declines):
        if reason is None:
            ran[cell.experiment].add(values)
    unrun = {exp.name: {} for exp in spec.experiments}  # each other point's cells, with their reasons
    for (cell, values), reason in zip(asked.items(), declines):
        if values not in ran[cell.experiment]:
            unrun[cell.experiment].setdefault(values, []).append((cell, reason))
    names = list(dict.fromkeys(cell.experiment for cell in asked))
    judged = set(names if whole else names[:-1])
    return [line for exp in spec.experiments
            if exp.name in judged and (line := _idle_line(exp, ran[exp.name], unrun[exp.name]))]


def _idle_line(exp: Experiment, ran: set[tuple], unrun: dict[tuple, list[tuple[Cell, str]]]) -> str | None:
    """idle_values' line for one experiment, from the sweep values of the points a cell runs at and each other
    point's cells, or None where a cell runs at each value it sweeps."""
    if not ran:
        return f"{exp.name}: no cell runs on any device{_told(_why(next(iter(unrun.values()))))}"
    axes = list(exp.sweep.axes().items())
    idle = _idle(ran, unrun)
    order = sorted(idle, key=lambda at: (at[0], axes[at[0]][1].index(at[1])))  # as the sweep gives them
    said = [f"at {axes[i][0]} {_value(value)}{_told(_why(idle[i, value]))}" for i, value in order]
    nor = "\n  nor " if any("\n" in at for at in said) else ", nor "
    return f"{exp.name}: no cell runs on any device {nor.join(said)}" if said else None


def _told(reasons: list[str]) -> str:
    """Why, after what no cell runs at: one reason in brackets; several one a line, indented below it (deepseek-v3's
    serve gave six in one line of 640 characters)."""
    return f" ({reasons[0]})" if len(reasons) == 1 else ":" + "".join(f"\n    {reason}" for reason in reasons)


def _value(value: object) -> str:
    """A swept value as the line's words say it: a string as the spec writes it (dtype float32, one of a few words),
    any other as YAML spells it (documents 400, causal false)."""
    return value if isinstance(value, str) else short(value)


def _idle(ran: set[tuple], unrun: dict[tuple, list]) -> dict[tuple[int, object], list]:
    """Each (axis index, value) of the points no cell runs at that no point a cell runs at has, with the cells of
    the first point where it is the only such value (their reasons are about it), else of its first point."""
    runs = [{values[i] for values in ran} for i in range(len(next(iter(ran))))]  # each axis's values a cell runs at
    found = {}
    for values, cells in unrun.items():
        here = [(i, value) for i, value in enumerate(values) if value not in runs[i]]
        for at in here:
            if at not in found or len(here) == 1 and not found[at][1]:
                found[at] = cells, len(here) == 1
    return {at: cells for at, (cells, _) in found.items()}


def _why(cells: list[tuple[Cell, str]]) -> list[str]:
    """Why no cell of a point runs: the rule no variant can run it by (cells.cell_problem), said once, else each
    variant's reason."""
    problem = cell_problem(cells[0][0].params)
    return [problem] if problem else said_apart({cell.variant: reason for cell, reason in cells})
