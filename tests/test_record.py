"""runner/record.py: the contract's versions. Every record and manifest ever written reads through `upgrade`,
step by step, without the variant registry; readers keep fields they do not know; writers refuse them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from helpers import REPO
from runner.record import (MIGRATIONS, SCHEMA_VERSION, V1_VARIANTS, CellRecord, Correctness, GpuFacts, Manifest,
                           read_cell, read_manifest, upgrade, v8_bytes_min)
from runner import metrics, paging
from runner.results import CELLS, MANIFEST
from runner.shape import cell_key
from runner.store import open_store, read_run
from helpers import params
from test_results import manifest, record

SCHEMA1 = Path(__file__).with_name("fixtures") / "schema1" / "schema1-20261202-000000"  # written by attnbench 0.1
SHIPPED = REPO / "examples" / "results"


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_version_before_this_one_has_a_step():
    assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION))


def test_a_run_written_by_schema_1_reads_through_the_migration():
    assert {c["schema_version"] for c in lines(SCHEMA1 / CELLS)} == {1}
    run = read_run(SCHEMA1)
    assert run.problems == []
    assert run.manifest.schema_version == SCHEMA_VERSION and {c.schema_version for c in run.cells} == {SCHEMA_VERSION}
    assert [c.status for c in run.cells].count("ok") == 5 and len(run.cells) == 9
    # what a reader needs about each variant travels in the manifest, from the frozen schema-1 table
    assert set(run.manifest.variants) == {"naive", "xla", "cudnn", "cudnn_fp8"}
    assert run.manifest.variants["cudnn_fp8"].fp8_baseline == "cudnn"
    assert run.manifest.variants["cudnn"].backend == "cudnn"
    assert run.manifest.machine.gpu is None and run.manifest.gpu_at_end is None  # {} on a CPU, None now
    assert [c.key for c in run.cells] == [c["key"] for c in lines(SCHEMA1 / CELLS)]  # keys are stable


def test_the_v1_to_v2_step_on_its_own():
    old = json.loads((SCHEMA1 / MANIFEST).read_text())
    assert old["schema_version"] == 1 and "variants" not in old
    step = MIGRATIONS[1](json.loads(json.dumps(old)), "manifest")
    assert set(step["variants"]) == {"naive", "xla", "cudnn", "cudnn_fp8"}
    fp8_cell = {"schema_version": 1, "variant": "te_fp8", "fp8": {"in_hlo": False, "verdict": "not FP8"}}
    assert MIGRATIONS[1](fp8_cell, "cell")["fp8"]["baseline"] == "te"  # records from before Fp8Info.baseline


def test_the_v2_to_v3_step_changes_nothing_old():
    v2 = json.loads(record().model_dump_json(by_alias=True)) | {"schema_version": 2}
    upgraded = upgrade(v2, "cell")
    assert upgraded["schema_version"] == SCHEMA_VERSION and {
        k: v for k, v in upgraded.items() if k != "schema_version"} == {k: v for k, v in v2.items() if k != "schema_version"}


def _v3_cell(drawn_w, device_s: float, policy: str, wait_s: float) -> dict:
    """A schema-3 GPU cell as 2026-12-03's runs wrote it: NVML's mean 650 W, a 2 ms median, 1 TFLOP."""
    cell = json.loads(record().model_dump_json(by_alias=True)) | {"schema_version": 3}
    cell.update(timer="device", median_s=0.002, flops=10**12, phases={"settle": wait_s, "device": device_s},
                power={"policy": policy, "settled": True, "wait_s": wait_s},
                telemetry={"source": "nvml", "samples": 5, "power_w": {"min": 640, "median": 650, "max": 660,
                                                                       "mean": 650.0}, "drawn_w": drawn_w},
                energy_j=(drawn_w or 650.0) * 0.002)
    return cell


@pytest.mark.parametrize("drawn_w, device_s, policy, wait_s, watts", [
    (2084.0, 0.05, "steady", 1.3, 650.0),  # a counter figure over 50 ms: NVML's settled reading instead
    (0.0, 0.05, "steady", 0.1, None),  # a light load settled in 0.1 s: NVML still lagging, no energy
    (None, 0.05, "burst", 3.0, None),  # a burst: NVML's reading lagged (the 2026-12-02 burst runs)
    (702.0, 1.2, "steady", 1.3, 702.0),  # over a second of samples the counter stands
    (702.0, 0.5, "steady", 1.3, 702.0),  # half a second of samples: the counter stands
    (None, 0.05, "steady", 1.0, 650.0),  # settled for a second: NVML's reading stands
])
def test_the_v3_to_v4_step_keeps_only_energy_that_can_be_known(drawn_w, device_s, policy, wait_s, watts):
    upgraded = upgrade(_v3_cell(drawn_w, device_s, policy, wait_s), "cell")
    assert upgraded["schema_version"] == SCHEMA_VERSION
    assert upgraded["telemetry"]["drawn_w"] == (drawn_w if device_s >= 0.5 else None)
    if watts is None:
        assert upgraded["energy_j"] is None and upgraded["tflops_per_j"] is None
    else:
        assert upgraded["energy_j"] == pytest.approx(watts * 0.002)
        assert upgraded["tflops_per_j"] == pytest.approx(1 / (watts * 0.002))


def test_the_v3_to_v4_step_gives_a_cell_timed_by_wall_no_energy():
    """The samples' watts are the device timer's: a wall time (a CPU's, a split cell's) has none to multiply."""
    upgraded = upgrade(_v3_cell(702.0, 1.2, "steady", 1.3) | {"timer": "wall"}, "cell")
    assert upgraded["energy_j"] is None and upgraded["tflops_per_j"] is None


@pytest.mark.parametrize("policy, in_load", [("steady", False), ("burst", None)])
def test_the_v4_to_v5_step_says_an_old_steady_sample_was_taken_after_the_load(policy, in_load):
    old = _v3_cell(650.0, 1.2, policy, 1.3) | {"schema_version": 4}
    old["telemetry"].update(sm_clock_mhz={"min": 1600, "median": 1650, "max": 1700}, clock_spread=0.06)
    cell = read_cell(old)
    assert cell.power.sampled_in_load is in_load and cell.power.policy == policy
    assert cell.power.rule is None and cell.power.load_s is None  # not known then: not made up


@pytest.mark.parametrize("version", [4, 5, 6])
def test_the_v6_to_v7_step_puts_old_cells_on_one_device_under_the_same_key(version):
    cell = json.loads(record().model_dump_json(by_alias=True)) | {"schema_version": version}
    del cell["params"]["devices"]  # as schemas before 7 wrote it
    upgraded = read_cell(cell)
    assert upgraded.params.devices == 1
    assert upgraded.key == cell_key(upgraded.experiment, upgraded.variant, upgraded.params) == cell["key"]
    assert "D1" not in upgraded.params.label()


def test_a_cell_on_several_devices_has_a_key_and_label_of_its_own():
    one = record().params
    four = one.model_copy(update={"devices": 4})
    assert cell_key("e", "ring", one) != cell_key("e", "ring", four) and four.label().endswith(" D4")


@pytest.mark.parametrize("version", [0, -1, True, 1.0, "two", None])
def test_a_schema_version_that_is_no_version_is_refused_never_read_as_one(version):
    with pytest.raises(ValueError, match="is not a version"):
        upgrade({"schema_version": version}, "cell")


@pytest.mark.parametrize("kind, fields, said", [
    ("manifest", {"spec": "lab5"}, "upgrading schema_version 1 to 2: spec is str, not dict"),
    ("manifest", {"spec": {"experiments": ["a"]}}, "spec.experiments holds a str, not dict"),
    ("manifest", {"spec": {"experiments": [{"variants": [["xla"]]}]}}, "spec.experiments.variants holds a list, "
                                                                       "not str"),
    ("cell", {"variant": ["te_fp8"], "fp8": {}}, "upgrading schema_version 1 to 2: variant is list, not str"),
    ("cell", {"telemetry": {"drawn_w": 300.0}, "phases": {"device": "1 s"}}, "phases.device is str, not int or float"),
    ("cell", {"telemetry": {"power_w": 300.0}, "power": {"policy": "steady", "wait_s": 2.0}},
     "telemetry.power_w is float, not dict"),
    ("cell", {"telemetry": {}, "power": "steady"}, "upgrading schema_version 3 to 4: power is str, not dict"),
    ("cell", {"params": {}, "bytes_min": "4 GB"},
     "upgrading schema_version 7 to 8: bytes_min is str, not int or float"),
    ("cell", {"telemetry": {"throttle": "power cap"}, "power": {"policy": "steady"}},
     "upgrading schema_version 13 to 14: telemetry.throttle is str, not list"),
    ("cell", {"telemetry": {"throttle": ["sw_power_cap"]}, "power": {"policy": "steady", "note": 3}},
     "power.note is int, not str"),
])
def test_a_field_a_step_reads_of_a_shape_no_writer_gave_is_a_bad_record_named_by_its_path(kind, fields, said):
    with pytest.raises(ValueError, match=f"^not a valid record \\(.*{re.escape(said)}\\)$"):
        upgrade({"schema_version": 1, **fields}, kind)


def test_a_steps_own_bug_raises_as_itself_never_as_a_bad_record(monkeypatch):
    """A step's programming error (a TypeError from its code, not from the record's shapes) must not hide as a
    record left out with a warning."""
    def buggy(data: dict, kind: str) -> dict:
        return data["schema_version"] + "1"  # int + str: the step's bug
    monkeypatch.setitem(MIGRATIONS, SCHEMA_VERSION - 1, buggy)
    with pytest.raises(TypeError):
        upgrade(json.loads(record().model_dump_json(by_alias=True)) | {"schema_version": SCHEMA_VERSION - 1}, "cell")


def test_upgrade_leaves_the_callers_data_alone():
    old = json.loads((SCHEMA1 / MANIFEST).read_text())
    before = json.dumps(old, sort_keys=True)
    upgrade(old, "manifest")
    assert json.dumps(old, sort_keys=True) == before


def reads_as_shipped(results: Path, run_id: str) -> None:
    """What every run in examples/results is held to (scripts/land-gpu-plan.py lands the H200's there): it reads
    whole at this schema, every cell it planned stored, each variant's facts as the run wrote them."""
    run = open_store(str(results)).read(run_id)
    assert run.problems == [] and run.manifest.schema_version == SCHEMA_VERSION
    assert len(run.cells) == run.manifest.cells_planned
    for name in {c.variant for c in run.cells}:
        written = json.loads(next((results / run_id).glob("manifest*.json")).read_text())
        info = run.manifest.variants[name]  # schema 1: from the frozen table; later: as the run wrote it
        assert info == (V1_VARIANTS[name] if written["schema_version"] == 1 else info.model_validate(
            written["variants"][name]))


@pytest.mark.parametrize("run_id", [r for r in open_store(str(SHIPPED)).runs()])
def test_every_shipped_run_reads_through_the_same_path(run_id):
    reads_as_shipped(SHIPPED, run_id)


EVIDENCE = REPO / "docs" / "evidence"


@pytest.mark.parametrize("folder", sorted(p.parent for p in EVIDENCE.rglob("manifest*.json")), ids=lambda p: p.name)
def test_every_run_kept_as_evidence_reads_and_keeps_its_keys(folder):
    """docs/evidence's runs (written at schema 5) read through the same path, and each cell's stored key is the
    key its upgraded params hash to: the new axes at their defaults leave it as it was."""
    from runner.shape import cell_key

    run = read_run(folder)
    assert run.problems == [] and run.manifest.schema_version == SCHEMA_VERSION
    assert len(run.cells) == run.manifest.cells_planned
    assert all(cell_key(c.experiment, c.variant, c.params) == c.key for c in run.cells)


def test_a_reader_keeps_a_field_it_does_not_know():
    data = json.loads(record().model_dump_json(by_alias=True))
    data["power_state_of_mind"] = "calm"
    data["correctness"]["ulps"] = 3
    cell = read_cell(data)
    assert cell.model_extra == {"power_state_of_mind": "calm"} and cell.correctness.model_extra == {"ulps": 3}
    again = json.loads(cell.model_dump_json(by_alias=True))  # a resumed spool writes it back unchanged
    assert again["power_state_of_mind"] == "calm" and again["correctness"]["ulps"] == 3
    data = json.loads(manifest().model_dump_json()) | {"cluster": "gke-1"}
    data["machine"]["rack"] = 7
    read = read_manifest(data)
    assert read.model_extra == {"cluster": "gke-1"} and read.machine.model_extra == {"rack": 7}


def test_a_writer_refuses_a_field_the_contract_does_not_define():
    fields = record().model_dump()
    with pytest.raises(ValidationError, match="1 unknown field: power_state_of_mind"):
        CellRecord(**fields, power_state_of_mind="calm")
    with pytest.raises(ValidationError, match="2 unknown fields: mood, cluster"):  # where it said 'field(s)'
        CellRecord(**fields, mood="calm", cluster="gke-1")
    with pytest.raises(ValidationError, match="unknown field"):
        GpuFacts(name="H200", sm_clock="1980")
    with pytest.raises(ValidationError, match="unknown field"):
        Manifest.model_validate(json.loads(manifest().model_dump_json()) | {"cluster": "gke-1"})


def test_the_v5_to_v6_step_gives_old_cells_the_new_axes_at_what_they_ran():
    cell = json.loads(record().model_dump_json(by_alias=True)) | {"schema_version": 5}
    for name in ("window", "fill", "bias", "softcap", "v_head_dim", "tp"):
        del cell["params"][name]
    read = read_cell(cell)
    assert (read.params.window, read.params.fill, read.params.bias, read.params.softcap, read.params.tp) == (
        None, 1.0, "none", None, 1)
    assert read.params.v_head_dim == read.params.head_dim


def test_a_v4_cell_reads_through_every_later_step():
    """4 -> 5 (sampled after the load), 5 -> 6 (the model axes at what it ran), then 6 -> 7 (one device), composed
    by `upgrade`."""
    old = _v3_cell(650.0, 1.2, "steady", 1.3) | {"schema_version": 4}
    old["telemetry"].update(sm_clock_mhz={"min": 1600, "median": 1650, "max": 1700}, clock_spread=0.06)
    for name in ("window", "fill", "bias", "softcap", "v_head_dim", "tp", "devices"):
        old["params"].pop(name, None)
    cell = read_cell(old)
    assert cell.schema_version == SCHEMA_VERSION and cell.power.sampled_in_load is False
    assert (cell.params.window, cell.params.fill, cell.params.tp, cell.params.v_head_dim, cell.params.devices) == (
        None, 1.0, 1, cell.params.head_dim, 1)


def test_the_v7_to_v8_step_recounts_the_bytes_of_a_masked_cell_and_rescales_its_bandwidth():
    """A v7 windowed decode counted its whole cache; read now, it counts the window's keys and its GB/s falls by as
    much. An unmasked v7 cell reads as it was written."""
    from helpers import params

    windowed = params(batch=8, seq_len=1, kv_seq_len=65536, heads=8, kv_heads=8, head_dim=64, window=1024)
    old = json.loads(record().model_dump_json(by_alias=True)) | {"schema_version": 7}
    old["params"] = json.loads(windowed.model_dump_json(by_alias=True))
    row = 8 * 64 * 4  # heads x head_dim x float32's bytes, for a query's row and a key's alike
    every_row = 2 * 8 * 1 * row + 2 * 8 * 65536 * row  # Q and O; K and V over the whole cache
    old |= {"bytes_min": every_row, "median_s": 1e-4, "gbps": every_row / 1e-4 / 1e9,
            "pct_of_bandwidth": 100 * every_row / 1e-4 / 1e9 / 4285}
    cell = read_cell(old)
    assert cell.bytes_min == 2 * 8 * 1 * row + 2 * 8 * 1024 * row  # the window's 1024 keys of each sequence
    assert cell.gbps == pytest.approx(cell.bytes_min / 1e-4 / 1e9)
    assert cell.pct_of_bandwidth == pytest.approx(100 * cell.gbps / 4285)
    plain = json.loads(record().model_dump_json(by_alias=True)) | {"schema_version": 7}
    assert read_cell(plain).model_dump(exclude={"schema_version"}) == read_cell(
        plain | {"schema_version": SCHEMA_VERSION}).model_dump(exclude={"schema_version"})


def written(version: int) -> list[dict]:
    """Every committed cell record (examples/results, docs/evidence, tests/fixtures) that its code wrote at
    `version`."""
    files = [p for folder in (SHIPPED, EVIDENCE, SCHEMA1.parent.parent) for p in sorted(folder.rglob("cells*.jsonl"))]
    return [cell for path in files for cell in lines(path) if cell["schema_version"] == version]


def test_schema_8s_frozen_count_is_the_one_its_writers_used():
    """Every committed record written at schema 8 (masked, padded and split cells among them) holds the bytes
    that the v7 -> v8 step's frozen count gives its params."""
    cells = written(8)
    assert len(cells) > 1000 and any(c["params"]["window"] and c["params"]["fill"] < 1 for c in cells)
    assert [c["bytes_min"] for c in cells] == [v8_bytes_min(c["params"]) for c in cells]


@pytest.mark.parametrize("shape, rows", [
    ({"causal": True, "seq_len": 4, "kv_seq_len": 16}, (8, 8)),  # top-left causal, T < S: keys past T unread
    ({"fill": 0.5, "seq_len": 10, "kv_seq_len": 10, "batch": 3}, (16, 16)),  # real tokens 1, 5 and 10
    ({"window": 3, "seq_len": 2, "kv_seq_len": 10, "batch": 1}, (2, 4)),  # keys 0..3 within reach of queries 0, 1
    ({"causal": True, "seq_len": 4, "kv_seq_len": 16, "pass": "fwd_bwd"}, (24, 24)),  # 3x with backward
])
def test_schema_8s_frozen_count_by_hand(shape, rows):
    """(query rows, key rows) x 64 bytes a row (2 heads x 8 float32s), each read or written twice."""
    p = {"batch": 2, "heads": 2, "kv_heads": 2, "head_dim": 8, "v_head_dim": 8, "dtype": "float32", "causal": False,
         "pass": "fwd", "window": None, "fill": 1.0} | shape
    assert v8_bytes_min(p) == 2 * rows[0] * 64 + 2 * rows[1] * 64


def test_cells_written_at_schema_7_read_with_schema_8s_bytes():
    """Records the old code wrote at schema 7 (every row counted) read with the rows that take part, their GB/s
    scaled alike; a cell without padding, window or a causal T < S reads as it was written."""
    cells = written(7)
    masked = [c for c in cells if c["params"]["window"] or c["params"]["fill"] < 1]
    assert len(masked) > 100
    for old in cells:
        new = read_cell(old)
        assert new.bytes_min == v8_bytes_min(old["params"]) <= old["bytes_min"]
        if old.get("gbps"):
            assert new.gbps == pytest.approx(old["gbps"] * new.bytes_min / old["bytes_min"])
        if not (old["params"]["window"] or old["params"]["fill"] < 1 or old["params"]["seq_len"] < old[
                "params"]["kv_seq_len"] and old["params"]["causal"]):
            assert new.bytes_min == old["bytes_min"]


def test_a_change_to_todays_byte_count_rewrites_no_old_record(monkeypatch):
    """The migration is frozen: today's metrics.bytes_min and the masks' counts, broken here, are not what it
    calls, so every old record reads as before."""
    from runner import masks, metrics

    old = written(7)[:400] + written(5)[:50] + written(3)[:50]
    before = [read_cell(c).model_dump() for c in old]
    for module, name in [(metrics, "bytes_min"), (metrics, "tensor_bytes"), (masks, "kept_rows"),
                         (masks, "keys_kept_in_sequence"), (masks, "lengths"), (masks, "fractions")]:
        monkeypatch.setattr(module, name, lambda *_: 1)
    assert [read_cell(c).model_dump() for c in old] == before


SPLIT = Path(__file__).with_name("fixtures") / "schema11-split" / "schema11-split-20261206-000000"  # by ff526d7


def test_the_v11_to_v12_step_makes_a_split_cells_shares_of_all_its_devices_ceilings():
    """Schema 11 rated a cell split across D devices against one device's ceilings; read now, its shares are of D,
    what today's runner writes for the same rates (runner.metrics), and a one-device cell reads as it was written."""
    written = {cell["key"]: cell for cell in lines(SPLIT / CELLS)}
    run = read_run(SPLIT)
    machine = run.manifest.machine
    assert {c.params.devices for c in run.cells} == {1, 2, 4} and all(c["pct_of_peak"] for c in written.values())
    for c in run.cells:
        old, devices = written[c.key], c.params.devices
        assert (c.pct_of_peak, c.pct_of_bandwidth) == pytest.approx(
            (old["pct_of_peak"] / devices, old["pct_of_bandwidth"] / devices))
        today = metrics.rates(c.flops, c.bytes_min, c.median_s,
                              metrics.Ceilings(machine.matmul_peak_tflops, machine.memory_bandwidth_gbps), devices)
        assert (c.pct_of_peak, c.pct_of_bandwidth) == pytest.approx((today["pct_of_peak"], today["pct_of_bandwidth"]))
        assert (c.tflops, c.gbps) == (old["tflops"], old["gbps"])  # the rates themselves were right


FIXTURES = SCHEMA1.parent.parent  # runs written by old attnbench code, each at the commit its spec's description names
WRITTEN_BY_OLD_CODE = sorted(p.parent for p in FIXTURES.rglob("manifest*.json"))


def test_every_schema_version_ever_written_has_records_written_by_its_code():
    """Schema 2 was never written (98da6b2 went from 1 to 3); every other version has records its own code wrote,
    committed here or shipped: two branches wrote schemas 5 and 6 in dialects of their own, kept each."""
    folders = [*WRITTEN_BY_OLD_CODE, *(p.parent for p in SHIPPED.rglob("manifest*.json"))]
    versions = {cell["schema_version"] for folder in folders for path in folder.glob("cells*.jsonl")
                for cell in lines(path)}
    assert versions == set(range(1, SCHEMA_VERSION + 1)) - {2}


@pytest.mark.parametrize("folder", WRITTEN_BY_OLD_CODE, ids=lambda p: p.name)
def test_a_run_written_by_old_code_reads_through_the_chain_under_its_keys(folder):
    """Each run reads whole at this version: every cell under the key it was written with, its params as it ran
    (the axes added since at their defaults) and its bytes by schema 8's count (a serving cell's by today's)."""
    run = read_run(folder)
    written = [cell for path in folder.glob("cells*.jsonl") for cell in lines(path)]
    assert run.problems == [] and len(run.cells) == len(written) == run.manifest.cells_planned
    assert run.manifest.schema_version == SCHEMA_VERSION and {c.schema_version for c in run.cells} == {SCHEMA_VERSION}
    assert [c.key for c in run.cells] == [cell_key(c.experiment, c.variant, c.params) for c in run.cells]
    as_written = {cell["key"]: cell for cell in written}
    assert sorted(as_written) == sorted(c.key for c in run.cells)
    assert all(c.params.as_dict().items() >= as_written[c.key]["params"].items() for c in run.cells)
    # schema 8's count, which today's keeps for every cell but a serving one (schema 9, runner.paging)
    counted = [metrics.bytes_min(c.params) if paging.serving(c.params) else v8_bytes_min(c.params.as_dict())
               for c in run.cells]
    assert [c.bytes_min for c in run.cells] == counted



def test_the_v12_to_v13_step_says_every_older_runs_ceilings_were_measured_at_its_own_start():
    """Before schema 13 every run measured its ceilings at its start: an older manifest with a ceiling (the H200 runs
    shipped, a CPU given its own) reads as measured in its own run at its start time; one without (a CPU) has no
    origin; cells are untouched."""
    folders = [p.parent for p in SHIPPED.rglob("manifest*.json")] + [SPLIT.parent.parent / "schema12-split" /
                                                                      "schema12-split-20261206-000000"]
    gpu_runs = 0
    for folder in folders:
        written = json.loads(next(folder.glob("manifest*.json")).read_text())
        if written["schema_version"] >= 13:
            continue
        machine = read_manifest(written).machine
        if written["machine"].get("matmul_peak_tflops") is None:
            assert machine.ceilings_origin is None
            continue
        gpu_runs += machine.platform == "gpu"
        origin = machine.ceilings_origin
        assert (origin.reused, origin.run_id, origin.measured_at) == (False, written["run_id"], written["started_at"])
        assert machine.matmul_peak_tflops == written["machine"]["matmul_peak_tflops"]
    assert gpu_runs > 10
    cell = json.loads(record().model_dump_json(by_alias=True)) | {"schema_version": 12}
    assert read_cell(cell).model_dump(exclude={"schema_version"}) == read_cell(
        cell | {"schema_version": SCHEMA_VERSION}).model_dump(exclude={"schema_version"})


def test_the_v12_to_v13_step_keeps_an_origin_already_given():
    """A manifest that already says where its ceilings came from (written at 13, relabelled) keeps what it says."""
    written = json.loads(manifest().model_dump_json(by_alias=True)) | {"schema_version": 12}
    written["machine"] |= {"matmul_peak_tflops": 700.0, "ceilings_origin": {"reused": True, "run_id": "earlier",
                                                                            "measured_at": "2026-12-01T00:00:00+00:00"}}
    assert read_manifest(written).machine.ceilings_origin.run_id == "earlier"


def claims_light_beside_a_reason(cell: CellRecord) -> bool:
    """A steady cell whose note says its load was light (a light verdict's words come first) or saw no throttle, while
    its telemetry lists a reason."""
    state, telemetry = cell.power, cell.telemetry
    if state is None or state.policy != "steady" or telemetry is None:
        return False
    reasons = [r for r in telemetry.throttle if r != "idle"]  # "idle" is no reason
    return bool(reasons) and (state.note.startswith("light load") or "no throttle" in state.note)


def test_no_shipped_steady_record_reads_as_light_beside_a_throttle_reason():
    """Every record committed (examples/results, docs/evidence, tests/fixtures), read as a reader reads it: none says
    its load was light, or saw no throttle, beside a throttle reason (issue 42); the two schema-3 cells that did
    read through the 13->14 step, their reasons and old note kept."""
    files = [p for folder in (SHIPPED, EVIDENCE, FIXTURES) for p in sorted(folder.rglob("cells*.jsonl"))]
    cells = [(path, cell) for path in files for cell in lines(path)]
    assert len(cells) > 5000
    assert [(p.parent.name, c["variant"]) for p, c in cells if claims_light_beside_a_reason(read_cell(c))] == []
    written = {(p.parent.name, c["variant"]): c for p, c in cells if c["schema_version"] < 14 and
               "light" in (c.get("power") or {}).get("note", "") and "power cap" in c["telemetry"]["throttle"]}
    assert sorted(written) == [("hopper-long-cold-20261203-023241", "te"), ("kernels-20261202", "pallas_mgpu")]
    for old in written.values():
        cell = read_cell(old)
        assert cell.telemetry.throttle == old["telemetry"]["throttle"] and cell.power.settled is False
        watts = old["power"]["note"].split("(")[1].split(",")[0]  # "210 W of 700 W": what the old runner read
        assert cell.power.note == (f"not light while sampled: its samples' telemetry saw power cap; a runner before "
                                   f"schema 14 judged the load light ({watts}) from readings before them")


def test_the_v13_to_v14_step_leaves_a_true_note_alone():
    """A light load with no reason, a capped one with the cap, a burst: as they were written."""
    base = json.loads(record().model_dump_json(by_alias=True)) | {"schema_version": 13}
    telemetry = {"source": "nvml", "samples": 3, "sm_clock_mhz": {"min": 1.0, "median": 1.0, "max": 1.0},
                 "clock_spread": 0.0}
    for note, reasons, policy in [("light load (200 W of 700 W, no throttle reason since the load began)", ["idle"],
                                   "steady"), ("at the power cap (690 W drawn)", ["power cap"], "steady"),
                                  ("light load", ["power cap"], "burst")]:
        cell = base | {"power": {"policy": policy, "settled": True, "note": note, "rule": "light"},
                       "telemetry": telemetry | {"throttle": reasons}}
        assert read_cell(cell).power.model_dump() == read_cell(cell | {"schema_version": 14}).power.model_dump()
    light = base | {"power": {"policy": "steady", "settled": True, "note": "light load", "rule": "light"},
                    "telemetry": telemetry | {"throttle": ["idle", "thermal (software)"]}}
    state = read_cell(light).power
    assert (state.settled, state.rule) == (False, "unsettled") and "saw thermal (software);" in state.note
    unthrottled = base | {"power": {"policy": "steady", "settled": True, "note": "settled, no throttle reason"},
                          "telemetry": telemetry | {"throttle": ["power cap"]}}
    state = read_cell(unthrottled).power
    assert state.settled is False and state.note.startswith("not light while sampled: its samples' telemetry saw "
                                                            "power cap;")


def test_the_v14_to_v15_step_names_the_first_timer_as_the_one_the_telemetry_spans():
    """Every runner read NVML over its first timer's samples (the headline it sampled first, device on a GPU): an
    older cell's telemetry reads as that timer's, a split cell's too, whose headline is wall, so its wall time is
    rated at no clock; a telemetry that names its timer keeps it; every committed record with telemetry has one."""
    from runner.record import Machine

    timing = {"median_s": 1e-3, "q1_s": 1e-3, "q3_s": 1e-3, "min_s": 1e-3, "samples": 3, "noise": 0.0,
              "converged": True}
    split = json.loads(record(params=params(devices=2, dtype="bfloat16")).model_dump_json(by_alias=True)) | {
        "schema_version": 14, "timer": "wall", "tflops": 100.0,
        "timings": [timing | {"timer": "device"}, timing | {"timer": "wall"}],
        "telemetry": {"source": "nvml", "samples": 3, "sm_clock_mhz": {"min": 1.0e3, "median": 1.0e3, "max": 1.0e3},
                      "clock_spread": 0.0}}
    machine = Machine(host="h", platform="gpu", device_kind="H200", device_count=2, compute_capability="9.0",
                      gpu=GpuFacts(sm_count=132))
    cell = read_cell(split)
    assert cell.telemetry.timer == "device" and metrics.clock_peak(cell, machine) is None  # wall: no clock read
    assert metrics.clock_peak_tflops(cell, machine, "device") == pytest.approx(2 * 4096 * 132 * 1e3 / 1e6)
    with pytest.raises(ValidationError, match="timings"):  # a malformed line is a problem to report, not a crash
        read_cell(split | {"timings": {"0": timing}})
    named = split | {"telemetry": split["telemetry"] | {"timer": "wall"}}
    assert read_cell(named).telemetry.timer == "wall" and metrics.clock_peak(read_cell(named), machine)
    files = [p for folder in (SHIPPED, EVIDENCE, FIXTURES) for p in sorted(folder.rglob("cells*.jsonl"))]
    telemetry = [cell.telemetry for path in files for cell in map(read_cell, lines(path)) if cell.telemetry]
    assert len(telemetry) > 1000 and {t.timer for t in telemetry} == {"device"}


BEFORE_KERNEL_SETTINGS = "c51bfaa"  # main before the manifest recorded XLA_FLAGS and the kernel environment


def older_record_module(monkeypatch):
    """runner/record.py as main had it before the kernel settings: a real older reader (skipped without the history)."""
    import subprocess
    import sys
    import types

    done = subprocess.run(["git", "show", f"{BEFORE_KERNEL_SETTINGS}:runner/record.py"], cwd=REPO, capture_output=True,
                          text=True)
    if done.returncode:
        pytest.skip(f"no git history holding {BEFORE_KERNEL_SETTINGS} here: {done.stderr.strip()}")
    module = types.ModuleType("record_before_kernel_settings")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # pydantic resolves its annotations there
    exec(compile(done.stdout, "record_before_kernel_settings.py", "exec"), module.__dict__)
    return module


def test_the_kernel_settings_need_no_step_a_manifest_before_them_reads_not_recorded_an_older_reader_keeps_them(
        monkeypatch):
    """No field an older reader knows changes: an older manifest lacks the two fields (None, said 'not recorded',
    never '(none)'), and a reader from before them keeps them as extra fields and writes them back unchanged."""
    old = read_run(FIXTURES / "schema15-clock" / "schema15-clock-20261206-000000").manifest
    assert (old.machine.xla_flags, old.machine.kernel_env) == (None, None)
    assert set(old.machine.kernel_settings().values()) == {"not recorded"}
    machine = manifest().machine.model_copy(update={"xla_flags": ["--xla_gpu_autotune_level=0"], "kernel_env": {}})
    data = json.loads(manifest(machine=machine).model_dump_json())
    assert read_manifest(data).machine.kernel_settings() == {"xla_flags": "--xla_gpu_autotune_level=0",
                                                             "kernel env": "(none)"}
    older = older_record_module(monkeypatch).read_manifest(data)
    assert older.machine.model_extra == {"xla_flags": ["--xla_gpu_autotune_level=0"], "kernel_env": {}}
    assert json.loads(older.model_dump_json()) == data


def test_earlier_facts_need_no_step_an_older_reader_keeps_them(monkeypatch):
    """A manifest's earlier_facts (the driver a resumed run's earlier cells ran under) is optional: one without it
    reads None, and a reader from before it keeps it as an extra field and writes it back unchanged."""
    assert read_run(FIXTURES / "schema15-clock" / "schema15-clock-20261206-000000").manifest.earlier_facts is None
    data = json.loads(manifest(earlier_facts={"gpu driver": ["570.10"]}).model_dump_json())
    assert read_manifest(data).earlier_facts == {"gpu driver": ["570.10"]}
    older = older_record_module(monkeypatch).read_manifest(data)
    assert older.model_extra["earlier_facts"] == {"gpu driver": ["570.10"]}
    assert json.loads(older.model_dump_json()) == data


def test_a_kernels_nan_and_inf_errors_are_written_and_read_back_as_themselves():
    """A kernel that writes NaN has NaN errors: pydantic wrote them as null, which no reader took back, so the run
    that measured the cell ended as an internal error at its next read of the record (exit 1)."""
    import math

    errors = Correctness(max_abs_err=math.nan, rel_err=math.nan, grad_rel_err={"dq": math.inf, "dk": -math.inf,
                                                                             "dv": 1.0}, tolerance=2e-3)
    line = record(status="incorrect", correctness=errors).model_dump_json(by_alias=True)
    for read in (CellRecord.model_validate_json(line), read_cell(json.loads(line))):  # the run's read, a store's
        assert math.isnan(read.correctness.rel_err) and math.isnan(read.correctness.max_abs_err)
        assert read.correctness.grad_rel_err == {"dq": math.inf, "dk": -math.inf, "dv": 1.0}


@pytest.mark.parametrize("fixture, after_settling", [("schema4/schema4-20261203-000000", True),
                                                     ("schema5-models/schema5-models-20261203-000000", False)])
def test_a_steady_manifest_says_whether_its_run_sampled_after_settling(fixture, after_settling):
    """The 4 -> 5 step says of a steady run's manifest what it says of its cells: sampled after the load settled;
    a manifest written since reads as sampled in the load."""
    manifest = read_manifest(json.loads((FIXTURES / fixture / "manifest.json").read_text()))
    assert manifest.spec["timing"]["power"] == "steady" and manifest.sampled_after_settling is after_settling


def test_a_runs_settings_are_its_argvs_beyond_its_spec_and_its_compile_cache_only_when_off():
    """What sets runs of one spec apart (runs' settings column, compare.previous): --compile-ahead off, a plan's
    filters, a compile cache that was off however it was set; never a folder each run names, nor the default."""
    from runner.record import HOW_OPTIONS, run_settings

    manifest = read_manifest(json.loads((FIXTURES / "schema15-clock" / "schema15-clock-20261206-000000" /
                                         "manifest.json").read_text()))
    argv = ["attnbench", "run", "s.yaml", "--out", "o", "--compile-cache", "/tmp/c", "--compile-ahead", "on",
            "--where", "tp=1", "seq_len=4096,8192", "--compile-ahead=off"]
    run = manifest.model_copy(update={"argv": argv, "compile_cache": "/tmp/c"})
    assert run_settings(run) == "--compile-ahead off --where tp=1 seq_len=4096,8192"
    assert run_settings(run.model_copy(update={"compile_cache": "off"}), HOW_OPTIONS) == (
        "--compile-ahead off --compile-cache off")
    assert run_settings(run.model_copy(update={"argv": argv[:9]})) == ""


@pytest.mark.parametrize("argv, settings", [
    (["run", "--compile-ahead", "off", "specs/lab5.yaml"], "--compile-ahead off"),  # the spec after an option
    (["run", "--measure-ceilings", "specs/lab5.yaml", "--out", "o"], "--measure-ceilings"),
    (["run", "specs/lab5.yaml", "--measure"], "--measure-ceilings"),  # argparse's prefixes
    (["run", "specs/lab5.yaml", "--compile-a", "off"], "--compile-ahead off"),
    (["run", "s.yaml", "--where", "tp=1", "--where", "seq_len=4096,8192", "--only", "a"],
     "--only a --where tp=1 seq_len=4096,8192"),  # a repeated filter extends; the order is the options'
    (["soak", "s.yaml", "--seconds", "30", "--variants", "cudnn"], "--variants cudnn"),
    (["run", "s.yaml", "--an-option-since-removed"], ""),
    ([], ""),  # a manifest from before argv was kept
])
def test_a_runs_settings_are_what_runs_own_parser_understood(argv, settings):
    """run_settings reads argv as `attnbench run` did: two runs made the same way have the same settings however
    their options were spelt or placed (compare.previous pairs them)."""
    from runner.record import run_settings

    manifest = read_manifest(json.loads((FIXTURES / "schema15-clock" / "schema15-clock-20261206-000000" /
                                         "manifest.json").read_text()))
    run = manifest.model_copy(update={"argv": ["attnbench", *argv] if argv else [], "compile_cache": "/tmp/c"})
    assert run_settings(run) == settings


def test_run_argv_gives_each_setting_again_as_one_word_whatever_it_holds():
    """run_argv (what recheck reruns B's settings with, and run_settings says) keeps each value one argument: run's
    parser reads them back as the run's own, a value holding a space included, and run_settings quotes it as a shell
    would; its words split on spaces would be other values."""
    from runner.arguments import _reader, run_argv
    from runner.record import HOW_OPTIONS, PLAN_OPTIONS, run_settings

    manifest = read_manifest(json.loads((FIXTURES / "schema15-clock" / "schema15-clock-20261206-000000" /
                                         "manifest.json").read_text()))
    argv = ["attnbench", "run", "s.yaml", "--only", "seq len", "--compile-ahead=off", "--variants", "xla", "cudnn",
            "--where", "seq_len=64,128", "--measure-ceilings", "--only", "masks"]
    run = manifest.model_copy(update={"argv": argv, "compile_cache": "off"})
    given = run_argv(run, HOW_OPTIONS + PLAN_OPTIONS)
    assert given == ["--compile-ahead", "off", "--compile-cache", "off", "--measure-ceilings", "--only", "seq len",
                     "masks", "--variants", "xla", "cudnn", "--where", "seq_len=64,128"]
    again, first = (_reader("run").parse_args(words) for words in (["s.yaml", *given], argv[2:]))
    assert vars(again) == vars(first) | {"compile_cache": "off"}
    assert run_settings(run, PLAN_OPTIONS) == "--only 'seq len' masks --variants xla cudnn --where seq_len=64,128"


RECHECK_15 = FIXTURES / "schema15-recheck" / "schema15-recheck-b-recheck"  # B-recheck as recheck wrote it at 5a89692


def test_a_recheck_written_at_schema_15_reads_as_the_recheck_of_its_run():
    """Schema 15's recheck wrote `rechecks` with no step: the 15 -> 16 step keeps it, and a manifest without it (every
    one before the field) is an ordinary run's."""
    from runner.compare import rechecks

    assert json.loads((RECHECK_15 / MANIFEST).read_text())["schema_version"] == 15
    run = read_run(RECHECK_15)
    assert run.problems == [] and run.manifest.schema_version == SCHEMA_VERSION
    assert run.manifest.rechecks == "schema15-recheck-b" and rechecks(run.manifest, "schema15-recheck-b")
    assert read_run(FIXTURES / "schema15-clock" / "schema15-clock-20261206-000000").manifest.rechecks is None


def test_a_reader_from_before_rechecks_says_a_recheck_is_a_newer_attnbenchs(monkeypatch):
    """A recheck changes how its run is read (never the run before B, never a night of B's series), and schema 15 took
    no step for it: an attnbench of that schema read B-recheck silently as an ordinary run, and its compare --against
    previous took it for the run before the next night (review s11-recheck, finding 3). A recheck's manifest is now of
    a schema such a reader says it does not know."""
    from runner import record as record_module, results

    text = manifest(run_id="b-recheck", rechecks="b").model_dump_json()
    for module in (record_module, results):
        monkeypatch.setattr(module, "SCHEMA_VERSION", 15)  # the last schema whose readers knew no rechecks
    assert results.parse_manifest(text, "b-recheck/manifest.json")[1] == [
        f"b-recheck/manifest.json: written by a newer attnbench (schema_version {SCHEMA_VERSION}; this one reads up to "
        "15): read as far as known, its new fields kept unread"]


def test_a_machines_resumable_facts_are_those_it_records_named_as_compare_names_them():
    """resumable_facts: the GPU's driver where NVML read one, under compare's material name for it; a machine with no
    GPU, or a GPU whose driver was not read, records none (None never stands for a value a resume goes on across)."""
    from runner.compare import MATERIAL
    from runner.record import RESUMABLE, resumable_facts

    cpu = manifest().machine
    gpu = cpu.model_copy(update={"gpu": GpuFacts(name="NVIDIA H200", driver="580.95")})
    assert resumable_facts(gpu) == {"gpu driver": "580.95"}
    assert resumable_facts(cpu) == {} and resumable_facts(gpu.model_copy(update={"gpu": GpuFacts(name="x")})) == {}
    assert set(RESUMABLE) <= MATERIAL
