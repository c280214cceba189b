"""attnbench: attention benchmarks under JAX, timed on the device, kernel named, checked for correctness.

The pipeline, one module a step (docs/design.md draws it): spec.py validates a spec, cells.py sweeps it into cells
(shape.py defines their axes), run.py runs them through worker processes (supervisor.py, worker.py), measure.py
measures one (inputs, programs, checks, sampling, assembly), record.py is the record every reader shares, spool.py
and store.py keep it, results.py reads a run back. Then the readers: report.py prints tables on a terminal and as
markdown, leaderboard.py ranks, compare.py compares two runs (compare_cli.py is its command), and artifacts.py writes
`attnbench report`'s files with figures.py's charts; the dashboard lives in dashboard/.
"""

__version__ = "0.1.0"
