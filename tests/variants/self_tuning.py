"""A variant that exists only in the tests: plain attention whose "library" tunes itself as tokamax does, so a CPU
run goes through a `tune: true` cell whole (the tuning cache, the `tune` phase, the record's tuning).

Its one setting is the matmuls' precision ("default" or "highest"), read while the call is traced: `tune` times the
call briefly under each and answers the fastest as JSON, `apply` puts a choice in force, and `in_force` reads the
precision back from the lowered program."""

from __future__ import annotations

import functools
import json
import re
import time

from runner.registry import Autotuned, Requires, variant
from runner.shape import Params

PRECISIONS = ("default", "highest")
@functools.cache
def chosen_precision():
    """The precision in force: a JAX user context, part of jit's cache key (as tokamax's overlay is)."""
    import jax

    return jax.make_user_context("default")


def attend(q, k, v, causal: bool):
    import jax
    import jax.numpy as jnp

    precision = chosen_precision().value
    k, v = (jnp.repeat(x, q.shape[2] // x.shape[2], axis=2) for x in (k, v))  # GQA: each KV head serves its group
    logits = jnp.einsum("btnh,bsnh->bnts", q, k, precision=precision) / q.shape[-1] ** 0.5
    if causal:
        logits = jnp.where(jnp.tril(jnp.ones(logits.shape[-2:], bool)), logits, -jnp.inf)
    return jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(logits, axis=-1), v, precision=precision)


def tune(fn, args: tuple) -> str:
    """Each precision's median of three calls, and the fastest."""
    import jax
    import jax.numpy as jnp

    medians = {}
    for precision in PRECISIONS:
        with applied(json.dumps({"precision": precision})):
            call = jax.jit(fn).lower(*args).compile()
        inputs = [jnp.ones(a.shape, a.dtype) for a in args]
        times = []
        for _ in range(3):
            start = time.perf_counter()
            jax.block_until_ready(call(*inputs))
            times.append(time.perf_counter() - start)
        medians[precision] = sorted(times)[1]
    return json.dumps({"precision": min(medians, key=medians.get), "medians": medians})


def applied(text: str):
    return chosen_precision()(json.loads(text)["precision"])


def chosen(text: str) -> tuple[dict, list[dict]]:
    result = json.loads(text)
    return ({"matmuls": {"precision": result["precision"]}},
            [dict(config={"op": "matmuls", "precision": precision}, status="ok", median_s=seconds)
             for precision, seconds in result["medians"].items()])


def in_force(lowered) -> dict:
    """The precision the lowered call's matmuls carry."""
    found = set(re.findall(r"precision = \[(\w+),", lowered.as_text()))
    return {"matmuls": {"precision": found.pop().lower() if len(found) == 1 else sorted(found)}}


@variant("test_self_tuning", requires=Requires(options=("tune",)), backend="xla")
def self_tuning(p: Params):
    """Plain attention at the matmul precision its own tuner picks (tune: true), else the default."""
    call = functools.partial(attend, causal=p.causal)
    if not p.tune:
        return call
    return Autotuned(call, "test.self_tuning", tune, applied, chosen, in_force)
