"""Input bombs and limits (issue 15): each class of input that once cost a traceback, minutes or gigabytes now
exits 2 with one short line, in bounded time and memory. Real YAML files through runner.cli.main in this process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import runner.run  # noqa: F401  imported once here, not inside the first timed `run`
from helpers import Outcome, in_process, spec_data, write_spec

# each refusal, traced by tracemalloc (most take well under a second): beside two busy processes 1,000 nested
# brackets took 10.1 s (1 run in 5; 10 was the limit) and 5,000 problems 7.8 s; a bomb took minutes (and MIB too)
SECONDS = 30.0
MIB = 64.0  # the most memory Python may hold for one (the alias bomb once took 375 MB and 31 s)


def refused(outcome: Outcome, line: str, spec: Path | None = None) -> None:
    """Exit 2, exactly `line` on stderr (after the `spec` file it is about, if given), nothing on stdout, quickly and
    in little memory."""
    assert (outcome.code, outcome.errors, outcome.out) == (2, [f"error: {f'{spec}: ' if spec else ''}{line}"], "")
    assert len(line) < 200
    assert outcome.seconds < SECONDS, f"took {outcome.seconds:.1f}s"
    assert outcome.peak_mib < MIB, f"held {outcome.peak_mib:.0f} MiB"


def validate(capsys, path, *options) -> Outcome:
    return in_process(capsys, "validate", path, *options, measure=True)


# --- the YAML loader ----------------------------------------------------------------------------------


def test_deep_flow_nesting_is_refused_where_it_passes_32_levels(tmp_path, capsys):
    path = write_spec(tmp_path / "deep.yaml", "name: t\nx: " + "[" * 1000 + "]" * 1000 + "\n")
    refused(validate(capsys, path), f"{path}:2:35: nested deeper than 32 levels")  # was a RecursionError, exit 1


def test_deep_block_nesting_is_refused(tmp_path, capsys):
    text = "name: t\n" + "".join("  " * level + f"k{level}:\n" for level in range(100))
    path = write_spec(tmp_path / "deep.yaml", text)
    refused(validate(capsys, path), f"{path}:33:63: nested deeper than 32 levels")


def billion_laughs(levels: int) -> str:
    """Each level a list of nine aliases of the one before: 9**levels strings from a few hundred bytes."""
    lines = ["name: t", 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines + [f"experiments: *l{levels - 1}"]) + "\n"


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path, capsys):
    path = write_spec(tmp_path / "lol.yaml", billion_laughs(9))
    refused(validate(capsys, path), f"{path}:6:5: more than 10,000 values once its aliases are expanded")


def test_aliases_that_nest_deeper_than_the_limit_are_refused(tmp_path, capsys):
    lines = ["name: t", "a0: &a0 [[[[[[[[[[1]]]]]]]]]]"]  # 10 levels, each alias below adds 10 more
    lines += [f"a{i}: &a{i} [[[[[[[[[*a{i - 1}]]]]]]]]]" for i in range(1, 4)]
    path = write_spec(tmp_path / "deep-aliases.yaml", "\n".join(lines) + "\n")
    refused(validate(capsys, path), f"{path}:5:18: nested deeper than 32 levels once its aliases are expanded")


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path, capsys):
    path = write_spec(tmp_path / "cycle.yaml", "name: t\nexperiments: &a [{name: a, variants: [xla], x: *a}]\n")
    refused(validate(capsys, path), f"{path}:2:48: an alias used inside the value it names")


def test_a_file_over_a_mebibyte_is_not_read(tmp_path, capsys):
    text = "# padding\n" * 200_000 + "name: t\nexperiments: [{name: a, variants: [xla]}]\n"
    path = write_spec(tmp_path / "big.yaml", text)
    refused(validate(capsys, path), f"{path}: more than 1 MiB; a spec is a page or two of YAML")


def test_an_integer_of_thousands_of_digits_is_refused(tmp_path, capsys):
    path = write_spec(tmp_path / "digits.yaml", "name: t\nseed: " + "9" * 5000 + "\n")
    refused(validate(capsys, path), f"{path}:2:7: an integer of 5,000 digits is beyond every bound")  # was exit 1


def test_a_huge_value_is_never_echoed(tmp_path, capsys):
    path = write_spec(tmp_path / "long.yaml", spec_data(name="x" * 20_000))
    refused(validate(capsys, path), "name: must be at most 100 characters", path)
    path = write_spec(tmp_path / "long.yaml", spec_data(defaults={"dtype": "f" * 20_000}))
    outcome = validate(capsys, path)
    assert outcome.code == 2 and len(outcome.err) < 200 + len(str(path))


def test_thousands_of_problems_are_counted_not_listed(tmp_path, capsys):
    zeros = {"name": "a", "variants": ["xla"], "sweep": {"batch": [0] * 5_000}}
    path = write_spec(tmp_path / "zeros.yaml", spec_data(zeros))
    outcome = validate(capsys, path)
    assert outcome.code == 2 and outcome.seconds < SECONDS
    assert outcome.errors == [f"error: {path}: experiments[0].sweep.batch[{i}]: must be > 0" for i in range(20)] + [
        f"error: {path}: … and 4,980 more problems"]


# --- how many cells, how many shards ------------------------------------------------------------------


def million_cells(tmp_path, **top):
    """Two variants over 100 x 100 x 100 sweep points: 2,000,000 cells."""
    sweep = {"seq_len": list(range(1, 101)), "heads": list(range(1, 101)), "head_dim": list(range(1, 101))}
    experiment = {"name": "a", "variants": ["xla", "naive"], "sweep": sweep}
    return write_spec(tmp_path / "million.yaml", spec_data(experiment, **top))


TOO_MANY = ("experiments: the sweeps make 2,000,000 cells, more than max_cells (100,000); sweep fewer values, "
            "or raise max_cells (at most 1,000,000)")


@pytest.mark.parametrize("command", [["validate"], ["run", "--dry-run"], ["run"]], ids=" ".join)
def test_more_cells_than_max_cells_are_counted_not_expanded(tmp_path, capsys, command):
    path = million_cells(tmp_path)
    outcome = in_process(capsys, *command, path, "--out", tmp_path / "out", measure=True) if command[0] == "run" \
        else validate(capsys, path)
    refused(outcome, TOO_MANY, path)  # was minutes and gigabytes
    assert not (tmp_path / "out").exists()


FOUR_CELLS = {"name": "a", "variants": ["xla", "naive"], "sweep": {"causal": [False, True]}}


def test_max_cells_is_set_in_the_spec_or_on_the_command_line(tmp_path, capsys):
    path = write_spec(tmp_path / "four.yaml", spec_data(FOUR_CELLS, max_cells=3))
    refused(validate(capsys, path), "experiments: the sweeps make 4 cells, more than max_cells (3); sweep fewer "
            "values, or raise max_cells (at most 1,000,000)", path)
    assert validate(capsys, path, "--max-cells", 4).out == f"{path}: ok (1 experiment, 4 cells)\n"
    refused(validate(capsys, million_cells(tmp_path, max_cells=1_000_000)),
            TOO_MANY.replace("100,000); sweep fewer values, or raise max_cells (at most 1,000,000)",
                             "1,000,000); sweep fewer values, or split the spec"), tmp_path / "million.yaml")


def test_max_cells_has_a_ceiling(tmp_path, capsys):
    refused(validate(capsys, write_spec(tmp_path / "s.yaml", spec_data(max_cells=10**7))),
            "max_cells: must be <= 1000000 (got 10000000)", tmp_path / "s.yaml")
    outcome = validate(capsys, write_spec(tmp_path / "s.yaml", spec_data()), "--max-cells", 10**7)
    assert outcome.code == 2 and "--max-cells: must be a whole number from 1 to 1,000,000" in outcome.err


@pytest.mark.parametrize("shard, line", [
    ("0/10000000000", "--shard: shard '0/10000000000': at most 100,000 shards"),
    ("0/1" + "0" * 5000, "--shard: shard '0/1000000000000000000000000000000000000… (5,005 characters): at most "
                         "100,000 shards"),
    ("1/3", "--shard: 3 shards for 4 cells in 2 families (the cells that share one set of inputs and reference run "
            "on one shard); use at most 2"),
])  # fmt: skip
def test_shards_are_bounded_by_the_families(tmp_path, capsys, shard, line):
    path = write_spec(tmp_path / "four.yaml", spec_data(FOUR_CELLS))
    refused(in_process(capsys, "run", path, "--dry-run", "--shard", shard, measure=True), line)  # 0/1e10 was minutes


def test_a_job_of_more_pods_than_cells_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "0")
    monkeypatch.setenv("JOB_COMPLETIONS", "10000000000")
    path = write_spec(tmp_path / "one.yaml", spec_data())
    refused(in_process(capsys, "run", path, "--dry-run", measure=True),
            "JOB_COMPLETION_INDEX/JOB_COMPLETIONS: shard '0/10000000000': at most 100,000 shards")


@pytest.mark.parametrize("given, missing", [("JOB_COMPLETION_INDEX", "JOB_COMPLETIONS"),
                                            ("JOB_COMPLETIONS", "JOB_COMPLETION_INDEX")])
def test_half_of_an_indexed_jobs_pair_is_refused_not_run_whole(tmp_path, capsys, monkeypatch, given, missing):
    monkeypatch.setenv(given, "1")  # each pod would run every cell, all writing one run
    path = write_spec(tmp_path / "one.yaml", spec_data())
    refused(in_process(capsys, "run", path, "--dry-run", "--run-id", "r"),
            f"JOB_COMPLETION_INDEX/JOB_COMPLETIONS: {given} is set and {missing} is not: set both (an Indexed Job "
            "does) or neither")


# --- shapes and seeds beyond any GPU ------------------------------------------------------------------


@pytest.mark.parametrize("top, line", [
    ({"defaults": {"seq_len": 10**12}}, "defaults.seq_len: must be <= 16777216 (got 1000000000000)"),
    ({"defaults": {"batch": 10**26}}, "defaults.batch: must be <= 65536 (got 100000000000000000000000000)"),
    ({"seed": 10**30}, "seed: must be < 4294967296 (got 1000000000000000000000000000000)"),
    ({"defaults": {"heads": 4096, "kv_heads": 1}}, "defaults.heads: must be <= 1024 (got 4096)"),
])  # fmt: skip
def test_values_beyond_any_gpu_are_refused(tmp_path, capsys, top, line):
    refused(validate(capsys, write_spec(tmp_path / "big.yaml", spec_data(**top))), line, tmp_path / "big.yaml")


def test_a_cell_whose_inputs_no_gpu_holds_is_refused_by_name(tmp_path, capsys):
    fits = {"name": "fits", "variants": ["xla"], "seq_len": 4096}
    huge = {"name": "huge", "variants": ["xla"], "heads": 64, "head_dim": 256,
            "sweep": {"seq_len": [1024, 1 << 24], "batch": [1, 64], "dtype": ["bfloat16", "float32"]}}
    path = write_spec(tmp_path / "huge.yaml", spec_data(fits, huge))
    refused(validate(capsys, path), "experiments[1]: cell huge B64 T16777216 N64 H256 float32 fwd needs 192.0 TiB "
            "for Q, K and V alone; no GPU holds 1 TiB", path)  # each axis at its largest: a real cell of the sweep


# --- names and run ids --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a b", "../up", "-dash", ".hidden", "x" * 101, "caf\u00e9"])
def test_validate_refuses_the_names_that_run_refuses(tmp_path, capsys, name):
    path = write_spec(tmp_path / "named.yaml", spec_data(name=name))
    checked = validate(capsys, path)
    run = in_process(capsys, "run", path, "--out", tmp_path / "out", "--spool", tmp_path / "spool", measure=True)
    assert checked.code == run.code == 2  # validate once said ok to a name that run then refused as a run id
    assert checked.errors == run.errors and len(checked.errors) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("run_id", ["a b", "../up", "x" * 117, "x" * 100_000])
def test_a_run_id_follows_the_same_rule(tmp_path, capsys, run_id):
    path = write_spec(tmp_path / "s.yaml", spec_data())
    outcome = in_process(capsys, "run", path, "--out", tmp_path / "out", "--run-id", run_id, measure=True)
    assert outcome.code == 2 and len(outcome.errors) == 1 and len(outcome.err) < 200
    assert outcome.errors[0].endswith("use up to 116 letters, digits, '.', '_' and '-', starting with a letter or "
                                      "digit")
    assert not (tmp_path / "out").exists()


def test_the_longest_spec_name_makes_a_run_id_that_run_accepts(tmp_path, capsys):
    from runner.cli import _run_id
    from runner.run import new_run_id
    from runner.spec import parse_spec

    spec = parse_spec(spec_data(name="x" * 100), {"xla"})
    assert _run_id(new_run_id(spec)) == new_run_id(spec)


# --- where results go ---------------------------------------------------------------------------------


def test_out_under_a_file_is_refused_before_the_first_cell(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "a-file" / "results"
    path = write_spec(tmp_path / "s.yaml", spec_data())
    outcome = in_process(capsys, "run", path, "--out", out, "--spool", tmp_path / "spool")
    assert outcome.code == 2 and outcome.out == ""  # was: every cell measured, then exit 3
    assert outcome.errors == [f"error: --out {out}: cannot write results there ({tmp_path / 'a-file'} is not a folder)"]
    assert outcome.seconds < SECONDS and not (tmp_path / "spool").exists()


def test_a_run_folder_that_is_a_file_is_refused_before_the_first_cell_and_by_the_dry_run(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "r1").write_text("hi")  # every upload to out/r1/… would fail: exit 3 after measuring it all
    path = write_spec(tmp_path / "s.yaml", spec_data())
    for dry in ([], ["--dry-run"]):
        outcome = in_process(capsys, "run", path, "--out", tmp_path / "out", "--run-id", "r1", "--spool",
                             tmp_path / "spool", *dry)
        assert outcome.code == 2 and outcome.out == "" and outcome.errors == [
            f"error: --out {tmp_path / 'out'}: cannot write run r1 there ({tmp_path / 'out' / 'r1'} is not a folder)"]
        assert outcome.seconds < SECONDS and not (tmp_path / "spool").exists()


def test_out_to_a_bucket_that_does_not_exist_is_refused_before_the_first_cell(tmp_path, capsys, emulator):
    path = write_spec(tmp_path / "s.yaml", spec_data())
    outcome = in_process(capsys, "run", path, "--out", "gs://no-such-bucket/results", "--spool", tmp_path / "spool")
    assert outcome.code == 2 and outcome.out == "" and len(outcome.errors) == 1
    assert outcome.errors[0].startswith("error: --out gs://no-such-bucket/results: cannot write results there (")
    assert "no such bucket" in outcome.err
    assert outcome.seconds < SECONDS and not (tmp_path / "spool").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, which takes no new folder")
def test_a_dry_run_refuses_an_out_the_run_refuses_in_the_same_line(tmp_path, capsys):
    """/proc takes no new folder, yet its permission bits let root write there (os.access said yes): a dry run
    exited 0 where the run refused the same --out with exit 2. Both now ask one check, which makes a folder there and
    removes it."""
    path = write_spec(tmp_path / "s.yaml", spec_data())
    out = Path("/proc") / "attnbench-results"
    refusals = []
    for dry in ([], ["--dry-run"]):
        outcome = in_process(capsys, "run", path, "--out", out, "--spool", tmp_path / "spool", *dry)
        assert outcome.code == 2 and outcome.out == "" and len(outcome.errors) == 1, outcome
        refusals.append(outcome.errors[0])
        assert not (tmp_path / "spool").exists()
    assert refusals[0] == refusals[1] and refusals[0].startswith(f"error: --out {out}: cannot write results there (")
    assert not out.exists() and not [p for p in (tmp_path).iterdir() if p.name.startswith(".attnbench")]
