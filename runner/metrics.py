"""Exact work and traffic of one attention call."""

from __future__ import annotations

from runner.record import Params

BWD_FLOP_FACTOR = 3.5  # fwd + bwd = 3.5 x fwd, the convention of FlashAttention's benchmarks
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}


def unmasked_elements(seq_len: int, kv_seq_len: int, causal: bool) -> int:
    """Score elements that survive the mask; causal keeps key j <= query i (top-left aligned)."""
    if not causal:
        return seq_len * kv_seq_len
    full_rows = min(seq_len, kv_seq_len)  # rows 0..full_rows-1 keep i+1 keys
    return full_rows * (full_rows + 1) // 2 + (seq_len - full_rows) * kv_seq_len


def flops(p: Params) -> int:
    """4*B*N*H*(unmasked score elements): two matmuls of 2 FLOPs per multiply-add; x3.5 with backward."""
    forward = 4 * p.batch * p.heads * p.head_dim * unmasked_elements(p.seq_len, p.kv_seq_len, p.causal)
    return int(forward * BWD_FLOP_FACTOR) if p.pass_ == "fwd_bwd" else forward


def tensor_bytes(p: Params) -> tuple[int, int]:
    """Bytes of one query-shaped tensor (Q, O) and one key-shaped tensor (K, V)."""
    size = ITEMSIZE[p.dtype]
    return p.batch * p.seq_len * p.heads * p.head_dim * size, p.batch * p.kv_seq_len * p.kv_heads * p.head_dim * size


def bytes_min(p: Params) -> int:
    """Least traffic: fwd reads Q, K, V and writes O; bwd also reads Q, K, V, O, dO and writes dQ, dK, dV."""
    q, kv = tensor_bytes(p)
    forward = 2 * q + 2 * kv
    if p.pass_ == "fwd_bwd":
        return forward + (3 * q + 2 * kv) + (q + 2 * kv)
    return forward


def kv_cache_bytes(p: Params) -> int:
    """What a decoder keeps per layer: K and V."""
    return 2 * tensor_bytes(p)[1]

