"""The tuning cache: a library's autotuning result (tokamax.autotune's JSON) kept per variant, shape, GPU and
library versions beside the compile cache, so a later run (a nightly) reads it instead of tuning again.

It lives where the compile cache does, under `<compile cache>/attnbench-tuning/`, as entries kept as runner/kept.py
keeps them (a local folder, or the bucket for a Job). An entry names the GPU and versions it was tuned with; one
that does not read, or names others (a foreign entry), is ignored with a warning and tuned again. The cache never
fails a cell: a store that cannot be read or written is warned about and the cell tunes without it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from runner.kept import Kept, digest
from runner.record import utc_now
from runner.shape import Params, keyed

FOLDER = "attnbench-tuning"
FORMAT = 1  # the entry's layout; an entry of another is foreign
# The libraries that decide what a tuning finds: the kernel library, the compiler, and the CUDA runtime and cuDNN
# jaxlib loaded (runner.machine.versions and runner.gpu.cuda_versions name them)
VERSIONED = ("tokamax", "jax", "jaxlib", "cuda_runtime", "cudnn")


@dataclass(frozen=True)
class TuningCache:
    """The tuning cache at `location` (the compile cache's: a folder or gs://bucket/prefix) for one GPU (its
    device kind, "NVIDIA H200") and the versions the worker runs."""

    location: str
    gpu: str
    versions: dict[str, str] = field(default_factory=dict)

    @functools.cached_property
    def kept(self) -> Kept:
        return Kept(self.location, "tuning", "tuning anew")

    def identity(self, variant: str, params: Params) -> dict:
        """What an entry is for: the variant, the cell's shape, the GPU and the versions that decide a tuning."""
        return {"format": FORMAT, "variant": variant, "params": keyed(params.as_dict()), "gpu": self.gpu,
                "versions": {name: self.versions.get(name) for name in VERSIONED}}

    def name(self, variant: str, params: Params) -> str:
        """The entry's object name: the variant and a digest of its identity."""
        return f"{FOLDER}/{variant}-{digest(self.identity(variant, params))}.json"

    def get(self, variant: str, params: Params) -> str | None:
        """The library's result (text) kept for this cell, or None: none kept, or one that cannot be used (warned)."""
        name = self.name(variant, params)
        entry = self.kept.get(name, self.identity(variant, params), ("result",))
        if entry is not None and not isinstance(entry["result"], str):
            self.kept.warn(f"{self.location}/{name} is another's entry (a result that is not text)")
            return None
        return None if entry is None else entry["result"]

    def put(self, variant: str, params: Params, result: str, seconds: float) -> None:
        """Keep the library's result for this cell, with what it was tuned for and how long it took."""
        entry = {**self.identity(variant, params), "result": result, "tuned_at": utc_now(), "seconds": seconds}
        self.kept.put(self.name(variant, params), entry)


def open_cache(location: str, gpu: str, versions: dict[str, str]) -> TuningCache | None:
    """The tuning cache beside the compile cache in use at `location`; None when that is 'off'."""
    return None if location == "off" else TuningCache(location, gpu, dict(versions))
