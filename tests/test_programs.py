"""runner/programs.py: a cell's timed program compiled for its input shapes alone, and Programs, the cache of the
executables a shape's variants share and of those compiled ahead of their cells."""

from __future__ import annotations

import contextlib
import json

import pytest

from helpers import params
from runner import programs
from runner.cells import Cell
from runner.checks import run_once
from runner.inputs import Truths, make_inputs, reference
from runner.programs import Programs, compile_step, input_avals
from runner.registry import VARIANTS, Autotuned, Probes, load_all
from runner.timers import Stopwatch
from runner.tuning_cache import TuningCache

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
    cache, truths = Programs(on_gpu=False), Truths(seed=0)
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


def self_tuned(tried: list, chose: dict, lowered: dict | None = None) -> Autotuned:
    """The xla variant as a library that tunes itself: `tune` counts its calls and answers `chose` as JSON; the
    call is lowered with the config applied (or with `lowered`, a library that ignored it)."""
    applied = {}

    def tune(fn, args):
        tried.append([a.shape for a in args])
        return json.dumps(chose)

    @contextlib.contextmanager
    def apply(text):
        applied["op"] = json.loads(text) if lowered is None else lowered
        yield

    def chosen(text):
        config = json.loads(text)
        return {"op": config}, [dict(config={"op": "op", **config}, status="ok", median_s=1e-3)]

    return Autotuned(VARIANTS["xla"].build(params()), "test.autotune", tune, apply, chosen, lambda call: dict(applied))


def test_a_library_tuning_is_kept_and_a_later_cell_reads_it_instead_of_tuning(tmp_path):
    p, tried, watch = params(tune=True), [], Stopwatch()
    cache = TuningCache(str(tmp_path), "NVIDIA H200", {"tokamax": "0.0.17"})
    compiled, tuning = programs.autotune_step("xla", self_tuned(tried, {"block_q": 64}), p, cache, watch)
    assert tried == [[(1, 8, 4, 8), (1, 8, 4, 8), (1, 8, 4, 8)]] and set(watch.phases) == {"tune", "compile"}
    assert tuning.config == {"op": {"block_q": 64}} and tuning.tuner == "test.autotune" and tuning.cached is False
    assert compiled.program.compilation.seconds > 0
    again, tuning = programs.autotune_step("xla", self_tuned(tried, {"block_q": 128}), p, cache, Stopwatch())
    assert len(tried) == 1 and tuning.cached is True and tuning.config == {"op": {"block_q": 64}}
    _, tuning = programs.autotune_step("xla", self_tuned(tried, {"block_q": 128}), p, None, Stopwatch())
    assert len(tried) == 2 and tuning.cached is False  # no cache (the compile cache off): tuned every time


def test_a_kept_tuning_the_library_cannot_read_is_tuned_again_with_a_warning(tmp_path, capsys):
    p, tried = params(tune=True), []
    cache = TuningCache(str(tmp_path), "NVIDIA H200", {"tokamax": "0.0.17"})
    cache.put("xla", p, "{not the library's JSON", 1.0)
    _, tuning = programs.autotune_step("xla", self_tuned(tried, {"block_q": 64}), p, cache, Stopwatch())
    assert len(tried) == 1 and tuning.cached is False
    assert "xla's kept result does not read (JSONDecodeError" in capsys.readouterr().err
    assert cache.get("xla", p) == '{"block_q": 64}'  # replaced by the new tuning


def test_a_call_not_lowered_with_the_chosen_config_fails_the_cell():
    with pytest.raises(RuntimeError, match=r"test.autotune's choice is not what the call was lowered with: op: chose "
                                           r"\{'block_q': 64\}, lowered \{'block_q': 128\}"):
        programs.autotune_step("xla", self_tuned([], {"block_q": 64}, lowered={"block_q": 128}), params(tune=True),
                               None, Stopwatch())


def test_a_kept_tuning_the_call_no_longer_lowers_with_is_tuned_again_and_replaced(tmp_path, capsys):
    """A kept choice a newer library ignores would otherwise fail the cell on every run that reads it."""
    p, tried = params(tune=True), []
    cache = TuningCache(str(tmp_path), "NVIDIA H200", {"tokamax": "0.0.17"})
    cache.put("xla", p, '{"block_q": 32}', 1.0)
    _, tuning = programs.autotune_step("xla", self_tuned(tried, {"block_q": 64}, lowered={"block_q": 64}), p, cache,
                                       Stopwatch())
    assert len(tried) == 1 and tuning.cached is False and tuning.config == {"op": {"block_q": 64}}
    assert "xla's kept result is not what the call lowers with (op: chose {'block_q': 32}" in capsys.readouterr().err
    assert cache.get("xla", p) == '{"block_q": 64}'
