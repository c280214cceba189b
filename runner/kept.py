"""Entries kept beside the compile cache for later runs: a library's tunings (runner/tuning_cache.py) and the
machine's measured ceilings (runner/ceilings_cache.py).

An entry is one JSON object of the project's stores (runner/store.py) at `<compile cache>/<folder>/…`: a local
folder, or the bucket for a Job (the compile cache a Job gets is gs://bucket/prefix-jax-cache, k8s/render.py). It
names what it was made for (its identity); one that does not read, or names another identity (a foreign entry), is
ignored with one warning line and made anew. A store that cannot be read or written is warned about, never raised.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from dataclasses import dataclass


def digest(identity: dict) -> str:
    """20 hex digits of an identity's JSON: the entry's name."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Kept:
    """The entries of one kind (`what`: tuning, ceilings) at `location` (the compile cache's: a folder or
    gs://bucket/prefix); `anew` says what the worker does instead of using an entry it cannot."""

    location: str
    what: str
    anew: str

    @functools.cached_property
    def store(self):
        from runner.store import open_store  # a bucket's client loads only when an entry is asked for

        return open_store(self.location)

    def warn(self, message: str, then: str | None = None) -> None:
        """One line on stderr: what is wrong, and what the worker does instead (`anew`, unless `then` says)."""
        print(f"warning: {self.what} cache: {message}; {then or self.anew}", file=sys.stderr, flush=True)

    def get(self, name: str, identity: dict, needed: tuple[str, ...]) -> dict | None:
        """The entry at `name` made for `identity`, holding the fields `needed`; None: none kept, or one that cannot
        be used (warned)."""
        try:
            data = self.store.get(name)
        except Exception as error:  # a store out of reach: work without it
            self.warn(f"{self.location}: {name} could not be read ({type(error).__name__}: {error})")
            return None
        return None if data is None else self._read(name, data, identity, needed)

    def _read(self, name: str, data: bytes, identity: dict, needed: tuple[str, ...]) -> dict | None:
        try:
            entry = json.loads(data)
        except ValueError as error:  # cut short, or not JSON (UnicodeDecodeError is a ValueError)
            self.warn(f"{self.location}/{name} is not a {self.what} entry ({type(error).__name__}: {error})")
            return None
        missing = [key for key in needed if key not in entry] if isinstance(entry, dict) else ["object"]
        if missing:
            self.warn(f"{self.location}/{name} is not a {self.what} entry (no {', '.join(missing)})")
            return None
        if mismatch := [key for key, value in identity.items() if entry.get(key) != value]:
            self.warn(f"{self.location}/{name} is another's entry "
                      f"({', '.join(f'{key} {entry.get(key)!r}' for key in mismatch)})")
            return None
        return entry

    def put(self, name: str, entry: dict) -> None:
        """Keep `entry` at `name`; a store that refuses it is warned about."""
        try:
            self.store.put(name, json.dumps(entry, indent=1).encode())
        except Exception as error:  # what was made still serves this run
            print(f"warning: {self.what} cache: {self.location}: {name} could not be written "
                  f"({type(error).__name__}: {error}); not kept", file=sys.stderr, flush=True)
