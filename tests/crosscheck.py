"""The runner's number for one cell beside tests/direct_protocol.py's for the same call: one evidence row.

Shared by tests/test_gpu.py and scripts/steady_crosscheck.py (which writes docs/evidence/steady-crosscheck-*.json).
The call is built as the runner builds it (the thing under test); only the runner's timing is compared. A cell the
run's plan skips on this device (plan.skipped_here: the variant's rules, its compute capability's, the memory rule) is
declined as the run declines it, before anything is compiled for it.
"""

from __future__ import annotations

import jax

import direct_protocol
from runner import gpu, metrics, power
from runner.cells import Cell, resolve
from runner.machine import Device, current_device
from runner.measure import Measurer
from runner.record import CellRecord
from runner.registry import VARIANTS, Staged, load_all
from runner.plan import skipped_here
from runner.spec import parse_spec
from runner.timers import DeviceTimer

try:
    from runner.inputs import make_inputs
    from runner.programs import with_grads
    from runner.sampling import PowerEnv
except ImportError:  # the runner before its steps were split out (to show its protocol fail): one module
    from runner.measure import PowerEnv, make_inputs, with_grads

load_all()
ANCHOR = dict(batch=1, seq_len=8192, heads=64, kv_heads=8, head_dim=128, dtype="bfloat16", causal=True)


def idle() -> power.Idle | None:
    readings = gpu.readings()
    return power.Idle(readings.temperature_c, readings.power_w) if readings else None


class Declined(Exception):
    """The run's plan skips this cell on this device (plan.skipped_here): nothing is compiled for it."""


def measurer(timers, idle_state: power.Idle | None = None, device: Device | None = None, **timing) -> Measurer:
    settings = dict(warmup=2, min_samples=10, max_samples=50, target_noise=0.02, budget_s=2.0) | timing
    spec = parse_spec({"name": "gpu-test", "timing": settings, "experiments": [{"name": "x", "variants": ["xla"]}]},
                      set(VARIANTS))
    source, reason = power.open_source(0, True)
    power_env = PowerEnv(source, reason, idle_state)
    return Measurer(spec, timers, "gpu-test", device or current_device(), power_env=power_env)


def measured(runner: Measurer, cell: Cell) -> CellRecord:
    """The runner's record of a cell the run's plan sends to a worker on the runner's device; Declined for one it
    skips there."""
    if reason := skipped_here(VARIANTS[cell.variant], cell.params, runner.device):
        raise Declined(f"{cell.label()}: {reason}")
    return runner.measure(cell)


def params(**shape):
    return resolve({"kv_seq_len": None, "kv_heads": None, "pass": "fwd", **shape})


def timed_call(variant: str, p):
    """The variant's timed call and its arguments, as the runner makes them."""
    inputs = make_inputs(p, 0)
    built = VARIANTS[variant].build(p)
    if isinstance(built, Staged):
        args, fn = jax.jit(built.prepare)(*inputs[:3]), built.attend
    else:
        args, fn = inputs[:3], built
    if p.pass_ == "fwd_bwd":
        fn, args = with_grads(fn), (*args, inputs[3])
    return jax.jit(fn), args


def crosscheck(variant: str, policy: str, idle_state: power.Idle | None, carried: bool = False,
               device: Device | None = None, **shape) -> dict:
    """The runner's TFLOP/s for one cell and the direct protocol's for the same call, on `device` (this machine's
    unless given); Declined where the run's plan skips the cell there. `carried`: the runner measures the same cell
    just before, so that this one's stream continues that load (runner.sampling.Carry), as in a run."""
    p = params(**{**ANCHOR, **shape})
    runner = measurer([DeviceTimer()], idle_state, device, power=policy, **({"carry_cap": True} if carried else {}))
    if carried:
        measured(runner, Cell("carrier", variant, p))
    record = measured(runner, Cell("anchor", variant, p))
    assert record.status == "ok", record.reason
    fn, args = timed_call(variant, p)
    direct = metrics.flops(p) / direct_protocol.call_seconds(fn, args, policy) / 1e12
    telemetry = record.telemetry
    return {"variant": variant, "seq_len": p.seq_len, "pass": p.pass_, "policy": policy,
            "runner_tflops": record.tflops, "direct_tflops": direct, "direct_protocol": direct_protocol.PROTOCOL[policy],
            "ratio": record.tflops / direct, "power": record.power.model_dump() if record.power else None,
            "sm_clock_median_mhz": telemetry.sm_clock_mhz.median if telemetry else None,
            "throttle": telemetry.throttle if telemetry else None}
