"""Shards: parsing i/n, the Indexed Job's environment, and a deterministic, cost-balanced split."""

from __future__ import annotations

import pytest

from runner.cells import expand
from runner.metrics import flops
from runner.shard import Shard, assign, parse_shard, select, shard_from_env
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
    assert shard_from_env({"JOB_COMPLETION_INDEX": "1"}) is None  # an Indexed Job always sets both
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


def test_shards_balance_flops(cells):
    owner = assign(cells, 3)
    loads = [sum(flops(c.params) for c in cells if owner[c.key] == i) for i in range(3)]
    assert max(loads) - min(loads) <= max(flops(c.params) for c in cells)


def test_assignment_does_not_depend_on_cell_order(cells):
    assert assign(cells, 3) == assign(list(reversed(cells)), 3)
