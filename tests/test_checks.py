"""runner/checks.py: why a correctness result fails (every error against its tolerance, the lab's causal rows),
and FP8's verdict from its evidence."""

from __future__ import annotations

import pytest

from runner import checks
from runner.checks import incorrect_reason
from runner.record import Correctness

CAUSAL_FAILED = "causal check failed: row 0 must change under the mask and the last row must not"


def _correctness(**fields) -> Correctness:
    return Correctness(**{"max_abs_err": 0.0, "rel_err": 1e-4, "tolerance": 1e-3, **fields})


@pytest.mark.parametrize(
    "fields, reason",
    [
        ({}, ""),
        ({"rel_err": 0.5}, "out relative error 0.5 > tolerance 0.001"),
        ({"rel_err": float("nan")}, "out relative error nan > tolerance 0.001"),
        ({"causal_first_changed": False, "causal_last_unchanged": True}, CAUSAL_FAILED),
        ({"causal_first_changed": True, "causal_last_unchanged": False}, CAUSAL_FAILED),  # the last row moved
        ({"causal_first_changed": True, "causal_last_unchanged": True}, ""),
        ({"bitwise_repeat": False}, "asked to be deterministic, a second call on the same inputs gave other bits"),
        ({"bitwise_repeat": True}, ""),
    ],
)
def test_incorrect_reason(fields, reason):
    assert incorrect_reason(_correctness(**fields)) == reason


def test_every_gradient_is_held_to_the_gradient_tolerance():
    c = _correctness(grad_rel_err={"dq": 1e-3, "dk": 5e-3, "dv": 2e-3}, grad_tolerance=2e-3)
    assert incorrect_reason(c) == "dk relative error 0.005 > tolerance 0.002"


@pytest.mark.parametrize(
    "in_hlo, in_kernels, start",
    [
        (False, None, "not FP8: no f8 type in the compiled program, so attention ran in bfloat16"),
        (True, False, "f8 types in the compiled program, but no kernel name that ran says f8 (cuDNN's names carry "
                      "their data type; a Pallas kernel's, as tokamax_triton_fp8's, do not)"),
        (True, True, "FP8 attention: f8 types in the compiled program and an f8 kernel ran"),
        (True, None, "FP8 attention: f8 types in the compiled program"),
    ],
)
def test_fp8_verdict_never_contradicts_its_evidence(in_hlo, in_kernels, start):
    assert checks.fp8_verdict(in_hlo, in_kernels, "bfloat16", "cudnn", 0.05).startswith(start)


@pytest.mark.parametrize("shape", [dict(kv_lengths="long_tail", batch=4, kv_seq_len=32, seq_len=2, causal=True),
                                   dict(fill=0.5, batch=3, seq_len=16)])
def test_what_a_kernel_writes_past_each_sequences_keys_is_not_checked(shape):
    """dK and dV past a request's length (a serving cell's ragged cache) or a padded batch's keys are undefined
    output, as the padded query rows are: garbage there is no error; garbage within them is."""
    import jax.numpy as jnp

    from helpers import params
    from runner import inputs, masks

    p = params(**shape, pass_="fwd_bwd")
    args = inputs.make_inputs(p, 0)
    truth = inputs.InputsAndReference(args, inputs.reference(p, args), None)
    kv_lengths = masks.padded_lengths(p)[1]
    past = jnp.arange(truth.expected[2].shape[1])[None, :] >= jnp.asarray(kv_lengths)[:, None]
    garbage = jnp.where(past[:, :, None, None], 1e3, truth.expected[2])
    outputs = (*truth.expected[:2], garbage, truth.expected[3])
    correct = checks.check_step(p, outputs, truth, 1e-3, 1e-3)
    assert incorrect_reason(correct) == ""
    # the record names the cotangent its gradients were taken with: zero at a padded batch's padded query rows
    assert correct.cotangent == ("normal" if "kv_lengths" in shape else "normal, zero at padded query rows")
    within = garbage.at[0, 0].add(1e3)
    assert "dk relative error" in incorrect_reason(checks.check_step(p, (*outputs[:2], within, outputs[3]), truth,
                                                                     1e-3, 1e-3))


def test_the_causal_check_compares_rows_0_and_t_minus_1_with_attention_without_the_mask():
    """Row 0 of causal attention sees one key, so it moves away from the unmasked row; row T-1 sees every key, so it
    stays. A kernel that ignored the mask fails the first; one that spoils the last row fails the second. A forward
    cell called once records no gradient tolerance and no bitwise repeat."""
    from helpers import params
    from runner import inputs

    p = params(causal=True, seq_len=16, batch=2)
    args = inputs.make_inputs(p, 0)
    truth = inputs.InputsAndReference(args, inputs.reference(p, args), inputs.unmasked_rows(p, args))
    out = truth.expected[0]
    right = checks.check_step(p, (out,), truth, 1e-3, 1e-3)
    assert (right.causal_first_changed, right.causal_last_unchanged, incorrect_reason(right)) == (True, True, "")
    assert (right.grad_tolerance, right.bitwise_repeat) == (None, None)
    unmasked = inputs.reference(p.model_copy(update={"causal": False}), args)[0]
    ignored = checks.check_step(p, (unmasked,), truth, 1e-3, 1e-3)
    assert (ignored.causal_first_changed, ignored.causal_last_unchanged) == (False, True)
    spoiled = checks.check_step(p, (out.at[:, -1].set(out[:, 0]),), truth, 1e-3, 1e-3)
    assert (spoiled.causal_first_changed, spoiled.causal_last_unchanged) == (True, False)


def test_a_repeat_is_the_same_bits_nans_included_and_a_signed_zero_is_not():
    import jax.numpy as jnp

    nan = jnp.array([jnp.nan, 1.0], jnp.bfloat16)
    assert checks.same_bits((nan, nan.astype(jnp.float32)), (nan, nan.astype(jnp.float32)))
    assert not checks.same_bits((jnp.zeros(2),), (-jnp.zeros(2),))
    assert not checks.same_bits((nan, nan), (nan, nan.at[1].set(2.0)))  # the gradients moved, not the output


def test_the_relative_error_is_the_errors_norm_over_the_references():
    """Scale-free: 1 % off a reference of any size is 0.01, held against a tolerance that is a fraction too."""
    import jax.numpy as jnp

    for scale in (1e-3, 3.0, 1e4):
        ref = jnp.full((4, 8), scale, jnp.float32)
        assert checks.rel_err(ref * 1.01, ref) == pytest.approx(0.01, rel=1e-3)


def test_a_reference_of_zeros_is_met_by_zeros_alone_never_0_over_0():
    """dq and dk are zeros where each query sees one key (seq_len 1): their relative error was NaN for every
    kernel, written as null, and the run's next read of the record ended it as an internal error."""
    import math

    import jax.numpy as jnp

    zeros = jnp.zeros((2, 4), jnp.float32)
    assert checks.rel_err(zeros, zeros) == 0.0
    assert checks.rel_err(zeros.at[0, 0].set(1e-3), zeros) == math.inf
    assert math.isnan(checks.rel_err(zeros.at[0, 0].set(jnp.nan), jnp.ones((2, 4))))  # a NaN kernel stays NaN
