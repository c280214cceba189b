"""Real FP8 attention through JAX's cuDNN path: e4m3 Q, K, V with per-tensor scales (Hopper and newer).

JAX exposes this only in a private module (jax._src.cudnn.fused_attention_stablehlo, seen in jax
0.10 and 0.11). Everything that touches it lives here, imported only when a cell needs it; `_missing`
says why it cannot run when the module or its FP8 arguments are gone.
"""

from __future__ import annotations

import importlib
import inspect
import math

from runner.shape import Params
from runner.registry import Requires, Staged, variant

E4M3_MAX = 448.0  # largest finite float8_e4m3fn
PRIVATE = "jax._src.cudnn.fused_attention_stablehlo"  # jax's private cuDNN attention (fp8, paged, packed rows)


def _private():
    """jax's private cuDNN attention module, or None when this jax has moved or removed it."""
    try:
        return importlib.import_module(PRIVATE)
    except ImportError:
        return None


def _missing() -> str | None:
    cudnn = _private()
    if cudnn is None:
        return f"cudnn_fp8 needs {PRIVATE}, which this jax does not have"
    parameters = inspect.signature(cudnn.dot_product_attention).parameters
    if not {"use_fp8", "fp8_params"} <= set(parameters) or not hasattr(cudnn, "fp8_params_keys"):
        return "cudnn_fp8 needs the FP8 arguments of jax's private cuDNN attention, which this jax does not have"
    return None


def _quantise(x):
    """e4m3 tensor and its descale, from the tensor's amax (not unit scales)."""
    import jax.numpy as jnp

    amax = jnp.max(jnp.abs(x.astype(jnp.float32)))
    scale = E4M3_MAX / jnp.maximum(amax, 1e-12)
    return (x.astype(jnp.float32) * scale).astype(jnp.float8_e4m3fn), 1.0 / scale, amax


def _fp8_params(descale_q, descale_k, descale_v, amax_v) -> dict:
    """All 17 keys cuDNN's FP8 graph takes; the backward ones stay at 1 (forward only)."""
    import jax.numpy as jnp

    one = jnp.ones((1, 1, 1, 1), jnp.float32)
    scale_s = E4M3_MAX  # softmax probabilities are in [0, 1]: map 1 to the top of e4m3's range
    scale_o = E4M3_MAX / jnp.maximum(amax_v, 1e-12)  # |O| <= max |V|, rows of O average rows of V
    params = dict.fromkeys(_private().fp8_params_keys, one)
    params.update(
        descale_q=one * descale_q,
        descale_k=one * descale_k,
        descale_v=one * descale_v,
        scale_s=one * scale_s,
        descale_s=one / scale_s,
        scale_o=one * scale_o,
        descale_o=one / scale_o,
    )
    return params


@variant(
    "cudnn_fp8",
    requires=Requires(
        gpu=True,
        min_compute_capability=9.0,
        dtypes=("bfloat16",),
        head_dim_multiple=16,
        max_head_dim=128,
        passes=("fwd",),
    ),
    backend="cudnn",
    proves=("__cudnn$fmha",),
    fp8_baseline="cudnn",
    probe=_missing,
)
def cudnn_fp8(p: Params):
    """cuDNN FP8 flash attention (e4m3, per-tensor amax scales), via jax's private cuDNN API."""
    import jax.numpy as jnp

    cudnn = _private()
    mask = cudnn.MaskType.CAUSAL if p.causal else cudnn.MaskType.NO_MASK

    def prepare(q, k, v):
        (q8, dq, _), (k8, dk, _), (v8, dv, amax_v) = _quantise(q), _quantise(k), _quantise(v)
        return q8, k8, v8, _fp8_params(dq, dk, dv, amax_v)

    def attend(q8, k8, v8, fp8_params):
        out, _, _ = cudnn.dot_product_attention(
            q8, k8, v8, fp8_params=fp8_params, scale=1 / math.sqrt(p.head_dim), mask_type=mask, use_fp8=True
        )
        return out, fp8_params["descale_o"]

    def finish(outputs):
        out, descale_o = outputs
        return (out.astype(jnp.float32) * descale_o).astype(jnp.dtype(p.dtype))

    return Staged(prepare, attend, finish)
