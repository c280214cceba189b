"""runner/variants/context_parallel.py and the `devices` axis: the sequence split across JAX's fake CPU devices.

JAX fixes its device count when its backend starts, so every multi-device check runs `attnbench` in a subprocess
(XLA_FLAGS set there, never in this process): the other tests keep their one CPU device.
"""

from __future__ import annotations

import dataclasses

import pytest

from helpers import H200_MEMORY, REPO, attnbench, in_process, params, spec_data, write_spec
from runner.cells import most_devices
from runner.machine import Device
from runner.registry import VARIANTS, decline, load_all
from runner.spec import load_spec
from runner.store import read_run

load_all()
CP_VARIANTS = ("ring", "xla_cp", "te_cp_allgather", "te_cp_ring")
PORTABLE = ("ring", "xla_cp")  # the TE ones need an NVIDIA GPU
CPU8 = Device("cpu", "cpu", None, None, 8)
H200X4 = Device("gpu", "NVIDIA H200", 9.0, H200_MEMORY, 4)
FIXTURE = REPO / "tests" / "fixtures" / "context-parallel" / "context-parallel-cpu-20261203-093600"


def _run(tmp_path, spec: str, *args, **env):
    result = attnbench("run", spec, "--out", tmp_path, "--compile-cache", "off", *args, timeout=900, **env)
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    run = read_run(run_dir)
    assert run.problems == []
    return run


@pytest.mark.slow
def test_the_cpu_spec_on_8_fake_devices_is_ok_and_within_tolerance_at_every_split(tmp_path):
    """No XLA_FLAGS from outside: the worker asks for the spec's largest split (8) itself, before JAX starts."""
    run = _run(tmp_path, "specs/context-parallel-cpu.yaml", XLA_FLAGS="")
    assert run.manifest.machine.device_count == 8
    cells = {(c.experiment, c.variant, c.params.devices): c for c in run.cells}
    assert len(cells) == len(run.cells) == 2 * 4 * len(CP_VARIANTS)
    for (experiment, variant, devices), cell in cells.items():
        if variant not in PORTABLE:
            assert cell.status == "skipped" and "needs an NVIDIA GPU" in cell.reason
            continue
        assert cell.status == "ok", (experiment, variant, devices, cell.reason)
        c = cell.correctness
        assert c.rel_err <= c.tolerance and c.causal_first_changed and c.causal_last_unchanged
        if experiment == "fwd-bwd":
            assert set(c.grad_rel_err) == {"dq", "dk", "dv"}
            assert all(err <= c.grad_tolerance for err in c.grad_rel_err.values())
    ok = {(v, d) for (_, v, d), c in cells.items() if c.status == "ok"}
    assert ok == {(v, d) for v in PORTABLE for d in (1, 2, 4, 8)}


def test_a_worker_asks_for_the_largest_split_of_any_experiment(tmp_path):
    """What the worker gives its CPU (the spec test above runs it): the largest `devices`, swept or not."""
    spec = load_spec(write_spec(tmp_path / "split.yaml", spec_data(
        {"name": "one", "variants": ["xla"]},
        {"name": "ring", "variants": ["ring"], "causal": True, "sweep": {"devices": [2, 4]}},
        {"name": "two", "variants": ["ring"], "devices": 2})), set(VARIANTS))
    assert most_devices(spec) == 4


def test_variants_that_do_not_split_decline_a_split_cell():
    assert decline(VARIANTS["xla"], params(devices=2), CPU8) == (
        "xla runs on one device, not 2 (it does not split the sequence)")
    assert decline(VARIANTS["xla"], params(), CPU8) is None


def test_the_split_variants_decline_the_model_options():
    assert decline(VARIANTS["ring"], params(devices=2, window=16), CPU8) == (
        "ring declines a sliding window: it implements none")
    assert decline(VARIANTS["xla_cp"], params(devices=2, softcap=30.0), CPU8).startswith("xla_cp declines a logit")
    assert decline(VARIANTS["ring"], params(devices=2, heads=8, tp=2), CPU8) is None


def test_a_split_wider_than_the_worker_sees_is_declined():
    assert decline(VARIANTS["ring"], params(devices=8), H200X4) == (
        "the cell needs 8 devices; this worker sees 4 gpu devices")
    assert decline(VARIANTS["ring"], params(devices=4), H200X4) is None
    one = dataclasses.replace(CPU8, count=1)
    assert "this worker sees 1 cpu device" in decline(VARIANTS["ring"], params(devices=2), one)


def test_te_context_parallel_rules():
    te = VARIANTS["te_cp_ring"]  # its package is not installed here, so its own rules are asked directly
    bf16 = dict(dtype="bfloat16", head_dim=64, seq_len=128)
    assert te.check(params(devices=4, causal=True, **bf16)) is None
    assert "seq_len a multiple of 2 x devices (8), not 100" in te.check(params(devices=4, causal=True, **{
        **bf16, "seq_len": 100}))
    assert "self-attention" in te.check(params(devices=2, kv_seq_len=64, **bf16))
    assert "needs an NVIDIA GPU" in decline(te, params(devices=2, **bf16), CPU8)


@pytest.mark.parametrize("devices, line", [
    (3, "experiments[0].devices: must be 1, 2, 4 or 8 (got 3)"),
    (16, "experiments[0].devices: must be <= 8"),
    (True, "experiments[0].devices: must be an integer (got true)"),
    (8, "experiments[0].devices: seq_len (4) must be a multiple of devices (8), each holding an equal slice of the "
        "sequence"),
])
def test_a_bad_split_is_one_line_naming_where(capsys, tmp_path, devices, line):
    spec = write_spec(tmp_path / "bad.yaml", spec_data({"name": "a", "variants": ["ring"], "devices": devices,
                                                          "seq_len": 4}))
    outcome = in_process(capsys, "validate", spec)
    assert outcome.code != 0 and line in outcome.errors[0] and "Traceback" not in outcome.err


def test_a_sweep_of_devices_names_the_value_that_does_not_divide(capsys, tmp_path):
    spec = write_spec(tmp_path / "bad.yaml", spec_data(
        {"name": "a", "variants": ["ring"], "seq_len": 12, "sweep": {"devices": [1, 2, 4, 8]}}))
    outcome = in_process(capsys, "validate", spec)
    assert outcome.code != 0
    assert [line.split(":")[2].strip() for line in outcome.errors] == ["experiments[0].sweep.devices[3]"]
    assert all(line.split(":")[1].strip() == str(spec) for line in outcome.errors)  # the file, then the YAML path


@pytest.mark.parametrize("pass_", ["fwd", "fwd_bwd"])
def test_the_ring_merges_key_chunks_like_one_block(pass_):
    """On this process's one device: chunks of 4 keys give the float32 reference, output and gradients."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, PartitionSpec

    from runner.attention import reference_attention
    from runner.variants.context_parallel import AXIS, ring_attention

    p = params(seq_len=16, kv_heads=2, causal=True)
    q, k, v = (jax.random.normal(jax.random.PRNGKey(i), shape) for i, shape in enumerate(
        [(1, 16, 4, 8), (1, 16, 2, 8), (1, 16, 2, 8)]))
    spec = PartitionSpec(None, AXIS, None, None)
    ring = jax.shard_map(lambda q, k, v: ring_attention(q, k, v, causal=True, devices=1, chunk=4),
                         mesh=Mesh(jax.devices()[:1], (AXIS,)), in_specs=(spec,) * 3, out_specs=spec)
    reference = lambda q, k, v: reference_attention(q, k, v, causal=p.causal)  # noqa: E731
    if pass_ == "fwd":
        assert jnp.allclose(ring(q, k, v), reference(q, k, v), atol=1e-5)
    else:
        loss = lambda attend: lambda *qkv: jnp.sum(jnp.sin(attend(*qkv)))  # noqa: E731
        for got, want in zip(jax.grad(loss(ring), (0, 1, 2))(q, k, v), jax.grad(loss(reference), (0, 1, 2))(q, k, v)):
            assert jnp.allclose(got, want, atol=1e-5)


def test_a_dry_run_sees_the_devices_a_worker_would():
    result = attnbench("run", "specs/context-parallel-cpu.yaml", "--dry-run", "--variants", "ring", XLA_FLAGS="")
    assert result.returncode == 0, result.stderr
    assert "fwd/ring B1 T256 N4 K2 H16 float32 causal fwd D8: run" in result.stdout.splitlines()


def test_show_prints_each_splits_efficiency_against_its_one_device_cell():
    from runner.report import scaling_rows

    run = read_run(FIXTURE)
    rows = scaling_rows(run.cells)
    wall = {(c.experiment, c.variant, c.params.devices): c.median_s for c in run.cells if c.status == "ok"}
    assert len(rows) == len(wall) == 16  # ring and xla_cp, fwd and fwd_bwd, 1-8 devices; TE declined on a CPU
    for row in rows:
        d = int(row["D"])
        expected = wall[row["experiment"], row["variant"], 1] / (d * wall[row["experiment"], row["variant"], d])
        assert float(row["efficiency"]) == pytest.approx(expected, rel=5e-3)  # printed to 3 digits
        assert (row["comm ms"] != "-") == (row["variant"] == "ring" and d > 1)  # the ring's twin, the only split
    shown = attnbench("show", FIXTURE.name, "--out", FIXTURE.parent)
    assert shown.returncode == 0 and "scaling: t(1) / (D x t(D))" in shown.stdout
