"""runner/programs.py: a cell's timed program compiled for its input shapes alone, and Programs, the cache of the
executables a shape's variants share and of those compiled ahead of their cells."""

from __future__ import annotations

import pytest

from helpers import params
from runner import programs
from runner.cells import Cell
from runner.checks import run_once
from runner.inputs import Truths, make_inputs, reference
from runner.programs import Programs, compile_step, input_avals
from runner.registry import VARIANTS, Probes, load_all

load_all()


def test_compiling_needs_only_the_shapes():
    p = params(kv_heads=2, pass_="fwd_bwd")
    compiled = compile_step("xla", VARIANTS["xla"].build(p), p, {})
    assert [a.shape for a in input_avals(p)] == [(1, 8, 4, 8), (1, 8, 2, 8), (1, 8, 2, 8), (1, 8, 4, 8)]
    inputs = make_inputs(p, 0)
    outputs = run_once(compiled, compiled.arguments(inputs))
    expected = reference(p, inputs)
    assert len(outputs) == len(expected) == 4 and [o.shape for o in outputs] == [e.shape for e in expected]
    assert compiled.backend == "xla" and compiled.program.compilation.seconds > 0


def test_a_shapes_executables_are_kept_for_the_last_shared_shapes(monkeypatch):
    monkeypatch.setattr(programs, "SHARED_SHAPES", 2)
    cache = Programs(on_gpu=False)
    first = cache.shared(params(seq_len=8))
    first["fingerprint"] = ("xla", "a program")
    cache.shared(params(seq_len=16))
    assert cache.shared(params(seq_len=8)) is first  # used last: kept
    cache.shared(params(seq_len=32))  # a third shape: the one used longest ago goes
    assert cache.shared(params(seq_len=8)) is first and cache.shared(params(seq_len=16)) == {}


def test_a_batch_compiles_its_cells_once_and_keeps_each_error_for_its_own_cell():
    cache, truths = Programs(on_gpu=False), Truths(seed=0, memory_bytes=None)
    xla, naive, wrong = (Cell("t", v, params()) for v in ("xla", "naive", "test_build_raises"))
    VARIANTS["test_build_raises"] = VARIANTS["xla"].__class__("test_build_raises", _raises, VARIANTS["xla"].requires, "")
    try:
        phases = cache.precompile([xla, naive, wrong], Probes(), truths)
    finally:
        VARIANTS.pop("test_build_raises")
    assert set(phases) == {"compile"}
    assert cache.precompile([naive, wrong], Probes(), truths) == {}  # this batch ran already: nothing to do
    for cell in (xla, naive):
        made = cache.take(cell)
        assert made.program.compilation.ahead is True and run_once(made, make_inputs(cell.params, 0))
    with pytest.raises(ValueError, match="no program here"):
        cache.take(wrong)
    assert cache.take(xla) is None  # taken once


def _raises(p):
    raise ValueError("no program here")
