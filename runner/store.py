"""Stores: where runs live, a local folder or a GCS bucket, behind one small interface with one layout.

A store holds objects named `<run_id>/<object>`, the objects of runner.results' layout. Objects are only
ever written whole (a local file by atomic rename, a GCS object by one upload), so a reader never sees half.
"""

from __future__ import annotations

import os
import re
import sys
import time
import urllib.request
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from collections import defaultdict
from collections.abc import Container, Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

from runner.record import Manifest
from runner.results import (MOVING, Run, assemble, manifest_of, misnamed, moving_said, parse_manifest, part_of,
                            run_folders, run_of)

DEFAULT_TIMEOUT_S = 120.0
READ_TIMEOUT_S = 10.0  # `runs` and `show`: someone is waiting, so a store out of reach is said within about this
# Where a metadata server can answer late (a GCE VM, which every GKE node is), a run retries credentials refused or
# missing this long while it opens and probes its store: on a new GKE node the metadata server that Workload
# Identity reads can answer late, and a shard that called that bad input would fail the whole Job (exit 2 is
# podFailurePolicy's FailJob). Elsewhere nothing will answer later: missing credentials are bad input at once. A
# bucket that does not exist is never retried.
AUTH_GRACE_S = 60.0
AUTH_PAUSE_S = 2.0
FOLDER = "a folder"  # what LocalStore.entries calls an entry that is a folder
READERS = 16  # objects fetched at once: a bucket's latency per request, not its bandwidth, is the limit
METADATA_PING_S = 1.0  # the metadata server's ping, where the machine does not say it is a GCE VM
GCE_PRODUCT_NAME = "/sys/class/dmi/id/product_name"  # "Google Compute Engine" on a GCE VM
GCE_METADATA_IP = "169.254.169.254"
T = TypeVar("T")
ERROR_CHARS = 200  # of a library's error text in a message: its first line, shortened (_first_line)
ELLIPSIS = " … "
GCS_URI = re.compile(r"gs://(?P<bucket>[a-z0-9][a-z0-9._-]{1,220}[a-z0-9])(?:/(?P<prefix>.*))?")
EMULATOR_ENV = "STORAGE_EMULATOR_HOST"  # google-cloud-storage's: a URL with its scheme, despite the name
EMULATOR_URL = re.compile(r"https?://(\[[0-9a-fA-F:.]+\]|[^/\s:@\[\]]+)(:\d{1,5})?/?")


# What a bucket serves an object as: a report's page must open in a browser (attnbench report), not download.
CONTENT_TYPES = {"json": "application/json", "jsonl": "application/x-ndjson", "html": "text/html; charset=utf-8",
                 "md": "text/markdown; charset=utf-8", "png": "image/png"}


class StoreError(Exception):
    """The store cannot be used as given: a bad URI, no such bucket, no access. Bad input, not bad luck."""


class StoreAuthError(StoreError):
    """The store refused this process's credentials (401, 403) or it found none: bad input once it persists."""


class StoreUnavailable(Exception):
    """The store could not be reached just now; the same call may work later."""


@dataclass(frozen=True)
class Listed:
    """A run folder as a listing finds it: its objects' names and its manifest (a sharded run's merged), read from
    the manifest objects alone, with what could not be read."""

    names: list[str]
    manifest: Manifest | None
    problems: list[str]


class Store(ABC):
    """Objects by name, plus the runs they make up."""

    uri: str

    @abstractmethod
    def get(self, name: str) -> bytes | None:
        """The object's bytes, or None when there is no such object."""

    @abstractmethod
    def put(self, name: str, data: bytes) -> None:
        """Create or replace an object, whole."""

    @abstractmethod
    def names(self, folder: str = "") -> list[str]:
        """Names of the objects under a folder ('' or ending in '/'), at any depth."""

    @abstractmethod
    def delete(self, name: str) -> None:
        """Remove an object; one that is not there is no error."""

    def entries(self, folder: str = "") -> tuple[list[str], dict[str, str]]:
        """names(folder), and the entries under it that are no object, each with what it is: none in a bucket."""
        return self.names(folder), {}

    def with_timeout(self, seconds: float) -> Store:
        """The same store with every call bounded by `seconds` (a local folder answers at once anyway)."""
        return self

    def probe(self) -> None:
        """Write and remove a small object, so a store that cannot take results fails before the first cell."""
        name = f".attnbench-probe-{os.getpid()}"
        self.put(name, b"probe")
        self.delete(name)

    def location(self, run_id: str) -> str:
        return f"{self.uri}/{run_id}"

    def runs(self) -> list[str]:
        """Run ids: the folders, relative to the store, that hold an object of a run (runner.results.run_folders)."""
        return list(run_folders(self.names()))

    def find(self, run_id: str) -> list[str]:
        """The folders, relative to the store, of the run `run_id` names, as `runs` and the dashboard find runs (at any
        depth, runs()): each folder whose last part is `run_id`, the store's own `run_id` among them (none: no such
        run; cli._found decides which opens)."""
        return [folder for folder in self.runs() if folder.rpartition("/")[2] == run_id]

    def moves(self) -> list[tuple[str, str]]:
        """(run folder, problem) of each move of a part's cells to that run that a killed process left half done
        (moving): none in a bucket, for a move is a spool's, which is a local folder."""
        return []

    def moving(self, name: str) -> str | None:
        """The problem the object `name` says where it is a half-done move's marker (runner.results.MOVING, said by
        moving_said); None where it is none, or is gone. The one reader of a marker of `read` and `moves`."""
        folder, leaf = run_of(name)
        if not MOVING.fullmatch(leaf) or (source := self.get(name)) is None:
            return None
        return moving_said(self.location(folder), leaf, source.decode(errors="replace"))

    def fetch(self, names: list[str]) -> dict[str, bytes | None]:
        """Many objects at once, READERS in flight."""
        with ThreadPoolExecutor(READERS) as pool:
            return dict(zip(names, pool.map(self.get, names)))

    def listing(self) -> dict[str, Listed]:
        """Every run folder of one listing with its manifest, never a cell: the one reader of a store's runs (the
        dashboard's table of runs, `compare --against previous`)."""
        names, others = self.entries()
        folders = run_folders(names)
        data = self.fetch([n for its in folders.values() for n in its if part_of(run_of(n)[1])[0] == "manifest"])
        leaves, strays = _by_folder(names, folders), _by_folder(others, folders)
        listed = {}
        for folder, its in folders.items():
            location = self.location(folder)
            manifest, problems = manifest_of(location, {run_of(n)[1]: data[n] for n in its if data.get(n) is not None})
            left = _left_out(location, leaves[folder], {leaf: others[f"{folder}/{leaf}"] for leaf in strays[folder]})
            listed[folder] = Listed(its, manifest, problems + left)
        return listed

    def manifests(self, run_id: str) -> list[Manifest]:
        """The manifests of the run's parts that read (a sharded run holds one per shard), never a cell."""
        names = [n for n, leaf in _leaves(self.names(f"{run_id}/"), run_id).items()
                 if (part_of(leaf) or ("",))[0] == "manifest"]
        read = (parse_manifest(data.decode(errors="replace"), self.location(n))[0]
                for n, data in self.fetch(names).items() if data)
        return [manifest for manifest in read if manifest]

    def read(self, run_id: str) -> Run:
        """The run, shards merged; malformed or unreadable objects become run.problems (a store out of reach:
        StoreUnavailable)."""
        location = self.location(run_id)
        names, others = self.entries(f"{run_id}/")
        leaves = _leaves(names, run_id)
        problems = _left_out(location, list(leaves.values()),
                             {leaf: others[n] for n, leaf in _leaves(others, run_id).items()})
        objects = {}
        for name, leaf in leaves.items():
            if said := self.moving(name):
                problems.append(said)
            if not part_of(leaf):
                continue
            try:
                data = self.get(name)
            except (StoreError, StoreUnavailable):
                raise
            except Exception as error:  # a checksum that does not match, say: this object, not the store
                problems.append(f"{location}/{leaf}: could not be read ({type(error).__name__}: "
                                f"{_first_line(error)}); a run that resumes writes it again")
                continue
            if data is not None:
                objects[leaf] = data
        run = assemble(location, objects)
        run.problems[:0] = problems
        return run


def _by_folder(names: Iterable[str], folders: Container[str]) -> defaultdict[str, list[str]]:
    """The leaves of the names that belong to one of these run folders (runner.results.run_of), by folder."""
    found = defaultdict(list)
    for folder, leaf in map(run_of, names):
        if folder in folders:
            found[folder].append(leaf)
    return found


def _leaves(names: Iterable[str], run_id: str) -> dict[str, str]:
    """name -> leaf, of the names that belong to this run folder (not to a run folder inside it)."""
    return {name: leaf for name in names for folder, leaf in [run_of(name)] if folder == run_id}


def _left_out(location: str, leaves: list[str], others: dict[str, str]) -> list[str]:
    """What a run folder holds under the layout's names that is no object of it (a shard index out of range), or
    that is no file (a folder named cells.jsonl or manifest.jsonl): said, not left out unseen. A folder below
    cells/ (a leaf with a slash: runner.results.run_of gives one only there) is not said itself: each object in it
    is (as a bucket, which has no folders, says them)."""
    problems = [f"{location}/{leaf}: {why}; left out" for leaf in leaves if (why := misnamed(leaf))]
    return problems + [f"{location}/{leaf}: {what}, not a file; left out" for leaf, what in sorted(others.items())
                       if part_of(leaf) or misnamed(leaf) and not (what == FOLDER and "/" in leaf)]


class LocalStore(Store):
    """A folder on local disk: <root>/<run_id>/manifest.json, cells.jsonl, ..."""

    def __init__(self, root: str | Path):
        self.root = Path(root).absolute()
        self.uri = str(self.root)

    def location(self, run_id: str) -> str:
        return str(self.root / run_id)  # /run, not //run, for a run folder at the root

    def get(self, name: str) -> bytes | None:
        try:
            return (self.root / name).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as error:
            raise StoreUnavailable(f"{self.root / name}: {error.strerror}") from None

    def put(self, name: str, data: bytes) -> None:
        path = self.root / name
        temporary = path.with_name(f".{path.name}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(temporary, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, path)
        except OSError as error:
            raise StoreUnavailable(f"{path}: {error.strerror}") from None

    def delete(self, name: str) -> None:
        path = self.root / name
        try:
            path.unlink(missing_ok=True)
        except OSError as error:
            raise StoreUnavailable(f"{path}: {error.strerror}") from None
        if path.parent != self.root:  # a part's folder of per-cell objects, once emptied
            try:
                path.parent.rmdir()  # refused while it holds anything: no listing (each one would rescan the
            except OSError:          # slots of every file deleted before it, 30 deletes a second at 100,000)
                pass

    def names(self, folder: str = "") -> list[str]:
        return self.entries(folder)[0]

    def moves(self) -> list[tuple[str, str]]:
        names = (path.relative_to(self.root).as_posix() for path in self.root.rglob("moving-from*") if path.is_file())
        return [(run_of(name)[0], said) for name in names if (said := self.moving(name))]

    def entries(self, folder: str = "") -> tuple[list[str], dict[str, str]]:
        base = self.root / folder
        if not base.is_dir():
            return [], {}
        files, others = [], {}
        for path in base.rglob("*"):
            name = path.relative_to(self.root).as_posix()
            if path.is_file():
                files.append(name)
            else:
                others[name] = FOLDER if path.is_dir() else "a link to nothing" if path.is_symlink() else \
                    "a pipe, socket or device"
        return sorted(n for n in files if not n.rpartition("/")[2].startswith(".")), others  # .tmp: writes in flight


class GcsStore(Store):
    """gs://bucket/prefix through google-cloud-storage: credentials from the environment, its retry policy.

    STORAGE_EMULATOR_HOST, when set, points the client at an emulator (the client reads it itself; one that is no
    http(s)://HOST[:PORT] is refused here).
    """

    def __init__(self, bucket: str, prefix: str, timeout_s: float = DEFAULT_TIMEOUT_S, client_bucket=None):
        self.uri = f"gs://{bucket}/{prefix}".rstrip("/")
        emulator = os.environ.get(EMULATOR_ENV)
        if client_bucket is None and emulator and not EMULATOR_URL.fullmatch(emulator):
            # the client would send every request to it and fail each in words that never name the variable
            raise StoreError(f"{self.uri}: ${EMULATOR_ENV} {emulator[:80]!r} is not an emulator's URL "
                             "(http://HOST:PORT)")
        if client_bucket is None and not emulator and not metadata_server_here():
            # google-auth's own switch, read when it is imported: its search for credentials would otherwise ping a
            # metadata server that is not there three times, 3 s in all, before it says there are none
            os.environ.setdefault("NO_GCE_CHECK", "true")
        try:
            from google.cloud import storage
            from google.cloud.storage.retry import DEFAULT_RETRY
        except ImportError:
            raise StoreError("gs:// needs google-cloud-storage: pip install 'attnbench[gcs]'") from None
        self.prefix = f"{prefix}/" if prefix else ""
        self.retry = DEFAULT_RETRY.with_deadline(timeout_s)  # exponential backoff until the deadline
        self.timeout_s, self.bucket_name = timeout_s, bucket
        if client_bucket is not None:
            self.bucket = client_bucket
            return
        with self._errors():
            self.bucket = storage.Client().bucket(bucket)

    def with_timeout(self, seconds: float) -> GcsStore:
        return GcsStore(self.bucket_name, self.prefix.rstrip("/"), seconds, self.bucket)

    def get(self, name: str) -> bytes | None:
        from google.api_core.exceptions import NotFound

        try:
            with self._errors():
                return self.bucket.blob(self.prefix + name).download_as_bytes(retry=self.retry, timeout=self.timeout_s)
        except NotFound:
            return None

    def put(self, name: str, data: bytes) -> None:
        # every put replaces an object whole with the same or more content, so retrying it is safe
        content_type = CONTENT_TYPES.get(name.rpartition(".")[2], "application/x-ndjson")
        with self._errors("no such bucket"):
            self.bucket.blob(self.prefix + name).upload_from_string(
                data, content_type=content_type, retry=self.retry, timeout=self.timeout_s
            )

    def delete(self, name: str) -> None:
        from google.api_core.exceptions import NotFound

        try:
            with self._errors():
                self.bucket.blob(self.prefix + name).delete(retry=self.retry, timeout=self.timeout_s)
        except NotFound:
            pass

    def names(self, folder: str = "") -> list[str]:
        with self._errors("no such bucket"):
            blobs = self.bucket.client.list_blobs(
                self.bucket, prefix=self.prefix + folder, retry=self.retry, timeout=self.timeout_s
            )
            return sorted(blob.name.removeprefix(self.prefix) for blob in blobs)

    @contextmanager
    def _errors(self, not_found: str | None = None):
        """google-cloud errors as StoreError (ours to fix) or StoreUnavailable (try again later)."""
        import requests
        from google.api_core import exceptions as api
        from google.auth import exceptions as auth

        try:
            yield
        except (api.Forbidden, api.Unauthorized, auth.DefaultCredentialsError, auth.RefreshError) as error:
            raise StoreAuthError(f"{self.uri}: {_first_line(error)}") from None
        except api.NotFound as error:
            if not_found is None:
                raise
            raise StoreError(f"{self.uri}: {not_found} ({_first_line(error)})") from None
        except api.RetryError as error:  # the retry policy gave up: say on what
            cause = f"{type(error.cause).__name__}: {_first_line(error.cause)}" if error.cause else _first_line(error)
            raise StoreUnavailable(f"{self.uri}: unreachable for {round(self.timeout_s, 1):g} s ({cause})") from None
        except (api.GoogleAPIError, auth.GoogleAuthError, requests.RequestException) as error:
            raise StoreUnavailable(f"{self.uri}: unreachable ({_first_line(error)})") from None


def _first_line(error: Exception, limit: int = ERROR_CHARS) -> str:
    """The error's first line; a longer one than `limit` keeps its head and its tail, each cut at a word, with an
    ellipsis between: requests' text names the host and port first and the cause (Connection refused) last, with a
    request's URL between, and an HTTP error its status first and the server's words last."""
    line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if len(line) <= limit:
        return line
    half = (limit - len(ELLIPSIS)) // 2
    head, tail = line[:half], line[-half:]
    head = head.rpartition(" ")[0] or head  # a word cut short is left out, unless it is the whole part
    tail = tail.partition(" ")[2] or tail
    return f"{head}{ELLIPSIS}{tail}"


def metadata_server_here() -> bool:
    """A metadata server serves this machine, if perhaps late: its firmware says it is a Google Compute Engine VM (GKE's
    nodes are), or one answers now at $GCE_METADATA_IP. Detected as google-auth detects it (without google-auth's
    three tries and 3 s of pauses), never guessed from the environment."""
    try:
        if Path(GCE_PRODUCT_NAME).read_text().startswith("Google"):
            return True
    except OSError:
        pass
    ping = urllib.request.Request(f"http://{os.environ.get('GCE_METADATA_IP') or GCE_METADATA_IP}/",
                                  headers={"Metadata-Flavor": "Google"})
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # link-local: never through a proxy
    try:
        with direct.open(ping, timeout=METADATA_PING_S) as answer:
            return answer.headers.get("Metadata-Flavor") == "Google"
    except (OSError, ValueError):
        return False


def with_auth_grace(attempt: Callable[[], T], grace_s: float | None = None) -> T:
    """attempt(), retried every AUTH_PAUSE_S while it fails on credentials, for up to `grace_s` (AUTH_GRACE_S), where
    a metadata server can answer late; one warning says so. Any other error, and the last auth error (the first
    where no metadata server serves this machine), pass through."""
    grace_s = AUTH_GRACE_S if grace_s is None else grace_s
    deadline, warned = time.monotonic() + grace_s, False
    while True:
        try:
            return attempt()
        except StoreAuthError as error:
            left = deadline - time.monotonic()
            if left <= 0 or not (warned or metadata_server_here()):
                raise
            if not warned:
                print(f"warning: {error}; retrying credentials for up to {grace_s:g} s (a new node's metadata server "
                      "can answer late)", file=sys.stderr, flush=True)
                warned = True
            time.sleep(min(AUTH_PAUSE_S, left))


def check_uri(uri: str) -> re.Match | None:
    """The gs:// URI's parts (None for a folder); StoreError names what is wrong with it. Opens nothing."""
    if uri.startswith("gs://"):
        match = GCS_URI.fullmatch(uri)
        if not match:
            raise StoreError(f"{uri!r}: not a bucket URI; expected gs://BUCKET[/PREFIX] (bucket: a-z 0-9 . _ -)")
        return match
    if "://" in uri or not uri:
        raise StoreError(f"{uri!r}: not a results location; expected a folder or gs://bucket/prefix")
    if Path(uri).exists() and not Path(uri).is_dir():
        raise StoreError(f"{uri}: not a folder")
    return None


def open_store(uri: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Store:
    """The store at a folder path or gs://bucket/prefix; StoreError names what is wrong with the URI."""
    if match := check_uri(uri):
        return GcsStore(match["bucket"], (match["prefix"] or "").strip("/"), timeout_s)
    return LocalStore(uri)


def read_run(run_dir: str | Path) -> Run:
    """Read a local run folder; missing or malformed parts become problems, never exceptions."""
    run_dir = Path(run_dir)
    where = run_dir.resolve()
    run = LocalStore(where.parent).read(where.name)
    run.dir = run_dir
    return run
