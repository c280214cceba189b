"""The inputs and float32 reference of a shape: what every variant of the shape is given and checked against.

Seeded normal Q, K, V (and dO) in the cell's dtype (a paged cell's K and V are its page pools, runner.paging), and
the float32 output (and gradients) computed a chunk of requests and query rows at a time (runner.memory.chunk_shape,
the one rule that also sizes the memory a shape needs); both are untimed programs (compiler.UNTIMED), compiled once
per shape. How much device memory they take is runner.memory's to say, without JAX.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import get_args

import jax
import jax.numpy as jnp

from runner import masks, paging
from runner.attention import Logits, reference_attention, zero_padded_rows
from runner.cells import family, reference_shape
from runner.compiler import UNTIMED
from runner.memory import chunk_shape, draw_size, drawn_by_rows, input_shapes, rows_per_draw
from runner.shape import Cotangent, Params
from runner.timers import Stopwatch

KEY_BUCKETS = 4  # causal reference chunks see 1/4, 2/4, 3/4 or all of the keys


@dataclass(frozen=True)
class InputsAndReference:
    """One shape's inputs and the float32 results every variant is checked against."""

    args: tuple  # q, k, v (and the output cotangent under fwd_bwd)
    expected: tuple  # out (and dq, dk, dv under fwd_bwd), float32
    unmasked_rows: jax.Array | None  # causal: rows 0 and T-1 of unmasked attention


@dataclass
class Truths:
    """The inputs and reference of the shape measured last: a family's cells run one after another (runner.run), so
    each reference shape's are made once (cells.reference_shape: a deterministic, tuned or split cell takes those of
    its plain twin), and the previous shape's arrays are freed before the next one's are made. A forward
    shape whose forward+backward twin is held takes the twin's Q, K, V and output (the run orders the twin first)."""

    seed: int
    last: tuple[Params, InputsAndReference] | None = None

    def holds(self, p: Params) -> bool:
        """Whether the cell's inputs and reference are made already: its reference shape's, or its twin's."""
        return self.last is not None and self.last[0] in (reference_shape(p), family(p))

    def get(self, p: Params) -> tuple[InputsAndReference, dict[str, float]]:
        """The cell's inputs and float32 results, and the seconds this call spent making them (none when held)."""
        watch, shape = Stopwatch(), reference_shape(p)
        held = self.last[0] if self.last else None
        if held != shape and held == family(p):  # the forward pass of the held forward+backward shape
            twin = self.last[1]
            return InputsAndReference(twin.args[:3], twin.expected[:1], twin.unmasked_rows), watch.phases
        if held != shape:
            self.last = None  # free the previous shape's arrays first
            with watch.phase("inputs"):
                args = jax.block_until_ready(make_inputs(shape, self.seed))
            with watch.phase("reference"):
                truth = InputsAndReference(args, jax.block_until_ready(reference(shape, args)),
                                           unmasked_rows(shape, args))
            self.last = (shape, truth)
        return self.last[1], watch.phases


def _normal(key, size: int):
    return jax.random.normal(key, (size,), jnp.float32)


def _cut(flat, shape: tuple, dtype: str):
    return flat[: math.prod(shape)].reshape(shape).astype(jnp.dtype(dtype))


NORMAL, ZERO_PADDED = get_args(Cotangent)


def cotangent(p: Params) -> Cotangent | None:
    """The output cotangent dO a fwd_bwd cell's gradients are taken with, as its record says it (Correctness.cotangent):
    seeded normals, zero at a padded batch's padded query rows (since 2026-12-06, 44c74fc); None without a backward."""
    if p.pass_ != "fwd_bwd":
        return None
    lengths = masks.padded_lengths(p)
    return ZERO_PADDED if lengths is not None and min(lengths[0]) < p.seq_len else NORMAL


def make_inputs(p: Params, seed: int) -> tuple:
    """Seeded normal Q, K, V (and dO) in the cell's dtype.

    Each tensor is cut from a flat float32 draw whose size is a power of two, so shapes share the random-number
    program (threefry compiles in ~0.6 s on a CPU, and a spec has a dozen shapes); the values are those of
    `jax.random.normal(key, shape)`, because partitionable threefry numbers its draws by flat index. A tensor past
    memory.ROW_DRAW_ELEMENTS (a serving cell's cache of B128 x 128k, its pool of a million pages) is drawn by rows,
    row b (a request, a page) from `jax.random.fold_in(key, b)`, memory.ROW_BLOCK_ELEMENTS' worth of rows at a time,
    into its place: its float32 draw would not fit beside the cache."""
    keys = jax.random.split(jax.random.PRNGKey(seed), 4)
    args = tuple(_draw(key, shape, p.dtype) for key, shape in zip(keys, input_shapes(p)))
    if cotangent(p) == ZERO_PADDED:
        # What a library writes at a padded query row is undefined (tokamax attends there, cuDNN writes zeros), and a
        # training loss masked to the real tokens gives those rows a zero cotangent: with dO zeroed there, no
        # library's dk / dv depend on what it wrote at rows the check ignores.
        args = (*args[:3], UNTIMED(zero_padded_rows, args[3], masks_lengths(p)[0]))
    return args


def _draw(key, shape: tuple, dtype: str):
    if not drawn_by_rows(shape):
        return UNTIMED(_cut, UNTIMED(_normal, key, size=draw_size(shape)), shape=shape, dtype=dtype)
    whole, step = jnp.zeros(shape, jnp.dtype(dtype)), rows_per_draw(shape)
    for first in range(0, shape[0], step):
        rows = jnp.arange(first, min(shape[0], first + step))
        whole = _put_rows(whole, UNTIMED(_row_draws, key, rows, shape=shape[1:], dtype=dtype), first)
    return whole


def _row_draws(key, rows, shape: tuple, dtype: str):
    """Rows `rows` of a tensor drawn by rows: row b is jax.random.normal(fold_in(key, b), shape)."""
    return jax.vmap(lambda b: _cut(_normal(jax.random.fold_in(key, b), draw_size(shape)), shape, dtype))(rows)


@functools.partial(jax.jit, donate_argnums=0)
def _put_rows(whole, rows, first):
    """whole[first:first + len(rows)] = rows, in place (whole is donated): the tensor is never held twice."""
    return jax.lax.dynamic_update_slice_in_dim(whole, rows, first, 0)


def _reference_chunk(q, k, v, dout, q_offset, *masking, logits: Logits, with_grads: bool, names: tuple = ()):
    """One block of query rows; `masking` holds the arrays `names` names (reference_attention's lengths of a padded
    batch, document ids of packed rows)."""
    attend = functools.partial(reference_attention, causal=logits.causal, q_offset=q_offset, logits=logits,
                               **dict(zip(names, masking)))
    if not with_grads:
        return (attend(q, k, v),)
    out, vjp = jax.vjp(attend, *(x.astype(jnp.float32) for x in (q, k, v)))  # float32 gradients (empty_results)
    return (out, *vjp(dout.astype(jnp.float32)))


def _visible_keys(p: Params, end: int) -> int:
    """Causal: the keys query rows before `end` can see, rounded up to a quarter of S (so a shape compiles at most
    KEY_BUCKETS chunk programs); without a mask, or aligned to each request's end (a serving cell), all of them."""
    if not p.causal or paging.serving(p):
        return paging.cache_len(p)
    bucket = -(-p.kv_seq_len // KEY_BUCKETS)
    return min(p.kv_seq_len, -(-end // bucket) * bucket)


def empty_results(p: Params, args: tuple) -> tuple:
    """float32 zeros to write the reference into: out (and under fwd_bwd dq, dk, dv). The gradients are float32
    whatever the cell's dtype: dk and dv are sums over every block of query rows (565 blocks at T 32k), and a sum
    kept in bfloat16 would round at each block."""
    q, k, v = args[:3]
    out = jnp.zeros(q.shape[:3] + (v.shape[3],), jnp.float32)
    return (out, *(jnp.zeros(x.shape, jnp.float32) for x in (q, k, v))) if p.pass_ == "fwd_bwd" else (out,)


def reference(p: Params, args: tuple) -> tuple:
    """float32 output (and gradients: empty_results), a chunk of requests and query rows at a time (chunk_shape) to
    bound memory: a chunk upcasts only its own requests' K and V, and under a causal mask skips the keys no row of
    it can see (about a third of the work at long T). Each chunk's results are written into their place in the
    whole results, made first, so that the results are held once (needed_bytes)."""
    requests, rows = chunk_shape(p)
    names, masking = masking_arrays(p)
    expected = empty_results(p, args)
    for b in range(0, p.batch, requests):  # a slice of the whole batch is the array itself, not a copy
        batch = slice(b, b + requests)
        expected = _reference_rows(p, expected, b, _requests(p, args, batch), names, [x[batch] for x in masking],
                                   rows)
    return expected


def _requests(p: Params, args: tuple, batch: slice) -> list:
    """Q, K and V (and dO) of a slice of the batch's requests; a paged cell's K and V are gathered from its pools
    through the table, each request's longest keys' worth (the keys past its length are masked)."""
    if not p.page_size:
        return [x[batch] for x in args]
    table = jnp.asarray(paging.table(p)[batch], jnp.int32)
    pages = [UNTIMED(_gather, pool, table, keys=paging.cache_len(p)) for pool in args[1:3]]
    return [args[0][batch], *pages, *(x[batch] for x in args[3:])]


def _gather(pool, table, keys: int):
    """The first `keys` keys (or values) of the requests whose table rows are `table`."""
    return paging.gathered(pool, table)[:, :keys]


def _reference_rows(p: Params, expected: tuple, first: int, args: list, names: tuple, masking: list,
                    rows: int) -> tuple:
    """The results with one block of requests' (from request `first`) float32 output (and gradients) written in,
    `rows` query rows at a time; `expected` is donated."""
    q, k, v = args[:3]
    with_grads = p.pass_ == "fwd_bwd"
    dout = args[3] if with_grads else jnp.zeros((), jnp.float32)
    for start in range(0, p.seq_len, rows):
        chunk, keys = slice(start, start + rows), _visible_keys(p, min(p.seq_len, start + rows))
        d_chunk = dout[:, chunk] if with_grads else dout
        chunk_masking = [x[:, chunk] if name == "q_segments" else x[:, :keys] if name == "kv_segments" else x
                         for name, x in zip(names, masking)]
        parts = UNTIMED(_reference_chunk, q[:, chunk], k[:, :keys], v[:, :keys], d_chunk, jnp.int32(start),
                        *chunk_masking, logits=Logits.of(p), with_grads=with_grads, names=names)
        expected = _write_chunk(expected, parts, first, start)
    return expected


@functools.partial(jax.jit, donate_argnums=0)
def _write_chunk(expected: tuple, parts: tuple, first: int, start: int) -> tuple:
    """expected with a chunk's parts in place (expected is donated: the results are never held twice): its output
    (and dq) at its requests and rows; its dk and dv, over its visible keys, added to its requests' (padded with
    zeros to all keys, as the sum the results were once made by)."""
    placed = [jax.lax.dynamic_update_slice(whole, part, (first, start, 0, 0))
              for whole, part in zip(expected[:2], parts[:2])]
    for whole, part in zip(expected[2:], parts[2:]):
        held = jax.lax.dynamic_slice_in_dim(whole, first, part.shape[0], 0)
        pad = ((0, 0), (0, whole.shape[1] - part.shape[1]), (0, 0), (0, 0))
        placed.append(jax.lax.dynamic_update_slice_in_dim(whole, held + jnp.pad(part, pad), first, 0))
    return tuple(placed)


def masking_arrays(p: Params) -> tuple[tuple[str, ...], tuple]:
    """reference_attention's masking arguments for the cell, by name: a padded batch's or a serving cell's lengths,
    packed rows' document ids (of the queries and of the keys, cut per block of rows), or none."""
    if p.fill < 1 or paging.serving(p):
        return ("q_lengths", "kv_lengths"), masks_lengths(p)
    if (segments := masks.segment_ids(p)) is not None:
        return ("q_segments", "kv_segments"), (jnp.asarray(segments), jnp.asarray(segments))
    return (), ()


def masks_lengths(p: Params) -> tuple:
    """The reference's query and key/value lengths: the padded batch's (runner.masks.lengths) or a serving cell's
    (runner.paging.lengths), else full ones."""
    q_lengths, kv_lengths = masks.padded_lengths(p) or ([p.seq_len] * p.batch, [p.kv_seq_len] * p.batch)
    return jnp.asarray(q_lengths, jnp.int32), jnp.asarray(kv_lengths, jnp.int32)


def unmasked_rows(p: Params, args: tuple) -> jax.Array | None:
    """Plain causal cells (no window, no padding, one document a row): rows 0 and T-1 of attention without the mask
    (the same cap and bias), for the lab's first/last row check."""
    plain = p.window is None and p.fill == 1 and p.bias == "none" and not paging.serving(p) and not masks.packed(p)
    if not (p.causal and p.seq_len >= p.kv_seq_len > 1 and plain):
        return None
    rows = jnp.array([0, p.seq_len - 1])
    logits = replace(Logits.of(p), causal=False)
    return UNTIMED(reference_attention, args[0][:, rows], args[1], args[2], causal=False, logits=logits)


def untimed_programs(p: Params, seed: int) -> list[tuple]:
    """The untimed programs a shape's inputs and reference compile that are not compiled yet (UNTIMED.warm's
    arguments): found by tracing make_inputs, reference and unmasked_rows themselves, so the list cannot drift."""
    found: list[tuple] = []

    def truth():
        args = make_inputs(p, seed)
        return reference(p, args), unmasked_rows(p, args)

    with UNTIMED.recording(found):
        jax.eval_shape(truth)
    return found
