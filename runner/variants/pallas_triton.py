"""Pallas Triton flash attention: jax.experimental.pallas.ops.gpu.attention.mha, its block sizes searched per shape.

What the kernel's source says (jax 0.10.2 and 0.11.2 alike), and the rules that follow from it:
- q, k, v in (B, T, N, H); K and V need as many heads as Q, so for GQA and MQA the timed call repeats each KV head
  to its query heads first (jnp.repeat; its gradient sums them back);
- `sm_scale` is applied inside (1/sqrt(H) here); the head dimension is padded to a power of two and masked;
- each block is min(block, T) rows: T must divide by block_q and S by block_k, and Triton's dot needs 16 rows;
- the causal mask is top-left (key j <= query i) and the loop runs to the query block's end, so causal needs T <= S;
- its backward is one fused Triton kernel whose grid walks K blocks and Q blocks together: T / block_q_dq must
  equal S / block_kv_dkv.
jax 0.11 deprecated jax.experimental.pallas.ops.gpu in favour of tokamax: the three Pallas variants are legacy
(LEGACY says so in `attnbench list`, the manifest and the leaderboard, and Python's own filter shows its
DeprecationWarning where it shows any), and once jax no longer ships a module its variant declines with that reason.
"""

from __future__ import annotations

import functools
import importlib.util
import math
from typing import Any, Callable

from runner.shape import Params
from runner.registry import Requires, Skip, Tuned, none_fits, variant

# Custom-call targets of a Pallas Triton kernel: "__gpu$xla.gpu.triton" (jax 0.11.2, and 0.10.2 with jaxlib <= 0.10.2),
# "triton_kernel_call_ffi" (jax 0.10.2's path for a newer jaxlib). Shared with pallas_decode, the same backend.
TRITON_CALLS = ("__gpu$xla.gpu.triton", "triton_kernel_call")
LEGACY = ("jax 0.11 deprecated jax.experimental.pallas.ops.gpu (July 2026); its replacement is tokamax "
          "(tokamax_triton, tokamax_mosaic)")
MIN_BLOCK = 16  # Triton's dot needs at least 16 rows
FORWARD = [dict(block_q=q, block_k=k) for q in (64, 128) for k in (64, 128)]
# The forward's block, then the backward's (block_q_dkv, block_kv_dkv, block_q_dq, block_kv_dq): the kernel's
# default (32s), 64s, and the Triton tutorial's pairing (dK/dV: 32 Q rows over 64 K rows; dQ: the transpose).
BACKWARD = [(32, 32, 32, 32), (64, 64, 64, 64), (32, 64, 64, 32)]
BACKWARD_KEYS = ("block_q_dkv", "block_kv_dkv", "block_q_dq", "block_kv_dq")


def configs(p: Params) -> list[dict[str, int]]:
    """The block sizes searched: four forward tilings, or one forward tiling with three backward ones."""
    if p.pass_ == "fwd":
        return [dict(c, num_stages=2) for c in FORWARD]
    return [dict(block_q=128, block_k=64, num_stages=2, **dict(zip(BACKWARD_KEYS, b))) for b in BACKWARD]


def _divides(length: int, block: int, what: str, axis: str) -> str | None:
    rows = min(block, length)
    if rows < MIN_BLOCK:
        return f"{what}={block} gives blocks of {rows} rows at {axis}={length}; Triton's dot needs {MIN_BLOCK}"
    return None if length % rows == 0 else f"{axis}={length} is not a multiple of {what}={rows}"


def config_problem(p: Params, config: dict[str, Any]) -> str | None:
    """Why this configuration cannot run this shape (the kernel's own divisibility asserts), or None."""
    T, S = p.seq_len, p.kv_seq_len
    checks = [(T, "block_q", "T"), (S, "block_k", "S")]
    if p.pass_ == "fwd_bwd":
        checks += [(T, "block_q_dkv", "T"), (S, "block_kv_dkv", "S"), (T, "block_q_dq", "T"), (S, "block_kv_dq", "S")]
    for length, key, axis in checks:
        if problem := _divides(length, config[key], key, axis):
            return problem
    if p.pass_ == "fwd_bwd" and T // min(config["block_q_dq"], T) != S // min(config["block_kv_dkv"], S):
        return "the fused backward needs T / block_q_dq == S / block_kv_dkv"
    return None


def check(p: Params) -> str | None:
    """Why pallas_triton declines these params, or None."""
    if p.causal and p.seq_len > p.kv_seq_len:
        return f"pallas_triton's causal loop runs to the query block's end: it needs T <= S, not T={p.seq_len} > " \
               f"S={p.kv_seq_len}"
    return none_fits("pallas_triton", [config_problem(p, c) for c in configs(p)])


def power_of_two(n: int) -> bool:
    return n > 0 and not n & (n - 1)


def whole_heads(name: str, head_dim: int) -> str | None:
    """Why `name`, a Triton kernel that loads whole heads as blocks, declines this head_dim, or None: Triton's blocks
    are powers of two, of at least MIN_BLOCK rows."""
    if head_dim < MIN_BLOCK or not power_of_two(head_dim):
        return f"{name} loads whole heads as Triton blocks: head_dim a power of two >= {MIN_BLOCK}, not {head_dim}"
    return None


def removed(module: str, legacy: str = LEGACY) -> str | None:
    """Why a legacy variant cannot run here: this jax no longer ships jax.experimental.pallas.ops.gpu.`module`."""
    name = f"jax.experimental.pallas.ops.gpu.{module}"
    try:
        shipped = importlib.util.find_spec(name) is not None
    except ImportError:  # a parent package is gone too, or fails to import
        shipped = False
    return None if shipped else f"this jax no longer ships {name} ({legacy})"


def kernel_module():
    """jax.experimental.pallas.ops.gpu.attention (deprecated in jax 0.11: LEGACY)."""
    from jax.experimental.pallas.ops.gpu import attention

    return attention


def make_attend(p: Params, config: dict[str, Any], mha: Callable) -> Callable:
    """attend(q, k, v) through `mha` (attention.mha, or a stand-in) with one block configuration; Skip if it does
    not fit the shape."""
    if problem := config_problem(p, config):
        raise Skip(problem)
    import jax.numpy as jnp

    block_keys = ("block_q", "block_k") + (BACKWARD_KEYS if p.pass_ == "fwd_bwd" else ())
    blocks = kernel_module().BlockSizes(**{key: config[key] for key in block_keys})
    kernel = functools.partial(mha, segment_ids=None, sm_scale=1 / math.sqrt(p.head_dim), causal=p.causal,
                               block_sizes=blocks, num_stages=config["num_stages"])
    groups = p.heads // p.kv_heads

    def attend(q, k, v):
        if groups > 1:  # k, v: [B, S, K, H] -> [B, S, N, H], each KV head beside its query heads
            k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
        return kernel(q, k, v)

    return attend


RULES = (
    "T and S of at least 16, each a multiple of the configuration's blocks",
    "causal needs T <= S (top-left mask)",
    "GQA/MQA: K and V repeated to the query heads inside the timed call (the kernel takes no grouped heads)",
)


@variant("pallas_triton", requires=Requires(gpu=True, min_compute_capability=8.0, dtypes=("bfloat16", "float16")),
         backend="pallas_triton", proves=TRITON_CALLS, check=check, rules=RULES,
         probe=functools.partial(removed, "attention"), legacy=LEGACY)
def pallas_triton(p: Params):
    """Pallas Triton flash attention (attention.mha, sm_scale 1/sqrt(H)); block sizes searched per shape."""
    mha = kernel_module().mha
    return Tuned(configs(p), lambda config: make_attend(p, config, mha))
