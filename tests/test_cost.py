"""runner/cost.py: a cell's price by its worker, pass and power class, and what a key never measured takes."""

from __future__ import annotations

from runner.cost import H200, medians, price

TABLE = {("jax", "fwd", 6): 0.5, ("jax", "fwd", 10): 1.5, ("jax", "fwd_bwd", 12): 4.0, ("te", "fwd", 8): 9.0}


def test_a_measured_key_costs_its_median():
    assert price(("jax", "fwd", 10), TABLE) == (1.5, True)


def test_a_key_never_measured_takes_the_nearest_class_of_its_worker_and_pass_the_lower_on_a_tie():
    assert price(("jax", "fwd", 9), TABLE) == (1.5, False)
    assert price(("jax", "fwd", 8), TABLE) == (0.5, False)  # 6 and 10 are as near: the lower
    assert price(("jax", "fwd_bwd", 3), TABLE) == (4.0, False)


def test_else_the_median_of_its_workers_keys_else_of_every_key():
    assert price(("te", "fwd_bwd", 12), TABLE) == (9.0, False)
    assert price(("jax", "bwd", 12), TABLE) == (1.5, False)  # 0.5, 1.5, 4.0
    assert price(("cudnn_frontend", "fwd", 12), TABLE) == (2.75, False)  # 0.5, 1.5, 4.0, 9.0


def test_a_table_is_each_keys_median_to_the_millisecond_in_key_order():
    table = medians({("jax", "fwd", 7): [0.3, 0.10004, 0.2], ("jax", "fwd", 6): [1.23456]})
    assert list(table.items()) == [(("jax", "fwd", 6), 1.235), (("jax", "fwd", 7), 0.2)]


def test_the_shipped_h200_table_prices_each_pass_of_workers_that_exist():
    from runner.registry import load_all

    workers = {v.worker for v in load_all().values()}
    assert list(H200) == sorted(H200) and all(seconds > 0 for seconds in H200.values())
    assert {(worker, pass_) for worker, pass_, _ in H200} == {(w, p) for w in ("jax", "transformer_engine")
                                                              for p in ("fwd", "fwd_bwd")}
    assert {"jax", "transformer_engine"} <= workers
