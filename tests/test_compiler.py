"""runner/compiler.py: the persistent compilation cache (hit, miss, corrupt, unreachable) and the rule that two
variants lowering to the same program share one executable. Each cache case runs in a fresh process, as a run
does, so JAX's in-process caches cannot answer instead of the persistent one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from conftest import BUCKET
from helpers import REPO
from runner import compiler

COMPILE = """
import json, sys, jax, jax.numpy as jnp
from runner import compiler
used = compiler.configure_cache(sys.argv[1])
program = compiler.compile_timed(lambda x: jnp.sin(x) @ x, (jax.ShapeDtypeStruct((32, 32), jnp.float32),), {})
print(json.dumps({"used": used, "cached": program.compilation.cached}))
"""
# the folder XLA's own autotune cache would use (what JAX puts in the compile options it passes XLA)
AUTOTUNE_DIR = """
import sys
from runner import compiler
used = compiler.configure_cache(sys.argv[1])
from jax._src import compiler as jax_compiler
options = jax_compiler.get_compile_options(num_replicas=1, num_partitions=1)
print(used, repr(options.executable_build_options.debug_options.xla_gpu_per_fusion_autotune_cache_dir))
"""
BUCKET_METADATA = re.compile(r"/storage/v1/b/[^/?]+(\?.*)?")  # storage.buckets.get, not an object's URL


def compile_in_a_new_process(cache: str, **env: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", COMPILE, cache], capture_output=True, text=True, cwd=REPO,
                          timeout=120, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_the_second_compile_of_a_program_is_a_cache_hit(tmp_path):
    first, _ = compile_in_a_new_process(str(tmp_path / "cache"))
    second, _ = compile_in_a_new_process(str(tmp_path / "cache"))
    assert first == {"used": str(tmp_path / "cache"), "cached": False}
    assert second == {"used": str(tmp_path / "cache"), "cached": True}


def test_a_corrupt_entry_is_compiled_anew_with_one_warning(tmp_path):
    compile_in_a_new_process(str(tmp_path / "cache"))
    for entry in (tmp_path / "cache").glob("*-cache"):
        entry.write_bytes(b"not an executable")
    again, stderr = compile_in_a_new_process(str(tmp_path / "cache"))
    assert again["cached"] is False
    assert stderr.count("warning: compile cache:") == 1 and "Error reading persistent compilation cache" in stderr


def test_a_cache_in_a_bucket_is_shared_by_later_processes(emulator):
    """The GKE Job's setting: the cache beside the results, in the bucket (gcsfs, through JAX's etils)."""
    location = f"gs://{BUCKET}/jax-cache"
    assert compile_in_a_new_process(location)[0] == {"used": location, "cached": False}
    assert compile_in_a_new_process(location)[0] == {"used": location, "cached": True}


def test_a_bucket_cache_works_where_the_bucket_metadata_is_refused(gate):
    """roles/storage.objectUser has no storage.buckets.get; JAX's cache asks for it (through gcsfs) as it starts,
    in a bucket still empty on a project's first run."""
    gate.refuse = lambda method, path: 403 if method == "GET" and BUCKET_METADATA.fullmatch(path) else None
    location = f"gs://{BUCKET}/jax-cache"
    first, stderr = compile_in_a_new_process(location)
    assert first == {"used": location, "cached": False}, stderr
    assert gate.refused, "the test must refuse the bucket-metadata call it guards against"
    assert compile_in_a_new_process(location)[0] == {"used": location, "cached": True}


def test_xla_keeps_its_own_caches_local_or_off(tmp_path, emulator):
    """JAX joins XLA's autotune-cache folder to a gs:// location with pathlib (gs:/b/p, a relative local path)."""
    def autotune_dir(location: str) -> str:
        done = subprocess.run([sys.executable, "-c", AUTOTUNE_DIR, location], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    local, bucket = str(tmp_path / "cache"), f"gs://{BUCKET}/jax-cache"
    autotune = str(Path(local) / "xla_gpu_per_fusion_autotune_cache_dir")  # JAX's default beside a local cache
    assert autotune_dir(local) == f"{local} {autotune!r}"
    assert autotune_dir(bucket) == f"{bucket} ''"


def test_an_unwritable_folder_is_skipped_with_one_warning(tmp_path):
    (tmp_path / "a-file").write_text("a file where a folder should be")
    location = str(tmp_path / "a-file" / "below")
    result, stderr = compile_in_a_new_process(location)
    assert result == {"used": "off", "cached": None}
    assert stderr.count(f"warning: compile cache {location} cannot be used") == 1


def test_a_missing_bucket_is_skipped_with_one_warning(emulator):
    location = "gs://no-such-bucket-attnbench/cache"
    result, stderr = compile_in_a_new_process(location)
    assert result == {"used": "off", "cached": None}
    assert stderr.count(f"warning: compile cache {location} cannot be used (FileNotFoundError") == 1


def test_a_bucket_out_of_reach_is_given_up_on_within_the_probes_time(monkeypatch):
    def hangs(location):
        time.sleep(60)

    monkeypatch.setattr(compiler, "_probe", hangs)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="no answer within 0.2 s"):
        compiler._probe_within("gs://somewhere/cache", 0.2)
    assert time.monotonic() - start < 5


def test_a_cache_uri_that_names_no_bucket_is_given_up_on_without_waiting(monkeypatch):
    """Refused before any probe starts, so there is no probe's time to wait out (it waited the probe's full 10 s);
    judged by the probes begun, not by a clock that a loaded machine slows."""
    probed = []
    monkeypatch.setattr(compiler, "_probe", lambda location: probed.append(location) or time.sleep(60))
    with pytest.raises(ValueError, match=r"^not a bucket URI; expected gs://BUCKET\[/PREFIX\]"):
        compiler._probe_within("gs://No_Such!/cache", 0.5)
    assert probed == []


def test_off_means_no_cache(tmp_path):
    assert compile_in_a_new_process("off")[0] == {"used": "off", "cached": None}


def _attention(implementation):
    import functools

    return functools.partial(jax.nn.dot_product_attention, implementation=implementation)


def test_variants_that_lower_to_one_program_share_its_executable():
    args = tuple(jax.ShapeDtypeStruct((1, 16, 4, 8), jnp.float32) for _ in range(3))
    shared: dict = {}

    def compile_as(variant, fn):
        program = compiler.compile_timed(fn, args, shared)
        shared.setdefault(program.fingerprint, (variant, program))  # the caller keeps what it compiled
        return program

    xla = compile_as("xla", _attention("xla"))
    auto = compile_as("auto", _attention(None))  # None means XLA off cuDNN
    naive = compile_as("naive", lambda q, k, v: jnp.einsum("btnh,bsnh->btnh", q, k) + v)
    assert auto.fingerprint == xla.fingerprint and auto.executable is xla.executable
    assert auto.compilation.shared_with == "xla" and xla.compilation.shared_with is None
    assert naive.fingerprint != xla.fingerprint and naive.compilation.shared_with is None


def test_a_fingerprint_ignores_only_the_functions_name():
    args = (jax.ShapeDtypeStruct((8,), jnp.float32),)

    def double(x):
        return 2 * x

    def twice(x):
        return 2 * x

    def thrice(x):
        return 3 * x

    prints = [compiler.fingerprint(jax.jit(f).lower(*args)) for f in (double, twice, thrice)]
    assert prints[0] == prints[1] != prints[2]


def test_an_untimed_program_hands_back_an_input_it_returns_unchanged_as_that_very_array():
    """XLA copies an output that is a parameter: a paged cell's pool (68.7 GB at B128 x 128k) passed through a
    variant's prepare would be held twice. The other outputs are computed, in their places and structure."""
    pool, q = jnp.ones((6, 4)), jnp.arange(3.0)
    untimed = compiler.Untimed()
    made = untimed(lambda q, pool, scale: (q * scale, {"pool": pool, "row": pool[0]}), q, pool, 2.0)
    assert made[1]["pool"] is pool and made[1]["row"] is not pool
    assert made[0].tolist() == [0.0, 2.0, 4.0] and made[1]["row"].tolist() == [1.0] * 4
    assert untimed(lambda x: x + 0, pool) is not pool  # a computed copy stays one
