"""Run folders on local disk: <out>/<run_id>/manifest.json and cells.jsonl (one record per line)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from runner.record import CellRecord, Manifest, upgrade

MANIFEST = "manifest.json"
CELLS = "cells.jsonl"


class RunWriter:
    """Writes one run: the manifest at start and end, each cell as soon as it ends."""

    def __init__(self, out: Path, manifest: Manifest):
        self.dir = Path(out) / manifest.run_id
        self.manifest = manifest
        self.dir.mkdir(parents=True, exist_ok=True)
        self.write_manifest()

    def write_manifest(self) -> None:
        tmp = self.dir / f".{MANIFEST}.tmp"
        tmp.write_text(self.manifest.model_dump_json(indent=2, by_alias=True))
        os.replace(tmp, self.dir / MANIFEST)

    def append(self, record: CellRecord) -> None:
        """Append and fsync: a crash loses at most the cell in flight."""
        with open(self.dir / CELLS, "a") as f:
            f.write(record.model_dump_json(by_alias=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def finish(self, ended_at: str) -> None:
        self.manifest.ended_at = ended_at
        self.write_manifest()


@dataclass
class Run:
    """A run read back, with what could not be read."""

    dir: Path
    manifest: Manifest | None
    cells: list[CellRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def parse_manifest(text: str, where: str) -> tuple[Manifest | None, list[str]]:
    try:
        return Manifest.model_validate(upgrade(json.loads(text))), []
    except (ValueError, ValidationError) as error:
        return None, [f"{where}: {_short(error)}"]


def parse_cells(text: str, where: str) -> tuple[list[CellRecord], list[str]]:
    """Records from JSON lines; a bad line is reported and skipped, the rest still load."""
    cells, problems = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            cells.append(CellRecord.model_validate(upgrade(json.loads(line))))
        except (ValueError, ValidationError) as error:
            problems.append(f"{where}:{number}: {_short(error)}")
    return cells, problems


def _short(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        return f"not a valid record ({where}: {first['msg']})"
    if isinstance(error, json.JSONDecodeError):
        return f"not valid JSON ({error.msg})"
    return str(error)


def read_run(run_dir: str | Path) -> Run:
    """Read a run folder; missing or malformed parts become problems, never exceptions."""
    run_dir = Path(run_dir)
    run = Run(run_dir, None)
    manifest_path, cells_path = run_dir / MANIFEST, run_dir / CELLS
    if not manifest_path.is_file():
        run.problems.append(f"{manifest_path}: missing (is {run_dir} a run folder?)")
    else:
        run.manifest, problems = parse_manifest(manifest_path.read_text(), str(manifest_path))
        run.problems += problems
    if cells_path.is_file():
        run.cells, problems = parse_cells(cells_path.read_text(), str(cells_path))
        run.problems += problems
    return run
