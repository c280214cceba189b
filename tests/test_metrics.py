"""runner/metrics.py: exact FLOPs and bytes; the causal count (runner/masks.py) equals a brute-force sum of the
variants' mask."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import params
from runner import masks, metrics, paging
from runner.attention import scores_mask

T_S_PAIRS = [(1, 1), (1, 7), (7, 1), (8, 8), (5, 9), (9, 5), (16, 3), (3, 16), (64, 128), (128, 64), (33, 33)]


@pytest.mark.parametrize("seq_len, kv_seq_len", T_S_PAIRS)
def test_causal_count_is_the_brute_force_mask_sum(seq_len, kv_seq_len):
    # key j visible to query i when j <= i, top-left aligned
    brute = int(np.tril(np.ones((seq_len, kv_seq_len), bool)).sum())
    assert masks.kept_in_sequence(seq_len, kv_seq_len, True, None) == brute


@pytest.mark.parametrize("seq_len, kv_seq_len", T_S_PAIRS)
def test_causal_count_matches_the_mask_the_variants_apply(seq_len, kv_seq_len):
    mask = np.asarray(scores_mask(seq_len, kv_seq_len))
    assert mask.shape == (seq_len, kv_seq_len)
    assert masks.kept_in_sequence(seq_len, kv_seq_len, True, None) == int(mask.sum())


@pytest.mark.parametrize("seq_len, kv_seq_len", T_S_PAIRS)
def test_full_attention_counts_every_element(seq_len, kv_seq_len):
    assert masks.kept_in_sequence(seq_len, kv_seq_len, False, None) == seq_len * kv_seq_len


def test_scores_mask_with_offset_is_the_matching_rows_of_the_whole_mask():
    whole = np.asarray(scores_mask(10, 7))
    assert (np.asarray(scores_mask(3, 7, q_offset=4)) == whole[4:7]).all()


def test_forward_flops_at_the_lab_default_shape():
    p = params(batch=4, seq_len=128, heads=8, head_dim=64)
    assert metrics.flops(p) == 4 * 4 * 8 * 64 * 128 * 128 == 134_217_728


def test_causal_flops_count_only_unmasked_scores():
    p = params(batch=2, seq_len=6, kv_seq_len=4, heads=4, head_dim=8, causal=True)
    unmasked = 1 + 2 + 3 + 4 + 4 + 4
    assert metrics.flops(p) == 4 * 2 * 4 * 8 * unmasked


def test_flops_ignore_kv_heads_and_dtype():
    # GQA shares K and V but every query head still does its own two matmuls
    base = metrics.flops(params(heads=8))
    assert metrics.flops(params(heads=8, kv_heads=1)) == base
    assert metrics.flops(params(heads=8, dtype="bfloat16")) == base


def test_fwd_bwd_is_3_5_times_forward():
    assert metrics.BWD_FLOP_FACTOR == 3.5
    fwd = metrics.flops(params(seq_len=8, causal=True))
    assert metrics.flops(params(seq_len=8, causal=True, pass_="fwd_bwd")) == int(3.5 * fwd)
    fwd = metrics.flops(params(batch=3, seq_len=7, heads=2, head_dim=8))
    assert metrics.flops(params(batch=3, seq_len=7, heads=2, head_dim=8, pass_="fwd_bwd")) == 3.5 * fwd


@pytest.mark.parametrize("dtype, itemsize", [("float32", 4), ("bfloat16", 2), ("float16", 2)])
def test_forward_bytes_read_q_k_v_and_write_o_once(dtype, itemsize):
    p = params(batch=2, seq_len=8, kv_seq_len=16, heads=4, kv_heads=2, head_dim=8, dtype=dtype)
    q = 2 * 8 * 4 * 8 * itemsize
    kv = 2 * 16 * 2 * 8 * itemsize
    assert metrics.tensor_bytes(p) == (q, kv)
    assert metrics.bytes_min(p) == q + kv + kv + q


def test_fwd_bwd_bytes_add_the_backward_traffic():
    p = params(batch=2, seq_len=8, kv_seq_len=16, heads=4, kv_heads=2, head_dim=8, pass_="fwd_bwd")
    q, kv = metrics.tensor_bytes(p)
    forward = 2 * q + 2 * kv  # read Q, K, V; write O
    backward = (3 * q + 2 * kv) + (q + 2 * kv)  # read Q, K, V, O, dO; write dQ, dK, dV
    assert metrics.bytes_min(p) == forward + backward == 6 * q + 6 * kv


@pytest.mark.parametrize("kv_heads", [8, 2, 1], ids=["MHA", "GQA", "MQA"])
def test_kv_cache_bytes_scale_with_kv_heads(kv_heads):
    p = params(batch=4, seq_len=1024, heads=8, kv_heads=kv_heads, head_dim=64, dtype="bfloat16")
    assert metrics.kv_cache_bytes(p) == 2 * 4 * 1024 * kv_heads * 64 * 2


def test_kv_cache_mqa_is_an_eighth_of_mha_with_eight_heads():
    mha = metrics.kv_cache_bytes(params(heads=8, kv_heads=8))
    assert metrics.kv_cache_bytes(params(heads=8, kv_heads=2)) * 4 == mha
    assert metrics.kv_cache_bytes(params(heads=8, kv_heads=1)) * 8 == mha


def test_kv_cache_uses_the_key_sequence_length():
    p = params(batch=1, seq_len=1, kv_seq_len=4096, heads=8, kv_heads=1, head_dim=128, dtype="float16")
    assert metrics.kv_cache_bytes(p) == 2 * 4096 * 1 * 128 * 2


def test_a_windowed_decode_reads_only_the_window_of_its_cache():
    """Mistral's decode: one query keeps W = 4096 keys of a 128k cache; 53,560 GB/s on an H200 came of counting all."""
    p = params(batch=8, seq_len=1, kv_seq_len=131072, heads=32, kv_heads=8, head_dim=128, dtype="bfloat16",
               window=4096)
    q_row, kv_row = 32 * 128 * 2, 8 * 128 * 2
    assert metrics.bytes_min(p) == 2 * 8 * q_row + 2 * 8 * 4096 * kv_row
    assert metrics.kv_cache_bytes(p) == 2 * 8 * 131072 * kv_row  # the cache itself is still all there


def test_a_paged_cells_gathered_copy_is_every_request_at_the_longest_ones_pages_not_the_pool():
    """xla_paged gathers each request's pages into one dense (B, max pages x P) copy: at ragged lengths that is more
    than the pool, which holds each request's own pages. Three requests of 24, 36 and 60 keys in pages of 8: 3, 5 and
    8 pages, a pool of 16 and a copy of 3 x 8."""
    p = params(batch=3, seq_len=1, kv_seq_len=40, heads=4, kv_heads=2, head_dim=16, dtype="bfloat16", page_size=8,
               kv_lengths="long_tail")
    assert paging.lengths(p) == [24, 36, 60]
    kv_row = 2 * 16 * 2  # K heads x H x bf16
    assert metrics.gathered_bytes(p) == 2 * 3 * 8 * 8 * kv_row
    assert metrics.kv_cache_bytes(p) == 2 * 16 * 8 * kv_row

def test_a_padded_batch_moves_only_its_real_tokens():
    p = params(batch=4, seq_len=64, heads=4, kv_heads=2, head_dim=8, causal=True, fill=0.5)
    q_lens, kv_lens = masks.padded_lengths(p)
    q_row, kv_row = 4 * 8 * 4, 2 * 8 * 4
    assert sum(q_lens) < 4 * 64
    assert metrics.bytes_min(p) == 2 * sum(q_lens) * q_row + 2 * sum(kv_lens) * kv_row


@pytest.mark.parametrize("seq_len, kv_seq_len", T_S_PAIRS)
@pytest.mark.parametrize("causal, window", [(False, None), (True, None), (True, 3), (False, 2)])
def test_keys_kept_are_the_columns_the_variants_mask_keeps(seq_len, kv_seq_len, causal, window):
    """The keys some query keeps, against the mask the variants apply: its columns with any element kept."""
    mask = np.asarray(scores_mask(seq_len, kv_seq_len, window=window, causal=causal))
    assert masks.keys_kept_in_sequence(seq_len, kv_seq_len, causal, window) == int(mask.any(axis=0).sum())


def test_an_unmasked_cell_moves_every_row():
    p = params(batch=2, seq_len=8, kv_seq_len=16, heads=4, kv_heads=2, head_dim=8, causal=False)
    assert metrics.bytes_min(p) == 2 * sum(metrics.tensor_bytes(p))


def test_energy_is_mean_power_times_kernel_time_and_work_per_joule_follows():
    p = params(seq_len=64)
    energy = metrics.energy(p, 4e-3, 500.0)  # 500 W for 4 ms: 2 J
    assert energy["energy_j"] == pytest.approx(2.0)
    assert energy["tflops_per_j"] == pytest.approx(metrics.flops(p) / 1e12 / 2.0)
    assert metrics.energy(p, 8e-3, 250.0)["energy_j"] == pytest.approx(2.0)  # power and time trade one for one
    assert metrics.energy(p, None, 500.0) == {} and metrics.energy(p, 2e-3, None) == {}


def test_an_fp8_cells_mma_peak_is_fp8s_for_the_matmuls_it_runs_in_fp8_and_its_dtypes_for_the_rest():
    """cudnn_fp8 runs Q·Kᵀ and P·V on f8 values: twice bf16's peak on an H200. tokamax_triton_fp8 runs only Q·Kᵀ so
    (its kernel rescales V to bf16 before P·V): half its FLOPs at each rate, as time adds, 4/3 of bf16's. A cell whose
    program holds no f8 type ran in its dtype, whatever its variant promised."""
    from stores import SHIPPED
    from runner.store import read_run

    run = read_run(SHIPPED / "h200" / "hopper-long-burst-20261202")
    machine = run.manifest.machine
    fp8 = next(c for c in run.cells if c.fp8 and c.fp8.in_hlo and c.telemetry)
    bf16 = metrics.peak_mma_tflops(machine.compute_capability, machine.gpu.sm_count, "bfloat16",
                                   fp8.telemetry.sm_clock_mhz.median)
    assert fp8.fp8.matmuls is None and metrics.clock_peak_tflops(fp8, machine) == pytest.approx(2 * bf16)
    qk_only = fp8.model_copy(update={"fp8": fp8.fp8.model_copy(update={"matmuls": ["qk"]})})
    assert metrics.clock_peak_tflops(qk_only, machine) == pytest.approx(4 / 3 * bf16)
    mla = qk_only.model_copy(update={"params": fp8.params.model_copy(update={"head_dim": 192, "v_head_dim": 128})})
    assert metrics.clock_peak_tflops(mla, machine) == pytest.approx(1 / (0.6 / (2 * bf16) + 0.4 / bf16))
    backward = qk_only.model_copy(update={"params": fp8.params.model_copy(update={"pass_": "fwd_bwd"})})
    assert metrics.clock_peak_tflops(backward, machine) is None  # which backward matmuls ran in FP8: not recorded
    not_fp8 = fp8.model_copy(update={"fp8": fp8.fp8.model_copy(update={"in_hlo": False})})
    assert metrics.clock_peak_tflops(not_fp8, machine) == pytest.approx(bf16)
    h20 = machine.model_copy(update={"gpu": machine.gpu.model_copy(update={"name": "NVIDIA H20"})})
    assert metrics.clock_peak_tflops(not_fp8, h20) is None  # sm90 too, but no cited rate (MMA_PER_CLOCK_PER_SM)
