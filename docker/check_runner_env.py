"""Import what a runner pod imports at start, from the runner image's Python environment, without a GPU.

TransformerEngine's library lookups (`transformer_engine.common` loads cuDNN, NVRTC, curand, cuBLAS, the CUDA
runtime and NCCL), its JAX extension where it is built, and every runner.variants module. Each CUDA library must
come from the venv's wheels, so a host's or base image's CUDA cannot hide a missing pin. Run by the Dockerfile's
runner stage (`--te-jax`) and by tests/test_runner_image.py; prints one line per step, and exits 1 with one clear
line on the first failure.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from functools import partial
from pathlib import Path
from typing import Callable

LIBRARIES = ("libcudnn.so", "libnvrtc.so", "libcurand.so", "libcublas.so", "libcudart.so", "libnccl.so")


def mapped_files() -> list[str]:
    """The files this process has mapped (/proc/self/maps), the libraries the dynamic linker really loaded."""
    lines = Path("/proc/self/maps").read_text().splitlines()
    return sorted({fields[-1] for fields in map(str.split, lines) if len(fields) >= 6})


def library_origins() -> str:
    """Where each of LIBRARIES was loaded from; raises when one is missing or is not the venv's own."""
    venv = os.path.realpath(sys.prefix)
    files = mapped_files()
    origins = {lib: next((f for f in files if Path(f).name.startswith(lib)), None) for lib in LIBRARIES}
    missing = [lib for lib, path in origins.items() if path is None]
    if missing:
        raise RuntimeError(f"not loaded by transformer_engine.common: {', '.join(missing)}")
    outside = [path for path in origins.values() if not path.startswith(venv + os.sep)]
    if outside:
        raise RuntimeError(f"loaded from outside the venv's wheels: {', '.join(outside)}")
    return ", ".join(f"{lib} <- {Path(path).parent.parent.name}" for lib, path in origins.items())


def import_variants() -> str:
    """Import every module of runner.variants, as the runner's registry does."""
    import runner.variants as package

    names = [f"{package.__name__}.{module.name}" for module in pkgutil.iter_modules(package.__path__)]
    for name in names:
        importlib.import_module(name)
    return ", ".join(names)


def imported(name: str) -> str:
    importlib.import_module(name)
    return "imported"


def steps(te_jax: bool) -> list[tuple[str, Callable[[], str]]]:
    """(what, how) in a pod's order: TE loads its libraries before JAX starts a GPU backend."""
    found = [("transformer_engine.common", partial(imported, "transformer_engine.common")),
             ("CUDA libraries", library_origins)]
    if te_jax:
        found.append(("transformer_engine.jax", partial(imported, "transformer_engine.jax")))
    return [*found, ("runner.variants", import_variants)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--te-jax", action="store_true",
                        help="also import TE's JAX extension (the image compiles it; PyPI has no wheel of it)")
    args = parser.parse_args()
    for what, step in steps(args.te_jax):
        try:
            print(f"ok {what}: {step()}", flush=True)
        except Exception as error:  # any failure here is the image's defect, named in one line
            print(f"runner image check failed at {what}: {type(error).__name__}: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
