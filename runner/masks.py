"""What a cell's mask keeps, in plain numbers (no JAX): padded lengths, ALiBi slopes, score elements kept.

The sequence lengths of a padded batch (`fill` < 1) follow one deterministic rule, so every variant and the float32
reference see the same batch: sequence b of B has the fraction

    f_b = fill - d + 2 d b / (B - 1),   d = min(fill, 1 - fill)      (f_0 = fill when B = 1)

of its length real, rounded to whole tokens and at least one: the widest even spread whose mean is `fill` and that
stays within (0, 1] (fill 0.5 spreads prompts from one token to the full length, fill 0.8 from 60 % to 100 %), as
a server's batch of uneven prompts. Queries and keys use the same fractions (of T and of S); a decode cell (T = 1)
keeps its one query and pads the KV cache.

A packed row (`documents` D > 1, MaxText-style: several documents in one row, no padding) is cut by one
deterministic rule too: document d of D has the weight D + d (the longest about twice the shortest), the cuts fall
at round(T x (weights so far) / (all weights)), and row b starts with document b mod D of that cut (each row a
rotation of the same documents, so rows differ while the work per row is the same). A query sees only the keys of its
own document, causal (and windowed) within it; queries and keys share the cut, so packing needs S = T.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from runner.paging import lengths as serving_lengths, serving


def fractions(batch: int, fill: float) -> list[float]:
    """f_b for each sequence of the batch (the rule above)."""
    if batch == 1:
        return [fill]
    spread = min(fill, 1 - fill)
    return [fill - spread + 2 * spread * b / (batch - 1) for b in range(batch)]


def lengths(batch: int, length: int, fill: float) -> list[int]:
    """Real tokens of each sequence of a padded batch of `length`-token rows."""
    return [max(1, min(length, round(f * length))) for f in fractions(batch, fill)]


def padded_lengths(p) -> tuple[list[int], list[int]] | None:
    """(query lengths, key/value lengths) of the cell's batch, or None without padding (fill 1): a serving cell's
    are T new tokens per request and its requests' KV lengths (runner.paging.lengths)."""
    if (kv_lengths := serving_lengths(p)) is not None:
        return [p.seq_len] * p.batch, kv_lengths
    if p.fill >= 1:
        return None
    return lengths(p.batch, p.seq_len, p.fill), lengths(p.batch, p.kv_seq_len, p.fill)


def alibi_slopes(heads: int) -> list[float]:
    """ALiBi's head slopes (Press et al. 2022, as BLOOM's build_alibi_tensor): 2^(-8 i / n) for the n = the largest
    power of two <= heads, then the odd steps of the 2n sequence for the heads past n."""
    n = 1 << (heads.bit_length() - 1)
    slopes = [2 ** (-8 * i / n) for i in range(1, n + 1)]
    return slopes + [2 ** (-4 * i / n) for i in range(1, 2 * (heads - n), 2)]


def _bounds(q_len: int, kv_len: int, causal: bool, window: int | None,
            end: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The first and last key each of q_len real query rows keeps, of kv_len real keys (first > last: none); `end`:
    the rows stand at the sequence's end (a serving cell, runner.paging), row i at key kv_len - q_len + i."""
    rows = np.arange(q_len, dtype=np.int64) + (kv_len - q_len if end else 0)
    last = np.minimum(rows, kv_len - 1) if causal else np.full(q_len, kv_len - 1)
    if window is not None and not causal:
        last = np.minimum(rows + window - 1, kv_len - 1)
    first = np.maximum(rows - window + 1, 0) if window is not None else np.zeros(q_len, np.int64)
    return first, last


def kept_in_sequence(q_len: int, kv_len: int, causal: bool, window: int | None, end: bool = False) -> int:
    """Score elements (query row, key) the mask keeps for one sequence of q_len real queries and kv_len real keys."""
    first, last = _bounds(q_len, kv_len, causal, window, end)
    return int(np.clip(last - first + 1, 0, None).sum())


def keys_kept_in_sequence(q_len: int, kv_len: int, causal: bool, window: int | None, end: bool = False) -> int:
    """Keys of one sequence that some real query keeps: the rows of K and V a kernel must read. A row's kept keys
    are one run, and consecutive rows' runs overlap or touch, so together they are one run too."""
    first, last = _bounds(q_len, kv_len, causal, window, end)
    some = last >= first
    return int(last[some].max() - first[some].min() + 1) if some.any() else 0


def document_lengths(length: int, documents: int, row: int = 0) -> list[int]:
    """Tokens of each document packed in row `row` of `length` tokens (the rule above), in the row's order."""
    weights = [documents + d for d in range(documents)]
    total, cuts, so_far = sum(weights), [0], 0
    for weight in weights:
        so_far += weight
        cuts.append(round(length * so_far / total))
    cut = [end - start for start, end in zip(cuts, cuts[1:])]
    turn = row % documents
    return cut[turn:] + cut[:turn]


def packed(p) -> bool:
    """Whether the cell's rows are packed: several documents a row, a query seeing its own document's keys alone."""
    return p.documents > 1


def packed_lengths(p) -> list[list[int]] | None:
    """Each row's document lengths, or None for one document per row."""
    if not packed(p):
        return None
    return [document_lengths(p.seq_len, p.documents, row) for row in range(p.batch)]


def document_bounds(p) -> np.ndarray | None:
    """[B, D + 1] int32: where each packed row's documents start, then the row's end (T): document d of row b holds
    tokens bounds[b, d] up to, not including, bounds[b, d + 1]; None for one document per row. Every form a library
    takes a packed row in (lengths, offsets, ids, ranges, positions) is converted from these."""
    packed = packed_lengths(p)
    if packed is None:
        return None
    return np.array([np.cumsum([0] + row) for row in packed], np.int32)


def segment_ids(p) -> np.ndarray | None:
    """[B, T] int32: the document of each token of a packed row (0, 1, ...), or None for one document per row."""
    bounds = document_bounds(p)
    if bounds is None:
        return None
    return np.array([np.repeat(np.arange(len(row) - 1), np.diff(row)) for row in bounds], np.int32)


def document_spans(p) -> tuple[np.ndarray, np.ndarray] | None:
    """([B, T], [B, T]) int32: the first and the past-the-last token of each token's document, or None for one
    document per row: the keys a query of a packed row may see lie in [first, end)."""
    bounds, ids = document_bounds(p), segment_ids(p)
    if bounds is None:
        return None
    return np.take_along_axis(bounds, ids, axis=1), np.take_along_axis(bounds, ids + 1, axis=1)


def packing_problem(p) -> tuple[str, str] | None:
    """The field that keeps these params from being packed and why (every variant declines the cell), or None."""
    if not packed(p):
        return None
    if p.kv_lengths is not None or p.page_size is not None:  # before S = T, which a serving cell's T new tokens break
        return "documents", "a packed row is a training row, not a serving batch: documents > 1 needs kv_lengths and " \
                            "page_size null"
    if p.kv_seq_len != p.seq_len:
        return "kv_seq_len", f"packed rows share one cut for queries and keys: S ({p.kv_seq_len}) must equal T " \
                             f"({p.seq_len})"
    if p.fill < 1:
        return "fill", "a packed row has no padding: documents > 1 needs fill 1"
    if 2 * p.documents > p.seq_len:
        return "documents", f"{p.documents} documents need a row of at least {2 * p.documents} tokens (T={p.seq_len})"
    return None


def _per_sequence(p, count, padded) -> int:
    """`count(q_len, kv_len, causal, window, end)` summed over the cell's batch, per sequence where it is `padded`
    (a serving cell's rows at each sequence's end), per document where rows are packed."""
    if (packed := packed_lengths(p)) is not None:
        return sum(count(n, n, p.causal, p.window) for row in packed for n in row)
    if padded is None:
        return p.batch * count(p.seq_len, p.kv_seq_len, p.causal, p.window)
    return sum(n * count(q, kv, p.causal, p.window, serving(p)) for (q, kv), n in Counter(zip(*padded)).items())


def kept_elements(p) -> int:
    """Score elements the cell's mask keeps over the whole batch: causal, window and padding (per sequence), packed
    documents (per document: none across a boundary)."""
    return _per_sequence(p, kept_in_sequence, padded_lengths(p))


def kept_rows(p) -> tuple[int, int]:
    """(query rows, key rows) over the batch that take part: every real query, and each real key that some real
    query keeps (a padded batch's padding, and the keys outside every query's window or causal reach: those past T under a
    top-left causal mask with T < S, are left out)."""
    padded = padded_lengths(p)
    queries = sum(padded[0]) if padded else p.batch * p.seq_len
    return queries, _per_sequence(p, keys_kept_in_sequence, padded)
