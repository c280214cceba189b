"""runner/registry.py: every variant registered with a docstring; unmet requirements give a reason a person reads."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from helpers import params
from runner.machine import Device, current_device
from runner.registry import VARIANTS, Requires, Variant, device_verdict, load_all, verdict

load_all()
CPU = Device(platform="cpu", kind="cpu", compute_capability=None)
H200 = Device(platform="gpu", kind="H200", compute_capability=9.0)
A100 = Device(platform="gpu", kind="A100", compute_capability=8.0)
T4 = Device(platform="gpu", kind="T4", compute_capability=7.5)
HAS_TE = importlib.util.find_spec("transformer_engine") is not None


def without_probe(name: str) -> Variant:
    """The variant with its API probe removed, so rules are checked whatever this jax has."""
    v = VARIANTS[name]
    return dataclasses.replace(v, requires=dataclasses.replace(v.requires, probe=None))


def test_the_issue_variants_and_the_gpu_ones_are_registered():
    assert {"naive", "xla", "cudnn", "auto", "cudnn_fp8", "te", "te_fp8"} <= set(VARIANTS)


@pytest.mark.parametrize("name", sorted(load_all()))
def test_every_variant_has_a_one_line_docstring(name):
    v = VARIANTS[name]
    assert v.name == name
    assert v.doc and "\n" not in v.doc
    assert v.doc == v.build.__doc__.strip().splitlines()[0]


@pytest.mark.parametrize("name", ["naive", "xla", "auto"])
def test_portable_variants_run_anywhere(name):
    for device in (CPU, T4, H200):
        assert verdict(VARIANTS[name], params(), device) is None


@pytest.mark.parametrize(
    "name, reason",
    [
        ("cudnn", "cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; this run is on cpu"),
        ("cudnn_fp8", "cudnn_fp8 needs an NVIDIA GPU with compute capability ≥ 9.0; this run is on cpu"),
        ("te", "te needs an NVIDIA GPU with compute capability ≥ 8.0; this run is on cpu"),
        ("te_fp8", "te_fp8 needs an NVIDIA GPU with compute capability ≥ 8.9; this run is on cpu"),
    ],
)
def test_skip_reasons_on_cpu(name, reason):
    assert device_verdict(VARIANTS[name], CPU) == reason
    assert verdict(VARIANTS[name], params(dtype="bfloat16"), CPU) == reason


@pytest.mark.skipif(current_device().compute_capability is not None, reason="checks this machine is a CPU")
def test_this_machine_skips_cudnn_with_the_cpu_reason():
    assert device_verdict(VARIANTS["cudnn"], current_device()) == (
        "cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; this run is on cpu"
    )


@pytest.mark.parametrize(
    "name, device, reason",
    [
        ("cudnn", T4, "cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; this run is on T4 (compute capability 7.5)"),
        ("cudnn_fp8", A100, "cudnn_fp8 needs an NVIDIA GPU with compute capability ≥ 9.0; this run is on A100 (compute capability 8.0)"),
        ("te_fp8", A100, "te_fp8 needs an NVIDIA GPU with compute capability ≥ 8.9; this run is on A100 (compute capability 8.0)"),
        ("cudnn", Device("gpu", "MI300X", None), "cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; this run is on gpu"),
    ],
)  # fmt: skip
def test_skip_reasons_on_too_old_or_other_gpus(name, device, reason):
    assert device_verdict(without_probe(name), device) == reason


def test_cudnn_runs_the_lab_default_on_an_h200():
    assert verdict(VARIANTS["cudnn"], params(batch=4, seq_len=128, heads=8, head_dim=64, dtype="bfloat16"), H200) is None


@pytest.mark.parametrize(
    "name, change, reason",
    [
        ("cudnn", {"dtype": "float32"}, "cudnn runs bfloat16 / float16 only, not float32"),
        ("cudnn", {"head_dim": 60}, "cudnn needs head_dim a multiple of 8, not 60"),
        ("cudnn", {"head_dim": 256}, "cudnn supports head_dim up to 128, not 256"),
        ("cudnn_fp8", {"head_dim": 72}, "cudnn_fp8 needs head_dim a multiple of 16, not 72"),
        ("cudnn_fp8", {"dtype": "float16"}, "cudnn_fp8 runs bfloat16 only, not float16"),
        ("cudnn_fp8", {"pass_": "fwd_bwd"}, "cudnn_fp8 has no fwd_bwd pass (it supports fwd)"),
    ],
)
def test_dtype_head_dim_and_pass_rules_on_an_h200(name, change, reason):
    p = params(**{"head_dim": 64, "dtype": "bfloat16", **change})
    assert verdict(without_probe(name), p, H200) == reason


def test_cudnn_accepts_float16_and_head_dim_72_on_an_h200():
    assert verdict(VARIANTS["cudnn"], params(head_dim=72, dtype="float16"), H200) is None


def test_cudnn_fp8_probe_reason_is_reported_when_the_api_is_missing():
    v = VARIANTS["cudnn_fp8"]
    missing = dataclasses.replace(v, requires=dataclasses.replace(v.requires, probe=lambda: "no FP8 API here"))
    fits = params(head_dim=64, dtype="bfloat16")
    assert verdict(missing, fits, H200) == "no FP8 API here"
    assert verdict(v, fits, H200) is None  # the jax the tests install has the private FP8 API


@pytest.mark.skipif(HAS_TE, reason="transformer_engine is installed here")
@pytest.mark.parametrize("name", ["te", "te_fp8"])
def test_te_without_its_package(name):
    assert verdict(VARIANTS[name], params(dtype="bfloat16"), H200) == (
        f"{name} needs the Python package 'transformer_engine', which is not installed here"
    )


def test_device_reasons_come_before_cell_rules():
    # a float32 cell on a CPU: the CPU is the reason, not the dtype
    assert verdict(VARIANTS["cudnn"], params(dtype="float32"), CPU).endswith("this run is on cpu")


def test_registering_adds_one_variant_with_its_requirements():
    from runner.registry import variant

    try:

        @variant("test_registered", requires=Requires(dtypes=("float32",)))
        def build(p):
            """A test variant.

            More text that is not the summary."""
            return None

        v = VARIANTS["test_registered"]
        assert (v.name, v.doc, v.requires.dtypes, v.fp8_baseline) == ("test_registered", "A test variant.", ("float32",), None)
        assert verdict(v, params(dtype="bfloat16"), CPU) == "test_registered runs float32 only, not bfloat16"
    finally:
        VARIANTS.pop("test_registered", None)


def test_min_compute_capability_alone_implies_an_nvidia_gpu():
    v = Variant("test_cc_only", lambda p: None, Requires(min_compute_capability=8.0), "doc")
    assert device_verdict(v, CPU) == "test_cc_only needs an NVIDIA GPU with compute capability ≥ 8.0; this run is on cpu"
