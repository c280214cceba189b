"""Where the runner's time goes on a GPU (a probe for docs/benchmarks.md; writes JSON to argv[1]).

1. energy counter granularity; 2. the float32 reference at long T (as shipped, autotuned, TF32x3);
3. parallel against serial compiles of lab5's timed programs (and the times of what they produced);
4. the power state under 15 s of back-to-back cuDNN calls (NVML every 10 ms).
"""
import json
import sys
import time

T0 = time.perf_counter()
import jax  # noqa: E402

T_IMPORT = time.perf_counter() - T0
jax.devices()
T_BACKEND = time.perf_counter() - T0

import jax.numpy as jnp  # noqa: E402

from runner import measure, power  # noqa: E402
from runner.cells import expand  # noqa: E402
from runner.compiler import UNTIMED  # noqa: E402
from runner.registry import load_all  # noqa: E402
from runner.spec import load_spec  # noqa: E402
from runner.timers import DeviceTimer  # noqa: E402

out = {"import_jax_s": T_IMPORT, "backend_s": T_BACKEND}
VARIANTS = load_all()
src = power.NvmlSource(0)


def log(*a):
    print(f"[{time.perf_counter() - T0:7.1f}]", *a, flush=True)


# 1. energy counter granularity under load
x = jnp.ones((8192, 8192), jnp.bfloat16)
mm = jax.jit(lambda a: a @ a)
jax.block_until_ready(mm(x))
reads = []
end = time.monotonic() + 0.6
while time.monotonic() < end:
    for _ in range(20):
        mm(x)
    r = src.read()
    reads.append((r.t, r.energy_mj, r.power_w, r.sm_mhz))
jax.block_until_ready(mm(x))
changes = [b[0] - a[0] for a, b in zip(reads, reads[1:]) if b[1] != a[1]]
out["energy"] = {"reads": len(reads), "changes": len(changes),
                 "median_change_interval_s": sorted(changes)[len(changes) // 2] if changes else None}
log("energy", out["energy"])

# 2. the reference at long T
spec = load_spec("specs/hopper-long.yaml", set(VARIANTS))
cells = {(c.params.seq_len, c.params.pass_): c.params for c in expand(spec)}
ref = {}


def time_reference(label, p, args):
    t = time.perf_counter()
    r = jax.block_until_ready(measure.reference(p, args))
    first = time.perf_counter() - t
    t = time.perf_counter()
    r = jax.block_until_ready(measure.reference(p, args))
    second = time.perf_counter() - t
    log(label, p.seq_len, p.pass_, f"first {first:.2f} s, again {second:.2f} s")
    return r, first, second


import runner.compiler as comp  # noqa: E402
import runner.attention as att  # noqa: E402

orig_options = dict(comp.UNTIMED_OPTIONS)

orig_ref = att.reference_attention
SECTIONS = sys.argv[2] if len(sys.argv) > 2 else "1234"
for T, pas in ([(16384, "fwd"), (16384, "fwd_bwd"), (32768, "fwd")] if "2" in SECTIONS else []):
    p = cells[(T, pas)]
    args = jax.block_until_ready(measure.make_inputs(p, 0))
    rows = {}
    base, f1, s1 = time_reference("shipped", p, args)
    rows["shipped"] = (f1, s1)
    comp.UNTIMED_OPTIONS = {"xla_gpu_autotune_level": 0, "xla_gpu_enable_triton_gemm": False}
    comp.UNTIMED._compiled.clear()
    auto, f2, s2 = time_reference("no-triton", p, args)
    rows["autotuned"] = (f2, s2)
    comp.UNTIMED_OPTIONS = orig_options
    comp.UNTIMED._compiled.clear()

    def x3(q, k, v, causal, q_offset=0):
        import math
        b, t, n, h = q.shape
        kh = k.shape[2]
        q = q.astype(jnp.float32).reshape(b, t, kh, n // kh, h)
        k, v = k.astype(jnp.float32), v.astype(jnp.float32)
        alg = jax.lax.DotAlgorithmPreset.TF32_TF32_F32_X3
        s = jnp.einsum("btkgh,bskh->bkgts", q, k, precision=alg) / math.sqrt(h)
        if causal:
            s = jnp.where(att.scores_mask(t, k.shape[1], q_offset), s, -jnp.inf)
        w = jax.nn.softmax(s, axis=-1)
        return jnp.einsum("bkgts,bskh->btkgh", w, v, precision=alg).reshape(b, t, n, h)

    measure.reference_attention = x3
    try:
        tf, f3, s3 = time_reference("tf32x3", p, args)
        rows["tf32x3"] = (f3, s3)
        rows["tf32x3_relerr"] = [float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b)) for a, b in zip(tf, base)]
    except Exception as e:
        rows["tf32x3_error"] = str(e)[:300]
    measure.reference_attention = orig_ref
    comp.UNTIMED._compiled.clear()
    rows["autotuned_relerr"] = [float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b)) for a, b in zip(auto, base)]
    out[f"reference_{T}_{pas}"] = rows
    log(rows)
    del args, base, auto

# 3. parallel compile of lab5's timed programs
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

lab = load_spec("specs/lab5.yaml", set(VARIANTS))
progs = []
for c in expand(lab):
    if c.variant in ("xla", "naive", "cudnn", "auto") and (c.variant, c.params) not in [(v, q) for v, q, _ in progs]:
        progs.append((c.variant, c.params, None))
progs = progs[:40]


def lowered_all():
    res = []
    for name, p, _ in progs:
        fn = VARIANTS[name].build(p)
        res.append(jax.jit(fn).lower(*measure.input_avals(p)))
    return res


ok = []
for prog in progs:
    try:
        jax.jit(VARIANTS[prog[0]].build(prog[1])).lower(*measure.input_avals(prog[1]))
        ok.append(prog)
    except Exception:
        pass
progs = ok[:32]


def timed(executables):
    res = []
    for (name, p, _), ex in zip(progs, executables):
        args = jax.block_until_ready(measure.make_inputs(p, 0))
        res.append(DeviceTimer().median(ex, args, 30))
    return res


t = time.perf_counter()
low = lowered_all()
t_lower = time.perf_counter() - t
t = time.perf_counter()
serial = [lo.compile() for lo in low]
t_serial = time.perf_counter() - t
low = lowered_all()
t = time.perf_counter()
with ThreadPoolExecutor(8) as pool:
    parallel = list(pool.map(lambda lo: lo.compile(), low))
t_parallel = time.perf_counter() - t
ts, tp = timed(serial), timed(parallel)
out["parallel_compile"] = {"programs": len(progs), "lower_s": t_lower, "serial_s": t_serial,
                           "parallel8_s": t_parallel,
                           "device_ms": [[f"{n} {p.label()}", a * 1e3, b * 1e3] for (n, p, _), a, b in zip(progs, ts, tp)]}
log("compile serial", t_serial, "parallel", t_parallel, "lower", t_lower)

# 4. power under back-to-back cuDNN calls
for T, seconds in [(8192, 12), (16384, 8)]:
    p = cells[(T, "fwd")]
    fn = jax.jit(VARIANTS["cudnn"].build(p))
    args = jax.block_until_ready(measure.make_inputs(p, 0))
    jax.block_until_ready(fn(*args))
    time.sleep(3)
    trace = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(5):
            fn(*args)
        jax.block_until_ready(fn(*args))
        r = src.read()
        trace.append([round(r.t, 4), r.sm_mhz, r.power_w, r.energy_mj, r.temperature_c, r.throttle])
    out[f"trace_cudnn_{T}"] = trace
    log("trace", T, len(trace))

json.dump(out, open(sys.argv[1], "w"), indent=1)
log("done")
