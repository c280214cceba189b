"""cuDNN paged attention through JAX's private cuDNN path (cuDNN >= 9.5's paged SDPA, vLLM's page tables).

JAX exposes it only in a private module: `jax._src.cudnn.fused_attention_stablehlo.paged_attention(query, key,
value, q_seqlen, kv_seqlen, page_table_k, page_table_v, bias=None, mask=None, fp8_params=None, *, scale,
mask_type, seed, dropout_rate, qkv_layout, sliding_window_length, use_fp8, return_residual)`, the same in jax
0.10.2 and jax main of August 2026 (0.11.1 dev). Everything that touches it lives here (the module's import:
cudnn_fp8.py's), imported only when a cell needs it; `_missing` says why it cannot run when the function or its
page-table arguments are gone.

What its source says, and the rules that follow:
- query (B, T, N, H) in BTNH; key and value are page pools (num_blocks, block_size, K, H): GQA natively, the
  page size any block_size; the page tables are (B, 1, blocks_per_batch, 1) int32, and its layout check insists
  that num_blocks == B x blocks_per_batch: a ragged batch's pool is padded with unreferenced pages to B x max pages
  (untimed, memory only: the kernel reads the pages the table names, up to each request's kv_seqlen); an equal
  batch's pool is handed to it as the cell holds it, never copied (68.7 GB at B128 x 128k);
- bf16 / fp16 (fp8 raises "Paged attention doesn't support fp8 for now"); head_dim a multiple of 8, at most 256 on
  Hopper and 128 before (its flash-attention check); forward only (no paged backward);
- its masks are jax's MaskType: PADDING masks keys past each request's kv_seqlen (used here), CAUSAL is top-left
  (query i sees keys j <= i). A serving cell's causal mask is aligned to each request's end: at T = 1 that is no
  mask at all, but T > 1 new tokens would need cuDNN's bottom-right causal, which jax does not expose: declined.
jax's own test of this function (tests/fused_attention_stablehlo_test.py, test_sdpa_paged_attention) compares the
reference with itself, not with the paged output: the float32 check here is the first that reads the result.
"""

from __future__ import annotations

import inspect
import math

from runner.machine import HOPPER
from runner.shape import Params
from runner.registry import Requires, Staged, variant
from runner.variants.cudnn_fp8 import PRIVATE, _private

PAGED_ARGUMENTS = {"q_seqlen", "kv_seqlen", "page_table_k", "page_table_v"}


def _missing() -> str | None:
    cudnn = _private()
    if cudnn is None:
        return f"cudnn_paged needs {PRIVATE}, which this jax does not have"
    paged = getattr(cudnn, "paged_attention", None)
    if paged is None or not PAGED_ARGUMENTS <= set(inspect.signature(paged).parameters):
        return "cudnn_paged needs paged_attention(q_seqlen, kv_seqlen, page_table_k, page_table_v) in jax's " \
               "private cuDNN module, which this jax does not have"
    return None


def check(p: Params) -> str | None:
    """Why cudnn_paged declines these params, or None."""
    if p.page_size is None:
        return "cudnn_paged reads a paged KV cache: the cell sets no page_size"
    if p.causal and p.seq_len > 1:
        return f"jax's cuDNN path has a top-left causal mask only; T={p.seq_len} new tokens need it aligned to " \
               "each request's end (cuDNN's bottom-right causal, which jax does not expose)"
    return None


def pool_pages(p: Params) -> tuple[int, int]:
    """(pages a serving cell's pool holds, pages jax's layout check wants: B x max pages)."""
    from runner import paging

    counts = paging.pages_of(p)
    return sum(counts), p.batch * max(counts)


def prepare(p: Params):
    """prepare(q, k_pages, v_pages) -> (q, key and value pools padded to B x max pages, the (B, 1, W, 1) table,
    q_seqlen, kv_seqlen)."""
    import jax.numpy as jnp

    from runner import paging

    held, wanted = pool_pages(p)

    def padded(pool):
        return jnp.pad(pool, ((0, wanted - held), (0, 0), (0, 0), (0, 0))) if wanted > held else pool

    def staged(q, k_pages, v_pages):
        cache = paging.cache(p, k_pages, v_pages)
        table = cache.table[:, None, :, None]
        q_seqlen = jnp.full((p.batch,), p.seq_len, jnp.int32)
        return q, padded(cache.k_pages), padded(cache.v_pages), table, q_seqlen, cache.lengths

    return staged


def attend(p: Params):
    """The timed call: paged_attention with a padding mask over each request's kv_seqlen."""
    cudnn = _private()

    def paged(q, k_pages, v_pages, table, q_seqlen, kv_seqlen):
        return cudnn.paged_attention(q, k_pages, v_pages, q_seqlen, kv_seqlen, table, table,
                                     scale=1 / math.sqrt(p.head_dim), mask_type=cudnn.MaskType.PADDING)

    return paged


def gpu_check(p: Params, capability: float) -> str | None:
    """Why cudnn_paged declines these params on a GPU of this compute capability, or None: cuDNN's flash attention
    takes head_dim up to 256 on Hopper, 128 before."""
    if p.head_dim > 128 and capability < HOPPER:
        return f"cuDNN's flash attention takes head_dim up to 128 before Hopper, not {p.head_dim}"
    return None


RULES = (
    "a paged cell (page_size set); causal only at T = 1 (jax's cuDNN causal mask is top-left)",
    "head_dim <= 128 before Hopper",
    "a ragged batch's page pool padded with unreferenced pages to B x max pages (jax's layout check), untimed",
)


@variant("cudnn_paged",
         requires=Requires(gpu=True, min_compute_capability=8.0, dtypes=("bfloat16", "float16"), head_dim_multiple=8,
                           max_head_dim=256, passes=("fwd",), options=("kv_lengths", "page_size")),
         backend="cudnn", proves=("__cudnn$fmha",), check=check, gpu_check=gpu_check, rules=RULES, probe=_missing)
def cudnn_paged(p: Params):
    """cuDNN paged attention (page tables, per-request kv_seqlen), via jax's private cuDNN API."""
    return Staged(prepare(p), attend(p), lambda out: out)
