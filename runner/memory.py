"""The device memory a cell needs, in plain numbers (no JAX): its inputs and float32 reference (needed_bytes), the
(B, N, T, S) scores of a variant that materialises them (scores_bytes), and the one rule that says a device cannot
hold a cell (too_large), which the run's plan asks from the worker's device facts before a worker is asked. The
sizes are runner.inputs' own: it draws each input by these rules (draw_size, drawn_by_rows, rows_per_draw) and makes
the reference a chunk at a time (chunk_shape)."""

from __future__ import annotations

import math

from runner import metrics, paging
from runner.cells import unsplit
from runner.registry import KvCopy, Variant
from runner.shape import Params

REFERENCE_CHUNK_BYTES = 2 << 30  # one reference chunk: its float32 scores and its requests' K and V (chunk_shape)
ROW_DRAW_ELEMENTS = 1 << 32  # a tensor whose flat draw is larger (17 GB of float32) is drawn by rows
ROW_BLOCK_ELEMENTS = 1 << 27  # rows drawn together (512 MiB of float32): a B128 x 128k cache's one request, 8192 pages


def too_large(p: Params, memory_bytes: int | None, v: Variant) -> str | None:
    """Why a device of `memory_bytes` cannot hold the cell, or None: its inputs and float32 reference (needed_bytes),
    and beside them the (B, N, T, S) scores of a variant whose program materialises them (scores_bytes) and its copies
    of the cell's K and V (Variant.kv_copy). A split cell's reference is made whole, on one device
    (cells.unsplit), and that device holds its share of the scores beside it (scores_bytes); a variant with a copy
    runs on one device."""
    if not memory_bytes:
        return None
    needed, scores, has = needed_bytes(unsplit(p)), scores_bytes(p, v), f"the device has {size_text(memory_bytes)}"
    if needed > memory_bytes:
        return f"inputs and float32 reference need {size_text(needed)}; {has}"
    if needed + scores > memory_bytes:
        return f"{v.name}'s (B, N, T, S) scores need {size_text(scores)} beside the inputs and float32 reference's " \
               f"{size_text(needed)}; {has}"
    return _copy_too_large(p, v.kv_copy, needed, scores, memory_bytes) if v.kv_copy else None


def scores_bytes(p: Params, v: Variant) -> int:
    """Device memory v's program keeps for the cell's (B, N, T, S) scores (its Requires.score_bytes per score, by
    pass and dtype: docs/benchmarks.md has the H200's records they come from) of every score (scores), one device's
    share of them where the cell is split across `devices` (xla_cp: each holds its queries' rows); 0 for a variant
    that never holds them all."""
    return scores(p) * v.requires.score_bytes.get(p.pass_, {}).get(p.dtype, 0) // p.devices


def scores(p: Params) -> int:
    """The cell's (B, N, T, S) scores over every key its call reads: a serving cell's longest request, a paged
    cell's gathered whole pages."""
    return p.batch * p.heads * p.seq_len * paging.gathered_len(p)


def _copy_too_large(p: Params, copy: KvCopy, needed: int, scores: int, memory_bytes: int) -> str | None:
    """Why a device of `memory_bytes` cannot hold a variant's copies of the cell's K and V beside the cell's inputs
    and reference (`needed`, too_large's needed_bytes: what the cell holds while it runs, and more) and the variant's
    `scores` (its call holds the copy and the scores it makes of it together), or None."""
    copy_bytes = copy.bytes(p)
    held = "inputs, float32 reference and scores" if scores else "inputs and float32 reference"
    if (needed := needed + scores + copy_bytes) > memory_bytes:
        return f"{copy.what} ({size_text(copy_bytes)}) beside the cell's {held} needs {size_text(needed)}; the " \
               f"device has {size_text(memory_bytes)}"
    return None


def needed_bytes(p: Params) -> int:
    """Device memory for a shape's inputs and float32 reference: the inputs (a paged cell's pools in place of a dense
    K and V), then the larger of the float32 results with one reference chunk (chunk_bytes) and an input's draw
    (draw_bytes)."""
    q, kv = metrics.tensor_bytes(p)
    f32 = 4 // metrics.ITEMSIZE[p.dtype]
    cache = metrics.kv_cache_bytes(p)  # K and V, or the pools
    inputs = 2 * q + cache if p.pass_ == "fwd_bwd" else q + cache
    expected = (2 * q + 2 * kv) * f32 if p.pass_ == "fwd_bwd" else q * f32
    draw = max(draw_bytes(shape, p.dtype) for shape in input_shapes(p))  # making inputs
    return inputs + max(expected + chunk_bytes(p), draw)


def input_shapes(p: Params) -> list[tuple[int, ...]]:
    """q, k, v (and dO under fwd_bwd); V and dO are v_head_dim wide; a serving cell's K and V hold its longest
    request (runner.paging.cache_len), a paged cell's are its page pools (runner.paging.pool_shapes)."""
    q, k = (p.batch, p.seq_len, p.heads, p.head_dim), (p.batch, paging.cache_len(p), p.kv_heads, p.head_dim)
    kv = paging.pool_shapes(p) if p.page_size else [k, k[:3] + (p.v_head_dim,)]
    return [q, *kv] + ([q[:3] + (p.v_head_dim,)] if p.pass_ == "fwd_bwd" else [])


def draw_size(shape: tuple) -> int:
    """The power of two at or above a tensor's element count: the flat draw its normals are cut from."""
    return 1 << max(0, math.prod(shape) - 1).bit_length()


def drawn_by_rows(shape: tuple) -> bool:
    """Whether a tensor is drawn by rows (its flat draw past ROW_DRAW_ELEMENTS)."""
    return draw_size(shape) > ROW_DRAW_ELEMENTS and len(shape) > 1


def rows_per_draw(shape: tuple) -> int:
    """Rows of a tensor drawn by rows that one program draws: ROW_BLOCK_ELEMENTS' worth, at least one."""
    return max(1, ROW_BLOCK_ELEMENTS // draw_size(shape[1:]))


def draw_bytes(shape: tuple, dtype: str) -> int:
    """Device memory a tensor's draw takes beyond the tensor: its flat float32 draw, or one block of rows' float32
    draws and their cut in the dtype."""
    if not drawn_by_rows(shape):
        return 4 * draw_size(shape)
    return rows_per_draw(shape) * draw_size(shape[1:]) * (4 + metrics.ITEMSIZE[dtype])


def _request_bytes(p: Params) -> tuple[int, int]:
    """What one request adds to a reference chunk: each of its query rows' float32 scores (x3 under fwd_bwd: the
    probabilities and their gradient beside them), and once its K and V, sliced (a paged cell's gathered, whole pages
    of the longest request's) in the cell's dtype and upcast to float32 (and their float32 gradients under
    fwd_bwd)."""
    keys, gathered, grads = paging.cache_len(p), paging.gathered_len(p), p.pass_ == "fwd_bwd"
    row = 4 * p.heads * keys * (3 if grads else 1)
    kv = gathered * p.kv_heads * (p.head_dim + p.v_head_dim) * (metrics.ITEMSIZE[p.dtype] + 4 * (2 if grads else 1))
    return row, kv


def chunk_shape(p: Params) -> tuple[int, int]:
    """(requests, query rows) of a reference chunk, the one sizing rule of every cell: as many whole requests as fit
    REFERENCE_CHUNK_BYTES (_request_bytes), else one request and as many of its rows as fit (at least one)."""
    row, kv = _request_bytes(p)
    if (whole := p.seq_len * row + kv) <= REFERENCE_CHUNK_BYTES:
        return min(p.batch, REFERENCE_CHUNK_BYTES // whole), p.seq_len
    return 1, max(1, min(p.seq_len, (REFERENCE_CHUNK_BYTES - kv) // row))


def chunk_bytes(p: Params) -> int:
    """Device memory of one reference chunk (chunk_shape), beyond the inputs and the results."""
    (requests, rows), (row, kv) = chunk_shape(p), _request_bytes(p)
    return requests * (rows * row + kv)


def size_text(count: int) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.1f} {unit}" if unit != "B" else f"{count} B"
        count /= 1024
