"""Variants that exist only in the tests and accept a sliding window but compute something else, as jax#32300
(`local_window_size` ignored) and TE#1197 (a window bound one key off) reported of real libraries: the float32
check must call their cells incorrect and the record must say what they computed instead."""

from __future__ import annotations

import functools

from runner.shape import Params
from runner.registry import Requires, variant


def _naive(p: Params, window: int | None):
    from runner.attention import Logits, naive_attention

    return functools.partial(naive_attention, causal=p.causal, logits=Logits(p.causal, window))


@variant("test_ignores_window", requires=Requires(options=("window",)), backend="xla")
def ignores_window(p: Params):
    """Takes a window and attends to every key."""
    return _naive(p, None)


@variant("test_window_one_wider", requires=Requires(options=("window",)), backend="xla")
def window_one_wider(p: Params):
    """Takes a window of W keys and attends to W + 1."""
    return _naive(p, p.window + 1 if p.window else None)
