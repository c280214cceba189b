"""runner/results.py and runner/record.py: records round-trip through a run folder.

The folder layout is the contract (issue 2, item 7): <out>/<run_id>/manifest.json and cells.jsonl, one
JSON object a line, written with `model_dump_json(by_alias=True)`. These tests write that layout as the
runner does and read it back with read_run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import params
from runner import machine, metrics
from runner.cells import Cell
from runner.record import SCHEMA_VERSION, CellRecord, Correctness, Fp8Info, Machine, Manifest, TimerSummary
from runner.results import CELLS, MANIFEST, Part, merged_manifest
from runner.store import read_run

RUN_ID = "test-20260101-000000"


def record(variant: str = "xla", status: str = "ok", **fields) -> CellRecord:
    """A record as the Measurer makes one, with made-up measurements."""
    p = fields.pop("params", None) or params(pass_="fwd_bwd", causal=True, kv_heads=2)
    cell = Cell("exp", variant, p)
    measured = status in ("ok", "incorrect")
    base = dict(
        key=cell.key, run_id=RUN_ID, experiment="exp", variant=variant, params=p, status=status,
        started_at="2026-01-01T00:00:00+00:00", duration_s=0.5,
        flops=metrics.flops(p), bytes_min=metrics.bytes_min(p), kv_cache_bytes=metrics.kv_cache_bytes(p),
    )  # fmt: skip
    if measured:
        base.update(
            compile_s=0.1, temp_bytes=4096, custom_calls=["__cpu_thing"], backend="xla",
            correctness=Correctness(
                max_abs_err=1e-7, rel_err=2e-7, grad_rel_err={"dq": 1e-6, "dk": 2e-6, "dv": 3e-6}, tolerance=2e-3,
                causal_first_changed=True, causal_last_unchanged=True,
            ),
        )  # fmt: skip
    if status == "ok":
        base.update(
            timings=[TimerSummary(timer="wall", median_s=1e-4, q1_s=9e-5, q3_s=1.1e-4, min_s=8e-5, samples=3,
                            noise=0.2, converged=False)],
            timer="wall", median_s=1e-4, tflops=metrics.flops(p) / 1e-4 / 1e12, gbps=metrics.bytes_min(p) / 1e-4 / 1e9,
        )  # fmt: skip
    return CellRecord(**{**base, **fields})


def manifest(**fields) -> Manifest:
    return Manifest(**{
        "run_id": RUN_ID, "name": "test", "spec": {"name": "test"}, "spec_hash": "0123456789abcdef",
        "started_at": "2026-01-01T00:00:00+00:00", "ended_at": "2026-01-01T00:01:00+00:00",
        "machine": Machine(host="h", platform="cpu", device_kind="cpu", device_count=1), "cells_planned": 4, **fields,
    })  # fmt: skip


def some_records() -> list[CellRecord]:
    return [
        record("naive"),
        record("xla", params=params()),
        record("cudnn", "skipped", reason="cudnn needs an NVIDIA GPU with compute capability ≥ 8.0; this run is on cpu"),
        record("test_wrong", "incorrect", reason="out relative error 0.3 > tolerance 0.002"),
        record("test_oom", "oom", reason="RuntimeError: RESOURCE_EXHAUSTED: out of memory"),
    ]


def write_run(out: Path, records: list[CellRecord], run_manifest: Manifest | None = None) -> Path:
    """The run folder as the runner writes it."""
    run_dir = out / RUN_ID
    run_dir.mkdir(parents=True)
    (run_dir / MANIFEST).write_text((run_manifest or manifest()).model_dump_json(indent=2, by_alias=True))
    (run_dir / CELLS).write_text("".join(r.model_dump_json(by_alias=True) + "\n" for r in records))
    return run_dir


def test_round_trip_gives_equal_records(tmp_path):
    records = some_records()
    run = read_run(write_run(tmp_path, records))
    assert run.problems == []
    assert run.manifest == manifest()
    assert run.cells == records


def test_round_trip_of_a_real_machine_record(tmp_path):
    described = machine.describe(machine.current_device(), 1, machine.versions())
    run = read_run(write_run(tmp_path, [record()], manifest().model_copy(update={"machine": described})))
    assert run.problems == [] and run.manifest.machine == described
    assert run.manifest.machine.platform == "cpu" and "jax" in run.manifest.machine.versions


def test_records_use_the_spec_spelling_of_pass(tmp_path):
    line = json.loads(record().model_dump_json(by_alias=True))
    assert line["params"]["pass"] == "fwd_bwd" and "pass_" not in line["params"]
    assert line["schema_version"] == SCHEMA_VERSION


def test_malformed_lines_are_reported_and_the_rest_load(tmp_path):
    records = some_records()
    run_dir = write_run(tmp_path, records)
    lines = (run_dir / CELLS).read_text().splitlines()
    bad_record = json.loads(lines[1])
    del bad_record["status"]
    lines[1] = json.dumps(bad_record)
    lines.insert(3, "{not json")
    lines.append(lines[0][: len(lines[0]) // 2])  # a line torn by a kill
    (run_dir / CELLS).write_text("\n".join(lines) + "\n")
    run = read_run(run_dir)
    assert run.cells == [records[0], *records[2:]]
    assert len(run.problems) == 3
    cells_path = str((run_dir / CELLS).resolve())
    assert run.problems[0].startswith(f"{cells_path}:2: not a valid record (status")
    assert run.problems[1].startswith(f"{cells_path}:4: not valid JSON")
    assert run.problems[2].startswith(f"{cells_path}:7: not valid JSON")


def test_an_fp8_matmul_or_cotangent_the_record_does_not_name_is_refused_in_one_line_on_reading(tmp_path):
    """fp8.matmuls and correctness.cotangent take only the words runner.shape defines (each the only ones ever
    written); a stored line with another is one problem naming the field, and the lines beside it read."""
    fp8 = Fp8Info(in_hlo=True, rel_err_vs_bf16=0.01, matmuls=["qk"], verdict="FP8 attention")
    known = record("cudnn_fp8", fp8=fp8, params=params(pass_="fwd_bwd", fill=0.5, batch=2))
    known.correctness.cotangent = "normal, zero at padded query rows"
    run_dir = write_run(tmp_path, [known, known, known])
    lines = (run_dir / CELLS).read_text().splitlines()
    odd_matmul, odd_cotangent = json.loads(lines[1]), json.loads(lines[2])
    odd_matmul["fp8"]["matmuls"] = ["qk", "QK"]
    odd_cotangent["correctness"]["cotangent"] = "zero"
    (run_dir / CELLS).write_text("\n".join([lines[0], json.dumps(odd_matmul), json.dumps(odd_cotangent)]) + "\n")
    run = read_run(run_dir)
    assert run.cells == [known]  # the words it may say read back as written
    cells_path = str((run_dir / CELLS).resolve())
    assert run.problems == [f"{cells_path}:2: not a valid record (fp8.matmuls.1: Input should be 'qk' or 'pv')",
                            f"{cells_path}:3: not a valid record (correctness.cotangent: Input should be 'normal' or "
                            "'normal, zero at padded query rows')"]


def test_a_newer_schema_version_reads_as_far_as_known_and_says_so(tmp_path):
    records = some_records()
    run_dir = write_run(tmp_path, records)
    lines = (run_dir / CELLS).read_text().splitlines()
    future = json.loads(lines[0])
    future.update(schema_version=SCHEMA_VERSION + 1, new_field={"nested": [1, 2]})
    lines[0] = json.dumps(future)
    (run_dir / CELLS).write_text("\n".join(lines) + "\n")
    run = read_run(run_dir)
    assert [c.key for c in run.cells] == [r.key for r in records]
    assert run.cells[0].model_extra == {"new_field": {"nested": [1, 2]}}
    assert len(run.problems) == 1 and f"schema_version {SCHEMA_VERSION + 1}" in run.problems[0]


def test_a_version_that_is_no_version_is_reported(tmp_path):
    run_dir = write_run(tmp_path, [record()])
    data = json.loads((run_dir / MANIFEST).read_text())
    data["schema_version"] = "two"
    (run_dir / MANIFEST).write_text(json.dumps(data))
    run = read_run(run_dir)
    assert run.manifest is None
    assert any("schema_version 'two' is not a version" in p for p in run.problems)
    assert run.cells == [record()]


def test_a_folder_without_a_manifest_is_a_problem_not_an_exception(tmp_path):
    run = read_run(tmp_path / "nothing-here")
    assert run.manifest is None and run.cells == []
    assert len(run.problems) == 1 and "missing" in run.problems[0]


def test_a_run_killed_before_its_first_cell_reads_as_empty(tmp_path):
    run_dir = write_run(tmp_path, [], manifest(ended_at=None))
    run = read_run(run_dir)
    assert run.problems == [] and run.cells == [] and run.manifest.ended_at is None


def test_row_flattens_params_correctness_and_timings():
    row = record("naive").row()
    for name in ("batch", "seq_len", "kv_seq_len", "heads", "kv_heads", "head_dim", "dtype", "causal", "pass"):
        assert name in row
    assert (row["pass"], row["kv_heads"], row["causal"]) == ("fwd_bwd", 2, True)
    assert row["rel_err"] == 2e-7 and row["tolerance"] == 2e-3 and row["causal_first_changed"] is True
    assert row["grad_rel_err"] == {"dq": 1e-6, "dk": 2e-6, "dv": 3e-6}
    assert row["wall_median_s"] == 1e-4 and row["wall_samples"] == 3 and row["wall_converged"] is False
    assert row["custom_calls"] == "__cpu_thing" and row["kernels"] == ""
    assert not {"params", "correctness", "timings", "fp8"} & set(row)
    assert all(not isinstance(v, (list, tuple)) for v in row.values())


def test_row_of_a_skipped_cell_has_no_measurements():
    row = record("cudnn", "skipped", reason="no GPU").row()
    assert row["status"] == "skipped" and row["reason"] == "no GPU"
    assert row["median_s"] is None and "rel_err" not in row and "wall_median_s" not in row


def test_row_inlines_fp8_with_a_prefix():
    fp8 = Fp8Info(in_hlo=True, in_kernels=None, rel_err_vs_bf16=0.01, verdict="FP8 attention")
    row = record("cudnn_fp8", fp8=fp8).row()
    assert row["fp8_in_hlo"] is True and row["fp8_verdict"] == "FP8 attention" and row["fp8_rel_err_vs_bf16"] == 0.01


def test_a_line_nested_beyond_any_parser_is_one_problem(tmp_path):
    records = some_records()
    run_dir = write_run(tmp_path, records)
    with open(run_dir / CELLS, "a") as f:
        f.write("[" * 200_000 + "]" * 200_000 + "\n")
    run = read_run(run_dir)
    assert [c.key for c in run.cells] == [r.key for r in records]
    assert len(run.problems) == 1 and run.problems[0].endswith(":6: not a record (nested too deeply to read)")


def test_an_object_named_for_billions_of_shards_is_not_a_part_and_says_so(tmp_path):
    run_dir = write_run(tmp_path, [record()])
    (run_dir / "cells-0-of-99999999999.jsonl").write_text(record().model_dump_json() + "\n")
    run = read_run(run_dir)
    assert [p.shard for p in run.parts] == [None]
    assert run.problems == [f"{run_dir.resolve()}/cells-0-of-99999999999.jsonl: 99999999999 shards is more than a run "
                            "has (100000 at most); left out"]


def test_cells_read_in_the_order_the_run_wrote_without_its_spec(tmp_path):
    records = some_records()
    order = [r.key for r in reversed(records)]
    unreadable_spec = {"name": "test", "experiments": "a field today's Spec model refuses"}
    write_run(tmp_path, records, manifest(cell_order=order, spec=unreadable_spec))
    assert [c.key for c in read_run(tmp_path / RUN_ID).cells] == order


def test_a_run_from_before_the_cell_order_reads_in_its_specs_order(tmp_path):
    from helpers import spec_data

    from runner.spec import Spec

    data = spec_data({"name": "exp", "variants": ["naive", "xla"], "sweep": {"seq_len": [4, 8]}})
    spec = Spec.model_validate(data).model_dump(mode="json", by_alias=True)  # as run wrote it: each unset field null
    records = [record(v, params=params(seq_len=t)) for t in (8, 4) for v in ("xla", "naive")]
    write_run(tmp_path, records, manifest(spec=spec))  # cell_order absent, as in every run before it was written
    run = read_run(tmp_path / RUN_ID)
    assert run.manifest.cell_order is None
    assert [(c.variant, c.params.seq_len) for c in run.cells] == [("naive", 4), ("xla", 4), ("naive", 8), ("xla", 8)]


def test_a_store_listing_groups_by_run_folder_and_reads_manifests_alone():
    from runner.results import manifest_of, run_folders

    names = ["a/manifest.json", "a/cells.jsonl", "a/notes.txt", "b/manifest-0-of-2.json", "top.json"]
    assert run_folders(names) == {"a": ["a/manifest.json", "a/cells.jsonl"], "b": ["b/manifest-0-of-2.json"]}
    found, problems = manifest_of("store/a", {"manifest.json": manifest().model_dump_json().encode()})
    assert found.run_id == RUN_ID and problems == []
    assert manifest_of("store/c", {})[1] == ["store/c/manifest.json: missing (is store/c a run folder?)"]


def test_a_cells_own_object_belongs_to_its_run_as_cells_slash_key():
    """run_of is the one owner of which run folder holds an object and what the run calls it: a cell's own object
    (run/cells/KEY.json) is its run's cells/KEY.json, not an object of a folder run/cells."""
    from runner.results import misnamed, run_folders, run_of

    key = "0123456789abcdef"
    assert run_of(f"h200/run/cells/{key}.json") == ("h200/run", f"cells/{key}.json")
    assert run_of(f"run/cells-1-of-2/{key}.json") == ("run", f"cells-1-of-2/{key}.json")
    assert run_of("h200/run/manifest.json") == ("h200/run", "manifest.json")
    assert run_of("a/cells/manifest.json") == ("a/cells", "manifest.json")  # a run whose id is "cells"
    assert run_of(f"cells/{key}.json") == ("cells", f"{key}.json")  # the store's top holds no run
    assert run_of("run/cells/notes.txt") == ("run", "cells/notes.txt") and misnamed("cells/notes.txt").startswith(
        "not an object of one cell")
    assert run_of("h200/run/cells/sub/x.json") == ("h200/run", "cells/sub/x.json")  # any depth below cells/
    assert run_of(f"h200/cells/run/cells-0-of-2/a/{key}.json") == ("h200/cells/run", f"cells-0-of-2/a/{key}.json")
    assert misnamed("cells/sub/x.json") == misnamed("cells/notes.txt")
    assert misnamed(f"cells-3-of-2/{key}.json").startswith("shard 3 of 2") and misnamed("notes/x.json") is None
    names = ["a/manifest.json", f"a/cells/{key}.json", "a/cells/notes.txt", f"b/cells-0-of-2/{key}.json",
             "top.json", f"c/notes/{key}.json"]
    assert run_folders(names) == {"a": ["a/manifest.json", f"a/cells/{key}.json"], "b": [f"b/cells-0-of-2/{key}.json"]}


def test_a_cell_in_two_uploaded_objects_reads_once(tmp_path):
    """After SIGTERM the uploader's thread and the closing run may upload overlapping lots of cells."""
    first, second, third = some_records()[:3]
    run = write_run(tmp_path, [], manifest())
    (run / "cells").mkdir()
    lines = [r.model_dump_json(by_alias=True) + "\n" for r in (first, second, third)]
    (run / "cells" / f"{second.key}.json").write_text("".join(lines[:2]))
    (run / "cells" / f"{third.key}.json").write_text("".join(lines))
    read = read_run(run)
    assert sorted(c.key for c in read.cells) == sorted(r.key for r in (first, second, third)) and read.problems == []


def test_a_sharded_runs_manifest_spans_its_shards_whichever_started_first():
    late = manifest(shard="0/2", cells_planned=3, started_at="2026-01-01T00:00:30+00:00",
                    ended_at="2026-01-01T00:01:00+00:00")
    early = manifest(shard="1/2", cells_planned=2, started_at="2026-01-01T00:00:10+00:00",
                     ended_at="2026-01-01T00:02:00+00:00")
    merged = merged_manifest([Part("0/2", late), Part("1/2", early)])
    assert (merged.shard, merged.cells_planned) == (None, 5)
    assert (merged.started_at, merged.ended_at) == (early.started_at, early.ended_at)
    unfinished = merged_manifest([Part("0/2", late), Part("1/2", early.model_copy(update={"ended_at": None}))])
    assert unfinished.started_at == early.started_at and unfinished.ended_at is None


def test_a_sharded_runs_manifest_names_every_driver_its_shards_ran_under_but_its_own():
    """Shard 1 resumed on a newer driver than shard 0's (a GKE node upgraded between them, which refuses no resume):
    the merged manifest, shard 0's machine, keeps shard 1's driver and what each part kept of earlier ones, where it
    named shard 0's own driver as an earlier one and the second driver nowhere."""
    from runner.record import GpuFacts

    def on(driver, **update):
        made = manifest(shard=update.pop("shard"), cells_planned=2, started_at="2026-01-01T00:00:10+00:00", **update)
        return made.model_copy(update={"machine": made.machine.model_copy(update={"gpu": GpuFacts(driver=driver)})})
    first = on("580.95", shard="0/2")
    second = on("580.126", shard="1/2", earlier_facts={"gpu driver": ["580.95", "570.1"]})
    merged = merged_manifest([Part("0/2", first), Part("1/2", second)])
    assert merged.machine.gpu.driver == "580.95" and merged.earlier_facts == {"gpu driver": ["570.1", "580.126"]}
    assert merged_manifest([Part("0/2", first), Part("1/2", on("580.95", shard="1/2"))]).earlier_facts is None


def test_a_driver_that_two_shards_ran_under_is_named_once():
    """Shards 1 and 2 of 3 both ran on the newer driver, and shard 2 kept an older one too (record.merged_earlier):
    each earlier driver once, in the order the parts name them."""
    from runner.record import GpuFacts

    def on(driver, shard, **update):
        made = manifest(shard=shard, cells_planned=2, started_at="2026-01-01T00:00:10+00:00", **update)
        return made.model_copy(update={"machine": made.machine.model_copy(update={"gpu": GpuFacts(driver=driver)})})
    shards = [on("580.95", "0/3"), on("580.126", "1/3"), on("580.126", "2/3", earlier_facts={"gpu driver": ["570.1"]})]
    merged = merged_manifest([Part(m.shard, m) for m in shards])
    assert merged.earlier_facts == {"gpu driver": ["580.126", "570.1"]}


def test_a_sharded_runs_steady_rule_is_its_shards_where_they_agree_and_both_where_they_do_not():
    """Two steady shards sampled after settling read as one run after settling; one of each rule reads as both
    (record.STEADY_RULES), never as shard 0's."""
    from runner.record import power_policy

    def shard(index, settled):
        return Part(f"{index}/2", manifest(shard=f"{index}/2", spec={"name": "test", "timing": {"power": "steady"}},
                                           sampled_after_settling=settled))
    assert power_policy(merged_manifest([shard(0, True), shard(1, True)])) == "steady (after settling)"
    assert power_policy(merged_manifest([shard(0, False), shard(1, True)])) == (
        "steady (two rules: in load, after settling)")


def test_shard_names_at_their_edges():
    """Shard i of n runs from 0 to n-1, and n to MAX_SHARDS: the edges are parts, one past them says why not."""
    from runner.results import misnamed, part_of
    from runner.shard import MAX_SHARDS

    assert misnamed("cells-2-of-2.jsonl") == "shard 2 of 2 does not exist (shards are 0 to 1)"
    assert part_of("cells-1-of-2.jsonl") == ("cells", "1/2")
    assert part_of(f"manifest-0-of-{MAX_SHARDS}.json") == ("manifest", f"0/{MAX_SHARDS}")
    assert misnamed(f"manifest-0-of-{MAX_SHARDS + 1}.json") == (f"{MAX_SHARDS + 1} shards is more than a run has "
                                                                f"({MAX_SHARDS} at most)")


def test_a_shard_that_wrote_nothing_yet_is_an_empty_part_and_the_run_has_not_ended():
    from runner.results import assemble

    ended = manifest(shard="1/2").model_dump_json().encode()
    run = assemble("store/run", {"manifest-1-of-2.json": ended, "cells-1-of-2.jsonl": b""})
    assert [(p.shard, p.manifest is None) for p in run.parts] == [("0/2", True), ("1/2", False)]
    assert run.manifest.ended_at is None and run.problems == []


def test_a_repeated_key_keeps_its_first_record_and_says_how_many_repeat(tmp_path):
    first = record()
    run_dir = write_run(tmp_path, [first, first.model_copy(update={"duration_s": 9.0}), record("naive")])
    run = read_run(run_dir)
    assert [(c.key, c.duration_s) for c in run.cells] == [(first.key, 0.5), (record("naive").key, 0.5)]
    assert run.problems == [f"{run_dir.resolve()}/{CELLS}: 1 repeated cell keys, the first of each kept"]


def test_cells_the_runs_order_does_not_list_go_last_in_the_order_read(tmp_path):
    records = some_records()
    write_run(tmp_path, records, manifest(cell_order=[records[1].key, records[0].key]))
    assert [c.key for c in read_run(tmp_path / RUN_ID).cells] == [r.key for r in (records[1], records[0],
                                                                                  *records[2:])]


def test_an_in_flight_marker_names_a_cell_key_and_blank_text_is_none_said():
    from runner.results import assemble

    cells = (record().model_dump_json(by_alias=True) + "\n   \n").encode()  # a line of blanks: nothing to read
    for marker, found, problems in [(b" \n", None, []), (b'{"key": "0123456789abcdef", "attempts": 1}',
                                                         {"key": "0123456789abcdef", "attempts": 1}, []),
                                    (b'{"key": 5}', None, ["store/run/inflight.json: not an in-flight marker"])]:
        run = assemble("store/run", {MANIFEST: manifest().model_dump_json().encode(), CELLS: cells,
                                     "inflight.json": marker})
        assert (run.parts[0].inflight, run.problems, len(run.cells)) == (found, problems, 1)


@pytest.mark.parametrize("text, why", [("{not json", "Expecting property name enclosed in double quotes"),
                                       ("", "Expecting value")])  # an empty (0-byte) one too: there, not missing
def test_a_manifest_there_but_unreadable_is_told_as_such_never_as_missing(tmp_path, text, why):
    """The listing (manifest_of) and reading a run (assemble) tell a corrupt manifest alike: not valid JSON, where the
    listing said it was missing as well."""
    from runner.results import manifest_of
    from runner.store import open_store

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / MANIFEST).write_text(text)
    told = [f"{tmp_path}/run/{MANIFEST}: not valid JSON ({why})"]
    store = open_store(str(tmp_path))
    assert store.listing()["run"].problems == store.read("run").problems == told
    assert manifest_of("store/run", {MANIFEST: b"[]"})[1] == ["store/run/manifest.json: not a JSON object (list)"]


def test_a_run_without_a_manifest_is_named_by_its_folder_and_the_stores_top_holds_no_run():
    from runner.results import assemble, run_folders

    assert assemble("gs://bucket/nightly/run-1/", {}).run_id == "run-1"
    assert assemble("store/a-copy", {MANIFEST: manifest().model_dump_json().encode()}).run_id == RUN_ID  # its own
    assert run_folders(["manifest.json", "cells.jsonl", "a/manifest.json"]) == {"a": ["a/manifest.json"]}


@pytest.mark.parametrize("shard", [None, "0/1", "2/3"])
def test_every_name_a_writer_gives_reads_back_as_its_kind_and_shard(shard):
    """The spool and uploader name a part's objects (part_names, inflight_name, cell_object) from the table readers
    match them by (results.EXTENSION): one owner, so what is written is never read as no object of the run."""
    from runner.results import cell_object, inflight_name, part_names, part_of, run_of

    manifest, cells = part_names(shard)
    leaf = run_of(cell_object("run", shard, "0123456789abcdef"))[1]
    found = [part_of(name) for name in (manifest, cells, inflight_name(shard), leaf)]
    assert found == [(kind, shard) for kind in ("manifest", "cells", "inflight", "cell")]
