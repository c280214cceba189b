"""attnbench's command line. Errors a user can cause end here as one line each and a non-zero exit.

Exit codes: 0 done; 1 internal error; 2 bad input (spec, arguments, run folder).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT = 0, 1, 2


class UsageError(Exception):
    """Bad input: each line of the message is one problem."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnbench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run a spec's experiments and write results")
    run.add_argument("spec", help="experiment spec (YAML)")
    run.add_argument("--out", default="results", help="results folder (default: results)")
    run.add_argument("--run-id", default=os.environ.get("ATTNBENCH_RUN_ID"), help="run id (default: name-time)")
    run.add_argument("--only", nargs="+", metavar="EXPERIMENT", help="run only these experiments")
    run.add_argument("--variants", nargs="+", metavar="VARIANT", help="run only these variants")
    run.add_argument("--dry-run", action="store_true", help="list the cells and their skip verdicts, run nothing")

    validate = sub.add_parser("validate", help="check a spec and count its cells")
    validate.add_argument("spec")

    sub.add_parser("list", help="variants and whether each can run here")
    sub.add_parser("env", help="device and versions")

    show = sub.add_parser("show", help="print or export a run's results")
    show.add_argument("run_dir", help="a run folder: <out>/<run_id>")
    show.add_argument("--format", choices=["table", "csv", "markdown", "parquet"], default="table")
    show.add_argument("--output", type=Path, help="write the export here instead of stdout (parquet needs it)")

    sub.add_parser("schema", help="print the spec's JSON Schema")

    dashboard = sub.add_parser("dashboard", help="open the results dashboard (streamlit) in a browser")
    dashboard.add_argument("--results", help="results folder or gs://bucket/prefix (default: examples/results/)")
    dashboard.add_argument("--port", type=int, default=8501, help="port to serve on (default: 8501)")
    dashboard.add_argument("--address", default="localhost", help="address to serve on (default: localhost)")
    return parser


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

    known_experiments = [e.name for e in spec.experiments]
    problems = [f"--only: no experiment {n!r} in the spec (it has: {', '.join(known_experiments)})"
                for n in only or [] if n not in known_experiments]
    problems += [f"--variants: unknown variant {n!r} (known: {', '.join(sorted(_variants()))})"
                 for n in variants or [] if n not in _variants()]
    if problems:
        raise UsageError("\n".join(problems))
    cells = expand(spec)
    return [c for c in cells if (not only or c.experiment in only) and (not variants or c.variant in variants)]


def cmd_run(args, console: Console) -> int:
    from runner.report import print_tables, summary_line
    from runner.results import read_run
    from runner.run import execute, new_run_id, skip_reason

    spec = _load(args.spec)
    cells = _select(spec, args.only, args.variants)
    if args.dry_run:
        for cell in cells:
            reason = skip_reason(cell)
            console.print(f"{cell.label()}: {'skip: ' + reason if reason else 'run'}", highlight=False)
        console.print(f"{len(cells)} cells")
        return EXIT_OK
    run_dir = execute(spec, cells, Path(args.out), args.run_id or new_run_id(spec), console, sys.argv)
    run = read_run(run_dir)
    print_tables(run.cells, console)
    console.print(f"{summary_line(run.cells)}\nresults: {run_dir}", highlight=False)
    return EXIT_OK


def cmd_validate(args, console: Console) -> int:
    from runner.cells import expand

    spec = _load(args.spec)
    console.print(f"{args.spec}: ok ({len(spec.experiments)} experiments, {len(expand(spec))} cells)", highlight=False)
    return EXIT_OK


def cmd_list(args, console: Console) -> int:
    from runner.machine import current_device
    from runner.registry import device_verdict

    device = current_device()
    table = Table(title=f"variants on {device.describe()}", title_justify="left")
    for col in ("variant", "here", "what it is"):
        table.add_column(col)
    for name, v in sorted(_variants().items()):
        reason = device_verdict(v, device)
        table.add_row(name, f"[yellow]no[/]: {reason}" if reason else "[green]yes[/]", v.doc)
    console.print(table)
    return EXIT_OK


def cmd_env(args, console: Console) -> int:
    from runner.machine import describe

    console.print_json(describe().model_dump_json())
    return EXIT_OK


def cmd_show(args, console: Console) -> int:
    from runner.report import export, print_tables, summary_line
    from runner.results import read_run

    run = read_run(args.run_dir)
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
    text = export(run.cells, args.format, args.output)
    if text is not None:
        sys.stdout.write(text)
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
    "schema": cmd_schema,
    "dashboard": cmd_dashboard,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=200)  # pod logs and pipes: wide tables, no wrapping
    err = Console(stderr=True, highlight=False)
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


if __name__ == "__main__":
    sys.exit(main())
