"""The options of `attnbench run` and `soak`: cli.py builds their parsers from here, and run_argv reads a run's argv
back through the same parser, so a run's settings (record.run_settings) and what `recheck` reruns are what run
understood (argparse's prefixes, a spec path after an option, an option given twice). Here, where the dashboard reads
them without importing runner.cli (which arms SIGTERM to raise)."""

from __future__ import annotations

import argparse
import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path

from runner import COMPILE_CACHE_ENV, DEFAULT_OUT, RUN_ID_ENV

RUN_COMMANDS = ("run", "soak")  # the commands that make a run, and so write its manifest's argv


@dataclass(frozen=True)
class Bounded:
    """An option's number, refused outside its range in one line that says the range, which its --help says too."""

    low: float
    high: float
    unit: str = ""
    whole: bool = False
    above: bool = False  # low itself is refused

    @property
    def range(self) -> str:
        low, high = (f"{v:,}" if self.whole else f"{v:,g}" for v in (self.low, self.high))
        kind = "a whole number" if self.whole else "a number"
        return f"{kind}{' of ' + self.unit if self.unit else ''} {'above' if self.above else 'from'} {low} to {high}"

    def __call__(self, text: str) -> float | int:
        try:
            value = int(text, 10) if self.whole else float(text)
        except ValueError:
            value = math.nan  # told below, in the option's own words rather than argparse's (`invalid ... value`)
        inside = self.low < value if self.above else self.low <= value
        if not (math.isfinite(value) and inside and value <= self.high):
            raise argparse.ArgumentTypeError(f"must be {self.range} (got {text})")
        return value


def folder(text: str) -> Path:
    """A folder option's value; an empty one (a pipeline's unset variable) is refused, where Path('') is the current
    folder."""
    if not text:
        raise argparse.ArgumentTypeError("must name a folder (got '')")
    return Path(text)


FLUSH_EVERY = Bounded(0.1, 3600, "seconds")
STORE_TIMEOUT = Bounded(1, 24 * 3600, "seconds")
BUDGET = Bounded(0, 7 * 24 * 3600, "seconds", above=True)  # as the spec's timing.budget_s
SOAK_SECONDS = Bounded(0, 3600, "seconds", above=True)  # as the spec's timing.soak_s
MAX_CELLS = Bounded(1, 1_000_000, whole=True)  # runner.spec.MAX_CELLS, not imported to parse arguments


def condition(text: str) -> tuple[str, tuple]:
    """A --where condition as (axis, values); argparse's error where it is no condition."""
    from runner.shape import condition

    try:
        return condition(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def typed(value) -> str:
    """A --where value as it is typed: null, true, 0.5 (never rounded: 0.8000001 is not 0.8)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def max_cells_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-cells", type=MAX_CELLS, metavar="N",
                        help=f"refuse a spec of more cells than this, {MAX_CELLS.range} (default: the spec's "
                        "max_cells, 100,000 unless set)")


def run_options(run: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `run`, which `soak` shares."""
    run.add_argument("spec", help="experiment spec (YAML)")
    run.add_argument("--out", default=DEFAULT_OUT, help="results folder or gs://bucket/prefix (default: %(default)s)")
    run.add_argument("--run-id", default=os.environ.get(RUN_ID_ENV) or None,  # set but empty: not set
                     help=f"run id; a rerun with the same id resumes (default: ${RUN_ID_ENV}, else name-time)")
    run.add_argument("--shard", metavar="I/N",
                     help="run shard I of N: I from 0 to N-1, N from 1 to 100,000 (runner.shard.MAX_SHARDS) and at "
                     "most the cells (default: $JOB_COMPLETION_INDEX/$JOB_COMPLETIONS if set)")
    run.add_argument("--spool", type=folder, help="local copy of results before upload "
                     "(default: $ATTNBENCH_SPOOL, else attnbench/spool in $XDG_CACHE_HOME, or in ~/.cache when unset)")
    run.add_argument("--flush-every", type=FLUSH_EVERY, default=30.0, metavar="SECONDS",
                     help=f"upload at least this often while behind, {FLUSH_EVERY.range} (default: %(default)g)")
    run.add_argument("--store-timeout", type=STORE_TIMEOUT, metavar="SECONDS",
                     help=f"how long one store call retries before giving up for now, {STORE_TIMEOUT.range} "
                     "(default: 120)")
    run.add_argument("--only", nargs="+", action="extend", metavar="EXPERIMENT", help="run only these experiments")
    run.add_argument("--variants", nargs="+", action="extend", metavar="VARIANT", help="run only these variants")
    run.add_argument("--where", nargs="+", action="extend", metavar="AXIS=V[,V…]", type=condition, default=[],
                     help="run only the cells whose params have one of these values, e.g. tp=1 or "
                     "seq_len=4096,8192 causal=true (values as records carry them: heads per tensor-parallel shard)")
    run.add_argument("--compile-cache", metavar="DIR|gs://…|off", default=os.environ.get(COMPILE_CACHE_ENV),
                     help=f"persistent compilation cache (default: ${COMPILE_CACHE_ENV}, else the spec's "
                     "compile_cache, else attnbench/jax in $XDG_CACHE_HOME, or in ~/.cache when unset)")
    run.add_argument("--compile-ahead", choices=["on", "off"], default="on",
                     help="start the next cell (inputs, reference, compile) while the last is stored (default: on)")
    run.add_argument("--measure-ceilings", action="store_true",
                     help="measure the GPU's matmul and copy ceilings at the start even where ones measured recently "
                     "on the same GPU, driver, versions, power limit and clock caps are kept beside the compile cache "
                     "(default: reuse those; docs/timing.md)")
    run.add_argument("--budget", type=BUDGET, metavar="SECONDS",
                     help=f"sampling budget per cell and timer, {BUDGET.range}, overriding the spec's timing.budget_s "
                     "(and capping wall_budget_s): a quick look, such as `make demo` on a CPU")
    run.add_argument("--power", choices=["steady", "burst"],
                     help="the power state cells are sampled in (default: the spec's timing.power, else steady)")
    run.add_argument("--dry-run", action="store_true", help="make every check the run makes before its first cell "
                     "(the run id, the store, the shard, the spool), list the cells and why any would be skipped, "
                     "say what it did not check, and run nothing")
    max_cells_option(run)
    return run


def soak_options(soak: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `soak`: run's, and how long each cell runs back to back."""
    run_options(soak).add_argument(
        "--seconds", type=SOAK_SECONDS, default=30.0, dest="soak", metavar="SECONDS",
        help=f"how long each cell runs back to back, {SOAK_SECONDS.range} (default: %(default)g, whatever the spec's "
        "timing.soak_s, which `run` uses)")
    return soak


class _Unparsed(Exception):
    """A stored argv that today's parser refuses."""


class _Reader(argparse.ArgumentParser):
    """run's parser for an argv read back: an error raised, never an exit or a line on stderr."""

    def error(self, message: str):
        raise _Unparsed(message)


@functools.cache  # built once: `runs` and compare.previous read every run's argv
def _reader(command: str) -> _Reader:
    return (run_options if command == "run" else soak_options)(_Reader(add_help=False))


def run_arguments(argv: list[str]) -> tuple[argparse.ArgumentParser, argparse.Namespace] | None:
    """A stored run's argv (sys.argv: the program, then run or soak, then its arguments) as that command's parser
    read it, with the parser (an option since removed left aside); None where argv names no run command (a manifest
    before argv was kept) or today's parser refuses it (a value it no longer takes)."""
    if len(argv) < 2 or argv[1] not in RUN_COMMANDS:
        return None
    parser = _reader(argv[1])
    try:
        return parser, parser.parse_known_args(argv[2:])[0]
    except _Unparsed:
        return None


def run_argv(manifest, options: tuple[str, ...]) -> list[str]:
    """The arguments that give a run's `options` again (`manifest`: its record.Manifest, whose module imports this one)
    as its own parser read its stored argv (run_arguments: an option by any prefix argparse takes, a plan's filters
    extended), in the order of `options`, each left at its default left out; --compile-cache only as 'off', where the
    manifest's compile cache was off (by argv, the environment or the spec): a folder is each run's own. Each value one
    word, whatever it holds (a space): what `recheck` reruns, and record.run_settings says."""
    parsed = run_arguments(manifest.argv)
    given = {name: _given(*parsed, name) for name in options if name != "--compile-cache"} if parsed else {}
    if manifest.compile_cache == "off":
        given["--compile-cache"] = ["off"]
    return [word for name in options if (values := given.get(name)) is not None for word in (name, *values)]


def _given(parser: argparse.ArgumentParser, args: argparse.Namespace, option: str) -> list[str] | None:
    """An option's values as run understood them, a word each (['off'], ['tp=1', 'seq_len=4096,8192'], [] for a
    flag); None where it was left at its default."""
    dest = option.removeprefix("--").replace("-", "_")  # argparse's name for it
    value = getattr(args, dest)
    if value == parser.get_default(dest) or value is None:
        return None
    if value is True:
        return []
    if isinstance(value, list):
        return [f"{v[0]}={','.join(map(typed, v[1]))}" if isinstance(v, tuple) else v for v in value]
    return [str(value)]
