"""A run's objects and how they read back as one run.

A run folder holds one part per writer: the whole run (manifest.json, cells.jsonl, one record a line) or,
for a sharded run, one per shard i/n (manifest-i-of-n.json, cells-i-of-n.jsonl). While a part is being written
its newest cells are in objects of their own (cells/KEY.json, cells-i-of-n/KEY.json: the cells uploaded
together, one a line, named after the last of them) and inflight.json
(inflight-i-of-n.json) names the cell a process is measuring. Stores keep this layout.
"""

from __future__ import annotations

import functools
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from runner import pasted, rerun_flags
from runner.record import (SCHEMA_VERSION, CellRecord, Manifest, merged_earlier, read_cell, read_manifest,
                           resumable_facts)
from runner.shard import MAX_SHARDS, parse_shard

EXTENSION = {"manifest": "json", "cells": "jsonl", "inflight": "json"}  # a part's objects, as written and as read
MANIFEST = f"manifest.{EXTENSION['manifest']}"
CELLS = f"cells.{EXTENSION['cells']}"
PART = rf"(?P<kind>{'|'.join(EXTENSION)})(?:-(?P<index>0|[1-9]\d*)-of-(?P<count>[1-9]\d*))?"
EXTENSIONS = "|".join(sorted(set(EXTENSION.values())))
PART_OBJECT = re.compile(PART + rf"(?:\.(?P<ext>{EXTENSIONS})|/(?P<key>[0-9a-f]{{16}})\.json)")
PART_FOLDER = re.compile(PART)  # the folder of a part's per-cell objects (cells, cells-0-of-2), or a name of its form
LEGACY_ORDER_CELLS = 200_000  # runs without a cell order are put in spec order only for specs up to this many cells


def part_names(shard: str | None) -> tuple[str, str]:
    """(manifest, cells) object names of the whole run (shard None) or of shard 'i/n'."""
    return _part_object("manifest", shard), _part_object("cells", shard)


def _part_object(kind: str, shard: str | None) -> str:
    return f"{kind}{_suffix(shard)}.{EXTENSION[kind]}"


def _suffix(shard: str | None) -> str:
    if shard is None:
        return ""
    part = parse_shard(shard)
    return f"-{part.index}-of-{part.count}"


def cell_object(run_id: str, shard: str | None, key: str) -> str:
    """The store name of one finished cell's own object."""
    return f"{run_id}/cells{_suffix(shard)}/{key}.json"


def inflight_name(shard: str | None) -> str:
    return _part_object("inflight", shard)


def moving_name(shard: str | None) -> str:
    """The spool's marker of a part whose cells are moving to the run that holds it (runner.resume.set_aside): no
    object of the layout, so readers read no cell of it; found, it is said (moving_said)."""
    return f"moving-from{_suffix(shard)}.txt"


MOVING = re.compile(r"moving-from(?:-(\d+)-of-(\d+))?\.txt")  # moving_name's, of any part: its shard's I and N


def moving_said(location: str, leaf: str, source: str) -> str:
    """A move's marker (moving_name) that a killed process left in the run folder `location`, which names the run
    `source` the cells move from, as a problem: until a rerun finishes it, either run may hold some of them. What
    finishes it is set-aside's own advice (runner.resume.aside_rerun): the refused command again under the run id
    moved to, the marker's shard and the spool the folder is in (SPOOL/<store's folder>/<run id>); recheck's, which
    takes no --run-id, again as it was (its run id is `source`)."""
    target = location.rstrip("/").rpartition("/")[2]
    index, count = MOVING.fullmatch(leaf).groups()
    spool = Path(location).parents[1]
    return (f"{location}/{leaf}: run {source}'s cells were moving to run {target} when a process was killed (a late "
            f"refusal's set-aside), so either run may hold some of them: the refused command again with "
            f"{rerun_flags(target, index and f'{index}/{count}', spool)} finishes the move (a recheck's: the same "
            f"attnbench recheck command with {pasted('--spool', spool)})")


def part_of(name: str) -> tuple[str, str | None] | None:
    """('manifest', 'cells', 'cell' or 'inflight', shard) for an object name of the layout, else None."""
    found = _named(name)
    return found if isinstance(found, tuple) else None


def misnamed(name: str) -> str | None:
    """Why a name of the layout's form (cells-5-of-2.jsonl, manifest.jsonl) is no object of it, or None: a reader
    says so rather than leave out what such an object holds unseen."""
    found = _named(name)
    return found if isinstance(found, str) else None


def _named(name: str) -> tuple[str, str | None] | str | None:
    """part_of's answer for an object of the layout; for another name of its form, why it is none; else None."""
    match = PART_OBJECT.fullmatch(name)
    if not match:
        folder, slash, _ = name.partition("/")
        if slash and PART_FOLDER.fullmatch(folder):
            return "not an object of one cell (those are cells/KEY.json or cells-i-of-n/KEY.json, KEY 16 hex digits)"
        return None
    kind = match["kind"]
    if match["key"] is not None:
        if kind != "cells":
            return f"only cells/ holds objects of one cell each, not {kind}/"
        kind = "cell"
    elif match["ext"] != EXTENSION[kind]:
        return f"a {kind} object is .{EXTENSION[kind]}, not .{match['ext']}"
    if match["index"] is None:
        return kind, None
    index, count = int(match["index"]), int(match["count"])
    if index >= count:
        return f"shard {index} of {count} does not exist (shards are 0 to {count - 1})"
    if count > MAX_SHARDS:
        return f"{count} shards is more than a run has ({MAX_SHARDS} at most)"
    return kind, f"{index}/{count}"


@dataclass
class Part:
    """One writer's share of a run: the whole run (shard None) or shard 'i/n'."""

    shard: str | None
    manifest: Manifest | None = None
    cells: list[CellRecord] = field(default_factory=list)
    inflight: dict | None = None  # the cell a process was measuring when the part was last written

    @property
    def planned(self) -> int | None:
        return self.manifest.cells_planned if self.manifest else None

    @property
    def finished(self) -> bool:
        return self.manifest is not None and self.manifest.ended_at is not None


@dataclass
class Run:
    """A run read back as one, shards merged, with what could not be read."""

    dir: Path | str  # the run folder, or gs://bucket/prefix/run_id
    manifest: Manifest | None
    cells: list[CellRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id if self.manifest else str(self.dir).rstrip("/").rpartition("/")[2]


def _object(text: str) -> dict:
    data = json.loads(text)  # a RecursionError for absurd nesting is reported like any bad line
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object ({type(data).__name__})")
    return data


def _newer(where: str, version: int) -> str:
    return (f"{where}: written by a newer attnbench (schema_version {version}; this one reads up to "
            f"{SCHEMA_VERSION}): read as far as known, its new fields kept unread")


def parse_manifest(text: str, where: str) -> tuple[Manifest | None, list[str]]:
    try:
        manifest = read_manifest(_object(text))
        return manifest, [_newer(where, manifest.schema_version)] if manifest.schema_version > SCHEMA_VERSION else []
    except (ValueError, ValidationError, RecursionError) as error:
        return None, [f"{where}: {_short(error)}"]


def parse_cells(text: str, where: str) -> tuple[list[CellRecord], list[str]]:
    """Records from JSON lines; a bad line is reported and skipped, the rest still load."""
    cells, problems = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            cells.append(read_cell(_object(line)))
        except (ValueError, ValidationError, RecursionError) as error:
            problems.append(f"{where}:{number}: {_short(error)}")
    newest = max((c.schema_version for c in cells), default=SCHEMA_VERSION)
    return cells, problems + ([_newer(where, newest)] if newest > SCHEMA_VERSION else [])


def _short(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        return f"not a valid record ({where}: {first['msg']})"
    if isinstance(error, json.JSONDecodeError):
        return f"not valid JSON ({error.msg})"
    if isinstance(error, RecursionError):
        return "not a record (nested too deeply to read)"
    return str(error)[:300]


def unique(cells: list[CellRecord], where: str) -> tuple[list[CellRecord], list[str]]:
    """The first record of each key, and a problem naming the repeats (a writer should never make them)."""
    first = {}
    for cell in cells:
        first.setdefault(cell.key, cell)
    repeated = len(cells) - len(first)
    return list(first.values()), [f"{where}: {repeated} repeated cell keys, the first of each kept"] if repeated else []


def _parts(location: str, objects: dict[str, bytes]) -> tuple[list[Part], list[str]]:
    """One Part per writer found, plus empty ones for the shards of a sharded run that wrote nothing yet; and what
    could not be read."""
    parts: dict[str | None, Part] = {}
    problems: list[str] = []
    singles: dict[str | None, list[CellRecord]] = {}
    for name, data in sorted(objects.items()):
        kind, shard = part_of(name)
        part, where = parts.setdefault(shard, Part(shard)), f"{location}/{name}"
        text = data.decode(errors="replace")
        if kind == "manifest":
            part.manifest, found = parse_manifest(text, where)
        elif kind == "cells":
            cells, found = parse_cells(text, where)
            part.cells, repeats = unique(cells, where)
            found += repeats
        elif kind == "cell":
            cells, found = parse_cells(text, where)
            singles.setdefault(shard, []).extend(cells)
        else:
            part.inflight, found = _marker(text, where)
        problems += found
    for shard, cells in singles.items():  # cells not yet folded into the part's cells object
        have = {c.key for c in parts[shard].cells}
        for cell in cells:  # two uploads may overlap after SIGTERM: a cell in two objects counts once
            if cell.key not in have:
                have.add(cell.key)
                parts[shard].cells.append(cell)
    for count in {int(s.split("/")[1]) for s in parts if s}:
        for index in range(count):
            parts.setdefault(f"{index}/{count}", Part(f"{index}/{count}"))
    return sorted(parts.values(), key=_part_order), problems


def _marker(text: str, where: str) -> tuple[dict | None, list[str]]:
    """An in-flight marker: {key, attempts, ...}, or None when empty."""
    if not text.strip():
        return None, []
    try:
        marker = _object(text)
    except (ValueError, RecursionError) as error:
        return None, [f"{where}: {_short(error)}"]
    return (marker, []) if isinstance(marker.get("key"), str) else (None, [f"{where}: not an in-flight marker"])


def _part_order(part: Part) -> tuple[int, int]:
    """The whole run first, then shards by count and index."""
    if part.shard is None:
        return 0, 0
    shard = parse_shard(part.shard)
    return shard.count, shard.index


def merged_manifest(parts: list[Part]) -> Manifest | None:
    """A sharded run's manifest: the first shard's, over all of them (planned summed, ended once all ended, the facts
    earlier cells were measured under gathered, the steady rule both where shards differ)."""
    manifests = [p.manifest for p in parts if p.manifest]
    if len(parts) == 1 or not manifests:
        return manifests[0] if manifests else None
    return manifests[0].model_copy(update={
        "shard": None,
        "started_at": min(m.started_at for m in manifests),
        "ended_at": max(m.ended_at for m in manifests) if all(p.finished for p in parts) else None,
        "cells_planned": sum(m.cells_planned for m in manifests),
        "earlier_facts": _earlier_facts(manifests),
        "sampled_after_settling": _steady_rule(manifests),
    })


def _steady_rule(manifests: list[Manifest]) -> bool | None:
    """The parts' sampled_after_settling where they agree, else None: cells of both steady rules
    (record.STEADY_RULES). The one maker of a None, which no part's manifest holds."""
    rules = {m.sampled_after_settling for m in manifests}
    return rules.pop() if len(rules) == 1 else None


def _earlier_facts(manifests: list[Manifest]) -> dict[str, list[str]] | None:
    """The machine facts that the parts' cells were measured under besides the first part's machine (whose manifest
    the merged one is): each part's earlier_facts and each part's own RESUMABLE facts (the driver), together."""
    gathered = [facts for m in manifests
                for facts in (m.earlier_facts or {}, {fact: [v] for fact, v in resumable_facts(m.machine).items()})]
    return merged_earlier(gathered, resumable_facts(manifests[0].machine)) or None


def manifest_of(location: str, objects: dict[str, bytes]) -> tuple[Manifest | None, list[str]]:
    """A run's manifest from its manifest objects alone (names as `part_of` knows them; a sharded run's merged),
    so that listing runs never parses cells; a folder of cells without one says so."""
    parts, problems = [], []
    for name, data in sorted(objects.items()):
        manifest, found = parse_manifest(data.decode(errors="replace"), f"{location}/{name}")
        parts.append(Part(part_of(name)[1], manifest))
        problems += found
    if not parts:  # one that is there but unreadable is told above, as `assemble` tells it
        problems.insert(0, f"{location}/{MANIFEST}: missing (is {location} a run folder?)")
    return merged_manifest(parts), problems


def in_cell_order(cells: list[CellRecord], manifest: Manifest | None) -> list[CellRecord]:
    """Cells in the manifest's cell_order, the spec's (shards interleave otherwise; runner.run.in_run_order is the
    order they were measured in); ones it does not list go last. A run written before manifests carried it falls back
    on expanding its stored spec."""
    if manifest is None:
        return cells
    keys = manifest.cell_order or _legacy_order(manifest.spec_hash, json.dumps(manifest.spec, sort_keys=True))
    if not keys:  # a legacy spec today's model refuses, or one too large to expand: the stored order
        return cells
    order = {key: i for i, key in enumerate(keys)}
    return sorted(cells, key=lambda c: order.get(c.key, len(order)))


@functools.lru_cache(maxsize=64)  # a dashboard reads many runs of a few specs
def _legacy_order(spec_hash: str, spec_json: str) -> tuple[str, ...]:
    """The cell order of a run from before 2026-12-03 (no `cell_order`): its spec re-expanded by today's model,
    as readers then did. Only those runs depend on today's Spec and cells.expand."""
    from runner.cells import count, expand
    from runner.spec import Spec

    data = json.loads(spec_json)
    if isinstance(data, dict) and isinstance(data.get("experiments"), list):
        data["experiments"] = [_unset_nulls(exp) for exp in data["experiments"]]
    try:
        spec = Spec.model_validate(data)
    except ValidationError:
        return ()
    return () if count(spec) > LEGACY_ORDER_CELLS else tuple(c.key for c in expand(spec))


def _unset_nulls(experiment: object) -> object:
    """A stored experiment as its readers then took it: written by model_dump, it holds every field (and sweep
    axis) it left unset as null, and null then meant unset (today an experiment's null overrides the defaults)."""
    if not isinstance(experiment, dict):
        return experiment
    kept = {name: value for name, value in experiment.items() if value is not None}
    if isinstance(kept.get("sweep"), dict):
        kept["sweep"] = {name: values for name, values in kept["sweep"].items() if values is not None}
    return kept


def assemble(location: str, objects: dict[str, bytes]) -> Run:
    """One run from its objects (name -> bytes, names as `part_of` knows them); never raises for bad data."""
    parts, problems = _parts(location, objects)
    manifest = merged_manifest(parts)
    if not any(part_of(name)[0] == "manifest" for name in objects):  # one that is there but unreadable is told above
        problems.insert(0, f"{location}/{MANIFEST}: missing (is {location} a run folder?)")
    cells, repeats = unique([c for p in parts for c in p.cells], location)
    return Run(location, manifest, in_cell_order(cells, manifest), problems + repeats, parts)


def run_of(name: str) -> tuple[str, str]:
    """(run folder, leaf) of a store's object name, the leaf as the run folder names it: run/cells/KEY.json is
    run's cells/KEY.json (and anything else under a folder of that form, at any depth, is run's too, to be named as
    misnamed: run/cells/sub/x.json is run's cells/sub/x.json), run/manifest.json is run's manifest.json. The folder
    is '' for a name at the store's top."""
    folder, _, leaf = name.rpartition("/")
    if part_of(leaf):  # a run whose id is cells keeps its objects
        return folder, leaf
    steps = name.split("/")
    below = next((i for i in range(len(steps) - 2, 0, -1) if PART_FOLDER.fullmatch(steps[i])), None)  # the nearest
    return (folder, leaf) if below is None else ("/".join(steps[:below]), "/".join(steps[below:]))


def run_folders(names: list[str]) -> dict[str, list[str]]:
    """A store's object names (one listing) grouped by the run folder that holds them (run_of); objects outside
    the layout are left out."""
    folders = defaultdict(list)
    for name in names:
        folder, leaf = run_of(name)
        if folder and part_of(leaf):
            folders[folder].append(name)
    return dict(sorted(folders.items()))
