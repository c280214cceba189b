"""The paged baseline any JAX backend runs: gather each request's pages through the table, then dense attention.

What a serving stack without a paged kernel does (and what a paged kernel must beat): the gather is inside the
timed call, so the cell pays for reading the pages once and writing the dense copy attention then reads; where the
device cannot hold that copy (and the copy of one of its K and V that XLA's dot lays out, as xla's) beside the cell's
pool (B128 x 128k on an H200), the run's plan skips the cell with the sizes (its kv_copy: runner.memory.too_large).
"""

from __future__ import annotations

from types import MappingProxyType

from runner import metrics, paging
from runner.registry import KvCopy, Requires, Staged, variant
from runner.shape import Params
from runner.variants.jax_attention import NO_CAP, SAME_V, XLA_SCORES, xla_copy_bytes


def gathered_and_copy(p: Params) -> int:
    """The gathered K and V, and the copy of one of them that XLA's dot lays out (xla_copy_bytes: xla's, on the
    gathered keys)."""
    return metrics.gathered_bytes(p) + xla_copy_bytes(p)


@variant("xla_paged", requires=Requires(options=("kv_lengths", "page_size"), score_bytes=XLA_SCORES,
                                        why_not=MappingProxyType({"softcap": NO_CAP, "v_head_dim": SAME_V})),
         backend="xla", rules=("a paged KV cache (page_size set)",),
         kv_copy=KvCopy("xla_paged's gathered K and V and XLA's copy of one", gathered_and_copy),
         check=lambda p: None if p.page_size else "xla_paged reads a paged cache; this cell's is dense (page_size null)")
def xla_paged(p: Params):
    """Gather the pages through the table (jnp.take), then jax.nn.dot_product_attention(implementation="xla")."""
    import jax
    import jax.numpy as jnp

    from runner.variants.jax_attention import serving_mask

    mask = serving_mask(p)

    def prepare(q, k_pages, v_pages):
        paged = paging.cache(p, k_pages, v_pages)
        return q, k_pages, v_pages, paged.table, paged.lengths

    def attend(q, k_pages, v_pages, table, lengths):
        k, v = paging.gather(paging.Paged(k_pages, v_pages, table, lengths))
        if mask is not None:  # causal T > 1 aligned to each request's end
            return jax.nn.dot_product_attention(q, k, v, mask=jnp.pad(mask, _pad(mask, k)), implementation="xla")
        return jax.nn.dot_product_attention(q, k, v, key_value_seq_lengths=lengths, implementation="xla")

    return Staged(prepare, attend, lambda out: out)


def _pad(mask, k) -> tuple:
    """The mask's key axis padded (not kept) to the gathered cache's whole pages."""
    return ((0, 0), (0, 0), (0, 0), (0, k.shape[1] - mask.shape[-1]))
