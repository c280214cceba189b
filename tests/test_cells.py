"""runner/cells.py: a spec expands into cells, in run order, with defaults resolved and stable keys."""

from __future__ import annotations

import itertools

import pytest

from helpers import params, spec_data
from runner.cells import (Cell, cell_problem, count, expand, family, input_bytes, largest, power_class,
                          reference_shape, resolve, run_class, unsplit)
from runner.limits import limits
from runner.machine import Device
from runner.registry import VARIANTS, decline, load_all
from runner.spec import parse_spec

KNOWN = {"naive", "xla", "cudnn", "auto"}
CPU = Device(platform="cpu", kind="cpu", compute_capability=None)
load_all()


def cells_of(*experiments: dict, **top) -> list[Cell]:
    spec = parse_spec(spec_data(*experiments, **top), KNOWN)
    cells = expand(spec)
    assert count(spec) == len(cells)  # counted without expanding, repeats and all
    return cells


def test_cartesian_product_in_order_sweep_points_then_variants():
    cells = cells_of({"name": "a", "variants": ["naive", "xla"], "sweep": {"seq_len": [8, 16, 32], "causal": [False, True]}})
    expected = [
        (seq_len, causal, variant)
        for seq_len, causal in itertools.product([8, 16, 32], [False, True])
        for variant in ["naive", "xla"]
    ]
    assert [(c.params.seq_len, c.params.causal, c.variant) for c in cells] == expected


def test_axes_run_in_declaration_order_of_the_model_not_of_the_yaml():
    # Sweep.axes() dumps in field order (batch, seq_len, ...), so the product is the same however the YAML is ordered
    one = cells_of({"name": "a", "variants": ["xla"], "sweep": {"causal": [False, True], "batch": [1, 2]}})
    two = cells_of({"name": "a", "variants": ["xla"], "sweep": {"batch": [1, 2], "causal": [False, True]}})
    assert [c.key for c in one] == [c.key for c in two]
    assert [(c.params.batch, c.params.causal) for c in one] == [(1, False), (1, True), (2, False), (2, True)]


def test_experiments_run_in_spec_order():
    cells = cells_of({"name": "b", "variants": ["xla"]}, {"name": "a", "variants": ["naive"]})
    assert [(c.experiment, c.variant) for c in cells] == [("b", "xla"), ("a", "naive")]


def test_no_sweep_is_one_point():
    cells = cells_of({"name": "a", "variants": ["xla", "naive", "auto"]})
    assert len(cells) == 3
    assert len({c.params for c in cells}) == 1


def test_kv_seq_len_follows_seq_len_when_unset():
    cells = cells_of({"name": "a", "variants": ["xla"], "sweep": {"seq_len": [8, 16]}})
    assert [(c.params.seq_len, c.params.kv_seq_len) for c in cells] == [(8, 8), (16, 16)]


def test_kv_seq_len_stays_when_set():
    cells = cells_of({"name": "a", "variants": ["xla"], "kv_seq_len": 12, "sweep": {"seq_len": [8, 16]}})
    assert [(c.params.seq_len, c.params.kv_seq_len) for c in cells] == [(8, 12), (16, 12)]


def test_kv_heads_defaults_to_heads():
    cells = cells_of({"name": "a", "variants": ["xla"], "sweep": {"heads": [2, 4]}})
    assert [(c.params.heads, c.params.kv_heads) for c in cells] == [(2, 2), (4, 4)]


def test_kv_heads_sweep_gives_mha_gqa_mqa():
    cells = cells_of({"name": "a", "variants": ["xla"], "heads": 8, "sweep": {"kv_heads": [8, 2, 1]}})
    assert [(c.params.heads, c.params.kv_heads) for c in cells] == [(8, 8), (8, 2), (8, 1)]


def test_overrides_replace_defaults_for_their_experiment_only():
    cells = cells_of(
        {"name": "a", "variants": ["xla"], "batch": 3, "dtype": "bfloat16", "causal": True, "pass": "fwd_bwd"},
        {"name": "b", "variants": ["xla"]},
    )
    a, b = (c.params for c in cells)
    assert (a.batch, a.dtype, a.causal, a.pass_) == (3, "bfloat16", True, "fwd_bwd")
    assert (b.batch, b.dtype, b.causal, b.pass_) == (1, "float32", False, "fwd")
    assert (a.seq_len, a.heads, a.head_dim) == (b.seq_len, b.heads, b.head_dim) == (8, 4, 8)


def test_duplicates_are_removed_keeping_first_order():
    cells = cells_of({"name": "a", "variants": ["xla", "naive", "xla"], "sweep": {"seq_len": [8, 16, 8]}})
    assert [(c.params.seq_len, c.variant) for c in cells] == [(8, "xla"), (8, "naive"), (16, "xla"), (16, "naive")]
    assert len({c.key for c in cells}) == len(cells)


def test_kv_seq_len_swept_to_seq_len_is_the_same_cell_as_unset():
    cells = cells_of({"name": "a", "variants": ["xla"], "seq_len": 8, "sweep": {"kv_seq_len": [8, 8]}})
    assert len(cells) == 1


def test_same_cell_from_different_specs_has_the_same_key():
    one = cells_of({"name": "a", "variants": ["xla"]})[0]
    two = cells_of({"name": "a", "variants": ["xla"], "kv_seq_len": 8, "kv_heads": 4, "sweep": {"batch": [1]}})[0]
    assert one == two
    assert one.key == two.key
    assert Cell("a", "xla", params()).key == one.key


def test_key_is_a_fixed_function_of_the_cell():
    # keys are stored in results and compared across runs and versions: pinned, so a change of the hash breaks here
    shape = dict(batch=1, seq_len=8, kv_seq_len=8, heads=4, kv_heads=4, head_dim=8, dtype="float32", causal=False)
    assert Cell("a", "xla", params(**shape)).key == "0f59e7dde579404b"


@pytest.mark.parametrize(
    "change",
    [
        {"batch": 2}, {"seq_len": 16}, {"kv_seq_len": 16}, {"heads": 8}, {"kv_heads": 2},
        {"head_dim": 16}, {"dtype": "bfloat16"}, {"causal": True}, {"pass_": "fwd_bwd"},
    ],
    ids=lambda change: next(iter(change)),
)  # fmt: skip
def test_any_param_change_changes_the_key(change):
    assert Cell("a", "xla", params(**change)).key != Cell("a", "xla", params()).key


def test_experiment_and_variant_are_part_of_the_key():
    base = Cell("a", "xla", params())
    assert Cell("b", "xla", params()).key != base.key
    assert Cell("a", "naive", params()).key != base.key


def test_resolve_fills_only_what_is_unset():
    p = resolve({"batch": 1, "seq_len": 8, "kv_seq_len": 4, "heads": 4, "kv_heads": None, "head_dim": 8,
                 "dtype": "float32", "causal": False, "pass": "fwd", "devices": 1})  # fmt: skip
    assert (p.kv_seq_len, p.kv_heads) == (4, 4)


def test_label_shows_what_differs_from_mha_self_attention():
    assert Cell("a", "xla", params()).label() == "a/xla B1 T8 N4 H8 float32 fwd"
    assert (
        Cell("a", "naive", params(kv_heads=1, kv_seq_len=16, causal=True, pass_="fwd_bwd")).label()
        == "a/naive B1 T8 S16 N4 K1 H8 float32 causal fwd_bwd"
    )


def test_largest_takes_each_swept_axis_at_its_largest():
    spec = parse_spec(spec_data({"name": "a", "variants": ["xla"], "kv_heads": 1,
                                 "sweep": {"seq_len": [64, 8, 32], "dtype": ["float16", "float32", "bfloat16"]}}), KNOWN)
    assert largest(spec, spec.experiments[0]) == params(seq_len=64, kv_seq_len=64, dtype="float32", kv_heads=1)
    assert limits(spec) == []


def test_limits_count_against_the_spec_or_the_given_maximum():
    spec = parse_spec(spec_data({"name": "a", "variants": ["xla", "naive"], "sweep": {"seq_len": [8, 16, 8]}},
                                max_cells=4), KNOWN)
    assert limits(spec) == []  # 4 cells: a repeated value is one cell
    assert limits(spec, max_cells=3) == ["experiments: the sweeps make 4 cells, more than --max-cells (3); sweep fewer "
                                         "values, or raise --max-cells (at most 1,000,000)"]


def test_a_spec_allowed_the_most_cells_is_told_to_split_not_to_raise_its_maximum():
    spec = parse_spec(spec_data({"name": "a", "variants": ["xla"], "sweep": {
        "seq_len": list(range(8, 1009)), "batch": list(range(1, 1001))}}, max_cells=1_000_000), KNOWN)
    assert limits(spec) == ["experiments: the sweeps make 1,001,000 cells, more than max_cells (1,000,000); sweep "
                            "fewer values, or split the spec"]


def test_past_the_limit_only_the_count_is_told():
    """Past the limit, limits walks no sweep point to see whether any runs (a spec may hold a billion): every cell here
    would be declined, and only the count is said."""
    spec = parse_spec(spec_data({"name": "d", "variants": ["xla"], "deterministic": True,
                                 "sweep": {"seq_len": [8, 16, 32]}}), KNOWN)
    assert limits(spec, max_cells=2) == ["experiments: the sweeps make 3 cells, more than --max-cells (2); sweep fewer "
                                         "values, or raise --max-cells (at most 1,000,000)"]


@pytest.mark.parametrize("seq_len, refused", [(11_184_810, False), (11_184_811, True)])
def test_a_cell_whose_q_k_and_v_pass_1_tib_is_refused_and_one_within_it_is_not(seq_len, refused):
    """N64 H128 float32: 3 x 32 KiB a token, so 1 TiB is 11,184,810.7 tokens."""
    spec = parse_spec(spec_data({"name": "big", "variants": ["xla"], "heads": 64, "head_dim": 128,
                                 "seq_len": seq_len}), KNOWN)
    told = [f"experiments[0]: cell big B1 T{seq_len} N64 H128 float32 fwd needs 1.0 TiB for Q, K and V alone; no GPU "
            "holds 1 TiB"]
    assert limits(spec) == (told if refused else [])


def test_input_bytes_are_q_k_and_v():
    assert input_bytes(params(seq_len=8, heads=2, kv_heads=1, head_dim=4, dtype="bfloat16")) == 128 + 64 + 64


def test_limits_take_sweeps_with_null_and_the_fewest_tp_shards():
    spec = parse_spec(spec_data({"name": "a", "variants": ["naive"], "heads": 8,
                                 "sweep": {"window": [None, 4], "softcap": [None, 2.0], "tp": [4, 1, 2]}}), KNOWN)
    assert limits(spec) == []
    assert largest(spec, spec.experiments[0]).heads == 8  # tp 1: all the model's heads on one GPU


def test_a_sweep_that_clashes_at_some_points_runs_the_others_and_declines_those_with_the_reason():
    """One per-cell rule (cells.cell_problem): a serving cell with ALiBi is declined whatever its variant, the
    same sweep's cells without run."""
    spec = parse_spec(spec_data({"name": "a", "variants": ["naive", "xla"], "kv_lengths": "equal",
                                 "sweep": {"bias": ["none", "alibi"]}}), KNOWN)
    assert limits(spec) == []
    alibi = "a serving cell (kv_lengths set) takes no bias (ALiBi's positions are not aligned to each request's end)"
    reasons = {(c.variant, c.params.bias): decline(VARIANTS[c.variant], c.params, CPU) for c in expand(spec)}
    assert reasons == {("naive", "none"): None, ("xla", "none"): None, ("naive", "alibi"): alibi,
                       ("xla", "alibi"): alibi}


@pytest.mark.parametrize("shape, reason", [
    (dict(kv_lengths="uniform", fill=0.5), "a serving cell (kv_lengths set) takes no fill (a padded batch is a second "
     "rule of ragged lengths)"),
    (dict(page_size=16, bias="alibi"), "a serving cell (page_size set) takes no bias (ALiBi's positions are not "
     "aligned to each request's end)"),
    (dict(kv_lengths="equal", page_size=16, devices=2), "a serving cell (kv_lengths set) takes no devices (a KV cache "
     "is not split across devices here)"),
    (dict(page_size=16, pass_="fwd_bwd"), "a paged cell (page_size set) is forward only: its K and V are a page "
     "pool, which no backward here differentiates"),
    (dict(fill=0.5, bias="alibi", devices=2), None),  # not a serving cell: each is fine
    (dict(kv_lengths="equal"), None), (dict(kv_lengths="equal", pass_="fwd_bwd"), None),
])
def test_a_serving_cell_takes_no_fill_bias_or_devices_and_a_paged_one_no_backward(shape, reason):
    assert cell_problem(params(seq_len=8, **shape)) == reason


def test_a_deterministic_cell_with_a_backward_is_no_problem():
    assert cell_problem(params(deterministic=True, pass_="fwd_bwd")) is None


def test_an_experiment_no_cell_of_which_can_run_is_refused_in_one_line():
    """Every point clashes (bias alibi at fill 0.5 and at 1): the spec fails fast, the first point's reason named."""
    spec = parse_spec(spec_data({"name": "a", "variants": ["xla"]},
                                {"name": "b", "variants": ["xla"], "kv_lengths": "uniform", "bias": "alibi",
                                 "sweep": {"fill": [0.5, 1.0]}}), KNOWN)
    assert limits(spec) == ["experiments[1].sweep.fill[0]: no variant can run any cell of b: a serving cell (kv_lengths "
                            "set) takes no fill (a padded batch is a second rule of ragged lengths)"]


def test_every_cell_declined_for_packing_or_determinism_is_refused_too():
    spec = parse_spec(spec_data({"name": "d", "variants": ["xla"], "deterministic": True},
                                {"name": "p", "variants": ["xla"], "documents": 2, "sweep": {"fill": [0.5, 0.8]}}),
                      KNOWN)
    assert limits(spec) == [
        "experiments[0].deterministic: no variant can run any cell of d: deterministic asks for a deterministic "
        "backward: it needs pass fwd_bwd",
        "experiments[1].sweep.fill[0]: no variant can run any cell of p: a packed row has no padding: documents > 1 needs fill 1"]


def test_a_serving_cell_with_more_new_tokens_than_keys_is_refused_where_every_point_has_them():
    """T > S: each request would hold T keys (paging.lengths clips up to T) while the cell is labelled S."""
    reason = ("a serving cell's 8 new tokens (seq_len) are the last of each request's keys: seq_len must not exceed "
              "kv_seq_len (4)")
    assert cell_problem(params(seq_len=8, kv_seq_len=4, kv_lengths="uniform")) == reason
    assert cell_problem(params(seq_len=4, kv_seq_len=4, kv_lengths="uniform")) is None
    assert cell_problem(params(seq_len=8, kv_seq_len=4)) is None  # not serving: cross attention takes T > S
    spec = parse_spec(spec_data({"name": "t-over-s", "variants": ["xla"], "seq_len": 8, "kv_seq_len": 4,
                                 "page_size": 16},
                                {"name": "mixed", "variants": ["xla"], "kv_seq_len": 4, "kv_lengths": "equal",
                                 "sweep": {"seq_len": [1, 8]}}), KNOWN)
    assert limits(spec) == [f"experiments[0].seq_len: no variant can run any cell of t-over-s: {reason}"]


def test_an_experiment_whose_every_variant_declines_an_option_it_sets_is_refused_whatever_the_device():
    load_all()
    spec = parse_spec(spec_data({"name": "tuned", "variants": ["cudnn", "te", "xla"], "tune": True},
                                {"name": "det", "variants": ["tokamax_mosaic", "tokamax_triton"], "pass": "fwd_bwd",
                                 "deterministic": True},
                                {"name": "paged", "variants": ["cudnn", "xla"], "seq_len": 1, "page_size": 16},
                                {"name": "one-takes-it", "variants": ["xla", "tokamax_mosaic"], "tune": True},
                                {"name": "some-points", "variants": ["xla"], "sweep": {"tune": [True, False]}}),
                      set(VARIANTS))
    assert limits(spec) == [
        "experiments[0].tune: no variant can run any cell of tuned: cudnn, te, xla decline a tuned kernel (tune: true, "
        "the library's autotuner): it implements none",
        "experiments[1].deterministic: no variant can run any cell of det: tokamax_mosaic, tokamax_triton decline a "
        "deterministic backward: tokamax.dot_product_attention has no determinism option",
        "experiments[2].page_size: no variant can run any cell of paged: cudnn, xla decline a paged KV cache: a dense kernel "
        "reads one dense K and V, not pages"]


def test_where_the_variants_decline_different_options_the_path_names_each_of_them():
    """xla declines the soft cap, pallas_triton the window: the line names both fields, where it named the first
    variant's alone and dropping softcap, as it read, still left every window cell declined (review s13b, 4)."""
    load_all()
    spec = parse_spec(spec_data({"name": "e", "variants": ["xla", "pallas_triton", "xla"], "softcap": 30.0,
                                 "sweep": {"window": [4, 8]}}), set(VARIANTS))
    assert limits(spec) == [
        "experiments[0].softcap, experiments[0].sweep.window[0]: no variant can run any cell of e: xla declines a logit "
        "soft cap: jax.nn.dot_product_attention takes no logit soft cap; pallas_triton declines a sliding window: it "
        "implements none"]


def test_a_variant_declined_only_for_a_device_or_library_leaves_the_experiment_valid():
    """bfloat16-only cuDNN at float32, a GPU variant on a CPU: those declines depend on where it runs (or are a
    variant's own check): validation refuses only what no device could change."""
    load_all()
    spec = parse_spec(spec_data({"name": "f32", "variants": ["cudnn"], "dtype": "float32"}), KNOWN)
    assert limits(spec) == []


def test_the_count_folds_an_axis_that_changes_nothing_beside_anothers_values_as_the_plan_does():
    """page_order beside page_size [16, null]: the dense cells are one, not one per order (validate said 16 where
    the dry run planned 12); kv_spread beside kv_lengths [equal, uniform]; page_order swept with pages set once."""
    serving = {"variants": ["xla", "naive"], "seq_len": 1, "kv_seq_len": 64}
    assert len(cells_of({"name": "a", **serving, "sweep": {"kv_lengths": ["equal", "long_tail"],
                                                            "page_order": ["contiguous", "shuffled"],
                                                            "page_size": [16, None]}})) == 2 * 2 * 3
    assert len(cells_of({"name": "b", **serving, "sweep": {"kv_spread": [0.2, 0.5, 0.9],
                                                            "kv_lengths": ["equal", "uniform", "bimodal"]}})) == 2 * 7
    assert len(cells_of({"name": "c", **serving, "page_size": 16,
                         "sweep": {"page_order": ["contiguous", "shuffled"]}})) == 2 * 2


def test_a_problem_every_cell_inherits_from_the_defaults_is_named_there_once():
    """documents: 2 at T 3 set in defaults: defaults.documents names it, once for the experiments that inherit it; one
    that sets its own T runs, and one whose own fill makes another problem is named as before."""
    spec = parse_spec(spec_data({"name": "e", "variants": ["xla"]}, {"name": "f", "variants": ["xla"]},
                                {"name": "g", "variants": ["xla"], "seq_len": 8},
                                {"name": "h", "variants": ["xla"], "seq_len": 8, "fill": 0.5},
                                defaults={"documents": 2, "seq_len": 3}), KNOWN)
    assert limits(spec) == [
        "defaults.documents: 2 documents need a row of at least 4 tokens (T=3); no variant can run any cell of e, f, "
        "which inherit it",
        "experiments[3].fill: no variant can run any cell of h: a packed row has no padding: documents > 1 needs fill 1"]
    alone = parse_spec(spec_data({"name": "e", "variants": ["xla"], "seq_len": 1, "kv_seq_len": 64},
                                 defaults={"kv_lengths": "equal", "fill": 0.5}), KNOWN)
    assert limits(alone) == ["defaults.fill: a serving cell (kv_lengths set) takes no fill (a padded batch is a "
                             "second rule of ragged lengths); no variant can run any cell of e, which inherits it"]


@pytest.mark.parametrize("experiment, defaults, path", [
    ({"documents": 300, "seq_len": 512}, {}, "experiments[0].documents"),
    ({"seq_len": 9, "kv_seq_len": 8, "kv_lengths": "uniform", "sweep": {"page_size": [16, None]}}, {},
     "experiments[0].seq_len"),
    ({"documents": 2, "sweep": {"kv_seq_len": [4, 32]}}, {}, "experiments[0].sweep.kv_seq_len[0]"),
    ({"page_size": 16, "pass": "fwd_bwd", "seq_len": 4, "kv_seq_len": 64}, {}, "experiments[0].page_size"),
    ({"variants": ["xla"], "tune": True}, {}, "experiments[0].tune"),
    ({"kv_lengths": "equal", "seq_len": 4, "kv_seq_len": 64}, {"bias": "alibi"}, "defaults.bias"),
])
def test_an_experiment_no_variant_can_run_is_refused_at_the_field_its_reason_comes_from(experiment, defaults, path):
    """The line's path names the field the first cell's reason is about where it is set (the experiment, its
    sweep's first value, or the defaults), as a bad value's path does (experiments[0].sweep.page_size[0]), where it
    named the experiment alone."""
    load_all()
    data = spec_data({"name": "a", "variants": ["naive"], **experiment})
    data["defaults"].update(defaults)
    assert [problem.split(": ")[0] for problem in limits(parse_spec(data, KNOWN))] == [path]


def test_the_every_cell_check_stops_at_the_first_point_that_runs(monkeypatch):
    import runner.limits as limits_module

    seen = []
    monkeypatch.setattr(limits_module, "cell_fault", lambda p: seen.append(p) or None)
    spec = parse_spec(spec_data({"name": "a", "variants": ["xla"], "sweep": {"seq_len": [8, 16, 32, 64]}}), KNOWN)
    assert limits(spec) == [] and len(seen) == 1


# --- families: the cells that share one set of inputs and float32 reference --------------------------------------

PLAIN = dict(seq_len=16, heads=4, kv_heads=2, causal=True, pass_="fwd_bwd")
SERVING = dict(seq_len=2, kv_seq_len=16, heads=4, kv_heads=2, causal=True)


@pytest.mark.parametrize("how, plain", [
    (dict(deterministic=True), {}),
    (dict(tune=True), {}),
    (dict(devices=2), {}),
    (dict(pass_="fwd", devices=4), {}),  # a split forward cell takes its unsplit twin's
    (dict(heads=8, kv_heads=4, tp=2), {}),  # one GPU's heads either way: only ALiBi's slopes are the model's
])  # fmt: skip
def test_what_changes_only_how_the_call_runs_leaves_a_cell_in_its_plain_twins_family(how, plain):
    p, twin = params(**{**PLAIN, **how}), params(**{**PLAIN, **plain})
    assert p != twin and family(p) == family(twin) == twin
    assert family(family(p)) == family(p) and reference_shape(reference_shape(p)) == reference_shape(p)


def test_a_paged_cell_is_a_family_of_its_own_pool():
    """A paged cell's K and V are its page pool, drawn as it is (no dense cache beside it, runner.inputs): another
    family than its dense twin's, and than another page size's or order's; without kv_lengths it reads them as
    equal, the same inputs (tests/test_inputs.py proves it)."""
    paged = params(**SERVING, kv_lengths="equal", page_size=4)
    assert family(params(**SERVING, page_size=4)) == family(paged)
    others = [params(**SERVING, kv_lengths="equal"), params(**SERVING, kv_lengths="equal", page_size=8),
              params(**SERVING, kv_lengths="equal", page_size=4, page_order="shuffled")]
    assert all(family(other) != family(paged) for other in others)


@pytest.mark.parametrize("change", [dict(seq_len=8), dict(kv_seq_len=32), dict(batch=2), dict(heads=8),
                                    dict(kv_heads=1), dict(head_dim=16), dict(v_head_dim=4), dict(dtype="bfloat16"),
                                    dict(causal=False), dict(window=4), dict(fill=0.5), dict(bias="alibi"),
                                    dict(softcap=5.0), dict(documents=2)])
def test_what_changes_the_inputs_or_the_reference_makes_another_family(change):
    assert family(params(**{**PLAIN, **change})) != family(params(**PLAIN))


def test_under_alibi_tp_makes_another_family():
    """ALiBi's slopes are the model's heads' (runner.attention.Logits.of): one GPU's 4 heads of 8 are not 4 of 4."""
    shard = params(**{**PLAIN, "bias": "alibi", "tp": 2, "heads": 8, "kv_heads": 4})
    whole = params(**PLAIN, bias="alibi")
    assert (shard.heads, shard.kv_heads) == (whole.heads, whole.kv_heads) and family(shard) != family(whole)


def test_a_split_cell_is_measured_against_its_twin_on_one_device():
    assert unsplit(params(**PLAIN, devices=2)) == params(**PLAIN)


def test_a_cells_power_class_is_the_decade_of_its_flops_and_it_runs_in_its_backward_twins():
    """B1 T16 N4 H8: 4 x 16 x 16 x 4 x 8 = 32,768 FLOPs forward (10^4.5: decade 4), 3.5 x that with the backward
    (114,688: decade 5)."""
    forward = params(seq_len=16)
    assert (power_class(forward), run_class(forward)) == (4, 5)
