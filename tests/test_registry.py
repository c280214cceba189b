"""runner/registry.py: every variant registered with a docstring; unmet requirements give a reason a person reads."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType

import pytest

from helpers import REPO, params, script, spec_data
from runner.machine import Device, current_device
from runner.registry import (BACKENDS, BROKEN, VARIANTS, VARIANTS_ENV, Requires, Variant, backend_of, decline, load_all,
                             static_decline, unmet)

load_all()
CPU = Device(platform="cpu", kind="cpu", compute_capability=None)
H200 = Device(platform="gpu", kind="H200", compute_capability=9.0)
A100 = Device(platform="gpu", kind="A100", compute_capability=8.0)
T4 = Device(platform="gpu", kind="T4", compute_capability=7.5)
HAS_TE = importlib.util.find_spec("transformer_engine") is not None


def test_the_issue_variants_and_the_gpu_ones_are_registered():
    assert {"naive", "xla", "cudnn", "auto", "cudnn_fp8", "te", "te_fp8"} <= set(VARIANTS)


@pytest.mark.parametrize("name", sorted(load_all()))
def test_every_variant_has_a_one_line_description_that_ends_its_sentence(name):
    """`attnbench list` and the manifest show the docstring's first line: xla_cp's once ran on into a second sentence
    and was cut after "(the record says what ran). Its"."""
    v = VARIANTS[name]
    assert v.name == name
    assert v.doc and "\n" not in v.doc
    assert v.doc == v.build.__doc__.strip().splitlines()[0]
    assert v.doc.endswith("."), v.doc


@pytest.mark.parametrize("name", sorted(load_all()))
def test_every_variants_description_says_what_runs_and_names_no_model_option(name):
    """The first line is the reference's "what runs" column; what a variant takes is its Requires' (the "takes"
    column): tokamax_mosaic's read 'tokamax.dot_product_attention(...): its Pallas ... flash attention (tune: tuned)'."""
    from runner.registry import OPTIONS

    assert not [option for option in OPTIONS if re.search(rf"\b{option}\b", VARIANTS[name].doc)]


@pytest.mark.parametrize("name", ["naive", "xla", "auto"])
def test_portable_variants_run_anywhere(name):
    for device in (CPU, T4, H200):
        assert decline(VARIANTS[name], params(), device) is None


@pytest.mark.parametrize(
    "name, reason",
    [
        ("cudnn", "cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; the device here is cpu"),
        ("cudnn_fp8", "cudnn_fp8 needs an NVIDIA GPU with compute capability ≥ 9.0; the device here is cpu"),
        ("te", "te needs an NVIDIA GPU with compute capability ≥ 8.0; the device here is cpu"),
        ("te_fp8", "te_fp8 needs an NVIDIA GPU with compute capability ≥ 8.9; the device here is cpu"),
    ],
)
def test_skip_reasons_on_cpu(name, reason):
    assert unmet(VARIANTS[name], CPU) == reason
    assert decline(VARIANTS[name], params(dtype="bfloat16", head_dim=64), CPU) == reason


def test_a_cpu_names_beside_its_own_lack_the_rule_every_gpu_would_decline_a_cell_by():
    """A serving cell of 4 new tokens, causal (an ML walk's decode): cuDNN's paged and dense paths decline it on any
    GPU, so a CPU's skip reason (and --dry-run's) says so, where 'needs an NVIDIA GPU' read as if one would run it."""
    decode = params(batch=16, seq_len=4, kv_seq_len=4096, heads=32, kv_heads=8, head_dim=128, dtype="bfloat16",
                    causal=True, kv_lengths="uniform", page_size=16)
    on_gpu = decline(VARIANTS["cudnn_paged"], decode, H200)
    assert on_gpu.startswith("jax's cuDNN path has a top-left causal mask only; T=4 new tokens")
    assert decline(VARIANTS["cudnn_paged"], decode, CPU) == (
        "cudnn_paged needs an NVIDIA GPU with compute capability ≥ 8.0; the device here is cpu; where it can run, it "
        f"declines this cell all the same: {on_gpu}")
    one_token = decode.model_copy(update={"seq_len": 1})
    assert decline(VARIANTS["cudnn_paged"], one_token, CPU) == unmet(VARIANTS["cudnn_paged"], CPU)
    assert decline(VARIANTS["cudnn_paged"], one_token, H200) is None


@pytest.mark.skipif(current_device().compute_capability is not None, reason="checks this machine is a CPU")
def test_this_machine_skips_cudnn_with_the_cpu_reason():
    assert unmet(VARIANTS["cudnn"], current_device()) == (
        "cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; the device here is cpu"
    )


@pytest.mark.parametrize(
    "name, device, reason",
    [
        ("cudnn", T4, "cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; the device here is T4 (compute capability 7.5)"),
        ("cudnn_fp8", A100, "cudnn_fp8 needs an NVIDIA GPU with compute capability ≥ 9.0; the device here is A100 (compute capability 8.0)"),
        ("te_fp8", A100, "te_fp8 needs an NVIDIA GPU with compute capability ≥ 8.9; the device here is A100 (compute capability 8.0)"),
        ("cudnn", Device("gpu", "MI300X", None), "cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; the device here is gpu"),
    ],
)  # fmt: skip
def test_skip_reasons_on_too_old_or_other_gpus(name, device, reason):
    assert unmet(VARIANTS[name], device) == reason


def test_cudnn_runs_the_lab_default_on_an_h200():
    assert decline(VARIANTS["cudnn"], params(batch=4, seq_len=128, heads=8, head_dim=64, dtype="bfloat16"), H200) is None


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
    assert decline(VARIANTS[name], p, H200) == reason


def test_cudnn_accepts_float16_and_head_dim_72_on_an_h200():
    assert decline(VARIANTS["cudnn"], params(head_dim=72, dtype="float16"), H200) is None


def test_rules_need_no_gpu_library():
    """decline() reads the variant's rules only; probes that import GPU libraries run in the worker."""
    assert decline(VARIANTS["cudnn_fp8"], params(head_dim=64, dtype="bfloat16"), H200) is None


@pytest.mark.skipif(HAS_TE, reason="transformer_engine is installed here")
@pytest.mark.parametrize("name", ["te", "te_fp8"])
def test_te_without_its_package(name):
    assert decline(VARIANTS[name], params(dtype="bfloat16"), H200) == (
        f"{name} needs the Python package 'transformer_engine', which is not installed here"
    )


def test_device_reasons_come_before_cell_rules():
    # a float32 cell on a CPU: the CPU is the reason, and the dtype, which every GPU declines, beside it
    assert decline(VARIANTS["cudnn"], params(dtype="float32"), CPU) == (
        "cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; the device here is cpu; where it can run, it declines "
        "this cell all the same: cudnn runs bfloat16 / float16 only, not float32")


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
        assert decline(v, params(dtype="bfloat16"), CPU) == "test_registered runs float32 only, not bfloat16"
    finally:
        VARIANTS.pop("test_registered", None)


def test_min_compute_capability_alone_implies_an_nvidia_gpu():
    v = Variant("test_cc_only", lambda p: None, Requires(min_compute_capability=8.0), "doc")
    assert unmet(v, CPU) == "test_cc_only needs an NVIDIA GPU with compute capability ≥ 8.0; the device here is cpu"


# --- a variant that owns its rules, defined only in a test file ---------------------------------------------

BLOCKED = Path(__file__).with_name("variants") / "blocked.py"


@pytest.fixture
def blocked(monkeypatch):
    """tests/variants/blocked.py registered as a user's variant file is, through $ATTNBENCH_VARIANTS."""
    monkeypatch.setenv(VARIANTS_ENV, str(BLOCKED.parent))
    load_all()
    return VARIANTS["test_blocked"]  # conftest's registry_as_it_was unregisters it and tests/variants' others after


def test_the_run_loops_benchmark_registers_the_test_variants_as_a_user_would(monkeypatch):
    for name, value in script("scripts/bench_supervisor.py").run_env().items():
        monkeypatch.setenv(name, value)
    assert {"test_instant", "test_blocked"} <= set(load_all())  # conftest's registry_as_it_was unregisters them after


def test_a_variant_file_outside_the_package_registers_with_its_rules(blocked):
    assert blocked.backend == "test_host" and BACKENDS["test_host"] == ("test_host_",)
    info = blocked.info()
    assert info.requires == ["dtype float32", "none of the model options", "seq_len a multiple of 16",
                             "kv_heads equal to heads"]
    assert info.backend == "test_host"


def test_its_check_declines_a_cell_with_its_own_reason(blocked):
    assert decline(blocked, params(seq_len=24), CPU) == "test_blocked needs seq_len a multiple of 16 (its block), not 24"
    assert decline(blocked, params(seq_len=32), CPU) is None
    assert decline(blocked, params(seq_len=32, dtype="bfloat16"), CPU) == "test_blocked runs float32 only, not bfloat16"


def test_its_skip_at_build_time_makes_the_cell_skipped_not_failed(blocked):
    from runner.cells import Cell
    from runner.measure import Measurer
    from runner.spec import parse_spec
    from runner.timers import WallTimer

    spec = parse_spec(spec_data(), set(VARIANTS))
    measurer = Measurer(spec, [WallTimer()], "test", current_device())
    gqa = measurer.measure(Cell("t", "test_blocked", params(seq_len=16, kv_heads=2)))
    assert (gqa.status, gqa.reason) == ("skipped", "test_blocked runs MHA only; K=2 is not N=4")
    assert measurer.measure(Cell("t", "test_blocked", params(seq_len=16))).status == "ok"


def test_the_backend_a_variant_declares_is_what_its_custom_calls_prove(blocked):
    assert backend_of(["test_host_attention"]) == "test_host"
    assert backend_of(["__cudnn$fmhaSoftmax"]) == "cudnn"
    assert backend_of(["some_other_call"]) == "xla"


def test_a_broken_variant_file_is_reported_and_the_others_still_load(tmp_path, monkeypatch):
    (tmp_path / "broken.py").write_text("raise RuntimeError('curand shared object not found')\n")
    monkeypatch.setenv(VARIANTS_ENV, str(tmp_path / "broken.py"))
    try:
        assert {"naive", "xla", "cudnn"} <= set(load_all())
        assert BROKEN[str(tmp_path / "broken.py")] == "RuntimeError: curand shared object not found"
    finally:
        BROKEN.clear()


def test_te_preload_failure_of_any_kind_is_a_skip_with_the_error(monkeypatch):
    import builtins

    from runner.registry import Skip
    from runner.variants import transformer_engine

    real_import = builtins.__import__

    def failing(name, *args, **kwargs):
        if name.startswith("transformer_engine"):
            raise RuntimeError("curand shared object not found")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", failing)
    with pytest.raises(Skip, match="TransformerEngine does not load here: RuntimeError: curand shared object not found"):
        transformer_engine.preload()


def test_loading_every_variant_imports_no_gpu_library():
    code = ("import sys; from runner.registry import load_all; load_all(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'flax', 'transformer_engine')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_no_variant_a_test_registered_outlives_it():
    """Run after the tests above that load tests/variants (file order): the site's variant table lists load_all(),
    and a test variant left registered once failed tests/test_docs.py after this file."""
    assert sorted(n for n, v in load_all().items() if not v.build.__module__.startswith("runner.variants.")) == []
    assert not [m for m in sys.modules if m.startswith("attnbench_variants_")] and "test_host" not in BACKENDS


def test_a_variant_naming_a_matmul_its_fp8_peak_cannot_weigh_is_refused_when_registered():
    from runner.registry import variant

    with pytest.raises(ValueError, match=r"variant odd_fp8: fp8_matmuls \['QK'\] are not of \('qk', 'pv'\)"):
        variant("odd_fp8", fp8_baseline="cudnn", fp8_matmuls=("QK",))


# --- a registration the registry refuses, in one line, before any command runs --------------------------------------

@pytest.mark.parametrize("requires, said", [
    (Requires(options=("documnets",)), r"variant test_refused: Requires names \['documnets'\], which are not model "
                                       r"options \(those are window, fill, .*, tune\)$"),
    (Requires(why_not=MappingProxyType({"document": "its blocks split at T/2"})), r"Requires names \['document'\]"),
    (Requires(options=("documents",), why_not=MappingProxyType({"documents": "its blocks split at T/2"})),
     r"variant test_refused: Requires gives a reason to decline \['documents'\] \(why_not\), which it takes"),
])
def test_a_model_option_misnamed_or_both_taken_and_declined_is_refused_when_registered(requires, said):
    from runner.registry import variant

    with pytest.raises(ValueError, match=said):
        variant("test_refused", requires)


EACH = MappingProxyType({"bfloat16": 6, "float16": 6, "float32": 8})


@pytest.mark.parametrize("requires", [Requires(score_bytes=MappingProxyType({"fwd": EACH})),
                                      Requires(passes=("fwd",), score_bytes=MappingProxyType({"fwd": EACH, "bwd": EACH}))])
def test_score_bytes_not_given_for_each_pass_a_variant_runs_are_refused_when_registered(requires):
    """A pass left out would count no scores for its cells (the memory rule, runner.memory.too_large); a misspelt one
    would count none for the pass it meant."""
    from runner.registry import variant

    with pytest.raises(ValueError, match=r"^variant test_refused: Requires gives score_bytes for \[.*\], not for the "
                                         r"passes it runs \(fwd"):
        variant("test_refused", requires)


@pytest.mark.parametrize("requires", [Requires(passes=("fwd",), score_bytes=MappingProxyType({"fwd": {"bfloat16": 6}})),
                                      Requires(passes=("fwd",), dtypes=("bfloat16",), score_bytes=MappingProxyType(
                                          {"fwd": {"bfloat16": 6, "float32": 8}}))])
def test_score_bytes_not_given_for_each_dtype_a_variant_runs_are_refused_when_registered(requires):
    """A dtype left out would count no scores for its cells; the records show each dtype keeps its own."""
    from runner.registry import variant

    with pytest.raises(ValueError, match=r"^variant test_refused: Requires gives fwd's score_bytes for \[.*\], not for "
                                         r"the dtypes it runs \((bfloat16|float32)"):
        variant("test_refused", requires)


def test_a_variant_that_materialises_the_scores_says_so_in_its_requirements():
    assert "device memory for its (B, N, T, S) scores (fwd: 6 bytes each bfloat16, 6 bytes each float16, 8 bytes " \
           "each float32; fwd_bwd: 10 bytes each bfloat16, 8 bytes each float16, 12 bytes each float32)" in \
        VARIANTS["xla"].info().requires
    assert not [need for need in VARIANTS["cudnn"].info().requires if "scores" in need]


def test_a_model_option_reads_with_its_own_article_where_declined_and_where_taken():
    from dataclasses import replace

    from runner.registry import option_decline

    toy = replace(VARIANTS["xla"], name="toy", requires=Requires(options=("window", "bias")))
    assert option_decline(replace(toy, requires=Requires()), params(bias="alibi")) == (
        "toy declines an ALiBi bias: it implements none")  # was "declines a ALiBi bias"
    assert option_decline(toy, params(softcap=30.0)) == "toy declines a logit soft cap: it implements none"
    assert toy.requires.words() == ["of the model options, only a sliding window, an ALiBi bias"]


def test_a_refused_variant_file_is_listed_broken_with_that_line(tmp_path, monkeypatch):
    (tmp_path / "typo.py").write_text("from runner.registry import Requires, variant\n\n"
                                      "@variant('test_typo', requires=Requires(options=('documnets',)))\n"
                                      "def build(p):\n    '''A typo.'''\n")
    monkeypatch.setenv(VARIANTS_ENV, str(tmp_path / "typo.py"))
    assert "test_typo" not in load_all()
    assert BROKEN[str(tmp_path / "typo.py")].startswith("ValueError: variant test_typo: Requires names ['documnets']")


def test_a_file_refused_at_its_second_variant_loads_none_of_them(tmp_path, monkeypatch):
    path = variant_file(tmp_path / "halfbad.py", "'test_good', backend='test_good_backend', proves=('test_good_',)",
                        "'test_bad', rules=('no check',)")
    monkeypatch.setenv(VARIANTS_ENV, path)
    assert not {"test_good", "test_bad"} & set(load_all())  # list said yes and --dry-run planned test_good
    assert "test_good_backend" not in BACKENDS
    assert BROKEN[path].startswith("ValueError: variant test_bad: rules=('no check',) without a check")


def test_a_name_registered_already_is_refused_and_the_first_stays():
    from runner.registry import variant

    first = VARIANTS["xla"]
    with pytest.raises(ValueError, match=r"^variant xla: the name is registered already, by "
                                         r"runner\.variants\.jax_attention$"):
        variant("xla")(lambda p: None)
    assert VARIANTS["xla"] is first


def test_a_build_without_a_docstring_is_refused_as_its_description_would_be_blank():
    from runner.registry import variant

    def build(p):
        return None

    with pytest.raises(ValueError, match=r"^variant test_undescribed: build has no docstring: its first line is the "
                                         r"description that `attnbench list`, the manifest and the dashboard show$"):
        variant("test_undescribed")(build)


@pytest.mark.parametrize("backend, proves, said", [
    ("test_unproven", (), r"^variant test_refused: nothing proves backend 'test_unproven': give proves=\(the prefixes "
                          r"of its custom-call targets\)$"),
    ("cudnn", ("__cudnn$fmhaX",), r"^variant test_refused: backend 'cudnn' is proved by \('__cudnn\$fmha',\) already, "
                                  r"not by \('__cudnn\$fmhaX',\)$"),
])
def test_a_backend_nothing_proves_or_proved_two_ways_is_refused_when_registered(backend, proves, said):
    from runner.registry import variant

    with pytest.raises(ValueError, match=said):
        variant("test_refused", backend=backend, proves=proves)
    assert BACKENDS["cudnn"] == ("__cudnn$fmha",) and "test_unproven" not in BACKENDS


def variant_file(path: Path, *registrations: str) -> str:
    """A variant file registering each `@variant(...)` given, each with a docstring; its path."""
    builds = "".join(f'\n\n@variant({args})\ndef build_{i}(p):\n    """A test variant."""\n'
                     for i, args in enumerate(registrations))
    path.write_text(f"from runner.registry import Requires, variant\n{builds}")
    return str(path)


def test_two_variant_files_of_one_name_in_two_folders_both_load_and_one_file_named_twice_once(tmp_path, monkeypatch):
    """The second attention.py was taken for the first (one module name a file name) and skipped without a word."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    first = variant_file(tmp_path / "a" / "attention.py", "'test_team_a'")
    second = variant_file(tmp_path / "b" / "attention.py", "'test_team_b'")
    again = str(tmp_path / "b" / ".." / "a" / "attention.py")  # a's file, spelt otherwise
    monkeypatch.setenv(VARIANTS_ENV, os.pathsep.join([first, second, str(tmp_path / "a"), again]))
    assert {"test_team_a", "test_team_b"} <= set(load_all()) and not [f for f in BROKEN if f.startswith(str(tmp_path))]
    assert sys.modules[VARIANTS["test_team_b"].build.__module__].__file__ == second


def test_a_name_registered_already_by_a_variant_file_names_that_file(tmp_path, monkeypatch):
    files = [variant_file(tmp_path / "one.py", "'test_twice'"), variant_file(tmp_path / "two.py", "'test_twice'")]
    monkeypatch.setenv(VARIANTS_ENV, os.pathsep.join(files))
    load_all()
    assert BROKEN[files[1]] == f"ValueError: variant test_twice: the name is registered already, by {files[0]}"


def test_a_file_whose_fp8_variant_names_no_baseline_is_listed_broken_once_every_file_has_loaded(tmp_path, monkeypatch):
    files = [variant_file(tmp_path / "fp8.py", "'test_fp8_baseless', fp8_baseline='nope'", "'test_fp8_sibling'"),
             variant_file(tmp_path / "early.py", "'test_fp8_early', fp8_baseline='test_bf16_late'"),
             variant_file(tmp_path / "late.py", "'test_bf16_late'")]
    monkeypatch.setenv(VARIANTS_ENV, os.pathsep.join(files))
    loaded = set(load_all())
    assert {"test_fp8_early", "test_bf16_late"} <= loaded and not {"test_fp8_baseless", "test_fp8_sibling"} & loaded
    assert BROKEN[files[0]] == "ValueError: variant test_fp8_baseless: its fp8_baseline 'nope' is no registered variant"


def test_a_check_that_breaks_its_contract_on_the_default_cell_is_listed_broken_at_load(tmp_path, monkeypatch):
    files = [variant_file(tmp_path / "bool.py", "'test_bool', check=lambda p: p.seq_len > 16"),
             variant_file(tmp_path / "typo.py", "'test_typo', check=lambda p: p.seqlen")]
    monkeypatch.setenv(VARIANTS_ENV, os.pathsep.join(files))
    assert not {"test_bool", "test_typo"} & set(load_all())  # list and --dry-run had it, the run died on it
    assert BROKEN[files[0]] == (f"BadVariant: variant test_bool: its check ({files[0]}:4) returned True, not a reason "
                                "(a str) or None")
    assert BROKEN[files[1]] == (f"BadVariant: variant test_typo: its check ({files[1]}:4) raised AttributeError: "
                                "'Params' object has no attribute 'seqlen'")


def test_a_file_whose_check_breaks_on_the_default_cell_takes_its_backend_and_a_later_file_is_judged_without_it(
        tmp_path, monkeypatch):
    files = [variant_file(tmp_path / "a.py", "'test_a', backend='test_bk', proves=('test_bk_',), "
                                             "check=lambda p: p.seqlen"),
             variant_file(tmp_path / "b.py", "'test_b', backend='test_bk', proves=('other_',)")]
    monkeypatch.setenv(VARIANTS_ENV, os.pathsep.join(files))
    loaded = set(load_all())  # b was refused for a's prefixes, and a's stayed to prove test_bk
    assert "test_a" not in loaded and "test_b" in loaded and files[1] not in BROKEN
    assert BROKEN[files[0]].startswith("BadVariant: variant test_a: its check")
    assert BACKENDS["test_bk"] == ("other_",) and backend_of(["test_bk_kernel"]) == "xla"


def test_a_file_dropped_for_its_fp8_baseline_takes_the_backend_it_alone_proved(tmp_path, monkeypatch):
    path = variant_file(tmp_path / "fp8.py", "'test_fp8_proved', backend='test_fp8_bk', proves=('test_fp8_bk_',), "
                                             "fp8_baseline='nope'")
    monkeypatch.setenv(VARIANTS_ENV, path)
    assert "test_fp8_proved" not in load_all() and path in BROKEN
    assert "test_fp8_bk" not in BACKENDS and backend_of(["test_fp8_bk_kernel"]) == "xla"


def test_a_dropped_file_drops_the_files_whose_fp8_baseline_it_held_until_none_is_left_unsound(tmp_path, monkeypatch):
    files = [variant_file(tmp_path / "c.py", "'test_c', fp8_baseline='test_d'"),
             variant_file(tmp_path / "m2.py", "'test_d'", "'test_e', fp8_baseline='nope'"),
             variant_file(tmp_path / "f.py", "'test_f', fp8_baseline='test_c'")]
    monkeypatch.setenv(VARIANTS_ENV, os.pathsep.join(files))
    assert not {"test_c", "test_d", "test_e", "test_f"} & set(load_all())  # test_c was asked before m2 was dropped
    assert BROKEN[files[0]] == "ValueError: variant test_c: its fp8_baseline 'test_d' is no registered variant"
    assert BROKEN[files[2]] == "ValueError: variant test_f: its fp8_baseline 'test_c' is no registered variant"


def test_a_variant_whose_worker_got_its_preload_from_a_dropped_file_is_dropped_with_its_file(tmp_path, monkeypatch):
    files = [variant_file(tmp_path / "pa.py", "'test_pa', worker='test_w', preload=lambda: None, fp8_baseline='nope'"),
             variant_file(tmp_path / "pb.py", "'test_pb', worker='test_w'", "'test_pb_sibling'")]
    monkeypatch.setenv(VARIANTS_ENV, os.pathsep.join(files))
    assert not {"test_pa", "test_pb", "test_pb_sibling"} & set(load_all())  # test_pb ran without test_w's preload
    assert BROKEN[files[1]] == ("ValueError: variant test_pb: worker 'test_w' has no preload: the file that gave it is "
                                "not loaded")


def test_a_check_is_asked_at_load_only_of_a_default_cell_its_requires_leave_to_it(tmp_path, monkeypatch):
    path = variant_file(tmp_path / "h128.py", "'test_h128', Requires(head_dim_multiple=128, max_head_dim=256), "
                                              "check=lambda p: {128: None, 256: None}[p.head_dim]")
    monkeypatch.setenv(VARIANTS_ENV, path)
    h128 = load_all()["test_h128"]  # the default cell's head_dim 64 was handed to the check: "KeyError: 64"
    assert path not in BROKEN and decline(h128, params(head_dim=128), CPU) is None
    assert decline(h128, params(head_dim=64), CPU) == "test_h128 needs head_dim a multiple of 128, not 64"


def test_a_check_that_breaks_on_some_cells_alone_names_the_variant_and_its_file_there(tmp_path, monkeypatch):
    from runner import BadVariant

    path = variant_file(tmp_path / "late.py", "'test_late', check=lambda p: p.seqlen if p.causal else None")
    monkeypatch.setenv(VARIANTS_ENV, path)
    late = load_all()["test_late"]
    assert decline(late, params(), CPU) is None
    with pytest.raises(BadVariant, match=rf"^variant test_late: its check \({path}:4\) raised AttributeError: "
                                         r"'Params' object has no attribute 'seqlen'$"):
        decline(late, params(causal=True), CPU)


def test_a_gpu_check_speaks_on_a_gpu_alone_with_the_device_s_compute_capability(tmp_path, monkeypatch):
    """What the device's compute capability decides: said by decline (the plan, the dry run) on a GPU; on a CPU, and
    to validate and the shard prices (static_decline, any device), nothing changes."""
    path = variant_file(tmp_path / "wide.py", "'test_wide', rules=('head_dim past 128 on Hopper',), gpu_check=lambda p, "
                        "found: f'head_dim {p.head_dim} on {found:.1f}' if p.head_dim > 128 and found < 9.0 else None")
    monkeypatch.setenv(VARIANTS_ENV, path)
    wide = load_all()["test_wide"]
    assert path not in BROKEN and wide.info().requires[-1] == "head_dim past 128 on Hopper"
    assert decline(wide, params(head_dim=256), Device("gpu", "NVIDIA L4", 8.9)) == "head_dim 256 on 8.9"
    assert decline(wide, params(head_dim=256), H200) is None and decline(wide, params(head_dim=128), A100) is None
    assert decline(wide, params(head_dim=256), CPU) is None and static_decline(wide, params(head_dim=256)) is None


def test_a_gpu_check_that_breaks_names_the_variant_and_its_file(tmp_path, monkeypatch):
    from runner import BadVariant

    path = variant_file(tmp_path / "typo.py", "'test_gpu_typo', gpu_check=lambda p, found: p.seqlen")
    monkeypatch.setenv(VARIANTS_ENV, path)
    typo = load_all()["test_gpu_typo"]
    with pytest.raises(BadVariant, match=rf"^variant test_gpu_typo: its gpu_check \({path}:4\) raised AttributeError: "
                                         r"'Params' object has no attribute 'seqlen'$"):
        decline(typo, params(), H200)


def test_a_worker_no_variant_preloads_is_refused_when_registered_as_a_typo_would_start_a_process_of_its_own():
    from runner.registry import variant

    with pytest.raises(ValueError, match=r"^variant test_refused: worker 'transformer_engin' is none of the workers "
                                         r"\(jax, transformer_engine\); a worker of its own is named with the preload= "
                                         r"that loads its libraries before JAX's GPU backend starts$"):
        variant("test_refused", worker="transformer_engin")

    def build(p):
        """A test variant."""

    variant("test_own_worker", worker="test_libs", preload=lambda: None)(build)  # a worker of its own, named
    variant("test_its_sibling", worker="test_libs")(build)  # its preload given by the variant before it
    assert VARIANTS["test_its_sibling"].worker == "test_libs"


@pytest.mark.parametrize("rules, said", [
    (dict(rules=("seq_len a multiple of 16",)), r"^variant test_refused: rules=\('seq_len a multiple of 16',\) without "
                                                r"a check: give check= \(or gpu_check=\) the same rules in code, or "
                                                r"drop rules$"),
    (dict(backend="xla", proves=("my_call",)), r"^variant test_refused: proves=\('my_call',\) has no effect beside "
                                               r"backend 'xla' \(what no custom call proves reads as xla\): name the "
                                               r"backend they prove, or drop proves$"),
    (dict(proves=("my_call",)), r"^variant test_refused: proves=\('my_call',\) has no effect beside backend None"),
    (dict(backend="test_myback", proves=("my_call")), r"^variant test_refused: proves='my_call' is not a tuple of "
                                                     r"custom-call prefixes \(non-empty strings\); one prefix is "
                                                     r"written \('prefix',\), with its comma$"),
    (dict(backend="test_myback", proves=("my_call", "")), r"^variant test_refused: proves=\('my_call', ''\) is not a "
                                                         r"tuple of custom-call prefixes"),
])
def test_what_would_have_no_effect_is_refused_when_registered(rules, said):
    from runner.registry import variant

    with pytest.raises(ValueError, match=said):
        variant("test_refused", **rules)
    assert "my_call" not in str(BACKENDS)
