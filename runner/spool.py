"""The spool: each finished cell on local disk first, then in the store.

The spool keeps the store's layout (`<spool>/<store>/<run_id>/manifest.json`, `cells.jsonl`, ...), so what it
holds reads like any run folder. The Uploader copies it to the store from a background thread: the cells
finished since its last upload as one object of their own, the in-flight marker (which cell a process is
measuring, so a cell that kills the process is recognised on restart), the manifest, and at the end one cells
object for the part, after which the per-cell objects are removed.

What survives what (group commit, GROUP_S apart at most):
- a killed process (SIGKILL, OOM) loses no record: each is written to the spool's file at once;
- a machine crash loses at most the records spooled in the last GROUP_S: the spool's fsyncs are grouped;
- a pod lost with its spool loses at most the cell in flight and the records committed in the last GROUP_S:
  `commit` waits for the store whenever its last wait is GROUP_S old.
A cell slower than GROUP_S (any measured GPU cell) is fsynced and waited for alone, before the next one starts.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from runner.record import CellRecord, Manifest
from runner.results import Part, cell_object, inflight_name, parse_cells, parse_manifest, part_names
from runner.store import LocalStore, Store, StoreError, StoreUnavailable

SPOOL_ENV = "ATTNBENCH_SPOOL"
PULL_TIMEOUT_S = 5.0  # the first read of the store waits no longer: measuring starts, the uploader retries
GROUP_S = 0.05  # the spool's fsyncs and the run's waits for the store are grouped over this long at most


def default_spool_root() -> Path:
    """$ATTNBENCH_SPOOL, else attnbench/spool in the user's cache folder ($XDG_CACHE_HOME, else ~/.cache)."""
    return Path(os.environ.get(SPOOL_ENV) or _cached_spool_root())


def _cached_spool_root() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "attnbench" / "spool"


def spool_from_environment(root: Path) -> bool:
    """Whether the spool `root` is $ATTNBENCH_SPOOL's (as a Job's pod has it) and not the one a run takes without it:
    a rerun from a shell, which lacks the variable, finds the run's cells there only where --spool names it."""
    named = os.environ.get(SPOOL_ENV)
    return bool(named) and Path(named) == Path(root) != _cached_spool_root()


def spool_store(root: Path, store: Store) -> LocalStore:
    """The spool of one store: a folder named after the store's URI and a hash of it, so no two stores share one
    (`a/b` and `a_b` read alike once made safe for a folder name)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", store.uri).strip("_")[-80:]
    return LocalStore(Path(root) / f"{readable}-{hashlib.sha256(store.uri.encode()).hexdigest()[:10]}")


class GroupSync:
    """fsync of one file, grouped: at once when the last fsync started `every_s` ago or more, else by a timer that
    far after it, with whatever was written meanwhile (a fsync per quick cell was most of its cost,
    docs/benchmarks.md)."""

    def __init__(self, fd: int, every_s: float):
        self.fd, self.every_s = fd, every_s
        self._lock, self._io = threading.Lock(), threading.Lock()
        self._last = -math.inf  # when the last fsync started
        self._timer: threading.Timer | None = None

    def wrote(self) -> None:
        """Something was written: fsync now, or schedule it."""
        with self._lock:
            wait = self._last + self.every_s - time.monotonic()
            if wait > 0:
                if self._timer is None:
                    self._timer = threading.Timer(wait, self.sync)
                    self._timer.start()
                return
            self._last = time.monotonic()
        self._fsync()

    def sync(self) -> None:
        """fsync now, whatever is scheduled."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._last = time.monotonic()
        self._fsync()

    def close(self) -> None:
        """fsync and close the file; a timer that fires after it finds nothing to do."""
        self.sync()
        with self._io:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None

    def _fsync(self) -> None:
        # outside _lock, so a write goes on meanwhile; _io keeps close() from closing the file under it
        with self._io:
            if self.fd is not None:
                os.fsync(self.fd)


@dataclass
class Totals:
    """Seconds per phase, and in all, over a part's cells: kept as each record arrives, not summed again."""

    phases: dict[str, float] = field(default_factory=dict)
    cells_s: float = 0.0

    def add(self, record: CellRecord) -> None:
        self.cells_s += record.duration_s
        for name, seconds in record.phases.items():
            self.phases[name] = self.phases.get(name, 0.0) + seconds


class Spool:
    """One part of a run (the whole run or one shard) on local disk, written cell by cell."""

    def __init__(self, local: LocalStore, run_id: str, shard: str | None):
        self.local, self.run_id, self.shard = local, run_id, shard
        self.dir = local.root / run_id
        self.manifest_name, self.cells_name = (f"{run_id}/{name}" for name in part_names(shard))
        self.inflight_name = f"{run_id}/{inflight_name(shard)}"
        self._lock = threading.Lock()  # the uploader reads while the run appends
        self._lines: dict[str, str] = {}  # key -> its line as it arrived
        self.totals = Totals()
        for line in (local.get(self.cells_name) or b"").decode(errors="replace").splitlines(keepends=True):
            cells, _ = parse_cells(line, self.cells_name)  # a line torn by a kill reads as none, and is dropped
            if cells and cells[0].key not in self._lines:
                self._lines[cells[0].key] = line.rstrip("\n") + "\n"
                self.totals.add(cells[0])
        self._order = list(self._lines)  # keys in the order they were spooled: what is new since, without a pass
        self._marker_fd: int | None = None  # the in-flight marker, open once it is first written
        self._marker_len = 0
        self._manifest = local.get(self.manifest_name)
        local.put(self.cells_name, self._text())  # drops a line torn by a kill, so appends start on a new line
        self._cells_fd = os.open(local.root / self.cells_name, os.O_WRONLY | os.O_APPEND)
        self._sync = GroupSync(self._cells_fd, GROUP_S)

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._lines)

    def records(self) -> list[CellRecord]:
        with self._lock:
            return parse_cells(self._text().decode(), self.cells_name)[0]

    def added(self, since: int) -> list[str]:
        """Keys spooled after the first `since` of them."""
        with self._lock:
            return self._order[since:]

    def line(self, key: str) -> bytes:
        with self._lock:
            return self._lines[key].encode()

    def add(self, record: CellRecord, line: str | None = None) -> None:
        """Append the record's line as its maker wrote it (None: written here), fsync grouped, unless a record of
        that key is here already."""
        line = (line or record.model_dump_json(by_alias=True)).rstrip("\n") + "\n"
        with self._lock:
            if record.key in self._lines:
                return
            self._write(line)
            self._lines[record.key] = line
            self._order.append(record.key)
            self.totals.add(record)
        self._sync.wrote()

    def add_quietly(self, records: list[CellRecord]) -> None:
        """Append records in one write, for the store to get with the part's cells (at the end), not in an upload of
        their own: cells the run recorded without measuring, which cost nothing to redo."""
        with self._lock:
            fresh = {r.key: r for r in records if r.key not in self._lines}
            lines = {key: r.model_dump_json(by_alias=True) + "\n" for key, r in fresh.items()}
            self._write("".join(lines.values()))
            self._lines.update(lines)
            for record in fresh.values():
                self.totals.add(record)
        self._sync.wrote()

    def _write(self, text: str) -> None:
        """One append to the cells file, at once: the kernel has it, so a process killed after it loses none."""
        data = memoryview(text.encode())
        while data:
            data = data[os.write(self._cells_fd, data):]

    def sync(self) -> None:
        """fsync what is spooled now, without waiting for the group."""
        self._sync.sync()

    def manifest(self) -> Manifest | None:
        data = self.local.get(self.manifest_name)
        return parse_manifest(data.decode(errors="replace"), self.manifest_name)[0] if data else None

    def write_manifest(self, manifest: Manifest) -> None:
        data = manifest.model_dump_json(indent=2, by_alias=True).encode()
        with self._lock:
            self.local.put(self.manifest_name, data)
            self._manifest = data

    def manifest_bytes(self) -> bytes | None:
        """The manifest as last written, without reading it back."""
        with self._lock:
            return self._manifest

    def inflight(self) -> dict | None:
        """The cell a process of this part was measuring when it last stopped, if it never finished it."""
        data = self.local.get(self.inflight_name)
        try:
            marker = json.loads(data) if data else None
        except ValueError:
            return None
        return marker if isinstance(marker, dict) and marker.get("key") else None

    def set_inflight(self, marker: dict | None) -> None:
        """Write the marker in place, in one write at its start through a file kept open, padded with spaces to
        its longest length so no byte of an older marker is left after it (JSON reads the spaces as nothing; an
        empty marker is only spaces). Not fsynced: it is read after this process died, when the kernel still holds
        it (a node that dies takes the spool along; the store's copy counts then). A new file and a rename for each
        of a cell's two markers were most of a quick cell's cost (docs/benchmarks.md)."""
        data = json.dumps(marker).encode() if marker else b""
        with self._lock:
            if self._cells_fd < 0:  # closed
                return
            if self._marker_fd is None:
                path = self.local.root / self.inflight_name
                path.parent.mkdir(parents=True, exist_ok=True)
                self._marker_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                self._marker_len = os.fstat(self._marker_fd).st_size
            os.pwrite(self._marker_fd, data.ljust(self._marker_len), 0)
            self._marker_len = max(self._marker_len, len(data))

    def objects(self) -> dict[str, bytes]:
        """This part's manifest and consolidated cells by store name, as they are now."""
        with self._lock:
            manifest = self._manifest
            return {self.cells_name: self._text(), **({self.manifest_name: manifest} if manifest else {})}

    def _text(self) -> bytes:
        return "".join(self._lines.values()).encode()

    def close(self) -> None:
        """fsync and close the files kept open: the spool still reads (what it holds is in memory), it takes no more
        cells, and the in-flight marker stays as last written."""
        with self._lock:
            self._sync.close()
            self._cells_fd = -1  # a write after this fails (EBADF) rather than land in a file that took the number
            if self._marker_fd is not None:
                os.close(self._marker_fd)
                self._marker_fd = None

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *_) -> None:
        self.close()


class Refused(Exception):
    """This part may not join what the store holds under its run id: nothing of it is uploaded there, ever."""


class OtherRun(Refused):
    """The store holds a run of another spec under this run id (a part's manifest that `resumes` refuses): nothing of
    this part may be uploaded there."""

    def __init__(self, where: str, manifest: Manifest):
        super().__init__(f"{where} holds a run of spec {manifest.name} (spec hash {manifest.spec_hash})")
        self.where, self.manifest = where, manifest


class Uploader:
    """Copies a spool's part to the store from a background thread, retrying with backoff up to every_s apart.
    `resumes` says whether a part the store already holds under the run id is one this part may join (the run's:
    run.same_run for its spec; None: any); until an upload has landed, the store's parts are checked at every try,
    so a store out of reach when the run started is checked when it first answers, before anything is put; at the
    pull, so is the machine, against the store's parts, once the run has told how (`measuring_on`: runner.resume).
    `unreachable`: why the store was out of reach at start-up, said then: an outage is said once, until it answers."""

    def __init__(self, spool: Spool, store: Store, every_s: float, resumes: Callable[[Manifest], bool] | None = None,
                 unreachable: str | None = None):
        self.spool, self.store, self.every_s, self.resumes = spool, store, every_s, resumes
        self.stored: set[str] = set()  # keys the store holds for this part, as far as we know
        self.sent: dict[str, bytes] = {}  # manifest, consolidated cells and marker as last put
        self.store_keys: set[str] = set()  # every key the store held at the pull, any part
        self.store_inflight: dict | None = None
        self.store_manifest: Manifest | None = None  # this part's manifest as the store held it at the pull
        self.unreadable: str | None = None  # why this part's manifest in the store did not read, until replaced
        self.store_parts: list[Part] = []  # the store's parts of the run as last read, for the machine's check
        self._machine_check: Callable[[list[Part], bool], None] | None = None  # raises Refused
        self._checking = threading.Lock()  # the pull's parts and the machine's check, whichever comes second
        self.pulled = False
        self.landed = False  # an upload of this process reached the store
        self.refused: Refused | None = None  # a run of another spec, or cells of another machine: nothing uploaded
        self._books = threading.Lock()
        self._scanned, self._pending = 0, []  # spooled keys looked at so far; those of them not yet stored
        self.error = unreachable  # why the last upload (or the store's probe) failed, said once; None once one works
        self._said: type | None = StoreUnavailable if unreachable else None  # the kind of failure last said
        self._wake, self._stopping, self._changed = threading.Event(), threading.Event(), threading.Condition()
        self._now = threading.Event()  # a commit waits: upload without waiting for the group
        self._uploaded_at = self._waited_at = -math.inf  # the last upload's start; the end of commit's last wait
        self._thread = threading.Thread(target=self._loop, name="attnbench-uploader", daemon=True)

    def pull(self, store: Store | None = None) -> set[str]:
        """Fold the store's copy of this part into the spool; return the keys of every cell the store holds. A store
        that holds a run of another spec under the run id raises OtherRun, and one whose cells were measured on a
        machine the run's check refuses (`measuring_on`) what it raises: nothing is folded in."""
        store = store or self.store
        run = store.read(self.spool.run_id)
        self._refuse_another([p.manifest for p in run.parts if p.manifest], store)
        with self._checking:
            self.store_parts = run.parts
            if self._machine_check:
                self._check_machine(late=True)
        own = next((p for p in run.parts if p.shard == self.spool.shard), None)
        if own:
            for record in own.cells:
                self.spool.add(record)
            self.stored |= {c.key for c in own.cells}
            self.store_inflight = own.inflight
            self.store_manifest = own.manifest
            where = f"{store.location(self.spool.manifest_name)}:"  # as runner.results names it in a problem
            self.unreadable = next((p for p in run.problems if p.startswith(where)), None) if not own.manifest else None
            if own.manifest and self.spool.manifest() is None:
                self.spool.write_manifest(own.manifest)
        self.store_keys = {c.key for c in run.cells}
        self.pulled = True
        return self.store_keys

    def flush(self, store: Store | None = None) -> None:
        """Put what changed since the last upload; raises StoreError or StoreUnavailable, and Refused for good."""
        store = store or self.store
        if self.refused:
            raise self.refused
        if not self.pulled:  # never overwrite the store's copy before it is in the spool
            self.pull(store)
        elif not self.landed:  # the pull may have read nothing where nothing could be written (a folder made since)
            self._refuse_another(store.manifests(self.spool.run_id), store)
        behind = self._behind()
        if behind:  # one object, named after the last of them: a reader folds each line in as a cell of its own
            lines = b"".join(self.spool.line(key) for key in behind)
            store.put(cell_object(self.spool.run_id, self.spool.shard, behind[-1]), lines)
            self.landed = True
        self._mark_stored(behind)
        marker = (self.spool.local.get(self.spool.inflight_name) or b"").strip()  # the spool's is padded
        if marker or self.spool.inflight_name in self.sent:  # no empty marker for a part that never had one
            self._put(store, self.spool.inflight_name, marker)
        if manifest := self.spool.manifest_bytes():
            self._put(store, self.spool.manifest_name, manifest)
            if self.unreadable:  # replaced: said once, in one line
                _warn(f"{self.unreadable}; replaced by this run's manifest")
                self.unreadable = None

    def _refuse_another(self, manifests: list[Manifest], store: Store) -> None:
        """Raise OtherRun, and keep it, when a part the store holds is of another run than this one."""
        other = next((m for m in manifests if self.resumes and not self.resumes(m)), None)
        if other is not None:
            raise self._refuse(OtherRun(store.location(self.spool.run_id), other))

    def measuring_on(self, check: Callable[[list[Part], bool], None]) -> bool:
        """Check the machine this process measures on (`check(parts, late)` raises Refused: runner.resume.Resume)
        against the spool and the store's parts: the pull's, other shards' read again now (one may have started since
        the pull, while this process's first worker started); a pull still to come checks them as it reads them,
        before anything is uploaded. False where refused: nothing is uploaded."""
        others = self._others_now() if self.pulled else None  # else the pull to come reads them
        with self._checking:
            self._machine_check = check
            if others is not None:
                self.store_parts = [*(p for p in self.store_parts if p.shard == self.spool.shard), *others]
        try:
            self._check_machine(late=False)
        except Refused:
            return False
        return True

    def _others_now(self) -> list[Part] | None:
        """The manifests of the store's parts other than this shard's, read now; None where the store does not answer
        (the pull's stand)."""
        try:
            manifests = self.store.with_timeout(PULL_TIMEOUT_S).manifests(self.spool.run_id)
        except (StoreError, StoreUnavailable):
            return None
        return [Part(m.shard, m) for m in manifests if m.shard != self.spool.shard]

    def _check_machine(self, late: bool) -> None:
        """Raise what the check raises, and keep it, where it refuses the machine against the store's parts."""
        try:
            self._machine_check(self.store_parts, late)
        except Refused as refused:
            raise self._refuse(refused) from None

    def _refuse(self, refused: Refused) -> Refused:
        """Keep `refused` as the uploader's error, a commit waiting for the store no longer waiting; for the caller to
        raise."""
        with self._changed:
            self.refused = refused
            self.error = str(refused)
            self._changed.notify_all()
        return refused

    def _behind(self) -> list[str]:
        """Spooled keys the store lacks, from the ones spooled since the last look: no pass over the whole part.
        A key stays pending until stored (the thread's and a closing run's flush may overlap after SIGTERM)."""
        with self._books:
            fresh = self.spool.added(self._scanned)
            self._scanned += len(fresh)
            self._pending = [key for key in [*self._pending, *fresh] if key not in self.stored]
            return sorted(self._pending)

    def _put(self, store: Store, name: str, data: bytes) -> None:
        if self.sent.get(name) != data:  # the same object compares at once: a large manifest costs nothing here
            store.put(name, data)
            self.sent[name] = data
            self.landed = True

    def _mark_stored(self, keys: list[str]) -> None:
        with self._changed:
            self.stored |= set(keys)
            self._changed.notify_all()

    def consolidate(self, store: Store | None = None, stop: threading.Event | None = None) -> None:
        """The part as one cells object (and its manifest), then the per-cell objects and the marker removed. Once
        `stop` is set the removing stops: the cells object holds every cell, and the next consolidation removes
        what is left."""
        store = store or self.store
        self.flush(store)
        objects = self.spool.objects()
        if objects[self.spool.cells_name] or self.spool.cells_name in self.sent or self.spool.manifest_name in objects:
            self._put(store, self.spool.cells_name, objects[self.spool.cells_name])
        folder = cell_object(self.spool.run_id, self.spool.shard, "").rpartition("/")[0] + "/"
        for name in store.names(folder):  # this process's, and any a pod that died before consolidating left
            if stop is not None and stop.is_set():
                return
            store.delete(name)
        if not self.spool.inflight():
            self._drop_marker(store)

    def _drop_marker(self, store: Store) -> None:
        """Remove the store's in-flight marker once no cell it names is in flight: this process's own, an empty one,
        or a predecessor's whose cell the spool now holds (a resumed process with nothing left to measure sends no
        marker of its own, so the one its predecessor left would otherwise stay)."""
        name = self.spool.inflight_name
        data = store.get(name)
        if data is None:
            self.sent.pop(name, None)
            return
        try:
            key = json.loads(data).get("key") if data.strip() else None
        except (ValueError, AttributeError):
            key = None  # not a marker anyone can use
        if name in self.sent or key is None or key in self.spool.keys():
            store.delete(name)
            self.sent.pop(name, None)

    def start(self) -> None:
        self._thread.start()
        self.notify()

    def notify(self) -> None:
        """Something was spooled: upload soon."""
        self._wake.set()

    def commit(self, record: CellRecord, wait_s: float, stop: threading.Event, line: str | None = None) -> None:
        """Spool the record (its `line` as its maker wrote it, if given) and, when the last wait ended GROUP_S ago or
        more, wait until the store has it and every record before it: at most wait_s, not while the store is
        failing, not once `stop` is set. A cell slower than GROUP_S is waited for alone; quicker ones together, one
        upload for the lot."""
        self.spool.add(record, line)
        if time.monotonic() - self._waited_at < GROUP_S:
            self.notify()
            return
        self._now.set()
        self.notify()
        deadline = time.monotonic() + wait_s
        with self._changed:
            while record.key not in self.stored and self.error is None and self._thread.is_alive():
                if stop.is_set() or time.monotonic() > deadline:
                    break
                self._changed.wait(0.2)
        self._waited_at = time.monotonic()

    def mark(self, marker: dict | None) -> None:
        """Record which cell is in flight (None: none), locally now and in the store soon."""
        self.spool.set_inflight(marker)
        self.notify()

    def close(self, stop: threading.Event | None = None, hurried: Callable[[], Store] | None = None) -> bool:
        """Stop the thread and make the last upload; True when the store holds everything the spool holds. The
        thread's upload and the last one retry a store that is down for the store's timeout: once `stop` is set,
        before or while either runs, neither is waited for, and the last upload goes through hurried() (the store
        with the time SIGTERM leaves). `stop`: see also `consolidate`."""
        self._stopping.set()
        self._wake.set()
        self._now.set()
        stop = stop or threading.Event()
        _join(self._thread, stop)
        if not stop.is_set():
            outcome: list[bool] = []
            last = threading.Thread(target=lambda: outcome.append(self._last_upload(self.store, stop)),
                                    name="attnbench-last-upload", daemon=True)
            last.start()
            _join(last, stop)
            if outcome:
                return outcome[0]
        return self._last_upload(hurried() if hurried else self.store, stop)

    def _last_upload(self, store: Store, stop: threading.Event) -> bool:
        self.spool.sync()
        try:
            self.consolidate(store, stop)
        except Exception as error:  # whatever went wrong, the spool keeps the cells
            self._failed(error)
            return False
        return True

    def _loop(self) -> None:
        failures = 0
        while not self._stopping.is_set() and not self.refused:
            if failures:
                self._stopping.wait(min(self.every_s, 2.0**failures))
            else:
                self._wake.wait(self.every_s)
            self._wake.clear()
            # what comes within GROUP_S of the last upload goes with the next one, unless a commit waits for it
            self._now.wait(self._uploaded_at + GROUP_S - time.monotonic())
            self._now.clear()
            if not self._stopping.is_set():
                self._uploaded_at = time.monotonic()
                failures = 0 if self._attempt() else failures + 1

    def _attempt(self) -> bool:
        try:
            self.flush()
        except Exception as error:  # whatever went wrong, the run goes on and the spool keeps the cells
            self._failed(error)
            return False
        if self.error is not None:
            _warn(f"{self.store.uri} reachable again; uploaded")
            with self._changed:
                self.error = None
        return True

    def said(self, error: Exception) -> None:
        """`error` was said to the user elsewhere (the run's first read of the store): failures of its kind go unsaid
        until the store answers."""
        self.error, self._said = str(error), type(error)

    def _failed(self, error: Exception) -> None:
        if isinstance(error, Refused):  # kept in self.refused, said by the run as it ends
            return
        known = isinstance(error, (StoreError, StoreUnavailable))
        kind = StoreUnavailable if isinstance(error, StoreUnavailable) else type(error)
        if self.error is None or kind is not self._said:  # an outage said once; a failure of another kind said too
            _warn(f"{error if known else repr(error)}; results stay in {self.spool.dir}, upload retried")
            self._said = kind
        with self._changed:
            self.error = str(error) if known else repr(error)
            self._changed.notify_all()


def _join(thread: threading.Thread, stop: threading.Event) -> None:
    """Wait for the thread to end, or for `stop`."""
    while thread.is_alive() and not stop.is_set():
        thread.join(0.2)


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)
