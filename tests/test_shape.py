"""runner/shape.py: the axes defined once, and what is derived from them: resolved shapes, labels, keys, --where
conditions and tensor-parallel shards."""

from __future__ import annotations

import json

import pytest

from helpers import params
from runner import shape


def test_a_shape_resolves_its_derived_and_quiet_axes():
    resolved = shape.resolved({"batch": 1, "seq_len": 8, "kv_seq_len": None, "heads": 4, "kv_heads": None,
                               "head_dim": 16})
    assert (resolved["kv_seq_len"], resolved["kv_heads"], resolved["v_head_dim"]) == (8, 4, 16)
    assert all(resolved[a.name] == a.default for a in shape.AXES if a.quiet and not a.follows)


def test_a_label_names_what_differs_from_the_defaults():
    p = params(seq_len=8, kv_heads=2, causal=True, window=4)
    assert shape.label(p.as_dict()) == "B1 T8 N4 K2 H8 float32 causal fwd W4"
    assert shape.label(params().as_dict()) == "B1 T8 N4 H8 float32 fwd"  # S = T, K = N, no window: left out
    assert shape.label(p.as_dict(), omit=("seq_len", "window")) == "B1 N4 K2 H8 float32 causal fwd"


@pytest.mark.parametrize("text, parsed", [
    ("tp=1", ("tp", (1,))), ("seq_len=4096, 8192", ("seq_len", (4096, 8192))), ("causal=true", ("causal", (True,))),
    ("window=null", ("window", (None,))), ("fill=0.5,1", ("fill", (0.5, 1.0))),
])
def test_a_condition_reads_each_value_as_its_axis_type(text, parsed):
    assert shape.condition(text) == parsed


@pytest.mark.parametrize("text, problem", [
    ("tp", "give AXIS=VALUE"), ("size=1", "no axis 'size'"), ("causal=1", "'1' is not a value of causal"),
    ("dtype=fp4", "is not a value of dtype (float32, bfloat16, float16)"),
])
def test_a_bad_condition_says_what_is_wrong(text, problem):
    with pytest.raises(ValueError) as raised:
        shape.condition(text)
    assert problem in str(raised.value)


def test_tensor_parallel_splits_query_heads_evenly_and_kv_heads_or_replicates_them():
    assert shape.tp_problem(64, 8, 8) is None and shape.tp_problem(64, 4, 8) is None  # 4 KV heads replicated
    assert shape.tp_problem(60, 8, 8) == "heads (60) must be a multiple of tp (8)"
    assert shape.tp_problem(64, 6, 4) == "kv_heads (6) and tp (4): one must divide the other"
    assert shape.per_gpu({"heads": 64, "kv_heads": 4, "tp": 8}) == {"heads": 8, "kv_heads": 1, "tp": 8}


def test_a_cells_key_leaves_out_the_new_axes_at_their_defaults():
    """Keys written before schema 6 hashed the nine older axes only (and before 7, no devices, before 9, no serving
    axes, before 10, no documents nor deterministic, before 11, no tune); resuming such a run must find its cells."""
    import hashlib

    p = params()
    old = {k: v for k, v in p.as_dict().items()
           if k not in ("window", "fill", "bias", "softcap", "v_head_dim", "tp", "devices", "kv_lengths", "kv_spread",
                        "page_size", "page_order", "documents", "deterministic", "tune")}
    blob = json.dumps({"experiment": "e", "variant": "xla", **old}, sort_keys=True)
    assert shape.cell_key("e", "xla", p) == hashlib.sha256(blob.encode()).hexdigest()[:16]
    assert shape.cell_key("e", "xla", params(window=4)) != shape.cell_key("e", "xla", p)
    assert shape.cell_key("e", "xla", params(documents=2)) != shape.cell_key("e", "xla", p)
    assert shape.cell_key("e", "xla", params(tune=True)) != shape.cell_key("e", "xla", p)
