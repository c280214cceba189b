"""Shards: parsing i/n, the Indexed Job's environment, and a deterministic, cost-balanced split."""

from __future__ import annotations

import pytest

from runner.cells import expand, run_class
from helpers import REPO, script
from runner.shard import Shard, assign, cell_ms, families, parse_shard, select, shard_from_env
from runner.spec import parse_spec

SPEC = {
    "name": "mixed",
    "defaults": {"batch": 1, "heads": 2, "head_dim": 8, "dtype": "float32"},
    "experiments": [
        {"name": "sizes", "variants": ["naive", "xla"],
         "sweep": {"seq_len": [16, 64, 256, 1024], "causal": [False, True]}},
        {"name": "batches", "variants": ["xla"], "seq_len": 128, "sweep": {"batch": [1, 2, 4, 8, 16]}},
    ],
}


@pytest.fixture
def cells():
    from runner.registry import load_all

    load_all()  # a cell's price is its variant's worker's
    return expand(parse_spec(SPEC, {"naive", "xla"}))


@pytest.mark.parametrize("text, shard", [("0/3", Shard(0, 3)), ("2/3", Shard(2, 3)), ("0/1", Shard(0, 1))])
def test_parse_shard(text, shard):
    assert parse_shard(text) == shard
    assert str(shard) == text


@pytest.mark.parametrize("text", ["x", "3/2", "3/3", "-1/3", "1/0", "1/", "/3", "1/3/5", "a/b"])
def test_parse_shard_refuses(text):
    with pytest.raises(ValueError, match="shard"):
        parse_shard(text)


@pytest.mark.parametrize("text", ["0/101", "0/1000000000000", "0/1" + "0" * 5000])
def test_parse_shard_refuses_more_than_most(text):
    with pytest.raises(ValueError, match="at most 100 shards"):
        parse_shard(text, most=100)


def test_parse_shard_takes_leading_zeros_and_refuses_a_long_index():
    assert parse_shard("007/10", most=100) == Shard(7, 10)
    with pytest.raises(ValueError, match="need 0 <= i < n"):
        parse_shard("1" + "0" * 5000 + "/10")


def test_shard_from_env():
    assert shard_from_env({"JOB_COMPLETION_INDEX": "1", "JOB_COMPLETIONS": "4"}) == Shard(1, 4)
    with pytest.raises(ValueError, match="JOB_COMPLETION_INDEX is set and JOB_COMPLETIONS is not"):
        shard_from_env({"JOB_COMPLETION_INDEX": "1"})  # an Indexed Job always sets both: half a pair is a mistake
    assert shard_from_env({}) is None
    with pytest.raises(ValueError):
        shard_from_env({"JOB_COMPLETION_INDEX": "4", "JOB_COMPLETIONS": "4"})
    with pytest.raises(ValueError, match="at most 3 shards"):
        shard_from_env({"JOB_COMPLETION_INDEX": "0", "JOB_COMPLETIONS": "4"}, most=3)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 40])
def test_shards_partition_the_cells_in_run_order(cells, count):
    parts = [select(cells, Shard(i, count)) for i in range(count)]
    keys = [c.key for part in parts for c in part]
    assert sorted(keys) == sorted(c.key for c in cells) and len(keys) == len(set(keys))
    for part in parts:
        assert part == [c for c in cells if c in part]


def test_shards_take_whole_families_balanced_by_what_their_cells_cost(cells):
    """A family (the cells of one set of inputs and reference) lies on one shard; the shards' loads differ by at most
    the costliest family, as the greedy rule promises (the least loaded shard took the last family of the most)."""
    owner = assign(cells, 3)
    groups = families(cells)
    assert len(groups) < len(cells) and all(len({owner[c.key] for c in group}) == 1 for group in groups)
    loads = [sum(cell_ms(c) for c in cells if owner[c.key] == i) for i in range(3)]
    assert max(loads) - min(loads) <= max(sum(cell_ms(c) for c in group) for group in groups)


def test_a_cell_costs_its_power_classs_measured_seconds_and_a_declined_one_nothing(cells):
    """The price is the cost table's, by worker, pass and power class: a table that makes the T = 16 shapes' class
    the dearest puts each of its two families on a shard of its own at 4 shards, though their FLOPs are the least;
    a cell its variant declines anywhere (cuDNN in float32) costs nothing."""
    from runner.cells import Cell

    light = {run_class(c.params) for c in cells if c.params.seq_len == 16}
    assert len(light) == 1 and all(run_class(c.params) not in light for c in cells if c.params.seq_len != 16)
    table = {("jax", "fwd", klass): 1.0 for klass in range(4, 10)} | {("jax", "fwd", light.pop()): 100.0}
    owner = assign(cells, 4, table)
    for causal in (False, True):
        mine = {owner[c.key] for c in cells if c.params.seq_len == 16 and c.params.causal == causal}
        assert len(mine) == 1 and all(owner[c.key] not in mine for c in cells if c.params.seq_len != 16)
    assert [cell_ms(c, table) for c in cells[:2]] == [1000 * table[("jax", "fwd", run_class(cells[0].params))]] * 2
    assert cell_ms(Cell("sizes", "cudnn", cells[0].params), table) == 0


def test_every_shard_takes_a_family_even_one_of_no_cost(cells, monkeypatch):
    """Ties go to the shard holding fewest families, so n shards of n families are none of them empty."""
    import runner.shard as shard

    monkeypatch.setattr(shard, "cell_ms", lambda cell, table: 0)
    count = len(families(cells))
    assert set(assign(cells, count).values()) == set(range(count))


@pytest.mark.parametrize("count", [2, 4])
def test_hopper_long_keeps_each_shapes_cells_on_one_shard_as_balanced_as_whole_families_allow(count):
    """hopper-long: 24 cells of 4 shapes (T 4k-32k, fwd and fwd_bwd, 3 variants). Cell by cell, each shape's cells
    were spread over the shards (each computing the shape's reference); by family each shape is on one shard. Priced
    by FLOPs, the T = 32k family (64/85 of them) made the largest/smallest ratio 64 at 4 shards; priced by what its
    cells cost on the H200, it is under 2 (docs/benchmarks.md)."""
    from runner.registry import load_all
    from runner.spec import load_spec

    cells = expand(load_spec(REPO / "specs/hopper-long.yaml", set(load_all())))
    owner, groups = assign(cells, count), families(cells)
    assert len(cells) == 24 and len(groups) == 4
    assert all(len({owner[c.key] for c in group}) == 1 for group in groups)
    loads = [sum(cell_ms(c) for c in cells if owner[c.key] == i) for i in range(count)]
    costs = [sum(cell_ms(c) for c in group) for group in groups]
    assert sum(loads) == sum(costs) and max(loads) / min(loads) < 2


def test_assignment_does_not_depend_on_cell_order(cells):
    assert assign(cells, 3) == assign(list(reversed(cells)), 3)


def test_a_run_takes_as_many_shards_as_an_indexed_job_holds():
    """k8s/render.py refuses more shards than Kubernetes' bound on an Indexed Job (JOB_MAX), the runner more than
    MAX_SHARDS: one number spelt in both, so they must agree (render.py could read the runner's, as for families)."""
    from runner.shard import MAX_SHARDS

    assert script("k8s/render.py").JOB_MAX == MAX_SHARDS
