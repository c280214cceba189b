"""Where the runner's time goes on a GPU (a probe for docs/benchmarks.md; writes JSON to argv[1]).

1. energy counter granularity; 2. the float32 reference at long T (untimed compile options of 2026-12-02 and of
now, full autotuning, TF32x3); 3. serial then parallel compiles of lab5's timed programs and the device times of
what they produced (the parallel set compiles second and reuses XLA's in-process autotuning results, so its
compile time is no comparison); 4. the power state under 15 s of back-to-back cuDNN calls (NVML every 10 ms).

    python scripts/probe_speed.py OUT.json [SECTIONS]     # SECTIONS: digits of the parts to run, default 1234
"""
import json
import sys
import time

T0 = time.perf_counter()
import jax  # noqa: E402

T_IMPORT = time.perf_counter() - T0
jax.devices()
T_BACKEND = time.perf_counter() - T0

import functools  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

import jax.numpy as jnp  # noqa: E402

import runner.compiler as comp  # noqa: E402
from runner import inputs, power, programs  # noqa: E402
from runner.attention import reference_attention  # noqa: E402
from runner.cells import expand  # noqa: E402
from runner.registry import load_all  # noqa: E402
from runner.spec import load_spec  # noqa: E402
from runner.timers import DeviceTimer  # noqa: E402

VARIANTS = load_all()
# untimed compile options: 2026-12-02's runner, this one's, and XLA's full autotuning
OPTIONS = {"autotune_off": {"xla_gpu_autotune_level": 0},
           "autotune_off_cublas": {"xla_gpu_autotune_level": 0, "xla_gpu_enable_triton_gemm": False},
           "autotuned": {}}


def log(*a):
    print(f"[{time.perf_counter() - T0:7.1f}]", *a, flush=True)


def hopper_shapes() -> dict:
    spec = load_spec("specs/hopper-long.yaml", set(VARIANTS))
    return {(c.params.seq_len, c.params.pass_): c.params for c in expand(spec)}


def energy_steps(src) -> dict:
    """1. How often the energy counter moves under load."""
    x = jnp.ones((8192, 8192), jnp.bfloat16)
    mm = jax.jit(lambda a: a @ a)
    jax.block_until_ready(mm(x))
    reads = []
    end = time.monotonic() + 0.6
    while time.monotonic() < end:
        for _ in range(20):
            mm(x)
        r = src.read()
        reads.append((r.t, r.energy_mj))
    jax.block_until_ready(mm(x))
    changes = sorted(b[0] - a[0] for a, b in zip(reads, reads[1:]) if b[1] != a[1])
    return {"reads": len(reads), "changes": len(changes),
            "median_change_interval_s": changes[len(changes) // 2] if changes else None}


def time_reference(label, p, args):
    t = time.perf_counter()
    jax.block_until_ready(inputs.reference(p, args))
    first = time.perf_counter() - t
    t = time.perf_counter()
    r = jax.block_until_ready(inputs.reference(p, args))
    again = time.perf_counter() - t
    log(label, p.seq_len, p.pass_, f"first {first:.2f} s, again {again:.2f} s")
    return r, first, again


def references(shapes: dict) -> dict:
    """2. The float32 reference at long T, compiled each way, first run (compile included) and again."""
    found = {}
    shipped = dict(comp.UNTIMED_OPTIONS)
    for T, pas in [(16384, "fwd"), (16384, "fwd_bwd"), (32768, "fwd")]:
        p = shapes[(T, pas)]
        args = jax.block_until_ready(inputs.make_inputs(p, 0))
        rows, results = {}, {}
        for name, options in OPTIONS.items():
            comp.UNTIMED_OPTIONS = options
            comp.UNTIMED._compiled.clear()
            results[name], first, again = time_reference(name, p, args)
            rows[name] = (first, again)
        comp.UNTIMED_OPTIONS = shipped
        comp.UNTIMED._compiled.clear()
        inputs.reference_attention = functools.partial(reference_attention,
                                                        precision=jax.lax.DotAlgorithmPreset.TF32_TF32_F32_X3)
        try:
            results["tf32x3"], first, again = time_reference("tf32x3", p, args)
            rows["tf32x3"] = (first, again)
        except Exception as e:
            rows["tf32x3_error"] = str(e)[:300]
        inputs.reference_attention = reference_attention
        comp.UNTIMED._compiled.clear()
        base = results.pop("autotune_off")
        for name, got in results.items():  # relative difference of each output (and gradient) from the first way
            rows[f"{name}_relerr"] = [float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b)) for a, b in zip(got, base)]
        found[f"reference_{T}_{pas}"] = rows
        log(rows)
    return found


def compiles() -> dict:
    """3. lab5's timed programs compiled one at a time, then 8 at a time; each set's device times."""
    lab = load_spec("specs/lab5.yaml", set(VARIANTS))
    progs = []
    for c in expand(lab):
        if c.variant in ("xla", "naive", "cudnn", "auto") and (c.variant, c.params) not in progs:
            progs.append((c.variant, c.params))

    def lower(name, p):
        return jax.jit(VARIANTS[name].build(p)).lower(*programs.input_avals(p))

    def lowers(name, p) -> bool:
        try:
            lower(name, p)
            return True
        except Exception:  # cudnn with float32 inputs, say
            return False

    progs = [prog for prog in progs if lowers(*prog)][:32]
    t = time.perf_counter()
    serial = [lower(*prog).compile() for prog in progs]
    t_serial = time.perf_counter() - t
    lowered = [lower(*prog) for prog in progs]
    t = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        parallel = list(pool.map(lambda lo: lo.compile(), lowered))
    t_parallel = time.perf_counter() - t

    def device_ms(executables):
        return [DeviceTimer().median(ex, jax.block_until_ready(inputs.make_inputs(p, 0)), 30) * 1e3
                for (_, p), ex in zip(progs, executables)]

    log("compile serial", t_serial, "parallel", t_parallel)
    return {"programs": len(progs), "serial_s": t_serial, "parallel8_s": t_parallel,
            "device_ms": [[f"{n} {p.label()}", a, b] for (n, p), a, b in zip(progs, device_ms(serial),
                                                                             device_ms(parallel))]}


def power_traces(src, shapes: dict) -> dict:
    """4. The SM clock, power, energy, temperature and throttle reasons under back-to-back cuDNN calls."""
    found = {}
    for T, seconds in [(8192, 12), (16384, 8)]:
        p = shapes[(T, "fwd")]
        fn = jax.jit(VARIANTS["cudnn"].build(p))
        args = jax.block_until_ready(inputs.make_inputs(p, 0))
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
        found[f"trace_cudnn_{T}"] = trace
        log("trace", T, len(trace))
    return found


def main() -> None:
    sections = sys.argv[2] if len(sys.argv) > 2 else "1234"
    out = {"import_jax_s": T_IMPORT, "backend_s": T_BACKEND}
    src, shapes = power.NvmlSource(0), hopper_shapes()
    if "1" in sections:
        out["energy"] = energy_steps(src)
        log("energy", out["energy"])
    if "2" in sections:
        out.update(references(shapes))
    if "3" in sections:
        out["parallel_compile"] = compiles()
    if "4" in sections:
        out.update(power_traces(src, shapes))
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
    log("done")


if __name__ == "__main__":
    main()
