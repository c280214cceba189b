"""attnbench's command line. Errors a user can cause end here as one line each and a non-zero exit.

Exit codes: 0 done; 1 internal error or a library missing; 2 bad input (spec, arguments, run folder, store URI, a
variant's check that breaks its contract); 3 results not uploaded to the store (the error names the local spool
folder that holds them; rerun with the same run id to upload); 75 interrupted by SIGTERM, what was measured uploaded
(rerun with the same run id to resume); 141 stdout's reader went away (`| head`), the rest of the output dropped.
`compare` exits 1 when B regressed against A (a pipeline's failure), 0 when it did not, 2 for runs it cannot compare
(an internal error or a missing library too: a gate must not read a crash as a regression). `recheck` exits as compare,
1 only where a slower cell is slower again when measured again (or a cell ok in A is not in B), and as `run` (3, 4,
75) where measuring again did not end.
"""

from __future__ import annotations

import runner  # the compare threshold; annotations name runner.store.Store, which loads in a run's path alone
from runner import COMPILE_CACHE_ENV, DEBUG_ENV, DEFAULT_OUT, RUN_ID_ENV, BadVariant, counted, pasted, rerun_flags
from runner.termination import TERMINATION, Interrupted  # first: SIGTERM is handled from the first instant

TERMINATION.install()

import argparse  # noqa: E402
import importlib.util
import json
import os
import re
import select
import sys
import tempfile
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from runner.arguments import (Bounded, folder as folder_arg, max_cells_option, run_argv, run_options, soak_options,
                              typed)

TERMINATION.arm()  # the modules loaded: SIGTERM raises from here; main() raises one that came before

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT, EXIT_NOT_UPLOADED, EXIT_SIGTERM = 0, 1, 2, 3, 75
EXIT_NOT_RESUMABLE = 4  # run: this run cannot be resumed on this machine (another GPU, libraries or kernel settings)
EXIT_PIPE = 141  # stdout's reader went away (`| head`): 128 + SIGPIPE, as cat or grep exit then
EXIT_REGRESSION = 1  # compare, recheck: B regressed against A (the nightly CronJob fails its Job on it)
GATES = ("compare", "recheck")  # commands whose 1 is a regression: their internal errors exit 2
PROBE_TIMEOUT_S = 5.0  # run probes --out this long; a bucket that does not answer is retried while measuring
PIPE_WIDTH = 200  # tables in pod logs and pipes wrap only beyond this


DESCRIPTION = ("Benchmark attention implementations under JAX: run a spec's experiments, then read, export and "
               "compare the results (docs/command-line.md).")


class UsageError(Exception):
    """Bad input: each line of the message is one problem."""


class Parser(argparse.ArgumentParser):
    """argparse, each of its errors one line (the usage it printed above them is a --help away)."""

    def error(self, message: str):
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="attnbench", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run_options(sub.add_parser("run", help="run a spec's experiments and write results"))
    soak_options(sub.add_parser(
        "soak", help="run a spec's cells, then each of them back to back for a while more: throughput, clock, power "
        "and temperature against time (a thermal curve; pick the cells with --only and --variants)"))

    validate = sub.add_parser("validate",
                              help="check a spec, count its cells and those declined on any device, by reason")
    validate.add_argument("spec", help="experiment spec (YAML)")
    max_cells_option(validate)

    sub.add_parser("list", help="variants and whether each can run here")
    sub.add_parser("env", help="device and versions")

    show = sub.add_parser("show", help="print or export a run's results")
    show.add_argument("run", metavar="RUN", help="a run folder <out>/<run_id>, or a run id in --out")
    show.add_argument("--out", help="where the run id RUN is: a results folder or gs://bucket/prefix (default: "
                      "results, when RUN is not a folder)")
    show.add_argument("--format", choices=["table", "csv", "markdown", "parquet", "leaderboard"], default="table",
                      help="table: the terminal's tables; csv, markdown, parquet: a row per cell, every field; "
                      "leaderboard: the board as markdown (default: %(default)s)")
    show.add_argument("--output", type=Path, metavar="FILE", help="write it to FILE instead of stdout, in any format "
                      "(parquet needs it)")

    runs = sub.add_parser("runs", help="list the runs in a results location, with each shard's progress")
    runs.add_argument("--out", default=DEFAULT_OUT, help="results folder or gs://bucket/prefix (default: %(default)s)")

    _compare_parser(sub)
    _recheck_parser(sub)

    report = sub.add_parser("report", help="write runs as one self-contained HTML page (charts, tables, leaderboard, "
                            "the comparison with the previous run) with PNG figures and a markdown summary: no "
                            "server, it opens from a folder, a bucket or a CI artifact")
    report.add_argument("runs", nargs="+", metavar="RUN", help="run folders, or run ids in --out")
    report.add_argument("--out", help="where the run ids are, and their previous runs: a results folder or "
                        f"gs://bucket/prefix (default: {DEFAULT_OUT}, or each run folder's parent folder)")
    _report_option(report, required=True)

    sub.add_parser("schema", help="print the spec's JSON Schema")

    dashboard = sub.add_parser("dashboard", help="open the results dashboard (streamlit) in a browser")
    dashboard.add_argument("--results", help="results folder or gs://bucket/prefix (default: $ATTNBENCH_RESULTS, else "
                           f"{DEFAULT_OUT}/ when it holds a run, else examples/results/)")
    dashboard.add_argument("--port", type=PORT, default=8501,
                           help=f"port to serve on, {PORT.range} (default: %(default)s)")
    dashboard.add_argument("--address", default="localhost", help="address to serve on (default: %(default)s)")
    return parser


def _compare_parser(sub) -> None:
    compare = sub.add_parser("compare", help="compare run B with run A cell by cell; exit 1 if B regressed")
    compare.add_argument("runs", nargs="+", metavar="RUN", help="A B: run folders, or run ids in --out; with "
                         "--against previous, B alone")
    compare.add_argument("--out", help="where run ids are: a results folder or gs://bucket/prefix "
                         f"(default: {DEFAULT_OUT}, or B's parent folder for --against previous)")
    compare.add_argument("--against", choices=["previous"], help="previous: A is the newest earlier run of B's spec "
                         "identity (what it measures, kept across attnbench versions), GPU, power policy and timer in "
                         "--out (the dashboard's previous run)")
    compare.add_argument("--threshold", type=THRESHOLD, default=runner.COMPARE_THRESHOLD_PERCENT, metavar="PERCENT",
                         help=f"slower or faster only beyond this and both runs' noise, {THRESHOLD.range} "
                         f"(default: {runner.COMPARE_THRESHOLD_PERCENT:g})")
    compare.add_argument("--format", choices=["table", "markdown", "json"], default="table",
                         help="table: for a terminal or a log, the verdict last; markdown: for a PR comment, the "
                         "verdict first; json: for a program (default: %(default)s)")
    compare.add_argument("--allow-different-gpu", action="store_true", help="compare runs of different GPUs")
    compare.add_argument("--allow-policy-change", action="store_true",
                         help="compare runs of different power policies (steady, burst)")
    _report_option(compare, required=False)


def _recheck_parser(sub) -> None:
    recheck = sub.add_parser("recheck", help="compare run B with run A as compare does, measure B's slower cells again "
                             "on this machine into the run B-recheck, and exit 1 only if one is slower again")
    recheck.add_argument("run", metavar="RUN", help="B: a run folder, or a run id in --out")
    recheck.add_argument("--against", required=True, metavar="previous|RUN", help="A: previous, the run compare "
                         "--against previous takes, or a run folder or a run id in --out")
    recheck.add_argument("--out", help="where run ids are, at any depth, as runs lists them: a results folder or "
                         f"gs://bucket/prefix (default: {DEFAULT_OUT}, or B's parent folder when B is a folder); "
                         "B-recheck is written beside B")
    recheck.add_argument("--threshold", type=THRESHOLD, default=runner.COMPARE_THRESHOLD_PERCENT, metavar="PERCENT",
                         help=f"as compare's, {THRESHOLD.range} (default: {runner.COMPARE_THRESHOLD_PERCENT:g})")
    recheck.add_argument("--format", choices=["table", "markdown", "json"], default="table",
                         help="the comparison with the recheck, as compare's (default: %(default)s)")
    recheck.add_argument("--spool", type=folder_arg, help="local copy of the recheck's results before upload, as run's")
    recheck.add_argument("--compile-cache", metavar="DIR|gs://…|off", default=os.environ.get(COMPILE_CACHE_ENV),
                         help=f"as run's (default: ${COMPILE_CACHE_ENV}, else B's spec's compile_cache)")
    _report_option(recheck, required=False)


def _report_option(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument("--output" if required else "--report", required=required, metavar="DIR|gs://bucket/prefix",
                        dest="report", help="write the report here: index.html, summary.md and figures/*.png"
                        + ("" if required else " (attnbench report of B, with this comparison)"))


THRESHOLD = Bounded(0, 1000, "percent")
PORT = Bounded(1, 65535, whole=True)


def _variants():
    from runner.registry import load_all

    return load_all()


def _load(spec_path: str, max_cells: int | None):
    """The spec, refused before it is expanded when its cells are too many or too large for any GPU."""
    from runner.limits import limits
    from runner.registry import VARIANTS_ENV, unloaded_files
    from runner.spec import SpecError, load_spec

    known = set(_variants())
    _warn([f"${VARIANTS_ENV} {name}: {why}; its variants are not loaded" for name, why in unloaded_files().items()])
    try:
        spec = load_spec(spec_path, known)
    except SpecError as error:
        raise UsageError("\n".join(error.problems)) from None
    if problems := limits(spec, max_cells):
        raise UsageError("\n".join(f"{spec_path}: {problem}" for problem in problems))
    return spec


def _select(spec, only, variants, where=(), keys: frozenset[str] | None = None):
    """The cells of --only's experiments, --variants' variants and --where's values, each condition narrowing the
    last; a condition that keeps no cell is bad input (a typo), one that keeps some is not (tp=1,2 over presets of
    which some have no tp 2); `keys`, where given, keeps those cells alone (recheck's)."""
    from runner.cells import expand
    from runner.shape import BY_NAME

    known_experiments, known_variants = [e.name for e in spec.experiments], sorted(_variants())
    problems = [f"--only: no experiment {n!r} in the spec (it has: {', '.join(known_experiments)})"
                for n in only or [] if n not in known_experiments]
    problems += [f"--variants: unknown variant {n!r} (known: {', '.join(known_variants)})"
                 for n in variants or [] if n not in known_variants]
    if problems:
        raise UsageError("\n".join(problems))
    cells = [c for c in expand(spec) if (not only or c.experiment in only) and (keys is None or c.key in keys)]
    if variants and not any(c.variant in variants for c in cells):
        have = ", ".join(dict.fromkeys(c.variant for c in cells))
        raise UsageError(f"--variants: no cell runs {', '.join(variants)} (the cells run: {have})")
    cells = [c for c in cells if not variants or c.variant in variants]
    for name, values in where:
        attr = BY_NAME[name].attr
        present = {getattr(c.params, attr) for c in cells}
        if present.isdisjoint(values):
            have = ", ".join(map(typed, sorted(present, key=lambda v: (v is None, v)))) or "no cells"
            raise UsageError(f"--where {name}: no cell has {', '.join(map(typed, values))} (the cells have: {have})")
        cells = [c for c in cells if getattr(c.params, attr) in values]
    return cells


def _shard(text: str | None, cells: list):
    """--shard i/n, else the Indexed Job's, else None (the whole run); never more shards than families (a shard takes
    whole ones: runner.shard.assign), so none is empty."""
    from runner.shard import MAX_SHARDS, families, parse_shard, shard_from_env

    where = "--shard" if text else "JOB_COMPLETION_INDEX/JOB_COMPLETIONS"
    try:
        shard = parse_shard(text, MAX_SHARDS) if text else shard_from_env(most=MAX_SHARDS)
    except ValueError as error:
        raise UsageError(f"{where}: {error}") from None
    if shard and shard.count > (most := len(families(cells))):
        raise UsageError(f"{where}: {shard.count:,} shards for {counted(len(cells), 'cell')} in {_families(most)} "
                         "(the cells that share one set of inputs and reference run on one shard); "
                         f"use at most {most:,}")
    return shard


def _families(count: int) -> str:
    return counted(count, "family", "families")


def _run_id(run_id: str) -> str:
    """A run id as a spec's name is checked (see runner/spec.py), a little longer: the name and a time."""
    from runner.spec import RUN_ID_MAX_LENGTH, SPEC_NAME, short

    if len(run_id) > RUN_ID_MAX_LENGTH or not re.fullmatch(SPEC_NAME, run_id):
        raise UsageError(f"run id {short(run_id)}: use up to {RUN_ID_MAX_LENGTH} letters, digits, '.', '_' and '-', "
                         "starting with a letter or digit")
    return run_id


@contextmanager
def _store_errors(option: str | None = None):
    """A store that is wrong or out of reach, as one line of bad input, after the option that named it if given."""
    from runner.store import StoreError, StoreUnavailable

    try:
        yield
    except (StoreError, StoreUnavailable) as error:
        raise UsageError(f"{option} {error}" if option else str(error)) from None


def _open_store(uri: str, option: str, timeout_s: float | None = None, auth_grace: bool = False):
    """The store `option` (--out, --output, --report) names; `auth_grace` (runs) retries refused or missing
    credentials for a while (runner/store.py)."""
    from runner.store import DEFAULT_TIMEOUT_S, open_store, with_auth_grace

    with _store_errors(option):
        opened = lambda: open_store(uri, timeout_s or DEFAULT_TIMEOUT_S)  # noqa: E731
        return with_auth_grace(opened) if auth_grace else opened()


@contextmanager
def _spool_errors(root: Path):
    """A spool that cannot be written, as one line of bad input after --spool."""
    from runner.store import StoreUnavailable

    try:
        yield
    except StoreUnavailable as error:
        raise _unwritable_spool(root, error) from None


def _unwritable_spool(root: Path, problem) -> UsageError:
    return UsageError(f"--spool {root}: cannot write there ({problem})")


def _cells_in(done: int, where) -> str:
    """`all 3 cells are in …`, `the 1 cell is in …`, `no cell is in …`: where a run's done cells are kept."""
    return {0: "no cell is", 1: "the 1 cell is"}.get(done, f"all {counted(done, 'cell')} are") + f" in {where}"


def _rerun(spool, spool_root: Path, advice: RunAdvice) -> str:
    """What goes on with a run cut short (advice.rerun), with --spool where the spool came from there
    (runner.spool.spool_from_environment: without it a shell's rerun measures again the cells not uploaded)."""
    from runner.spool import spool_from_environment

    return advice.rerun(spool, Path(spool_root) if spool_from_environment(spool_root) else None)


def _next_after(aside: str, ready: Ready, advice: RunAdvice) -> str:
    """The end of the line of a resume refused late: the cells measured meanwhile (`aside`, advice.aside's; '' where
    none) and what to run next (advice.after_aside)."""
    if not aside:
        return f", no cell measured; {advice.resumed_or_anew(ready)}"
    return advice.after_aside(aside, ready)


@dataclass(frozen=True)
class RunAdvice:
    """What `run`'s lines tell a user to run next where a run is cut short or refused; RecheckAdvice: recheck's, the
    one other (_measure chooses)."""

    def rerun(self, spool, spooled: Path | None) -> str:
        """The rerun of a run cut short: `run` under the same --run-id and --shard (each named, for either may have
        come from the environment, as a Job's pod has them, which a shell lacks), and --spool where `spooled`."""
        return f"rerun with {rerun_flags(spool.run_id, spool.shard, spooled)}"

    def resumed_or_anew(self, ready: Ready) -> str:
        """What to run where resuming a run on this machine is refused: the same command under the run's settings,
        or a new run (anew)."""
        return f"rerun under the run's settings, or {self.anew()}"

    def anew(self, *where) -> str:
        """How to begin a new run where the run id (held in the folders `where`) is refused to this one: another
        --run-id, whatever holds the one refused."""
        return f"give another --run-id (or unset {RUN_ID_ENV}) for a new run"

    def aside(self, kept, ready: Ready) -> str:
        """Where a late refusal moved the cells measured meanwhile (runner.resume.set_aside), and the rerun that
        uploads them."""
        from runner.resume import aside_rerun, aside_said

        return f"{aside_said(kept)}: {aside_rerun(kept, ready.spool_root)}"

    def after_aside(self, aside: str, ready: Ready) -> str:
        """What to run next once the cells measured meanwhile are set aside (`aside`)."""
        return f"; {aside}, or under the run's settings to resume {ready.run_id}"


RERUN_RECHECK = "rerun the same attnbench recheck command"  # recheck takes no --run-id: its run id is B's


@dataclass(frozen=True)
class RecheckAdvice(RunAdvice):
    """recheck's advice: it takes no --run-id, its run id being B's (`rechecks`), so it is rerun as it was, and a new
    recheck needs the run that holds its id moved out of its way."""

    rechecks: str

    def rerun(self, spool, spooled: Path | None) -> str:
        return RERUN_RECHECK + (f" with {pasted('--spool', spooled)}" if spooled else "")

    def resumed_or_anew(self, ready: Ready) -> str:
        return f"{RERUN_RECHECK} under the run's settings, or {self.anew(*_holding(ready))}"

    def anew(self, *where) -> str:
        """Out of --out and the spool, where a folder under another name reads as a run whose folder is not its run
        id."""
        from runner.compare import recheck_id

        return (f"move {' and '.join(map(str, where))} out of --out and the spool for a new recheck (recheck takes no "
                f"--run-id: its run id is {recheck_id(self.rechecks)})")

    def aside(self, kept, ready: Ready) -> str:
        """Kept in the spool, where `show` reads them, for a recheck uploads no run but B's recheck (and `run` under
        their run id would measure the rest of B's spec as a run of its own)."""
        from runner.compare import recheck_id
        from runner.resume import aside_said

        them = "it" if len(kept.keys()) == 1 else "them"
        shown = pasted('attnbench', 'show', Path(kept.dir))
        return (f"{aside_said(kept)}, kept there, where {shown} reads {them} (a recheck uploads no run but "
                f"{recheck_id(self.rechecks)})")

    def after_aside(self, aside: str, ready: Ready) -> str:
        return f"; {aside}; {self.resumed_or_anew(ready)}"


def _holding(ready: Ready) -> list:
    """The run's folders that hold it, of the store's and the spool's (a store out of reach is named: it may)."""
    from runner.store import StoreError, StoreUnavailable

    try:
        stored = bool(ready.store.with_timeout(PROBE_TIMEOUT_S).names(f"{ready.run_id}/"))
    except (StoreError, StoreUnavailable):
        stored = True
    places = ((ready.store.location(ready.run_id), stored), (ready.spool_dir, ready.spool_dir.exists()))
    return [where for where, held in places if held]


def _run_exit(outcome, spool, location: str, spool_root: Path, advice: RunAdvice) -> int:
    """The exit code of a run, said in one line on stderr when it is not 0. SIGTERM always exits 75."""
    kept, rerun = _cells_in(outcome.done, spool.dir), _rerun(spool, spool_root, advice)
    if not outcome.finished:
        stored = f"uploaded to {location}" if outcome.uploaded else f"not uploaded ({outcome.error}); {kept}"
        print(f"interrupted by SIGTERM: {outcome.done:,} of {counted(outcome.planned, 'cell')} done, {stored}; "
              f"{rerun} to resume", file=sys.stderr)
        return EXIT_SIGTERM
    if not outcome.uploaded:
        print(f"error: results not uploaded to {location} ({outcome.error}); {kept}; {rerun} to upload them",
              file=sys.stderr)
        return EXIT_NOT_UPLOADED
    return EXIT_OK


DRY_RUN_CHECKED = ("the spec and the selection, each cell's skip as the run's plan says it (the variants' rules, the "
                   "device's compute capability, and its memory for the inputs and float32 reference), the shard, the "
                   "run id (that --out and the spool hold no run of another spec under it), --out (credentials, and a "
                   "probe object written and removed in a bucket), and that the spool and a local --out and its run "
                   "folder can be made")
DRY_RUN_UNCHECKED = ("the cells the store already holds (a rerun resumes them), the compile cache (one that cannot be "
                     "used costs the run a warning and compiling without it), the workers' libraries and devices (and "
                     "so that a resumed run's machine and kernel settings are this one's), and each cell's build, "
                     "compile and run (a build may still skip a cell, for what only it can find)")


def _dry_run(cells, shard, console: Console) -> int:
    """Each cell and why it would be skipped here, as the run's plan says it (this imports JAX to know the device)."""
    from runner.machine import current_device, fake_host_devices
    from runner.plan import plan

    fake_host_devices(max((c.params.devices for c in cells), default=1))  # as a worker would, before JAX starts
    for cell, reason in zip(cells, plan(cells, current_device()).declined):
        console.print(f"{cell.label()}: {'skip: ' + escape(reason) if reason else 'run'}", highlight=False)
    console.print(counted(len(cells), "cell") + (f" in shard {shard}" if shard else ""))
    print(f"dry run: checked {DRY_RUN_CHECKED}; not checked: {DRY_RUN_UNCHECKED}", file=sys.stderr)
    return EXIT_OK


def _writable(store, run_id: str) -> Exception | None:
    """A store that cannot take results is bad input before the first cell; a bucket out of reach is returned, to
    be retried while measuring (a local folder that refuses a folder now will refuse it later too). A local --out and
    its run folder must be folders or ones that can be made (a file of the run id's name would refuse every upload),
    checked by _uncreatable alone, in a dry run as in a run; a bucket takes a probe object, removed again."""
    from runner.store import LocalStore, StoreError, StoreUnavailable, with_auth_grace

    if isinstance(store, LocalStore):
        for folder, what in ((store.root, "results"), (store.root / run_id, f"run {run_id}")):
            if problem := _uncreatable(folder):
                raise UsageError(f"--out {store.uri}: cannot write {what} there ({problem})")
        return None
    try:
        with_auth_grace(store.with_timeout(PROBE_TIMEOUT_S).probe)
    except StoreUnavailable as error:
        return error
    except StoreError as error:
        raise UsageError(f"--out {store.uri}: cannot write results there ({error})") from None
    return None


def _uncreatable(folder: Path) -> str | None:
    """Why this process could not make the folder or write in it, or None: a folder made and removed again in the
    nearest one that exists, which leaves nothing (permission bits say nothing for root, nor of a filesystem that
    takes no new folder, such as /proc)."""
    existing = next(p for p in [folder, *folder.parents] if os.path.exists(p))  # False where a parent cannot be
    # entered (Path.exists raises PermissionError there: an internal error where a clear refusal is due)
    if not os.path.isdir(existing):
        return f"{existing} is not a folder"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".attnbench-probe-", dir=existing))
    except OSError as error:
        return f"{existing}: cannot make a folder in it: {error.strerror}"
    return None


def _timing_overrides(spec, args):
    """The spec with `run --power` and `--budget` applied to its timing section."""
    changes = {"power": args.power} if args.power else {}
    if getattr(args, "soak", None):
        changes["soak_s"] = args.soak
    if args.budget:
        changes.update(budget_s=args.budget, wall_budget_s=min(args.budget, spec.timing.wall_budget_s))
    return spec.model_copy(update={"timing": spec.timing.model_copy(update=changes)}) if changes else spec


def cmd_run(args, console: Console) -> int:
    _importable(*WORKER_LIBRARIES)  # before anything is made: a worker without JAX would die at every cell, and a dry
    # run declines each cell for this JAX's device
    spec = _load(args.spec, args.max_cells)
    spec = _timing_overrides(spec, args)
    every = _select(spec, args.only, args.variants, args.where)
    shard = _shard(args.shard, every)
    return _measure(args, spec, every, shard, console)


def _measure(args, spec, every: list, shard, console: Console, rechecks: str | None = None) -> int:
    """Measure `every` cell of `spec` (shard's alone, if given) into the run --run-id in --out, as `run` does;
    `rechecks`: the run whose cells these are, measured again (recheck's), whose advice is its own (RecheckAdvice)."""
    from runner.resume import OtherMachine, refusal
    from runner.run import Options, execute
    from runner.shard import select
    from runner.spool import Spool

    cells = select(every, shard) if shard else every
    advice = RecheckAdvice(rechecks) if rechecks else RunAdvice()
    ready = _preflight(args, spec, shard, advice)
    _say_unreachable(ready)
    if args.dry_run:
        return _dry_run(cells, shard, console)
    with _spool_errors(ready.spool_root):
        spool = Spool(ready.spool, ready.run_id, ready.shard)
    location = ready.store.location(ready.run_id)
    console.print(f"run {ready.run_id}{f' shard {shard}' if shard else ''}: results to {location}, spool {spool.dir}")
    options = Options(args.flush_every, args.compile_cache or spec.compile_cache, args.compile_ahead == "on",
                      args.measure_ceilings, str(ready.unreachable) if ready.unreachable else None, rechecks)
    with spool, _store_errors(), _left_unfinished(spool, location, ready.spool_root, advice):
        outcome = execute(spec, cells, ready.store, spool, console, sys.argv, options, [c.key for c in every])
    if isinstance(outcome.refused, OtherMachine) and not outcome.refused.late:  # before any cell: no tables
        print(f"error: {refusal(ready.run_id, str(outcome.refused))}; {advice.resumed_or_anew(ready)}",
              file=sys.stderr)
        return EXIT_NOT_RESUMABLE
    with TERMINATION.flagging():  # measured and uploaded: a SIGTERM now changes nothing the run says or returns
        if outcome.refused:  # past the start-up check: the store out of reach then, or written to since
            return _refused_late(outcome.refused, spool, spec, args.spec, ready, console, advice)
        _run_report(spool, location if outcome.uploaded else f"{spool.dir} (the spool; not in {location})", console)
        return _run_exit(outcome, spool, location, ready.spool_root, advice)


@contextmanager
def _left_unfinished(spool, location: str, spool_root: Path, advice: RunAdvice):
    """A variant's check that breaks on a cell the run plans (BadVariant) ends it once its folder and manifest are
    made: its one line adds that the run is left unfinished there, and how to resume it or be rid of it."""
    try:
        yield
    except BadVariant as error:
        raise BadVariant(f"{error}; run {spool.run_id} is left unfinished in {location} (its spool: {spool.dir}): "
                         f"once the check is fixed, {_rerun(spool, spool_root, advice)} to resume it, or delete "
                         "both folders") from None


def _refused_late(refused, spool, spec, spec_path: str, ready: Ready, console: Console, advice: RunAdvice) -> int:
    """A run refused once cells were measured into its spool: those cells moved to a run id of their own
    (runner.resume.set_aside), its tables, the one line saying where they are and what to run next, its exit code."""
    from runner.resume import OtherMachine, refusal, set_aside
    from runner.run import new_run_id

    location = ready.store.location(ready.run_id)
    kept = set_aside(spool, new_run_id(spec), ready.store)
    _run_report(kept, f"{kept.dir} (the spool; not in {location})", console)
    aside = advice.aside(kept, ready) if kept is not spool else ""
    if isinstance(refused, OtherMachine):
        print(f"error: {refusal(spool.run_id, str(refused))}; found when {location} answered: nothing uploaded"
              f"{_next_after(aside, ready, advice)}", file=sys.stderr)
        return EXIT_NOT_RESUMABLE
    another = _another_spec(spool.run_id, refused.where, refused.manifest, spec, spec_path, advice)
    print(f"error: {another}; found before the first upload: nothing uploaded"
          f"{f'; {aside}' if aside else ', no cell measured'}", file=sys.stderr)
    return EXIT_INPUT


@dataclass
class Ready:
    """What a run checked before its first cell, and what it found."""

    store: runner.store.Store
    run_id: str
    shard: str | None  # the shard's name (I/N); None: the whole run
    spool_root: Path
    spool: runner.store.LocalStore  # the store's spool under spool_root (runner.spool.spool_store)
    unreachable: Exception | None  # the store did not answer the probe: measuring goes on, uploads are retried
    timeout_s: float  # each store call retries this long

    @property
    def spool_dir(self) -> Path:
        """The run's (or shard's) spool folder, made when the run opens it."""
        return self.spool.root / self.run_id


def _preflight(args, spec, shard, advice: RunAdvice) -> Ready:
    """Every check a run makes before its first cell, in a dry run too: --out, the shard's run id, the run id, the
    store (credentials, write access), the spool. A dry run leaves nothing, in a local folder or the spool (a folder
    made to prove one can be, and removed)."""
    from runner.resume import finish_moves
    from runner.run import new_run_id
    from runner.spool import default_spool_root, spool_store
    from runner.store import DEFAULT_TIMEOUT_S, check_uri
    from runner.worker import memory_limit

    with _store_errors("--out"):
        check_uri(args.out)
    try:
        memory_limit()
    except ValueError as error:
        raise UsageError(str(error)) from None
    if shard and not args.run_id:
        raise UsageError(f"shard {shard}: give --run-id (or {RUN_ID_ENV}) so that every shard writes the same run")
    run_id = _run_id(new_run_id(spec) if args.run_id is None else args.run_id)  # --run-id "" is refused, not new
    store = _open_store(args.out, "--out", args.store_timeout, auth_grace=True)
    root = args.spool or default_spool_root()
    ready = Ready(store, run_id, str(shard) if shard else None, root, spool_store(root, store), None,
                  args.store_timeout or DEFAULT_TIMEOUT_S)
    if problem := _uncreatable(ready.spool_dir):  # before the store's probe, which writes
        raise _unwritable_spool(root, problem)
    ready.unreachable = _writable(store, run_id)
    # A move of this run's (or shard's) cells that a kill left half done is finished before the spec check, which may
    # refuse either run id: so the rerun of either finishes it (runner.results.moving_said). A dry run leaves the
    # spool as it found it.
    if not args.dry_run:
        with _spool_errors(root):
            finish_moves(ready.spool, run_id, ready.shard)
    places = [(ready.spool, str(ready.spool_dir), False)]
    if ready.unreachable is None:  # a store out of reach is not asked again now: the uploader asks it (_same_spec)
        places.insert(0, (store, store.location(run_id), not args.dry_run))
    _same_spec(spec, args.spec, places, run_id, advice)
    return ready


def _same_spec(spec, spec_path: str, places: list, run_id: str, advice: RunAdvice) -> None:
    """A run id that holds a run of another spec, in the store or the spool, is refused: a rerun under it would mix
    the two runs' cells under one manifest (ATTNBENCH_RUN_ID left set from another run, say). `places`: (store,
    where, uploaded): a store a run uploads to is checked again by its uploader when it answers, before any upload
    (spool.Uploader), so one out of reach now is checked then; the spool, and a dry run's store, are not."""
    from runner.run import same_run
    from runner.store import StoreError, StoreUnavailable

    for store, where, uploaded in places:
        try:
            held = store.with_timeout(PROBE_TIMEOUT_S).manifests(run_id)
        except StoreUnavailable as error:  # out of reach now: measuring goes on, as for the probe
            later = ": checked when it answers, before anything is uploaded to it" if uploaded else ""
            print(f"warning: {error}; not checked {'now ' if uploaded else ''}that {where} holds no run of another "
                  f"spec{later}", file=sys.stderr)
            continue
        except StoreError as error:
            raise UsageError(str(error)) from None
        if other := next((m for m in held if not same_run(m, spec)), None):
            raise UsageError(_another_spec(run_id, where, other, spec, spec_path, advice))


def _another_spec(run_id: str, where: str, other, spec, spec_path: str, advice: RunAdvice) -> str:
    """Why a run id that holds `other`, a run of another spec, in `where` is refused to this spec, and how to begin a
    new run (advice.anew)."""
    return (f"run id {run_id}: {where} holds a run of spec {other.name} (spec hash {other.spec_hash}) and {spec_path} "
            f"({spec.name}, spec hash {spec.digest()}) measures otherwise (another spec, or its file, --budget, "
            f"--power or --seconds changed, or its steady rule: a steady run before schema 5 sampled after settling); "
            f"a rerun resumes only the same: {advice.anew(where)}")


def _say_unreachable(ready: Ready) -> None:
    """A store that did not answer the probe, said at start-up with what the run does about it."""
    if ready.unreachable:
        print(f"warning: {ready.unreachable}; measuring meanwhile into the spool {ready.spool_dir}; each upload is "
              f"retried for up to {ready.timeout_s:g} s (--store-timeout), and a run that ends with the store still "
              "out of reach exits 3, its results in the spool", file=sys.stderr, flush=True)


REPORT_CELLS = 2_000  # a run's end prints its tables up to this many cells; `attnbench show` prints any run


def _run_report(spool, location: str, console: Console) -> None:
    from runner.report import phase_line, print_tables, summary_line  # pandas: not imported to refuse bad input
    from runner.results import in_cell_order

    manifest = spool.manifest()
    records = in_cell_order(spool.records(), manifest)  # the run read back, in its order, as any reader reads it
    if len(records) <= REPORT_CELLS:
        print_tables(records, console, manifest.machine if manifest else None)  # as show prints them
    else:
        console.print(f"{counted(len(records), 'cell')}, more than a run's end prints; attnbench show {location} "
                      "prints them")
    console.print(f"{summary_line(records)}\n{phase_line(spool.totals)}\nresults: {location}", highlight=False)


def cmd_validate(args, console: Console) -> int:
    from runner.cells import count, first_swept
    from runner.limits import declines_anywhere, declines_counted, idle_values
    from runner.spec import DECLINES_COUNTED, MAX_PROBLEMS

    spec = _load(args.spec, args.max_cells)
    cells, asked = count(spec), first_swept(spec, DECLINES_COUNTED)
    reasons = declines_anywhere(asked)
    declined = declines_counted(asked, reasons)
    console.print(f"{args.spec}: ok ({counted(len(spec.experiments), 'experiment')}, {counted(cells, 'cell')}"
                  f"{_declines_said(declined, len(asked), cells)})", highlight=False)
    width = len(f"{max(declined.values(), default=0):,}")
    for reason, declines in declined.most_common(MAX_PROBLEMS):
        console.print(f"  {declines:>{width},}  {reason}", highlight=False, markup=False)
    if len(declined) > MAX_PROBLEMS:
        console.print(f"  … and {counted(len(declined) - MAX_PROBLEMS, 'more reason')}", highlight=False)
    for line in idle_values(spec, asked, reasons, len(asked) == cells):
        console.print(line, highlight=False, markup=False)
    return EXIT_OK


def _declines_said(declined: Counter, asked: int, cells: int) -> str:
    """', 27 declined on any device; --dry-run adds this machine's' after the count; where validate asked the variants
    of the spec's first `asked` cells alone (runner.spec.DECLINES_COUNTED), ' of the first N' and that the others
    were not asked, for a check that raises on one of them ends --dry-run alone; '' where it asked every cell and
    none was declined."""
    total = f"{declined.total():,}" if declined else "none"
    if asked < cells:
        adds = ", and adds this machine's" if declined else ""
        return (f", {total} of the first {asked:,} declined on any device; the other {cells - asked:,} not asked: "
                f"--dry-run asks them{adds}")
    return f", {total} declined on any device; --dry-run adds this machine's" if declined else ""


def _preloads(variants) -> dict[str, str | None]:
    """Each worker's preload run here (before JAX's GPU backend starts): why it fails, or None."""
    from runner.registry import Skip

    failed = {}
    for v in variants.values():
        if v.preload and v.worker not in failed:
            try:
                v.preload()
                failed[v.worker] = None
            except Skip as reason:
                failed[v.worker] = str(reason)
    return failed


def cmd_list(args, console: Console) -> int:
    from runner.machine import current_device
    from runner.registry import BROKEN, passes_lacked, unmet
    from runner.report import Grid, print_grid

    variants = _variants()
    preloads = _preloads(variants)  # before the device: TransformerEngine must load ahead of JAX's GPU backend
    device = current_device()
    rows = []
    for name, v in sorted(variants.items()):
        reason = unmet(v, device) or preloads.get(v.worker) or (v.probe() if v.probe else None)
        legacy = [f"legacy ({v.legacy})."] if v.legacy else []
        what = " ".join([*legacy, v.doc, *(f"{reason}." for reason in passes_lacked(v))])  # as a cell's skip says
        rows.append([name, v.backend or "when compiled", Text.assemble(("no", "yellow"), f": {reason}") if reason
                     else Text.assemble(("yes", "green")), what])
    rows += [[module, "-", Text.assemble(("broken", "red"), f": {error}"), ""]
             for module, error in sorted(BROKEN.items())]
    print_grid(Grid(f"variants on {device.describe()}", ["variant", "backend", "here", "what it is"], rows,
                    wraps=("here", "what it is")), console)
    return EXIT_OK


def cmd_env(args, console: Console) -> int:
    import jax

    from runner import gpu, machine

    device = machine.current_device()
    versions = machine.versions() | gpu.cuda_versions()
    facts = gpu.facts() if device.compute_capability else None
    console.print_json(machine.describe(device, jax.device_count(), versions, facts).model_dump_json())
    return EXIT_OK


def _shown_run(run: str, out: str | None):
    """`run` as a run folder, else as a run id in `out` (--out; default: results), found at any depth as `runs` lists
    it."""
    from runner.store import read_run

    if out is None and (Path(run).is_dir() or Path(run).name != run):  # a folder, or a path
        return read_run(run)
    if out is not None and Path(run).name != run:
        raise UsageError(f"{run}: with --out, RUN is a run id in it, not a path: give the run folder alone, or its id "
                         "with --out")
    if out is None and not Path(DEFAULT_OUT).is_dir():
        raise UsageError(f"{run}: no such run folder, nor a run of that id in {DEFAULT_OUT}/ (see attnbench runs)")
    out = DEFAULT_OUT if out is None else out
    with _store_errors():  # reading can find the store out of reach, not only opening it
        store = _open_store(out, "--out", _read_timeout())
        return store.read(_found(store, _run_id(run), out))


def _found(store, run_id: str, out: str) -> str:
    """The one folder in `store` (given as `out`) that holds run `run_id` (Store.find): `out`'s own `run_id` where it
    holds one, what `run --out OUT --run-id ID` wrote and, on a bucket, the one way to name it, the deeper ones named
    on stderr; a run of that id in no folder, or in two deeper ones, is bad input, said in one line."""
    found = store.find(run_id)
    shown = f"{DEFAULT_OUT}/" if out == DEFAULT_OUT else out
    if not found:
        see = "attnbench runs" + ("" if out == DEFAULT_OUT else f" --out {out}")
        raise UsageError(f"{run_id}: no such run folder, nor a run of that id in {shown} (see {see})")
    deeper = [folder for folder in found if folder != run_id]
    if run_id in found and deeper:
        print(f"warning: {run_id}: opened {_joined(out, run_id)}; {', '.join(deeper)} in it holds a run of that id "
              f"too: give --out {_joined(out, deeper[0].rpartition('/')[0])} for that one", file=sys.stderr)
    elif len(found) > 1:
        raise UsageError(f"{run_id}: {len(found)} runs of that id in {shown} ({', '.join(found)}): give --out the "
                         "folder that holds the one you mean")
    return run_id if run_id in found else found[0]


def _joined(out: str, folder: str) -> str:
    return f"{out.rstrip('/')}/{folder}"


def cmd_show(args, console: Console) -> int:
    from runner.report import export

    run = _shown_run(args.run, args.out)
    if run.manifest is None and not run.cells:
        raise UsageError("\n".join(run.problems))
    _warn(run.problems)
    if args.format in SHOWN:
        with _output_console(args.output, console) as out:
            SHOWN[args.format](run, out)
        return EXIT_OK
    if args.format == "parquet":
        _parquet_ready(args.output)
    try:
        text = export(run.cells, args.format, args.output)
    except OSError as error:
        raise UsageError(f"--output {args.output}: {error.strerror or error}") from None
    if text is not None:
        sys.stdout.write(text)
    return EXIT_OK


def _show_table(run, console: Console) -> None:
    """show's tables: the run's header (what it is: its policy, GPU, versions), its cells per experiment, its
    leaderboard, the tables beside them, its summary line."""
    from runner.leaderboard import legacy_of
    from runner.report import (earlier_line, kernel_line, leaderboard_table, print_beside, print_tables, run_facts,
                               summary_line)

    machine = run.manifest.machine if run.manifest else None
    header = " · ".join(run_facts(run.manifest, run.cells))
    for line in (header and f"{run.run_id}: {header}", kernel_line(run.manifest), earlier_line(run.manifest)):
        if line:
            console.print(escape(line))
    print_tables(run.cells, console, machine)
    leaderboard_table(run.cells, console, legacy_of([run.manifest]), run.manifest)
    print_beside(run.cells, run.manifest, console)
    console.print(summary_line(run.cells))


def _show_leaderboard(run, console: Console) -> None:
    """show --format leaderboard: the run's leaderboard as markdown."""
    from runner.leaderboard import contested, leaderboard, legacy_of
    from runner.report import leaderboard_markdown

    board = contested(leaderboard(run.cells, manifest=run.manifest))
    machine = run.manifest.machine if run.manifest else None
    console.file.write(leaderboard_markdown(board, legacy_of([run.manifest]), machine) + "\n")


SHOWN = {"table": _show_table, "leaderboard": _show_leaderboard}  # show's formats printed as text, not exported


@contextmanager
def _output_console(output: Path | None, console: Console):
    """stdout's console, or with --output a console that writes the file as a pipe would read the text."""
    if output is None:
        yield console
        return
    try:
        with open(output, "w") as file:
            yield _piped(file)
    except OSError as error:
        raise UsageError(f"--output {output}: {error.strerror or error}") from None


def _parquet_ready(output: Path | None) -> None:
    """show --format parquet: a file to write and pandas' parquet engine, pyarrow, which the core install lacks."""
    if output is None:
        raise UsageError("--format parquet: give --output FILE (parquet is binary)")
    _importable("pyarrow")


def _compared(runs: list[str], previous: bool, out: str | None) -> tuple:
    """(A, B) as runs, of `runs` (A B, or B alone for the run before it where `previous`) in `out` (--out); A None
    when there is no run before B."""
    if len(runs) != (1 if previous else 2):
        raise UsageError("--against previous compares one run, B, with the run before it: give B alone" if previous
                         else "give two runs, A B, or one with --against previous")
    b = _shown_run(runs[-1], out)
    if not previous:
        return _shown_run(runs[0], out), b
    if problems := _unread("B", b):  # no manifest, no spec to find the run before by
        raise UsageError("\n".join(problems))
    return _previous_of(b, out), b


def _previous_of(b, out: str | None):
    """The run before B in `out`, else in B's parent folder (a folder) or results/: the last earlier run of its spec
    identity, GPU, power policy and timer that planned a cell B planned, of an earlier sitting where one is stored (the
    dashboard's rule, runner.compare.previous), naming on stderr the newer ones passed over; None when there is none."""
    from runner.compare import apart, nearest_named, passed_over, previous, same_sitting

    if out is None:
        out = str(Path(b.dir).parent) if isinstance(b.dir, Path) else DEFAULT_OUT
    store = _open_store(out, "--out")
    with _store_errors():
        found = {folder: listed.manifest for folder, listed in store.listing().items()}
        found["\0B"] = b.manifest  # B itself, wherever it was read from; a key no folder has
        before = previous(found, "\0B")
        if before.skipped:
            print(f"--against previous: {passed_over(before)}", file=sys.stderr)
        if before.run and (sitting := same_sitting(found[before.run], b.manifest)):
            print(f"--against previous: {found[before.run].run_id}: {sitting}: no run of its series from an earlier "
                  "sitting is stored", file=sys.stderr)
        if before.run is None and (named := nearest_named(found, "\0B")):
            print(f"--against previous: {named}, the newest earlier run of {b.manifest.name} on this GPU, is of "
                  f"another series: {apart(found[named], b.manifest)}", file=sys.stderr)
        return store.read(before.run) if before.run else None


def _not_comparable(a, b, allow_different_gpu: bool, allow_policy_change: bool) -> list[str]:
    """Why A and B cannot be compared: a run unread, no manifest, different GPUs or power policies (unless
    allowed)."""
    from runner.record import gpu_name, policy_said

    if found := _unread("A", a) + _unread("B", b):
        return found
    gpus = gpu_name(a.manifest), gpu_name(b.manifest)
    if gpus[0] != gpus[1] and not allow_different_gpu:
        found.append(f"A ran on {gpus[0]}, B on {gpus[1]}: times of different GPUs are no regression; give "
                     "--allow-different-gpu to compare them anyway")
    policies = [policy_said(a.manifest), policy_said(b.manifest)]
    if policies[0] != policies[1] and not allow_policy_change:
        found.append(f"A ran under power policy {policies[0]}, B under {policies[1]}: their times are not like with "
                     "like; give --allow-policy-change to compare them anyway")
    return found


def _unread(which: str, run) -> list[str]:
    """Why run A or B has no manifest (unread, corrupt, not a run), a line each, or nothing."""
    if run.manifest is not None:
        return []
    return [f"{which}: {p}" for p in run.problems[:3]] or [f"{which}: {run.dir}: no manifest"]


def cmd_compare(args, console: Console) -> int:
    a, b = _compared(args.runs, args.against == "previous", args.out)
    if a is None:
        _nothing_before(b.manifest, args)
        _gate_report(args.report, b, None)
        return EXIT_OK
    found = _judged(a, b, args.threshold, args.allow_different_gpu, args.allow_policy_change, _recheck_of(b))
    _print_comparison(found, args.format, console)
    _gate_report(args.report, b, found)
    return EXIT_REGRESSION if found.regressed else EXIT_OK


def cmd_recheck(args, console: Console) -> int:
    """A against B as compare judges them, B's slower cells measured again into B-recheck (resumed where it holds
    some), then judged again with it: exit 1 only where one is slower again, or a cell ok in A is not in B."""
    _importable(*WORKER_LIBRARIES)
    previous = args.against == "previous"
    a, b = _compared([args.run] if previous else [args.against, args.run], previous, args.out)
    if a is None:
        _nothing_before(b.manifest, args)
        _gate_report(args.report, b, None)
        return EXIT_OK
    found = _judged(a, b, args.threshold, False, False)
    if len(found.slower):
        if code := _measure_again(args, b, frozenset(found.slower["key"])):
            return code
        found = _judged_with(a, b, args.threshold, _recheck_of(b))
    else:  # said, so that a log tells "nothing to measure" from "measured, and not reproduced"
        print(f"no cell of {b.run_id} slower than {a.run_id}: nothing to measure again", file=sys.stderr)
    _print_comparison(found, args.format, console)
    _gate_report(args.report, b, found)
    return EXIT_REGRESSION if found.regressed else EXIT_OK


def _judged(a, b, threshold: float, allow_different_gpu: bool, allow_policy_change: bool, again=None):
    """A against B as compare judges them (B's slower cells judged again against `again`, B's recheck, where given);
    runs it cannot compare, or that share no cell, are bad input."""
    if problems := _not_comparable(a, b, allow_different_gpu, allow_policy_change):
        raise UsageError("\n".join(problems))
    _warn(a.problems + b.problems)
    found = _judged_with(a, b, threshold, again)
    if not found.common:
        raise UsageError(f"A ({a.run_id}, {counted(len(a.cells), 'cell')}) and B ({b.run_id}, "
                         f"{counted(len(b.cells), 'cell')}) share no "
                         "cell (the same experiment, variant and shape): are they runs of the same spec?")
    return found


def _judged_with(a, b, threshold: float, again):
    """A against B, two runs compare judges comparable, with `again` (B's recheck, its problems warned) where given:
    _judged's tail, and recheck's judgement once it measured B's slower cells again."""
    _warn(again.problems if again else [])
    return _comparison(a, b, threshold / 100, again)


def _comparison(a, b, threshold: float, again=None):
    """runner.compare's A against B, B's slower cells judged again against `again` (B's recheck) where given."""
    from runner import compare, frames

    return compare.compare(frames.cells(a.cells), frames.cells(b.cells), a.manifest, b.manifest, threshold,
                           again=None if again is None else frames.cells(again.cells),
                           recheck=None if again is None else again.manifest)


def _print_comparison(found, format: str, console: Console) -> None:
    """The comparison on stdout: compare's tables, or its markdown or json."""
    from runner import report

    if format == "table":
        report.print_comparison(found, console)
    else:
        sys.stdout.write(report.comparison_markdown(found) if format == "markdown" else report.comparison_json(found))


def _beside(b) -> str:
    """The folder or bucket prefix that holds B's run folder (at any depth of --out): where B's recheck is."""
    return str(b.dir.parent) if isinstance(b.dir, Path) else b.dir.rstrip("/").rpartition("/")[0]


def _recheck_of(b):
    """B's recheck: the run B-recheck beside B, whose manifest says it measured B's cells again; else None."""
    from runner.compare import recheck_id, rechecks

    with _store_errors():
        again = _open_store(_beside(b), "--out").read(recheck_id(b.run_id))
    return again if rechecks(again.manifest, b.run_id) else None  # compare's rule, the dashboard's too


def _measure_again(args, b, keys: frozenset[str]) -> int:
    """B's cells of `keys` measured again under B's stored spec and run settings (record.HOW_OPTIONS: --compile-ahead
    off, a compile cache that was off, --measure-ceilings) on this machine, into the run B-recheck beside B (a rerun
    resumes it), as `run` measures (its progress on stderr): run's exit code."""
    from runner.compare import recheck_id
    from runner.record import HOW_OPTIONS
    from runner.spec import SpecError, parse_spec, stored_document

    try:
        spec = parse_spec(stored_document(b.manifest.spec), set(_variants()))
    except SpecError as error:
        raise UsageError(f"B ({b.run_id}): its stored spec is not one this attnbench runs: "
                         f"{error.problems[0]}") from None
    argv = ["run", f"{b.run_id}'s stored spec", "--out", _beside(b), "--run-id", recheck_id(b.run_id)]
    argv += ["--spool", str(args.spool)] if args.spool else []
    argv += ["--compile-cache", args.compile_cache] if args.compile_cache else []
    argv += run_argv(b.manifest, HOW_OPTIONS)  # B's own, last: a cache B ran without stays off
    run, _ = build_parser().parse_known_args(argv)
    return _measure(run, spec, _select(spec, None, None, keys=keys), None, _stderr(), b.run_id)


def _nothing_before(m, args) -> None:
    """--against previous on a series' first night: the reason on stderr, and for markdown and json a document that
    says it (a pipeline reads one every night, never an empty stdout)."""
    from runner import compare, report
    from runner.record import policy_said

    said = (f"no earlier run of {m.name} on {compare.gpu_name(m)} than {m.run_id} with its spec identity, power "
            f"policy {policy_said(m)} and timer {compare.headline_timer(m)}: nothing to compare with")
    print(said, file=sys.stderr)
    if args.format == "markdown":
        sys.stdout.write(report.no_comparison_markdown(said))
    elif args.format == "json":
        sys.stdout.write(report.no_comparison_json(m, args.threshold / 100, said))


def _gate_report(where: str | None, b, found) -> None:
    """compare --report: B's report written after the verdict is out; a store that refuses it, or an install without
    matplotlib, is a warning, never the gate's exit code (the nightly fails its Job on compare's 1 and 2, which say
    what B's cells did)."""
    try:
        _write_report(where, [(b, found)], "--report")
    except UsageError as error:
        said = str(error).splitlines()[0]  # "--report WHERE: why", WHERE quoted where it is no URI at all
        why = said.removeprefix(f"--report {where}: ").removeprefix(f"--report {where!r}: ")
        _report_failed(where, why.removeprefix("--report "))  # a path under it, as the store names it
    except ModuleNotFoundError as error:  # matplotlib draws its figures: the '.[report]' extra
        if not (missing := _missing_library(error, "--report")):
            raise
        _report_failed(where, missing.removeprefix("error: "))


def _report_failed(where: str, why: str) -> None:
    print(f"warning: --report {where}: not written: {why}; the comparison stands", file=sys.stderr)


def _against_previous(run, out: str | None):
    """The comparison of `run` with the run before it in its store (compare --against previous's), or None when
    there is none or it shares no cell."""
    from runner.compare import DEFAULT_THRESHOLD

    a = _previous_of(run, out)
    if a is None or a.manifest is None:
        return None
    found = _comparison(a, run, DEFAULT_THRESHOLD, _recheck_of(run))
    return found if found.common else None


def cmd_report(args, console: Console) -> int:
    runs = [_shown_run(run, args.out) for run in args.runs]
    for run in runs:
        if run.manifest is None:
            raise UsageError("\n".join(run.problems) or f"{run.dir}: no manifest, not a run")
        _warn(run.problems)
    _write_report(args.report, [(run, _against_previous(run, args.out)) for run in runs], "--output")
    return EXIT_OK


def _write_report(where: str | None, runs: list, option: str) -> None:
    """attnbench report's files for (run, comparison or None) pairs, written to a folder or bucket `where` (given as
    `option`)."""
    if where is None:
        return
    from runner import artifacts

    store = _open_store(where, option)  # a location that can never be written is said before a figure is drawn
    made = artifacts.files([artifacts.Report(run, artifacts.charts_of(run), found) for run, found in runs])
    with _store_errors(option):
        for name, data in made.items():
            store.put(name, data)
    print(f"report: {store.location(artifacts.INDEX)} ({len(made[artifacts.INDEX]) / 1024:,.0f} KiB; "
          f"{artifacts.SUMMARY} and {counted(len(made) - 2, 'figure')} beside it)", file=sys.stderr)


def _read_timeout() -> float:
    from runner.store import READ_TIMEOUT_S

    return READ_TIMEOUT_S


def _existing(uri: str, option: str, timeout_s: float | None = None):
    """The store `option` names, if a folder that is there ("no runs" would read as an empty folder) or a bucket."""
    from runner.store import LocalStore

    store = _open_store(uri, option, timeout_s)
    if isinstance(store, LocalStore) and not store.root.is_dir():
        raise UsageError(f"{option} {uri}: no such folder")
    return store


def cmd_runs(args, console: Console) -> int:
    from runner.report import print_grid, runs_grid

    store = _existing(args.out, "--out", _read_timeout())
    with _store_errors():
        listed = store.runs()
        runs = [store.read(run_id) for run_id in listed]
        unlisted = [said for folder, said in store.moves() if folder not in listed]  # stopped before its first write
    if runs:
        print_grid(runs_grid(runs, store.uri), console)
    else:
        console.print(f"no runs in {store.uri}")
    _warn([p for run in runs for p in run.problems] + unlisted)
    return EXIT_OK


def _warn(problems: list[str]) -> None:
    """Warnings on stderr, so that what stdout carries (a table, CSV) stays data; past the first MAX_PROBLEMS (a
    file of binary junk is a warning a line), counted, not listed."""
    from runner.spec import MAX_PROBLEMS

    err = _stderr()
    for problem in problems[:MAX_PROBLEMS]:
        err.print(f"[yellow]warning[/]: {escape(problem)}")  # a problem names paths like experiments[0]
    if len(problems) > MAX_PROBLEMS:
        err.print(f"[yellow]warning[/]: … and {counted(len(problems) - MAX_PROBLEMS, 'more warning')}")


def cmd_schema(args, console: Console) -> int:
    from runner.spec import Spec

    print(json.dumps(Spec.model_json_schema(by_alias=True), indent=2))
    return EXIT_OK


def dashboard_argv(args, results: str) -> list[str]:
    """The `streamlit run` command line that serves dashboard/app.py through dashboard/serve.py (which prepares the
    server before it answers) over `results`, to viewers: no Deploy button, no developer menu (client.toolbarMode
    viewer)."""
    import dashboard

    app = Path(dashboard.__file__).with_name("serve.py")
    return [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(args.port),
            "--server.address", args.address, "--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer",
            "--", "--results", results]


def _servable(address: str, port: int) -> None:
    """--address and --port bound as the server will bind them: a name that is no address here or a port in use is
    bad input before streamlit starts (it had a traceback for the one, a line after its banner for the other)."""
    import socket

    from runner.spec import short

    try:
        family, kind, proto, _, where = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as error:
        raise UsageError(f"--address {short(address)}: not a host name or address here ({error.strerror})") from None
    try:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as tornado binds: a port in TIME_WAIT serves
            probe.bind(where)
    except OSError as error:
        raise UsageError(f"--address {address} --port {port}: cannot serve there ({error.strerror})") from None


def _servable_results(uri: str, option: str) -> None:
    """A results folder must be there ("no runs" would read as an empty folder); a bucket's URI is checked, not
    opened: the page reads the bucket and says why it cannot until it can (a new GKE node's metadata server, the
    dashboard's credentials, can answer late; opening the store here would exit and crash-loop the pod)."""
    from runner.store import check_uri

    with _store_errors(option):
        if check_uri(uri) is None and not Path(uri).is_dir():
            raise UsageError(f"{option} {uri}: no such folder")


def cmd_dashboard(args, console: Console) -> int:
    from dashboard.data import RESULTS_ENV, default_results

    _importable("streamlit")
    _servable(args.address, args.port)
    results, option = (args.results, "--results") if args.results is not None else (
        os.environ.get(RESULTS_ENV), f"${RESULTS_ENV}")
    if results == "":  # a pipeline's unset variable: the shipped runs would be served as if they were the lab's
        raise UsageError(f"{option}: must name a results folder or a bucket (got '')")
    if results is not None:  # else results/ or the shipped runs, which are there
        _servable_results(results, option)
    argv = dashboard_argv(args, results or default_results())
    os.execv(argv[0], argv)


COMMANDS = {
    "run": cmd_run,
    "soak": cmd_run,
    "validate": cmd_validate,
    "list": cmd_list,
    "env": cmd_env,
    "show": cmd_show,
    "runs": cmd_runs,
    "compare": cmd_compare,
    "recheck": cmd_recheck,
    "report": cmd_report,
    "schema": cmd_schema,
    "dashboard": cmd_dashboard,
}


def main(argv: list[str] | None = None) -> int:
    """The command line's exit code (argparse's own too: 2 for bad arguments, 0 for --help)."""
    try:
        if TERMINATION.event.is_set():  # SIGTERM came while the modules loaded
            raise Interrupted()
        code = _main(argv)
        sys.stdout.flush()  # output that fit in the buffer meets a closed pipe here
        return code
    except BrokenPipeError:
        return _stdout_gone()
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else EXIT_INPUT
    except Interrupted:
        print("interrupted by SIGTERM before measuring began; nothing to upload", file=sys.stderr)
        return EXIT_SIGTERM


def _stdout_gone() -> int:
    """stdout's reader went away (`attnbench show RUN | head -2`): the rest of the output is dropped without a word
    (Python's recipe, docs.python.org/3/library/signal.html#note-on-sigpipe: stdout pointed at devnull, so that the
    flush at exit does not fail again)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_PIPE


class StdoutConsole(Console):
    """rich's Console, its broken pipe ended as the rest of the command line's (rich's own exits 1, an error)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def _stdout() -> Console:
    """stdout: on a terminal its width; in pipes and pod logs tables up to PIPE_WIDTH wide and lines never
    wrapped or padded."""
    console = StdoutConsole(highlight=False)
    return console if console.is_terminal else _piped()


def _piped(file=None) -> Console:
    """A console for a pipe, a pod's log or a file: tables up to PIPE_WIDTH wide, lines never wrapped or padded."""
    return StdoutConsole(file=file, highlight=False, width=PIPE_WIDTH, soft_wrap=True)


def _stderr() -> Console:
    """stderr, an error on one line however long: on a terminal its width; in pipes and pod logs PIPE_WIDTH wide, as
    stdout (_stdout), so that recheck's run tables there are one line a row."""
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    return console if console.is_terminal else Console(stderr=True, highlight=False, soft_wrap=True, width=PIPE_WIDTH)


JAX_MODULES = {"jax", "jaxlib", "flax"}  # the `jax` extra (cuda12 / cuda13 on an NVIDIA GPU)
WORKER_LIBRARIES = ("jax", "jaxlib")  # what a run's jax worker (and a dry run) imports
EXTRA_MODULES = {"matplotlib": "'.[report]'", "pyarrow": "'.[parquet]'", "streamlit": "'.[dashboard]'"}  # one extra's


def _importable(*modules: str) -> None:
    """Each module found without importing it (cheap), else the ModuleNotFoundError its import would raise, which
    ends the command in one line that says what to install (_missing_library)."""
    for name in modules:
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _missing_library(error: Exception, command: str) -> str | None:
    """What to install, when a command failed for a library this install lacks (not for a module of ours)."""
    if not isinstance(error, ModuleNotFoundError) or not error.name or error.name.startswith("runner"):
        return None
    what = ("'.[jax]' (on an NVIDIA GPU '.[cuda12]' or '.[cuda13]')" if error.name in JAX_MODULES else
            EXTRA_MODULES.get(error.name, "."))
    return f"error: {command} needs {error.name}: pip install -e {what}"


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    console, err = _stdout(), _stderr()
    try:
        return COMMANDS[args.command](args, console)
    except UsageError as error:
        for line in str(error).splitlines():
            err.print(f"error: {line}", markup=False)
        return EXIT_INPUT
    except BadVariant as error:  # a variant file's own code: bad input, as a spec's error is
        err.print(f"error: {error}", markup=False)
        return EXIT_INPUT
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except BrokenPipeError as error:
        if _stdout_closed():
            raise  # main's: the output's end, not an error
        return _internal_error(error, args.command)  # another pipe's (a store's socket): an error like any other
    except Exception as error:  # the last line of defence: no traceback for a user
        return _internal_error(error, args.command)


def _internal_error(error: Exception, command: str) -> int:
    """The last line of defence's one line (what to install, or what went wrong) and its exit code."""
    if os.environ.get(DEBUG_ENV):
        raise error
    missing = _missing_library(error, command)
    _stderr().print(missing or f"attnbench: internal error: {type(error).__name__}: {error} ({DEBUG_ENV}=1 "
                    "shows where)", markup=False)
    return EXIT_INPUT if command in GATES else EXIT_INTERNAL  # a gate's 1 says B regressed, never this


def _stdout_closed() -> bool:
    """Whether stdout is a pipe or socket whose reader went away (poll reports an error or a hang-up on it), so a
    BrokenPipeError was stdout's, not a store's socket's; False where stdout is no descriptor (captured) or a file."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False

