"""Each family of a spec: the device's peak memory while its inputs and float32 reference are made, against
runner.inputs.needed_bytes (the inputs, the results once, one chunk). Each family in a process of its own, so
that the allocator's peak (memory_stats()["peak_bytes_in_use"]) is that family's; on a GPU only.

    python docs/evidence/reference-once-20261206/gpu_peak.py specs/hopper-long.yaml
"""

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from runner.cells import expand, family  # noqa: E402
from runner.registry import load_all  # noqa: E402
from runner.spec import load_spec  # noqa: E402


def shapes(spec_path: str) -> list:
    return list(dict.fromkeys(family(c.params) for c in expand(load_spec(Path(spec_path), set(load_all())))))


def one(spec_path: str, index: int) -> dict:
    import jax

    from runner import inputs

    p = shapes(spec_path)[index]
    args = jax.block_until_ready(inputs.make_inputs(p, 0))
    held = sum(x.nbytes for x in args)
    jax.block_until_ready(inputs.reference(p, args))
    stats = jax.devices()[0].memory_stats() or {}  # None on the CPU
    peak = stats.get("peak_bytes_in_use", float("nan"))
    return {"shape": p.label(), "needed_gib": inputs.needed_bytes(p) / 2**30, "peak_gib": peak / 2**30,
            "inputs_gib": held / 2**30, "chunk_gib": inputs.chunk_bytes(p) / 2**30}


if __name__ == "__main__":
    if len(sys.argv) == 3:
        print(json.dumps(one(sys.argv[1], int(sys.argv[2]))))
    else:
        for i in range(len(shapes(sys.argv[1]))):
            done = subprocess.run([sys.executable, __file__, sys.argv[1], str(i)], capture_output=True, text=True)
            print(done.stdout.strip() or done.stderr.strip().splitlines()[-1], flush=True)
