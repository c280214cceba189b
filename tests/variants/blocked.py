"""A variant that exists only in the tests: one file, loaded through $ATTNBENCH_VARIANTS, with no edit elsewhere.

It behaves like a Pallas kernel with shape rules of its own: it declines T not a multiple of 16 with a reason
from its parameters (before any GPU library loads), declines K != N at build time with Skip, and declares the
backend its custom call proves.
"""

from __future__ import annotations

from runner.shape import Params
from runner.registry import Requires, Skip, variant


def _check(p: Params) -> str | None:
    if p.seq_len % 16:
        return f"test_blocked needs seq_len a multiple of 16 (its block), not {p.seq_len}"
    return None


@variant("test_blocked", requires=Requires(dtypes=("float32",)), backend="test_host", proves=("test_host_",),
         check=_check, rules=("seq_len a multiple of 16", "kv_heads equal to heads"))
def blocked(p: Params):
    """Attention through a host callback that calls itself a custom call of its own backend."""
    import functools

    from runner.attention import naive_attention

    if p.kv_heads != p.heads:
        raise Skip(f"test_blocked runs MHA only; K={p.kv_heads} is not N={p.heads}")
    return functools.partial(naive_attention, causal=p.causal)
