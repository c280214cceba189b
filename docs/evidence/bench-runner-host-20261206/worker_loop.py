"""The worker's loop over a spec's JAX cells in-process (as runner.worker.serve does), for cProfile."""
import sys, time
sys.path.insert(0, '.')
from runner.worker import Settings, Start, hello
from runner.spec import load_spec
from runner.registry import load_all
from runner.cells import expand
from runner.run import in_run_order, plan, AHEAD_CELLS
from runner.machine import current_device
spec = load_spec(sys.argv[1], set(load_all()))
spec = spec.model_copy(update={"timing": spec.timing.model_copy(update={"budget_s": 0.05})})
greeting, measurer = hello(Start("jax", Settings(spec, "prof", sys.argv[2]), describe=True))
cells = in_run_order(expand(spec))
work = plan(cells, current_device())
mine = [work.cells[i] for i in work.runnable.get("jax", [])]
begun = None
t = time.perf_counter()
for k, cell in enumerate(mine):
    ahead = tuple(mine[k + 1:k + 1 + AHEAD_CELLS])
    measurer.measure(cell, ahead, begun, 1).model_dump_json(by_alias=True)
    begun = measurer.begin(mine[k + 1]) if k + 1 < len(mine) else None
print(len(mine), "cells", time.perf_counter() - t, file=sys.stderr)
