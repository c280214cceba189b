"""The lab's JAX variants: from scratch, and jax.nn.dot_product_attention with each implementation."""

from __future__ import annotations

import functools

from runner.record import Params
from runner.registry import Requires, variant

CUDNN = Requires(
    gpu=True, min_compute_capability=8.0, dtypes=("bfloat16", "float16"), head_dim_multiple=8, max_head_dim=128
)


@variant("naive", backend="xla")
def naive(p: Params):
    """From scratch: matmul, softmax, matmul; materialises the (B, N, T, S) weights."""
    from runner.attention import naive_attention

    return functools.partial(naive_attention, causal=p.causal)


def _dot_product_attention(p: Params, implementation: str | None):
    import jax

    return functools.partial(jax.nn.dot_product_attention, is_causal=p.causal, implementation=implementation)


@variant("xla", backend="xla")
def xla(p: Params):
    """jax.nn.dot_product_attention(implementation="xla")."""
    return _dot_product_attention(p, "xla")


@variant("cudnn", requires=CUDNN, backend="cudnn", proves=("__cudnn$fmha",))
def cudnn(p: Params):
    """jax.nn.dot_product_attention(implementation="cudnn"): cuDNN's fused flash-attention kernel."""
    return _dot_product_attention(p, "cudnn")


@variant("auto")
def auto(p: Params):
    """jax.nn.dot_product_attention(implementation=None): JAX picks; the record says what it compiled to."""
    return _dot_product_attention(p, None)
