"""Pallas Mosaic GPU flash attention (FlashAttention-3 style): jax.experimental.pallas.ops.gpu.attention_mgpu.

What the kernel's source says (jax 0.10.2 and 0.11.2 alike), and the rules that follow from it:
- q, k, v in (B, T, N, H) / (B, S, K, H); each query head reads KV head n // (N / K): GQA and MQA natively;
- it applies no softmax scale: the timed call multiplies K (or Q, whichever is smaller) by 1/sqrt(H) first;
- float16 only: its shared-memory buffers are float16, so bfloat16 inputs fail in wgmma (mixed input dtypes);
- head_dim a multiple of 64; each grid step runs two compute warpgroups of block_q rows, so T must divide by
  2 * block_q, and S by block_kv; max_concurrent_steps buffers of K and V must fit in shared memory (block_kv 128
  with 4 steps at H=128 does not: a compile error, so a skipped candidate);
- the causal mask is top-left (key j <= query i) and the KV loop stops at the query block, so causal needs T <= S;
- its backward (custom_vjp) needs backward block sizes and raises NotImplementedError for causal;
- `use_schedule_barrier` is read only by attention_with_pipeline_emitter (non-causal, forward only: it has no vjp),
  so that kernel is a candidate of its own in non-causal forward cells, with the barrier on and off;
- Hopper only (wgmma, sm_90a).
jax 0.11 deprecated jax.experimental.pallas.ops.gpu in favour of tokamax: legacy (pallas_triton.LEGACY).
"""

from __future__ import annotations

import math
from typing import Any

from runner.machine import BLACKWELL, HOPPER
from runner.shape import Params
from runner.registry import Requires, Skip, Tuned, none_fits, variant
from runner.variants.pallas_triton import LEGACY, removed

PIPELINE = "pipeline_emitter"  # config["kernel"]: attention_with_pipeline_emitter instead of attention
# (block_q, block_kv) pairs jax's own tests run, each with 2 and 4 K/V buffers in flight
FORWARD = [dict(block_q=q, block_kv=kv, max_concurrent_steps=steps)
           for q, kv in ((64, 64), (64, 128), (128, 64)) for steps in (2, 4)]
EMITTER = [dict(kernel=PIPELINE, block_q=64, block_kv=128, max_concurrent_steps=2, use_schedule_barrier=barrier)
           for barrier in (True, False)]
# jax's backward tests: (block_q_dq, block_kv_dq, block_q_dkv, block_kv_dkv); the forward uses the dQ blocks
BACKWARD = [(64, 64, 64, 64), (64, 128, 128, 64), (128, 128, 128, 128)]


def configs(p: Params) -> list[dict[str, Any]]:
    """The configurations searched for this cell's pass and mask."""
    if p.pass_ == "fwd":
        return FORWARD + ([] if p.causal else EMITTER)
    compute_wgs = 2 if p.head_dim <= 128 else 1  # as jax's tests pair them
    return [dict(block_q=dq_q, block_kv=dq_kv, max_concurrent_steps=2, compute_wgs_bwd=compute_wgs, block_q_dq=dq_q,
                 block_kv_dq=dq_kv, block_q_dkv=dkv_q, block_kv_dkv=dkv_kv) for dq_q, dq_kv, dkv_q, dkv_kv in BACKWARD]


def config_problem(p: Params, config: dict[str, Any]) -> str | None:
    """Why this configuration cannot run this shape (the kernel's own divisibility checks), or None."""
    T, S = p.seq_len, p.kv_seq_len
    needs = [(T, 2 * config["block_q"], "2 x block_q", "T"), (S, config["block_kv"], "block_kv", "S")]
    if p.pass_ == "fwd_bwd":
        wgs = config["compute_wgs_bwd"]
        needs += [(T, config["block_q_dq"] * wgs, "block_q_dq x compute_wgs_bwd", "T"),
                  (S, config["block_kv_dkv"] * wgs, "block_kv_dkv x compute_wgs_bwd", "S"),
                  (T, config["block_q_dkv"], "block_q_dkv", "T"), (S, config["block_kv_dq"], "block_kv_dq", "S")]
    for length, multiple, what, axis in needs:
        if length % multiple:
            return f"{axis}={length} is not a multiple of {what} = {multiple}"
    return None


def check(p: Params) -> str | None:
    """Why pallas_mgpu declines these params, or None."""
    if p.causal and p.pass_ == "fwd_bwd":
        return "attention_mgpu's backward has no causal mask (NotImplementedError in jax 0.10.2 and 0.11.2)"
    if p.causal and p.seq_len > p.kv_seq_len:
        return f"attention_mgpu's causal KV loop stops at the query block: it needs T <= S, not T={p.seq_len} > " \
               f"S={p.kv_seq_len}"
    return none_fits("pallas_mgpu", [config_problem(p, c) for c in configs(p)])


def hopper_only(p: Params, capability: float) -> str | None:
    """Why a GPU of this compute capability cannot run the kernel (it is written for sm_90a), or None: the run's plan
    asks it, so a dry run on a B200 says the skip too."""
    if not HOPPER <= capability < BLACKWELL:
        return f"attention_mgpu is written for Hopper (wgmma, sm_90a); this GPU has compute capability " \
               f"{capability:.1f}"
    return None


def probe() -> str | None:
    """Why the kernel cannot run here (this jax no longer ships it), or None."""
    return removed("attention_mgpu")


def kernel_module():
    """jax.experimental.pallas.ops.gpu.attention_mgpu."""
    from jax.experimental.pallas.ops.gpu import attention_mgpu

    return attention_mgpu


def make_attend(p: Params, config: dict[str, Any], module) -> Any:
    """attend(q, k, v) through `module`'s attention (attention_mgpu, or a stand-in with its names) with one
    configuration; Skip if it does not fit the shape."""
    if problem := config_problem(p, config):
        raise Skip(problem)
    tuning = module.TuningConfig(causal=p.causal, **{key: value for key, value in config.items() if key != "kernel"})
    kernel = module.attention_with_pipeline_emitter if config.get("kernel") == PIPELINE else module.attention
    scale = 1 / math.sqrt(p.head_dim)
    scale_keys = p.kv_seq_len * p.kv_heads <= p.seq_len * p.heads  # the same logits; the smaller tensor is scaled

    def attend(q, k, v):
        if scale_keys:
            return kernel(q, k * scale, v, tuning)
        return kernel(q * scale, k, v, tuning)

    return attend


RULES = (
    "T a multiple of 2 x block_q (128 at least), S of block_kv (64 at least)",
    "causal needs T <= S (top-left mask); no causal fwd_bwd (the backward has no mask)",
    "Hopper only (sm_90a)",
    "no softmax scale in the kernel: K (or Q, the smaller) is multiplied by 1/sqrt(H) inside the timed call",
)


@variant("pallas_mgpu", requires=Requires(gpu=True, min_compute_capability=9.0, dtypes=("float16",),
                                          head_dim_multiple=64),
         backend="pallas_mosaic_gpu", proves=("mosaic_gpu",), check=check, gpu_check=hopper_only, rules=RULES,
         probe=probe, legacy=LEGACY)
def pallas_mgpu(p: Params):
    """Pallas Mosaic GPU flash attention (attention_mgpu, FlashAttention-3 style); its configuration searched."""
    module = kernel_module()
    return Tuned(configs(p), lambda config: make_attend(p, config, module))
