"""Pallas Triton decode attention (flash-decoding): jax.experimental.pallas.ops.gpu.decode_attention.

What the kernel's source says (jax 0.10.2 and 0.11.2 alike), and the rules that follow from it:
- one query token per sequence (T = 1) against the whole KV cache: no causal mask (under the reference's top-left
  mask a single query row would see key 0 only), no backward;
- `gqa(q [B, N, H], k [B, S, K, H], ...)` swaps k and v to head-major (B, K, S, H) inside every call, a copy of the
  whole KV cache; the cache a decode server keeps for this kernel is head-major already, so here the cache is
  transposed once outside the timed call (Staged.prepare) and the timed call runs gqa's own body on it: each KV head
  with its G = N / K query heads (padded to block_h = 16 rows), the KV sequence split k_splits ways, the splits'
  partial softmaxes combined after;
- softmax scale 1/sqrt(H) (its default, passed explicitly); S must divide by k_splits into splits of at least 16
  keys, each a multiple of block_k; Triton's blocks are powers of two, so H is one;
- a per-sequence `kv_seq_len` bounds each split's loop and masks past it: a ragged serving batch (runner.paging)
  passes its requests' lengths, its one new token seeing its whole request (causal or not, aligned to the end), and
  its head-major cache is padded (untimed) to a multiple of k_splits x block_k keys, rows no split reads. A paged
  cache is pallas_paged's.
jax 0.11 deprecated this module in favour of tokamax: legacy (pallas_triton.LEGACY).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

from types import MappingProxyType

from runner import paging
from runner.shape import Params
from runner.registry import Requires, Skip, Staged, Tuned, none_fits, variant
from runner.variants.pallas_triton import LEGACY, MIN_BLOCK, TRITON_CALLS, removed, whole_heads

BLOCK_H = MIN_BLOCK  # query rows per program: the fewest Triton's dot takes
MIN_SPLIT = 16  # the kernel asserts S / k_splits >= 16
# block_k 256 at H=128 would need 2 x 128 KiB of K/V stages in shared memory: past the 227 KiB of a Hopper SM
BLOCK_K = (64, 128)
SPLITS = (4, 16, 64)
CONFIGS = [dict(block_k=block_k, k_splits=splits, num_stages=2) for block_k in BLOCK_K for splits in SPLITS]


def cache_keys(p: Params, config: dict[str, Any]) -> int:
    """Keys of the head-major cache the kernel reads: S, or a serving cell's longest request padded to a multiple of
    k_splits x block_k (its requests' lengths bound every split)."""
    if not paging.serving(p):
        return p.kv_seq_len
    step = config["k_splits"] * config["block_k"]
    return -(-paging.cache_len(p) // step) * step


def config_problem(p: Params, config: dict[str, Any]) -> str | None:
    """Why this configuration cannot run this shape (the kernel's own asserts), or None."""
    S, splits = cache_keys(p, config), config["k_splits"]
    if S % splits:
        return f"S={S} is not a multiple of k_splits={splits}"
    split = S // splits
    if split < MIN_SPLIT:
        return f"S={S} / k_splits={splits} = {split} keys per split; the kernel needs {MIN_SPLIT}"
    if split % min(config["block_k"], split):
        return f"S / k_splits = {split} is not a multiple of block_k={config['block_k']}"
    return None


def check(p: Params) -> str | None:
    """Why pallas_decode declines these params, or None."""
    if p.seq_len != 1:
        return f"pallas_decode is decode attention: one query token per sequence (T = 1), not T={p.seq_len}"
    if p.causal and not paging.serving(p):
        return "pallas_decode attends to the whole KV cache; a causal T = 1 cell (top-left mask) sees key 0 only"
    if problem := whole_heads("pallas_decode", p.head_dim):
        return problem
    return none_fits("pallas_decode", [config_problem(p, c) for c in CONFIGS])


def kernel_module():
    """jax.experimental.pallas.ops.gpu.decode_attention (deprecated in jax 0.11: LEGACY)."""
    from jax.experimental.pallas.ops.gpu import decode_attention

    return decode_attention


def head_major(q, k, v):
    """The KV cache as the kernel reads it: k, v [B, S, K, H] -> [B, K, S, H] (untimed)."""
    return q, k.swapaxes(1, 2), v.swapaxes(1, 2)


def make_prepare(p: Params, config: dict[str, Any]) -> Callable:
    """head_major, a serving cell's cache padded to cache_keys (untimed)."""
    if not paging.serving(p):
        return head_major
    import jax.numpy as jnp

    def prepare(q, k, v):
        q, k, v = head_major(q, k, v)
        pad = ((0, 0), (0, 0), (0, cache_keys(p, config) - k.shape[2]), (0, 0))
        return q, jnp.pad(k, pad), jnp.pad(v, pad)

    return prepare


def make_attend(p: Params, config: dict[str, Any], unbatched: Callable) -> Callable:
    """attend(q, k, v) on a head-major cache through `unbatched` (decode_attn_unbatched, or a stand-in) with one
    configuration; Skip if it does not fit the shape."""
    if problem := config_problem(p, config):
        raise Skip(problem)
    import jax
    import jax.numpy as jnp

    one_head = functools.partial(
        unbatched, sm_scale=1 / math.sqrt(p.head_dim), block_h=BLOCK_H, block_k=config["block_k"],
        k_splits=config["k_splits"], num_warps=None, num_stages=config["num_stages"], grid=None, debug=False,
        return_residuals=False, normalize_output=True)
    per_batch_and_head = jax.vmap(jax.vmap(one_head))
    lengths = paging.lengths(p)  # a serving cell's, else None: every sequence S keys

    def attend(q, k, v):
        # q: [B, 1, N, H] -> [B, K, G, H]; k, v: [B, K, S, H]
        batch, _, heads, head_dim = q.shape
        grouped = q.reshape(batch, p.kv_heads, heads // p.kv_heads, head_dim)
        per_sequence = None if lengths is None else jnp.broadcast_to(
            jnp.asarray(lengths, jnp.int32)[:, None], (batch, p.kv_heads))
        out = per_batch_and_head(grouped, k, v, None, per_sequence)  # no start index
        return out.reshape(q.shape)

    return attend


def tuned(p: Params, unbatched: Callable) -> Tuned:
    """The configuration search, each configuration a Staged call on the head-major cache."""
    return Tuned(CONFIGS, lambda config: Staged(make_prepare(p, config), make_attend(p, config, unbatched),
                                                lambda out: out))


RULES = (
    "T = 1 (one query token per sequence), not causal (top-left) outside a serving cell",
    "head_dim a power of two",
    "KV cache head-major (B, K, S, H): transposed once outside the timed call, as a decode server keeps it",
)


PAGED = MappingProxyType({"page_size": "pallas_decode reads one dense cache (pallas_paged is its paged sibling)"})


@variant("pallas_decode", requires=Requires(gpu=True, min_compute_capability=8.0, dtypes=("bfloat16", "float16"),
                                            passes=("fwd",), options=("kv_lengths",), why_not=PAGED),
         backend="pallas_triton", proves=TRITON_CALLS, check=check, rules=RULES,
         probe=functools.partial(removed, "decode_attention"), legacy=LEGACY)
def pallas_decode(p: Params):
    """Pallas Triton decode attention (flash-decoding over k_splits); block_k and k_splits searched per shape."""
    return tuned(p, functools.partial(kernel_module().decode_attn_unbatched, interpret=False))
