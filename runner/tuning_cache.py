"""The tuning cache: a library's autotuning result (tokamax.autotune's JSON) kept per variant, shape, GPU and
library versions beside the compile cache, so a later run (a nightly) reads it instead of tuning again.

It lives where the compile cache does, as objects of the project's stores (runner/store.py): under
`<compile cache>/attnbench-tuning/` in a local folder, or in the bucket for a Job (the compile cache a Job gets
is gs://bucket/prefix-jax-cache, k8s/render.py). An entry names the GPU and versions it was tuned with; one that
does not read, or names others (a foreign entry), is ignored with a warning and tuned again. The cache never
fails a cell: a store that cannot be read or written is warned about and the cell tunes without it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from dataclasses import dataclass, field

from runner.record import utc_now
from runner.shape import Params, keyed

FOLDER = "attnbench-tuning"
FORMAT = 1  # the entry's layout; an entry of another is foreign
# The libraries that decide what a tuning finds: the kernel library, the compiler, and the CUDA runtime and cuDNN
# jaxlib loaded (runner.machine.versions and runner.gpu.cuda_versions name them)
VERSIONED = ("tokamax", "jax", "jaxlib", "cuda_runtime", "cudnn")


def warn(message: str) -> None:
    print(f"warning: tuning cache: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class TuningCache:
    """The tuning cache at `location` (the compile cache's: a folder or gs://bucket/prefix) for one GPU (its
    device kind, "NVIDIA H200") and the versions the worker runs."""

    location: str
    gpu: str
    versions: dict[str, str] = field(default_factory=dict)

    @functools.cached_property
    def store(self):
        from runner.store import open_store  # a bucket's client loads only when a cell tunes

        return open_store(self.location)

    def identity(self, variant: str, params: Params) -> dict:
        """What an entry is for: the variant, the cell's shape, the GPU and the versions that decide a tuning."""
        return {"format": FORMAT, "variant": variant, "params": keyed(params.as_dict()), "gpu": self.gpu,
                "versions": {name: self.versions.get(name) for name in VERSIONED}}

    def name(self, variant: str, params: Params) -> str:
        """The entry's object name: the variant and a digest of its identity."""
        blob = json.dumps(self.identity(variant, params), sort_keys=True).encode()
        return f"{FOLDER}/{variant}-{hashlib.sha256(blob).hexdigest()[:20]}.json"

    def get(self, variant: str, params: Params) -> str | None:
        """The library's result (text) kept for this cell, or None: none kept, or one that cannot be used (warned)."""
        name = self.name(variant, params)
        try:
            data = self.store.get(name)
        except Exception as error:  # a store out of reach: tune without it
            warn(f"{self.location}: {name} could not be read ({type(error).__name__}: {error}); tuning anew")
            return None
        return None if data is None else self._read(name, data, self.identity(variant, params))

    def _read(self, name: str, data: bytes, identity: dict) -> str | None:
        try:
            entry = json.loads(data)
            result = entry["result"]
            mismatch = [key for key, value in identity.items() if entry.get(key) != value]
        except (ValueError, TypeError, KeyError) as error:
            warn(f"{self.location}/{name} is not a tuning entry ({type(error).__name__}: {error}); tuning anew")
            return None
        if mismatch or not isinstance(result, str):
            what = ", ".join(f"{key} {entry.get(key)!r}" for key in mismatch) or "a result that is not text"
            warn(f"{self.location}/{name} is another's entry ({what}); tuning anew")
            return None
        return result

    def put(self, variant: str, params: Params, result: str, seconds: float) -> None:
        """Keep the library's result for this cell, with what it was tuned for and how long it took."""
        entry = {**self.identity(variant, params), "result": result, "tuned_at": utc_now(), "seconds": seconds}
        name = self.name(variant, params)
        try:
            self.store.put(name, json.dumps(entry, indent=1).encode())
        except Exception as error:  # the tuning still serves this cell
            warn(f"{self.location}: {name} could not be written ({type(error).__name__}: {error}); not kept")


def open_cache(location: str, gpu: str, versions: dict[str, str]) -> TuningCache | None:
    """The tuning cache beside the compile cache in use at `location`; None when that is 'off'."""
    return None if location == "off" else TuningCache(location, gpu, dict(versions))
