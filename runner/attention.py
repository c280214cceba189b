"""Attention written out in jnp: the lab's naive variant and the float32 reference share this math."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp


def scores_mask(seq_len: int, kv_seq_len: int, q_offset: int = 0) -> jax.Array:
    """Causal mask for query rows q_offset.. : key j is visible to query i when j <= i (top-left aligned)."""
    rows = jnp.arange(seq_len)[:, None] + q_offset
    return jnp.arange(kv_seq_len)[None, :] <= rows


def naive_attention(q, k, v, causal: bool) -> jax.Array:
    """The lab's from-scratch attention: Q·Kᵀ/√H, softmax, ·V, with the (B, N, T, S) weights in memory."""
    # q: [B, T, N, H]; k, v: [B, S, K, H]; KV heads broadcast to N for GQA / MQA
    groups = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
    scores = jnp.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(q.shape[-1])
    if causal:
        scores = jnp.where(scores_mask(q.shape[1], k.shape[1]), scores, -jnp.inf)
    weights = jax.nn.softmax(scores, axis=-1)  # [B, N, T, S]
    return jnp.einsum("bnts,bsnh->btnh", weights, v)


def reference_attention(q, k, v, causal: bool, q_offset: int = 0, precision=jax.lax.Precision.HIGHEST) -> jax.Array:
    """float32, HIGHEST precision (or another matmul precision, for probes), grouped heads without copies; rows
    start at query q_offset."""
    # q: [B, T, N, H] -> [B, T, K, G, H] so each KV head serves its G query heads
    batch, seq_len, heads, head_dim = q.shape
    kv_heads = k.shape[2]
    q = q.astype(jnp.float32).reshape(batch, seq_len, kv_heads, heads // kv_heads, head_dim)
    k, v = k.astype(jnp.float32), v.astype(jnp.float32)
    scores = jnp.einsum("btkgh,bskh->bkgts", q, k, precision=precision) / math.sqrt(head_dim)
    if causal:
        scores = jnp.where(scores_mask(seq_len, k.shape[1], q_offset), scores, -jnp.inf)
    weights = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bkgts,bskh->btkgh", weights, v, precision=precision)
    return out.reshape(batch, seq_len, heads, head_dim)
