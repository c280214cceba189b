"""runner/inputs.py: a shape's seeded inputs, its float32 reference (in blocks of query rows), the untimed programs
they compile, and Truths, which makes them once per shape."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import REPO, params
from runner import inputs, memory, metrics, paging
from runner.cells import reference_shape
from runner.attention import naive_attention, real_tokens, reference_attention
from runner.compiler import Untimed
from runner.inputs import Truths, make_inputs, reference, unmasked_rows, untimed_programs
from test_attention import random_inputs


@pytest.mark.parametrize("kv_heads, pass_", [(2, "fwd"), (1, "fwd_bwd")])
def test_chunked_reference_equals_unchunked(monkeypatch, kv_heads, pass_):
    p = params(batch=2, seq_len=10, kv_heads=kv_heads, causal=True, pass_=pass_)
    args = random_inputs(p, 6)
    whole = inputs.reference(p, args)
    row_bytes = p.heads * p.kv_seq_len * 4 * (3 if pass_ == "fwd_bwd" else 1)  # one request's row of scores
    kv_bytes = p.kv_seq_len * kv_heads * 2 * p.head_dim * (4 + 4 * (2 if pass_ == "fwd_bwd" else 1))
    monkeypatch.setattr(memory, "REFERENCE_CHUNK_BYTES", 3 * row_bytes + kv_bytes)
    assert memory.chunk_shape(p) == (1, 3)  # each request in chunks of 3, 3, 3 and 1 rows
    calls = []
    untimed = inputs.UNTIMED
    monkeypatch.setattr(inputs, "UNTIMED", lambda fn, *a, **kw: calls.append(fn) or untimed(fn, *a, **kw))
    chunked = inputs.reference(p, args)
    assert calls == [inputs._reference_chunk] * 8  # it really chunked
    assert len(chunked) == len(whole) == (4 if pass_ == "fwd_bwd" else 1)
    for part, full in zip(chunked, whole):
        assert part.shape == full.shape and part.dtype == jnp.float32
        np.testing.assert_allclose(part, full, rtol=1e-5, atol=1e-6)


def test_bfloat16_gradients_are_summed_over_row_blocks_in_float32(monkeypatch):
    """dk and dv are sums over every block of query rows: kept in bfloat16 they would round at each block (565 at T
    32k); the reference keeps them in float32, equal to the unchunked float32 vjp of the same inputs."""
    p = params(seq_len=64, kv_heads=1, causal=True, pass_="fwd_bwd", dtype="bfloat16")
    args = random_inputs(p, 8)
    whole = inputs.reference(p, args)
    monkeypatch.setattr(memory, "REFERENCE_CHUNK_BYTES", 1)
    assert memory.chunk_shape(p) == (1, 1)  # one query row at a time: 64 blocks summed into dk and dv
    for part, full in zip(inputs.reference(p, args), whole):
        assert part.dtype == full.dtype == jnp.float32
        np.testing.assert_allclose(part, full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_reference_gradients_are_the_vjp_of_attention(dtype):
    p = params(kv_heads=2, causal=True, pass_="fwd_bwd", dtype=dtype)
    q, k, v, dout = (x.astype(jnp.float32) for x in random_inputs(p, 7))  # the cell's values, in float32

    @jax.jit
    def out_and_grads(q, k, v, dout):
        out, vjp = jax.vjp(functools.partial(reference_attention, causal=True), q, k, v)
        return (out, *vjp(dout.astype(jnp.float32)))

    cell = tuple(x.astype(p.dtype) for x in (q, k, v, dout))
    for got, want in zip(inputs.reference(p, cell), out_and_grads(q, k, v, dout)):
        assert got.dtype == jnp.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pass_", ["fwd", "fwd_bwd"])
def test_inputs_are_seeded_normal_random_never_zeros(pass_):
    p = params(seq_len=4, kv_seq_len=8, kv_heads=2, dtype="bfloat16", pass_=pass_)
    inputs = make_inputs(p, seed=0)
    shapes = [(1, 4, 4, 8), (1, 8, 2, 8), (1, 8, 2, 8)] + ([(1, 4, 4, 8)] if pass_ == "fwd_bwd" else [])
    assert [x.shape for x in inputs] == shapes
    assert all(x.dtype == jnp.bfloat16 for x in inputs)
    for x in inputs:
        x = np.asarray(x, np.float32)
        assert np.count_nonzero(x) > 0.9 * x.size
        assert 0.5 < x.std() < 1.5 and abs(x.mean()) < 0.5
    assert not np.array_equal(np.asarray(inputs[1]), np.asarray(inputs[2]))  # K and V differ
    again, other = make_inputs(p, seed=0), make_inputs(p, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(inputs, again))
    assert not np.array_equal(inputs[0], other[0])


def test_inputs_cut_from_a_shared_draw_are_the_normals_of_their_own_shape(monkeypatch):
    monkeypatch.setattr(inputs, "UNTIMED", Untimed())  # none compiled yet, whatever ran before: all are listed
    p = params(batch=3, seq_len=5, kv_seq_len=7, heads=3, kv_heads=1, head_dim=6, dtype="float32")
    keys = jax.random.split(jax.random.PRNGKey(4), 4)
    for key, x in zip(keys, make_inputs(p, seed=4)):
        assert memory.draw_size(x.shape) == 1 << (x.size - 1).bit_length() >= x.size
        np.testing.assert_array_equal(np.asarray(x), np.asarray(jax.random.normal(key, x.shape, jnp.float32)))
    assert [memory.draw_size(s) for s in [(1,), (2,), (3,), (4,), (5,)]] == [1, 2, 4, 4, 8]
    one, other = params(seq_len=33), params(seq_len=40)  # two shapes, tensors of the same power-of-two octave
    sizes = {memory.draw_size(s) for s in memory.input_shapes(one) + memory.input_shapes(other)}
    assert sizes == {memory.draw_size(s) for s in memory.input_shapes(one)}
    draws = {program[0] for program in inputs.untimed_programs(one, 0) + inputs.untimed_programs(other, 0)
             if program[1] is inputs._normal}
    assert {dict(key[1])["size"] for key in draws} == sizes  # one random-number program per size, not per shape


def test_the_untimed_programs_listed_ahead_are_all_that_a_shapes_truth_compiles(monkeypatch):
    monkeypatch.setattr(memory, "REFERENCE_CHUNK_BYTES", 5 * 4 * 24 * 4 * 3)  # chunks of 5 rows, and one of 4
    fresh = Untimed()  # none compiled yet, whatever ran before: all are listed
    monkeypatch.setattr(inputs, "UNTIMED", fresh)
    p = params(seq_len=24, kv_heads=2, causal=True, pass_="fwd_bwd")
    found = untimed_programs(p, 0)
    assert len(found) >= 5  # the inputs' draws and cuts, two chunk shapes, the rows
    for program in found:
        fresh.warm(*program)
    assert untimed_programs(p, 0) == []

    def compiles(*_):
        raise AssertionError("an untimed program was not among those listed ahead")

    monkeypatch.setattr(Untimed, "_compile", staticmethod(compiles))
    args = make_inputs(p, 0)
    assert len(reference(p, args)) == 4 and unmasked_rows(p, args) is not None


@pytest.mark.parametrize("pass_", ["fwd", "fwd_bwd"])
def test_a_causal_reference_in_blocks_that_skip_unseen_keys_equals_the_whole(monkeypatch, pass_):
    p = params(seq_len=40, kv_heads=2, causal=True, pass_=pass_)
    args = make_inputs(p, 0)
    whole = reference(p, args)
    grads = pass_ == "fwd_bwd"
    monkeypatch.setattr(memory, "REFERENCE_CHUNK_BYTES", 7 * 4 * 40 * 4 * (3 if grads else 1)  # 7 rows' scores
                        + 40 * 2 * 16 * (4 + 4 * (2 if grads else 1)))  # and K and V, sliced and in float32
    assert memory.chunk_shape(p) == (1, 7)
    assert [inputs._visible_keys(p, end) for end in (7, 14, 21, 40)] == [10, 20, 30, 40]  # blocks of 7 rows
    blocks = reference(p, args)
    assert all(float(abs(a - b).max()) < 1e-5 for a, b in zip(whole, blocks))


PEAKS = """
import json, sys
from pathlib import Path
import jax
from runner import inputs, memory
sys.path.insert(0, "tests")
from helpers import REPO, params

def resident(field):
    return next(int(line.split()[1]) << 10 for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith(field + ":"))

def peak_above_now(work):
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = resident("VmRSS")
    jax.block_until_ready(work())
    return resident("VmHWM") - before

jax.config.update("jax_cpu_enable_async_dispatch", False)  # chunks queued ahead would hold their memory at once
memory.REFERENCE_CHUNK_BYTES = 40 << 20
p = params(batch=128, seq_len=64, heads=16, head_dim=128, pass_="fwd_bwd")
args = jax.block_until_ready(inputs.make_inputs(p, 0))
first = (p.model_copy(update={"batch": 10}), [x[:10] for x in args])
for shape, given in ((p, args), first):  # compiled first: the programs' memory aside
    jax.block_until_ready(inputs.reference(shape, given))
chunk = peak_above_now(lambda: inputs.reference(*first))
print(json.dumps({"chunks": memory.chunk_shape(p), "chunk": chunk, "whole": peak_above_now(lambda: inputs.reference(p, args))}))
"""


@pytest.mark.slow
def test_the_reference_holds_its_results_once_beside_one_chunk_as_needed_bytes_counts():
    """needed_bytes counts the inputs, the results once, and one chunk. Measured in a process of its own on the CPU,
    its resident peak made exact by giving each allocation over 64 KiB its own mapping (freed memory goes back at
    once) and by running each chunk when dispatched: B128 T64 float32 fwd_bwd in 10-request chunks (13 of them),
    results 256 MiB, rises above its inputs by no more than the results and the peak of its first chunk alone (a reference of its
    10 requests, whose own results stand for the whole run's copies of those requests' Q, K, V and dO), to within
    the interpreter's own 4 MiB. Results gathered from the chunks and then joined were held twice at the end: 256
    MiB more. The chunk's own peak is XLA's (docs/benchmarks.md: on the CPU, more than chunk_bytes models)."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(64 << 10), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", PEAKS], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    peaks = json.loads(done.stdout.splitlines()[-1])
    p = params(batch=128, seq_len=64, heads=16, head_dim=128, pass_="fwd_bwd")
    q, kv = metrics.tensor_bytes(p)
    results = 2 * q + 2 * kv  # out, dq, dk, dv in float32
    assert peaks["chunks"] == [10, 64] and results == 256 << 20
    assert memory.needed_bytes(p) == 2 * q + 2 * kv + results + memory.chunk_bytes(p)  # inputs, results, a chunk
    assert peaks["whole"] - peaks["chunk"] <= results + (4 << 20), peaks


PAGED_PEAK = """
import json, sys
from pathlib import Path
import jax
from runner import inputs, memory
sys.path.insert(0, "tests")
from helpers import params

def resident(field):
    return next(int(line.split()[1]) << 10 for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith(field + ":"))

jax.config.update("jax_cpu_enable_async_dispatch", False)
memory.ROW_DRAW_ELEMENTS, memory.ROW_BLOCK_ELEMENTS = 1 << 20, 1 << 18  # the pool drawn by rows, 16 pages a program
memory.REFERENCE_CHUNK_BYTES = 16 << 20
p = params(batch=64, seq_len=1, kv_seq_len=2048, heads=8, kv_heads=2, head_dim=64, causal=True,
           kv_lengths="uniform", page_size=16, page_order="shuffled")
inputs.Truths(seed=0).get(p)  # compiled first: the programs' memory aside
Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
before = resident("VmRSS")
truth, _ = inputs.Truths(seed=0).get(p)
print(json.dumps({"peak": resident("VmHWM") - before, "needed": memory.needed_bytes(p),
                  "pool": truth.args[1].nbytes + truth.args[2].nbytes}))
"""


@pytest.mark.slow
def test_a_paged_cells_peak_while_its_pool_is_drawn_and_read_is_what_needed_bytes_counts():
    """A paged cell's inputs and reference made in a process of its own on the CPU (the resident peak made exact as
    above): its pool drawn by rows, 16 pages a program, its reference gathering 2 requests' pages at a time. The peak
    is needed_bytes to within the interpreter's own 4 MiB (measured: 75 KiB over 147.2 MB), and the pool is most of
    it: a pool built from a dense K and V kept alive would hold about twice as much."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(64 << 10), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", PAGED_PEAK], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["pool"] == 2 * 8192 * 16 * 2 * 64 * 4 and found["needed"] == 147_192_832
    assert found["pool"] < found["peak"] <= found["needed"] + (4 << 20), found


def test_truths_makes_a_shapes_inputs_once_and_says_what_it_spent():
    truths = Truths(seed=0)
    p = params(seq_len=8)
    first, phases = truths.get(p)
    assert set(phases) == {"inputs", "reference"} and all(s > 0 for s in phases.values())
    again, phases = truths.get(p.model_copy(update={"devices": 2}))  # a split shape has its unsplit one's
    assert again is first and phases == {} and truths.holds(p)
    other, phases = truths.get(params(seq_len=16))
    assert other is not first and set(phases) == {"inputs", "reference"} and not truths.holds(p)


@pytest.mark.parametrize("shape", [
    dict(deterministic=True, pass_="fwd_bwd", causal=True), dict(tune=True, causal=True), dict(devices=2, causal=True),
    dict(heads=8, kv_heads=4, tp=2, causal=True), dict(heads=8, kv_heads=4, tp=2, bias="alibi"),
    dict(seq_len=2, kv_seq_len=16, causal=True, page_size=4),
    dict(window=3, causal=True), dict(fill=0.5), dict(softcap=2.0), dict(documents=2, causal=True),
    dict(v_head_dim=4, pass_="fwd_bwd"),
])  # fmt: skip
def test_a_cell_is_given_exactly_its_reference_shapes_inputs_and_reference(shape):
    """Each quiet axis away from its default: the inputs, reference and unmasked rows made for the cell's reference
    shape (what Truths holds for its whole family) are those of the cell itself, bit for bit."""
    p = params(**{"batch": 2, **shape})
    plain = reference_shape(p)
    made = [make_inputs(x, 0) for x in (p, plain)]
    for mine, theirs in [made, [reference(x, args) for x, args in zip((p, plain), made)]]:
        assert len(mine) == len(theirs)
        for a, b in zip(mine, theirs):
            np.testing.assert_array_equal(a, b)
    rows = [unmasked_rows(x, args) for x, args in zip((p, plain), made)]
    assert (rows[0] is None) == (rows[1] is None)
    if rows[0] is not None:
        np.testing.assert_array_equal(*rows)


def test_truths_hands_a_deterministic_cell_its_plain_twins_arrays_and_a_paged_cell_its_own_pool():
    truths = Truths(seed=0)
    plain, phases = truths.get(params(causal=True, pass_="fwd_bwd"))
    assert set(phases) == {"inputs", "reference"}
    again, phases = truths.get(params(causal=True, pass_="fwd_bwd", deterministic=True))
    assert again is plain and phases == {}
    dense, _ = truths.get(params(seq_len=2, kv_seq_len=16, causal=True, kv_lengths="equal"))
    paged, phases = truths.get(params(seq_len=2, kv_seq_len=16, causal=True, page_size=4, page_order="shuffled"))
    assert paged is not dense and set(phases) == {"inputs", "reference"}
    assert paged.args[1].shape == (4, 4, 4, 8) and dense.args[1].shape == (1, 16, 4, 8)  # pool, dense cache


@pytest.mark.parametrize("shape", [dict(seq_len=8, kv_seq_len=16), dict(seq_len=16, kv_seq_len=8)])
def test_the_cotangent_is_zeroed_by_the_query_lengths_where_the_keys_are_padded_otherwise(shape):
    """T != S: the query rows' lengths (2, 5, 8 of 8 at fill 0.6) are not the keys' (3, 10, 16 of 16)."""
    p = params(batch=3, kv_heads=2, pass_="fwd_bwd", fill=0.6, dtype="float32", **shape)
    dout = np.asarray(make_inputs(p, seed=0)[3])
    real = np.arange(p.seq_len)[None, :] < np.asarray(inputs.masks_lengths(p)[0])[:, None]
    assert not dout[~real].any() and np.count_nonzero(dout[real]) > 0.9 * dout[real].size


def test_a_padded_cells_cotangent_is_zero_at_its_padded_query_rows_so_what_a_library_writes_there_moves_no_gradient():
    p = params(batch=3, seq_len=8, kv_heads=2, causal=True, pass_="fwd_bwd", fill=0.6, dtype="float32")
    q, k, v, dout = make_inputs(p, seed=0)
    q_lengths, kv_lengths = inputs.masks_lengths(p)
    real = np.arange(p.seq_len)[None, :] < np.asarray(q_lengths)[:, None]
    assert not real.all()
    assert not np.asarray(dout)[~real].any() and np.count_nonzero(np.asarray(dout)[real]) > 0.9 * dout[real].size
    assert inputs.cotangent(p) == "normal, zero at padded query rows"  # and the record says so (test_checks)
    assert inputs.cotangent(params(batch=3, seq_len=8, pass_="fwd_bwd")) == "normal"
    assert inputs.cotangent(params(batch=3, seq_len=8, fill=0.6)) is None  # forward: no cotangent
    # a library that attends at padded query rows (tokamax's kernels do): its dk and dv are still the reference's
    out, vjp = jax.vjp(lambda q, k, v: naive_attention(q, k, v, True, kv_lengths=kv_lengths), q, k, v)
    got = real_tokens((out, *vjp(dout)), q_lengths, kv_lengths)
    want = real_tokens(inputs.reference(p, (q, k, v, dout)), q_lengths, kv_lengths)
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=name)


def test_a_paged_cell_holds_its_pool_alone_and_needed_bytes_covers_what_is_allocated():
    """What Truths holds for a ragged, shuffled paged cell, read from jax's live arrays on the CPU: Q, the two pools
    and the float32 output, and no dense K or V beside them; needed_bytes covers it (it adds the peak's chunk)."""
    import gc

    p = params(batch=4, seq_len=2, kv_seq_len=40, heads=4, kv_heads=2, causal=True, kv_lengths="long_tail",
               page_size=8, page_order="shuffled")
    gc.collect()
    before = {id(x) for x in jax.live_arrays()}
    truth, _ = Truths(seed=0).get(p)
    gc.collect()
    made = [x for x in jax.live_arrays() if id(x) not in before]
    pages = sum(paging.pages_of(p))
    assert sorted(x.shape for x in made) == sorted([(4, 2, 4, 8), (pages, 8, 2, 8), (pages, 8, 2, 8),
                                                    (4, 2, 4, 8)])  # Q, the pools, the output
    held = sum(x.nbytes for x in made)
    assert held == 2 * 4 * 2 * 4 * 8 * 4 + 2 * pages * 8 * 2 * 8 * 4 <= memory.needed_bytes(p)
    assert truth.args[1].shape[0] == pages < 4 * max(paging.pages_of(p))
