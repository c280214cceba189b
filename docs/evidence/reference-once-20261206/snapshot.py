"""inputs.reference's results over 9 shapes x 6 chunk budgets, into OUT.npz (bfloat16 ones as their bits); run in a
checkout, once before and once after a change, then compare the two files byte for byte:

    python docs/evidence/reference-once-20261206/snapshot.py /tmp/after.npz   # and, in the other checkout, before.npz
    python -c "import numpy as np, sys; a, b = (np.load(f) for f in sys.argv[1:]); \
        print(sorted(a) == sorted(b), [k for k in a if a[k].tobytes() != b[k].tobytes()])" /tmp/before.npz /tmp/after.npz
"""
import sys
sys.path.insert(0, "tests")
sys.path.insert(0, ".")
import numpy as np
from helpers import params
from runner import inputs
from runner.inputs import make_inputs, reference

SHAPES = {
    "causal_fwd": dict(batch=3, seq_len=40, kv_heads=2, causal=True),
    "causal_bwd": dict(batch=3, seq_len=40, kv_heads=2, causal=True, pass_="fwd_bwd"),
    "plain_bwd": dict(batch=2, seq_len=24, heads=4, kv_heads=1, pass_="fwd_bwd"),
    "padded_bwd": dict(batch=4, seq_len=24, kv_heads=2, causal=True, fill=0.5, pass_="fwd_bwd"),
    "packed_bwd": dict(batch=2, seq_len=32, kv_heads=2, causal=True, documents=3, pass_="fwd_bwd"),
    "serving_fwd": dict(batch=5, seq_len=4, kv_seq_len=40, kv_lengths="uniform", kv_spread=1.0, causal=True),
    "bf16_causal_bwd": dict(batch=3, seq_len=40, kv_heads=2, causal=True, dtype="bfloat16", pass_="fwd_bwd"),
    "bf16_padded_bwd": dict(batch=4, seq_len=24, kv_heads=1, causal=True, fill=0.5, dtype="bfloat16", pass_="fwd_bwd"),
    "window_bwd": dict(batch=2, seq_len=32, kv_heads=2, causal=True, window=8, softcap=20.0, pass_="fwd_bwd"),
}
BUDGETS = [None, 3000, 12000, 40000, 70000, 150000]  # bytes per chunk: one block, then rows, then requests

out = {}
for name, shape in SHAPES.items():
    p = params(**shape)
    args = make_inputs(p, 1)
    for budget in BUDGETS:
        inputs.REFERENCE_CHUNK_BYTES = budget or (2 << 30)
        res = reference(p, args)
        print(name, budget, inputs.chunk_shape(p), [r.shape for r in res])
        for i, r in enumerate(res):
            out[f"{name}-{budget}-{i}"] = np.asarray(r).view(np.uint16) if r.dtype.itemsize == 2 else np.asarray(r)
            out[f"{name}-{budget}-{i}-dtype"] = np.array(str(r.dtype))
np.savez(sys.argv[1], **out)
