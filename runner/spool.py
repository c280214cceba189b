"""The spool: each finished cell on local disk first, then copied to the store by a background uploader.

The spool keeps the store's layout (`<spool>/<store>/<run_id>/manifest.json`, `cells.jsonl`, ...), so what
it holds reads like any run folder, and an upload is the spool's part of the run copied whole.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from pathlib import Path

from runner.record import CellRecord, Manifest
from runner.results import parse_cells, parse_manifest, part_names
from runner.store import LocalStore, Store, StoreError, StoreUnavailable

SPOOL_ENV = "ATTNBENCH_SPOOL"


def default_spool_root() -> Path:
    """$ATTNBENCH_SPOOL, else ~/.cache/attnbench/spool."""
    return Path(os.environ.get(SPOOL_ENV) or Path.home() / ".cache" / "attnbench" / "spool")


def spool_store(root: Path, store: Store) -> LocalStore:
    """The spool of one store: a folder named after the store's URI, so two stores never share one."""
    return LocalStore(Path(root) / re.sub(r"[^A-Za-z0-9._-]+", "_", store.uri).strip("_"))


class Spool:
    """One part of a run (the whole run or one shard) on local disk, written cell by cell."""

    def __init__(self, local: LocalStore, run_id: str, shard: str | None):
        self.local, self.run_id, self.shard = local, run_id, shard
        self.dir = local.root / run_id
        self.manifest_name, self.cells_name = (f"{run_id}/{name}" for name in part_names(shard))
        self._lock = threading.Lock()  # the uploader reads while the run appends
        cells, _ = parse_cells((local.get(self.cells_name) or b"").decode(errors="replace"), self.cells_name)
        self._lines = {c.key: c.model_dump_json(by_alias=True) + "\n" for c in cells}
        local.put(self.cells_name, self._text())  # drops a line torn by a kill, so appends start on a new line

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._lines)

    def records(self) -> list[CellRecord]:
        with self._lock:
            return parse_cells(self._text().decode(), self.cells_name)[0]

    def add(self, record: CellRecord) -> None:
        """Append and fsync, unless a record of that key is here already: a crash loses at most the cell in flight."""
        line = record.model_dump_json(by_alias=True) + "\n"
        with self._lock:
            if record.key in self._lines:
                return
            with open(self.local.root / self.cells_name, "a") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            self._lines[record.key] = line

    def manifest(self) -> Manifest | None:
        data = self.local.get(self.manifest_name)
        return parse_manifest(data.decode(errors="replace"), self.manifest_name)[0] if data else None

    def write_manifest(self, manifest: Manifest) -> None:
        with self._lock:
            self.local.put(self.manifest_name, manifest.model_dump_json(indent=2, by_alias=True).encode())

    def objects(self) -> dict[str, bytes]:
        """This part's objects by store name, as they are now (no manifest before the run wrote one)."""
        with self._lock:
            manifest = self.local.get(self.manifest_name)
            return {self.cells_name: self._text(), **({self.manifest_name: manifest} if manifest else {})}

    def _text(self) -> bytes:
        return "".join(self._lines.values()).encode()


class Uploader:
    """Copies a spool's part to the store: right after each cell, and while behind, with backoff up to every_s."""

    def __init__(self, spool: Spool, store: Store, every_s: float):
        self.spool, self.store, self.every_s = spool, store, every_s
        self.sent: dict[str, bytes] = {}  # what the store holds of this part, as far as we know
        self.pulled = False
        self.error: str | None = None  # why the last upload failed; None once one works
        self._wake, self._stopping = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._loop, name="attnbench-uploader", daemon=True)

    def pull(self) -> set[str]:
        """Fold the store's copy of this part into the spool; return the keys of every cell the store holds."""
        run = self.store.read(self.spool.run_id)
        own = next((p for p in run.parts if p.shard == self.spool.shard), None)
        if own:
            for record in own.cells:
                self.spool.add(record)
            if own.manifest and self.spool.manifest() is None:
                self.spool.write_manifest(own.manifest)
        self.pulled = True
        return {c.key for c in run.cells}

    def flush(self) -> None:
        """Upload what changed since the last upload; raises StoreError or StoreUnavailable."""
        if not self.pulled:  # never overwrite the store's copy before it is in the spool
            self.pull()
        for name, data in self.spool.objects().items():  # cells first: a finished manifest comes with them all
            if self.sent.get(name) != data:
                self.store.put(name, data)
                self.sent[name] = data

    def start(self) -> None:
        self._thread.start()
        self.notify()

    def notify(self) -> None:
        """A cell was spooled: upload soon."""
        self._wake.set()

    def close(self) -> bool:
        """Stop the thread, try a last upload; True when the store holds everything the spool holds."""
        if self._thread.ident is None:  # never started: the run failed before its first cell
            return False
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        return self._attempt()

    def _loop(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            if failures:
                self._stopping.wait(min(self.every_s, 2.0**failures))
            else:
                self._wake.wait(self.every_s)
            self._wake.clear()
            if not self._stopping.is_set():
                failures = 0 if self._attempt() else failures + 1

    def _attempt(self) -> bool:
        try:
            self.flush()
        except Exception as error:  # whatever went wrong, the run goes on and the spool keeps the cells
            known = isinstance(error, (StoreError, StoreUnavailable))
            if self.error is None:
                _warn(f"{error if known else repr(error)}; results stay in {self.spool.dir}, upload retried")
            self.error = str(error) if known else repr(error)
            return False
        if self.error is not None:
            _warn(f"{self.store.uri} reachable again; uploaded")
            self.error = None
        return True


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)
