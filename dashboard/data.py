"""The dashboard's data: a store's runs, read once per refresh and shared by every session.

Records are read through runner.store and runner.results, so each one is upgraded by runner.record's migrations;
what the dashboard knows about a variant comes from the run's manifest, never from the variant registry (which
would import JAX). A refresh reads every run's manifest (a table of runs to pick from); a run's cells are read
the first time a view needs them, into one flat frame per run, and parsed again only when the run's bytes change.
Snapshots live in st.cache_resource: views read their frames and never modify or copy them.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from runner import DEFAULT_OUT, frames, report, shape
from runner.record import Manifest, gpu_name, policy_said
from runner.compare import spec_identity
from runner.results import assemble, run_of
from runner.store import LocalStore, Store, open_store

RESULTS_ENV = "ATTNBENCH_RESULTS"
SHIPPED_RESULTS = Path(__file__).resolve().parents[1] / "examples" / "results"
REMOTE_TTL_S = 300
STORE_TIMEOUT_S = 20.0  # how long the page waits for a bucket before saying it is unreachable
COMBINED_KEPT = 8  # selections whose concatenated frames are kept (a few sessions' worth)
NOT_KNOWN = "—"  # a fact of a run that no manifest records (a run without one: its spec, GPU, power policy)
# the columns views read from every record, for runs with no cell yet
EMPTY_CELLS = ["run", "run_id", "key", "experiment", "variant", "status", "reason", "backend", "kernels", "custom_calls",
               "order", "pct_of_clock_peak", *shape.NAMES]
RUN_COLUMNS = ["run", "run_id", "folder", "spec", "identity", "gpu", "power", "started", "git_sha", "planned", "soak",
               "rechecks", "peak_tflops", "bandwidth_gbps"]


@dataclass(frozen=True)
class ParsedRun:
    """One run's cells, flat (runner.frames: one row each, in the run's order), its soak points, what could not
    be read, and what runner.report says of its records: how warm its compile cache was and how long it took."""

    manifest: Manifest | None
    cells: pd.DataFrame
    soak: pd.DataFrame
    problems: tuple[str, ...]
    cache: str | None  # report.cache_of: None where no program's is known
    took: str  # report.took: '' without a manifest


def results_uri(argv: list[str]) -> str:
    """--results after streamlit's `--`, else default_results()."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--results")
    given = parser.parse_known_args(argv)[0].results
    return default_results() if given is None else given


def default_results() -> str:
    """The dashboard's results without --results: $ATTNBENCH_RESULTS, else results/ once it holds a run (where `run`
    writes and every other reader looks: make demo's runs), else the runs shipped in the repository."""
    if (given := os.environ.get(RESULTS_ENV)) is not None:
        return given
    local = LocalStore(DEFAULT_OUT)
    return local.uri if local.root.is_dir() and local.runs() else str(SHIPPED_RESULTS)


def _last(folder: str) -> str:
    """A run folder's own name (relative to the store: h200/lab5-... is lab5-...), its run id where no manifest says."""
    return folder.rpartition("/")[2]


def _digest(objects: dict[str, bytes]) -> str:
    blake = hashlib.blake2b(digest_size=16)
    for name, data in sorted(objects.items()):
        blake.update(name.encode() + b"\0" + data)
    return blake.hexdigest()


class RunCache:
    """Parsed runs by folder, each with the digest of the bytes it came from: a refresh parses again only runs
    whose objects changed (one still being written, a new one), and holds one entry per folder."""

    def __init__(self):
        self.parsed: dict[str, tuple[str, ParsedRun]] = {}

    def parse(self, location: str, folder: str, objects: dict[str, bytes]) -> ParsedRun:
        digest = _digest(objects)
        cached = self.parsed.get(folder)
        if cached and cached[0] == digest:
            return cached[1]
        run = assemble(location, {run_of(name)[1]: data for name, data in objects.items()})
        machine = run.manifest.machine if run.manifest else None
        parsed = ParsedRun(run.manifest, frames.cells(run.cells, machine), frames.soak_points(run.cells),
                           tuple(run.problems), report.cache_of(run.cells), report.took(run))
        self.parsed[folder] = digest, parsed
        return parsed


class Snapshot:
    """A store as one refresh found it: a table of its runs (newest first) and, on demand, their cells."""

    def __init__(self, uri: str, store: Store | None, cache: RunCache, error: str | None = None):
        self.uri, self.store, self.cache, self.error = uri, store, cache, error
        self.objects: dict[str, list[str]] = {}  # run key -> its objects' names
        self.folders: dict[str, str] = {}  # run key -> folder
        self.manifests: dict[str, Manifest | None] = {}
        self.problems: list[str] = []
        self.parsed: dict[str, ParsedRun] = {}
        self.combined: dict[tuple[str, ...], pd.DataFrame] = {}  # the last few selections' frames, oldest first
        self.lock = threading.RLock()  # sessions share the snapshot: each run is fetched and parsed once
        self.runs = pd.DataFrame(columns=RUN_COLUMNS).set_index("run")

    def read(self) -> None:
        """List the store once and read every manifest (no cell)."""
        found = self.store.listing()
        keys = self._keys({folder: listed.manifest for folder, listed in found.items()})
        for folder, listed in found.items():
            self.objects[keys[folder]], self.folders[keys[folder]] = listed.names, folder
            self.manifests[keys[folder]] = listed.manifest
            self.problems += listed.problems
        table = pd.DataFrame([_run_row(key, self.folders[key], m) for key, m in self.manifests.items()],
                             columns=RUN_COLUMNS)
        table["started"] = pd.to_datetime(table["started"], utc=True, format="ISO8601")  # once, not per run
        self.runs = table.sort_values(["started", "run"], ascending=[False, True], na_position="last").set_index("run")

    def _keys(self, manifests: dict[str, Manifest | None]) -> dict[str, str]:
        """Folder -> run key: its run id, or the folder where two folders hold the same run id (a problem)."""
        ids = {folder: m.run_id if m else _last(folder) for folder, m in manifests.items()}
        holders = defaultdict(list)
        for folder, run_id in ids.items():
            holders[run_id].append(folder)
        self.problems += [f"run id {run_id} is in {len(found)} folders ({', '.join(found)}): each is listed by its "
                          "folder" for run_id, found in holders.items() if len(found) > 1]
        return {folder: folder if len(holders[run_id]) > 1 else run_id for folder, run_id in ids.items()}

    def parse(self, keys: list[str]) -> dict[str, ParsedRun]:
        """The runs' cells, parsed at the first asking (all missing runs' objects fetched in one go)."""
        with self.lock:
            missing = [k for k in dict.fromkeys(keys) if k in self.objects and k not in self.parsed]
            data = self.store.fetch([n for k in missing for n in self.objects[k]])
            for key in missing:
                objects = {n: data[n] for n in self.objects[key] if data[n] is not None}
                folder = self.folders[key]
                self.parsed[key] = self.cache.parse(self.store.location(folder), folder, objects)
        return {k: self.parsed[k] for k in keys if k in self.parsed}

    def cells(self, keys: tuple[str, ...]) -> pd.DataFrame:
        """Every cell of these runs, one frame, `run` the run key; shared: read it, never modify it."""
        with self.lock:
            if keys not in self.combined:
                frames = [run.cells.assign(run=key) for key, run in self.parse(list(keys)).items() if len(run.cells)]
                if len(self.combined) >= COMBINED_KEPT:
                    self.combined.pop(next(iter(self.combined)))
                self.combined[keys] = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
                    columns=EMPTY_CELLS)
            return self.combined[keys]

    def soak(self, keys: tuple[str, ...]) -> pd.DataFrame:
        """The soak points of these runs' cells, one frame, `run` the run key."""
        found = [run.soak.assign(run=key) for key, run in self.parse(list(keys)).items() if len(run.soak)]
        return pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=frames.SOAK_COLUMNS)

    def variants(self) -> list[str]:
        """Every variant the runs' manifests name, sorted: each gets a colour the selection never changes."""
        return sorted({name for m in self.manifests.values() if m for name in m.variants})

    def run_problems(self, keys: list[str]) -> list[str]:
        """What could not be read in these runs' cells (their manifests' problems are in self.problems)."""
        return [p for run in self.parse(keys).values() for p in run.problems if p not in self.problems]


def power_of(m: Manifest | None) -> str:
    """A run's power policy as every view of the dashboard says it: record.policy_said's (NO_POLICY, 'none', for a
    run from before the choice); NOT_KNOWN for a run with no manifest, which records no policy at all."""
    return policy_said(m) if m else NOT_KNOWN


def _run_row(key: str, folder: str, m: Manifest | None) -> dict:
    """A run's row of the runs table: its power policy in the words every view shows (power_of); a run with no
    manifest, its id and folder alone, its policy not known."""
    if m is None:
        return {"run": key, "run_id": _last(folder), "folder": folder, "started": None, "power": power_of(m)}
    return {
        "run": key, "run_id": m.run_id, "folder": folder, "spec": m.name, "identity": spec_identity(m),
        "gpu": gpu_name(m), "power": power_of(m), "started": m.started_at, "git_sha": m.git_sha,
        "planned": m.cells_planned,
        "soak": bool((m.spec.get("timing") or {}).get("soak_s")), "rechecks": m.rechecks,
        "peak_tflops": m.machine.matmul_peak_tflops,
        "bandwidth_gbps": m.machine.memory_bandwidth_gbps,
    }


def snapshot(uri: str, cache: RunCache) -> Snapshot:
    """The store at `uri` as it is now; an unreadable store gives an empty snapshot that says why."""
    try:
        found = Snapshot(uri, open_store(uri, STORE_TIMEOUT_S), cache)
        found.read()
        return found
    except Exception as error:  # a bad location or an unreachable bucket: said in the page, not raised
        return Snapshot(uri, None, cache, error=f"Could not read the results ({type(error).__name__}): {error}")


@st.cache_resource(show_spinner=False)
def _run_cache(uri: str) -> RunCache:
    return RunCache()


@st.cache_resource(show_spinner="Reading runs…")
def _local(uri: str) -> Snapshot:
    return snapshot(uri, _run_cache(uri))


@st.cache_resource(ttl=REMOTE_TTL_S, show_spinner="Reading runs from the bucket…")
def _remote(uri: str) -> Snapshot:
    return snapshot(uri, _run_cache(uri))


def load(uri: str) -> Snapshot:
    """The store's snapshot: a folder's until reloaded, a bucket's for REMOTE_TTL_S."""
    return _remote(uri) if uri.startswith("gs://") else _local(uri)


def reload() -> None:
    """Read the store again at the next load; only runs whose objects changed are parsed again."""
    _local.clear()
    _remote.clear()
