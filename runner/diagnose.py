"""Why a cell came out `incorrect`: what the library may have computed instead of the attention it was asked for.

A library can accept an option and compute something else (jax#32300: `local_window_size` ignored without a mask;
TE#1197: an off-by-one in cuDNN's window bound). When a cell fails its float32 check, its output is compared with
the reference of each such mistake; the first that matches within the tolerance is named in the record's reason.
"""

from __future__ import annotations

from runner import masks
from runner.checks import rel_err
from runner.inputs import reference
from runner.shape import Params


def alternatives(p: Params) -> list[tuple[str, Params]]:
    """(words, params) for each mistake worth testing: an axis the cell sets dropped (a packed row's documents
    among them), its window one key off."""
    found = []
    if p.window is not None:
        found.append(("the window ignored", {"window": None}))
        found += [(f"a window of {w} keys, not {p.window}", {"window": w}) for w in (p.window + 1, p.window - 1) if w]
    if p.fill < 1:
        found.append(("the padding ignored (every key attended)", {"fill": 1.0}))
    if masks.packed(p):
        found.append(("the documents ignored (attention across the whole row)", {"documents": 1}))
    if p.bias != "none":
        found.append(("no ALiBi bias", {"bias": "none"}))
    if p.softcap is not None:
        found.append(("no soft cap", {"softcap": None}))
    if p.causal:
        found.append(("no causal mask", {"causal": False}))
    return [(words, p.model_copy(update=update)) for words, update in found]


def explain(p: Params, out, args: tuple, tolerance: float) -> str:
    """'; it matches the float32 reference with the window ignored' (the first match), else ''."""
    for words, other in alternatives(p):
        if rel_err(out, reference(other, args)[0]) <= tolerance:
            return f"; the output matches the float32 reference with {words}"
    return ""
