"""runner/paging.py: serving cells' lengths, the page pool and table, and the float32 reference that reads them."""

from __future__ import annotations

import math
from dataclasses import replace

import jax.numpy as jnp
import numpy as np
import pytest

from runner import inputs, masks, memory, metrics, paging
from runner.attention import Logits, reference_attention
from runner.checks import check_step, incorrect_reason
from runner.shape import Params

BASE = dict(batch=8, seq_len=1, kv_seq_len=40, heads=4, kv_heads=2, head_dim=8, v_head_dim=8, dtype="float32",
            causal=True, window=None, fill=1.0, bias="none", softcap=None, tp=1, devices=1, kv_spread=0.5,
            page_order="contiguous", kv_lengths=None, page_size=None, documents=1, deterministic=False, tune=False)


def params(**changes) -> Params:
    return Params(**{**BASE, "pass": "fwd", **changes})


@pytest.mark.parametrize("kind", ["equal", "uniform", "long_tail", "bimodal"])
def test_lengths_average_the_kv_length_and_follow_their_distribution(kind):
    p = params(batch=64, kv_seq_len=8192, kv_lengths=kind, kv_spread=0.5)
    found = paging.lengths(p)
    assert len(found) == 64 and abs(sum(found) / 64 - 8192) <= 1  # the mean, up to rounding
    assert paging.lengths(p) == found  # deterministic
    spread = {"equal": (8192, 8192), "uniform": (4096, 12288), "bimodal": (4096, 4096 + 4 * 4096)}
    if kind in spread:
        assert spread[kind][0] <= min(found) and max(found) <= spread[kind][1]
    if kind == "bimodal":
        assert sorted(set(found)) == [4096, 20480] and found.count(20480) == 16
    if kind == "long_tail":  # most requests shorter than the mean, the longest several times it
        assert sum(n < 8192 for n in found) >= 40 and max(found) > 2.5 * 8192


def test_no_serving_axis_no_lengths_and_each_request_holds_its_new_tokens():
    assert paging.lengths(params()) is None and paging.cache_len(params()) == 40
    assert paging.lengths(params(page_size=16)) == [40] * 8  # paged alone: equal lengths
    short = paging.lengths(params(seq_len=8, kv_seq_len=8, kv_lengths="uniform", kv_spread=1.0))
    assert min(short) == 8  # at least T


def test_the_pool_holds_the_batchs_pages_not_b_times_the_longest():
    p = params(kv_lengths="long_tail", page_size=16)
    counts = paging.pages_of(p)
    assert counts == [math.ceil(n / 16) for n in paging.lengths(p)]
    assert sum(paging.pages_of(p)) < p.batch * max(counts)
    assert metrics.kv_cache_bytes(p) == 2 * sum(counts) * 16 * 2 * 8 * 4


def test_a_pool_half_of_whose_rows_are_keys_is_not_said_mostly_empty():
    assert paging.pool_note(params(page_size=80)) == ""  # 8 requests of 40 keys in pages of 80: half the rows
    assert paging.pool_note(params(page_size=81)).startswith("page pool mostly empty: 8 pages of 81 tokens hold 320")


def _dense(p, pool):
    """Each request's keys (or values), its pages taken from their pool slots one by one (runner.paging's rule)."""
    where, first, rows = paging.slots(p), 0, []
    for count in paging.pages_of(p):
        rows.append(np.concatenate([np.asarray(pool[where[first + j]]) for j in range(count)]))
        first += count
    return rows


@pytest.mark.parametrize("order", ["contiguous", "shuffled"])
def test_a_paged_cell_is_given_its_pool_and_the_table_reads_each_requests_pages_from_it(order):
    """No dense K and V beside the pool: the pool is the cell's input (drawn as it is), and the table gathers each
    request's pages from it in order."""
    p = params(kv_lengths="uniform", page_size=4, page_order=order, v_head_dim=6)
    q, k_pages, v_pages = inputs.make_inputs(p, 0)
    assert k_pages.shape == (sum(paging.pages_of(p)), 4, 2, 8) and v_pages.shape == k_pages.shape[:3] + (6,)
    paged = paging.cache(p, k_pages, v_pages)
    assert paged.table.dtype == jnp.int32 and paged.lengths.tolist() == paging.lengths(p)
    dense_k, dense_v = paging.gather(paged)
    for b, (keys, values) in enumerate(zip(_dense(p, k_pages), _dense(p, v_pages))):
        assert np.array_equal(dense_k[b, :len(keys)], keys) and np.array_equal(dense_v[b, :len(values)], values)
    slots = sorted(paging.slots(p))
    assert slots == list(range(len(slots)))  # a permutation of the pool
    if order == "shuffled":
        steps = np.diff(np.asarray(paging.slots(p)))
        assert not np.all(steps == 1) and len(set(steps.tolist())) <= 2  # scattered by one stride, mod the pool


def test_the_table_holds_each_requests_slots_then_slot_0_past_its_own_pages():
    p = params(kv_lengths="uniform", page_size=4)
    counts, table = paging.pages_of(p), paging.table(p)
    assert len(set(counts)) > 1 and table[0] == list(range(counts[0])) + [0] * (max(counts) - counts[0])
    assert all(row[n:] == [0] * (max(counts) - n) for row, n in zip(table, counts))


def _padded(rows):
    """Requests' keys of different lengths as one (B, longest, K, H) array, zeros past each."""
    longest = max(len(row) for row in rows)
    return np.stack([np.pad(row, ((0, longest - len(row)), (0, 0), (0, 0))) for row in rows])


def _by_hand(q, k, v, lengths, new_tokens):
    """Each new token i of request b against its first len_b - T + i + 1 keys, one row at a time, float64."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    batch, _, heads, head_dim = q.shape
    group = heads // k.shape[2]
    out = np.zeros(q.shape[:3] + (v.shape[-1],))
    for b, length in enumerate(lengths):
        for i in range(new_tokens):
            seen = length - new_tokens + i + 1
            for n in range(heads):
                scores = k[b, :seen, n // group] @ q[b, i, n] / math.sqrt(head_dim)
                weights = np.exp(scores - scores.max())
                out[b, i, n] = weights / weights.sum() @ v[b, :seen, n // group]
    return out


@pytest.mark.parametrize("new_tokens", [1, 4])
def test_the_reference_aligns_causal_to_each_requests_end_and_masks_past_its_length(new_tokens):
    p = params(seq_len=new_tokens, kv_lengths="long_tail", page_size=16, page_order="shuffled")
    args = inputs.make_inputs(p, 0)
    expected = inputs.reference(p, args)[0]
    q, k, v = args[0], *(_padded(_dense(p, pool)) for pool in args[1:])  # the pages read one by one, by hand
    assert np.allclose(expected, _by_hand(q, k, v, paging.lengths(p), new_tokens), atol=1e-5)
    top_left = reference_attention(q, k, v, causal=True, kv_lengths=jnp.asarray(paging.lengths(p)))
    assert new_tokens == 1 or not np.allclose(expected, top_left, atol=1e-3)  # prefill's mask is another answer


def test_a_kernel_that_reads_a_wrong_page_is_incorrect():
    """The reference reads the pool through the cell's table (runner.paging's rule); a kernel that reads another
    request's page for request 0's first one attends over other keys, and the check calls it incorrect. (A request's
    own pages read in another order are the same keys: attention cannot tell, except where the mask cuts a page.)"""
    p = params(seq_len=2, kv_lengths="uniform", page_size=4, page_order="shuffled")
    args = inputs.make_inputs(p, 0)
    truth = inputs.InputsAndReference(args, inputs.reference(p, args), None)
    paged = paging.cache(p, args[1], args[2])

    def read(table):
        k, v = paging.gather(replace(paged, table=table))
        return reference_attention(args[0], k, v, True, logits=Logits.of(p), kv_lengths=paged.lengths)

    right = check_step(p, (read(paged.table),), truth, 2e-2, 2e-2)
    assert incorrect_reason(right) == ""
    wrong_table = paged.table.at[0, 0].set(paged.table[1, 0])
    wrong = check_step(p, (read(wrong_table),), truth, 2e-2, 2e-2)
    assert incorrect_reason(wrong).startswith("out relative error")


def test_a_serving_cells_bytes_are_its_real_tokens_once():
    """Q and O of the new tokens, K and V of each request's own tokens (a partly filled last page counts its real
    tokens only): cudnn-frontend's decode_sweep count at equal lengths."""
    p = params(batch=3, seq_len=2, kv_seq_len=37, kv_lengths="uniform", page_size=16)
    row = 2 * 8 * 4
    assert metrics.bytes_min(p) == 2 * 3 * 2 * 4 * 8 * 4 + 2 * sum(paging.lengths(p)) * row
    assert masks.kept_rows(p) == (6, sum(paging.lengths(p)))
    equal = params(batch=1, kv_seq_len=2048, heads=64, kv_heads=8, head_dim=128, v_head_dim=128, dtype="bfloat16",
                   page_size=16)
    assert metrics.bytes_min(equal) == 8_421_376  # 1309.294 GB/s x 6.432 us in the published CSV, to 4 digits


@pytest.mark.slow
def test_a_run_calls_xla_paged_ok_and_a_wrong_page_table_incorrect(tmp_path):
    import json
    from pathlib import Path

    import yaml

    from helpers import FAST_TIMING, TINY, attnbench

    spec = {"name": "paged", "defaults": {**TINY, "batch": 3, "seq_len": 4, "kv_seq_len": 48, "causal": True,
                                           "kv_lengths": "uniform", "page_size": 8, "page_order": "shuffled"},
            "timing": FAST_TIMING, "experiments": [{"name": "p", "variants": ["xla_paged", "test_wrong_page", "xla"]}]}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    done = attnbench("run", tmp_path / "spec.yaml", "--out", tmp_path, "--run-id", "m", "--compile-cache", "off",
                     ATTNBENCH_VARIANTS=str(Path(__file__).with_name("variants")))
    assert done.returncode == 0, done.stderr
    cells = {c["variant"]: c for c in map(json.loads, (tmp_path / "m" / "cells.jsonl").read_text().splitlines())}
    assert cells["xla_paged"]["status"] == "ok"
    assert cells["test_wrong_page"]["status"] == "incorrect"
    assert cells["xla"]["status"] == "skipped" and "paged KV cache" in cells["xla"]["reason"]


def test_a_serving_reference_a_few_requests_at_a_time_equals_the_whole(monkeypatch):
    """The reference gathers and upcasts one chunk of requests' K and V at a time (B128 x 128k would need 137 GB in
    float32), whole pages of the longest request's for each."""
    p = params(batch=7, seq_len=3, kv_lengths="long_tail", page_size=16)
    args = inputs.make_inputs(p, 0)
    k, v = paging.gather(paging.cache(p, *args[1:]))
    whole = reference_attention(args[0], k, v, True, logits=Logits.of(p), kv_lengths=jnp.asarray(paging.lengths(p)))
    keys = max(paging.pages_of(p)) * 16
    per_request = 4 * 4 * 3 * paging.cache_len(p) + keys * 2 * 16 * (4 + 4)  # N 4 x T 3 rows of float32 scores; K 2
    # x (H + Hv) 16 of K and V gathered and in float32
    monkeypatch.setattr(memory, "REFERENCE_CHUNK_BYTES", 3 * per_request)
    assert memory.chunk_shape(p) == (3, 3)  # chunks of 3, 3 and 1 requests, all 3 rows of each
    assert float(jnp.max(jnp.abs(inputs.reference(p, args)[0] - whole))) < 1e-6


def test_a_serving_backward_reference_a_few_requests_at_a_time_equals_the_whole(monkeypatch):
    """fwd_bwd takes the same chunks of requests (and of their rows): gradients and all, as one chunk gives them."""
    p = params(batch=5, seq_len=4, kv_lengths="long_tail", **{"pass": "fwd_bwd"})
    args = inputs.make_inputs(p, 0)
    whole = inputs.reference(p, args)
    assert memory.chunk_shape(p) == (5, 4)
    per_row, kv = 4 * 4 * paging.cache_len(p) * 3, paging.cache_len(p) * 2 * 16 * (4 + 8)  # scores x3; K, V, grads
    monkeypatch.setattr(memory, "REFERENCE_CHUNK_BYTES", 3 * per_row + kv)
    assert memory.chunk_shape(p) == (1, 3)  # each request in rows 0-2, then 3
    for part, full in zip(inputs.reference(p, args), whole, strict=True):
        assert part.shape == full.shape
        np.testing.assert_allclose(part, full, rtol=1e-5, atol=1e-6)


def test_a_cache_too_large_for_one_draw_is_drawn_a_request_at_a_time(monkeypatch):
    """Past ROW_DRAW_ELEMENTS a tensor's row b is jax.random.normal(fold_in(key, b)) of the row's shape, written in
    place; smaller tensors keep their normals of the whole shape."""
    import jax

    p = params(batch=3, kv_seq_len=16, kv_lengths="equal")
    monkeypatch.setattr(memory, "ROW_DRAW_ELEMENTS", 256)  # K and V (768 normals) are drawn by rows, Q (96) is not
    q, k, v = inputs.make_inputs(p, 0)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    assert np.array_equal(q, jax.random.normal(keys[0], q.shape))
    for b in range(3):
        assert np.array_equal(k[b], jax.random.normal(jax.random.fold_in(keys[1], b), k.shape[1:]))
        assert np.array_equal(v[b], jax.random.normal(jax.random.fold_in(keys[2], b), v.shape[1:]))
    assert np.array_equal(inputs.make_inputs(p, 0)[1], k)


@pytest.mark.slow
def test_serving_specs_cpu_slice_runs_paged_ragged_and_multi_token_decode_ok(tmp_path):
    """specs/serving.yaml's `cpu` experiment on a CPU: naive, xla and xla_paged agree with the float32 reference on
    ragged (long_tail) lengths, shuffled pages and 1 and 4 new tokens; only the dense/paged mismatches are skipped."""
    import json

    from helpers import REPO, attnbench

    done = attnbench("run", REPO / "specs" / "serving.yaml", "--only", "cpu", "--out", tmp_path, "--run-id", "c",
                     "--compile-cache", "off")
    assert done.returncode == 0, done.stderr
    cells = [json.loads(line) for line in (tmp_path / "c" / "cells.jsonl").read_text().splitlines()]
    ok = {(c["variant"], c["params"]["seq_len"], c["params"]["page_size"]) for c in cells if c["status"] == "ok"}
    assert ok == {(v, t, p) for t in (1, 4) for v, p in (("xla_paged", 16), ("naive", None), ("xla", None))}
    assert all(c["status"] == "skipped" for c in cells if (c["variant"], c["params"]["seq_len"],
                                                            c["params"]["page_size"]) not in ok)


@pytest.mark.parametrize("changes, aligned", [
    (dict(kv_lengths="long_tail"), False),  # causal at T = 1: the token sees its whole request
    (dict(kv_lengths="long_tail", seq_len=4), True), (dict(kv_lengths="long_tail", seq_len=4, causal=False), False),
    (dict(kv_lengths="long_tail", window=8), True), (dict(page_size=8, seq_len=4, causal=False, window=8), True),
    (dict(page_size=8, seq_len=4), True), (dict(seq_len=4, window=2), False)])  # the last: no serving cell
def test_a_serving_cell_needs_an_end_aligned_mask_for_a_window_or_causal_new_tokens(changes, aligned):
    assert paging.end_aligned_mask(params(**changes)) is aligned


@pytest.mark.parametrize(("new_tokens", "causal", "window"), [(1, True, None), (4, True, None), (1, True, 8),
                                                              (4, False, 8), (4, False, None)])
def test_xla_and_xla_paged_agree_with_the_reference_on_serving_masks(new_tokens, causal, window):
    """jax.nn.dot_product_attention's is_causal and local_window_size are top-left: a serving cell's causal T > 1 and
    its windows (the last W keys of each request) go as a mask, causal T = 1 as the lengths alone."""
    from runner.registry import Staged
    from runner.variants.jax_attention import auto, naive, xla
    from runner.variants.paged_gather import xla_paged

    p = params(seq_len=new_tokens, causal=causal, window=window, kv_lengths="long_tail", page_size=8,
               page_order="shuffled")
    dense = p.model_copy(update={"page_size": None})
    args, pools = inputs.make_inputs(dense, 0), inputs.make_inputs(p, 0)
    expected = inputs.reference(dense, args)[0]
    for out in (xla(dense)(*args), auto(dense)(*args), naive(dense)(*args)):
        assert float(jnp.max(jnp.abs(out - expected))) < 1e-5
    paged: Staged = xla_paged(p)
    out = paged.attend(*paged.prepare(*pools))
    assert float(jnp.max(jnp.abs(out - inputs.reference(p, pools)[0]))) < 1e-5


@pytest.mark.parametrize("page_size", [16, None])
@pytest.mark.parametrize("new_tokens", [1, 4])
def test_a_serving_window_is_taken_only_by_the_variants_checked_applying_it_end_aligned(new_tokens, page_size):
    """jax's local_window_size is top-left: in a serving cell it kept a request's first W keys, not its last (xla
    at T = 1, dd26135). On an H200 every kernel, the paged ones first (cudnn_paged, pallas_paged, xla_paged), declines
    a serving window, but the three the test above checks against the reference at T 1 and 4 (naive, xla, auto:
    the window as an end-aligned mask); a kernel that starts taking one must join that check."""
    from runner.machine import Device
    from runner.registry import VARIANTS, decline, load_all

    h200 = Device("gpu", "NVIDIA H200", 9.0, 141 << 30)
    p = params(batch=32, seq_len=new_tokens, kv_seq_len=8192, heads=64, kv_heads=8, head_dim=128, v_head_dim=128,
               dtype="bfloat16", window=128, kv_lengths="long_tail", page_size=page_size)
    takes = {name for name, v in load_all().items() if decline(v, p, h200) is None}
    assert takes == ({"naive", "xla", "auto"} if page_size is None else set())
    assert all("sliding window" in decline(VARIANTS[name], p, h200) for name in ("cudnn_paged", "pallas_paged",
                                                                                  "xla_paged"))


@pytest.mark.parametrize("batch", [1, 3, 4, 5, 8, 13])
def test_bimodals_mean_is_s_only_where_the_batch_is_a_multiple_of_4_as_docs_specs_says(batch):
    """docs/specs.md: S(1 - s) + 4sS floor(B/4)/B (B5, S40, s 0.9: 4, 4, 4, 148, 4, mean 32.8)."""
    p = params(batch=batch, seq_len=1, kv_seq_len=40, causal=True, kv_lengths="bimodal", kv_spread=0.9)
    assert sum(paging.lengths(p)) / batch == pytest.approx(40 * 0.1 + 4 * 0.9 * 40 * (batch // 4) / batch)
