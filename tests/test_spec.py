"""runner/spec.py: every bad spec is refused with one exact line per problem, naming its YAML path."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path

import pytest

from runner.cli import main
from runner.registry import load_all
from runner.spec import SECTIONS, Spec, SpecError, identity, load_spec, parse_spec, stored_document
from helpers import REPO, TINY, spec_data, write_spec

KNOWN = {"naive", "xla", "cudnn", "auto"}  # fixed, so messages do not change when variants are added


def exp(name: str = "a", **fields) -> dict:
    return {"name": name, "variants": ["xla"], **fields}


BAD_SPECS = {
    "unknown top-level key": (spec_data(bogus=1), ["bogus: unknown key"]),
    "unknown nested key": (spec_data(timing={"warmupp": 1}), ["timing.warmupp: unknown key"]),
    "unknown experiment key": (spec_data(exp(colour="red")), ["experiments[0].colour: unknown key"]),
    "unknown sweep axis": (spec_data(exp(sweep={"seqlen": [8]})), ["experiments[0].sweep.seqlen: unknown key"]),
    "hidden pass_ spelling": (spec_data(exp(pass_="fwd")), ["experiments[0].pass_: unknown key"]),
    "string for a size": (
        spec_data(defaults={"batch": "four"}),
        ["defaults.batch: must be an integer (got 'four')"],
    ),
    "float for a size": (spec_data(exp(head_dim=2.5)), ["experiments[0].head_dim: must be an integer (got 2.5)"]),
    "bool for a size": (spec_data(defaults={"batch": True}), ["defaults.batch: must be an integer (got true)"]),
    "not a bool": (spec_data(exp(causal="maybe")), ["experiments[0].causal: must be true or false (got 'maybe')"]),
    "an infinite or undefined soft cap, as YAML spells them": (
        spec_data(exp("a", softcap=float("inf")), exp("b", softcap=float("nan"))),
        ["experiments[0].softcap: must be a finite number (got .inf)",
         "experiments[1].softcap: must be a finite number (got .nan)"]),
    "not a number": (spec_data(tolerances={"float32": "tight"}), ["tolerances.float32: must be a number (got 'tight')"]),
    "name not a string": (spec_data(name=5), ["name: must be a string (got 5)"]),
    "non-positive size in a sweep": (
        spec_data(exp("a"), exp("b"), exp("c", sweep={"seq_len": [64, 0]})),
        ["experiments[2].sweep.seq_len[1]: must be > 0"],
    ),
    "negative default": (spec_data(defaults={"heads": -1}), ["defaults.heads: must be > 0"]),
    "negative warmup and zero budget": (
        spec_data(timing={"warmup": -1, "budget_s": 0}),
        ["timing.warmup: must be >= 0", "timing.budget_s: must be > 0.0"],
    ),
    "more samples required than allowed": (
        spec_data(timing={"min_samples": 10, "max_samples": 3}),
        ["timing.min_samples: must be <= max_samples (3)"],
    ),
    "heads not a multiple of kv_heads (override)": (
        spec_data(exp(heads=6, kv_heads=4)),
        ["experiments[0].kv_heads: heads (6) must be a multiple of kv_heads (4)"],
    ),
    "heads not a multiple of kv_heads (sweep)": (
        spec_data(exp(heads=8, sweep={"kv_heads": [8, 3]})),
        ["experiments[0].sweep.kv_heads[1]: heads (8) must be a multiple of kv_heads (3)"],
    ),
    "swept heads not a multiple of kv_heads": (
        spec_data(exp(kv_heads=4, sweep={"heads": [8, 6]})),
        ["experiments[0].kv_heads: heads (6) must be a multiple of kv_heads (4)"],
    ),
    "swept heads against default kv_heads": (
        spec_data(exp(sweep={"heads": [8, 6]}), defaults={"heads": 8, "kv_heads": 4}),
        ["experiments[0].sweep.heads[1]: heads (6) must be a multiple of kv_heads (4)"],
    ),
    "heads override against default kv_heads": (
        spec_data(exp(heads=6), defaults={"heads": 8, "kv_heads": 4}),
        ["experiments[0].heads: heads (6) must be a multiple of kv_heads (4)"],
    ),
    "clash in defaults is reported once, at defaults": (
        spec_data(exp("a"), exp("b"), defaults={"heads": 6, "kv_heads": 4}),
        ["defaults.kv_heads: heads (6) must be a multiple of kv_heads (4)"],
    ),
    "unknown variant": (
        spec_data(exp(variants=["xla", "flash9"])),
        ["experiments[0].variants[1]: unknown variant 'flash9' (known: auto, cudnn, naive, xla)"],
    ),
    "unknown dtype": (
        spec_data(defaults={"dtype": "fp4"}),
        ["defaults.dtype: must be one of 'float32', 'bfloat16' or 'float16' (got 'fp4')"],
    ),
    "unknown dtype in a sweep": (
        spec_data(exp(sweep={"dtype": ["float32", "int8"]})),
        ["experiments[0].sweep.dtype[1]: must be one of 'float32', 'bfloat16' or 'float16' (got 'int8')"],
    ),
    "unknown pass": (
        spec_data(defaults={"pass": "bwd"}),
        ["defaults.pass: must be one of 'fwd' or 'fwd_bwd' (got 'bwd')"],
    ),
    "empty sweep list": (spec_data(exp(sweep={"seq_len": []})), ["experiments[0].sweep.seq_len: must not be empty"]),
    "empty sweep mapping": (spec_data(exp(sweep={})), ["experiments[0].sweep: must name at least one axis"]),
    "null sweep": (spec_data(exp(sweep=None)), ["experiments[0].sweep: must be a mapping (got null)"]),
    "duplicate experiment name": (
        spec_data(exp("a"), exp("b"), exp("a")),
        ["experiments[2].name: duplicate experiment name 'a'"],
    ),
    "missing name": ({"experiments": [exp()]}, ["name: required"]),
    "missing experiments": ({"name": "t"}, ["experiments: required"]),
    "no experiments": (spec_data(experiments=[]), ["experiments: must not be empty"]),
    "missing variants": (spec_data({"name": "a"}), ["experiments[0].variants: required"]),
    "empty variants": (spec_data(exp(variants=[])), ["experiments[0].variants: must not be empty"]),
    "experiment not a mapping": (spec_data("a"), ["experiments[0]: must be a mapping (got 'a')"]),
    "experiments not a list": (spec_data(experiments={"name": "a"}), ["experiments: must be a list (got {'name': 'a'})"]),
    "warmup given as a bool": (spec_data(timing={"warmup": True}), ["timing.warmup: must be an integer (got true)"]),
    "a field set and swept": (
        spec_data(exp(seq_len=64, sweep={"seq_len": [8, 16]})),
        ["experiments[0].seq_len: also swept (experiments[0].sweep.seq_len); give one or the other"],
    ),
    "a null where null means nothing": (
        spec_data(exp(batch=None, dtype=None), defaults={"causal": None}),
        ["defaults.causal: must not be null (leave the key out for its default)",
         "experiments[0].batch: must not be null (leave the key out for its default)",
         "experiments[0].dtype: must not be null (leave the key out for its default)"],
    ),
    "a swept axis given as null, not [null]": (
        spec_data(exp(sweep={"page_size": None, "seq_len": [8]})),
        ["experiments[0].sweep.page_size: must be a list (got null); a sweep of null alone is [null]"],
    ),
    "a page order or spread that no cell uses": (
        spec_data(exp("a", page_order="shuffled"), exp("b", kv_lengths="equal", sweep={"kv_spread": [0.2, 0.4]}),
                  defaults={**spec_data()["defaults"], "kv_spread": 0.3}),
        ["experiments[0].page_order: no cell here has page_size set, so page_order would change nothing; drop it or "
         "set page_size",
         "experiments[1].sweep.kv_spread: no cell here has kv_lengths uniform, long_tail, bimodal, so kv_spread would "
         "change nothing; drop it or set kv_lengths",
         "defaults.kv_spread: no cell here has kv_lengths uniform, long_tail, bimodal, so kv_spread would change "
         "nothing; drop it or set kv_lengths"],
    ),
}


@pytest.mark.parametrize("data, expected", BAD_SPECS.values(), ids=BAD_SPECS.keys())
def test_bad_spec_is_refused_with_exact_lines(data, expected):
    with pytest.raises(SpecError) as caught:
        parse_spec(data, KNOWN)
    assert caught.value.problems == expected
    assert str(caught.value) == "\n".join(expected)


def test_several_problems_give_one_line_each():
    data = spec_data(
        exp("a", variants=["nope"], sweep={}),
        exp("a", kv_heads=3),
        defaults={**spec_data()["defaults"], "heads": 8},
    )
    with pytest.raises(SpecError) as caught:
        parse_spec(data, KNOWN)
    assert caught.value.problems == [
        "experiments[0].variants[0]: unknown variant 'nope' (known: auto, cudnn, naive, xla)",
        "experiments[0].sweep: must name at least one axis",
        "experiments[1].name: duplicate experiment name 'a'",
        "experiments[1].kv_heads: heads (8) must be a multiple of kv_heads (3)",
    ]


def test_unknown_variants_are_reported_beside_schema_problems():
    data = spec_data(exp("a", variants=["naive", "flash"], sweep={"seq_len": [64, -1]}))
    with pytest.raises(SpecError) as caught:
        parse_spec(data, KNOWN)
    assert caught.value.problems == [
        "experiments[0].sweep.seq_len[1]: must be > 0",
        "experiments[0].variants[1]: unknown variant 'flash' (known: auto, cudnn, naive, xla)",
    ]


def test_several_schema_problems_give_one_line_each():
    data = spec_data(bogus=1, defaults={"batch": 0, "dtype": "fp4"})
    with pytest.raises(SpecError) as caught:
        parse_spec(data, KNOWN)
    assert sorted(caught.value.problems) == [
        "bogus: unknown key",
        "defaults.batch: must be > 0",
        "defaults.dtype: must be one of 'float32', 'bfloat16' or 'float16' (got 'fp4')",
    ]


def test_unreadable_yaml_names_line_and_column(tmp_path):
    path = write_spec(tmp_path / "bad.yaml", "name: t\nexperiments:\n  - name: a\n    variants: [xla\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path, KNOWN)
    assert caught.value.problems == [f"{path}:5:1: not valid YAML (expected ',' or ']', but got '<stream end>')"]


@pytest.mark.parametrize("text, where, code", [
    ("name: t\nexperiments: [{name: a\x00, variants: [xla]}]\n", "2:23", "0000"),
    ("\x07name: t\n", "1:1", "0007"),
])  # fmt: skip
def test_a_control_character_is_one_line_naming_line_and_column(tmp_path, text, where, code):
    path = write_spec(tmp_path / "control.yaml", text)
    with pytest.raises(SpecError) as caught:  # was two lines, the second '  in "<unicode string>", position 22'
        load_spec(path, KNOWN)
    assert caught.value.problems == [f"{path}:{where}: not valid YAML (character #x{code} is not allowed)"]


def test_a_key_that_is_not_a_string_is_named_in_its_mapping():
    data = spec_data(exp(sweep={1: [2]}))
    data[3] = "x"
    with pytest.raises(SpecError) as caught:  # was "experiments[0].sweep[1]: Keys should be strings", an index's look
        parse_spec(data, KNOWN)
    assert caught.value.problems == ["experiments[0].sweep: key 1 is not a string (quote it)",
                                     "spec: key 3 is not a string (quote it)"]


def test_an_empty_experiment_name_says_so_in_its_words():
    with pytest.raises(SpecError) as caught:  # was pydantic's "String should have at least 1 character"
        parse_spec(spec_data(exp(name="")), KNOWN)
    assert caught.value.problems == ["experiments[0].name: must not be empty"]


@pytest.mark.parametrize("text", ["", "# a spec, some day\n", "---\n"])
def test_an_empty_spec_says_it_is_empty(tmp_path, text):
    path = write_spec(tmp_path / "empty.yaml", text)
    with pytest.raises(SpecError) as caught:  # was "must be a YAML mapping ... (got NoneType)"
        load_spec(path, KNOWN)
    assert caught.value.problems == [f"{path}: empty; a spec is a YAML mapping with name, experiments, ..."]


def test_bad_indentation_names_line_and_column(tmp_path):
    path = write_spec(tmp_path / "bad.yaml", "name: t\n  bad: indent\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path, KNOWN)
    assert caught.value.problems == [f"{path}:2:6: not valid YAML (mapping values are not allowed here)"]


def test_a_key_given_twice_is_refused_where_it_repeats(tmp_path):
    text = "name: t\nexperiments:\n  - name: a\n    variants: [xla]\n    variants: [naive]\n"
    path = write_spec(tmp_path / "twice.yaml", text)
    with pytest.raises(SpecError) as caught:
        load_spec(path, KNOWN)
    assert caught.value.problems == [f"{path}:5:5: not valid YAML (duplicate key 'variants')"]


def test_anchors_and_merge_keys_still_load(tmp_path):
    text = (
        "name: t\n"
        "experiments:\n"
        "  - &first {name: a, variants: [xla], sweep: {causal: [true, false]}}\n"
        "  - {<<: *first, name: b}\n"
    )
    spec = load_spec(write_spec(tmp_path / "anchors.yaml", text), KNOWN)
    assert [(e.name, e.sweep.axes()) for e in spec.experiments] == [
        ("a", {"causal": [True, False]}),
        ("b", {"causal": [True, False]}),
    ]


@pytest.mark.parametrize("levels", [32, 33])
def test_nesting_is_bounded_at_32_levels_the_document_included(tmp_path, levels):
    nested = "[" * (levels - 1) + "]" * (levels - 1)  # under the document's mapping
    path = write_spec(tmp_path / "deep.yaml", f"name: t\nexperiments: [{{name: a, variants: [xla]}}]\nx: {nested}\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path, KNOWN)
    too_deep = f"{path}:3:{3 + levels - 1}: nested deeper than 32 levels"
    assert caught.value.problems == [f"{path}: x: unknown key" if levels == 32 else too_deep]  # 32 levels load


def test_a_file_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path, KNOWN)
    assert caught.value.problems == [f"{path}: not UTF-8 text"]


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.yaml"
    with pytest.raises(SpecError) as caught:
        load_spec(path, KNOWN)
    assert caught.value.problems == [f"{path}: no such file"]


@pytest.mark.parametrize("kind", ["a folder", "a device"])
def test_a_path_that_is_not_a_regular_file_is_refused_before_it_is_read(tmp_path, kind):
    """/dev/null read as an empty spec, a folder as one that cannot be read (a FIFO: test_cli_bad_input, in a
    subprocess, for it waited forever)."""
    path = tmp_path if kind == "a folder" else Path(os.devnull)
    with pytest.raises(SpecError) as caught:
        load_spec(path, KNOWN)
    assert caught.value.problems == [f"{path}: {kind}, not a file; a spec is a YAML file"]


@pytest.mark.parametrize("text, kind", [("- a\n- b\n", "list"), ("just text\n", "str")])
def test_document_that_is_not_a_mapping(tmp_path, text, kind):
    path = write_spec(tmp_path / "list.yaml", text)
    with pytest.raises(SpecError) as caught:
        load_spec(path, KNOWN)
    assert caught.value.problems == [f"{path}: must be a YAML mapping with name, experiments, ... (got {kind})"]


def test_file_errors_go_through_the_same_validation(tmp_path):
    path = write_spec(tmp_path / "s.yaml", spec_data(exp(sweep={"seq_len": [8, -8]})))
    with pytest.raises(SpecError) as caught:
        load_spec(path, KNOWN)
    assert caught.value.problems == [f"{path}: experiments[0].sweep.seq_len[1]: must be > 0"]  # the file, then where


@pytest.mark.parametrize("path", sorted((REPO / "specs").rglob("*.yaml")), ids=lambda p: p.name)
def test_shipped_specs_validate(path):
    from runner.cells import count, expand, first
    from runner.limits import limits

    spec = load_spec(path, set(load_all()))
    assert spec.experiments and limits(spec) == []  # no experiment that every variant declines
    cells = expand(spec)
    assert count(spec) == len(cells)  # validate's count is the plan's
    assert first(spec, 7) == cells[:7]  # and the cells whose declines it counts, the plan's first


def test_defaults_fill_unset_fields():
    spec = parse_spec({"name": "t", "experiments": [exp()]}, KNOWN)
    assert spec.defaults.model_dump(by_alias=True) == {
        "batch": 4, "seq_len": 128, "kv_seq_len": None, "heads": 8, "kv_heads": None,
        "head_dim": 64, "v_head_dim": None, "dtype": "bfloat16", "causal": False, "pass": "fwd", "window": None,
        "fill": 1.0, "bias": "none", "softcap": None, "tp": 1, "devices": 1, "kv_lengths": None, "kv_spread": 0.5,
        "page_size": None, "page_order": "contiguous", "documents": 1, "deterministic": False, "tune": False,
    }  # fmt: skip
    assert spec.experiments[0].overrides() == {}


def test_overrides_use_the_spec_spelling_of_pass():
    spec = parse_spec(spec_data(exp(**{"pass": "fwd_bwd", "seq_len": 16})), KNOWN)
    assert spec.experiments[0].overrides() == {"seq_len": 16, "pass": "fwd_bwd"}
    assert spec.experiments[0].sweep.axes() == {}


def test_digest_is_stable_and_content_sensitive():
    first, again = parse_spec(spec_data(), KNOWN), parse_spec(spec_data(), KNOWN)
    assert first.digest() == again.digest()
    assert parse_spec(spec_data(seed=1), KNOWN).digest() != first.digest()


def _properties_without_description(schema: dict) -> list[str]:
    models = {"Spec": schema, **schema["$defs"]}
    return [
        f"{model}.{name}"
        for model, body in models.items()
        for name, prop in body.get("properties", {}).items()
        if not prop.get("description")
    ]


def test_schema_command_describes_every_property_of_every_model(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"Experiment", "Shape", "Sweep", "TimingSettings", "Tolerances"} <= set(schema["$defs"])
    assert "pass" in schema["$defs"]["Shape"]["properties"]  # the spec spelling, not pass_
    assert _properties_without_description(schema) == []


def test_every_model_has_a_description():
    schema = Spec.model_json_schema(by_alias=True)
    assert all(body.get("description") for body in [schema, *schema["$defs"].values()])


@pytest.mark.parametrize("shape, sweep, problem", [
    (dict(heads=12, kv_heads=4), {"tp": [1, 8]}, "experiments[0].sweep.tp[1]: heads (12) must be a multiple of tp (8)"),
    (dict(heads=12, kv_heads=3, tp=2), {}, "experiments[0].tp: kv_heads (3) and tp (2): one must divide the other"),
])
def test_a_tp_that_cannot_shard_the_heads_is_refused_where_it_is_set(shape, sweep, problem):
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_data(exp(sweep=sweep, **shape) if sweep else exp(**shape)), KNOWN)
    assert caught.value.problems == [problem]


@pytest.mark.parametrize("field, value, message", [
    ("fill", 0, "must be > 0.0"), ("fill", 1.5, "must be <= 1.0 (got 1.5)"), ("window", 0, "must be > 0"),
    ("softcap", -1.0, "must be > 0.0"), ("bias", "rope", "must be one of 'none' or 'alibi' (got 'rope')"),
])
def test_the_new_axes_refuse_bad_values_in_one_line(field, value, message):
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_data(exp(**{field: value})), KNOWN)
    assert caught.value.problems == [f"experiments[0].{field}: {message}"]


def test_an_experiments_null_overrides_the_defaults_value():
    """A null the experiment gives is a value (a dense cache, no window, S = T), not "unset": it once left the
    defaults' page_size 16, and serving.yaml's dense experiment ran paged cells."""
    from runner.cells import expand

    defaults = {"seq_len": 8, "kv_seq_len": 64, "page_size": 16, "window": 4, "softcap": 30.0, "kv_lengths": "uniform"}
    nulls = dict.fromkeys(["kv_seq_len", "page_size", "window", "softcap", "kv_lengths"])
    spec = parse_spec(spec_data(exp("unset"), exp("nulls", **nulls), defaults=defaults), KNOWN)
    unset, null = (cell.params for cell in expand(spec))
    assert (unset.kv_seq_len, unset.page_size, unset.window, unset.softcap, unset.kv_lengths) == (64, 16, 4, 30.0,
                                                                                                 "uniform")
    assert (null.kv_seq_len, null.page_size, null.window, null.softcap, null.kv_lengths) == (8, None, None, None, None)


def test_a_page_order_and_spread_apply_to_the_cells_that_have_pages_and_ragged_lengths():
    """A dense cell of a sweep over page_size with pages shuffled is dense: neither labelled nor keyed "shuffled"
    (it once was); the same for a spread beside equal lengths. The defaults' spread is used by one experiment."""
    from runner.cells import expand

    data = spec_data(exp("plain"), exp("serving", page_order="shuffled", sweep={"page_size": [8, None],
                                                                              "kv_lengths": ["equal", "uniform"]}),
                     defaults={**spec_data()["defaults"], "kv_spread": 0.25})
    cells = [c.params for c in expand(parse_spec(data, KNOWN))]
    assert [(p.page_size, p.kv_lengths, p.page_order, p.kv_spread) for p in cells] == [
        (None, None, "contiguous", 0.5),
        (8, "equal", "shuffled", 0.5), (None, "equal", "contiguous", 0.5),
        (8, "uniform", "shuffled", 0.25), (None, "uniform", "contiguous", 0.25)]
    assert "shuffled" not in cells[2].label() and "shuffled" in cells[1].label()


def test_a_null_given_changes_the_digest():
    assert parse_spec(spec_data(exp(page_size=None)), KNOWN).digest() != parse_spec(spec_data(exp()), KNOWN).digest()


def test_serving_specs_dense_experiment_is_dense():
    from runner.cells import expand

    cells = expand(load_spec(REPO / "specs/serving.yaml", set(load_all())))
    assert {c.params.page_size for c in cells if c.experiment == "dense"} == {None}


def test_a_sweep_may_hold_no_window_beside_windows():
    from runner.cells import expand

    cells = expand(parse_spec(spec_data(exp(sweep={"window": [None, 4]})), KNOWN))
    assert [c.params.window for c in cells] == [None, 4]


def test_the_smoke_spec_says_which_variants_it_covers():
    """Its description once claimed every variant and covered four."""
    spec = load_spec(REPO / "specs/smoke.yaml", set(load_all()))
    covered = {v for e in spec.experiments for v in e.variants}
    named = {v for v in load_all() if f"{v}," in spec.description or f" {v} " in spec.description}
    assert named == covered, f"the description names {sorted(named)}, the experiments run {sorted(covered)}"


def test_tune_is_true_or_false_an_experiments_option_or_an_axis_and_a_cells_key_tells_tuned_from_not(tmp_path):
    from runner.cells import expand

    path = write_spec(tmp_path / "s.yaml", spec_data(exp(tune="maybe", sweep={"tune": [True, 2]})))
    with pytest.raises(SpecError) as caught:
        load_spec(path, KNOWN)
    assert caught.value.problems == [f"{path}: experiments[0].tune: must be true or false (got 'maybe')",
                                     f"{path}: experiments[0].sweep.tune[1]: must be true or false (got 2)"]
    spec = parse_spec(spec_data(exp(sweep={"tune": [False, True]}), exp("b", tune=True)), KNOWN)
    cells = expand(spec)
    assert [c.params.tune for c in cells] == [False, True, True] and len({c.key for c in cells}) == 3


# --- what a spec says (content), its hash (resume) and its identity (comparison across attnbench versions) ----------

def _hash_as_written(spec: Spec) -> str:
    """The spec hash as runs wrote it since 2026-12-06 09:27 (model_dump, plus the nulls an experiment gives), frozen
    here: a resumed run must find its own hash, and results written before must read as they did."""
    dumped = spec.model_dump(mode="json", by_alias=True)
    nulls = {e.name: [name for name, value in e.overrides().items() if value is None] for e in spec.experiments}
    if nulls := {name: given for name, given in nulls.items() if given}:
        dumped["nulls_given"] = nulls
    return hashlib.sha256(json.dumps(dumped, sort_keys=True).encode()).hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "specs").glob("*.yaml")))
def test_the_digest_is_the_hash_runs_wrote_over_the_content_manifests_store(name):
    spec = load_spec(REPO / "specs" / f"{name}.yaml", set(load_all()))
    assert spec.digest() == _hash_as_written(spec)
    assert spec.digest() == hashlib.sha256(json.dumps(spec.content(), sort_keys=True).encode()).hexdigest()[:16]


def test_the_content_tells_a_null_given_from_an_unset_field():
    spec = parse_spec(spec_data(exp("dense", window=None), exp("b"), defaults={**TINY, "window": 4}), KNOWN)
    content = spec.content()
    assert content["nulls_given"] == {"dense": ["window"]}
    assert content["experiments"][0]["window"] is None and content["experiments"][1]["window"] is None
    assert spec.digest() == _hash_as_written(spec)
    assert "nulls_given" not in parse_spec(spec_data(), KNOWN).content()


def lab5() -> Spec:
    return load_spec(REPO / "specs" / "lab5.yaml", set(load_all()))


def test_the_identity_survives_a_field_added_at_its_default():
    """lab5 as an attnbench before `tune` and `carry_cap` stored it: another spec hash, the same identity."""
    content = lab5().content()
    older = copy.deepcopy(content)
    del older["defaults"]["tune"], older["timing"]["carry_cap"]
    for experiment in older["experiments"]:
        del experiment["tune"], experiment["sweep"]["tune"]
    assert identity(older) == lab5().identity() == identity(content)
    assert hashlib.sha256(json.dumps(older, sort_keys=True).encode()).hexdigest()[:16] != lab5().digest()


@pytest.mark.parametrize("section", ["defaults", "timing", "tolerances"])
def test_the_identity_survives_a_section_added_with_every_setting_at_its_default(section):
    """A spec stored before attnbench had a section reads as one whose section is all at today's defaults, as a
    setting added later does."""
    content = lab5().content()
    content[section] = SECTIONS[section]().model_dump(mode="json", by_alias=True)
    older = {key: value for key, value in content.items() if key != section}
    assert identity(older) == identity(content)

CHANGES = {
    "a sweep": lambda c: c["experiments"][2]["sweep"].update(seq_len=[64, 128]),
    "a timing setting": lambda c: c["timing"].update(budget_s=3.0),
    "a default shape": lambda c: c["defaults"].update(heads=16),
    "a variant": lambda c: c["experiments"][0]["variants"].append("te"),
    "an override": lambda c: c["experiments"][3].update(seq_len=512),
    "a new override": lambda c: c["experiments"][0].update(causal=True),
    "the seed": lambda c: c.update(seed=1),
    "a tolerance": lambda c: c["tolerances"].update(bfloat16=0.05),
    "a field today's attnbench does not know": lambda c: c["timing"].update(retired=1),
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_spec_that_measures_otherwise_has_another_identity(change):
    content = lab5().content()
    CHANGES[change](content)
    assert identity(content) != lab5().identity()


def test_prose_and_settings_at_their_default_leave_the_identity():
    content = lab5().content()
    content["description"] = content["experiments"][0]["description"] = "reworded"
    content.update(compile_cache="off", max_cells=10)
    content["experiments"][4]["dtype"] = "bfloat16"  # given, and equal to the defaults' value
    assert identity(content) == lab5().identity()


def test_a_null_given_over_a_default_is_another_identity_and_over_none_is_not():
    windowed = {**TINY, "window": 4}
    inherits = parse_spec(spec_data(exp("e"), defaults=windowed), KNOWN)
    dense = parse_spec(spec_data(exp("e", window=None), defaults=windowed), KNOWN)
    assert dense.identity() != inherits.identity()
    plain, given = parse_spec(spec_data(exp("e")), KNOWN), parse_spec(spec_data(exp("e", window=None)), KNOWN)
    assert given.identity() == plain.identity() and given.digest() != plain.digest()


@pytest.mark.parametrize("path", sorted((REPO / "specs").rglob("*.yaml")), ids=lambda p: p.name)
def test_a_runs_stored_spec_reads_back_to_the_spec_it_ran(path):
    """`attnbench recheck` measures B's cells again under B's stored spec (Spec.content): read back, it is the same
    spec (its digest, so its cells' keys and a resume's check), nulls given and sweeps of no axis included."""
    spec = load_spec(path, set(load_all()))
    assert parse_spec(stored_document(spec.content()), set(load_all())).digest() == spec.digest()
