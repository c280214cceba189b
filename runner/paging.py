"""Serving cells: each request's KV length (a ragged batch) and the paged KV cache (its pool and table).

A cell is a serving cell when it sets `kv_lengths` or `page_size`. Its batch is B requests, each with `len_b` keys
in the cache (the T new tokens' own keys included, as they are appended before attention), and its causal mask is
aligned to each request's end: new token i of T sees the request's first len_b - T + i + 1 keys (prefill's top-left
mask would let token i see keys 0..i: the two agree only when T = len_b).

Lengths (plain numbers, so metrics count bytes without JAX): with the mean m = S (kv_seq_len), the spread s
(kv_spread) and the quantiles u_b = (b + 1/2) / B of request b of B,

    equal       len_b = m
    uniform     len_b = m (1 - s + 2 s u_b)                    evenly from m(1 - s) to m(1 + s)
    long_tail   len_b = m (1 - s + s g_b / mean(g)),  g_b = -ln(1 - u_b)   (exponential: many short, a few long;
                                                               the longest about m (1 + s (ln 2B - 1)))
    bimodal     len_b = m (1 - s) for three requests of four, m (1 + 3 s) for every fourth (b % 4 == 3)

each rounded to whole tokens and at least T (each new token sees at least itself). The mean is m up to rounding
(for bimodal, when B is a multiple of 4). A dense serving cell's cache is (B, max len_b, K, H), its rows past len_b
random like the rest (a kernel that reads them is caught by the check).

Pages: request b holds ceil(len_b / P) pages of P tokens, numbered in request order (request 0's first); the pool
holds exactly the batch's pages (the sum, not B x the longest). `contiguous` keeps logical page i at pool slot i;
`shuffled` puts it at slot (i * stride) mod pages, the stride the integer nearest pages / golden ratio that is
coprime to pages: consecutive pages of a request land far apart and spread evenly over the pool, as a long-running
server's allocator leaves them after many requests came and went. The table is (B, max pages) int32; a request's
entries past its own pages are 0 (a real slot: a kernel must not read them, and the length masks them).

A paged cell is given the pool itself, drawn as it is (runner.inputs): no dense K and V are ever made beside it (at
B128 x 128k each is 68.7 GB). The float32 reference reads the pool as a kernel should, a chunk of requests at a time:
their pages gathered through the table, the keys past each request's length masked (a partly filled last page's tail
is random, like the slots past a request's pages that the table's padding names).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from runner import counted

GOLDEN = (1 + 5 ** 0.5) / 2


def serving(p) -> bool:
    """Whether the cell is a serving cell: per-request KV lengths, causal aligned to each request's end."""
    return p.kv_lengths is not None or p.page_size is not None


def end_aligned_mask(p) -> bool:
    """Whether the cell is a serving cell whose mask no top-left one says (jax's is_causal and local_window_size,
    cuDNN's CAUSAL, tokamax's): a window (each request's last W keys), or causal with T > 1 new tokens. At T = 1 a
    causal new token sees its whole request, which the requests' KV lengths alone say."""
    return serving(p) and (p.window is not None or (p.causal and p.seq_len > 1))


# What a serving cell cannot be combined with, and why
NOT_SERVING = {"fill": (lambda p: p.fill < 1, "a padded batch is a second rule of ragged lengths"),
               "bias": (lambda p: p.bias != "none", "ALiBi's positions are not aligned to each request's end"),
               "devices": (lambda p: p.devices > 1, "a KV cache is not split across devices here")}


def serving_problem(p) -> tuple[str, str] | None:
    """The field that keeps these params from being a serving cell and why (every variant declines the cell), or
    None."""
    if not serving(p):
        return None
    given = "kv_lengths" if p.kv_lengths is not None else "page_size"
    for name, (clashes, why) in NOT_SERVING.items():
        if clashes(p):
            return name, f"a serving cell ({given} set) takes no {name} ({why})"
    if p.seq_len > p.kv_seq_len:  # each request's keys would be clipped up to T: its mean no longer S
        return "seq_len", f"a serving cell's {p.seq_len} new tokens (seq_len) are the last of each request's keys: " \
                          f"seq_len must not exceed kv_seq_len ({p.kv_seq_len})"
    if p.page_size is not None and p.pass_ == "fwd_bwd":
        return "page_size", "a paged cell (page_size set) is forward only: its K and V are a page pool, which no " \
                            "backward here differentiates"
    return None


def _quantiles(batch: int) -> list[float]:
    return [(b + 0.5) / batch for b in range(batch)]


def _shape(kind: str, batch: int, spread: float) -> list[float]:
    """Each request's length as a multiple of the mean (before rounding)."""
    if kind == "uniform":
        return [1 - spread + 2 * spread * u for u in _quantiles(batch)]
    if kind == "long_tail":
        tail = [-math.log(1 - u) for u in _quantiles(batch)]
        mean = sum(tail) / batch
        return [1 - spread + spread * g / mean for g in tail]
    if kind == "bimodal":
        return [1 + 3 * spread if b % 4 == 3 else 1 - spread for b in range(batch)]
    return [1.0] * batch  # equal


def lengths(p) -> list[int] | None:
    """Each request's KV length (the rule above), or None when the cell is not a serving cell."""
    if not serving(p):
        return None
    shape = _shape(p.kv_lengths or "equal", p.batch, p.kv_spread)
    return [max(p.seq_len, round(f * p.kv_seq_len)) for f in shape]


def cache_len(p) -> int:
    """Keys per sequence of the dense K and V a cell is given: the longest request's in a serving cell, else S."""
    found = lengths(p)
    return max(found) if found else p.kv_seq_len


def pages_of(p) -> list[int]:
    """Pages each request holds (the last one partly filled when P does not divide its length)."""
    return [-(-length // p.page_size) for length in lengths(p)]


def gathered_len(p) -> int:
    """Keys per sequence a kernel reads: a paged cell's whole pages of its longest request (the last page's empty rows
    too), else the dense cache's (cache_len)."""
    return max(pages_of(p)) * p.page_size if p.page_size else cache_len(p)


def pool_note(p) -> str:
    """What a paged cell's record notes where its pool is mostly empty pages (a page larger than most requests: the
    keys fill under half of the pool's rows, which a kernel that reads whole pages reads too), else ""."""
    if p.page_size is None:
        return ""
    keys, rows = sum(lengths(p)), sum(pages_of(p)) * p.page_size
    if 2 * keys >= rows:
        return ""
    return (f"page pool mostly empty: {counted(rows // p.page_size, 'page')} of {p.page_size:,} tokens hold {keys:,} "
            f"keys ({keys / rows:.1%} of its rows); a kernel that reads whole pages reads the empty rows too")


def stride(pages: int) -> int:
    """The shuffle's stride: the integer nearest pages / golden ratio that is coprime to pages (1 for 1 or 2)."""
    step = max(1, round(pages / GOLDEN))
    while math.gcd(step, pages) != 1:
        step += 1
    return step


def slots(p) -> list[int]:
    """The pool slot of each logical page (request 0's pages first): i, or (i * stride) mod pages shuffled."""
    total = sum(pages_of(p))
    if p.page_order == "contiguous":
        return list(range(total))
    step = stride(total)
    return [(i * step) % total for i in range(total)]


def table(p) -> list[list[int]]:
    """(B, max pages) pool slots of each request's pages, 0 past its own."""
    counts, where = pages_of(p), slots(p)
    width, rows, start = max(counts), [], 0
    for count in counts:
        rows.append(where[start:start + count] + [0] * (width - count))
        start += count
    return rows


@dataclass(frozen=True)
class Paged:
    """A paged KV cache: what a paged kernel reads instead of the dense K and V."""

    k_pages: Any  # (num_pages, page_size, K, H)
    v_pages: Any  # (num_pages, page_size, K, Hv)
    table: Any  # (B, max_pages) int32: pool slot of request b's page j
    lengths: Any  # (B,) int32: keys of each request


def pool_shapes(p) -> list[tuple[int, ...]]:
    """The K and V pools of a paged cell: (pages of the batch, P, K, H) and (..., Hv)."""
    held = (sum(pages_of(p)), p.page_size, p.kv_heads)
    return [held + (p.head_dim,), held + (p.v_head_dim,)]


def cache(p, k_pages, v_pages) -> Paged:
    """The cell's paged cache over the pools a paged cell is given: its table and its requests' lengths beside them."""
    import jax.numpy as jnp

    return Paged(k_pages, v_pages, jnp.asarray(table(p), jnp.int32), jnp.asarray(lengths(p), jnp.int32))


def gather(paged: Paged):
    """The dense (B, max_pages * P, K, H) K and V that the table points at: what a paged kernel reads."""
    return gathered(paged.k_pages, paged.table), gathered(paged.v_pages, paged.table)


def gathered(pool, rows):
    """The (R, W * P, K, H) keys (or values) that R rows of the table (R, W) point at in the pool."""
    return pool[rows].reshape(rows.shape[0], rows.shape[1] * pool.shape[1], *pool.shape[2:])
