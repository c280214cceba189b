"""Bad input found by walking every command as a careless user or a broken pipeline would (docs/evidence/
bad-input-walk-20261207.txt): each now exits with one line naming what and where, never a traceback."""

from __future__ import annotations

import json
import shutil

from helpers import REPO, attnbench, spec_data, write_spec
from runner.results import MANIFEST

SHIPPED_RUN = REPO / "examples" / "results" / "cpu" / "lab5-20261202-104832"


def stored(tmp_path, run_id: str):
    """A copy of the shipped CPU run under `run_id` in the results folder tmp_path/results."""
    folder = tmp_path / "results" / run_id
    shutil.copytree(SHIPPED_RUN, folder)
    return folder


def test_a_manifest_whose_spec_is_not_a_mapping_is_a_warning_and_the_other_runs_still_list(tmp_path):
    bad = stored(tmp_path, "bad")
    stored(tmp_path, "good")
    manifest = json.loads((bad / MANIFEST).read_text())
    (bad / MANIFEST).write_text(json.dumps(manifest | {"spec": "lab5"}))  # was an AttributeError, exit 1
    result = attnbench("runs", "--out", tmp_path / "results")
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [f"warning: {bad / MANIFEST}: not a valid record (upgrading schema_version 1 "
                                          "to 2: AttributeError: 'str' object has no attribute 'get')"]
    assert SHIPPED_RUN.name in result.stdout  # the good run, by its manifest's run id


def test_variants_that_no_selected_cell_runs_are_refused_naming_the_ones_that_are(tmp_path):
    spec = write_spec(tmp_path / "spec.yaml", spec_data({"name": "a", "variants": ["xla"]},
                                                        {"name": "b", "variants": ["naive"]}))
    result = attnbench("run", spec, "--out", tmp_path / "results", "--only", "a", "--variants", "naive", "--dry-run")
    assert (result.returncode, result.stderr, result.stdout) == (  # was exit 0: "0 cells"
        2, "error: --variants: no cell runs naive (the cells run: xla)\n", "")
    assert not (tmp_path / "results").exists()
