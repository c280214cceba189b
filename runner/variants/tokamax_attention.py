"""tokamax's attention, one variant per implementation: the JAX team's kernel library (tokamax 0.0.17), which
replaces jax.experimental.pallas.ops.gpu (the legacy Pallas variants).

Every variant calls `tokamax.dot_product_attention(q, k, v, bias, *, is_causal, query_seq_lengths,
key_value_seq_lengths, local_window_size, logits_soft_cap, implementation=...)`. What tokamax 0.0.17's source says
(_src/ops/attention: api.py, base.py and each implementation), and the rules that follow:
- q (B, T, N, H), k (B, S, K, H), v (B, S, K, Hv): GQA and MQA natively (query head n reads KV head n // (N / K)),
  V's head dimension may differ (MLA); the logits are scaled by 1/sqrt(H) (its default);
- the causal mask is top-left (key j <= query i), a window `(left, right)` as jax.nn's (keys i - left..i + right),
  a padded batch as per-row lengths (its mask's q_end / k_end); padded query rows are undefined, as everywhere;
- the soft cap is applied after the bias, cap * tanh((s + b) / cap); the spec adds ALiBi after the cap (the
  reference: cap * tanh(s / cap) + b), so a cell with both is declined;
- mosaic: its Pallas Mosaic GPU kernels (sm80 forward; sm90 and sm100 forward and backward; on the H200 the kernel
  is `flash_attention_sm90_mosaic_gpu_kernel`) take bias, soft cap, window, lengths and Hv; inputs are cast to
  bf16 / f16 inside (cast_qkv), so a float32 cell would not run in float32;
- triton: its Pallas Triton kernel takes the same forward; its backward raises NotImplementedError for a soft cap;
- xla_chunked: jnp in chunks of 512 query by 1024 key rows (any length, any dtype, the backward by autodiff);
- cudnn: tokamax's wrapper around jax.nn.dot_product_attention(implementation="cudnn"), the cudnn variant's kernel,
  to see what the wrapper costs. It has no soft cap (NotImplementedError); it hands jax a window as a dense mask,
  which jax's cuDNN path adds as a (T, S) bias: another kernel than cudnn's sliding window, so a window is declined;
  Q, K and V are zero-padded to the larger of H and Hv.
- a serving cell (runner.paging): its requests' KV lengths as key_value_seq_lengths, a ragged (not paged)
  baseline. tokamax's causal mask and window are top-left, so a window, and T > 1 new tokens with a causal mask
  (aligned to each request's end), are declined; at T = 1 the token sees its whole request (no mask); no ALiBi
  there (its bias is built for S keys, not per request). Its kernels are prefill kernels: a single query row fills
  a block of 64 or more;
- a paged cache is declined: tokamax 0.0.17's paged attention (batched_ragged_paged_attention) has a TPU kernel
  (mosaic_tpu) and a jnp reference, no GPU kernel;
- packed rows (documents > 1): the public API takes a mask only as a dense boolean array, which the kernels read block
  by block without skipping; tokamax's own Mask (_src/ops/attention/base.py) holds per-query key ranges, `k_start`
  (inclusive) and `k_end` (exclusive) of shape (B, 1, T), which its Mosaic and Triton kernels use to skip whole key
  blocks ("a mask for two independent causal sequences" is its docstring's example). A packed cell builds that Mask
  (each query's document's first and past-the-last token, with the causal flag and the window as api.py adds them)
  and calls the implementation from api.IMPLEMENTATIONS as api.dot_product_attention does: private modules, so
  `packed_api` checks them and names what is missing;
- no determinism option (its dot_product_attention has none): a deterministic cell is declined.
- FP8 (qwix): the api takes a qwix.QArray for q, k and v. Triton's kernel reads the QArray's values and scales
  inside (pallas_triton.py: _rescale; with one scale per row of Q and of K, which a per-tensor scale is, Q·Kᵀ runs on
  the e4m3 values and the product is scaled after, quantize_qk_dot): tokamax_triton_fp8 quantises Q, K and V
  (untimed) with qwix.quantize(x, float8_e4m3fn), one absmax scale per tensor as cudnn_fp8 does, forward only, its
  baseline tokamax_triton. Mosaic's prepare_inputs dequantizes before the kernel ("TODO: Support in-kernel
  dequantization"), so tokamax_mosaic_fp8 declines every cell with that reason.
Untuned: each call uses the implementation's heuristic configuration (tokamax logs an autotuning cache miss).
Tuned (a cell with `tune: true`, mosaic and triton: the implementations with configurations to search; xla_chunked
and cudnn have none): `tokamax.autotune(fn, *args, ignore_cache=True)` on the timed call (under fwd_bwd that holds
the forward op and its vjp op, both tuned) returns an AutotuningResult, which serialises with `dumps()` /
`AutotuningResult.loads` (JSON) and is applied as a context (`with result:`, an overlay on tokamax's autotuning
cache) while the call is traced; the chosen config is each op's `fastest_config` (lowest median), and the lowered
program carries the config each op was lowered with (tokamax's hlo_utils.get_opspecs), checked against the choice.
"""

from __future__ import annotations

import functools
from types import MappingProxyType

from runner import masks, paging
from runner.machine import AFTER_BLACKWELL, HOPPER
from runner.shape import Params
from runner.registry import Autotuned, Requires, Skip, Staged, first_line, variant
from runner.variants.pallas_triton import TRITON_CALLS

PACKAGE = dict(package="tokamax", install="pip install 'attnbench[tokamax]' (Python >= 3.12, jax >= 0.11.1)")
ALL_OPTIONS = ("window", "fill", "bias", "softcap", "v_head_dim", "kv_lengths", "documents")
WHY_NOT = MappingProxyType({"page_size": "tokamax 0.0.17's paged attention (batched_ragged_paged_attention) runs on "
                                          "TPU only (mosaic_tpu, and a jnp reference)",
                             "deterministic": "tokamax.dot_product_attention has no determinism option"})
FLASH = dict(gpu=True, min_compute_capability=8.0, dtypes=("bfloat16", "float16"), options=ALL_OPTIONS + ("tune",),
             why_not=WHY_NOT, **PACKAGE)
NOTHING_TO_TUNE = "tokamax's {} implementation has no configurations to tune"
CAP_AFTER_BIAS = "tokamax caps the logits after adding the bias, cap * tanh((s + b) / cap); the spec adds ALiBi " \
                 "after the cap"


def probe() -> str | None:
    """Why tokamax does not import here (it imports xprof, and through it more, at import time), or None."""
    try:
        import tokamax  # noqa: F401
    except Exception as error:  # ImportError for a missing dependency, or whatever its import raises
        return f"tokamax does not import here: {first_line(error, 300)}"
    return None


def serving_check(p: Params) -> str | None:
    """Why every tokamax variant declines this serving cell, or None (or None when it is not one)."""
    if not paging.end_aligned_mask(p):
        return None  # its mask is one a top-left mask states (no window; causal only at T = 1)
    if p.window is not None:
        return "tokamax's window stands at the query's row from the top left; a serving cell's new tokens stand at " \
               "each request's end"
    return f"tokamax's causal mask is top-left; a serving cell's T={p.seq_len} new tokens need it aligned to each " \
           "request's end"


def check(p: Params) -> str | None:
    """Why every tokamax variant declines these params, or None."""
    if p.bias != "none" and p.softcap is not None:
        return f"{CAP_AFTER_BIAS}: a cell with both would not compute the reference's logits"
    return serving_check(p)


def triton_check(p: Params) -> str | None:
    """Why tokamax_triton declines these params, or None."""
    if p.pass_ == "fwd_bwd" and p.softcap is not None:
        return "tokamax's Triton backward raises NotImplementedError for a logit soft cap"
    return check(p)


def attention(p: Params, implementation: str):
    """attend(q, k, v) through tokamax.dot_product_attention(implementation=...) with the cell's mask and logits."""
    import jax.numpy as jnp
    import tokamax

    from runner.variants.jax_attention import alibi_bias, seq_lengths, top_left_causal, window_size

    if masks.packed(p):
        return packed_attention(p, implementation)
    q_lengths, kv_lengths = seq_lengths(p)
    attend = functools.partial(tokamax.dot_product_attention, is_causal=top_left_causal(p), query_seq_lengths=q_lengths,
                               key_value_seq_lengths=kv_lengths, local_window_size=window_size(p),
                               logits_soft_cap=p.softcap, implementation=implementation)
    if p.bias == "none":
        return attend
    bias_dtype = jnp.dtype(p.dtype) if implementation == "cudnn" else jnp.float32  # jax's cuDNN path: q's dtype

    def biased(q, k, v):
        return attend(q, k, v, bias=alibi_bias(p, bias_dtype))

    return biased


def packed_api():
    """tokamax's private (api, base) modules that a packed cell calls, or Skip naming what this tokamax lacks."""
    import inspect

    try:
        from tokamax._src.ops.attention import api, base
    except ImportError as error:
        raise Skip(f"packed rows on tokamax need its private attention modules: {error}") from None
    # what Mask(...) takes, not its dataclass fields: 0.0.17 keeps is_causal as a causal_mask field and a property
    takes = set(inspect.signature(base.Mask).parameters)
    if not hasattr(api, "IMPLEMENTATIONS") or not {"k_start", "k_end", "is_causal"} <= takes:
        raise Skip("packed rows on tokamax need api.IMPLEMENTATIONS and a Mask with k_start / k_end, which this "
                   "tokamax does not have")
    return api, base


def document_ranges(p: Params) -> tuple:
    """(k_start, k_end), (B, 1, T) int32: the first and past-the-last token of each query's document
    (masks.document_spans)."""
    first, end = masks.document_spans(p)
    return first[:, None], end[:, None]


def packed_attention(p: Params, implementation: str):
    """attend(q, k, v) over packed rows: the implementation called with tokamax's Mask of each query's document."""
    import jax.numpy as jnp

    from runner.variants.jax_attention import alibi_bias, window_size

    api, base = packed_api()
    name = "mosaic_gpu" if implementation == "mosaic" else implementation
    starts, ends = document_ranges(p)

    def attend(q, k, v):
        mask = base.Mask(k_start=jnp.asarray(starts), k_end=jnp.asarray(ends), is_causal=p.causal)
        if (window := window_size(p)) is not None:  # as api.py adds local_window_size
            rows = jnp.arange(p.seq_len)
            mask &= base.Mask(k_start=rows - window[0], k_end=rows + window[1] + 1)
        bias = alibi_bias(p, jnp.float32) if p.bias != "none" else None
        return api.IMPLEMENTATIONS[name](q, k, v, bias=bias, mask=mask, logits_soft_cap=p.softcap)

    return attend


def config_dict(config) -> dict:
    """A tokamax config (a pydantic dataclass) as JSON values."""
    import pydantic

    return pydantic.TypeAdapter(type(config)).dump_python(config, mode="json") if config is not None else {}


def op_name(bound, taken: dict) -> str:
    """The op's snake_case name, numbered where the call holds two of that op."""
    import tokamax

    name = tokamax.snake_case_name(bound.op)
    return name if name not in taken else f"{name}#{sum(key.split('#')[0] == name for key in taken) + 1}"


def tune(fn, args: tuple) -> str:
    """tokamax.autotune on the timed call, on this GPU (tokamax's shipped table ignored), as JSON; errors pruned."""
    import tokamax

    result = tokamax.autotune(fn, *args, ignore_cache=True, progress_bar=False)
    if not result.data:
        raise RuntimeError("tokamax.autotune found no tokamax op to tune in the call")
    return result.dumps(prune_errors=True)


def applied(text: str):
    """The tuning in force while a call is traced: tokamax's AutotuningResult, a context manager."""
    import tokamax

    return tokamax.AutotuningResult.loads(text)


def chosen(text: str) -> tuple[dict, list[dict]]:
    """(each op's fastest config by op name, every config timed with its median) from autotune's JSON."""
    import tokamax

    config, candidates = {}, []
    for bound, data in tokamax.AutotuningResult.loads(text).data:
        name = op_name(bound, config)
        config[name] = config_dict(data.fastest_config)
        candidates += [dict(config={"op": name, **config_dict(tried)}, status="ok",
                            median_s=timing.median_evaluation_time_ms / 1e3) for tried, timing in data.items()]
    return config, candidates


def in_force(lowered) -> dict:
    """The config each tokamax op of a lowered call carries (tokamax writes it into the program), by op name."""
    from tokamax._src import hlo_utils

    found = {}
    for bound in hlo_utils.get_opspecs(lowered):
        found[op_name(bound, found)] = config_dict(bound.op.config)
    return found


def tuned(p: Params, attend):
    """attend, or for a `tune: true` cell the same call tuned by tokamax.autotune for its shape first."""
    return Autotuned(attend, "tokamax.autotune", tune, applied, chosen, in_force) if p.tune else attend


def backward_gpu_check(p: Params, capability: float) -> str | None:
    """Why tokamax_mosaic declines a fwd_bwd cell on a GPU of this compute capability (its backward kernels are sm90
    and sm100 only), or None."""
    if p.pass_ == "fwd_bwd" and not HOPPER <= capability < AFTER_BLACKWELL:  # sm90 up to sm10x
        return f"tokamax's Mosaic GPU backward runs on sm90 and sm100 only; this GPU has compute capability " \
               f"{capability:.1f}"
    return None


RULES = ("Q, K and V cast to bf16 / f16 inside the kernel (no float32 kernel)",
         "bias and soft cap not together (tokamax caps after the bias)")


@variant("tokamax_mosaic", requires=Requires(**FLASH), backend="pallas_mosaic_gpu", proves=("mosaic_gpu",),
         check=check, gpu_check=backward_gpu_check, rules=RULES + ("fwd_bwd on sm90 / sm100 only",), probe=probe)
def tokamax_mosaic(p: Params):
    """tokamax's Pallas Mosaic GPU flash-attention kernel, implementation="mosaic"."""
    return tuned(p, attention(p, "mosaic"))


@variant("tokamax_triton", requires=Requires(**FLASH), backend="pallas_triton", proves=TRITON_CALLS,
         check=triton_check, rules=RULES + ("no soft cap under fwd_bwd",), probe=probe)
def tokamax_triton(p: Params):
    """tokamax's Pallas Triton flash-attention kernel, implementation="triton"."""
    return tuned(p, attention(p, "triton"))


@variant("tokamax_xla_chunked", requires=Requires(options=ALL_OPTIONS, **PACKAGE, why_not=MappingProxyType(
            {**WHY_NOT, "tune": NOTHING_TO_TUNE.format("xla_chunked")})), backend="xla",
         check=check, rules=("bias and soft cap not together (tokamax caps after the bias)",), probe=probe)
def tokamax_xla_chunked(p: Params):
    """No kernel of tokamax's own: jnp over 512 x 1024 chunks, compiled by XLA, implementation="xla_chunked"."""
    return attention(p, "xla_chunked")


CUDNN_WHY_NOT = MappingProxyType({
    "softcap": "tokamax's cuDNN path (jax.nn.dot_product_attention) raises NotImplementedError for a soft cap",
    "window": "tokamax hands jax's cuDNN path a window as a dense mask, added as a (T, S) bias: not the cudnn "
              "variant's sliding-window kernel",
    "documents": "tokamax hands jax's cuDNN path a packed row as a dense mask, added as a (B, 1, T, S) bias: the "
                 "cudnn variant packs rows through cuDNN's segment offsets instead",
    "deterministic": WHY_NOT["deterministic"]})


def cudnn_check(p: Params) -> str | None:
    """Why tokamax_cudnn declines these params, or None."""
    if p.v_head_dim > 128:
        return f"tokamax pads Q, K and V to the larger head dimension for jax's cuDNN path (at most 128), here " \
               f"Hv={p.v_head_dim}"
    return serving_check(p)


CUDNN = Requires(gpu=True, min_compute_capability=8.0, dtypes=("bfloat16", "float16"), head_dim_multiple=8,
                 max_head_dim=128, options=("fill", "bias", "v_head_dim", "kv_lengths"),
                 why_not=MappingProxyType({**CUDNN_WHY_NOT, **WHY_NOT,
                                           "tune": NOTHING_TO_TUNE.format("cudnn") + " (its config is NullConfig)"}),
                 **PACKAGE)


@variant("tokamax_cudnn", requires=CUDNN,
         backend="cudnn", proves=("__cudnn$fmha",), check=cudnn_check,
         rules=("Q, K and V zero-padded to the larger of H and Hv, at most 128",), probe=probe)
def tokamax_cudnn(p: Params):
    """cuDNN's fused flash-attention kernel (the cudnn variant's) through tokamax's wrapper, implementation="cudnn"."""
    return attention(p, "cudnn")


# FP8 through qwix (the module's docstring): V is rescaled in Triton's kernel to the scales' dtype (bf16) before P·V.
FP8_OPTIONS = ("window", "fill", "bias", "softcap", "v_head_dim")
MOSAIC_DEQUANTIZES = "tokamax 0.0.17's Mosaic GPU path dequantizes a quantized Q, K and V to bf16 before its kernel " \
                     "(pallas_mosaic_gpu_common.prepare_inputs, a TODO for in-kernel dequantization): it would time " \
                     "bf16 attention behind a dequantize, not FP8 attention"


def quantised(x):
    """x as a qwix QArray: e4m3 values and one absmax scale for the whole tensor (scale = amax / 448, bf16)."""
    import jax.numpy as jnp
    import qwix

    return qwix.quantize(x, jnp.float8_e4m3fn)


@variant("tokamax_triton_fp8", requires=Requires(gpu=True, min_compute_capability=8.9, dtypes=("bfloat16",),
                                                 passes=("fwd",), options=FP8_OPTIONS, why_not=WHY_NOT, **PACKAGE),
         backend="pallas_triton", proves=TRITON_CALLS, fp8_baseline="tokamax_triton", check=check,
         rules=("bias and soft cap not together (tokamax caps after the bias)",), probe=probe, fp8_matmuls=("qk",))
def tokamax_triton_fp8(p: Params):
    """tokamax's Triton kernel on qwix QArrays (e4m3, per-tensor scales): Q·Kᵀ in FP8, P·V in bf16.

    The kernel rescales V to bf16 before P·V (pallas_triton.py's _rescale), so its MMA peak mixes the two rates."""
    import jax.numpy as jnp

    attend = attention(p, "triton")

    def prepare(q, k, v):
        return quantised(q), quantised(k), quantised(v)

    def finish(out):
        return out.astype(jnp.dtype(p.dtype))

    return Staged(prepare, attend, finish)


def mosaic_fp8_check(p: Params) -> str | None:
    """tokamax_mosaic_fp8 declines every cell: its kernel would not read FP8."""
    return MOSAIC_DEQUANTIZES


@variant("tokamax_mosaic_fp8", requires=Requires(gpu=True, min_compute_capability=9.0, dtypes=("bfloat16",),
                                                 passes=("fwd",), **PACKAGE),
         backend="pallas_mosaic_gpu", fp8_baseline="tokamax_mosaic", check=mosaic_fp8_check,
         rules=("declines every cell: tokamax's Mosaic GPU path dequantizes FP8 before its kernel",), probe=probe)
def tokamax_mosaic_fp8(p: Params):
    """tokamax's Mosaic GPU kernel on qwix QArrays: declined, tokamax dequantizes them before the kernel."""
    raise Skip(MOSAIC_DEQUANTIZES)
