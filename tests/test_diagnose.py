"""runner/diagnose.py: an incorrect output compared with the reference of each mistake a library may have made
(an axis the cell sets dropped, its window one key off), and the first that matches named in the reason."""

from __future__ import annotations

from helpers import params
from runner import diagnose
from runner.attention import reference_attention
from runner.inputs import make_inputs, reference


def test_each_axis_the_cell_sets_is_a_mistake_worth_testing():
    p = params(seq_len=16, causal=True, window=4, fill=0.5, bias="alibi", softcap=30.0)
    found = dict(diagnose.alternatives(p))
    assert list(found) == ["the window ignored", "a window of 5 keys, not 4", "a window of 3 keys, not 4",
                           "the padding ignored (every key attended)", "no ALiBi bias", "no soft cap",
                           "no causal mask"]
    assert found["the window ignored"] == p.model_copy(update={"window": None})
    assert found["no causal mask"].causal is False and found["no causal mask"].window == 4
    assert diagnose.alternatives(params()) == []  # nothing set, nothing to drop


def test_an_ignored_option_is_named_in_the_reason():
    p = params(seq_len=16, causal=True, window=4)
    args = make_inputs(p, 0)
    ignored = reference_attention(*args, causal=True)  # what jax#32300 reported: the window dropped
    reason = diagnose.explain(p, ignored, args, 2e-3)
    assert reason == "; the output matches the float32 reference with the window ignored"
    one_off = reference(params(seq_len=16, causal=True, window=5), args)[0]
    assert "a window of 5 keys, not 4" in diagnose.explain(p, one_off, args, 2e-3)
    assert diagnose.explain(p, reference(p, args)[0] * 2, args, 2e-3) == ""


def test_a_packed_row_attended_whole_is_named_in_the_reason():
    """A library that takes the segment ids and drops them attends across documents: the reason says so."""
    p = params(seq_len=16, causal=True, documents=3)
    args = make_inputs(p, 0)
    assert dict(diagnose.alternatives(p))["the documents ignored (attention across the whole row)"].documents == 1
    whole_row = reference_attention(*args, causal=True)
    assert diagnose.explain(p, whole_row, args, 2e-3) == ("; the output matches the float32 reference with the "
                                                          "documents ignored (attention across the whole row)")
