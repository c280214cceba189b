"""runner/cli.py end to end: its exit codes, its output and its files.

`main(ARGS)` runs in this process wherever the exit code and the output are all that is checked; a subprocess
only where a real process matters: the real run as a user starts it (`python -m runner run`), a SIGKILL, and
an interpreter without the project's dependencies.
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import shapes_spec
from helpers import REPO, attnbench, command, environment, in_process, spec_data, table_rows, write_spec
from runner.cells import expand
from runner.machine import Device
from runner.registry import load_all
from runner.results import CELLS, MANIFEST
from runner.shape import NAMES
from runner.store import read_run
from runner.spec import load_spec

CPU_SKIP = "cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; the device here is cpu"
# a float32 cell: what every GPU declines it by, beside the CPU
F32_SKIP = f"{CPU_SKIP}; where it can run, it declines this cell all the same: cudnn runs bfloat16 / float16 only, " \
           "not float32"
RUN_ID = "cli-test"


def tiny_spec() -> dict:
    """10 cells: the four variants with and without the mask (GQA), and naive/xla forward+backward."""
    return spec_data(
        {"name": "variants", "variants": ["naive", "xla", "auto", "cudnn"], "kv_heads": 2, "sweep": {"causal": [False, True]}},
        {"name": "backward", "variants": ["naive", "xla"], "pass": "fwd_bwd", "causal": True, "kv_heads": 1},
    )  # fmt: skip


SHIPPED_RUN = REPO / "examples" / "results" / "cpu" / "lab5-20261202-104832"  # 76 cells: 41 ok, 35 skipped


# XLA's default for the CPU flag, a GPU flag a CPU's run leaves out, a TE backend choice and a path TE reads
KERNEL_SETTINGS = {"XLA_FLAGS": "--xla_gpu_autotune_level=0 --xla_cpu_enable_fast_math=false",
                   "NVTE_FUSED_ATTN": "0", "NVTE_CUDA_INCLUDE_DIR": "/nowhere"}


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    return write_spec(tmp_path_factory.mktemp("spec") / "tiny.yaml", tiny_spec())


@pytest.fixture(scope="module")
def run(spec_path, tmp_path_factory):
    """One real run of the tiny spec, shared by the tests that read it: (process, run folder). Its environment sets
    settings that can change kernels (KERNEL_SETTINGS), which change nothing on a CPU but its manifest."""
    out = tmp_path_factory.mktemp("results")
    spool = tmp_path_factory.mktemp("spool")
    result = attnbench("run", spec_path, "--out", out, "--run-id", RUN_ID, ATTNBENCH_SPOOL=str(spool),
                       **KERNEL_SETTINGS)
    return result, out / RUN_ID


# --- validate -----------------------------------------------------------------------------------------


def test_validate_ok(spec_path, capsys):
    result = in_process(capsys, "validate", spec_path)
    assert (result.code, result.err) == (0, "")
    assert result.out.splitlines() == [f"{spec_path}: ok (2 experiments, 10 cells, 2 declined on any device; --dry-run "
                                       "adds this machine's)", "  2  cudnn runs bfloat16 / float16 only, not float32"]


def test_validate_counts_the_declines_of_the_first_cells_alone_and_says_so(spec_path, capsys, monkeypatch):
    """Its time and memory stay those of DECLINES_COUNTED cells: asking each variant of all the 960,000 cells
    --max-cells admits took 21 s and 1 GB. The cells are counted, not made."""
    monkeypatch.setattr("runner.spec.DECLINES_COUNTED", 4)  # naive, xla, auto, cudnn unmasked: cudnn's float32
    assert in_process(capsys, "validate", spec_path).out.splitlines() == [
        f"{spec_path}: ok (2 experiments, 10 cells, 1 of the first 4 declined on any device; the other 6 not asked: "
        "--dry-run asks them, and adds this machine's)", "  1  cudnn runs bfloat16 / float16 only, not float32"]
    monkeypatch.setattr("runner.spec.DECLINES_COUNTED", 3)  # "ok" where a check raising on cell 4 ends --dry-run
    assert in_process(capsys, "validate", spec_path).out == (f"{spec_path}: ok (2 experiments, 10 cells, none of the "
                                                             "first 3 declined on any device; the other 7 not asked: "
                                                             "--dry-run asks them)\n")


def test_validate_counts_the_cells_declined_on_any_device_one_line_a_reason(tmp_path, capsys):
    path = write_spec(tmp_path / "declines.yaml", spec_data(
        {"name": "a", "variants": ["xla", "cudnn", "pallas_triton"], "sweep": {"causal": [False, True]}},
        {"name": "b", "variants": ["cudnn"], "dtype": "bfloat16", "window": 4},
        {"name": "c", "variants": ["cudnn"], "dtype": "bfloat16",
         "sweep": {"head_dim": [8 * n for n in range(17, 39)]}}))
    result = in_process(capsys, "validate", path)
    assert (result.code, result.err) == (0, "")  # declined cells are no error: run records them skipped, with why
    assert result.out.splitlines() == [  # was "ok (3 experiments, 29 cells)", nothing said of the 27 declined
        f"{path}: ok (3 experiments, 29 cells, 27 declined on any device; --dry-run adds this machine's)",
        "  2  cudnn runs bfloat16 / float16 only, not float32",
        "  2  pallas_triton runs bfloat16 / float16 only, not float32",
        "  1  cudnn: jax's cuDNN path takes a window only with a causal mask (it raises \"cuDNN doesn't support right "
        "window\" otherwise)",  # a check's reason that does not name its variant is led by its name
        *[f"  1  cudnn supports head_dim up to 128, not {8 * n}" for n in range(17, 34)],
        "  … and 5 more reasons",
        "b: no cell runs on any device (cudnn: jax's cuDNN path takes a window only with a causal mask (it raises "
        "\"cuDNN doesn't support right window\" otherwise))",
        "c: no cell runs on any device (cudnn supports head_dim up to 128, not 136)"]


def test_validate_says_a_reason_several_variants_give_once_after_their_names(tmp_path, capsys):
    """A rule no variant can run a cell by came once a variant, each line led by one name ("  1  naive: 400 documents
    …", "  1  xla: 400 documents …"), and so did a model option each declines alike."""
    path = write_spec(tmp_path / "alike.yaml", spec_data(
        {"name": "packed", "variants": ["naive", "xla"], "seq_len": 512, "causal": True,
         "sweep": {"documents": [1, 400]}},
        {"name": "capped", "variants": ["cudnn", "xla"], "dtype": "bfloat16", "sweep": {"softcap": [None, 30.0]}}))
    assert [line for line in in_process(capsys, "validate", path).out.splitlines() if line.startswith(" ")] == [
        "  2  naive, xla: 400 documents need a row of at least 800 tokens (T=512)",
        "  2  cudnn, xla decline a logit soft cap: jax.nn.dot_product_attention takes no logit soft cap"]


def test_validate_names_the_variants_of_one_reason_in_one_order(tmp_path, capsys):
    """By name, as `attnbench list` lists them: deepseek-v3's count said "xla, xla_paged decline …" and its serve
    experiment's line "xla_paged, xla decline …", each in the order its cells came (review s15, finding 11)."""
    path = write_spec(tmp_path / "order.yaml", spec_data(
        {"name": "one", "variants": ["cudnn", "xla"], "dtype": "bfloat16", "sweep": {"softcap": [None, 30.0]}},
        {"name": "two", "variants": ["xla", "cudnn"], "dtype": "bfloat16", "sweep": {"softcap": [None, 30.0]}}))
    said = in_process(capsys, "validate", path).out.splitlines()[1:]
    reason = "cudnn, xla decline a logit soft cap: jax.nn.dot_product_attention takes no logit soft cap"
    assert said == [f"  4  {reason}", f"one: no cell runs on any device at softcap 30.0 ({reason})",
                    f"two: no cell runs on any device at softcap 30.0 ({reason})"]


def test_validate_names_each_swept_value_no_cell_of_which_runs_on_any_device_one_line_an_experiment(tmp_path, capsys):
    """documents 400 at T 512 passed validate unmentioned (its cells skipped at run time, --dry-run listing each):
    a typo of 400 for 4 (ml walk, finding 6). A value that some cell runs at, on some variant, is no news."""
    path = write_spec(tmp_path / "idle.yaml", spec_data(
        {"name": "packed", "variants": ["naive", "xla"], "seq_len": 512, "causal": True,
         "sweep": {"documents": [1, 400], "pass": ["fwd", "fwd_bwd"]}},
        {"name": "some-run", "variants": ["xla", "cudnn"], "sweep": {"dtype": ["float32", "bfloat16"]}},
        {"name": "capped", "variants": ["cudnn", "xla"], "dtype": "bfloat16",
         "sweep": {"softcap": [None, 30.0], "head_dim": [64, 256]}},
        {"name": "wide", "variants": ["cudnn"], "dtype": "bfloat16",
         "sweep": {"head_dim": [512, 64, 256], "softcap": [30.0, None]}},
        {"name": "dtypes", "variants": ["cudnn"], "sweep": {"dtype": ["float32", "bfloat16"]}}))
    result = in_process(capsys, "validate", path)
    assert (result.code, result.err) == (0, "")
    assert [line for line in result.out.splitlines() if not line.startswith(" ")][1:] == [
        "packed: no cell runs on any device at documents 400 (400 documents need a row of at least 800 tokens (T=512))",
        "capped: no cell runs on any device at softcap 30.0 (cudnn, xla decline a logit soft cap: "
        "jax.nn.dot_product_attention takes no logit soft cap)",  # one reason several variants give, said once
        "wide: no cell runs on any device at head_dim 512 (cudnn supports head_dim up to 128, not 512), nor at head_dim "
        "256 (cudnn supports head_dim up to 128, not 256), nor at softcap 30.0 (cudnn declines a logit soft cap: "
        "jax.nn.dot_product_attention takes no logit soft cap)",  # in the sweep's order, where the walk met 30.0 first
        "dtypes: no cell runs on any device at dtype float32 (cudnn runs bfloat16 / float16 only, not float32)"]
    # a string as the spec writes it, beside the numbers: it read "at dtype 'float32'" (review s14 #10)


def test_validate_says_several_reasons_for_a_value_one_a_line_below_it(tmp_path, capsys):
    """deepseek-v3's serve said six reasons for page_size 16 in one line of 640 characters."""
    path = write_spec(tmp_path / "many.yaml", spec_data(
        {"name": "both", "variants": ["cudnn", "pallas_triton"], "seq_len": 512,
         "sweep": {"dtype": ["float32", "bfloat16"], "softcap": [None, 30.0]}}))
    assert in_process(capsys, "validate", path).out.split("\n", 5)[5].splitlines() == [
        "both: no cell runs on any device at dtype float32:",
        "    cudnn runs bfloat16 / float16 only, not float32",
        "    pallas_triton runs bfloat16 / float16 only, not float32",
        "  nor at softcap 30.0:",
        "    cudnn declines a logit soft cap: jax.nn.dot_product_attention takes no logit soft cap",
        "    pallas_triton declines a logit soft cap: it implements none"]


def test_validate_says_nothing_of_the_values_of_an_experiment_it_did_not_ask_whole(spec_path, tmp_path, capsys,
                                                                                     monkeypatch):
    """Past DECLINES_COUNTED cells the last experiment asked may be cut short: a value whose asked cells are all
    declined may run in the cells not asked."""
    path = write_spec(tmp_path / "cut.yaml", spec_data(
        {"name": "first", "variants": ["naive"], "seq_len": 512, "sweep": {"documents": [400, 1]}}))
    monkeypatch.setattr("runner.spec.DECLINES_COUNTED", 1)
    assert in_process(capsys, "validate", path).out.splitlines()[2:] == []
    monkeypatch.setattr("runner.spec.DECLINES_COUNTED", 2)
    assert in_process(capsys, "validate", path).out.splitlines()[2:] == [
        "first: no cell runs on any device at documents 400 (400 documents need a row of at least 800 tokens (T=512))"]


def test_bad_spec_exits_2_with_one_stderr_line_per_problem(tmp_path, capsys):
    long_name = "flash" * 30  # a line longer than a terminal stays one line
    bad = spec_data(
        {"name": "a", "variants": ["xla", long_name]},
        {"name": "b", "variants": ["naive"], "heads": 6, "kv_heads": 4},
        {"name": "b", "variants": ["naive"], "sweep": {}},
    )
    path = write_spec(tmp_path / "bad.yaml", bad)
    result = in_process(capsys, "validate", path)
    assert result.code == 2
    assert result.errors == [f"error: {path}: {problem}" for problem in [  # the file, then the YAML path
        f"experiments[0].variants[1]: unknown variant '{long_name}' (known: {', '.join(sorted(load_all()))})",
        "experiments[1].kv_heads: heads (6) must be a multiple of kv_heads (4)",
        "experiments[2].name: duplicate experiment name 'b'",
        "experiments[2].sweep: must name at least one axis",
    ]]
    assert result.out == ""


def test_run_of_a_bad_spec_exits_2_and_writes_nothing(tmp_path, capsys):
    bad = spec_data({"name": "a", "variants": ["xla"], "bogus": 1, "sweep": {"seq_len": [64, 0]}})
    result = in_process(capsys, "run", write_spec(tmp_path / "bad.yaml", bad), "--out", tmp_path / "out")
    assert result.code == 2
    assert result.errors == [
        f"error: {tmp_path / 'bad.yaml'}: experiments[0].sweep.seq_len[1]: must be > 0",
        f"error: {tmp_path / 'bad.yaml'}: experiments[0].bogus: unknown key",
    ]
    assert not (tmp_path / "out").exists()


def test_run_of_an_experiment_no_variant_can_run_exits_2_with_one_line(tmp_path, capsys):
    bad = spec_data({"name": "a", "variants": ["xla"], "page_size": 16, "bias": "alibi"})
    result = in_process(capsys, "run", write_spec(tmp_path / "bad.yaml", bad), "--out", tmp_path / "out")
    assert (result.code, result.errors) == (2, [
        f"error: {tmp_path / 'bad.yaml'}: experiments[0].bias: no variant can run any cell of a: a serving cell "
        "(page_size set) takes no bias (ALiBi's positions are not aligned to each request's end)"])
    assert not (tmp_path / "out").exists()


def test_missing_spec_exits_2(tmp_path, capsys):
    path = tmp_path / "nowhere.yaml"
    result = in_process(capsys, "run", path, "--out", tmp_path)
    assert (result.code, result.errors) == (2, [f"error: {path}: no such file"])


def test_unreadable_yaml_exits_2_with_line_and_column(tmp_path, capsys):
    path = write_spec(tmp_path / "broken.yaml", "name: t\nexperiments:\n  - name: a\n    variants: [xla\n")
    result = in_process(capsys, "validate", path)
    assert result.code == 2
    assert result.errors == [f"error: {path}:5:1: not valid YAML (expected ',' or ']', but got '<stream end>')"]


def test_unknown_command_is_a_usage_error(capsys):
    result = in_process(capsys, "frobnicate")
    assert result.code == 2
    assert "invalid choice: 'frobnicate'" in result.err


# --- run ----------------------------------------------------------------------------------------------


def test_run_with_a_spool_that_is_a_file_is_bad_input(spec_path, tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    result = in_process(capsys, "run", spec_path, "--out", tmp_path / "out", "--spool", tmp_path / "a-file")
    assert result.code == 2
    assert len(result.errors) == 1 and result.errors[0].startswith(f"error: --spool {tmp_path / 'a-file'}: cannot write")


@pytest.mark.parametrize("fails", ["runner.resume.finish_moves", "runner.spool.Spool.__init__"])
def test_a_spool_that_refuses_a_write_is_bad_input_in_one_wording(spec_path, tmp_path, capsys, monkeypatch, fails):
    """Finishing a half-done move and opening the run's spool each turned a spool that refused a write into bad input
    in a copy of their own (cli._finish_moves, _open_spool): both say it as a spool that cannot be made does."""
    from runner.store import StoreUnavailable

    def refuse(*args):
        raise StoreUnavailable("disk full")

    monkeypatch.setattr(fails, refuse)
    spool = tmp_path / "spool"
    result = in_process(capsys, "run", spec_path, "--out", tmp_path / "out", "--spool", spool)
    assert (result.code, result.errors) == (2, [f"error: --spool {spool}: cannot write there (disk full)"])


def bounded_options() -> list[tuple[str, str, object]]:
    """(command, option, its Bounded) for every option of every command whose value is a number."""
    from runner.arguments import Bounded
    from runner.cli import build_parser

    found = []
    for command, parser in build_parser()._subparsers._group_actions[0].choices.items():
        for action in parser._actions:
            assert action.type not in (int, float), f"{command} {action.option_strings}: a number with no range"
            if isinstance(action.type, Bounded):
                found.append((command, action.option_strings[-1], action.type))
    return found


POSITIONALS = {"run": ["s.yaml"], "soak": ["s.yaml"], "validate": ["s.yaml"], "compare": ["a", "b"]}


def test_every_numeric_option_of_every_command_is_bounded():
    options = {(command, option) for command, option, _ in bounded_options()}
    assert {("run", "--flush-every"), ("run", "--store-timeout"), ("run", "--budget"), ("run", "--max-cells"),
            ("soak", "--seconds"), ("soak", "--store-timeout"), ("validate", "--max-cells"),
            ("compare", "--threshold"), ("dashboard", "--port")} <= options


@pytest.mark.parametrize(("command", "option", "bounds"), [pytest.param(*o, id=f"{o[0]}{o[1]}") for o in bounded_options()])
def test_a_number_outside_its_range_is_one_line_that_says_the_range_its_help_documents(capsys, command, option,
                                                                                        bounds):
    from runner.cli import build_parser

    helped = next(a.help for a in build_parser()._subparsers._group_actions[0].choices[command]._actions
                  if option in a.option_strings)
    assert bounds.range in helped
    step = 1 if bounds.whole else bounds.low / 10 or 0.01
    low = bounds.low if bounds.above else bounds.low - step
    outside = [str(low), str(bounds.high + step), "nan", "inf", "-inf", "many"]
    for value in outside:
        result = in_process(capsys, command, *POSITIONALS.get(command, []), f"{option}={value}")  # -1: no option
        assert (result.code, result.out) == (2, "")
        assert result.errors == [f"attnbench {command}: error: argument {option}: must be {bounds.range} (got "
                                 f"{value}) (see attnbench {command} --help)"]
    inside = bounds.low + step if bounds.above else bounds.low
    assert bounds(str(inside)) == inside and bounds(str(bounds.high)) == bounds.high


def test_the_shards_help_says_their_range():
    from runner.cli import build_parser
    from runner.shard import MAX_SHARDS

    run = build_parser()._subparsers._group_actions[0].choices["run"]
    assert f"N from 1 to {MAX_SHARDS:,}" in next(a.help for a in run._actions if "--shard" in a.option_strings)


def test_max_cells_ranges_to_the_most_a_spec_may_allow():
    from runner.arguments import MAX_CELLS
    from runner.spec import MAX_CELLS as SPEC_MOST

    assert MAX_CELLS.high == SPEC_MOST


def test_every_default_an_options_help_names_is_the_one_it_takes():
    """An option's help that says its default says the value argparse gives it, as argparse itself writes it there
    (%(default)s), so the two cannot part."""
    import argparse

    from runner.cli import build_parser

    parser = build_parser()
    for name, sub in [("attnbench", parser), *parser._subparsers._group_actions[0].choices.items()]:
        for action in sub._actions:
            if (not action.help or action.default in (None, argparse.SUPPRESS) or isinstance(action.default, bool)
                    or "(default: " not in action.help):
                continue
            said = re.search(r"\(default: ([^;,)]+)", sub._get_formatter()._expand_help(action))[1]
            value = f"{action.default:g}" if isinstance(action.default, float) else str(action.default)
            assert said == value, (name, action.dest)


def test_the_help_names_the_environment_variables_their_readers_read():
    """The CLI names them without importing their readers (the dashboard's streamlit, the spool's store clients)."""
    from dashboard.data import RESULTS_ENV
    from runner.cli import build_parser
    from runner.spool import SPOOL_ENV

    commands = build_parser()._subparsers._group_actions[0].choices
    helps = {(name, a.dest): " ".join(a.help.split()) for name, sub in commands.items() for a in sub._actions if a.help}
    assert f"(default: ${RESULTS_ENV}, else" in helps["dashboard", "results"]
    assert f"(default: ${SPOOL_ENV}, else" in helps["run", "spool"]

def test_the_run_options_bounds_and_defaults_are_their_owners():
    """What argparse spells without importing its owner (quick commands stay quick) is the owner's: a spec's limits
    (runner.spec), the store's timeout (runner.store) and a run's options (runner.run.Options)."""
    from pydantic import ValidationError

    from runner.arguments import BUDGET, SOAK_SECONDS
    from runner.cli import build_parser
    from runner.run import Options
    from runner.spec import DEFAULT_MAX_CELLS, TimingSettings
    from runner.store import DEFAULT_TIMEOUT_S

    run = build_parser()._subparsers._group_actions[0].choices["run"]
    helps = {a.dest: " ".join(a.help.split()) for a in run._actions if a.help}
    assert f"(default: {DEFAULT_TIMEOUT_S:g})" in helps["store_timeout"]
    assert f"max_cells, {DEFAULT_MAX_CELLS:,} unless set" in helps["max_cells"]
    given = run.parse_args(["spec.yaml"])
    assert (given.flush_every, given.compile_ahead == "on") == (Options().flush_every_s, Options().compile_ahead)
    for field, bound in (("budget_s", BUDGET), ("soak_s", SOAK_SECONDS)):
        TimingSettings(**{field: bound.high})
        with pytest.raises(ValidationError):
            TimingSettings(**{field: bound.high * 1.001})


def test_a_shard_without_a_run_id_is_bad_input(spec_path, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ATTNBENCH_RUN_ID", raising=False)
    result = in_process(capsys, "run", spec_path, "--out", tmp_path, "--shard", "0/2")
    assert result.code == 2
    assert result.err.strip() == "error: shard 0/2: give --run-id (or ATTNBENCH_RUN_ID) so that every shard writes the same run"


def test_dry_run_lists_cells_with_skip_verdicts(spec_path, tmp_path, capsys):
    result = in_process(capsys, "run", spec_path, "--dry-run", "--out", tmp_path / "out")
    assert result.code == 0, result.err
    cells = expand(load_spec(spec_path, set(load_all())))
    expected = [f"{c.label()}: {'skip: ' + F32_SKIP if c.variant == 'cudnn' else 'run'}" for c in cells]
    assert result.out.splitlines() == [*expected, "10 cells"]
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


@pytest.mark.skipif(importlib.util.find_spec("tokamax") is not None, reason="tokamax is installed here")
def test_a_dry_run_prints_a_reason_as_text_not_markup(capsys):
    result = in_process(capsys, "run", "specs/training.yaml", "--dry-run", "--only", "chunked", "--where",
                        "seq_len=4096", "--where", "pass=fwd")
    assert result.code == 0, result.err
    assert result.out.splitlines()[0].endswith("(pip install 'attnbench[tokamax]' (Python >= 3.12, jax >= 0.11.1))")


@pytest.mark.parametrize("bad", ["shard without run id", "run id", "spool", "out"])
def test_a_dry_run_refuses_what_the_run_refuses_in_the_same_words(spec_path, tmp_path, capsys, monkeypatch, bad):
    monkeypatch.delenv("ATTNBENCH_RUN_ID", raising=False)
    (tmp_path / "a-file").write_text("")
    wrong = {"shard without run id": ["--shard", "0/2"], "run id": ["--run-id", "two words"],
             "spool": ["--spool", tmp_path / "a-file" / "spool"], "out": ["--out", tmp_path / "a-file"]}[bad]
    args = ["run", spec_path, "--out", tmp_path / "out", "--spool", tmp_path / "spool", *wrong]
    run, dry = in_process(capsys, *args), in_process(capsys, *args, "--dry-run")
    assert run.code == dry.code == 2 and len(run.errors) == 1 and run.errors == dry.errors, (run.err, dry.err)
    assert dry.out == "" and not (tmp_path / "spool").exists() and not (tmp_path / "out").exists()


L4 = Device("gpu", "NVIDIA L4", 8.9, 18 * 10**9)  # JAX's bytes_limit: 75 % of 24 GB (docs/evidence/l4-walk-20261207.txt)


def test_a_dry_run_on_an_l4_says_the_skips_its_run_records(tmp_path, capsys, monkeypatch):
    """The rules the device's facts decide, said before any worker: its memory (the inputs and float32 reference of
    B16 x 32k need 22 GiB) and its compute capability (cuDNN's packed rows from Hopper)."""
    monkeypatch.setattr("runner.machine.current_device", lambda: L4)
    wide = dict(seq_len=32768, heads=32, head_dim=128, dtype="bfloat16", causal=True)
    path = write_spec(tmp_path / "l4.yaml", spec_data(
        {"name": "wide", "variants": ["cudnn"], **wide, "sweep": {"batch": [8, 16]}},
        {"name": "packed", "variants": ["xla", "cudnn"], "seq_len": 16, "dtype": "bfloat16", "documents": 2}))
    result = in_process(capsys, "run", path, "--dry-run", "--out", tmp_path / "out")
    assert result.code == 0, result.err
    verdicts = [line.split(": ", 1)[1] for line in result.out.splitlines()[:-1]]
    assert verdicts == ["run", "skip: inputs and float32 reference need 22.0 GiB; the device has 16.8 GiB", "run",
                        "skip: jax's cuDNN path packs rows on Hopper or newer only; this GPU has compute capability 8.9"]


def test_a_dry_run_says_what_it_checked_and_what_it_did_not(spec_path, tmp_path, capsys):
    from runner.cli import DRY_RUN_CHECKED, DRY_RUN_UNCHECKED

    result = in_process(capsys, "run", spec_path, "--dry-run", "--out", tmp_path / "out", "--spool", tmp_path / "sp")
    assert result.code == 0 and result.errors == [f"dry run: checked {DRY_RUN_CHECKED}; not checked: "
                                                  f"{DRY_RUN_UNCHECKED}"]
    assert not (tmp_path / "sp").exists()  # the spool is checked, not made


def test_only_and_variants_select_cells(spec_path, capsys):
    result = in_process(capsys, "run", spec_path, "--dry-run", "--only", "backward", "--variants", "xla", "cudnn")
    assert result.code == 0, result.err
    assert result.out.splitlines() == ["backward/xla B1 T8 N4 K1 H8 float32 causal fwd_bwd: run", "1 cell"]


def test_unknown_experiment_and_variant_exit_2_with_a_line_each(spec_path, capsys):
    result = in_process(capsys, "run", spec_path, "--dry-run", "--only", "nope", "--variants", "xla", "flash9")
    assert result.code == 2
    assert result.errors == [
        "error: --only: no experiment 'nope' in the spec (it has: variants, backward)",
        f"error: --variants: unknown variant 'flash9' (known: {', '.join(sorted(load_all()))})",
    ]


def test_where_selects_the_cells_whose_params_have_one_of_its_values(spec_path, capsys):
    result = in_process(capsys, "run", spec_path, "--dry-run", "--where", "causal=true", "kv_heads=2,4")
    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        "variants/naive B1 T8 N4 K2 H8 float32 causal fwd: run",
        "variants/xla B1 T8 N4 K2 H8 float32 causal fwd: run",
        "variants/auto B1 T8 N4 K2 H8 float32 causal fwd: run",
        f"variants/cudnn B1 T8 N4 K2 H8 float32 causal fwd: skip: {F32_SKIP}",
        "4 cells",
    ]
    result = in_process(capsys, "run", spec_path, "--dry-run", "--variants", "xla", "--where", "pass=fwd_bwd")
    assert result.out.splitlines() == ["backward/xla B1 T8 N4 K1 H8 float32 causal fwd_bwd: run", "1 cell"]


def test_repeated_selections_add_up_rather_than_replace_each_other(spec_path, capsys):
    result = in_process(capsys, "run", spec_path, "--dry-run", "--where", "causal=false", "--where", "kv_heads=2",
                        "--variants", "xla", "--variants", "naive", "--only", "variants", "--only", "backward")
    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        "variants/naive B1 T8 N4 K2 H8 float32 fwd: run", "variants/xla B1 T8 N4 K2 H8 float32 fwd: run", "2 cells"]


def test_a_where_that_keeps_no_cell_exits_2_naming_the_values_the_cells_have(spec_path, capsys):
    result = in_process(capsys, "run", spec_path, "--dry-run", "--where", "causal=false", "pass=fwd_bwd")
    assert result.code == 2  # the cells without the mask are all forward: each condition narrows the last
    assert result.errors == ["error: --where pass: no cell has fwd_bwd (the cells have: fwd)"]
    result = in_process(capsys, "run", spec_path, "--dry-run", "--where", "window=64,128")
    assert result.errors == ["error: --where window: no cell has 64, 128 (the cells have: null)"]


@pytest.mark.parametrize(("condition", "problem"), [
    ("tp", "'tp': give AXIS=VALUE[,VALUE...], e.g. tp=1 or seq_len=4096,8192"),
    ("tp=", "'tp=': give AXIS=VALUE[,VALUE...], e.g. tp=1 or seq_len=4096,8192"),
    ("tps=1", f"'tps=1': no axis 'tps' (axes: {', '.join(NAMES)})"),  # every axis, in the table's order
    ("tp=2.0", "'tp=2.0': '2.0' is not a value of tp"),
    ("fill=0,1", "'fill=0,1': '0' is not a value of fill"),
    ("dtype=fp8", "'dtype=fp8': 'fp8' is not a value of dtype (float32, bfloat16, float16)"),
    ("causal=1", "'causal=1': '1' is not a value of causal"),  # strict: 1 is not true, nor true 1
    ("fill=true", "'fill=true': 'true' is not a value of fill"),
    ("seq_len=[1", "'seq_len=[1': '[1' is not a value of seq_len"),
])  # fmt: skip
def test_a_bad_where_exits_2_saying_what_is_wrong(spec_path, capsys, condition, problem):
    result = in_process(capsys, "run", spec_path, "--dry-run", "--where", condition)
    assert result.code == 2
    assert result.errors == [f"attnbench run: error: argument --where: {problem} (see attnbench run --help)"]


def test_run_exits_0_and_writes_manifest_and_cells(run, spec_path):
    result, run_dir = run
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    assert (run_dir / MANIFEST).is_file() and (run_dir / CELLS).is_file()
    manifest = json.loads((run_dir / MANIFEST).read_text())
    assert manifest["run_id"] == RUN_ID and manifest["name"] == "test"
    assert manifest["spec"] == load_spec(spec_path, set(load_all())).content()
    assert manifest["spec_hash"] == load_spec(spec_path, set(load_all())).digest()
    assert manifest["ended_at"] and manifest["started_at"] <= manifest["ended_at"]
    assert manifest["machine"]["platform"] == "cpu" and manifest["machine"]["versions"]["jax"]
    assert manifest["machine"]["device_count"] == 1  # no cell splits: the worker asks for no fake devices
    assert manifest["cells_planned"] == 10
    lines = (run_dir / CELLS).read_text().splitlines()
    assert len(lines) == 10 and all(isinstance(json.loads(line), dict) for line in lines)


def test_the_manifest_records_the_environments_settings_that_can_change_kernels_and_show_names_them(run, capsys):
    """From the process that describes the machine (the run's first worker): XLA_FLAGS normalised for the run's
    platform (a CPU's: its backend's flags, not the GPU's), and the kernel environment by the documented rule."""
    _, run_dir = run
    machine = json.loads((run_dir / MANIFEST).read_text())["machine"]
    kernel_env = {k: v for k, v in machine["kernel_env"].items() if k not in os.environ}  # the test's own, if any
    assert machine["xla_flags"] == ["--xla_cpu_enable_fast_math=false"] and kernel_env == {"NVTE_FUSED_ATTN": "0"}
    shown = in_process(capsys, "show", run_dir).out.splitlines()
    assert shown[0].startswith("cli-test: spec test · no GPU (cpu) · power steady (in load) · started ")
    assert shown[1].startswith("environment that can change kernels: xla_flags --xla_cpu_enable_fast_math=false · "
                               "kernel env ") and "NVTE_FUSED_ATTN=0" in shown[1]
    assert "environment that can change kernels" not in in_process(capsys, "show", SHIPPED_RUN).out  # not recorded


def test_resuming_a_finished_run_measures_nothing_and_leaves_its_manifest_as_it_was(run, spec_path, tmp_path):
    """A queue that calls `run` again after the run ended (its done marker lost) must not restamp the end time, machine
    and GPU readings. The copy resumes from the store alone, with a new spool; no cell line is printed."""
    _, run_dir = run
    out = tmp_path / "out"
    shutil.copytree(run_dir, out / RUN_ID)
    before = {name: (out / RUN_ID / name).read_bytes() for name in (MANIFEST, CELLS)}
    again = attnbench("run", spec_path, "--out", out, "--run-id", RUN_ID, ATTNBENCH_SPOOL=str(tmp_path / "spool"))
    assert again.returncode == 0, again.stdout + again.stderr
    ended = json.loads(before[MANIFEST])["ended_at"]
    assert f"{RUN_ID}: all 10 cells were done and the run ended at {ended}; nothing to measure" in again.stdout
    assert not [line for line in again.stdout.splitlines() if line.startswith("[")]
    assert {name: (out / RUN_ID / name).read_bytes() for name in (MANIFEST, CELLS)} == before


def test_a_run_id_holding_a_run_of_another_spec_is_refused_before_measuring(run, spec_path, tmp_path, capsys):
    """ATTNBENCH_RUN_ID left set from another run must not merge two runs under one manifest: refused in the dry run
    too; the cells a rerun picks (--only, --variants, --where) are no part of what it must match."""
    _, run_dir = run
    out, spool = tmp_path / "out", tmp_path / "spool"
    shutil.copytree(run_dir, out / RUN_ID)
    before = (out / RUN_ID / MANIFEST).read_bytes()
    other = write_spec(tmp_path / "other.yaml", spec_data({"name": "a", "variants": ["naive"]}, name="other"))
    for args in ([other], [other, "--dry-run"], [spec_path, "--budget", "0.5", "--dry-run"]):
        done = in_process(capsys, "run", *args, "--out", out, "--run-id", RUN_ID, "--spool", spool)
        assert done.code == 2 and len(done.errors) == 1, done.err
        assert done.err.startswith(f"error: run id {RUN_ID}: {out / RUN_ID} holds a run of spec test (spec hash ")
        assert f"and {args[0]} (" in done.err and "give another --run-id" in done.err
    assert (out / RUN_ID / MANIFEST).read_bytes() == before and not spool.exists()
    subset = in_process(capsys, "run", spec_path, "--out", out, "--run-id", RUN_ID, "--only", "backward", "--where",
                        "causal=true", "--dry-run")
    assert subset.code == 0, subset.err


def test_a_spool_holding_a_run_of_another_spec_under_the_run_id_is_refused(run, spec_path, tmp_path, capsys):
    from runner.spool import spool_store
    from runner.store import open_store

    _, run_dir = run  # its results never uploaded: the spool alone holds them
    held = spool_store(tmp_path / "spool", open_store(str(tmp_path / "out"))).root / RUN_ID
    shutil.copytree(run_dir, held)
    other = write_spec(tmp_path / "other.yaml", spec_data({"name": "a", "variants": ["naive"]}, name="other"))
    done = in_process(capsys, "run", other, "--out", tmp_path / "out", "--run-id", RUN_ID, "--spool",
                      tmp_path / "spool", "--dry-run")
    assert done.code == 2 and done.err.startswith(f"error: run id {RUN_ID}: {held} holds a run of spec test")


def test_a_store_whose_manifests_fail_after_its_probe_is_checked_when_it_answers(run, spec_path, tmp_path, capsys,
                                                                                 monkeypatch):
    """The start-up check cannot read the store (out of reach after its probe): the warning says it is checked when it
    answers, before any upload, as the uploader's first pull then does; a dry run, which uploads nothing, says only
    that it was not checked."""
    from runner.store import LocalStore, StoreUnavailable

    _, run_dir = run
    out = tmp_path / "out"
    shutil.copytree(run_dir, out / RUN_ID)
    real = LocalStore.manifests

    def manifests(store, run_id):
        if store.root == out:
            raise StoreUnavailable(f"{out}: unreachable")
        return real(store, run_id)

    monkeypatch.setattr(LocalStore, "manifests", manifests)
    other = write_spec(tmp_path / "other.yaml", spec_data({"name": "a", "variants": ["naive"]}, name="other"))
    args = ("run", other, "--out", out, "--run-id", RUN_ID, "--spool", tmp_path / "spool")
    dry = in_process(capsys, *args, "--dry-run")
    assert dry.code == 0 and f"warning: {out}: unreachable; not checked that {out / RUN_ID} holds no run of another " \
        "spec\n" in dry.err
    done = in_process(capsys, *args)
    assert f"warning: {out}: unreachable; not checked now that {out / RUN_ID} holds no run of another spec: checked " \
        "when it answers, before anything is uploaded to it\n" in done.err
    assert done.code == 2 and "found before the first upload: nothing uploaded" in done.err, done.err


def test_a_run_after_an_upgrade_resumes_by_identity_and_power_policy(run, spec_path):
    from runner.record import read_manifest
    from runner.run import same_run

    spec = load_spec(spec_path, set(load_all()))
    stored = read_manifest(json.loads((run[1] / MANIFEST).read_text()))
    upgraded = stored.model_copy(update={"spec_hash": "0" * 16})  # a field added since: another hash, same identity
    assert same_run(stored, spec) and same_run(upgraded, spec)
    timing = {**stored.spec["timing"], "power": "burst"}
    assert not same_run(upgraded.model_copy(update={"spec": {**stored.spec, "timing": timing}}), spec)
    assert not same_run(upgraded.model_copy(update={"spec": {**stored.spec, "name": "other"}}), spec)
    assert spec.timing.power == "steady"  # a steady run from before schema 5 sampled after settling: two rules
    assert not same_run(upgraded.model_copy(update={"sampled_after_settling": True}), spec)
    assert not same_run(stored.model_copy(update={"sampled_after_settling": True}), spec)  # its hash alike too


def unfinished(run_dir: Path, out: Path, **machine) -> Path:
    """A copy of the run in the results folder `out` as a pod killed after its 8th cell left it (its last 2 cells
    gone), its manifest's machine record updated with `machine` (None: a field its runner did not write)."""
    folder = out / RUN_ID
    shutil.copytree(run_dir, folder)
    lines = (folder / CELLS).read_text().splitlines(keepends=True)
    (folder / CELLS).write_text("".join(lines[:8]))
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**manifest, "machine": {**manifest["machine"], **machine}}))
    return folder


def resume(spec_path, out: Path, xla_flags: str) -> subprocess.CompletedProcess:
    """The run resumed from `out` with a new spool, under KERNEL_SETTINGS but `xla_flags`."""
    settings = {**KERNEL_SETTINGS, "XLA_FLAGS": xla_flags}
    spool = out.with_name(out.name + "-spool")
    return attnbench("run", spec_path, "--out", out, "--run-id", RUN_ID, ATTNBENCH_SPOOL=str(spool), **settings)


def held(folder: Path) -> tuple[dict, bytes]:
    """A run folder's manifest, as JSON (a resume re-puts the copy its spool holds), and its cells, as bytes."""
    return json.loads((folder / MANIFEST).read_text()), (folder / CELLS).read_bytes()


def test_a_resume_under_other_xla_flags_is_refused_before_any_cell(run, spec_path, tmp_path):
    """One run must not hold cells timed under two kernel settings (every reader presents them as one run): a resume
    whose material machine facts (runner.compare.material) differ from the run's manifest is refused in one line,
    in seconds, measuring and writing nothing; flags that change no CPU kernel (a GPU's, a dump) are no difference."""
    folder = unfinished(run[1], tmp_path / "out")
    before = held(folder)
    clock = time.monotonic()
    refused = resume(spec_path, tmp_path / "out", "--xla_cpu_enable_fast_math=true")
    assert (refused.returncode, refused.stderr) == (4, (
        f"error: run id {RUN_ID}: resuming it here would mix cells timed under two settings (the run's → this "
        "process's: xla_flags --xla_cpu_enable_fast_math=false → --xla_cpu_enable_fast_math=true); rerun under the "
        "run's settings, or give another --run-id (or unset ATTNBENCH_RUN_ID) for a new run\n"))
    assert time.monotonic() - clock < 30 and not [line for line in refused.stdout.splitlines() if line.startswith("[")]
    assert held(folder) == before
    same = resume(spec_path, tmp_path / "out", f"--xla_gpu_autotune_level=4 --xla_cpu_enable_fast_math=false "
                  f"--xla_dump_to={tmp_path / 'dump'}")
    assert same.returncode == 0, same.stderr
    assert f"resuming {RUN_ID}: 8 of 10 cells already done" in same.stdout and len(read_run(folder).cells) == 10


def test_a_run_that_did_not_record_its_kernel_settings_resumes_under_any(run, spec_path, tmp_path):
    """A manifest written before xla_flags and kernel_env were recorded says nothing of them: no refusal for a fact the
    run did not record; the resume's manifest records its own."""
    folder = unfinished(run[1], tmp_path / "out", xla_flags=None, kernel_env=None)
    resumed = resume(spec_path, tmp_path / "out", "--xla_cpu_enable_fast_math=true")
    assert resumed.returncode == 0, resumed.stderr
    machine = json.loads((folder / MANIFEST).read_text())["machine"]
    assert machine["xla_flags"] == ["--xla_cpu_enable_fast_math=true"] and len(read_run(folder).cells) == 10


def test_a_resume_of_a_part_that_holds_no_cell_yet_is_a_new_start(run, tmp_path):
    """A process killed before its first cell left a manifest and nothing timed under it: nothing to mix, no refusal."""
    from runner.record import CellRecord, read_manifest
    from runner.resume import OtherMachine, Resume
    from runner.spool import Spool, Uploader, spool_store
    from runner.store import LocalStore

    manifest = read_manifest(json.loads((run[1] / MANIFEST).read_text()))
    spool = Spool(spool_store(tmp_path / "spool", LocalStore(tmp_path / "out")), RUN_ID, None)
    spool.write_manifest(manifest)
    other = manifest.machine.model_copy(update={"kernel_env": {}})
    uploader = Uploader(spool, LocalStore(tmp_path / "out"), 1.0)
    assert uploader.measuring_on(Resume(spool, other)) and uploader.refused is None
    spool.add(CellRecord.model_validate_json((run[1] / CELLS).read_text().splitlines()[0]))
    assert not uploader.measuring_on(Resume(spool, other))
    assert isinstance(uploader.refused, OtherMachine) and str(uploader.refused) == "kernel env NVTE_FUSED_ATTN=0 → (none)"


def spooled(out: Path, root: Path) -> Path:
    """The spool folder of run RUN_ID to the results folder `out`, under the spool root `root`."""
    from runner.spool import spool_store
    from runner.store import open_store

    return spool_store(root, open_store(str(out))).root / RUN_ID


def answers_late(monkeypatch, out: Path, spool: Path) -> None:
    """The results folder `out` out of reach (StoreUnavailable) until the spool folder `spool` holds a cell: a pod on
    a new node (an empty spool) that cannot reach the bucket for its first seconds, at a known point, no clock raced."""
    from runner.store import LocalStore, StoreUnavailable

    real = {name: getattr(LocalStore, name) for name in ("read", "manifests")}

    def out_of_reach(name):
        def call(store, run_id):
            cells = spool / CELLS
            if store.root == out and not (cells.exists() and cells.read_bytes().strip()):
                raise StoreUnavailable(f"{out}: unreachable")
            return real[name](store, run_id)
        return call

    for name in real:
        monkeypatch.setattr(LocalStore, name, out_of_reach(name))


def test_a_resume_whose_store_answers_late_is_refused_when_it_answers_keeping_what_it_measured(
        run, spec_path, tmp_path, capsys, monkeypatch):
    """A pod on a new node (an empty spool) that cannot reach the bucket at first measures meanwhile; the first read
    that answers finds the run's cells timed under other settings: refused then, before anything is uploaded, exit
    4, the store's run as it was, and the cells measured meanwhile moved in the spool to a run id of their own that
    the line names: a rerun under the run's settings resumes the run from that spool, mixing none of them in."""
    out = tmp_path / "out"
    folder = unfinished(run[1], out)
    before = held(folder)
    spool = spooled(out, tmp_path / "spool")
    answers_late(monkeypatch, out, spool)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    monkeypatch.setenv("NVTE_FUSED_ATTN", KERNEL_SETTINGS["NVTE_FUSED_ATTN"])
    done = in_process(capsys, "run", spec_path, "--out", out, "--run-id", RUN_ID, "--spool", tmp_path / "spool",
                      "--flush-every", "1")
    [aside] = [p for p in spool.parent.iterdir() if p.name != RUN_ID]
    moved = read_run(aside)
    held_ = "the 1 cell it held was" if len(moved.cells) == 1 else f"the {len(moved.cells)} cells it held were"
    assert done.code == 4 and done.errors[-1] == (
        f"error: run id {RUN_ID}: resuming it here would mix cells timed under two settings (the run's → this "
        "process's: xla_flags --xla_cpu_enable_fast_math=false → --xla_cpu_enable_fast_math=true); found when "
        f"{folder} answered: nothing uploaded; {held_} moved to run {aside.name} in the spool {aside}: rerun the "
        f"same command with --run-id {aside.name} --spool {tmp_path / 'spool'} to finish that run and upload it, or "
        f"under the run's settings to resume {RUN_ID}"
    ), done.err
    assert moved.cells and {c.run_id for c in moved.cells} == {moved.manifest.run_id} == {aside.name}
    assert moved.manifest.machine.xla_flags == ["--xla_cpu_enable_fast_math=true"] and moved.problems == []
    assert held(folder) == before and not (spool / CELLS).exists() and not (spool / MANIFEST).exists()
    monkeypatch.setenv("XLA_FLAGS", KERNEL_SETTINGS["XLA_FLAGS"])  # the run's: its spool holds none of the others
    again = in_process(capsys, "run", spec_path, "--out", out, "--run-id", RUN_ID, "--spool", tmp_path / "spool")
    assert again.code == 0, again.err
    resumed = read_run(folder)
    assert len(resumed.cells) == 10 and resumed.manifest.machine.xla_flags == ["--xla_cpu_enable_fast_math=false"]
    assert read_run(aside).cells == moved.cells


def test_a_shard_under_other_settings_than_another_shard_of_its_run_is_refused(spec_path, tmp_path):
    """Two pods of one run's shards, each with its own spool, under two kernel settings: the second is refused against
    the first's stored manifest (exit 4, no cell), where the run read back as one under the first's settings."""
    out = tmp_path / "out"

    def shard(index: int, xla_flags: str) -> subprocess.CompletedProcess:
        return attnbench("run", spec_path, "--out", out, "--run-id", RUN_ID, "--shard", f"{index}/2",
                         ATTNBENCH_SPOOL=str(tmp_path / f"spool-{index}"), XLA_FLAGS=xla_flags)

    first = shard(0, "--xla_cpu_enable_fast_math=false")
    assert first.returncode == 0, first.stderr
    second = shard(1, "--xla_cpu_enable_fast_math=true")
    assert second.returncode == 4 and "xla_flags --xla_cpu_enable_fast_math=false → --xla_cpu_enable_fast_math=true" \
        in second.stderr, second.stderr
    assert not [line for line in second.stdout.splitlines() if line.startswith("[")]
    assert [p.shard for p in read_run(out / RUN_ID).parts if p.cells] == ["0/2"]
    again = shard(1, "--xla_cpu_enable_fast_math=false")
    assert again.returncode == 0, again.stderr


# four families (T 8 to 64); a device of HELD bytes holds T32's inputs and float32 reference (48 KiB), not T64's
# (128 KiB): priced on it, T64 would cost nothing and the two shards' shares would differ from a CPU's (no limit)
SHARDED = spec_data({"name": "a", "variants": ["naive", "xla"], "sweep": {"seq_len": [8, 16, 32, 64]}})
HELD = 60_000


def test_shards_dry_run_on_devices_of_other_memory_list_every_cell_once(tmp_path, capsys, monkeypatch):
    """The review of 2026-12-08 (s15), finding 1: JAX's memory limit (XLA_PYTHON_CLIENT_MEM_FRACTION) is no machine
    fact a shard is refused by, so a share priced on the device split the cells otherwise on each shard. The share is
    the cells' alone: a dry run of each shard on a device of its own memory lists each cell once."""
    import dataclasses

    import runner.machine as machine

    path = write_spec(tmp_path / "a.yaml", SHARDED)
    listed, said = [], ""
    for index, memory in enumerate((None, HELD)):
        device = dataclasses.replace(machine.current_device(), memory_bytes=memory)
        monkeypatch.setattr(machine, "current_device", lambda device=device: device)
        result = in_process(capsys, "run", path, "--dry-run", "--shard", f"{index}/2", "--run-id", "r",
                            "--out", tmp_path / "o")
        assert result.code == 0, result.err
        listed += [line.split(": ", 1)[0] for line in result.out.splitlines()[:-1]]
        said += result.out
    assert sorted(listed) == sorted(c.label() for c in expand(load_spec(path, set(load_all()))))
    assert "skip: inputs and float32 reference need " in said  # the small device does skip a cell


def test_two_shards_whose_devices_differ_in_memory_store_every_cell_once(tmp_path):
    """Finding 1 as the reviewer saw it, with two real shard processes into one --out: shard 1's processes (its
    workers too) report a memory limit of HELD bytes, as another XLA_PYTHON_CLIENT_MEM_FRACTION would give, shard 0's
    the CPU's none. Every cell of the run is stored once and both shards finish."""
    spec = write_spec(tmp_path / "a.yaml", SHARDED)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import dataclasses\nimport runner.machine as machine\ndescribed = machine.current_device\n"
        f"machine.current_device = lambda: dataclasses.replace(described(), memory_bytes={HELD})\n")
    out = tmp_path / "out"
    for index, extra in enumerate(({}, {"PYTHONPATH": str(site)})):
        shard = attnbench("run", spec, "--out", out, "--run-id", RUN_ID, "--shard", f"{index}/2",
                          ATTNBENCH_SPOOL=str(tmp_path / f"spool-{index}"), **extra)
        assert shard.returncode == 0, shard.stderr
    stored = read_run(out / RUN_ID)
    every = [c.key for c in expand(load_spec(spec, set(load_all())))]
    assert sorted(c.key for c in stored.cells) == sorted(every) and stored.problems == []
    assert [(p.shard, len(p.cells)) for p in stored.parts] == [("0/2", 4), ("1/2", 4)]
    assert any(c.status == "skipped" for c in stored.cells)  # shard 1's device held no T64 cell


def test_a_resume_on_another_driver_goes_on_says_so_and_the_run_keeps_the_earlier_driver(run, spec_path, tmp_path,
                                                                                        capsys):
    """On GKE a retried shard may land on a node whose driver was upgraded, the image pinning every library: the
    driver alone refuses no resume. One stderr line says so; the manifest keeps what the earlier cells ran under, and
    show's header and compare's environment facts say it. (A CPU has no driver: the run's manifest is given one.)"""
    folder = unfinished(run[1], tmp_path / "out", gpu={"driver": "550.54.15"})
    resumed = resume(spec_path, tmp_path / "out", KERNEL_SETTINGS["XLA_FLAGS"])
    assert resumed.returncode == 0, resumed.stderr
    assert f"warning: run {RUN_ID}: its earlier cells were measured under gpu driver 550.54.15, not this process's; " \
        "resuming, and its manifest keeps that (earlier_facts)\n" in resumed.stderr
    loaded = read_run(folder)
    assert loaded.manifest.earlier_facts == {"gpu driver": ["550.54.15"]} and len(loaded.cells) == 10
    shown = in_process(capsys, "show", folder).out.splitlines()
    assert "some cells measured under another gpu driver 550.54.15" in shown[:3]  # after the run's facts
    compared = in_process(capsys, "compare", run[1], folder, "--format", "json")
    environment = {row["fact"]: row for row in json.loads(compared.out)["environment"]}
    assert environment["earlier gpu driver"]["b"] == "550.54.15"
    assert "earlier gpu driver" in [row["fact"] for row in json.loads(compared.out)["material_differences"]]


def test_a_resume_on_another_driver_whose_store_answers_late_keeps_the_earlier_driver(run, spec_path, tmp_path,
                                                                                     capsys, monkeypatch):
    """The driver found when the store first answers, after the manifest was written: the manifest the run uploads
    and ends with keeps it all the same."""
    out = tmp_path / "out"
    folder = unfinished(run[1], out, gpu={"driver": "550.54.15"})
    answers_late(monkeypatch, out, spooled(out, tmp_path / "spool"))
    for name, value in KERNEL_SETTINGS.items():
        monkeypatch.setenv(name, value)
    done = in_process(capsys, "run", spec_path, "--out", out, "--run-id", RUN_ID, "--spool", tmp_path / "spool",
                      "--flush-every", "1")
    assert done.code == 0 and "its earlier cells were measured under gpu driver 550.54.15" in done.err, done.err
    assert read_run(folder).manifest.earlier_facts == {"gpu driver": ["550.54.15"]}


def test_a_refused_resume_leaves_the_spools_in_flight_marker_as_it_found_it(run, spec_path, tmp_path):
    """A process that died mid-cell left its marker in the spool; a refused resume measured nothing, so the crash
    count stays, where blanking it gave that cell one more attempt than MAX_ATTEMPTS on every refused try."""
    from runner.results import inflight_name

    unfinished(run[1], tmp_path / "out")
    marker = spooled(tmp_path / "out", tmp_path / "out-spool") / inflight_name(None)
    marker.parent.mkdir(parents=True)
    last = json.loads((run[1] / CELLS).read_text().splitlines()[-1])["key"]
    marker.write_text(json.dumps({"key": last, "attempts": 1}))
    before = marker.read_bytes()
    refused = resume(spec_path, tmp_path / "out", "--xla_cpu_enable_fast_math=true")
    assert refused.returncode == 4, refused.stderr
    assert marker.read_bytes() == before


def test_run_cells_are_ok_on_cpu_and_cudnn_is_skipped_with_its_reason(run, spec_path):
    _, run_dir = run
    loaded = read_run(run_dir)
    assert loaded.problems == []
    planned = expand(load_spec(spec_path, set(load_all())))
    assert [c.key for c in loaded.cells] == [c.key for c in planned]
    for cell in loaded.cells:
        if cell.variant == "cudnn":
            assert (cell.status, cell.reason) == ("skipped", F32_SKIP)
            assert cell.timings == [] and cell.correctness is None
        else:
            assert cell.status == "ok", f"{cell.variant}: {cell.reason}"
            assert cell.median_s > 0 and cell.tflops > 0 and cell.correctness.rel_err <= cell.correctness.tolerance
            assert 2 <= cell.timings[0].samples <= 3
            if cell.params.causal and cell.params.pass_ == "fwd":
                assert cell.correctness.causal_first_changed and cell.correctness.causal_last_unchanged


def test_run_logs_one_plain_line_per_cell_and_a_summary(run):
    result, run_dir = run
    progress = [line for line in result.stdout.splitlines() if line.startswith("[")]
    assert len(progress) == 10
    assert progress[0].startswith("[1/10] variants/naive B1 T8 N4 K2 H8 float32 fwd: ok ")
    assert progress[3] == f"[4/10] variants/cudnn B1 T8 N4 K2 H8 float32 fwd: skipped: {F32_SKIP}"
    assert "10 cells: 8 ok, 2 skipped" in result.stdout
    assert f"results: {run_dir}" in result.stdout


# --- show ---------------------------------------------------------------------------------------------


def test_show_prints_a_table_per_experiment(run, capsys):
    _, run_dir = run
    result = in_process(capsys, "show", run_dir)
    assert result.code == 0, result.err
    assert "variants" in result.out and "backward" in result.out
    assert "10 cells: 8 ok, 2 skipped" in result.out
    assert "cudnn needs an NVIDIA GPU" in result.out  # the note column may wrap the rest
    assert result.err == ""


def test_show_says_a_run_into_an_empty_compile_cache_was_cold_and_one_after_it_warm(tmp_path, capsys):
    """Two real runs of 8 cells into one compile cache folder: the first compiled each program, the second loaded
    each; show's header says which (report.cache_said, from the records' compilation.cached)."""
    spec = shapes_spec(tmp_path, [8, 16])
    for run_id in ("cold", "warm"):
        done = attnbench("run", spec, "--out", tmp_path / "out", "--run-id", run_id, "--compile-cache",
                         tmp_path / "cache", "--spool", tmp_path / "spool")
        assert done.returncode == 0, done.stderr
    header = {run_id: in_process(capsys, "show", tmp_path / "out" / run_id).out.splitlines()[0]
              for run_id in ("cold", "warm")}

    def took_of(run_id: str) -> str:
        from runner.report import took

        return f" · took {took(read_run(tmp_path / 'out' / run_id))}"

    assert header["cold"].endswith(" · compile cache cold: 0 of 8 programs loaded" + took_of("cold")), header
    assert header["warm"].endswith(" · compile cache warm: 8 of 8 programs loaded" + took_of("warm")), header


def test_show_csv_has_one_row_per_cell(run, capsys):
    _, run_dir = run
    result = in_process(capsys, "show", run_dir, "--format", "csv")
    assert result.code == 0, result.err
    rows = list(csv.DictReader(io.StringIO(result.out)))
    assert [r["key"] for r in rows] == [c.key for c in read_run(run_dir).cells]
    assert {r["status"] for r in rows if r["variant"] == "cudnn"} == {"skipped"}
    assert all(float(r["median_s"]) > 0 for r in rows if r["variant"] != "cudnn")


def test_show_markdown_and_parquet(run, tmp_path, capsys):
    _, run_dir = run
    result = in_process(capsys, "show", run_dir, "--format", "markdown")
    assert result.code == 0, result.err
    assert len(result.out.splitlines()) == 2 + 10
    dest = tmp_path / "cells.parquet"
    assert in_process(capsys, "show", run_dir, "--format", "parquet", "--output", dest).code == 0
    assert len(pd.read_parquet(dest)) == 10
    result = in_process(capsys, "show", run_dir, "--format", "parquet")  # binary needs a file
    assert (result.code, result.errors) == (2, ["error: --format parquet: give --output FILE (parquet is binary)"])


def test_show_parquet_without_pyarrow_says_which_extra_to_install(run, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow fails, as in the core install
    result = in_process(capsys, "show", run[1], "--format", "parquet", "--output", tmp_path / "cells.parquet")
    assert (result.code, result.errors) == (1, ["error: show needs pyarrow: pip install -e '.[parquet]'"])
    assert not (tmp_path / "cells.parquet").exists()


def test_the_dashboards_default_results_are_what_its_help_says(monkeypatch, tmp_path, capsys):
    """Without --results the dashboard serves $ATTNBENCH_RESULTS, else results/ once it holds a run (make demo's, where
    every other reader looks), else the shipped runs, as the help says (dashboard.data.default_results owns it; it
    served the shipped runs beside a results/ that held the demo's)."""
    from conftest import free_port
    from dashboard.data import RESULTS_ENV, SHIPPED_RESULTS, results_uri
    from runner.cli import build_parser

    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["dashboard"].format_help().split())
    assert f"(default: ${RESULTS_ENV}, else results/ when it holds a run, else {SHIPPED_RESULTS.relative_to(REPO)}/)" \
        in help_text

    def served() -> str:
        started = []
        monkeypatch.setattr(os, "execv", lambda path, argv: started.append(argv))
        assert in_process(capsys, "dashboard", "--port", free_port()).code is None  # execv returns here: no server
        passed = started[0][started[0].index("--") + 1:]  # the app's own arguments, as streamlit hands them on
        assert results_uri(passed) == passed[-1]
        return passed[-1]

    monkeypatch.delenv(RESULTS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    assert served() == str(SHIPPED_RESULTS)  # results/ holds no run yet
    shutil.copytree(SHIPPED_RUN, tmp_path / "results" / SHIPPED_RUN.name)
    assert served() == str(tmp_path / "results")
    monkeypatch.setenv(RESULTS_ENV, str(SHIPPED_RESULTS))
    assert served() == str(SHIPPED_RESULTS)


def test_dashboard_without_streamlit_says_which_extra_to_install(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "streamlit", None)  # as in the core install
    result = in_process(capsys, "dashboard")
    assert (result.code, result.errors) == (1, ["error: dashboard needs streamlit: pip install -e '.[dashboard]'"])


@pytest.mark.parametrize("args, option", [
    (["run", "SPEC", "--out", "FILE"], "--out"), (["runs", "--out", "FILE"], "--out"),
    (["report", "RUN", "--output", "FILE"], "--output"),
    (["compare", "--against", "previous", "cli-test", "--out", "FILE"], "--out"),
])  # fmt: skip
def test_a_results_location_that_is_a_file_is_named_by_its_option(run, spec_path, tmp_path, capsys, args, option):
    (tmp_path / "file").write_text("")
    given = {"SPEC": spec_path, "FILE": tmp_path / "file", "RUN": run[1]}
    done = in_process(capsys, *(given.get(a, a) for a in args))
    assert (done.code, done.errors) == (2, [f"error: {option} {tmp_path / 'file'}: not a folder"])


def test_with_out_run_is_a_run_id_not_a_path(run, capsys):
    for command in (["show", run[1]], ["compare", run[1], run[1]], ["report", run[1], "--output", "x"]):
        done = in_process(capsys, *command, "--out", run[1].parent)
        assert (done.code, done.errors) == (2, [f"error: {run[1]}: with --out, RUN is a run id in it, not a path: "
                                                "give the run folder alone, or its id with --out"])


def test_show_missing_folder_exits_2(tmp_path, capsys):
    result = in_process(capsys, "show", tmp_path / "no-such-run")
    assert result.code == 2
    assert len(result.errors) == 1 and "missing" in result.err


@pytest.mark.parametrize("fmt", ["table", "leaderboard"])
def test_show_output_writes_the_text_a_pipe_reads(tmp_path, capsys, fmt):
    """--output is written for every format: the table and the leaderboard as piped stdout reads them (they went to
    stdout, no file written)."""
    piped = in_process(capsys, "show", SHIPPED_RUN, "--format", fmt)
    result = in_process(capsys, "show", SHIPPED_RUN, "--format", fmt, "--output", tmp_path / "shown.txt")
    assert (result.code, result.out, result.err) == (0, "", "")
    assert (tmp_path / "shown.txt").read_text() == piped.out


def test_show_leaderboard_has_the_rows_of_shows_board(capsys):
    """One board: --format leaderboard holds the shapes show's table does, those two or more variants ran correctly
    (it held every shape, 17 against 13 for the shipped CPU run)."""
    board = in_process(capsys, "show", SHIPPED_RUN).out.split("leaderboard: ")[1]
    table = table_rows(board[:board.index("└")].replace("┃", "│"))
    markdown = [line for line in in_process(capsys, "show", SHIPPED_RUN, "--format", "leaderboard").out.splitlines()
                if line.startswith("| B")]
    assert [line.split(" | ")[0].removeprefix("| ") for line in markdown] == [row["shape"] for row in table]
    assert len(table) == 13 and all(int(row["variants"]) > 1 for row in table)


def test_show_output_into_a_missing_folder_is_bad_input(tmp_path, capsys):
    result = in_process(capsys, "show", SHIPPED_RUN, "--format", "csv", "--output", tmp_path / "no-such-folder" / "x.csv")
    assert result.code == 2
    assert len(result.errors) == 1


def torn_copy(folder: Path) -> Path:
    """The shipped CPU run with a torn line after its 76 cells."""
    copy = folder / SHIPPED_RUN.name
    shutil.copytree(SHIPPED_RUN, copy)
    with open(copy / CELLS, "a") as cells:
        cells.write("{torn\n")
    return copy


TORN_WARNING = "warning: {}:77: not valid JSON (Expecting property name enclosed in double quotes)"


def test_show_warns_on_stderr_about_a_bad_line_and_shows_the_rest(tmp_path, capsys):
    copy = torn_copy(tmp_path)
    result = in_process(capsys, "show", copy)
    assert result.code == 0, result.err
    assert result.errors == [TORN_WARNING.format(copy.resolve() / CELLS)]
    assert "76 cells: 41 ok, 35 skipped" in result.out and "warning" not in result.out


def test_show_csv_on_stdout_is_only_csv_when_there_are_warnings(tmp_path, capsys):
    copy = torn_copy(tmp_path)
    result = in_process(capsys, "show", copy, "--format", "csv")
    assert result.code == 0 and result.errors == [TORN_WARNING.format(copy.resolve() / CELLS)]
    rows = list(csv.DictReader(io.StringIO(result.out)))  # once the warning was the CSV's first line
    assert len(rows) == 76 and rows[0]["run_id"] == SHIPPED_RUN.name


def test_runs_names_each_runs_device(tmp_path, capsys):
    """Runs of one spec on several machines are told apart by more than their ids: the CPU's lab5 and the H200's."""
    shutil.copytree(SHIPPED_RUN, tmp_path / "cpu" / SHIPPED_RUN.name)
    gpu = REPO / "examples" / "results" / "h200" / "lab5-20261202-104743"
    shutil.copytree(gpu, tmp_path / "h200" / gpu.name)
    burst = REPO / "examples" / "results" / "h200" / "llama3.1-70b-20261206-burst"
    shutil.copytree(burst, tmp_path / "h200" / burst.name)
    rows = table_rows(in_process(capsys, "runs", "--out", tmp_path).out.replace("┃", "│"))
    assert {row["run"]: row["device"] for row in rows} == {SHIPPED_RUN.name: "cpu", gpu.name: "NVIDIA H200",
                                                           burst.name: "NVIDIA H200"}
    assert {row["run"]: row["power"] for row in rows} == {  # steady and burst times are not like with like
        SHIPPED_RUN.name: "none", gpu.name: "none", burst.name: "burst"}
    assert {row["run"]: row["settings"] for row in rows} == {  # what set the run apart beyond its spec
        SHIPPED_RUN.name: "-", gpu.name: "-", burst.name: "--where tp=1"}


def test_runs_and_show_say_how_long_a_run_took_in_cells_and_on_the_wall(tmp_path, capsys):
    """No command said how long a run took: runs has a column, show's header a fact (report.took_said), where
    gemma2-27b-20261204's 1,141 s from start to end span a resume across calls, 219 s of it in cells."""
    for run in ("gemma2-27b-20261204", "lab5-cold-20261203-023042"):
        shutil.copytree(REPO / "examples" / "results" / "h200" / run, tmp_path / run)
    resumed = "219 s in cells · 1,141 s wall (resumed across calls, or paused: 921 s with no cell measured)"
    rows = table_rows(in_process(capsys, "runs", "--out", tmp_path).out.replace("┃", "│"))
    assert {row["run"]: row["took"] for row in rows} == {"gemma2-27b-20261204": resumed,
                                                         "lab5-cold-20261203-023042": "46 s in cells · 46 s wall"}
    header = in_process(capsys, "show", "gemma2-27b-20261204", "--out", tmp_path).out.splitlines()[0]
    assert header.endswith(f" · took {resumed}")


def test_runs_marks_a_recheck_with_the_run_it_rechecks(tmp_path, capsys):
    """A recheck (`attnbench recheck`'s B-recheck) is listed as a run of its spec, its settings naming B."""
    shutil.copytree(SHIPPED_RUN, tmp_path / "cpu" / SHIPPED_RUN.name)
    manifest = tmp_path / "cpu" / SHIPPED_RUN.name / MANIFEST
    manifest.write_text(json.dumps(json.loads(manifest.read_text()) | {"rechecks": "lab5-b"}))
    rows = table_rows(in_process(capsys, "runs", "--out", tmp_path).out.replace("┃", "│"))
    assert [row["settings"] for row in rows] == ["rechecks lab5-b"]


def test_runs_warns_on_stderr(tmp_path, capsys):
    torn_copy(tmp_path)
    result = in_process(capsys, "runs", "--out", tmp_path)
    assert result.code == 0 and len(result.errors) == 1 and result.errors[0].startswith("warning: ")
    assert SHIPPED_RUN.name in result.out and "warning" not in result.out


def test_show_finds_a_run_id_in_results_as_runs_does(tmp_path, capsys, monkeypatch):
    shutil.copytree(SHIPPED_RUN, tmp_path / "results" / SHIPPED_RUN.name)
    monkeypatch.chdir(tmp_path)
    assert SHIPPED_RUN.name in in_process(capsys, "runs").out
    result = in_process(capsys, "show", SHIPPED_RUN.name)  # once: "manifest.json: missing"
    assert result.code == 0, result.err
    assert "76 cells: 41 ok, 35 skipped" in result.out
    result = in_process(capsys, "show", "lab5-typo")
    assert (result.code, result.errors) == (
        2, ["error: lab5-typo: no such run folder, nor a run of that id in results/ (see attnbench runs)"])


def test_show_and_compare_find_a_run_id_at_any_depth_under_out_as_runs_lists_it(tmp_path, capsys):
    """`runs --out DIR` lists runs at any depth (DIR/h200/RUN): show, compare and report open the run id it lists
    with the same --out, where they looked in DIR/RUN alone ("manifest.json: missing"); an id that two folders hold is
    one line naming both."""
    gpu = REPO / "examples" / "results" / "h200"
    for run in ("lab5-warm-20261202-182308", "lab5-warm-20261203-023042"):
        shutil.copytree(gpu / run, tmp_path / "h200" / run)
    listed = {row["run"] for row in table_rows(in_process(capsys, "runs", "--out", tmp_path).out.replace("┃", "│"))}
    assert "lab5-warm-20261203-023042" in listed
    shown = in_process(capsys, "show", "lab5-warm-20261203-023042", "--out", tmp_path)
    assert shown.code == 0 and shown.out.startswith("lab5-warm-20261203-023042: spec lab5 · GPU NVIDIA H200 · ")
    compared = in_process(capsys, "compare", "lab5-warm-20261203-023042", "--against", "previous", "--out", tmp_path)
    assert compared.code == 1 and "A: lab5-warm-20261202-182308 " in compared.out
    shutil.copytree(gpu / "lab5-warm-20261202-182308", tmp_path / "again" / "lab5-warm-20261202-182308")
    twice = in_process(capsys, "show", "lab5-warm-20261202-182308", "--out", tmp_path)
    assert (twice.code, twice.errors) == (2, [
        f"error: lab5-warm-20261202-182308: 2 runs of that id in {tmp_path} (again/lab5-warm-20261202-182308, "
        "h200/lab5-warm-20261202-182308): give --out the folder that holds the one you mean"])


def test_a_run_id_held_at_the_top_of_out_and_deeper_opens_the_top_one_and_names_the_deeper_one(tmp_path, capsys):
    """OUT/r1 and OUT/h200/r1, which `runs` lists as two rows of id r1: OUT/r1 is what `run --out OUT --run-id r1`
    wrote, and on a bucket the one way to name it, so it opens; the deeper one is named on stderr with the --out that
    opens it (where find opened the top one without a word)."""
    run = REPO / "examples" / "results" / "h200" / "lab5-warm-20261203-023042"
    for folder in ("", "h200"):
        shutil.copytree(run, tmp_path / folder / run.name)
    shown = in_process(capsys, "show", run.name, "--out", tmp_path)
    assert shown.code == 0 and shown.errors == [
        f"warning: {run.name}: opened {tmp_path}/{run.name}; h200/{run.name} in it holds a run of that id too: give "
        f"--out {tmp_path}/h200 for that one"]
    assert in_process(capsys, "show", run.name, "--out", tmp_path / "h200").errors == []


def test_piped_output_is_not_padded(capsys):
    result = in_process(capsys, "show", SHIPPED_RUN)  # capsys: stdout is no terminal, as in a pipe or a pod log
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert [line for line in lines if line != line.rstrip()] == []  # titles were padded to 200 columns
    assert max(len(line) for line in lines) <= 200
    assert lines[0].startswith(f"{SHIPPED_RUN.name}: spec lab5 · no GPU (cpu) · power none · ")
    assert lines[1].startswith("default-shape  B4 T128 N8 H64 fwd")


# --- list, env, schema --------------------------------------------------------------------------------


def test_list_shows_every_variant_and_why_it_cannot_run_here(capsys):
    result = in_process(capsys, "list")
    assert result.code == 0, result.err
    rows = table_rows(result.out.replace("┃", "│"))
    here = {row["variant"]: row["here"] for row in rows}
    legacy = {row["variant"] for row in rows if row["what it is"].startswith("legacy (jax 0.11 deprecated")}
    assert legacy == {"pallas_triton", "pallas_mgpu", "pallas_decode", "pallas_paged"}
    assert set(here) == set(load_all())
    portable = {"naive", "xla", "auto", "ring", "xla_cp", "xla_paged"}
    assert {name for name, verdict in here.items() if verdict == "yes"} == portable
    assert all(verdict.startswith("no: ") for name, verdict in here.items() if name not in portable)
    assert here["cudnn"] == f"no: {CPU_SKIP}"
    what = {row["variant"]: row["what it is"] for row in rows}  # a pass it has not, in the words its skip says:
    fwd_only = {name for name, v in load_all().items() if v.requires.passes == ("fwd",)}  # tokamax_triton_fp8's
    assert {name for name, text in what.items()  # description said "forward only", and no other's said it
            if text.endswith(f". {name} has no fwd_bwd pass (it supports fwd).")} == fwd_only and len(fwd_only) >= 6
    assert "forward only" not in what["tokamax_triton_fp8"]
    if importlib.util.find_spec("tokamax") is None:  # the install line reads as typed, its extra not taken for a style
        assert here["tokamax_xla_chunked"].endswith("(pip install 'attnbench[tokamax]' (Python >= 3.12, jax >= "
                                                    "0.11.1))")


def test_env_prints_the_machine(capsys):
    result = in_process(capsys, "env")
    assert result.code == 0, result.err
    described = json.loads(result.out)
    assert described["platform"] == "cpu" and described["compute_capability"] is None
    assert described["versions"]["jax"] and described["versions"]["pydantic"]


def test_a_command_whose_library_is_missing_says_what_to_install(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # `import jax` fails as in a core install without the extra
    result = in_process(capsys, "env")
    assert (result.code, result.out) == (1, "")
    assert result.errors == ["error: env needs jax: pip install -e '.[jax]' (on an NVIDIA GPU '.[cuda12]' or '.[cuda13]')"]


@pytest.mark.parametrize("command, dry", [("run", ()), ("soak", ()), ("run", ("--dry-run",))])
def test_a_run_without_jax_says_so_in_one_line_and_makes_nothing(command, dry, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # as in a core install: the worker would die at every cell, and a
    out, spool = tmp_path / "out", tmp_path / "spool"  # dry run declines each cell for JAX's device
    result = in_process(capsys, command, "specs/smoke.yaml", "--out", out, "--spool", spool, *dry)
    assert (result.code, result.out) == (1, "")
    assert result.errors == [f"error: {command} needs jax: pip install -e '.[jax]' (on an NVIDIA GPU '.[cuda12]' or "
                             "'.[cuda13]')"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("args", [("schema",), ("show", "examples/results/h200/lab5-20261202-104743"),
                                  ("show", "examples/results/h200/lab5-20261202-104743", "--format", "csv")])
def test_a_pipe_closed_early_ends_the_output_quietly(args):
    # the reader is gone before the CLI writes its first byte, as `attnbench schema | true` often is
    process = subprocess.Popen(command(*args), cwd=REPO, env=environment(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    process.stdout.close()
    assert process.wait(timeout=120) == 141
    assert process.stderr.read() == ""


def test_a_broken_pipe_that_is_not_stdouts_is_an_error_not_a_quiet_end():
    # a store's socket can raise BrokenPipeError too: only stdout's reader going away ends the output quietly; here
    # stdout is a pipe still read, and the command's own (socket's) broken pipe is an internal error, exit 1
    script = ("import sys\nfrom runner import cli\n"
              "def upload(args, console):\n    raise BrokenPipeError(32, 'Broken pipe (the store socket)')\n"
              "cli.COMMANDS['schema'] = upload\nsys.exit(cli.main(['schema']))\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=environment(), capture_output=True,
                            text=True, timeout=120)
    assert (result.returncode, result.stdout) == (1, "")
    assert "internal error: BrokenPipeError" in result.stderr and "store socket" in result.stderr


def test_python_m_runner_without_the_dependencies_says_so_in_one_line(tmp_path):
    # -S: no site-packages, as `python3 -m runner` from a fresh checkout on a machine without the dependencies
    result = subprocess.run([sys.executable, "-S", "-m", "runner", "validate", "specs/smoke.yaml"], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (1, "")
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: attnbench needs rich, which this Python lacks: install the project first")


def test_schema_prints_json_schema(capsys):
    result = in_process(capsys, "schema")
    assert result.code == 0, result.err
    schema = json.loads(result.out)
    assert schema["title"] == "Spec" and {"name", "experiments"} <= set(schema["required"])


# --- a run killed mid-way -----------------------------------------------------------------------------


def test_a_run_killed_mid_way_keeps_every_finished_cell_readable(tmp_path, capsys):
    # test_gated (tests/variants/gated.py) holds its cell at T 16 until the test opens the gate, which it never does:
    # the run cannot end before the kill, however warm the compilation cache
    held = spec_data({"name": "long", "variants": ["naive", "test_gated"], "sweep": {"seq_len": [4, 8, 12, 16]}})
    path = write_spec(tmp_path / "long.yaml", held)
    out, run_id = tmp_path / "out", "killed"
    env = environment(ATTNBENCH_SPOOL=str(tmp_path / "spool"), ATTNBENCH_VARIANTS=str(REPO / "tests" / "variants"),
                      ATTNBENCH_TEST_GATES=str(tmp_path))
    process = subprocess.Popen(
        command("run", path, "--out", out, "--run-id", run_id, "--compile-ahead", "off"),
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and process.poll() is None and len(read_run(out / run_id).cells) < 7:
            time.sleep(0.02)
        assert process.poll() is None, "the run ended before it could be killed"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    killed = read_run(out / run_id)  # the store: one object per finished cell until the part ends
    assert killed.problems == []
    assert len(killed.cells) == 7  # every cell before the one held at its gate
    assert killed.manifest is not None and killed.manifest.ended_at is None and killed.manifest.cells_planned == 8
    assert all(cell.status == "ok" for cell in killed.cells)
    assert not (out / run_id / CELLS).exists() and len(list((out / run_id / "cells").glob("*.json"))) >= 1
    from dashboard import data  # the dashboard and `runs` read the part in progress whole too

    dashboard = data.snapshot(str(out), data.RunCache())
    assert dashboard.problems == [] and dashboard.run_problems([run_id]) == []
    assert sorted(dashboard.cells((run_id,))["key"]) == sorted(cell.key for cell in killed.cells)
    listed = in_process(capsys, "runs", "--out", out)
    [row] = [[c.strip() for c in line.split("│")[1:-1]] for line in listed.out.splitlines() if f"│ {run_id} │" in line]
    assert listed.code == 0 and listed.errors == [] and row[-3:-1] == ["7/8", "unfinished"]
    assert row[-1].endswith(" s in cells · not ended")  # report.took_said: no end to a wall time yet
    [spooled] = (tmp_path / "spool").glob(f"*/{run_id}/{CELLS}")  # the spool: one line per cell, each whole
    lines = spooled.read_text().splitlines()
    assert len(lines) >= len(killed.cells) and all(isinstance(json.loads(line), dict) for line in lines)


def test_show_prints_the_leaderboard_of_the_committed_kernel_shootout(capsys):
    kernels = REPO / "examples" / "results" / "h200" / "kernels-20261202"
    board = in_process(capsys, "show", kernels, "--format", "leaderboard")
    lines = board.out.splitlines()
    assert board.code == 0 and lines[0] == "| shape | fastest | ms | next | margin | auto | variants | % MMA@clock |"
    assert "| B4 T2048 N8 H64 float16 fwd | cudnn | 0.07821 | pallas_mgpu | +18% | +494% (xla) | 6 | 41 |" in lines
    # both sampled before their GPU settled (power.settled false in the run's schema-3 records): named so, never decisive
    assert ("| B1 T8192 N64 K8 H128 float16 causal fwd | pallas_mgpu (unsettled) | 1.871 | cudnn (unsettled) | "
            "+6% (unsettled) | — | 3 | 63 |") in lines
    assert lines[-1] == ("Marks: (unsettled) sampled before its power state settled or on an SM clock that moved "
                         "more than 2 %: a margin it takes part in is never decisive.")  # what the marks mean
    table = in_process(capsys, "show", kernels)
    assert table.code == 0 and "leaderboard: the fastest correct variant per shape" in table.out


def test_power_and_budget_override_the_specs_timing():
    import argparse

    from runner.cli import _timing_overrides
    from runner.spec import load_spec

    spec = load_spec(REPO / "specs" / "lab5.yaml", {"naive", "xla", "auto", "cudnn", "te", "te_fp8", "cudnn_fp8"})
    same = _timing_overrides(spec, argparse.Namespace(power=None, budget=None))
    assert same is spec
    quick = _timing_overrides(spec, argparse.Namespace(power="burst", budget=0.2)).timing
    assert (quick.power, quick.budget_s, quick.wall_budget_s) == ("burst", 0.2, 0.2)
    assert quick.max_samples == spec.timing.max_samples


# --- the first hour (issue 20) ----------------------------------------------------------------------------


def test_help_speaks_to_the_user(capsys):
    result = in_process(capsys, "--help")
    assert result.code == 0 and "Benchmark attention implementations under JAX" in result.out
    assert "Errors a user can cause" not in result.out


def test_a_seconds_option_that_is_not_a_number_says_so_in_its_own_words(spec_path, capsys):
    result = in_process(capsys, "run", spec_path, "--flush-every", "abc")
    assert result.code == 2 and "--flush-every: must be a number of seconds from 0.1 to 3,600 (got abc)" in result.err
    assert "invalid" not in result.err and "Bounded" not in result.err


def test_runs_in_a_folder_that_does_not_exist_is_bad_input(tmp_path, capsys):
    result = in_process(capsys, "runs", "--out", tmp_path / "nonexistent" / "dir")
    assert (result.code, result.errors) == (2, [f"error: --out {tmp_path / 'nonexistent' / 'dir'}: no such folder"])
    empty = in_process(capsys, "runs", "--out", tmp_path)  # a folder with no runs in it is still "no runs"
    assert empty.code == 0 and "no runs in" in empty.out


def test_a_manifest_that_is_not_json_is_reported_once(tmp_path, capsys):
    folder = tmp_path / "broken-run"
    folder.mkdir()
    (folder / MANIFEST).write_text("{not json")
    result = in_process(capsys, "show", folder)
    assert result.code == 2 and len(result.errors) == 1, result.err
    assert "not valid JSON" in result.err and "missing" not in result.err


def test_an_empty_run_exports_the_header_alone(tmp_path, capsys):
    """A nightly export of a run that stored no cell is no error: the columns, no rows."""
    import pandas as pd

    folder = tmp_path / "empty-run"
    shutil.copytree(SHIPPED_RUN, folder)
    full = in_process(capsys, "show", folder, "--format", "csv")
    (folder / CELLS).write_text("")
    result = in_process(capsys, "show", folder, "--format", "csv")
    assert (result.code, result.err) == (0, "")
    [header] = result.out.splitlines()
    assert set(header.split(",")) <= set(full.out.splitlines()[0].split(","))
    assert {"key", "variant", "status", "seq_len", "median_s"} <= set(header.split(","))
    markdown = in_process(capsys, "show", folder, "--format", "markdown")
    assert markdown.code == 0 and len(markdown.out.splitlines()) == 2  # the header and its rule
    parquet = in_process(capsys, "show", folder, "--format", "parquet", "--output", tmp_path / "empty.parquet")
    assert parquet.code == 0
    table = pd.read_parquet(tmp_path / "empty.parquet")
    assert len(table) == 0 and list(table.columns) == header.split(",")


def test_a_dry_run_refuses_an_out_with_no_bucket(spec_path, capsys):
    result = in_process(capsys, "run", spec_path, "--out", "gs://", "--dry-run")
    assert result.code == 2 and "not a bucket URI" in result.err and result.out == ""


@pytest.mark.slow
def test_a_dry_run_against_a_dead_store_warns_as_the_run_does_and_exits_0(emulator, spec_path, tmp_path, capsys):
    from conftest import BUCKET

    emulator.stop()
    result = in_process(capsys, "run", spec_path, "--dry-run", "--out", f"gs://{BUCKET}/r", "--run-id", "dead",
                        "--spool", tmp_path / "spool", "--store-timeout", "30")
    assert result.code == 0, result.err
    warning, checked = result.errors
    assert warning.startswith(f"warning: gs://{BUCKET}/r: unreachable") and "retried for up to 30 s" in warning
    assert f"into the spool {tmp_path / 'spool'}" in warning and warning.split("into the spool ")[1].split(";")[0] \
        .endswith("/dead")
    assert checked.startswith("dry run: checked") and not (tmp_path / "spool").exists()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["runs", "show"])
def test_an_interactive_read_of_a_dead_store_answers_within_about_10_s(emulator, capsys, command):
    from conftest import BUCKET

    emulator.stop()
    args = ["runs", "--out", f"gs://{BUCKET}/results"] if command == "runs" else \
        ["show", "some-run", "--out", f"gs://{BUCKET}/results"]
    result = in_process(capsys, *args)
    assert result.code == 2 and "unreachable" in result.err
    assert result.seconds < 20, f"{command} took {result.seconds:.0f} s against a dead endpoint"


def test_on_a_cpu_the_wall_column_shows_the_wall_timer(capsys):
    """On a CPU `wall` is the timer: its column once read `-` beside a median that was the wall time."""
    from runner.report import COLUMNS

    wall = next(getter for header, _, getter in COLUMNS if header == "wall ms")
    run = read_run(SHIPPED_RUN)
    measured = [c for c in run.cells if c.status == "ok"]
    assert measured and all(c.timer == "wall" for c in measured)
    assert all(wall(c) == f"{c.median_s * 1e3:.4g}" for c in measured)


def test_the_command_line_page_names_every_variant_and_every_show_format():
    from runner.cli import build_parser

    text = (REPO / "docs" / "command-line.md").read_text()
    assert f"unknown variant 'flash' (known: {', '.join(sorted(load_all()))})" in text
    commands = build_parser()._subparsers._group_actions[0].choices
    formats = next(a.choices for a in commands["show"]._actions if a.dest == "format")
    assert f"[--format {'|'.join(formats)}]" in text


def test_the_command_line_pages_refusal_of_an_out_is_in_runs_words(capsys):
    """The page's example of an --out that cannot be written is what run says today (it quoted a bucket probe's object,
    '/data/results/.attnbench-probe-7', for a local folder); the reason at its end is the OS's, which differs for a
    user who is not root (Permission denied)."""
    text = (REPO / "docs" / "command-line.md").read_text()
    (line,) = [line.strip() for line in text.splitlines() if line.strip().startswith("error: --out ")]
    said = in_process(capsys, "run", REPO / "specs" / "smoke.yaml", "--out", line.split()[2].rstrip(":"), "--dry-run")
    assert said.code == 2 and [error.rsplit(": ", 1)[0] for error in said.errors] == [line.rsplit(": ", 1)[0]]


def test_every_argument_of_every_command_says_what_it_is_and_any_default_it_has():
    """validate's SPEC had no words, show's and compare's --format neither words nor their default."""
    import argparse

    from runner.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    arguments = [(name, a) for name, parser in commands.items() for a in parser._actions
                 if not isinstance(a, argparse._HelpAction)]
    assert [(name, a.dest) for name, a in arguments if not a.help] == []
    assert [(name, a.dest) for name, a in arguments if a.option_strings and a.default not in (None, False, [])
            and "default" not in a.help] == []


def synopses(text: str) -> dict[str, str]:
    """Each command's synopsis lines on the command line page (`    attnbench NAME …` and the lines that go on)."""
    found = {}
    for line in text.split("\n\n", 2)[1].splitlines():
        if line.startswith("    attnbench "):
            name = line.split()[1]
            found[name] = found.get(name, "") + line
        elif line.startswith("        ["):
            found[name] += line
    return found


def test_the_command_line_page_has_every_command_and_every_option_in_its_synopsis():
    from runner.cli import build_parser

    shown = synopses((REPO / "docs" / "command-line.md").read_text())
    commands = build_parser()._subparsers._group_actions[0].choices
    options = {name: {o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"}
               for name, parser in commands.items()}
    options["soak"] -= options["run"]  # its synopsis says [run's options]
    assert sorted(set(commands) - set(shown)) == []
    assert {name: sorted(o for o in options[name] if not re.search(rf"(?<![\w-]){o}(?![\w-])", shown[name]))
            for name in commands} == {name: [] for name in commands}


def test_every_option_a_page_gives_a_command_is_one_it_takes():
    """The other way round: an option the docs or README write after `attnbench CMD` (in a synopsis, a code block or
    a `code span`) exists on that command (soak takes run's), so a renamed or dropped flag leaves no page behind."""
    from runner.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    options = {name: {o for a in parser._actions for o in a.option_strings} for name, parser in commands.items()}
    pages = [REPO / "README.md", *(p for p in (REPO / "docs").rglob("*.md") if p.name != "benchmarks.md")]
    given = {(page.name, name, flag) for page in pages
             for name, rest in re.findall(r"attnbench (\w+)([^\n`]*)", page.read_text()) if name in options
             for flag in re.findall(r"(?<![\w-])--[a-z][\w-]*", rest)}
    assert len(given) > 40  # the pages' synopses and examples were read
    assert sorted(g for g in given if g[2] not in options[g[1]]) == []


def test_a_run_against_a_bucket_that_never_answers_warns_once_then_errs(tmp_path):
    """One warning at start-up says what the run does about the store, then the one error line: the first read of the
    store and the uploader's first failure, which said the same store out of reach again, are not said twice (they
    were two more warnings). A cell this CPU declines: nothing to measure, the store's path alone."""
    from conftest import BUCKET, held_port
    from runner.cli import EXIT_NOT_UPLOADED

    spec = write_spec(tmp_path / "spec.yaml", spec_data({"name": "a", "variants": ["cudnn"]}))
    with held_port() as closed:  # nobody listens, nor can start to meanwhile
        result = attnbench("run", spec, "--out", f"gs://{BUCKET}/r", "--spool", tmp_path / "spool", "--run-id", "dead",
                           "--store-timeout", "2", STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{closed.getsockname()[1]}")
    warning, error = result.stderr.splitlines()
    assert result.returncode == EXIT_NOT_UPLOADED, result.stderr
    assert warning.startswith(f"warning: gs://{BUCKET}/r: unreachable") and "into the spool" in warning
    assert error.startswith(f"error: results not uploaded to gs://{BUCKET}/r/dead")


def _closing_tables(manifest, cells, folder) -> str:
    """What a run's end prints (runner.cli._run_report) for `cells` read back from a spool."""
    from rich.console import Console

    from runner.cli import _run_report
    from runner.spool import Spool
    from runner.store import LocalStore

    spool = Spool(LocalStore(folder), manifest.run_id, None)
    spool.write_manifest(manifest)
    for cell in cells:
        spool.add(cell)
    console = Console(record=True, width=400)
    _run_report(spool, "somewhere", console)
    return console.export_text()


def test_show_and_a_runs_closing_tables_print_the_columns_only_a_gpu_fills_alike(capsys, tmp_path):
    """On a CPU neither prints % copy, SM MHz nor % MMA@clock (show printed them all dashes); with a GPU's clock both
    print SM MHz and % MMA@clock (the closing tables never printed the latter): runner.report.measurement_columns
    decides for both."""
    from stores import CPU_LAB5, H200_LONG, shipped, telemetry

    cpu = shipped(CPU_LAB5)
    result = in_process(capsys, "show", SHIPPED_RUN)
    for printed in (result.out, _closing_tables(cpu.manifest, cpu.cells, tmp_path / "cpu")):
        assert "TFLOP/s" in printed and "GB/s" in printed
        assert [h for h in ("% copy", "SM MHz", "% MMA@clock") if h in printed] == []
    gpu = shipped(H200_LONG)
    closing = _closing_tables(gpu.manifest, [telemetry(cell) for cell in gpu.cells], tmp_path / "gpu")
    assert "% MMA@clock" in closing and "SM MHz" in closing


def test_a_runs_closing_tables_list_the_cells_in_shows_order(capsys, tmp_path):
    """The manifest's cell_order for both, whatever order the cells were measured and spooled in (the closing tables
    listed them as spooled: seq-len's T 128 before T 64)."""
    from stores import CPU_LAB5, shipped

    def rows(printed: str) -> list[list[str]]:
        return [cells[:3] for line in printed.splitlines() if line.startswith("│")
                if (cells := [c.strip() for c in line.split("│")[1:-1]])[0]]

    cpu = shipped(CPU_LAB5)
    shown = rows(in_process(capsys, "show", SHIPPED_RUN).out.split("leaderboard: ")[0])
    assert len(shown) == 76 and rows(_closing_tables(cpu.manifest, cpu.cells[::-1], tmp_path)) == shown


def test_a_runs_exit_line_counts_its_cells_in_english(capsys):
    """'the 1 cell is in …' and '0 of 1 cell done', where it said 'all 1 cells are in …'; 'all 1,250 cells are in'
    for many (runner.counted, the one way a count is printed)."""
    from types import SimpleNamespace

    from runner.cli import EXIT_NOT_UPLOADED, EXIT_SIGTERM, RunAdvice, _run_exit
    from runner.run import Outcome

    spool = SimpleNamespace(dir="/spool/r", run_id="r", shard=None)
    run_exit = functools.partial(_run_exit, spool=spool, location="gs://b/r", spool_root=Path("/spool"),
                                 advice=RunAdvice())
    assert run_exit(Outcome(True, False, 1, 1, "no network")) == EXIT_NOT_UPLOADED
    assert "; the 1 cell is in /spool/r; rerun" in capsys.readouterr().err
    assert run_exit(Outcome(False, False, 0, 1, "no network")) == EXIT_SIGTERM
    assert capsys.readouterr().err.startswith("interrupted by SIGTERM: 0 of 1 cell done, not uploaded (no network); "
                                              "no cell is in /spool/r")
    run_exit(Outcome(True, False, 1250, 1250, "no network"))
    assert "; all 1,250 cells are in /spool/r; rerun" in capsys.readouterr().err


def test_a_shards_sigterm_and_not_uploaded_lines_name_its_shard_with_its_run_id(capsys):
    """A shard's rerun must measure that shard: its lines name --shard beside --run-id, since an Indexed Job's pod
    took both from its environment (JOB_COMPLETION_INDEX, ATTNBENCH_RUN_ID), which a shell rerunning it lacks;
    recheck's name its own command, which takes neither."""
    from types import SimpleNamespace

    from runner.cli import EXIT_NOT_UPLOADED, EXIT_SIGTERM, RecheckAdvice, RunAdvice, _run_exit
    from runner.run import Outcome

    shard = SimpleNamespace(dir="/spool/r", run_id="r", shard="2/4")
    run_exit = functools.partial(_run_exit, spool=shard, location="gs://b/r", spool_root=Path("/spool"))
    assert run_exit(Outcome(False, True, 1, 3, None), advice=RunAdvice()) == EXIT_SIGTERM
    assert capsys.readouterr().err.endswith("uploaded to gs://b/r; rerun with --run-id r --shard 2/4 to resume\n")
    assert run_exit(Outcome(True, False, 3, 3, "no network"), advice=RunAdvice()) == EXIT_NOT_UPLOADED
    assert capsys.readouterr().err.endswith("; rerun with --run-id r --shard 2/4 to upload them\n")
    run_exit(Outcome(False, True, 1, 3, None), advice=RecheckAdvice("b"))
    assert capsys.readouterr().err.endswith("; rerun the same attnbench recheck command to resume\n")


def test_the_sigterm_and_not_uploaded_lines_name_a_spool_from_the_environment_unless_it_is_the_default(capsys,
                                                                                                     monkeypatch):
    """A Job's pod took its spool from ATTNBENCH_SPOOL, which a shell rerunning it lacks: its lines name --spool, and
    recheck's its command with it; a spool that variable sets to the default is left out, as one --spool named."""
    from types import SimpleNamespace

    from runner.cli import RecheckAdvice, RunAdvice, _run_exit
    from runner.run import Outcome
    from runner.spool import SPOOL_ENV, default_spool_root

    part = SimpleNamespace(dir="/pod/spool/r", run_id="r", shard=None)
    monkeypatch.setenv(SPOOL_ENV, "/pod/spool")
    _run_exit(Outcome(False, True, 1, 3, None), part, "gs://b/r", Path("/pod/spool"), RunAdvice())
    assert capsys.readouterr().err.endswith("; rerun with --run-id r --spool /pod/spool to resume\n")
    _run_exit(Outcome(True, False, 3, 3, "no network"), part, "gs://b/r", Path("/pod/spool"), RecheckAdvice("b"))
    assert capsys.readouterr().err.endswith("; rerun the same attnbench recheck command with --spool /pod/spool to "
                                            "upload them\n")
    _run_exit(Outcome(False, True, 1, 3, None), part, "gs://b/r", Path("/elsewhere"), RunAdvice())  # --spool named it
    assert capsys.readouterr().err.endswith("; rerun with --run-id r to resume\n")
    monkeypatch.delenv(SPOOL_ENV)
    default = default_spool_root()
    monkeypatch.setenv(SPOOL_ENV, str(default))
    _run_exit(Outcome(False, True, 1, 3, None), part, "gs://b/r", default, RunAdvice())
    assert capsys.readouterr().err.endswith("; rerun with --run-id r to resume\n")


def test_every_advice_line_a_user_pastes_reads_back_as_its_words_through_a_shell(tmp_path, monkeypatch, capsys):
    """The rerun, recheck and set-aside lines quote a spool holding a space as a shell reads it (runner.pasted), and
    give a relative $ATTNBENCH_SPOOL absolute, which a shell elsewhere than the run's working directory reads too."""
    import shlex
    from types import SimpleNamespace

    from runner.cli import RecheckAdvice, RunAdvice, _run_exit
    from runner.resume import aside_rerun
    from runner.run import Outcome
    from runner.spool import SPOOL_ENV

    spool = tmp_path / "my spool"
    part = SimpleNamespace(dir=spool / "r", run_id="r", shard="1/2")
    monkeypatch.setenv(SPOOL_ENV, str(spool))
    _run_exit(Outcome(False, True, 1, 3, None), part, "gs://b/r", spool, RunAdvice())
    said = capsys.readouterr().err.split("; rerun with ")[1].removesuffix(" to resume\n")
    assert shlex.split(said) == ["--run-id", "r", "--shard", "1/2", "--spool", str(spool)]
    _run_exit(Outcome(True, False, 3, 3, "no network"), part, "gs://b/r", spool, RecheckAdvice("b"))
    said = capsys.readouterr().err.split("recheck command with ")[1].removesuffix(" to upload them\n")
    assert shlex.split(said) == ["--spool", str(spool)]
    kept = SimpleNamespace(dir=spool / "n", run_id="n", shard=None, keys=lambda: ["k"])
    said = aside_rerun(kept, spool).split("command with ")[1].removesuffix(" to finish that run and upload it")
    assert shlex.split(said) == ["--run-id", "n", "--spool", str(spool)]
    said = RecheckAdvice("b").aside(kept, None).split("where ")[1].split(" reads it")[0]
    assert shlex.split(said) == ["attnbench", "show", str(spool / "n")]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(SPOOL_ENV, "my spool")
    _run_exit(Outcome(False, True, 1, 3, None), part, "gs://b/r", Path("my spool"), RunAdvice())
    assert shlex.split(capsys.readouterr().err.split("; rerun with ")[1])[-3] == str(spool)


def recheck_pair(tmp_path) -> list[str]:
    """lab5-a and lab5-b in tmp_path/results, B 30 % slower in three cells (their keys)."""
    import datetime as dt

    from stores import shipped
    from test_compare import DAY, TEMPLATE, copied, three_slower

    slower = three_slower(shipped(TEMPLATE))
    copied(tmp_path, "lab5-a", DAY)
    copied(tmp_path, "lab5-b", DAY + dt.timedelta(days=1), factor=lambda c: 1.3 if c.key in slower else 1.0)
    return slower


def rechecking(tmp_path) -> tuple:
    """`attnbench recheck lab5-b --against lab5-a` in tmp_path's results and spool."""
    return ("recheck", "lab5-b", "--against", "lab5-a", "--out", tmp_path / "results", "--spool", tmp_path / "spool")


def test_a_recheck_whose_run_id_is_refused_says_what_works_for_recheck_and_that_works(capsys, tmp_path, monkeypatch):
    """recheck takes no --run-id (its run id is B's, B-recheck), so where B-recheck holds a run of another spec the
    line says to move that run elsewhere, never to give another --run-id; moved, the same recheck command gets past
    the check and measures B's slower cells."""
    from runner import run
    from runner.run import Outcome
    from test_results import manifest

    slower = recheck_pair(tmp_path)
    taken = tmp_path / "results" / "lab5-b-recheck"
    taken.mkdir()
    other = manifest(run_id=taken.name, name="other", spec={"name": "other"}, spec_hash="f" * 16)
    (taken / MANIFEST).write_text(other.model_dump_json())
    refused = in_process(capsys, *rechecking(tmp_path))
    assert refused.code == 2 and refused.errors[-1].startswith(f"error: run id {taken.name}: {taken} holds a run of "
                                                                "spec other"), refused.err
    assert refused.errors[-1].endswith(f"a rerun resumes only the same: move {taken} out of --out and the spool for a "
                                       f"new recheck (recheck takes no --run-id: its run id is {taken.name})"), refused.err
    taken.rename(tmp_path / "elsewhere")
    measured = []
    monkeypatch.setattr(run, "execute", lambda spec, cells, *rest: measured.append({c.key for c in cells}) or
                        Outcome(True, True, 0, len(cells)))
    assert in_process(capsys, *rechecking(tmp_path)).code == 1 and measured == [set(slower)]  # none measured: slower


@pytest.mark.parametrize("late", [False, True])
def test_a_recheck_refused_on_another_machine_says_to_rerun_recheck_or_move_its_run_never_run_id(capsys, tmp_path,
                                                                                                  monkeypatch, late):
    """B-recheck's cells measured on another machine refuse a resume here (exit 4), found before the first cell or
    when the store first answered, after one cell was measured into the spool: the line says to rerun the same recheck
    command under the run's settings, or to move B-recheck's folders elsewhere for a new recheck, and where the cell
    measured meanwhile is kept; never --run-id, which recheck does not take."""
    from runner import run
    from runner.resume import OtherMachine
    from runner.run import Outcome
    from runner.spool import spool_store
    from runner.store import open_store
    from test_results import manifest, record

    def refused(spec, cells, store, spool, *rest):
        if late:  # the store answers late, holding B-recheck of another machine
            store.put(f"{spool.run_id}/{MANIFEST}", manifest(run_id=spool.run_id, rechecks="lab5-b").model_dump_json()
                      .encode())
            spool.write_manifest(manifest(run_id=spool.run_id, rechecks="lab5-b"))
            spool.add_quietly([record().model_copy(update={"run_id": spool.run_id})])
        return Outcome(False, False, int(late), len(cells), refused=OtherMachine("xla_flags (none) → --x", late))

    recheck_pair(tmp_path)
    monkeypatch.setattr(run, "execute", refused)
    done = in_process(capsys, *rechecking(tmp_path))
    said = done.errors[-1]
    spooled = spool_store(tmp_path / "spool", open_store(str(tmp_path / "results"))).root / "lab5-b-recheck"
    assert done.code == 4 and said.startswith("error: run id lab5-b-recheck: resuming it here would mix cells "
                                              "timed under two settings (the run's → this process's: xla_flags "
                                              "(none) → --x)")
    held = tmp_path / "results" / "lab5-b-recheck" if late else spooled  # only the folders that hold it are named
    assert said.endswith(f"; rerun the same attnbench recheck command under the run's settings, or move {held} "
                         "out of --out and the spool for a new recheck (recheck takes no --run-id: its run id is "
                         "lab5-b-recheck)"), said
    assert ("the 1 cell it held was moved to run lab5-" in said and " reads it (a recheck uploads no run but "
            "lab5-b-recheck);" in said) is late and "give another" not in said, said
    if late:  # the command the line gives reads the cell
        shown = in_process(capsys, *said.partition(", kept there, where attnbench ")[2].partition(" reads it")[0].split())
        assert shown.code == 0 and "1 cell: 1 ok" in shown.out and not shown.err, shown.out + shown.err


def test_show_says_where_a_gpu_without_a_cited_mma_rate_has_no_mma_column(tmp_path, capsys):
    """The L4 walk's finding 5 (docs/evidence/l4-walk-20261207.txt): on a GPU that no row of
    runner.metrics.MMA_PER_CLOCK_PER_SM covers (an L4, sm89), show's tables and its leaderboard lost their % MMA@clock
    column without a word. A line says why where it would stand, under each experiment's table and under the board
    (show's and --format leaderboard's); the same run under its H200 manifest has the column and no such line."""
    from stores import H200_WARM, SHIPPED, relabelled

    said = "% MMA@clock: no cited MMA rate for NVIDIA L4 (compute capability 8.9)"
    l4 = relabelled(H200_WARM, tmp_path / "l4")
    table = " ".join(in_process(capsys, "show", l4).out.split())  # prose wrapped at the terminal's width
    assert table.count(said) == 3 and "% MMA@clock │" not in table  # fwd, fwd-bwd, then the board
    assert said in in_process(capsys, "show", l4, "--format", "leaderboard").out
    h200 = in_process(capsys, "show", SHIPPED / H200_WARM).out
    assert "no cited MMA rate" not in h200 and "% MMA@clock" in h200
