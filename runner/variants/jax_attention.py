"""The lab's JAX variants: from scratch, and jax.nn.dot_product_attention with each implementation.

What jax.nn.dot_product_attention takes (jax 0.10.2's source, the runner image's pin), and what follows:
- a sliding window as `local_window_size=(left, right)`: key j visible to query i when i - left <= j <= i + right,
  so W keys is (W - 1, 0) causal and (W - 1, W - 1) not; its cuDNN path raises for a right window without a
  causal mask ("cuDNN doesn't support right window"), so cudnn declines a non-causal window;
- a padded batch as `query_seq_lengths` / `key_value_seq_lengths` (int32 [B]), never a dense mask; padded query
  rows come out zero;
- `bias` broadcastable to (B, N, T, S): ALiBi is built from iota inside the timed call (XLA fuses it into the
  logits; cuDNN reads it as a (1, N, T, S) tensor);
- no logit soft cap (nor in jax 0.11.2's signature, read on the H200), and V must have K's shape (its shape check):
  softcap and v_head_dim are declined;
- a serving cell (runner.paging): its requests' KV lengths as `key_value_seq_lengths`; its causal mask is aligned to
  each request's end, which `is_causal` (top-left: `jnp.tril`, cuDNN's CAUSAL) is not, so with T > 1 xla takes it
  as a boolean `mask` and cudnn declines (with T = 1 the new token sees its whole request: no causal mask at all);
  a window (`local_window_size`, top-left too) likewise: xla takes a serving cell's as a mask, cudnn declines it;
- a paged KV cache is declined: these read one dense K and V;
- a packed row (documents > 1) as a boolean `mask` (B, 1, T, S) of same-document pairs, built from the row's document
  ids inside the call: XLA fuses it into the logits, while jax's cuDNN path would turn it into a dense (B, 1, T, S)
  bias (another kernel), so cudnn takes packed rows through jax's private cuDNN API's segment offsets instead
  (runner/variants/cudnn_packed.py);
- a deterministic backward asks nothing of the call: the runner compiles the cell with XLA's
  xla_gpu_deterministic_ops, which XLA's cuDNN attention backward also reads (its force_deterministic).
"""

from __future__ import annotations

import functools
from types import MappingProxyType

from runner import masks, metrics, paging
from runner.shape import Params
from runner.registry import KvCopy, Requires, variant
from runner.variants.cudnn_packed import PACKED_RULES, packed_attention, packed_check, packed_gpu_check

NO_CAP = "jax.nn.dot_product_attention takes no logit soft cap"
SAME_V = "jax.nn.dot_product_attention checks that V has K's shape [B, S, K, H]"
DENSE = "a dense kernel reads one dense K and V, not pages"
DPA = dict(options=("window", "fill", "bias", "kv_lengths", "documents", "deterministic"),
           why_not=MappingProxyType({"softcap": NO_CAP, "v_head_dim": SAME_V, "page_size": DENSE}))
# Device memory a program that materialises the (B, N, T, S) scores keeps per score, by pass and dtype: its temp_bytes
# over its scores in the H200's runs (docs/benchmarks.md, "The numbers behind the runner's constants").
# jax.nn.dot_product_attention's xla path keeps the logits in the cell's dtype and their float32 softmax: 2 + 4 bytes,
# 4 + 4 in float32; with the backward 10 in bfloat16, 8 in float16. naive keeps its scores and its weights in the
# dtype, 2 x itemsize (XLA reuses one buffer for both in some bfloat16 programs: 2); 6 with the backward. No run
# measured float32 with the backward: 12 for both, the forward's and more, since a cell let through wrongly compiles
# to `oom` and measures nothing, where one skipped wrongly only goes unmeasured, with its sizes said.
XLA_SCORES = MappingProxyType({"fwd": MappingProxyType({"bfloat16": 6, "float16": 6, "float32": 8}),
                               "fwd_bwd": MappingProxyType({"bfloat16": 10, "float16": 8, "float32": 12})})
NAIVE_SCORES = MappingProxyType({"fwd": MappingProxyType({"bfloat16": 4, "float16": 4, "float32": 8}),
                                 "fwd_bwd": MappingProxyType({"bfloat16": 6, "float16": 6, "float32": 12})})


def xla_copy_bytes(p: Params) -> int:
    """One of K and V over the keys the call reads, in the dtype: the copy XLA lays out for its dot, the most the H200's
    decode records keep beside the scores (docs/benchmarks.md)."""
    return metrics.gathered_bytes(p) // 2


def naive_copy_bytes(p: Params) -> int:
    """XLA's copy of one of K and V (xla_copy_bytes) and, where query heads share a KV head, the other repeated to the
    query heads (naive's jnp.repeat; XLA folds the first repeat into its dot): the most the H200's decode records keep."""
    groups = p.heads // p.kv_heads
    return xla_copy_bytes(p) * (1 + (groups if groups > 1 else 0))


def xla_copy(name: str) -> KvCopy:
    """The copy an xla-path program (jax.nn.dot_product_attention's xla implementation) keeps, said as `name`'s."""
    return KvCopy(f"{name}'s copy of K or V (XLA's layout for its dot)", xla_copy_bytes)


CUDNN = Requires(gpu=True, min_compute_capability=8.0, dtypes=("bfloat16", "float16"), head_dim_multiple=8,
                 max_head_dim=128, **DPA)


@variant("naive", requires=Requires(options=("window", "fill", "bias", "softcap", "v_head_dim", "kv_lengths",
                                             "documents", "deterministic"),
                                    why_not=MappingProxyType({"page_size": DENSE}), score_bytes=NAIVE_SCORES),
         backend="xla", kv_copy=KvCopy("naive's copies of K and V (one repeated to the query heads)",
                                       naive_copy_bytes))
def naive(p: Params):
    """From scratch: matmul, softmax, matmul; materialises the (B, N, T, S) weights."""
    from runner.attention import Logits, naive_attention

    lengths = seq_lengths(p)
    attention = functools.partial(naive_attention, causal=p.causal, logits=Logits.of(p), q_lengths=lengths[0],
                                  kv_lengths=lengths[1])
    if not masks.packed(p):
        return attention

    def packed(q, k, v):
        return attention(q, k, v, segments=segment_ids(p))

    return packed


def segment_ids(p: Params):
    """[B, T] int32 document ids of the cell's packed rows, a constant of the call (traced inside it)."""
    import jax.numpy as jnp

    return jnp.asarray(masks.segment_ids(p))


def same_document(p: Params):
    """(B, 1, T, S) bool: query and key in the same document of a packed row."""
    ids = segment_ids(p)
    return (ids[:, :, None] == ids[:, None, :])[:, None]


def seq_lengths(p: Params) -> tuple:
    """The padded batch's (query, key/value) lengths as int32 arrays (constants of the timed call), or Nones."""
    import jax.numpy as jnp

    padded = masks.padded_lengths(p)
    return tuple(jnp.asarray(x, jnp.int32) for x in padded) if padded else (None, None)


def window_size(p: Params) -> tuple[int, int] | None:
    """`local_window_size` for the cell's window of W keys."""
    if p.window is None:
        return None
    return (p.window - 1, 0) if p.causal else (p.window - 1, p.window - 1)


def top_left_causal(p: Params) -> bool:
    """`is_causal` for a top-left causal mask (jax's, tokamax's): the cell's, but never a serving cell's, whose causal
    T = 1 token sees its whole request (its KV lengths say so) and whose T > 1 goes as a mask or is declined."""
    return p.causal and not paging.serving(p)


def alibi_bias(p: Params, dtype):
    """(1, N, T, S) ALiBi bias of the cell's shard, traced (so built inside the call that uses it)."""
    from runner.attention import Logits, alibi

    return alibi(Logits.of(p).slopes, p.seq_len, p.kv_seq_len)[None].astype(dtype)


def serving_mask(p: Params):
    """A serving cell's [B, 1, T, S] keys each new token sees, where `is_causal` and `local_window_size` (both
    top-left) cannot say it: causal with T > 1, or a window (its last W keys), aligned to each request's end; else
    None (causal at T = 1 sees the whole request: key_value_seq_lengths say it)."""
    if not paging.end_aligned_mask(p):
        return None
    import jax.numpy as jnp

    from runner.attention import Logits, visible

    kv_lengths = jnp.asarray(paging.lengths(p), jnp.int32)
    return visible(Logits.of(p), p.seq_len, paging.cache_len(p), kv_lengths=kv_lengths)


def _dot_product_attention(p: Params, implementation: str | None):
    import jax
    import jax.numpy as jnp

    q_lengths, kv_lengths = seq_lengths(p)
    if (mask := serving_mask(p)) is not None:
        return functools.partial(jax.nn.dot_product_attention, implementation=implementation, mask=mask)
    attention = functools.partial(jax.nn.dot_product_attention, is_causal=top_left_causal(p),
                                  implementation=implementation, query_seq_lengths=q_lengths,
                                  key_value_seq_lengths=kv_lengths, local_window_size=window_size(p))
    if p.bias == "none" and not masks.packed(p):
        return attention
    bias_dtype = jnp.float32 if implementation != "cudnn" else jnp.dtype(p.dtype)  # xla adds it to float32 logits

    def attend(q, k, v):
        bias = alibi_bias(p, bias_dtype) if p.bias != "none" else None
        return attention(q, k, v, bias=bias, mask=same_document(p) if masks.packed(p) else None)

    return attend


@variant("xla", requires=Requires(**DPA, score_bytes=XLA_SCORES), backend="xla", kv_copy=xla_copy("xla"))
def xla(p: Params):
    """jax.nn.dot_product_attention(implementation="xla")."""
    return _dot_product_attention(p, "xla")


def cudnn_check(p: Params) -> str | None:
    """Why the cudnn variant declines these params, or None."""
    if masks.packed(p):
        return packed_check(p)
    if p.window is not None and not p.causal:
        return "jax's cuDNN path takes a window only with a causal mask (it raises \"cuDNN doesn't support right " \
               "window\" otherwise)"
    if paging.end_aligned_mask(p):
        return "jax's cuDNN path aligns its causal mask and window top-left; a serving cell's are aligned to each " \
               "request's end (a window, or causal with T > 1)"
    return None


@variant("cudnn", requires=CUDNN, backend="cudnn", proves=("__cudnn$fmha",), check=cudnn_check,
         gpu_check=packed_gpu_check,
         rules=("a window only with a causal mask", "a serving cell: no window, causal only with T = 1") + PACKED_RULES)
def cudnn(p: Params):
    """jax.nn.dot_product_attention(implementation="cudnn"): cuDNN's fused flash-attention kernel."""
    if masks.packed(p):
        return packed_attention(p)
    return _dot_product_attention(p, "cudnn")


# jax 0.10.2's implementation=None is its xla path ("defaults to XLA for now": jax/_src/nn/functions.py), scores and all
@variant("auto", requires=Requires(**DPA, score_bytes=XLA_SCORES), kv_copy=xla_copy("auto"))
def auto(p: Params):
    """jax.nn.dot_product_attention(implementation=None): JAX picks; the record says what it compiled to."""
    return _dot_product_attention(p, None)
