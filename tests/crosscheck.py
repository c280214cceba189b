"""The runner's number for one cell beside tests/direct_protocol.py's for the same call: one evidence row.

Shared by tests/test_gpu.py and scripts/steady_crosscheck.py (which writes docs/evidence/steady-crosscheck-*.json).
The call is built as the runner builds it (the thing under test); only the runner's timing is compared.
"""

from __future__ import annotations

import jax

import direct_protocol
from runner import gpu, metrics, power
from runner.cells import Cell, resolve
from runner.machine import current_device
from runner.measure import Measurer
from runner.registry import VARIANTS, Staged, load_all
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


def measurer(timers, idle_state: power.Idle | None = None, **timing) -> Measurer:
    settings = dict(warmup=2, min_samples=10, max_samples=50, target_noise=0.02, budget_s=2.0) | timing
    spec = parse_spec({"name": "gpu-test", "timing": settings, "experiments": [{"name": "x", "variants": ["xla"]}]},
                      set(VARIANTS))
    source, reason = power.open_source(0, True)
    return Measurer(spec, timers, "gpu-test", current_device(), power_env=PowerEnv(source, reason, idle_state))


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


def crosscheck(variant: str, policy: str, idle_state: power.Idle | None, carried: bool = False, **shape) -> dict:
    """The runner's TFLOP/s for one cell and the direct protocol's for the same call. `carried`: the runner measures
    the same cell just before, so that this one's stream continues that load (runner.sampling.Carry), as in a run."""
    p = params(**{**ANCHOR, **shape})
    runner = measurer([DeviceTimer()], idle_state, power=policy, **({"carry_cap": True} if carried else {}))
    if carried:
        runner.measure(Cell("carrier", variant, p))
    record = runner.measure(Cell("anchor", variant, p))
    assert record.status == "ok", record.reason
    fn, args = timed_call(variant, p)
    direct = metrics.flops(p) / direct_protocol.call_seconds(fn, args, policy) / 1e12
    telemetry = record.telemetry
    return {"variant": variant, "seq_len": p.seq_len, "pass": p.pass_, "policy": policy,
            "runner_tflops": record.tflops, "direct_tflops": direct, "direct_protocol": direct_protocol.PROTOCOL[policy],
            "ratio": record.tflops / direct, "power": record.power.model_dump() if record.power else None,
            "sm_clock_median_mhz": telemetry.sm_clock_mhz.median if telemetry else None,
            "throttle": telemetry.throttle if telemetry else None}
