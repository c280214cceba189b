"""The Pallas variants off a GPU: their rules and configuration grids, their layout, scale and GQA handling (Triton
kernels in interpret mode; the Mosaic GPU kernel through its own jnp reference and its lowering for CUDA), the
custom calls that prove their backends, and the configuration search through tune_step."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
import types

import jax
import jax.numpy as jnp
import pytest

from helpers import REPO, params
from runner.cells import expand
from runner.machine import Device
from runner.checks import run_once
from runner.inputs import make_inputs, reference
from runner.programs import compile_step, input_avals, tune_step, with_grads
from runner.shape import Params
from runner.registry import VARIANTS, Skip, Tuned, backend_of, decline, load_all
from runner.spec import load_spec
from runner.timers import Samples
from runner.variants import pallas_decode, pallas_mgpu, pallas_triton

load_all()
H200 = Device("gpu", "NVIDIA H200", 9.0, 141 << 30)
A100 = Device("gpu", "NVIDIA A100", 8.0, 80 << 30)
B200 = Device("gpu", "NVIDIA B200", 10.0, 180 << 30)
CPU = Device("cpu", "cpu", None)
HOPPER = dict(batch=1, seq_len=4096, heads=64, kv_heads=8, head_dim=128, dtype="float16", causal=True)
LAB = dict(batch=4, seq_len=128, heads=8, head_dim=64, dtype="float16", causal=False)
DECODE = dict(batch=8, seq_len=1, kv_seq_len=32768, heads=32, kv_heads=8, head_dim=128, dtype="bfloat16")
CUSTOM_CALL = re.compile(r"custom_call @([^\s(]+)")  # StableHLO spelling: stablehlo.custom_call @target(...)


def test_importing_the_pallas_variants_imports_no_jax():
    code = ("import sys, runner.variants.pallas_mgpu, runner.variants.pallas_triton, runner.variants.pallas_decode; "
            "sys.exit('jax' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


# --- rules: what each variant declines, and why ------------------------------------------------------------------


@pytest.mark.parametrize("name, shape, device, words", [
    ("pallas_mgpu", HOPPER, CPU, "needs an NVIDIA GPU with compute capability ≥ 9.0"),
    ("pallas_mgpu", HOPPER, A100, "needs an NVIDIA GPU with compute capability ≥ 9.0"),
    ("pallas_mgpu", HOPPER, B200, "attention_mgpu is written for Hopper (wgmma, sm_90a); this GPU has compute "
                                  "capability 10.0"),  # the plan says it, so a dry run does, not only the probe
    ("pallas_mgpu", {**HOPPER, "dtype": "bfloat16"}, H200, "runs float16 only, not bfloat16"),
    ("pallas_mgpu", {**HOPPER, "head_dim": 96}, H200, "head_dim a multiple of 64, not 96"),
    ("pallas_mgpu", {**HOPPER, "pass": "fwd_bwd"}, H200, "backward has no causal mask"),
    ("pallas_mgpu", {**HOPPER, "kv_seq_len": 2048}, H200, "needs T <= S, not T=4096 > S=2048"),
    ("pallas_mgpu", {**HOPPER, "seq_len": 4032, "kv_seq_len": 4096}, H200,
     "none of pallas_mgpu's 6 configurations fits this shape (T=4032 is not a multiple of 2 x block_q = 128)"),
    ("pallas_mgpu", {**LAB, "seq_len": 1}, H200, "T=1 is not a multiple of 2 x block_q = 128"),
    ("pallas_triton", {**LAB, "dtype": "float32"}, H200, "runs bfloat16 / float16 only, not float32"),
    ("pallas_triton", {**LAB, "seq_len": 8}, H200, "gives blocks of 8 rows at T=8; Triton's dot needs 16"),
    ("pallas_triton", {**HOPPER, "kv_seq_len": 1024}, H200, "it needs T <= S, not T=4096 > S=1024"),
    ("pallas_triton", {**LAB, "kv_seq_len": 256, "pass": "fwd_bwd"}, H200,
     "the fused backward needs T / block_q_dq == S / block_kv_dkv"),
    ("pallas_decode", {**DECODE, "seq_len": 128}, H200, "one query token per sequence (T = 1), not T=128"),
    ("pallas_decode", {**DECODE, "causal": True}, H200, "a causal T = 1 cell (top-left mask) sees key 0 only"),
    ("pallas_decode", {**DECODE, "pass": "fwd_bwd"}, H200, "has no fwd_bwd pass"),
    ("pallas_decode", {**DECODE, "head_dim": 96}, H200, "head_dim a power of two >= 16, not 96"),
    ("pallas_decode", {**DECODE, "kv_seq_len": 48}, H200, "S=48 / k_splits=4 = 12 keys per split"),
    ("pallas_decode", {**DECODE, "page_size": 16}, H200, "reads one dense cache (pallas_paged is its paged sibling)"),
])
def test_each_variant_declines_what_its_kernel_cannot_run_and_says_why(name, shape, device, words):
    reason = decline(VARIANTS[name], params(**shape), device)
    assert reason and words in reason, reason


@pytest.mark.parametrize("name, shape", [
    ("pallas_mgpu", HOPPER), ("pallas_mgpu", LAB), ("pallas_mgpu", {**LAB, "pass": "fwd_bwd"}),
    ("pallas_triton", HOPPER), ("pallas_triton", {**HOPPER, "pass": "fwd_bwd", "dtype": "bfloat16"}),
    ("pallas_triton", LAB), ("pallas_decode", DECODE), ("pallas_decode", {**DECODE, "kv_seq_len": 1024}),
    ("pallas_decode", {**DECODE, "kv_lengths": "long_tail", "causal": True}),  # one new token sees its whole request
    ("pallas_decode", {**DECODE, "kv_seq_len": 48, "kv_lengths": "equal"}),  # its cache padded to the splits
])
def test_each_variant_takes_the_shapes_it_is_for(name, shape):
    assert decline(VARIANTS[name], params(**shape), H200) is None


def test_the_specs_pallas_cells_run_on_an_h200_except_those_declined_by_design():
    declined = {}
    for path in ("specs/kernels.yaml", "specs/decode.yaml"):
        for cell in expand(load_spec(REPO / path, set(VARIANTS))):
            if cell.variant.startswith("pallas") and (reason := decline(VARIANTS[cell.variant], cell.params, H200)):
                declined.setdefault(reason.split(",")[0], set()).add(cell.variant)
    assert declined == {
        "pallas_mgpu runs float16 only": {"pallas_mgpu"},
        "attention_mgpu's backward has no causal mask (NotImplementedError in jax 0.10.2 and 0.11.2)": {"pallas_mgpu"},
    }


@pytest.mark.parametrize("head_dim, whole", [(8, False), (16, True), (24, False), (64, True), (96, False),
                                             (128, True), (256, True)])
def test_the_triton_decode_kernels_load_whole_heads_of_a_power_of_two_at_least_16(head_dim, whole):
    for name, shape in (("pallas_decode", DECODE), ("pallas_paged", dict(DECODE, page_size=16))):
        reason = VARIANTS[name].check(params(**{**shape, "head_dim": head_dim}))
        assert reason == (None if whole else f"{name} loads whole heads as Triton blocks: head_dim a power of two >= "
                          f"16, not {head_dim}")


def test_manifest_words_carry_the_gqa_repeat_and_the_scale():
    triton, mgpu, decode = (VARIANTS[n].info().requires for n in ("pallas_triton", "pallas_mgpu", "pallas_decode"))
    assert any("repeated to the query heads" in rule for rule in triton)
    assert any("multiplied by 1/sqrt(H)" in rule for rule in mgpu)
    assert any("head-major" in rule for rule in decode)


# --- configuration grids ------------------------------------------------------------------------------------------


def test_mgpu_grid_keeps_the_configuration_measured_past_shared_memory_as_a_candidate():
    causal, plain = pallas_mgpu.configs(params(**HOPPER)), pallas_mgpu.configs(params(**LAB))
    assert dict(block_q=64, block_kv=128, max_concurrent_steps=4) in causal
    assert len(causal) == 6 and not any("kernel" in c for c in causal)  # the emitter has no causal mask
    assert [c["use_schedule_barrier"] for c in plain if c.get("kernel") == "pipeline_emitter"] == [True, False]


def test_mgpu_backward_grid_pairs_compute_warpgroups_with_head_dim_as_jax_tests_do():
    for head_dim, warpgroups in ((64, 2), (128, 2), (256, 1)):
        grid = pallas_mgpu.configs(params(**{**LAB, "head_dim": head_dim, "pass": "fwd_bwd"}))
        assert len(grid) == 3 and {c["compute_wgs_bwd"] for c in grid} == {warpgroups}


def test_every_mgpu_configuration_is_a_valid_tuning_config():
    module = pallas_mgpu.kernel_module()
    for shape in (HOPPER, LAB, {**LAB, "pass": "fwd_bwd"}):
        for config in pallas_mgpu.configs(params(**shape)):
            module.TuningConfig(causal=shape["causal"], **{k: v for k, v in config.items() if k != "kernel"})


def test_configurations_that_do_not_fit_the_shape_are_skipped_with_the_kernels_rule():
    p = params(**LAB)  # T = 128: block_q 128 needs T % 256
    with pytest.raises(Skip, match=r"T=128 is not a multiple of 2 x block_q = 256"):
        pallas_mgpu.make_attend(p, dict(block_q=128, block_kv=64, max_concurrent_steps=2), pallas_mgpu.kernel_module())
    with pytest.raises(Skip, match=r"S=48 / k_splits=4 = 12 keys per split"):
        pallas_decode.make_attend(params(**{**DECODE, "kv_seq_len": 48}), pallas_decode.CONFIGS[0], None)


def test_triton_backward_grid_satisfies_its_fused_kernel_at_equal_lengths():
    for seq_len in (128, 2048, 16384):
        p = params(**{**HOPPER, "seq_len": seq_len, "pass": "fwd_bwd"})
        assert [pallas_triton.config_problem(p, c) for c in pallas_triton.configs(p)] == [None] * 3


# --- layout, scale and GQA against the float32 reference ----------------------------------------------------------


def _rel_err(out, ref) -> float:
    return float(jnp.linalg.norm(out.astype(jnp.float32) - ref) / jnp.linalg.norm(ref))


def test_triton_layout_scale_gqa_and_gradients_match_the_reference_in_interpret_mode():
    p = params(batch=1, seq_len=32, heads=4, kv_heads=2, head_dim=16, dtype="float16", causal=True, pass_="fwd_bwd")
    config = dict(block_q=16, block_k=16, num_stages=2, block_q_dkv=16, block_kv_dkv=16, block_q_dq=16, block_kv_dq=16)
    mha = functools.partial(pallas_triton.kernel_module().mha, interpret=True)
    inputs = make_inputs(p, 0)
    outputs = jax.jit(with_grads(pallas_triton.make_attend(p, config, mha)))(*inputs)
    for name, out, ref in zip(("out", "dq", "dk", "dv"), outputs, reference(p, inputs)):
        assert out.shape == ref.shape and _rel_err(out, ref) < 5e-3, name


def test_decode_layout_scale_and_gqa_match_the_reference_in_interpret_mode():
    p = params(batch=2, seq_len=1, kv_seq_len=64, heads=4, kv_heads=2, head_dim=16, dtype="bfloat16")
    unbatched = functools.partial(pallas_decode.kernel_module().decode_attn_unbatched, interpret=True)
    compiled = compile_step("pallas_decode", pallas_decode.tuned(p, unbatched).build(pallas_decode.CONFIGS[0]), p, {})
    inputs = make_inputs(p, 0)
    assert [a.shape for a in compiled.arguments(inputs)][1] == (2, 2, 64, 16)  # the cache, head-major
    out = run_once(compiled, compiled.arguments(inputs))[0]
    assert out.shape == (2, 1, 4, 16) and _rel_err(out, reference(p, inputs)[0]) < 2e-2


def test_decode_reads_a_ragged_batch_to_each_requests_length_in_interpret_mode():
    p = params(batch=3, seq_len=1, kv_seq_len=40, heads=4, kv_heads=2, head_dim=16, dtype="bfloat16",
               kv_lengths="long_tail", causal=True)
    unbatched = functools.partial(pallas_decode.kernel_module().decode_attn_unbatched, interpret=True)
    config = dict(block_k=16, k_splits=4, num_stages=2)
    compiled = compile_step("pallas_decode", pallas_decode.tuned(p, unbatched).build(config), p, {})
    inputs = make_inputs(p, 0)
    assert inputs[1].shape == (3, 60, 2, 16)  # the longest request of 24, 36 and 60 keys
    assert [a.shape for a in compiled.arguments(inputs)][1] == (3, 2, 64, 16)  # head-major, padded to 4 x 16 keys
    out = run_once(compiled, compiled.arguments(inputs))[0]
    assert out.shape == (3, 1, 4, 16) and _rel_err(out, reference(p, inputs)[0]) < 2e-2


def _mgpu_standin(fails=lambda config: False):
    """attention_mgpu's names, with its own jnp attention_reference as the kernel (it applies no scale either)."""
    module = pallas_mgpu.kernel_module()

    def kernel(q, k, v, config):
        if fails(config):
            raise ValueError("Mosaic GPU kernel exceeds available shared memory (297 KB > 232 KB)")
        return module.attention_reference(q, k, v, causal=config.causal)

    return types.SimpleNamespace(TuningConfig=module.TuningConfig, attention=kernel,
                                 attention_with_pipeline_emitter=kernel)


@pytest.mark.parametrize("shape", [
    dict(seq_len=128, heads=4, kv_heads=2, causal=True),  # K is the smaller tensor: K is scaled
    dict(seq_len=128, kv_seq_len=512, heads=2, kv_heads=2),  # Q is: Q is scaled
])
def test_mgpu_scale_makes_the_kernels_semantics_the_references(shape):
    p = params(batch=1, head_dim=64, dtype="float16", **shape)
    config = pallas_mgpu.configs(p)[0]
    inputs = make_inputs(p, 0)
    truth = reference(p, inputs)[0]
    assert _rel_err(pallas_mgpu.make_attend(p, config, _mgpu_standin())(*inputs), truth) < 5e-3
    unscaled = _mgpu_standin().attention(*inputs, pallas_mgpu.kernel_module().TuningConfig(causal=p.causal, **config))
    assert _rel_err(unscaled, truth) > 0.3  # why the scale is there: the kernel's softmax has none


# --- the custom calls that prove each backend (lowered for CUDA on this CPU) ---------------------------------------


class _CudaRuntime:
    @staticmethod
    def cuda_runtime_get_version() -> int:
        return 13000  # the H200's CUDA 13; attention_mgpu reads it to refuse causal on 12.8-12.9.0


def _lowered_calls(fn, avals) -> list[str]:
    return sorted(set(CUSTOM_CALL.findall(jax.jit(fn).trace(*avals).lower(lowering_platforms=("cuda",)).as_text())))


@pytest.mark.parametrize("shape", [dict(LAB, causal=True), dict(LAB, **{"pass": "fwd_bwd"})])
def test_mgpu_lowers_to_a_mosaic_gpu_custom_call_that_proves_its_backend(shape, monkeypatch):
    module = pallas_mgpu.kernel_module()
    monkeypatch.setattr(module, "cuda_versions", _CudaRuntime)  # None without a CUDA runtime
    p = params(**shape)
    attend = pallas_mgpu.make_attend(p, pallas_mgpu.configs(p)[0], module)
    calls = _lowered_calls(with_grads(attend) if p.pass_ == "fwd_bwd" else attend, input_avals(p))
    assert calls == ["mosaic_gpu_v2"] and backend_of(calls) == "pallas_mosaic_gpu"


def test_triton_and_decode_lower_to_a_triton_custom_call_that_proves_their_backend():
    p = params(**LAB)
    triton = pallas_triton.make_attend(p, pallas_triton.configs(p)[0], pallas_triton.kernel_module().mha)
    d = params(**{**DECODE, "kv_seq_len": 1024})
    unbatched = functools.partial(pallas_decode.kernel_module().decode_attn_unbatched, interpret=False)
    decode = pallas_decode.make_attend(d, pallas_decode.CONFIGS[0], unbatched)
    for calls in (_lowered_calls(triton, input_avals(p)),
                  _lowered_calls(decode, jax.eval_shape(pallas_decode.head_major, *input_avals(d)))):
        assert calls == ["__gpu$xla.gpu.triton"] and backend_of(calls) == "pallas_triton"


# --- the configuration search ---------------------------------------------------------------------------------------


class ConfigTimer:
    """A timer whose samples are what `cost` says of the configuration being tried."""

    name = "device"

    def __init__(self, cost):
        self.cost, self.config = cost, None

    def __call__(self, fn, args, n):
        jax.block_until_ready(fn(*args))
        return Samples([self.cost(self.config)] * n)

    def watching(self, tuned: Tuned) -> Tuned:
        """The same search, telling this timer which configuration each build is for."""
        def build(config):
            self.config = config
            return tuned.build(config)

        return Tuned(tuned.configs, build)


def _search(p: Params, module, cost):
    timer = ConfigTimer(cost)
    tuned = Tuned(pallas_mgpu.configs(p), lambda config: pallas_mgpu.make_attend(p, config, module))
    return tune_step("pallas_mgpu", timer.watching(tuned), p, make_inputs(p, 0), timer)


def test_search_times_what_fits_skips_what_does_not_and_keeps_the_fastest():
    p = params(batch=1, seq_len=128, kv_seq_len=256, heads=4, kv_heads=2, head_dim=64, dtype="float16")
    overflows = lambda tuning: tuning.block_kv == 128 and tuning.max_concurrent_steps == 4  # noqa: E731
    fastest = dict(kernel="pipeline_emitter", block_q=64, block_kv=128, max_concurrent_steps=2,
                   use_schedule_barrier=False)
    cost = lambda c: 1e-3 if c == fastest else 1e-3 + c["block_kv"] * 1e-6 + c["max_concurrent_steps"] * 1e-7  # noqa
    compiled, tuning = _search(p, _mgpu_standin(overflows), cost)
    by_status = {}
    for candidate in tuning.candidates:
        by_status.setdefault(candidate.status, []).append(candidate)
    assert tuning.config == fastest
    assert [c.reason for c in by_status["skipped"]] == [
        "ValueError: Mosaic GPU kernel exceeds available shared memory (297 KB > 232 KB)",
        "T=128 is not a multiple of 2 x block_q = 256", "T=128 is not a multiple of 2 x block_q = 256"]
    assert len(by_status["ok"]) == 5 and all(c.median_s >= 1e-3 for c in by_status["ok"])
    truth = reference(p, make_inputs(p, 0))[0]
    assert _rel_err(run_once(compiled, make_inputs(p, 0))[0], truth) < 5e-3  # the winner's program is the cell's


def test_search_where_no_configuration_runs_skips_the_cell_with_the_reasons():
    p = params(batch=1, seq_len=128, heads=2, head_dim=64, dtype="float16", causal=True)
    with pytest.raises(Skip, match=r"pallas_mgpu: none of its 6 configurations runs this shape \(.*shared memory"):
        _search(p, _mgpu_standin(lambda config: True), lambda config: 1e-3)


# --- legacy: jax deprecated jax.experimental.pallas.ops.gpu in 0.11, for tokamax ---------------------------------


@pytest.mark.parametrize("name", ["pallas_triton", "pallas_mgpu", "pallas_decode"])
def test_each_pallas_variant_is_legacy_and_its_manifest_entry_says_so(name):
    legacy = VARIANTS[name].info().legacy
    assert legacy == pallas_triton.LEGACY and "deprecated jax.experimental.pallas.ops.gpu" in legacy
    assert "tokamax_triton" in legacy and "tokamax_mosaic" in legacy


def test_no_other_variant_is_legacy():
    assert {name for name, v in VARIANTS.items() if v.legacy} == {"pallas_triton", "pallas_mgpu", "pallas_decode",
                                                                   "pallas_paged"}


@pytest.mark.parametrize("name, module", [("pallas_triton", "attention"), ("pallas_decode", "decode_attention"),
                                          ("pallas_mgpu", "attention_mgpu")])
def test_a_legacy_variant_whose_module_jax_removed_declines_with_that_reason(monkeypatch, name, module):
    import importlib.util

    gone = f"jax.experimental.pallas.ops.gpu.{module}"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda found, *a: None if found == gone else real(found, *a))
    assert VARIANTS[name].probe() == f"this jax no longer ships {gone} ({pallas_triton.LEGACY})"


@pytest.mark.parametrize("capability, runs", [(8.0, False), (8.9, False), (9.0, True), (10.0, False),
                                               (12.0, False)])
def test_mgpu_runs_on_hopper_only(capability, runs):
    assert pallas_mgpu.hopper_only(params(**HOPPER), capability) == (
        None if runs else f"attention_mgpu is written for Hopper (wgmma, sm_90a); this GPU has compute capability "
                          f"{capability:.1f}")


def test_a_jax_without_the_whole_package_is_the_same_reason(monkeypatch):
    import importlib.util

    def missing(name, *args):
        raise ModuleNotFoundError(f"No module named '{name.rsplit('.', 1)[0]}'")

    monkeypatch.setattr(importlib.util, "find_spec", missing)
    assert pallas_triton.removed("attention").startswith("this jax no longer ships jax.experimental.pallas.ops.gpu")


def test_while_jax_ships_them_the_legacy_variants_run():
    assert pallas_triton.removed("attention") is None and pallas_triton.removed("decode_attention") is None
