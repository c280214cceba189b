"""The reference's resident peak above its inputs on the CPU against needed_bytes less the inputs, for
B T H CHUNK_MIB (16 heads, float32, fwd_bwd); each chunk run when dispatched. Exact only with each allocation over
64 KiB mapped on its own:  MALLOC_MMAP_THRESHOLD_=65536 python docs/evidence/reference-once-20261206/cpu_peak.py 32 512 16 120
"""
import gc, sys, time
sys.path.insert(0, "tests")
sys.path.insert(0, ".")
import jax
jax.config.update("jax_cpu_enable_async_dispatch", False)
from helpers import params
from runner import inputs, metrics

def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) << 10

B, T, H, MB = (int(x) for x in sys.argv[1:5])
p = params(batch=B, seq_len=T, heads=16, head_dim=H, dtype="float32", pass_="fwd_bwd")
inputs.REFERENCE_CHUNK_BYTES = MB << 20
args = jax.block_until_ready(inputs.make_inputs(p, 0))
t = time.time(); jax.block_until_ready(inputs.reference(p, args)); w = time.time() - t
gc.collect()
open("/proc/self/clear_refs", "w").write("5")
before = kib("VmRSS")
t = time.time(); out = jax.block_until_ready(inputs.reference(p, args)); r = time.time() - t
peak = kib("VmHWM") - before
q, kv = metrics.tensor_bytes(p)
print("chunk", inputs.chunk_shape(p), f"warm {w:.1f} s run {r:.1f} s", "peak above inputs MiB", peak >> 20, "needed - inputs MiB", (inputs.needed_bytes(p) - 2 * q - 2 * kv) >> 20, "expected MiB", sum(x.nbytes for x in out) >> 20)
