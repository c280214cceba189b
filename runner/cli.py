"""attnbench's command line. Errors a user can cause end here as one line each and a non-zero exit.

Exit codes: 0 done; 1 internal error; 2 bad input (spec, arguments, run folder, store URI); 3 results not
uploaded to the store (the error names the local spool folder that holds them; rerun with the same run id to
upload); 75 interrupted by SIGTERM, what was measured uploaded (rerun with the same run id to resume).
"""

from __future__ import annotations

from runner.termination import TERMINATION, Interrupted  # first: SIGTERM is handled from the first instant

TERMINATION.install()

import argparse  # noqa: E402
import json
import math
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.table import Table

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT, EXIT_NOT_UPLOADED, EXIT_SIGTERM = 0, 1, 2, 3, 75
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class UsageError(Exception):
    """Bad input: each line of the message is one problem."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnbench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run a spec's experiments and write results")
    run.add_argument("spec", help="experiment spec (YAML)")
    run.add_argument("--out", default="results", help="results folder or gs://bucket/prefix (default: results)")
    run.add_argument("--run-id", default=os.environ.get("ATTNBENCH_RUN_ID"),
                     help="run id; a rerun with the same id resumes (default: $ATTNBENCH_RUN_ID, else name-time)")
    run.add_argument("--shard", metavar="I/N",
                     help="run shard I of N, from 0 (default: $JOB_COMPLETION_INDEX/$JOB_COMPLETIONS if set)")
    run.add_argument("--spool", type=Path, help="local copy of results before upload "
                     "(default: $ATTNBENCH_SPOOL, else ~/.cache/attnbench/spool)")
    run.add_argument("--flush-every", type=_seconds, default=30.0, metavar="SECONDS",
                     help="upload at least this often while behind (default: 30)")
    run.add_argument("--store-timeout", type=_seconds, metavar="SECONDS",
                     help="how long one store call retries before giving up for now (default: 120)")
    run.add_argument("--only", nargs="+", metavar="EXPERIMENT", help="run only these experiments")
    run.add_argument("--variants", nargs="+", metavar="VARIANT", help="run only these variants")
    run.add_argument("--compile-cache", metavar="DIR|gs://…|off", default=os.environ.get("ATTNBENCH_COMPILE_CACHE"),
                     help="persistent compilation cache (default: $ATTNBENCH_COMPILE_CACHE, else the spec's "
                     "compile_cache, else ~/.cache/attnbench/jax)")
    run.add_argument("--compile-ahead", choices=["on", "off"], default="on",
                     help="start the next cell (inputs, reference, compile) while the last is stored (default: on)")
    run.add_argument("--power", choices=["steady", "burst"],
                     help="the power state cells are sampled in (default: the spec's timing.power, else steady)")
    run.add_argument("--dry-run", action="store_true", help="list the cells and why any would be skipped, run nothing")

    validate = sub.add_parser("validate", help="check a spec and count its cells")
    validate.add_argument("spec")

    sub.add_parser("list", help="variants and whether each can run here")
    sub.add_parser("env", help="device and versions")

    show = sub.add_parser("show", help="print or export a run's results")
    show.add_argument("run", metavar="RUN", help="a run folder <out>/<run_id>, or a run id with --out")
    show.add_argument("--out", help="read the run id RUN from this results folder or gs://bucket/prefix")
    show.add_argument("--format", choices=["table", "csv", "markdown", "parquet"], default="table")
    show.add_argument("--output", type=Path, help="write the export here instead of stdout (parquet needs it)")

    runs = sub.add_parser("runs", help="list the runs in a results location, with each shard's progress")
    runs.add_argument("--out", default="results", help="results folder or gs://bucket/prefix (default: results)")

    sub.add_parser("schema", help="print the spec's JSON Schema")

    dashboard = sub.add_parser("dashboard", help="open the results dashboard (streamlit) in a browser")
    dashboard.add_argument("--results", help="results folder or gs://bucket/prefix (default: examples/results/)")
    dashboard.add_argument("--port", type=int, default=8501, help="port to serve on (default: 8501)")
    dashboard.add_argument("--address", default="localhost", help="address to serve on (default: localhost)")
    return parser


def _seconds(text: str) -> float:
    seconds = float(text)
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds (got {text})")
    return seconds


def _variants():
    from runner.registry import load_all

    return load_all()


def _load(spec_path: str):
    from runner.spec import SpecError, load_spec

    try:
        return load_spec(spec_path, set(_variants()))
    except SpecError as error:
        raise UsageError("\n".join(error.problems)) from None


def _select(spec, only, variants):
    from runner.cells import expand

    known_experiments, known_variants = [e.name for e in spec.experiments], sorted(_variants())
    problems = [f"--only: no experiment {n!r} in the spec (it has: {', '.join(known_experiments)})"
                for n in only or [] if n not in known_experiments]
    problems += [f"--variants: unknown variant {n!r} (known: {', '.join(known_variants)})"
                 for n in variants or [] if n not in known_variants]
    if problems:
        raise UsageError("\n".join(problems))
    cells = expand(spec)
    return [c for c in cells if (not only or c.experiment in only) and (not variants or c.variant in variants)]


def _shard(text: str | None):
    """--shard i/n, else the Indexed Job's, else None (the whole run)."""
    from runner.shard import parse_shard, shard_from_env

    try:
        return parse_shard(text) if text else shard_from_env()
    except ValueError as error:
        where = "--shard" if text else "JOB_COMPLETION_INDEX/JOB_COMPLETIONS"
        raise UsageError(f"{where}: {error}") from None


def _run_id(run_id: str) -> str:
    if not RUN_ID.fullmatch(run_id):
        raise UsageError(f"run id {run_id!r}: use letters, digits, '.', '_' and '-' (set --run-id)")
    return run_id


@contextmanager
def _store_errors():
    """A store that is wrong or out of reach, as one line of bad input."""
    from runner.store import StoreError, StoreUnavailable

    try:
        yield
    except (StoreError, StoreUnavailable) as error:
        raise UsageError(str(error)) from None


def _open_store(uri: str, timeout_s: float | None = None):
    from runner.store import DEFAULT_TIMEOUT_S, open_store

    with _store_errors():
        return open_store(uri, timeout_s or DEFAULT_TIMEOUT_S)


def _open_spool(root: Path, store, run_id: str, shard):
    """This run's (or shard's) spool under `root`; one that cannot be written is bad input."""
    from runner.spool import Spool, spool_store
    from runner.store import StoreUnavailable

    try:
        return Spool(spool_store(root, store), run_id, str(shard) if shard else None)
    except StoreUnavailable as error:
        raise UsageError(f"--spool {root}: cannot write there ({error})") from None


def _run_exit(outcome, spool, location: str) -> int:
    """The exit code of a run, said in one line on stderr when it is not 0. SIGTERM always exits 75."""
    kept = f"all {outcome.done} cells are in {spool.dir}"
    if not outcome.finished:
        stored = f"uploaded to {location}" if outcome.uploaded else f"not uploaded ({outcome.error}); {kept}"
        print(f"interrupted by SIGTERM: {outcome.done} of {outcome.planned} cells done, {stored}; rerun with "
              f"--run-id {spool.run_id} to resume", file=sys.stderr)
        return EXIT_SIGTERM
    if not outcome.uploaded:
        print(f"error: results not uploaded to {location} ({outcome.error}); {kept}; rerun with --run-id "
              f"{spool.run_id} to upload them", file=sys.stderr)
        return EXIT_NOT_UPLOADED
    return EXIT_OK


def _dry_run(cells, shard, console: Console) -> int:
    """Each cell and why it would be skipped here (this imports JAX to know the device)."""
    from runner.machine import current_device
    from runner.registry import VARIANTS, decline

    device = current_device()
    for cell in cells:
        reason = decline(VARIANTS[cell.variant], cell.params, device)
        console.print(f"{cell.label()}: {'skip: ' + reason if reason else 'run'}", highlight=False)
    console.print(f"{len(cells)} cells" + (f" in shard {shard}" if shard else ""))
    return EXIT_OK


def _writable(store) -> None:
    """A store that cannot take results is bad input before the first cell; one out of reach is retried."""
    from runner.store import StoreError, StoreUnavailable

    try:
        store.with_timeout(10.0).probe()
    except StoreError as error:
        raise UsageError(f"--out {store.uri}: cannot write results there ({error})") from None
    except StoreUnavailable as error:
        print(f"warning: {error}; measuring meanwhile, uploads retried", file=sys.stderr, flush=True)


def cmd_run(args, console: Console) -> int:
    from runner.report import phase_line, print_tables, summary_line
    from runner.run import Options, execute, new_run_id
    from runner.shard import select
    from runner.spool import default_spool_root

    spec = _load(args.spec)
    if args.power:
        spec = spec.model_copy(update={"timing": spec.timing.model_copy(update={"power": args.power})})
    shard = _shard(args.shard)
    cells = _select(spec, args.only, args.variants)
    cells = select(cells, shard) if shard else cells
    if args.dry_run:
        return _dry_run(cells, shard, console)
    if shard and not args.run_id:
        raise UsageError(f"shard {shard}: give --run-id (or ATTNBENCH_RUN_ID) so that every shard writes the same run")
    store = _open_store(args.out, args.store_timeout)
    run_id = _run_id(args.run_id or new_run_id(spec))
    _writable(store)
    spool = _open_spool(args.spool or default_spool_root(), store, run_id, shard)
    location = store.location(run_id)
    console.print(f"run {run_id}{f' shard {shard}' if shard else ''}: results to {location}, spool {spool.dir}")
    options = Options(args.flush_every, args.compile_cache or spec.compile_cache, args.compile_ahead == "on")
    with _store_errors():
        outcome = execute(spec, cells, store, spool, console, sys.argv, options)
    records = spool.records()
    print_tables(records, console)
    console.print(f"{summary_line(records)}\n{phase_line(records)}\nresults: {location}", highlight=False)
    return _run_exit(outcome, spool, location)


def cmd_validate(args, console: Console) -> int:
    from runner.cells import expand

    spec = _load(args.spec)
    console.print(f"{args.spec}: ok ({len(spec.experiments)} experiments, {len(expand(spec))} cells)", highlight=False)
    return EXIT_OK


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
    from runner.registry import BROKEN, unmet

    variants = _variants()
    preloads = _preloads(variants)  # before the device: TransformerEngine must load ahead of JAX's GPU backend
    device = current_device()
    table = Table(title=f"variants on {device.describe()}", title_justify="left")
    for col in ("variant", "backend", "here", "what it is"):
        table.add_column(col)
    for name, v in sorted(variants.items()):
        reason = unmet(v, device) or preloads.get(v.worker) or (v.probe() if v.probe else None)
        table.add_row(name, v.backend or "when compiled", f"[yellow]no[/]: {reason}" if reason else "[green]yes[/]",
                      v.doc)
    for module, error in sorted(BROKEN.items()):
        table.add_row(module, "-", f"[red]broken[/]: {error}", "")
    console.print(table)
    return EXIT_OK


def cmd_env(args, console: Console) -> int:
    import jax

    from runner import gpu, machine

    device = machine.current_device()
    versions = machine.versions() | gpu.cuda_versions()
    facts = gpu.facts() if device.compute_capability else None
    console.print_json(machine.describe(device, jax.device_count(), versions, facts).model_dump_json())
    return EXIT_OK


def cmd_show(args, console: Console) -> int:
    from runner.report import export, print_tables, summary_line
    from runner.store import read_run

    if args.out:
        with _store_errors():  # reading can find the store out of reach, not only opening it
            run = _open_store(args.out).read(args.run)
    else:
        run = read_run(args.run)
    if run.manifest is None and not run.cells:
        raise UsageError("\n".join(run.problems))
    for problem in run.problems:
        console.print(f"[yellow]warning[/]: {problem}", highlight=False)
    if args.format == "table":
        print_tables(run.cells, console)
        console.print(summary_line(run.cells))
        return EXIT_OK
    if args.format == "parquet" and args.output is None:
        raise UsageError("--format parquet: give --output FILE (parquet is binary)")
    try:
        text = export(run.cells, args.format, args.output)
    except OSError as error:
        raise UsageError(f"--output {args.output}: {error.strerror or error}") from None
    if text is not None:
        sys.stdout.write(text)
    return EXIT_OK


def _part_state(part) -> str:
    if part.finished:
        return "finished"
    return "not started" if part.manifest is None and not part.cells else "unfinished"


def runs_table(runs: list, uri: str) -> Table:
    """One row per part of each run (the whole run, or each shard): cells done of planned, and its state."""
    table = Table(title=f"runs in {uri}", title_justify="left")
    for col in ("run", "name", "started", "shard", "cells", "state"):
        table.add_column(col)
    for run in runs:
        name, started = (run.manifest.name, run.manifest.started_at) if run.manifest else ("-", "-")
        for part in run.parts:
            planned = "?" if part.planned is None else part.planned
            table.add_row(run.run_id, name, started, part.shard or "-", f"{len(part.cells)}/{planned}",
                          _part_state(part))
    return table


def cmd_runs(args, console: Console) -> int:
    store = _open_store(args.out)
    with _store_errors():
        runs = [store.read(run_id) for run_id in store.runs()]
    if not runs:
        console.print(f"no runs in {store.uri}")
        return EXIT_OK
    console.print(runs_table(runs, store.uri))
    for problem in (p for run in runs for p in run.problems):
        console.print(f"[yellow]warning[/]: {problem}", highlight=False)
    return EXIT_OK


def cmd_schema(args, console: Console) -> int:
    from runner.spec import Spec

    print(json.dumps(Spec.model_json_schema(by_alias=True), indent=2))
    return EXIT_OK


def dashboard_argv(args) -> list[str]:
    """The `streamlit run` command line that serves dashboard/app.py."""
    import dashboard

    app = Path(dashboard.__file__).with_name("app.py")
    argv = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(args.port),
            "--server.address", args.address, "--browser.gatherUsageStats", "false"]
    return argv + (["--", "--results", args.results] if args.results else [])


def cmd_dashboard(args, console: Console) -> int:
    import importlib.util

    if importlib.util.find_spec("streamlit") is None:
        raise UsageError("the dashboard needs its extra: pip install -e '.[dashboard]'")
    argv = dashboard_argv(args)
    os.execv(argv[0], argv)


COMMANDS = {
    "run": cmd_run,
    "validate": cmd_validate,
    "list": cmd_list,
    "env": cmd_env,
    "show": cmd_show,
    "runs": cmd_runs,
    "schema": cmd_schema,
    "dashboard": cmd_dashboard,
}


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except Interrupted:
        print("interrupted by SIGTERM before measuring began; nothing to upload", file=sys.stderr)
        return EXIT_SIGTERM


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=200)  # pod logs and pipes: wide tables, no wrapping
    err = Console(stderr=True, highlight=False, soft_wrap=True)  # an error stays on one line, however long
    try:
        return COMMANDS[args.command](args, console)
    except UsageError as error:
        for line in str(error).splitlines():
            err.print(f"error: {line}", markup=False)
        return EXIT_INPUT
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except Exception as error:  # the last line of defence: no traceback for a user
        if os.environ.get("ATTNBENCH_DEBUG"):
            raise
        err.print(f"attnbench: internal error: {type(error).__name__}: {error} (ATTNBENCH_DEBUG=1 shows where)",
                  markup=False)
        return EXIT_INTERNAL

