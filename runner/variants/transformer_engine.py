"""NVIDIA TransformerEngine's flax DotProductAttention, plain and under TE's FP8 autocast (the lab's cells).

TE links its own cuDNN (the system's, or its wheel's) and must load before JAX starts its GPU backend, which
loads the cuDNN of JAX's wheels; one process cannot hold both. So TE's variants run in a worker of their own
("transformer_engine"), whose preload imports TE first, and the other variants keep JAX's cuDNN.

What TE's flax DotProductAttention takes (transformer_engine 2.20.2, the runner image's pin): a window as
`window_size=(left, right)`, keys i - left..i + right inclusive ((W - 1, 0) causal, (W - 1, W - 1) not); a padded
batch as a SequenceDescriptor of (query, key/value) lengths with attn_mask_type "padding" / "padding_causal" (no
dense mask); a bias tensor as "post_scale_bias" (ALiBi, dense (1, N, T, S), built inside the call); V's head
dimension read from V. It has no logit soft cap (its experimental cuDNN score_mod aside), so softcap is declined.
A packed row (documents > 1) is TE's sequence packing: qkv_layout "thd_thd_thd" with max_segments_per_seq = D and a
SequenceDescriptor.from_segment_ids_and_pos of the row's document ids (from 1; 0 would be padding) and each token's
position in its document, mask "padding_causal" / "padding" (read at TE's main branch, 2.20.0.dev0); a deterministic
backward is TE's NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, which the runner sets while it lowers the cell.
TE's fused-attention backend table (transformer_engine/common/fused_attn/fused_attn.cpp, nvte_get_fused_attn_backend:
the same at v2.18.0 and at main's 2.20.0.dev0 of August 2026, lines 310-353 and 418-430; the image's 2.20.2 tag is not
in the code index) gives the THD (packed) layout a kernel only where sm_arch_ >= 90, and head_dim or V's past 128 in
training only to some shapes on some GPUs (trains_wide): before Hopper te and te_fp8 decline packed rows, as cudnn
does its packed path, and every TE variant declines the fwd_bwd the table has no kernel for (gpu_check).
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

from runner import masks
from runner.machine import AFTER_BLACKWELL, BLACKWELL, HOPPER
from runner.shape import Params
from runner.registry import Requires, Skip, first_line, variant

WORKER = "transformer_engine"


def preload() -> None:
    """Import TE and its libraries (curand, nvrtc, cuDNN...); any failure makes TE's cells skipped with why."""
    try:
        import transformer_engine.jax  # noqa: F401
        import transformer_engine.jax.flax  # noqa: F401
    except Exception as error:  # ImportError, OSError, RuntimeError('curand shared object not found'), ...
        raise Skip(f"TransformerEngine does not load here: {first_line(error, 300)}") from None


TE = dict(gpu=True, dtypes=("bfloat16", "float16"), head_dim_multiple=8, package="transformer_engine",
          options=("window", "fill", "bias", "v_head_dim"),
          why_not=MappingProxyType({"softcap": "TE's flax DotProductAttention takes no logit soft cap"}))
ONE_DEVICE = dict(TE, options=TE["options"] + ("documents", "deterministic"))  # packing and determinism: te, te_fp8
RULES = dict(backend="transformer_engine", proves=("te_fused_attn",), worker=WORKER, preload=preload)


def check(p: Params) -> str | None:
    """Why TE's variants decline these params, or None."""
    if masks.packed(p) and p.bias != "none":
        return "TE's packed (THD) path is built without a bias here"
    return None


def gpu_check(p: Params, capability: float) -> str | None:
    """Why TE's variants decline these params on a GPU of this compute capability (its backend table has no fused
    kernel for them), or None."""
    if masks.packed(p) and capability < HOPPER:
        return f"TE's fused attention packs rows (THD layout) on Hopper or newer only; this GPU has compute " \
               f"capability {capability:.1f}"
    if p.pass_ == "fwd_bwd" and max(p.head_dim, p.v_head_dim) > 128 and not trains_wide(p, capability):
        return f"TE's fused attention has no training kernel for H={p.head_dim} / Hv={p.v_head_dim} on compute " \
               f"capability {capability:.1f}"
    return None


def trains_wide(p: Params, capability: float) -> bool:
    """Whether TE's backend table trains head_dim or V's past 128 on this GPU, with the image's cuDNN (9.28):
    nvte_get_fused_attn_backend in transformer_engine/common/fused_attn/fused_attn.cpp, lines 310-353 at v2.18.0
    and at main's 2.20.0.dev0 of August 2026. cuDNN 9.5: up to 256 on sm90 alone (sm_arch_ == 90), less 9.11's
    exclusion there of 128 <= d_qk != d_v >= 128 but 192 / 128; 9.11: 192 / 128 from sm100; 9.23: 256 / 256 on
    sm10x (100 <= sm_arch_ < 110) without a bias, and with a window only where causal."""
    shape = p.head_dim, p.v_head_dim
    if shape == (192, 128):
        return capability >= HOPPER
    if capability == HOPPER:
        return max(shape) <= 256 and (shape[0] == shape[1] or min(shape) < 128)
    if BLACKWELL <= capability < AFTER_BLACKWELL:  # sm10x
        return shape == (256, 256) and p.bias == "none" and (p.window is None or p.causal)
    return False


WIDE_RULE = "fwd_bwd with head_dim or V's past 128: up to 256 on sm90 (but not 128 <= H != Hv >= 128 other than " \
            "192 / 128), 192 / 128 from sm100, 256 / 256 on sm10x without ALiBi or a non-causal window"
PACKED_RULES = dict(check=check, gpu_check=gpu_check,
                    rules=("packed rows without ALiBi", "packed rows on Hopper or newer", WIDE_RULE))


def _attention(p: Params, fp8: bool):
    import jax
    import jax.numpy as jnp
    from transformer_engine.jax.flax import DotProductAttention

    from runner.variants.jax_attention import window_size

    padded, packed = masks.padded_lengths(p), masks.packed(p)
    padding = padded or packed
    mask = ("padding_causal" if p.causal else "padding") if padding else ("causal" if p.causal else "no_mask")
    layout = dict(qkv_layout="thd_thd_thd", max_segments_per_seq=p.documents) if packed else {}
    module = DotProductAttention(
        head_dim=p.head_dim,
        num_attention_heads=p.heads,
        num_gqa_groups=p.kv_heads,
        attn_mask_type=mask,
        transpose_batch_sequence=False,
        window_size=window_size(p),
        **layout,
    )
    dtype = jnp.dtype(p.dtype)
    q = jnp.zeros((p.batch, p.seq_len, p.heads, p.head_dim), dtype)
    k = jnp.zeros((p.batch, p.kv_seq_len, p.kv_heads, p.head_dim), dtype)
    v = jnp.zeros((p.batch, p.kv_seq_len, p.kv_heads, p.v_head_dim), dtype)

    def extra() -> dict:  # traced again inside each call, so its arrays are the call's constants
        return _extra(p, padded, dtype)

    variables = jax.jit(lambda key: module.init(key, q, k, v, **extra()))(jax.random.PRNGKey(0))  # .init once

    def attend(q, k, v):
        if not fp8:
            return module.apply(variables, q, k, v, deterministic=True, **extra())
        with _autocast():
            return module.apply(variables, q, k, v, deterministic=True, **extra())

    return attend


def _extra(p: Params, padded, dtype) -> dict:
    """The call's sequence descriptor (padded batch) and bias (ALiBi), where the cell has them."""
    import jax.numpy as jnp

    extra = {}
    if masks.packed(p):
        from transformer_engine.jax.attention import SequenceDescriptor

        ids, positions = (jnp.asarray(x) for x in packed_segments(p))
        extra["sequence_descriptor"] = SequenceDescriptor.from_segment_ids_and_pos((ids, ids), (positions, positions))
    if padded:
        from transformer_engine.jax.attention import SequenceDescriptor

        extra["sequence_descriptor"] = SequenceDescriptor.from_seqlens(
            tuple(jnp.asarray(x, jnp.int32) for x in padded))
    if p.bias == "alibi":
        from runner.variants.jax_attention import alibi_bias

        extra["bias"] = alibi_bias(p, dtype)
    return extra


def packed_segments(p: Params):
    """TE's segment ids (each token's document, from 1) and segment positions (its place in that document), [B, T]:
    masks.segment_ids and masks.document_spans' first token."""
    first, _ = masks.document_spans(p)
    return masks.segment_ids(p) + 1, (np.arange(p.seq_len) - first).astype(np.int32)


def _autocast():
    """The lab's FP8 cell: te.autocast with DelayedScaling(HYBRID, amax history 1024, max)."""
    import transformer_engine.jax as te
    from transformer_engine.common.recipe import DelayedScaling, Format

    recipe = DelayedScaling(margin=0, fp8_format=Format.HYBRID, amax_history_len=1024, amax_compute_algo="max")
    return te.autocast(enabled=True, recipe=recipe)


@variant("te", requires=Requires(min_compute_capability=8.0, **ONE_DEVICE), **PACKED_RULES, **RULES)
def te(p: Params):
    """TransformerEngine flax DotProductAttention (fused cuDNN attention through TE)."""
    return _attention(p, fp8=False)


@variant("te_fp8", requires=Requires(min_compute_capability=8.9, **ONE_DEVICE), fp8_baseline="te", **PACKED_RULES,
         **RULES)
def te_fp8(p: Params):
    """The same module under te.autocast(DelayedScaling): the record says whether FP8 reached attention."""
    return _attention(p, fp8=True)
