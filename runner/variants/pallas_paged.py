"""Pallas Triton paged decode attention: jax.experimental.pallas.ops.gpu.paged_attention.

What the kernel's source says (jax 0.10.2 and jax main of August 2026 alike), and the rules that follow from it:
- `paged_attention(q [B, N, H], k_pages [K, pages, P, H], v_pages (the same shape), block_tables [B, W] int32,
  lengths [B] int32, ...)`: one query token per request (T = 1), so causal or not it sees the request's len keys
  (the serving cell's causal mask is aligned to the request's end); GQA natively (each KV head with its N / K query
  heads, padded to block_h = 16 rows); V as wide as K (no MLA); no backward;
- it applies no softmax scale (logits are q . k), and a logit soft cap after it (its attn_logits_soft_cap);
- the table is split k_splits ways (W must divide by it), each split walked pages_per_compute_block pages at a time
  (the split's pages must divide by that), stopping at the request's last page; the splits' partial softmaxes are
  combined after. Triton's blocks are powers of two: H, and the pages of a block times P, with at least 16 keys.
Staged, untimed, as a decode server keeps them: the pool head-major (K, pages, P, H), Q times 1/sqrt(H) (a server
folds the scale into its Q projection), and the table padded with page 0 to a multiple of k_splits x
pages_per_compute_block (entries past a request's pages are never attended; the block that holds its last page
reads up to pages_per_compute_block - 1 of them, masked by its length).
jax 0.11 deprecated this module in favour of tokamax, which has no GPU paged attention (0.0.17): legacy.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

from runner.shape import Params
from runner import metrics
from runner.registry import KvCopy, Requires, Staged, Tuned, variant
from runner.variants.pallas_decode import BLOCK_K, SPLITS  # its search: keys per block, and k_splits
from runner.variants.pallas_triton import MIN_BLOCK, TRITON_CALLS, power_of_two, removed, whole_heads

LEGACY = ("jax 0.11 deprecated jax.experimental.pallas.ops.gpu (July 2026); its replacement, tokamax, has no GPU paged "
          "attention (0.0.17: TPU only)")
BLOCK_H = MIN_BLOCK  # query rows per program: the fewest Triton's dot takes


def configs(p: Params) -> list[dict[str, int]]:
    """Pages per compute block (64 or 128 keys' worth, at least one page) by k_splits; the kernel's 8 warps, and two
    pipeline stages up to 128 keys a block (one past it: pallas_decode's shared-memory bound)."""
    per_block = sorted({max(1, keys // p.page_size) for keys in BLOCK_K})
    return [dict(pages_per_compute_block=pages, k_splits=splits, num_warps=8,
                 num_stages=2 if pages * p.page_size <= max(BLOCK_K) else 1)
            for pages in per_block for splits in SPLITS]


def check(p: Params) -> str | None:
    """Why pallas_paged declines these params, or None."""
    if p.page_size is None:
        return "pallas_paged reads a paged KV cache: the cell sets no page_size"
    if p.seq_len != 1:
        return f"pallas_paged takes one query token per request (q is [B, N, H]), not T={p.seq_len}"
    if problem := whole_heads("pallas_paged", p.head_dim):
        return problem
    if not power_of_two(p.page_size):
        return f"pallas_paged loads whole pages as Triton blocks: page_size a power of two, not {p.page_size}"
    return None


def kernel_module():
    """jax.experimental.pallas.ops.gpu.paged_attention (deprecated in jax 0.11: LEGACY)."""
    from jax.experimental.pallas.ops.gpu import paged_attention

    return paged_attention


def padded_width(width: int, config: dict[str, Any]) -> int:
    """The table's width rounded up to a multiple of k_splits x pages_per_compute_block (the kernel's asserts)."""
    step = config["k_splits"] * config["pages_per_compute_block"]
    return -(-width // step) * step


def make_prepare(p: Params, config: dict[str, Any]) -> Callable:
    """prepare(q, k_pages, v_pages) -> (q / sqrt(H) [B, N, H], k_pages, v_pages [K, pages, P, H], table [B, W'],
    lengths)."""
    import jax.numpy as jnp

    from runner import paging

    def prepare(q, k_pages, v_pages):
        cache = paging.cache(p, k_pages, v_pages)
        width = cache.table.shape[1]
        table = jnp.pad(cache.table, ((0, 0), (0, padded_width(width, config) - width)))
        scaled = (q[:, 0].astype(jnp.float32) / math.sqrt(p.head_dim)).astype(q.dtype)
        return (scaled, cache.k_pages.transpose(2, 0, 1, 3), cache.v_pages.transpose(2, 0, 1, 3), table,
                cache.lengths)

    return prepare


def make_attend(p: Params, config: dict[str, Any], kernel: Callable) -> Callable:
    """attend(q, k_pages, v_pages, table, lengths) -> [B, 1, N, H] through `kernel` (paged_attention, or a
    stand-in) with one configuration."""
    call = functools.partial(kernel, block_h=BLOCK_H, attn_logits_soft_cap=p.softcap, **config)

    def attend(q, k_pages, v_pages, table, lengths):
        return call(q, k_pages, v_pages, table, lengths)[:, None]

    return attend


def staged(p: Params, config: dict[str, Any], kernel: Callable) -> Staged:
    """One configuration as a Staged call: pool, table and scaled Q made untimed, the kernel timed."""
    return Staged(make_prepare(p, config), make_attend(p, config, kernel), lambda out: out)


def tuned(p: Params, kernel: Callable) -> Tuned:
    """The configuration search over pages per compute block and k_splits."""
    return Tuned(configs(p), lambda config: staged(p, config, kernel))


RULES = (
    "a paged cell (page_size set), T = 1",
    "head_dim and page_size powers of two",
    "page pool head-major (K, pages, P, H), Q pre-scaled by 1/sqrt(H), table padded to the search's multiple: "
    "all untimed; skipped where the device cannot hold that copy of the pool beside the cell's",
)


@variant("pallas_paged",
         requires=Requires(gpu=True, min_compute_capability=8.0, dtypes=("bfloat16", "float16"), passes=("fwd",),
                           options=("kv_lengths", "page_size", "softcap")),
         backend="pallas_triton", proves=TRITON_CALLS, check=check, rules=RULES,
         probe=functools.partial(removed, "paged_attention", LEGACY), legacy=LEGACY,
         kv_copy=KvCopy("pallas_paged's head-major copy of the pool", metrics.kv_cache_bytes))
def pallas_paged(p: Params):
    """Pallas Triton paged decode attention (split over the page table); pages per block and k_splits searched."""
    return tuned(p, functools.partial(kernel_module().paged_attention, interpret=False))
