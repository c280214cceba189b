"""runner/measure.py as steps: each returns what it made, the phases add up to the cell's duration, and a cell
begun ahead of its turn (while the last record is stored) gives the same answer and keeps its errors for its turn."""

from __future__ import annotations

import pytest

from helpers import params, spec_data
from runner.cells import Cell
from runner.machine import current_device
from runner.measure import Measurer
from runner.registry import VARIANTS, Skip, load_all, variant
from runner.spec import parse_spec
from runner.timers import WallTimer

load_all()


@pytest.fixture
def measurer() -> Measurer:
    return Measurer(parse_spec(spec_data(), set(VARIANTS)), [WallTimer()], "t", current_device())


def test_phases_add_up_to_the_cells_duration(measurer):
    record = measurer.measure(Cell("t", "xla", params(seq_len=12, causal=True)))
    assert record.status == "ok", record.reason
    assert {"inputs", "reference", "compile", "check", "wall"} <= set(record.phases)
    assert all(seconds > 0 for seconds in record.phases.values())
    accounted = sum(record.phases.values())
    assert accounted <= record.duration_s and record.duration_s - accounted < 0.05 + 0.05 * record.duration_s
    assert record.load.end - record.load.start >= record.phases["wall"] * 0.99  # when the timer loaded the device


def test_the_second_variant_of_a_shape_reuses_inputs_and_reference(measurer):
    measurer.measure(Cell("t", "xla", params(seq_len=12)))
    again = measurer.measure(Cell("t", "naive", params(seq_len=12)))
    assert "inputs" not in again.phases and "reference" not in again.phases


def test_a_cell_begun_ahead_gives_the_same_answer_and_says_so(measurer):
    cell = Cell("t", "naive", params(seq_len=16))
    ahead = measurer.measure(cell, begun=measurer.begin(cell))
    now = Measurer(measurer.spec, [WallTimer()], "t", current_device()).measure(cell)
    assert ahead.status == now.status == "ok"
    assert ahead.compilation.ahead is True and now.compilation.ahead is False
    assert ahead.correctness.rel_err == now.correctness.rel_err
    assert "compile" in ahead.phases and ahead.duration_s >= sum(ahead.phases.values())


def test_what_goes_wrong_ahead_is_recorded_at_the_cells_turn(measurer):
    @variant("test_declines_late")
    def declines(p):
        """Declines at build time."""
        raise Skip("test_declines_late cannot run this shape")

    try:
        cell = Cell("t", "test_declines_late", params())
        begun = measurer.begin(cell)
        other = measurer.measure(Cell("t", "xla", params()), begun=begun)  # the run changed its mind: begun work
        assert other.status == "ok" and other.compilation.ahead is False  # is dropped
        record = measurer.measure(cell, begun=measurer.begin(cell))
        assert (record.status, record.reason) == ("skipped", "test_declines_late cannot run this shape")
    finally:
        VARIANTS.pop("test_declines_late", None)


def test_cells_compiled_together_give_the_same_answers_and_say_so(measurer):
    cells = [Cell("t", v, params(seq_len=t)) for t in (8, 16) for v in ("xla", "auto", "naive")]
    together = [measurer.measure(c, cells[i + 1:]) for i, c in enumerate(cells)]
    alone = Measurer(measurer.spec, [WallTimer()], "t", current_device())
    for cell, batched in zip(cells, together):
        one = alone.measure(cell)
        assert batched.status == one.status == "ok", (batched.reason, one.reason)
        assert batched.correctness.rel_err == one.correctness.rel_err
        assert batched.compilation.ahead is True and one.compilation.ahead is False
        assert batched.compilation.shared_with == one.compilation.shared_with  # the same executables shared
    assert "compile" in together[0].phases  # the first cell carries the batch's compiling ...
    assert not {"compile", "inputs", "reference"} & set(together[1].phases)  # ... and the next ones wait for none
    assert all(r.duration_s >= sum(r.phases.values()) for r in together)


def test_a_program_that_fails_in_a_batch_fails_its_own_cell_only(measurer):
    @variant("test_bad_shapes")
    def bad(p):
        """Multiplies shapes that do not fit: lowering fails."""
        return lambda q, k, v: q @ k

    try:
        cells = [Cell("t", "xla", params()), Cell("t", "test_bad_shapes", params()), Cell("t", "naive", params())]
        records = [measurer.measure(c, cells[i + 1:]) for i, c in enumerate(cells)]
        assert [r.status for r in records] == ["ok", "failed", "ok"]
        assert records[1].reason.startswith("TypeError")
    finally:
        VARIANTS.pop("test_bad_shapes", None)


def test_the_load_a_cells_stream_left_is_handed_to_the_next_cells_timers(measurer, monkeypatch):
    """The Measurer carries what one cell's time_step left (sampling.Carry) into the next cell's; on a CPU there is
    no stream, so the real step leaves none, and one is set here on its way back."""
    import dataclasses

    from runner import measure
    from runner.sampling import Carry

    seen, real = [], measure.time_step

    def step(*args):
        seen.append(args[-1])
        return dataclasses.replace(real(*args), carry=Carry("capped", float(len(seen)), 9.0))

    monkeypatch.setattr(measure, "time_step", step)
    for n in (8, 16):
        assert measurer.measure(Cell("t", "xla", params(seq_len=n))).status == "ok"
    assert seen == [None, Carry("capped", 1.0, 9.0)]


def test_a_forward_cell_after_its_forward_backward_twin_takes_its_inputs_and_reference(measurer):
    """Q, K, V are the same draws in both passes and the twin's reference output is the forward one: none made anew,
    and the check reads as it does against a reference made for the forward shape alone."""
    shape = dict(seq_len=12, causal=True, kv_heads=2)
    twin = measurer.measure(Cell("t", "xla", params(**shape, pass_="fwd_bwd")))
    forward = measurer.measure(Cell("t", "xla", params(**shape)))
    assert twin.status == forward.status == "ok" and "reference" in twin.phases
    assert "inputs" not in forward.phases and "reference" not in forward.phases
    alone = Measurer(measurer.spec, measurer.timers, "t", measurer.device).measure(Cell("t", "xla", params(**shape)))
    assert "reference" in alone.phases
    assert forward.correctness.rel_err == pytest.approx(alone.correctness.rel_err, rel=1e-3)
    assert forward.correctness.causal_first_changed == alone.correctness.causal_first_changed is True


def test_a_familys_cells_run_together_and_compute_one_reference(measurer, monkeypatch):
    """A deterministic cell and its plain twin (one shape, one seed), a paged cell and its twin that names its equal
    lengths (one pool), from other experiments and spread through the spec: the run order puts each family together, and each family's reference is
    computed once (counted, not timed)."""
    from runner import inputs
    from runner.run import in_run_order

    computed, real = [], inputs.reference
    monkeypatch.setattr(inputs, "reference", lambda p, args: computed.append(p) or real(p, args))
    train, serve = dict(seq_len=12, causal=True, pass_="fwd_bwd"), dict(seq_len=2, kv_seq_len=16, causal=True)
    cells = [Cell("plain", "xla", params(**train)), Cell("equal", "xla_paged", params(**serve, page_size=4, kv_lengths="equal")),
             Cell("other", "xla", params(seq_len=16)), Cell("det", "naive", params(**train, deterministic=True)),
             Cell("paged", "xla_paged", params(**serve, page_size=4))]
    ordered = in_run_order(cells)
    assert ordered == [cells[0], cells[3], cells[1], cells[4], cells[2]]
    records = [measurer.measure(c) for c in ordered]
    assert [r.status for r in records] == ["ok"] * 5, [r.reason for r in records]
    assert [r.params.deterministic for r in records[:2]] == [False, True] and records[1].correctness.bitwise_repeat
    assert len(computed) == 3  # one per family, not one per cell
    assert ["reference" in r.phases for r in records] == [True, False, True, False, True]


def e4m3_attention(p):
    """A CPU stand-in for an FP8 kernel: Q, K and V quantised to e4m3 with one absmax scale each (untimed), attention
    on the values scaled back (timed), so the compiled program carries f8 types."""
    import jax
    import jax.numpy as jnp

    from runner.registry import Staged

    def quantise(x):
        scale = jnp.max(jnp.abs(x)).astype(jnp.float32) / 448
        return (x.astype(jnp.float32) / scale).astype(jnp.float8_e4m3fn), scale

    def attend(*quantised):
        q, k, v = (values.astype(jnp.float32) * scale for values, scale in quantised)
        return jax.nn.dot_product_attention(q, k, v, is_causal=p.causal, implementation="xla")

    return Staged(lambda *qkv: tuple(map(quantise, qkv)), attend, lambda out: out.astype(jnp.dtype(p.dtype)))


def plain_attention(p):
    """A CPU stand-in for an FP8 variant's bf16 baseline."""
    import functools

    import jax

    return functools.partial(jax.nn.dot_product_attention, is_causal=p.causal, implementation="xla")


@pytest.mark.parametrize("name, matmuls", [("tokamax_triton_fp8", ["qk"]), ("cudnn_fp8", None)])
def test_an_fp8_cells_record_names_the_matmuls_its_variant_runs_on_f8_values(measurer, monkeypatch, name, matmuls):
    """The registry's fp8_matmuls reach the record through the Measurer's fp8 step: tokamax_triton_fp8 runs only Q·Kᵀ
    on f8 values (["qk"], so its MMA peak mixes FP8's rate and bf16's), cudnn_fp8 both (None: every matmul). The
    variants' GPU kernels are swapped for CPU stand-ins (so are their baselines'); every other field is the
    registry's."""
    import dataclasses

    from runner.record import CellRecord

    variant = VARIANTS[name]
    monkeypatch.setitem(VARIANTS, name, dataclasses.replace(variant, build=e4m3_attention, probe=None))
    monkeypatch.setitem(VARIANTS, variant.fp8_baseline,
                        dataclasses.replace(VARIANTS[variant.fp8_baseline], build=plain_attention, probe=None))
    record = measurer.measure(Cell("t", name, params(seq_len=16, dtype="bfloat16", causal=True)))
    assert record.status == "ok", record.reason
    assert record.fp8.baseline == variant.fp8_baseline and record.fp8.in_hlo is True
    assert record.fp8.matmuls == matmuls
    assert CellRecord.model_validate_json(record.model_dump_json()).fp8.matmuls == matmuls
