"""attnbench: attention benchmarks under JAX, timed on the device, kernel named, checked for correctness.

The pipeline, one module a step (docs/design.md draws it): spec.py validates a spec, cells.py sweeps it into cells
(shape.py defines their axes), run.py runs them through worker processes (supervisor.py, worker.py; plan.py says which
cells the device skips before a worker is asked, memory.py, without JAX, which it cannot hold; shard.py shares them
out among nodes by what cost.py prices each cell at), measure.py measures one
(inputs, programs, checks, sampling, assembly), record.py is the record every reader shares, spool.py and store.py
keep it, results.py reads a run back. Then the readers: report.py prints tables on a terminal and as
markdown, leaderboard.py ranks, compare.py compares two runs, and artifacts.py writes
`attnbench report`'s files with figures.py's charts; the dashboard lives in dashboard/.

Names that look alike, each one job:
- record.py: the record's schema (CellRecord, Manifest) and its migrations; assembly.py builds a cell's record.
- arguments.py: the options of `run` and `soak`, which cli.py builds their parsers from and record.run_settings
  reads a stored run's argv back with; cli.py holds every command.
- results.py: a run folder's objects (manifest, cells, shards, in-flight marker) and how they read back as one run.
- store.py: where run folders live (a local folder or GCS); spool.py: a run's records on local disk first, then
  uploaded to the store; resume.py: whether a rerun of a run id may resume it on this machine, and what it keeps.
- report.py: terminal tables, markdown and exports of a run; frames.py: records as pandas frames for every reader;
  marks.py: the marks (⚠ unsettled, † not converged) every reader gives a time, and what each means.
- compare.py: two runs compared cell by cell (pure); report.py prints the comparison; cli.py holds every command,
  `compare` too (its arguments, which runs, what must hold, its exit codes).
- kept.py: entries kept beside the compile cache for later runs, of tuning_cache.py (a library's tunings) and
  ceilings_cache.py (the machine's ceilings, which gpu.py measures; machine.py describes the rest of the machine).
- published.py: other benchmarks' published figures, matched to our cells by shape; dashboard/published.py draws
  them on the dashboard's charts.
"""

import shlex
from pathlib import Path

__version__ = "0.1.0"
# compare's default threshold, in percent as a user gives and reads it (compare --threshold, the dashboard's
# Threshold %); compare.DEFAULT_THRESHOLD is its fraction. Here, where the CLI reads it without importing pandas.
COMPARE_THRESHOLD_PERCENT = 5.0
# The command line's environment variables, here where a script reads them without importing runner.cli (which arms
# SIGTERM to raise: a script that imported it for a name was ended by a traceback).
DEFAULT_OUT = "results"  # where run writes and every reader looks by default (the dashboard too, once it holds a run)
RUN_ID_ENV = "ATTNBENCH_RUN_ID"  # run's --run-id where not given (a Job's pods, each shard, share it)
COMPILE_CACHE_ENV = "ATTNBENCH_COMPILE_CACHE"  # run's --compile-cache where not given
DEBUG_ENV = "ATTNBENCH_DEBUG"  # set: an internal error raises, traceback and all, instead of its one line


class BadVariant(Exception):
    """A variant's own code broke its contract (its check raised, or returned neither a reason nor None): one line
    naming the variant and the file, bad input as a spec's error is. Here, where the CLI catches it without importing
    the registry."""


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 cell`, `1,250 cells`: every count printed with its noun, here where the CLI and the dashboard share it."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def pasted(*words) -> str:
    """Words of a command a user pastes, as a shell reads them: each quoted where it must be (a path with a space), a
    path given absolute (a relative one reads the same only from the run's working directory)."""
    return shlex.join(str(word.absolute()) if isinstance(word, Path) else str(word) for word in words)


def rerun_flags(run_id: str, shard: str | None, spool: Path | None) -> str:
    """The flags a rerun adds to the command to take a run up again, pasted: its --run-id, its --shard where it has one
    and its --spool where one must be named (each may have come from the environment, which a shell lacks)."""
    return pasted("--run-id", run_id, *(("--shard", shard) if shard else ()), *(("--spool", spool) if spool else ()))
