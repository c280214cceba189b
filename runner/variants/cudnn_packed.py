"""Packed rows (several documents a row) on cuDNN, through jax's private cuDNN attention (the cudnn variant's path
for a cell with documents > 1).

jax.nn.dot_product_attention takes a packed row only as a dense mask, which its cuDNN path adds as a (B, 1, T, S)
bias: another kernel, reading T x S numbers. jax's private module (jax._src.cudnn.fused_attention_stablehlo, read
at jax 0.11.1; FACTS.md lists the same arguments in 0.11.2) hands cuDNN the segments themselves: `q_seqlen` and
`kv_seqlen` [B, M] (each document's length) and `q_offsets` / `kv_offsets` [B, M + 1] (each document's first token,
the rest -1), with mask_type PADDING_CAUSAL (causal within each document) or PADDING; it raises for a packed row
below Hopper ("Packed layout requires a GPU with at least Hopper architecture"). Everything that touches the private
module lives here and in cudnn_fp8.py (its one import); `missing` says why a cell cannot run when jax moved it.
"""

from __future__ import annotations

import inspect
import math

import numpy as np

from runner import masks
from runner.machine import HOPPER
from runner.registry import Skip
from runner.shape import Params
from runner.variants.cudnn_fp8 import PRIVATE, _private

PACKED_RULES = ("packed rows (documents > 1) through jax's private cuDNN API: Hopper or newer, no ALiBi",)
SEGMENT_ARGUMENTS = {"q_seqlen", "kv_seqlen", "q_offsets", "kv_offsets", "sliding_window_length"}


def missing() -> str | None:
    """Why this jax cannot hand cuDNN a packed row (its private module or the segment arguments are gone), or None."""
    cudnn = _private()
    if cudnn is None:
        return f"packed rows on cuDNN need {PRIVATE}, which this jax does not have"
    parameters = set(inspect.signature(cudnn.dot_product_attention).parameters)
    if not SEGMENT_ARGUMENTS <= parameters or not hasattr(cudnn.MaskType, "PADDING_CAUSAL"):
        return "packed rows on cuDNN need the segment arguments (q_offsets, kv_offsets) of jax's private cuDNN " \
               "attention, which this jax does not have"
    return None


def packed_check(p: Params) -> str | None:
    """Why cudnn declines a packed cell, or None."""
    if p.bias != "none":
        return "cudnn's packed path (jax's private cuDNN API with segment offsets) is built without a bias here"
    if p.window is not None and not p.causal:
        return "jax's private cuDNN API takes a window only as a left window (causal)"
    return None


def segments(p: Params) -> tuple[list[list[int]], list[list[int]]]:
    """(lengths [B, D], offsets [B, D + 1]) of the cell's packed rows as jax's private cuDNN API takes them: each
    document's length, and each document's first token with -1 after the last (masks.document_bounds)."""
    bounds = masks.document_bounds(p)
    return np.diff(bounds).tolist(), [row[:-1] + [-1] for row in bounds.tolist()]


def packed_gpu_check(p: Params, capability: float) -> str | None:
    """Why cudnn declines a packed cell on a GPU of this compute capability (jax raises below Hopper), or None."""
    if masks.packed(p) and capability < HOPPER:
        return f"jax's cuDNN path packs rows on Hopper or newer only; this GPU has compute capability {capability:.1f}"
    return None


def packed_attention(p: Params):
    """attend(q, k, v) over packed rows: cuDNN's flash attention with the rows' segment lengths and offsets."""
    if reason := missing():
        raise Skip(reason)
    import jax.numpy as jnp

    cudnn = _private()
    mask = cudnn.MaskType.PADDING_CAUSAL if p.causal else cudnn.MaskType.PADDING
    lengths, offsets = segments(p)

    def attend(q, k, v):
        seqlen, starts = jnp.asarray(lengths, jnp.int32), jnp.asarray(offsets, jnp.int32)  # constants of the call
        return cudnn.dot_product_attention(q, k, v, q_seqlen=seqlen, kv_seqlen=seqlen, q_offsets=starts,
                                           kv_offsets=starts, scale=1 / math.sqrt(p.head_dim), mask_type=mask,
                                           sliding_window_length=p.window)

    return attend
