"""Context parallelism: one attention call with its sequence split across the cell's `devices` (a 1-D mesh, "cp").

Each variant places Q, K, V (and dO) with the sequence axis sharded across the mesh before the timed call, and
gathers the output onto the first device after it (untimed, Staged): the timed program is the distributed
attention alone, collectives included, as a training step would run it. Three ways to split the work:

  ring     from scratch in shard_map: each device keeps its queries and passes its K/V block round the ring with
           ppermute, merging blocks a key chunk at a time with an online softmax (the baseline; causal blocks are
           masked, not skipped);
           its twin without ppermute times the compute alone (runner/communication.py)
  xla_cp   jax.nn.dot_product_attention on the sharded inputs: XLA's SPMD partitioner decides the collectives
  te_cp_*  TransformerEngine's fused attention with its own context parallelism (all-gather or ring of K/V),
           the causal mask load balanced by TE's dual-chunk swap
"""

from __future__ import annotations

import dataclasses
import functools
import math

from runner.shape import Params
from runner.registry import Requires, Staged, variant
from runner.variants.jax_attention import XLA_SCORES
from runner.variants.transformer_engine import RULES as TE_RULES
from runner.variants.transformer_engine import TE, WIDE_RULE, gpu_check

AXIS = "cp"
MOST = 8  # a node's GPUs
SPLIT = Requires(max_devices=MOST)
KEY_CHUNK = 2048  # keys the ring merges at a time (the largest power of two up to it that divides S / devices)


def _mesh(p: Params):
    import jax
    import numpy as np
    from jax.sharding import Mesh

    return Mesh(np.array(jax.devices()[: p.devices]), (AXIS,))


def _split(p: Params):
    """The sharding of a [B, T, N, H] tensor split along T across the cell's mesh: [B, T/D, N, H] on each device."""
    from jax.sharding import NamedSharding, PartitionSpec

    return NamedSharding(_mesh(p), PartitionSpec(None, AXIS, None, None))


def _placed(p: Params, attend, reorder=None, restore=None) -> Staged:
    """attend on inputs sharded along the sequence (reordered first, where a strategy balances the causal mask),
    its outputs restored to sequence order and gathered on the first device afterwards."""
    import jax
    from jax.sharding import SingleDeviceSharding

    split = _split(p)
    reorder, restore = reorder or (lambda x: x), restore or (lambda x: x)
    prepare = jax.jit(lambda *inputs: tuple(reorder(x) for x in inputs), out_shardings=split)
    restored = jax.jit(lambda outputs: jax.tree.map(restore, outputs))
    first = SingleDeviceSharding(jax.devices()[0])  # where the reference is
    return Staged(prepare, attend, lambda outputs: jax.device_put(restored(outputs), first))


def _block(carry, q, k, v, q_start, k_start, causal: bool):
    """Merge one K/V block into the running (max, sum, weighted values) of an online softmax, in float32."""
    import jax
    import jax.numpy as jnp

    # q: [B, Tq, K, G, H]; k, v: [B, Sk, K, H]; carry: m, l [B, K, G, Tq], acc [B, K, G, Tq, H]
    m, l, acc = carry
    scores = jnp.einsum("btkgh,bskh->bkgts", q, k, preferred_element_type=jnp.float32) / math.sqrt(q.shape[-1])
    if causal:  # top-left aligned, by global position
        rows, cols = q_start + jnp.arange(q.shape[1]), k_start + jnp.arange(k.shape[1])
        scores = jnp.where(cols[None, :] <= rows[:, None], scores, -jnp.inf)
    # the running max is only a shift that cancels in out = acc / l, so it carries no gradient
    m_new = jax.lax.stop_gradient(jnp.maximum(m, scores.max(-1)))
    shift = jnp.where(jnp.isfinite(m_new), m_new, 0.0)  # a row that has seen no visible key yet
    weights = jnp.exp(scores - shift[..., None])
    scale = jnp.exp(m - shift)
    values = jnp.einsum("bkgts,bskh->bkgth", weights.astype(v.dtype), v, preferred_element_type=jnp.float32)
    return m_new, l * scale + weights.sum(-1), acc * scale[..., None] + values


def _merge(carry, qg, k, v, q_start, k_start, causal: bool, chunk: int):
    """Merge a K/V block `chunk` keys at a time (a scan, each step rematerialised under the backward pass), so a
    device holds one chunk's scores, not the block's: [B, N, T/D, chunk] float32."""
    import jax
    import jax.numpy as jnp

    batch, keys, kv_heads, head_dim = k.shape
    chunks = keys // chunk
    split = lambda x: x.reshape(batch, chunks, chunk, kv_heads, head_dim).swapaxes(0, 1)  # noqa: E731

    @jax.checkpoint
    def step(carry, block):
        k_chunk, v_chunk, start = block
        return _block(carry, qg, k_chunk, v_chunk, q_start, start, causal), None

    starts = k_start + chunk * jnp.arange(chunks)
    return jax.lax.scan(step, carry, (split(k), split(v), starts))[0]


def ring_attention(q, k, v, causal: bool, devices: int, communicate: bool = True, chunk: int = KEY_CHUNK):
    """One device's part of ring attention (inside shard_map over AXIS): its queries against every K/V block, the
    blocks passed one step round the ring between merges. Without `communicate`, the twin: the same merges on the
    device's own block, which an optimisation barrier keeps XLA from computing once."""
    import jax
    import jax.numpy as jnp

    # q: [B, T/D, N, H]; k, v: [B, S/D, K, H]
    batch, rows, heads, head_dim = q.shape
    kv_heads, keys = k.shape[2], k.shape[1]
    index = jax.lax.axis_index(AXIS)
    qg = q.reshape(batch, rows, kv_heads, heads // kv_heads, head_dim)
    stats = (batch, kv_heads, heads // kv_heads, rows)
    carry = (jnp.full(stats, -jnp.inf), jnp.zeros(stats), jnp.zeros((*stats, head_dim)))
    carry = jax.lax.pcast(carry, AXIS, to="varying")  # each device's own running sums, as the scan's carry type
    ring = [(i, (i + 1) % devices) for i in range(devices)]
    for step in range(devices):
        source = (index - step) % devices  # whose block this device holds now
        carry = _merge(carry, qg, k, v, index * rows, source * keys, causal, math.gcd(keys, chunk))
        if step < devices - 1:
            k, v = jax.lax.ppermute((k, v), AXIS, ring) if communicate else jax.lax.optimization_barrier((k, v))
    _, l, acc = carry
    out = (acc / l[..., None]).transpose(0, 3, 1, 2, 4)  # [B, T/D, K, G, H]
    return out.reshape(batch, rows, heads, head_dim).astype(q.dtype)


@variant("ring", requires=SPLIT, backend="xla")
def ring(p: Params):
    """From scratch: ring attention in shard_map, K/V blocks passed with ppermute, merged by an online softmax."""
    import jax

    split = _split(p)

    def sharded(communicate: bool):
        local = functools.partial(ring_attention, causal=p.causal, devices=p.devices, communicate=communicate)
        return jax.shard_map(local, mesh=split.mesh, in_specs=(split.spec,) * 3, out_specs=split.spec)

    return dataclasses.replace(_placed(p, sharded(True)), twin=sharded(False))


@variant("xla_cp", requires=dataclasses.replace(SPLIT, score_bytes=XLA_SCORES))
def xla_cp(p: Params):
    """jax.nn.dot_product_attention on sequence-sharded inputs: XLA partitions it (the record says what ran).

    Its xla path materialises the scores as auto's does (XLA_SCORES), each device its share of the queries' (no run
    has measured them: memory.scores_bytes counts a 1/devices share)."""
    import jax

    split = _split(p)

    def attend(q, k, v):
        out = jax.nn.dot_product_attention(q, k, v, is_causal=p.causal)
        return jax.lax.with_sharding_constraint(out, split)  # the output stays split, as a CP layer's does

    return _placed(p, attend)


def _te_rules(p: Params) -> str | None:
    """TE's context parallelism splits self-attention; load balancing the causal mask cuts T into 2 x devices."""
    if p.devices > 1 and p.kv_seq_len != p.seq_len:
        return f"TE context parallelism is for self-attention: kv_seq_len ({p.kv_seq_len}) must equal seq_len"
    if p.causal and p.devices > 1 and p.seq_len % (2 * p.devices):
        return f"TE's causal load balancing needs seq_len a multiple of 2 x devices ({2 * p.devices}), not {p.seq_len}"
    return None


TE_CP_RULES = ("kv_seq_len = seq_len when split", "causal: seq_len a multiple of 2 x devices", WIDE_RULE)


def _te_cp(p: Params, strategy: str) -> Staged:
    """TE's fused attention over the mesh, as TE's own distributed tests call it (tests/jax/test_fused_attn.py):
    inputs sharded [B, T/cp, N, H], the mesh and MeshResource(cp_resource) in context, the axis named."""
    import jax.numpy as jnp
    import transformer_engine.jax as te
    from transformer_engine.jax.attention import (AttnBiasType, AttnMaskType, AttnSoftmaxType, CPStrategy, QKVLayout,
                                                  ReorderStrategy, SequenceDescriptor, fused_attn,
                                                  inverse_reorder_causal_load_balancing,
                                                  reorder_causal_load_balancing)
    from transformer_engine.jax.sharding import MeshResource

    mesh = _mesh(p)
    balanced = p.causal and p.devices > 1
    mask = AttnMaskType.CAUSAL_MASK if p.causal else AttnMaskType.NO_MASK
    swap = dict(strategy=ReorderStrategy.DualChunkSwap, cp_size=p.devices, seq_dim=1)

    def attend(q, k, v):
        lengths = (jnp.full((p.batch,), p.seq_len, jnp.int32), jnp.full((p.batch,), p.kv_seq_len, jnp.int32))
        with mesh, te.autocast(mesh_resource=MeshResource(cp_resource=AXIS)):
            return fused_attn(
                (q, k, v), None, SequenceDescriptor.from_seqlens(lengths), None, AttnBiasType.NO_BIAS, mask,
                QKVLayout.BSHD_BSHD_BSHD, AttnSoftmaxType.VANILLA_SOFTMAX, 1 / math.sqrt(p.head_dim), 0.0,
                is_training=p.pass_ == "fwd_bwd", context_parallel_strategy=CPStrategy[strategy],
                context_parallel_causal_load_balanced=balanced, context_parallel_axis=AXIS,
            ).astype(q.dtype)

    if not balanced:
        return _placed(p, attend)
    return _placed(p, attend, functools.partial(reorder_causal_load_balancing, **swap),
                   functools.partial(inverse_reorder_causal_load_balancing, **swap))


TE_CP = Requires(min_compute_capability=8.0, max_devices=MOST, **TE)


@variant("te_cp_allgather", requires=TE_CP, check=_te_rules, gpu_check=gpu_check, rules=TE_CP_RULES, **TE_RULES)
def te_cp_allgather(p: Params):
    """TransformerEngine fused attention, context parallel: K/V all-gathered (CPStrategy.ALL_GATHER)."""
    return _te_cp(p, "ALL_GATHER")


@variant("te_cp_ring", requires=TE_CP, check=_te_rules, gpu_check=gpu_check, rules=TE_CP_RULES, **TE_RULES)
def te_cp_ring(p: Params):
    """TransformerEngine fused attention, context parallel: K/V passed round a ring (CPStrategy.RING)."""
    return _te_cp(p, "RING")
