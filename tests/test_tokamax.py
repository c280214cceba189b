"""The tokamax variants off a GPU: what each declines and why, what they ask tokamax.dot_product_attention for, and
how they say that tokamax is missing or does not import (tokamax itself needs Python >= 3.12, so here it is a
stand-in that records its call)."""

from __future__ import annotations

import importlib.util
import sys
import types

import pytest

from helpers import params
from runner.machine import Device
from runner.registry import VARIANTS, decline, load_all, unmet
from runner.variants import tokamax_attention

load_all()
H200 = Device("gpu", "NVIDIA H200", 9.0, 141 << 30)
CPU = Device("cpu", "cpu", None)
HOPPER = dict(batch=2, seq_len=4096, heads=64, kv_heads=8, head_dim=128, dtype="bfloat16", causal=True)
DECODE = dict(HOPPER, seq_len=1, kv_seq_len=8192, kv_lengths="long_tail")  # a ragged serving batch, one new token
NAMES = ("tokamax_mosaic", "tokamax_triton", "tokamax_xla_chunked", "tokamax_cudnn", "tokamax_triton_fp8",
         "tokamax_mosaic_fp8")
HAS_TOKAMAX = importlib.util.find_spec("tokamax") is not None


@pytest.fixture
def installed(monkeypatch):
    """tokamax counts as installed, so the cell rules speak (its import is never tried by decline)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "tokamax" else real(name, *a))


@pytest.mark.skipif(HAS_TOKAMAX, reason="tokamax is installed here")
@pytest.mark.parametrize("name", NAMES)
def test_without_tokamax_each_variant_says_how_to_install_it(name):
    reason = unmet(VARIANTS[name], H200)
    assert reason == (f"{name} needs the Python package 'tokamax', which is not installed here (pip install "
                      "'attnbench[tokamax]' (Python >= 3.12, jax >= 0.11.1))")


def test_the_flash_kernels_need_a_gpu_and_xla_chunked_does_not(installed):
    assert unmet(VARIANTS["tokamax_mosaic"], CPU).startswith("tokamax_mosaic needs an NVIDIA GPU")
    assert unmet(VARIANTS["tokamax_cudnn"], CPU).startswith("tokamax_cudnn needs an NVIDIA GPU")
    assert unmet(VARIANTS["tokamax_xla_chunked"], CPU) is None


@pytest.mark.parametrize("name, shape, words", [
    ("tokamax_mosaic", {**HOPPER, "bias": "alibi", "softcap": 30.0}, "tokamax caps the logits after adding the bias"),
    ("tokamax_xla_chunked", {**HOPPER, "bias": "alibi", "softcap": 30.0}, "tokamax caps the logits after"),
    ("tokamax_triton", {**HOPPER, "softcap": 30.0, "pass": "fwd_bwd"}, "Triton backward raises NotImplementedError"),
    ("tokamax_mosaic", {**HOPPER, "dtype": "float32"}, "runs bfloat16 / float16 only, not float32"),
    ("tokamax_cudnn", {**HOPPER, "softcap": 30.0}, "raises NotImplementedError for a soft cap"),
    ("tokamax_cudnn", {**HOPPER, "window": 1024}, "not the cudnn variant's sliding-window kernel"),
    ("tokamax_cudnn", {**HOPPER, "head_dim": 64, "v_head_dim": 192}, "here Hv=192"),
    ("tokamax_cudnn", {**HOPPER, "head_dim": 192}, "supports head_dim up to 128"),
    ("tokamax_mosaic", {**HOPPER, "devices": 2}, "does not split the sequence"),
    ("tokamax_mosaic", {**DECODE, "page_size": 16}, "paged attention (batched_ragged_paged_attention) runs on TPU"),
    ("tokamax_cudnn", {**DECODE, "page_size": 16}, "runs on TPU only"),
    ("tokamax_triton", {**DECODE, "seq_len": 4}, "T=4 new tokens need it aligned to each request's end"),
    ("tokamax_xla_chunked", {**DECODE, "window": 512}, "a serving cell's new tokens stand at each request's end"),
    ("tokamax_cudnn", {**DECODE, "bias": "alibi"}, "a serving cell (kv_lengths set) takes no bias"),
])
def test_each_variant_declines_what_tokamax_cannot_run_and_says_why(installed, name, shape, words):
    reason = decline(VARIANTS[name], params(**shape), H200)
    assert reason and words in reason, reason


@pytest.mark.parametrize("name, shape", [
    ("tokamax_mosaic", {**HOPPER, "pass": "fwd_bwd"}),
    ("tokamax_mosaic", {**HOPPER, "window": 1024, "fill": 0.5, "softcap": 50.0, "pass": "fwd_bwd"}),
    ("tokamax_mosaic", {**HOPPER, "head_dim": 192, "v_head_dim": 128, "bias": "alibi"}),
    ("tokamax_triton", {**HOPPER, "softcap": 50.0}),
    ("tokamax_triton", {**HOPPER, "window": 512, "causal": False, "pass": "fwd_bwd"}),
    ("tokamax_xla_chunked", {**HOPPER, "dtype": "float32", "softcap": 50.0, "window": 100}),
    ("tokamax_cudnn", {**HOPPER, "fill": 0.8, "bias": "alibi", "pass": "fwd_bwd"}),
    ("tokamax_cudnn", {**HOPPER, "v_head_dim": 64}),
    ("tokamax_mosaic", DECODE), ("tokamax_cudnn", DECODE),
    ("tokamax_xla_chunked", {**DECODE, "seq_len": 4, "causal": False}),
])
def test_each_variant_takes_every_axis_tokamax_takes(installed, name, shape):
    assert decline(VARIANTS[name], params(**shape), H200) is None


@pytest.fixture
def calls(monkeypatch):
    """A stand-in tokamax module whose dot_product_attention records its arguments and returns q."""
    made = []

    def dot_product_attention(q, k, v, bias=None, mask=None, **kwargs):
        made.append(dict(kwargs, bias=bias, mask=mask))
        return q

    monkeypatch.setitem(sys.modules, "tokamax", types.SimpleNamespace(dot_product_attention=dot_product_attention))
    return made


def _call(name: str, **shape) -> None:
    from runner.inputs import make_inputs

    p = params(**shape)
    attend = VARIANTS[name].build(p)
    q, k, v = make_inputs(p, seed=0)[:3]
    assert attend(q, k, v) is q


def test_the_cell_reaches_tokamax_as_its_own_arguments(calls):
    _call("tokamax_xla_chunked", batch=4, seq_len=64, causal=True, window=16, fill=0.5, softcap=20.0)
    (call,) = calls
    assert call.pop("query_seq_lengths").tolist() == [1, 21, 43, 64]  # runner.masks.lengths at fill 0.5
    assert call.pop("key_value_seq_lengths").tolist() == [1, 21, 43, 64]
    assert call == dict(is_causal=True, local_window_size=(15, 0), logits_soft_cap=20.0,
                        implementation="xla_chunked", bias=None, mask=None)


def test_a_ragged_decode_reaches_tokamax_as_its_requests_lengths_without_a_mask(calls):
    from runner import paging

    _call("tokamax_mosaic", **dict(DECODE, batch=4, kv_seq_len=64, heads=4, kv_heads=2, head_dim=16))
    (call,) = calls
    ragged = params(**dict(DECODE, batch=4, kv_seq_len=64))
    assert call.pop("key_value_seq_lengths").tolist() == paging.lengths(ragged)
    assert call.pop("query_seq_lengths").tolist() == [1] * 4
    assert call["is_causal"] is False and call["local_window_size"] is None  # one new token sees its whole request


@pytest.mark.parametrize("name, implementation, bias_dtype", [
    ("tokamax_mosaic", "mosaic", "float32"), ("tokamax_triton", "triton", "float32"),
    ("tokamax_cudnn", "cudnn", "bfloat16"),
])
def test_alibi_reaches_tokamax_as_a_bias_of_each_head(calls, name, implementation, bias_dtype):
    _call(name, batch=1, seq_len=32, heads=4, dtype="bfloat16", bias="alibi")
    (call,) = calls
    assert call["implementation"] == implementation and call["query_seq_lengths"] is None
    assert call["bias"].shape == (1, 4, 32, 32) and str(call["bias"].dtype) == bias_dtype
    assert float(call["bias"][0, 0, 0, 1]) == -(2 ** -2)  # slope of head 0 of 4, one key away


@pytest.mark.parametrize("capability, runs", [(8.0, False), (8.9, False), (9.0, True), (10.0, True), (10.3, True),
                                              (11.0, False), (12.0, False)])  # all of sm10x, none past it
def test_the_mosaic_backward_runs_on_sm90_and_sm100_only(installed, capability, runs):
    mosaic, gpu = VARIANTS["tokamax_mosaic"], Device("gpu", "a GPU", capability)
    assert decline(mosaic, params(**HOPPER), gpu) is None  # the forward runs
    assert decline(mosaic, params(**HOPPER, pass_="fwd_bwd"), gpu) == (
        None if runs else f"tokamax's Mosaic GPU backward runs on sm90 and sm100 only; this GPU has compute capability "
                          f"{capability:.1f}")


def test_a_tokamax_that_does_not_import_is_named_with_its_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def failing(name, *args, **kwargs):
        if name == "tokamax":
            raise ModuleNotFoundError("No module named 'xprof'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", failing)
    assert tokamax_attention.probe() == "tokamax does not import here: ModuleNotFoundError: No module named 'xprof'"


@pytest.fixture
def private_api(monkeypatch):
    """Stand-ins for tokamax's private attention modules (api, base): a Mask of per-query key ranges as tokamax
    defines it (k_start inclusive, k_end exclusive, causal top-left; two masks combine by max / min), and
    implementations that attend densely under it, so a packed cell's mask can be checked against the reference.
    As in tokamax 0.0.17, is_causal is an argument and a property, not a dataclass field (its field is causal_mask)."""
    import dataclasses

    import jax
    import jax.numpy as jnp

    @dataclasses.dataclass(frozen=True, init=False)
    class Mask:
        k_start: object = None
        k_end: object = None
        causal_mask: bool = False

        def __init__(self, *, k_start=None, k_end=None, is_causal=False):
            for name, value in dict(k_start=k_start, k_end=k_end, causal_mask=is_causal).items():
                object.__setattr__(self, name, value)

        @property
        def is_causal(self) -> bool:
            return self.causal_mask

        def __and__(self, other):
            pick = lambda a, b, fn: b if a is None else a if b is None else fn(a, b)  # noqa: E731
            return Mask(k_start=pick(self.k_start, other.k_start, jnp.maximum),
                        k_end=pick(self.k_end, other.k_end, jnp.minimum), is_causal=self.is_causal or other.is_causal)

        def as_array(self, length):
            keys, rows = jnp.arange(length)[None, :], jnp.arange(length)[:, None]
            keep = (keys >= self.k_start[..., None]) & (keys < self.k_end[..., None])  # (B, 1, T, S)
            return keep & (rows >= keys) if self.is_causal else keep

    def dense(q, k, v, bias=None, mask=None, logits_soft_cap=None):
        groups = q.shape[2] // k.shape[2]
        k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
        scores = jnp.einsum("btnh,bsnh->bnts", q, k) / q.shape[-1] ** 0.5
        scores = jnp.where(mask.as_array(q.shape[1]), scores, -jnp.inf)
        return jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(scores, axis=-1), v)

    api = types.SimpleNamespace(IMPLEMENTATIONS={"mosaic_gpu": dense, "triton": dense, "xla_chunked": dense})
    base = types.SimpleNamespace(Mask=Mask)
    for name, module in {"tokamax": types.SimpleNamespace(), "tokamax._src": None, "tokamax._src.ops": None,
                         "tokamax._src.ops.attention": types.SimpleNamespace(api=api, base=base),
                         "tokamax._src.ops.attention.api": api, "tokamax._src.ops.attention.base": base}.items():
        monkeypatch.setitem(sys.modules, name, module or types.SimpleNamespace())
    return api


@pytest.mark.parametrize("name", ["tokamax_mosaic", "tokamax_triton", "tokamax_xla_chunked"])
@pytest.mark.parametrize("shape", [dict(causal=True), dict(), dict(causal=True, window=5)])
def test_a_packed_row_reaches_tokamax_as_each_querys_document_range(private_api, name, shape):
    from runner.checks import rel_err
    from runner.inputs import make_inputs, reference

    p = params(batch=2, seq_len=24, heads=4, kv_heads=2, documents=3, dtype="float32", **shape)
    args = make_inputs(p, 0)
    assert rel_err(VARIANTS[name].build(p)(*args), reference(p, args)[0]) < 1e-5


def test_packed_rows_say_what_this_tokamax_lacks(private_api, monkeypatch):
    monkeypatch.delattr(private_api, "IMPLEMENTATIONS")
    with pytest.raises(tokamax_attention.Skip, match="IMPLEMENTATIONS and a Mask with k_start"):
        VARIANTS["tokamax_mosaic"].build(params(seq_len=24, documents=3, dtype="bfloat16"))


@pytest.mark.parametrize("name, shape, words", [
    ("tokamax_mosaic", {**HOPPER, "pass": "fwd_bwd", "deterministic": True}, "has no determinism option"),
    ("tokamax_xla_chunked", {**HOPPER, "pass": "fwd_bwd", "deterministic": True}, "has no determinism option"),
    ("tokamax_cudnn", {**HOPPER, "documents": 4}, "packs rows through cuDNN's segment offsets"),
])
def test_tokamax_declines_determinism_and_its_cudnn_path_packed_rows(installed, name, shape, words):
    reason = decline(VARIANTS[name], params(**shape), H200)
    assert reason and words in reason, reason


@pytest.mark.parametrize("name, words", [
    ("tokamax_mosaic", None), ("tokamax_triton", None),
    ("tokamax_xla_chunked", "tokamax's xla_chunked implementation has no configurations to tune"),
    ("tokamax_cudnn", "tokamax's cudnn implementation has no configurations to tune (its config is NullConfig)"),
    ("cudnn", "cudnn declines a tuned kernel (tune: true, the library's autotuner): it implements none"),
])
def test_tune_is_taken_by_the_kernels_tokamax_can_tune_and_declined_by_the_rest(installed, name, words):
    reason = decline(VARIANTS[name], params(**HOPPER, tune=True), H200)
    assert reason == words if words is None else words in reason, reason


@pytest.fixture
def autotuner(monkeypatch):
    """A stand-in tokamax whose autotune records its call and answers an AutotuningResult-like object: the forward
    op and its vjp op, each with two configs (pydantic dataclasses, as tokamax's are) and their benchmark data."""
    import pydantic

    @pydantic.dataclasses.dataclass(frozen=True)
    class Config:
        block_q: int
        block_kv: int

    class Op:
        def __init__(self, name):
            self.name = name

    def tuned_op(name, medians):  # (bound arguments, autotuning data) as AutotuningResult.data holds them
        timings = {config: types.SimpleNamespace(median_evaluation_time_ms=ms) for config, ms in medians.items()}
        data = types.SimpleNamespace(items=timings.items, fastest_config=min(medians, key=medians.get))
        return types.SimpleNamespace(op=Op(name)), data

    data = (tuned_op("pallas_mosaic_gpu_flash_attention", {Config(64, 64): 2.0, Config(128, 64): 1.5}),
            tuned_op("pallas_mosaic_gpu_flash_attention_vjp", {Config(64, 128): 4.0}))
    made = []

    class Result:
        def __init__(self, found):
            self.data = found

        def dumps(self, prune_errors=False):
            made.append(("dumps", prune_errors))
            return "json"

        @classmethod
        def loads(cls, text):
            assert text == "json"
            return cls(data)

    def autotune(fn, *args, **options):
        made.append(("autotune", args, options))
        return Result(data if args else ())

    stand_in = types.SimpleNamespace(autotune=autotune, AutotuningResult=Result, snake_case_name=lambda op: op.name,
                                     dot_product_attention=lambda *args, **kwargs: None)
    monkeypatch.setitem(sys.modules, "tokamax", stand_in)
    return made


def test_a_tuned_cell_asks_tokamax_autotune_for_this_gpus_own_tuning_and_records_each_ops_choice(autotuner):
    tuned = VARIANTS["tokamax_mosaic"].build(params(**HOPPER, tune=True))
    assert tuned.tuner == "tokamax.autotune" and not hasattr(VARIANTS["tokamax_mosaic"].build(params(**HOPPER)),
                                                             "tuner")
    assert tuned.tune("fn", ("q", "k", "v")) == "json"
    assert autotuner == [("autotune", ("q", "k", "v"), {"ignore_cache": True, "progress_bar": False}),
                         ("dumps", True)]
    config, candidates = tuned.chosen("json")
    assert config == {"pallas_mosaic_gpu_flash_attention": {"block_q": 128, "block_kv": 64},
                      "pallas_mosaic_gpu_flash_attention_vjp": {"block_q": 64, "block_kv": 128}}
    assert [(c["config"]["op"][-3:], c["config"]["block_q"], c["median_s"]) for c in candidates] == [
        ("ion", 64, 0.002), ("ion", 128, 0.0015), ("vjp", 64, 0.004)]
    with pytest.raises(RuntimeError, match="tokamax.autotune found no tokamax op to tune in the call"):
        tuned.tune("fn", ())


ADA = Device("gpu", "NVIDIA L40S", 8.9, 48 << 30)
AMPERE = Device("gpu", "NVIDIA A100", 8.0, 80 << 30)


@pytest.mark.parametrize("name, device, shape, words", [
    ("tokamax_triton_fp8", CPU, HOPPER, "tokamax_triton_fp8 needs an NVIDIA GPU with compute capability ≥ 8.9"),
    ("tokamax_triton_fp8", AMPERE, HOPPER, "compute capability ≥ 8.9"),
    ("tokamax_triton_fp8", H200, {**HOPPER, "pass": "fwd_bwd"}, "has no fwd_bwd pass (it supports fwd)"),
    ("tokamax_triton_fp8", H200, {**HOPPER, "dtype": "float16"}, "runs bfloat16 only, not float16"),
    ("tokamax_triton_fp8", H200, {**HOPPER, "documents": 4}, "declines a packed row (documents > 1)"),
    ("tokamax_triton_fp8", H200, {**HOPPER, "bias": "alibi", "softcap": 30.0}, "tokamax caps the logits after"),
    ("tokamax_mosaic_fp8", CPU, HOPPER, "tokamax_mosaic_fp8 needs an NVIDIA GPU"),
    ("tokamax_mosaic_fp8", H200, HOPPER, "dequantizes a quantized Q, K and V to bf16 before its kernel"),
    ("tokamax_mosaic_fp8", H200, {**HOPPER, "seq_len": 512, "causal": False}, "not FP8 attention"),
])
def test_fp8_through_qwix_runs_on_tokamaxs_triton_kernel_only_and_says_why_not_elsewhere(installed, name, device,
                                                                                          shape, words):
    reason = decline(VARIANTS[name], params(**shape), device)
    assert reason and words in reason, reason


@pytest.mark.parametrize("shape", [HOPPER, {**HOPPER, "window": 512, "fill": 0.5, "softcap": 30.0},
                                   {**HOPPER, "head_dim": 192, "v_head_dim": 128, "bias": "alibi"}])
def test_tokamax_triton_fp8_takes_the_forward_axes_its_kernel_reads(installed, shape):
    assert decline(VARIANTS["tokamax_triton_fp8"], params(**shape), H200) is None
    assert decline(VARIANTS["tokamax_triton_fp8"], params(**shape), ADA) is None
    assert VARIANTS["tokamax_triton_fp8"].fp8_baseline == "tokamax_triton"


def test_the_mosaic_fp8_build_raises_the_same_reason_its_rule_gives():
    from runner.registry import Skip

    with pytest.raises(Skip, match="dequantizes a quantized Q, K and V"):
        VARIANTS["tokamax_mosaic_fp8"].build(params(**HOPPER))


def test_tokamax_triton_fp8_quantises_each_input_to_e4m3_with_one_absmax_scale_before_the_timed_call(calls,
                                                                                                      monkeypatch):
    """prepare (untimed) hands each of Q, K and V to qwix.quantize as e4m3 with no channelwise or tiled axes (one
    scale for the whole tensor); the timed call gives tokamax those QArrays with implementation="triton"; finish
    casts the output to the cell's dtype."""
    import jax.numpy as jnp

    from runner.inputs import make_inputs
    from runner.registry import Staged

    quantised = []

    def quantize(x, qtype, **how):
        quantised.append((x, jnp.dtype(qtype), how))
        return types.SimpleNamespace(qvalue=x.astype(qtype), scale=jnp.ones((1,) * x.ndim, x.dtype))

    monkeypatch.setitem(sys.modules, "qwix", types.SimpleNamespace(quantize=quantize))
    p = params(batch=1, seq_len=32, heads=4, kv_heads=2, head_dim=16, dtype="bfloat16", causal=True, window=8)
    staged = VARIANTS["tokamax_triton_fp8"].build(p)
    assert isinstance(staged, Staged)
    q, k, v = make_inputs(p, seed=0)[:3]
    arrays = staged.prepare(q, k, v)
    assert [(x is given, dtype, how) for (x, dtype, how), given in zip(quantised, (q, k, v))] == [
        (True, jnp.dtype(jnp.float8_e4m3fn), {})] * 3
    out = staged.attend(*arrays)  # the stand-in tokamax returns its query: the QArray of q
    (call,) = calls
    assert out is arrays[0] and call["implementation"] == "triton" and call["local_window_size"] == (7, 0)
    assert staged.finish(jnp.zeros(3, jnp.float32)).dtype == jnp.bfloat16


def test_tokamax_triton_fp8_promises_fp8_and_cudnn_frontend_publishes_an_fp8_figure_at_its_shape():
    """The variant info carries the baseline, so its records carry an fp8 verdict; where it says f8 reached the
    program (runner.leaderboard.fp8_mark), the overlay sets the cell beside cudnn-frontend's FP8 figure at its shape,
    not the bf16 one."""
    from runner import published

    info = VARIANTS["tokamax_triton_fp8"].info()
    assert info.fp8_baseline == "tokamax_triton" and "pass fwd" in info.requires
    shape = params(**{**HOPPER, "seq_len": 16384}).as_dict()
    (fp8,) = [f for f in published.lookup(shape, True) if "cuDNN" in f.source]
    assert fp8.fp8 and fp8.median_s < min(f.median_s for f in published.lookup(shape, False))
