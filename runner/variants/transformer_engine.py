"""NVIDIA TransformerEngine's flax DotProductAttention, plain and under TE's FP8 autocast (the lab's cells)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from runner.record import Params
from runner.registry import Requires, variant

_IMPORT_ERROR = None
try:
    # TE links the system's cuDNN: it must load before JAX initialises the GPU backend with its own
    # copy, or the second load fails on mismatched cuDNN symbols.
    import transformer_engine.jax  # noqa: F401
except ImportError:  # not installed: the requirement below says so
    pass
except OSError as error:  # installed, but its libraries do not load here
    _IMPORT_ERROR = f"TransformerEngine does not load here: {str(error).splitlines()[0]}"

TE = dict(
    gpu=True,
    dtypes=("bfloat16", "float16"),
    head_dim_multiple=8,
    package="transformer_engine",
    probe=lambda: _IMPORT_ERROR,
)


def _attention(p: Params, fp8: bool):
    from transformer_engine.jax.flax import DotProductAttention

    module = DotProductAttention(
        head_dim=p.head_dim,
        num_attention_heads=p.heads,
        num_gqa_groups=p.kv_heads,
        attn_mask_type="causal" if p.causal else "no_mask",
        transpose_batch_sequence=False,
    )
    dtype = jnp.dtype(p.dtype)
    q = jnp.zeros((p.batch, p.seq_len, p.heads, p.head_dim), dtype)
    kv = jnp.zeros((p.batch, p.kv_seq_len, p.kv_heads, p.head_dim), dtype)
    variables = jax.jit(module.init)(jax.random.PRNGKey(0), q, kv, kv)  # .init once

    def attend(q, k, v):
        if not fp8:
            return module.apply(variables, q, k, v, deterministic=True)
        with _autocast():
            return module.apply(variables, q, k, v, deterministic=True)

    return attend


def _autocast():
    """The lab's FP8 cell: te.autocast with DelayedScaling(HYBRID, amax history 1024, max)."""
    import transformer_engine.jax as te
    from transformer_engine.common.recipe import DelayedScaling, Format

    recipe = DelayedScaling(margin=0, fp8_format=Format.HYBRID, amax_history_len=1024, amax_compute_algo="max")
    return te.autocast(enabled=True, recipe=recipe)


@variant("te", requires=Requires(min_compute_capability=8.0, **TE))
def te(p: Params):
    """TransformerEngine flax DotProductAttention (fused cuDNN attention through TE)."""
    return _attention(p, fp8=False)


@variant("te_fp8", requires=Requires(min_compute_capability=8.9, **TE), fp8_baseline="te")
def te_fp8(p: Params):
    """The same module under te.autocast(DelayedScaling): the record says whether FP8 reached attention."""
    return _attention(p, fp8=True)
