"""Attention written out in jnp: the lab's naive variant and the float32 reference share this math.

Every shape axis that changes the result is applied here once, in this order (FlashAttention's): scores scaled by
1/sqrt(H), soft-capped, ALiBi added, then masked (causal, window, padded keys, keys of another packed document); a
query row with no key left, or a padded query row, outputs zeros (as jax.nn.dot_product_attention writes padded
rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from runner import masks


@dataclass(frozen=True)
class Logits:
    """What happens to the scaled scores before the softmax; static (hashable), so it can key a compiled program."""

    causal: bool = False
    window: int | None = None
    softcap: float | None = None
    slopes: tuple[float, ...] | None = None  # ALiBi, one per query head
    new_tokens: int | None = None  # a serving cell's T: its mask is aligned to each request's end (runner.paging)

    @classmethod
    def of(cls, p) -> "Logits":
        """The cell's: its mask, window, cap, (for bias alibi) its shard's slopes, and a serving cell's T."""
        from runner.paging import serving

        slopes = tuple(masks.alibi_slopes(p.heads * p.tp)[: p.heads]) if p.bias == "alibi" else None
        return cls(p.causal, p.window, p.softcap, slopes, p.seq_len if serving(p) else None)


def scores_mask(seq_len: int, kv_seq_len: int, q_offset=0, window: int | None = None,
                causal: bool = True) -> jax.Array:
    """Keys visible to query rows q_offset.. : causal keeps j <= i (top-left aligned); a window of W keeps
    i - W < j (causal) or |i - j| < W (not causal). A q_offset of shape [B, 1, 1] (each request's own) gives
    [B, T, S]."""
    rows = jnp.arange(seq_len)[:, None] + q_offset
    cols = jnp.arange(kv_seq_len)[None, :]
    keep = cols <= rows if causal else jnp.ones((seq_len, kv_seq_len), bool)
    if window is not None:
        keep &= cols > rows - window
        if not causal:
            keep &= cols < rows + window
    return keep


def visible(logits: Logits, seq_len: int, kv_seq_len: int, q_offset=0, kv_lengths=None,
            segments: tuple | None = None) -> jax.Array | None:
    """[B or 1, 1, T, S] keys each query row sees, or None when it sees all of them; `segments` (the query rows' and
    the keys' document ids, [B, T] and [B, S]) keeps only the keys of a row's own document. A serving cell's rows
    are aligned to each request's end: row i of request b stands at position len_b - T + i."""
    if logits.new_tokens is not None:
        q_offset = q_offset + (kv_lengths - logits.new_tokens)[:, None, None]
    elif not logits.causal and logits.window is None and kv_lengths is None and segments is None:
        return None
    keep = scores_mask(seq_len, kv_seq_len, q_offset, logits.window, logits.causal)
    keep = keep[:, None] if keep.ndim == 3 else keep[None, None]
    if kv_lengths is not None:
        keep = keep & (jnp.arange(kv_seq_len)[None, None, None, :] < kv_lengths[:, None, None, None])
    if segments is not None:
        q_segments, kv_segments = segments
        keep = keep & (q_segments[:, None, :, None] == kv_segments[:, None, None, :])
    return keep


def alibi(slopes: tuple[float, ...], seq_len: int, kv_seq_len: int, q_offset=0) -> jax.Array:
    """[N, T, S] ALiBi bias: -slope * |i - j| (for a causal row, BLOOM's slope * j up to a constant per row)."""
    rows = jnp.arange(seq_len)[:, None] + q_offset
    distance = jnp.abs(rows - jnp.arange(kv_seq_len)[None, :]).astype(jnp.float32)
    return -jnp.asarray(slopes, jnp.float32)[:, None, None] * distance[None]


def capped(scores, logits: Logits, q_offset=0):
    """Scores [..., N, T, S] soft-capped and ALiBi-biased as the cell says."""
    if logits.softcap is not None:
        scores = logits.softcap * jnp.tanh(scores / logits.softcap)
    if logits.slopes is not None:
        bias = alibi(logits.slopes, scores.shape[-2], scores.shape[-1], q_offset).astype(scores.dtype)
        scores = scores + bias.reshape(scores.shape[1:-2] + bias.shape[-2:])  # [N] -> [N] or [K, G]
    return scores


def softmax(scores, keep, empty_rows: bool = True):
    """Softmax over keys where `keep`; a row with none kept is all zeros (not NaN). Without `empty_rows` (neither
    padding nor a window: a causal row keeps key 0) the plain masked softmax, which compiles and runs leaner."""
    if keep is None:
        return jax.nn.softmax(scores, axis=-1)
    if not empty_rows:
        return jax.nn.softmax(jnp.where(keep, scores, -jnp.inf), axis=-1)
    scores = jnp.where(keep, scores, -jnp.inf)
    top = jnp.max(scores, axis=-1, keepdims=True)
    exp = jnp.where(keep, jnp.exp(scores - jnp.where(jnp.isfinite(top), top, 0.0)), 0.0)
    total = jnp.sum(exp, axis=-1, keepdims=True)
    return exp / jnp.where(total > 0, total, 1.0)


def zero_padded_rows(out, q_lengths, q_offset=0):
    """out [B, T, ...] with rows past each sequence's query length set to zero."""
    if q_lengths is None:
        return out
    rows = jnp.arange(out.shape[1]) + q_offset
    keep = rows[None, :] < q_lengths[:, None]
    return out * keep.reshape(keep.shape + (1,) * (out.ndim - 2)).astype(out.dtype)


def real_tokens(outputs: tuple, q_lengths, kv_lengths) -> tuple:
    """(out[, dq, dk, dv]) with padded query rows (out, dq) and padded keys (dk, dv) set to zero."""
    out = [zero_padded_rows(x, q_lengths) for x in outputs[:2]]
    return tuple(out + [zero_padded_rows(x, kv_lengths) for x in outputs[2:]])


def naive_attention(q, k, v, causal: bool, logits: Logits | None = None, q_lengths=None, kv_lengths=None,
                    segments=None):
    """The lab's from-scratch attention: Q·Kᵀ/√H, softmax, ·V, with the (B, N, T, S) weights in memory; `segments`
    ([B, T] document ids of a packed row) masks attention across documents."""
    # q: [B, T, N, H]; k: [B, S, K, H]; v: [B, S, K, Hv]; KV heads broadcast to N for GQA / MQA
    logits = logits or Logits(causal)
    groups = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
    scores = capped(jnp.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(q.shape[-1]), logits)
    packed = None if segments is None else (segments, segments)
    weights = softmax(scores, visible(logits, q.shape[1], k.shape[1], kv_lengths=kv_lengths, segments=packed),
                      empty_rows=kv_lengths is not None or logits.window is not None)
    return zero_padded_rows(jnp.einsum("bnts,bsnh->btnh", weights, v), q_lengths)


def reference_attention(q, k, v, causal: bool, q_offset: int = 0, precision=jax.lax.Precision.HIGHEST,
                        logits: Logits | None = None, q_lengths=None, kv_lengths=None, q_segments=None,
                        kv_segments=None) -> jax.Array:
    """float32, HIGHEST precision (or another matmul precision, for probes), grouped heads without copies; rows
    start at query q_offset. `logits` (else plain `causal`), the sequence lengths and the packed rows' document ids
    (of these query rows, [B, T], and of the keys, [B, S]) apply every other axis."""
    # q: [B, T, N, H] -> [B, T, K, G, H] so each KV head serves its G query heads
    logits = logits or Logits(causal)
    batch, seq_len, heads, head_dim = q.shape
    kv_heads = k.shape[2]
    q = q.astype(jnp.float32).reshape(batch, seq_len, kv_heads, heads // kv_heads, head_dim)
    k, v = k.astype(jnp.float32), v.astype(jnp.float32)
    scores = jnp.einsum("btkgh,bskh->bkgts", q, k, precision=precision) / math.sqrt(head_dim)
    scores = capped(scores, logits, q_offset)
    segments = None if q_segments is None else (q_segments, kv_segments)
    keep = visible(logits, seq_len, k.shape[1], q_offset, kv_lengths, segments)
    empty_rows = kv_lengths is not None or logits.window is not None
    weights = softmax(scores, None if keep is None else keep[:, :, None], empty_rows)
    out = jnp.einsum("bkgts,bskh->btkgh", weights, v, precision=precision)
    return zero_padded_rows(out.reshape(batch, seq_len, heads, v.shape[-1]), q_lengths, q_offset)
