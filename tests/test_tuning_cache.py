"""runner/tuning_cache.py: a library's tuning kept per variant, shape, GPU and library versions beside the compile
cache, in a local folder or a bucket (the project's stores), and read back by a later run; a corrupt or foreign
entry is ignored with a warning and never fails a cell."""

from __future__ import annotations

import json

import pytest

from conftest import BUCKET
from helpers import REPO, attnbench, params, spec_data, write_spec
from runner.store import read_run
from runner.tuning_cache import FOLDER, TuningCache, open_cache

H200 = "NVIDIA H200"
VERSIONS = {"tokamax": "0.0.17", "jax": "0.11.2", "jaxlib": "0.11.2", "cuda_runtime": "12.9", "cudnn": "9.19.1",
            "flax": "0.12.0"}
RESULT = '{"device_kind": "NVIDIA H200", "data": [], "tokamax_version": "0.0.17"}'


def cache_at(location, gpu: str = H200, **versions) -> TuningCache:
    return TuningCache(str(location), gpu, {**VERSIONS, **versions})


def test_an_entry_is_keyed_by_variant_shape_gpu_and_the_versions_that_decide_a_tuning(tmp_path):
    p = params(seq_len=16, tune=True)
    name = cache_at(tmp_path).name("tokamax_mosaic", p)
    assert name.startswith(f"{FOLDER}/tokamax_mosaic-") and name == cache_at(tmp_path).name("tokamax_mosaic", p)
    others = {cache_at(tmp_path).name("tokamax_triton", p), cache_at(tmp_path).name("tokamax_mosaic", params(seq_len=32,
              tune=True)), cache_at(tmp_path).name("tokamax_mosaic", params(seq_len=16, tune=True, pass_="fwd_bwd")),
              cache_at(tmp_path, gpu="NVIDIA H100 80GB HBM3").name("tokamax_mosaic", p),
              *(cache_at(tmp_path, **{lib: "other"}).name("tokamax_mosaic", p)
                for lib in ("tokamax", "jax", "jaxlib", "cuda_runtime", "cudnn"))}
    assert name not in others and len(others) == 9
    assert cache_at(tmp_path, flax="0.13.0").name("tokamax_mosaic", p) == name  # flax decides no tuning


def test_a_kept_tuning_reads_back_from_a_local_folder_beside_the_compile_cache(tmp_path):
    p = params(tune=True)
    cache_at(tmp_path / "jax").put("tokamax_mosaic", p, RESULT, 9.7)
    kept = json.loads((tmp_path / "jax" / cache_at(tmp_path).name("tokamax_mosaic", p)).read_text())
    assert kept["gpu"] == H200 and kept["versions"]["tokamax"] == "0.0.17" and kept["seconds"] == 9.7
    assert cache_at(tmp_path / "jax").get("tokamax_mosaic", p) == RESULT  # a later run's cache
    assert cache_at(tmp_path / "jax").get("tokamax_mosaic", params(seq_len=16, tune=True)) is None
    assert cache_at(tmp_path / "jax", tokamax="0.0.18").get("tokamax_mosaic", p) is None


def test_a_kept_tuning_travels_in_the_bucket_as_the_compile_cache_does(emulator):
    p = params(tune=True)
    location = f"gs://{BUCKET}/nightly-jax-cache"  # k8s/render.py's compile cache beside gs://…/nightly
    cache_at(location).put("tokamax_mosaic", p, RESULT, 9.7)
    name = cache_at(location).name("tokamax_mosaic", p)
    assert json.loads(emulator.text(f"nightly-jax-cache/{name}"))["result"] == RESULT
    assert cache_at(location).get("tokamax_mosaic", p) == RESULT  # the next pod, the next night


def test_a_corrupt_entry_is_ignored_with_a_warning(tmp_path, capsys):
    p, cache = params(tune=True), cache_at(tmp_path)
    (tmp_path / FOLDER).mkdir()
    (tmp_path / cache.name("tokamax_mosaic", p)).write_text('{"format": 1, "result": "{\\"device_ki')  # cut short
    assert cache.get("tokamax_mosaic", p) is None
    warning = capsys.readouterr().err
    assert warning.count("\n") == 1 and "is not a tuning entry (JSONDecodeError" in warning and "tuning anew" in warning


def test_an_entry_of_another_gpu_or_version_is_ignored_with_a_warning(tmp_path, capsys):
    """An entry copied under this name (from another machine, or by hand) names what it was tuned for."""
    p, here = params(tune=True), cache_at(tmp_path)
    cache_at(tmp_path / "elsewhere", tokamax="0.0.16").put("tokamax_mosaic", p, RESULT, 1.0)
    (tmp_path / FOLDER).mkdir()
    (tmp_path / here.name("tokamax_mosaic", p)).write_bytes(
        (tmp_path / "elsewhere" / cache_at(tmp_path, tokamax="0.0.16").name("tokamax_mosaic", p)).read_bytes())
    assert here.get("tokamax_mosaic", p) is None
    warning = capsys.readouterr().err
    assert "is another's entry (versions {" in warning and "'tokamax': '0.0.16'" in warning


def test_a_store_that_cannot_be_written_or_read_is_warned_about_never_raised(tmp_path, capsys):
    (tmp_path / "file").write_text("not a folder")
    cache = cache_at(tmp_path / "file" / "jax")
    cache.put("tokamax_mosaic", params(tune=True), RESULT, 1.0)
    assert cache.get("tokamax_mosaic", params(tune=True)) is None
    assert "could not be written" in capsys.readouterr().err


def test_no_tuning_cache_when_the_compile_cache_is_off(tmp_path):
    assert open_cache("off", H200, VERSIONS) is None
    assert open_cache(str(tmp_path), H200, VERSIONS) == cache_at(tmp_path)


@pytest.mark.slow
def test_a_tuned_cell_runs_whole_and_a_later_run_reads_its_tuning_from_the_cache(tmp_path):
    """tests/variants/self_tuning.py tunes as tokamax does: the first run tunes (phase `tune`) and keeps its result
    beside the compile cache; the second reads it (the record says cached) and the untuned cell beside it is untouched."""
    experiment = {"name": "tuned", "variants": ["test_self_tuning", "xla"], "sweep": {"tune": [False, True]}}
    spec = write_spec(tmp_path / "spec.yaml", spec_data(experiment))
    cells = {}
    for run in ("first", "second"):
        done = attnbench("run", spec, "--out", tmp_path, "--run-id", run, "--compile-cache", tmp_path / "cache",
                         ATTNBENCH_VARIANTS=str(REPO / "tests" / "variants"))
        assert done.returncode == 0, done.stderr
        cells[run] = {(c.variant, c.params.tune): c for c in read_run(tmp_path / run).cells}
    first, second = cells["first"][("test_self_tuning", True)], cells["second"][("test_self_tuning", True)]
    assert first.status == second.status == "ok" and first.correctness.rel_err < 2e-3
    assert first.tuning.tuner == "test.self_tuning" and first.tuning.cached is False and second.tuning.cached is True
    assert first.tuning.config == second.tuning.config and len(first.tuning.candidates) == 2
    assert first.phases["tune"] > 0 and "tune" in second.phases and first.phases["compile"] > 0
    assert len(list((tmp_path / "cache" / FOLDER).glob("test_self_tuning-*.json"))) == 1
    untuned = cells["second"][("test_self_tuning", False)]
    assert untuned.status == "ok" and untuned.tuning is None and "tune" not in untuned.phases
    assert cells["first"][("xla", True)].status == "skipped"
    assert cells["first"][("xla", True)].reason == ("xla declines a tuned kernel (tune: true, the library's "
                                                    "autotuner): it implements none")
