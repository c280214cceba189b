"""Compiling less and once: the persistent compilation cache, untimed programs without autotuning, and one
executable for variants that lower to the same program.

XLA's autotuner runs candidate kernels to choose the fastest; a program that is never timed (the float32
reference, error checks, input staging) gains nothing from that and compiles several times faster without it.
Without autotuning XLA would give its matmuls Triton's default tiles, which run the float32 reference 4-5x slower
than cuBLAS's own choice, so untimed programs leave Triton GEMMs off.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
import threading
import time
import warnings
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from runner.record import Compilation

# No autotuning, and cuBLAS (its own heuristics) for the matmuls rather than Triton's untuned default tiles: the
# float32 reference at T = 32k ran 5.2 s a shape with autotuning off alone, 1.2 s so (docs/benchmarks.md)
UNTIMED_OPTIONS = {"xla_gpu_autotune_level": 0, "xla_gpu_enable_triton_gemm": False}
XLA_CACHES_DEFAULT = "xla_gpu_per_fusion_autotune_cache_dir"  # JAX's default for a local cache
# A cell asking for a deterministic backward: XLA's flag, which its cuDNN attention backward reads too (its
# force_deterministic: xla_gpu_deterministic_ops or xla_gpu_exclude_nondeterministic_ops), and TransformerEngine's
# variable, which TE-JAX reads while it lowers its fused-attention primitives (FusedAttnHelper)
DETERMINISTIC_OPTIONS = {"xla_gpu_deterministic_ops": True}
DETERMINISTIC_ENV = {"NVTE_ALLOW_NONDETERMINISTIC_ALGO": "0"}
UNTIMED_KEEP = 256  # untimed executables kept (a few per shape; a batch compiled ahead spans many shapes)
MODULE_NAME = re.compile(r"^module @\S+", re.MULTILINE)


def default_cache() -> Path:
    """attnbench/jax in the user's cache folder ($XDG_CACHE_HOME, else ~/.cache)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attnbench" / "jax"


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def _probe(location: str) -> None:
    """Create the cache folder and write, read and remove a probe object there; raises when that fails.

    In a bucket the probe object stays: JAX's cache "creates" its folder through gcsfs, which asks for the bucket's
    metadata (storage.buckets.get, which an object-level role lacks) and, refused, lists the bucket instead, where an
    empty bucket reads "Bucket does not exist" and the cache is off. One object under the cache's folder answers it.
    """
    if location.startswith("gs://"):
        from etils import epath  # JAX's own path layer for a gs:// cache

        probe = epath.Path(location) / GCS_MARKER
    else:
        Path(location).mkdir(parents=True, exist_ok=True)
        probe = Path(location) / ".attnbench-probe"
    probe.write_bytes(b"attnbench compile cache")
    if probe.read_bytes() != b"attnbench compile cache":
        raise OSError("what was written did not read back")
    if not location.startswith("gs://"):
        probe.unlink()


GCS_MARKER = ".attnbench-cache"  # kept in a gs:// cache's folder (see _probe)
PROBE_TIMEOUT_S = 10.0  # a bucket out of reach is given up on after this, not after the client's own retries


def _probe_within(location: str, seconds: float) -> None:
    """_probe, but a store that does not answer within `seconds` counts as unusable (TimeoutError)."""
    from runner.store import GCS_URI

    if location.startswith("gs://") and not GCS_URI.fullmatch(location):  # no answer would come: say so at once
        raise ValueError("not a bucket URI; expected gs://BUCKET[/PREFIX] (bucket: a-z 0-9 . _ -)")
    failure: list[BaseException] = []

    def probe() -> None:
        try:
            _probe(location)
        except BaseException as error:  # reported to the caller below
            failure.append(error)

    worker = threading.Thread(target=probe, name="attnbench-cache-probe", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TimeoutError(f"no answer within {seconds:g} s")
    if failure:
        raise failure[0]


def configure_cache(location: str | None) -> str:
    """Point JAX's persistent compilation cache at `location` (a folder, gs://… or 'off'; None: the default).

    A cache that cannot be used is skipped with one warning: compiling without it is slower, never wrong.
    Returns the location in use, or 'off'.
    """
    import jax

    location = str(default_cache()) if location is None else location
    if location != "off":
        location = location if location.startswith("gs://") else str(Path(location).expanduser())
        try:
            _probe_within(location, PROBE_TIMEOUT_S)
        except Exception as error:  # unwritable, unreachable, or no gs:// support here
            _warn(f"compile cache {location} cannot be used ({type(error).__name__}: {error}); compiling without it")
            location = "off"
    if location == "off":
        jax.config.update("jax_enable_compilation_cache", False)
        return location
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", location)
    # JAX builds XLA's own autotune-cache path with pathlib, which makes gs://b/p the relative gs:/b/p (results in
    # the pod's working folder, never shared): off for a bucket, where the compiled programs are shared anyway.
    jax.config.update("jax_persistent_cache_enable_xla_caches",
                      "none" if location.startswith("gs://") else XLA_CACHES_DEFAULT)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    _listen()
    return location


class _Events(threading.local):
    """Persistent-cache events of the compile running in this thread (JAX records them in the compiling thread)."""

    hits = misses = 0


_EVENTS = _Events()
_LISTENING: list[bool] = []


def _listen() -> None:
    if _LISTENING:
        return
    from jax import monitoring

    def on_event(event: str, **kwargs) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            _EVENTS.hits += 1
        elif event == "/jax/compilation_cache/cache_misses":
            _EVENTS.misses += 1

    monitoring.register_event_listener(on_event)
    _LISTENING.append(True)


_TROUBLE: list[str] = []


def _cache_trouble(messages: list[str]) -> None:
    """JAX warns once per unreadable cache entry and compiles anew; say so once per process, not per entry."""
    for message in messages:
        if "persistent compilation cache" not in message:
            warnings.warn(message, stacklevel=3)
        elif not _TROUBLE:
            _TROUBLE.append(message)
            _warn(f"compile cache: {message.splitlines()[0][:200]}; compiling anew (further such errors not shown)")


def _on_gpu() -> bool:
    import jax

    return jax.default_backend() == "gpu"


def fingerprint(lowered) -> str:
    """The lowered program's identity: its StableHLO text without the module's (function's) name."""
    return hashlib.sha256(MODULE_NAME.sub("module @m", lowered.as_text()).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Program:
    """A compiled timed program and how it came to be."""

    executable: object
    fingerprint: str
    compilation: Compilation


@dataclass(frozen=True)
class Lowered:
    """A timed program lowered (in the calling thread, which tracing needs), ready to compile in any thread."""

    lowered: object
    fingerprint: str
    seconds: float
    options: dict | None = None  # XLA compiler options (a deterministic cell's)


@contextmanager
def environment(values: dict[str, str]):
    """The process environment with `values` set, as it was after."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def lower_timed(fn: Callable, args: tuple, deterministic: bool = False) -> Lowered:
    """`fn` traced and lowered for `args`; a deterministic cell's with TE's variable set while it lowers, and XLA's
    determinism flag kept for its compile (in the fingerprint, so no non-deterministic program is shared with it)."""
    import jax

    start = time.perf_counter()
    with environment(DETERMINISTIC_ENV if deterministic else {}):
        lowered = jax.jit(fn).lower(*args)
    options = DETERMINISTIC_OPTIONS if deterministic else None
    identity = fingerprint(lowered) + ("-deterministic" if deterministic else "")
    return Lowered(lowered, identity, time.perf_counter() - start, options)


def compile_lowered(item: Lowered, ahead: bool = False) -> Program:
    """Compile with XLA's full autotuning (or load from the persistent cache); thread-safe, so programs can compile
    side by side: XLA releases the GIL while it compiles."""
    start = time.perf_counter()
    _EVENTS.hits = _EVENTS.misses = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        executable = item.lowered.compile(compiler_options=item.options)
    _cache_trouble([str(w.message) for w in caught])
    cached = True if _EVENTS.hits else (False if _EVENTS.misses else None)
    seconds = item.seconds + time.perf_counter() - start
    return Program(executable, item.fingerprint, Compilation(seconds=seconds, cached=cached, ahead=ahead))


def shared_program(item: Lowered, shared: dict[str, tuple[str, Program]]) -> Program | None:
    """The executable another variant of this shape compiled from the same program, if one did."""
    if item.fingerprint not in shared:
        return None
    owner, program = shared[item.fingerprint]
    return Program(program.executable, item.fingerprint, Compilation(seconds=item.seconds, shared_with=owner))


def compile_timed(fn: Callable, args: tuple, shared: dict[str, tuple[str, Program]],
                  deterministic: bool = False) -> Program:
    """Lower and compile `fn` for `args` with XLA's full autotuning, unless a variant in `shared` (fingerprint ->
    (variant, program), one shape's) already compiled the same program: then its executable is reused. The caller
    keeps what it compiled in `shared`, under its variant."""
    item = lower_timed(fn, args, deterministic)
    return shared_program(item, shared) or compile_lowered(item)


@dataclass(frozen=True)
class Forwarded:
    """An untimed program whose outputs that are its inputs unchanged are handed back as those very arrays: XLA copies
    an output that is a parameter, and a paged cell's pool (68.7 GB at B128 x 128k) passes through a variant's
    prepare unchanged."""

    executable: Any
    sources: tuple  # per output leaf: the index of the input leaf it is, or None where the program computes it
    tree: Any  # the outputs' structure

    def __call__(self, *args):
        import jax

        given, made = jax.tree.leaves(args), iter(self.executable(*args))
        return jax.tree.unflatten(self.tree, [next(made) if i is None else given[i] for i in self.sources])


class Untimed:
    """jit for programs that are never timed: compiled once per argument shape, without autotuning on a GPU.

    `recording()` lists the programs a piece of code would compile, by shape, without running it (call that code
    under jax.eval_shape); `warm` compiles one of them ahead, from any thread.
    """

    def __init__(self, keep: int = UNTIMED_KEEP):
        self._compiled: OrderedDict[tuple, object] = OrderedDict()
        self._lock = threading.Lock()
        self._local = threading.local()
        self.keep = keep

    def __call__(self, fn: Callable, *args, **static):
        key = (fn, tuple(sorted(static.items())), tuple(_aval(a) for a in args))
        record = getattr(self._local, "record", None)
        if record is not None:
            return record(key, fn, args, static)
        with self._lock:
            executable = self._compiled.get(key)
            if executable is not None:
                self._compiled.move_to_end(key)
        if executable is None:
            executable = self._compile(fn, args, static)
            self._store(key, executable)
        return executable(*args)

    def _store(self, key: tuple, executable) -> None:
        with self._lock:
            self._compiled[key] = executable
            while len(self._compiled) > self.keep:
                self._compiled.popitem(last=False)

    @contextmanager
    def recording(self, found: list[tuple]):
        """Inside (and under jax.eval_shape), calls are not run: each distinct (key, fn, avals, static) not compiled
        yet is appended to `found`, and zeros of the output's shape stand in for the result."""
        import jax
        import jax.numpy as jnp

        shapes: dict[tuple, object] = {}

        def record(key, fn, args, static):
            if key not in shapes:
                avals = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args)
                shapes[key] = jax.eval_shape(functools.partial(fn, **static), *avals)
                with self._lock:
                    known = key in self._compiled
                if not known:
                    found.append((key, fn, avals, static))
            return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes[key])

        self._local.record = record
        try:
            yield found
        finally:
            self._local.record = None

    def warm(self, key: tuple, fn: Callable, avals: tuple, static: dict) -> None:
        """Compile one recorded program now, so that its call later finds it."""
        self._store(key, self._compile(fn, avals, static))

    @staticmethod
    def _compile(fn: Callable, args: tuple, static: dict):
        """The compiled program, its outputs that are inputs unchanged handed back as those inputs (Forwarded)."""
        import jax

        call = functools.partial(fn, **static)
        traced = jax.make_jaxpr(call, return_shape=True)
        jaxpr, shape = traced(*args)
        place = {id(var): i for i, var in enumerate(jaxpr.jaxpr.invars)}
        sources = tuple(place.get(id(var)) for var in jaxpr.jaxpr.outvars)

        def computed(*given):
            return [x for x, source in zip(jax.tree.leaves(call(*given)), sources) if source is None]

        lowered = jax.jit(computed).lower(*args)
        executable = lowered.compile(compiler_options=UNTIMED_OPTIONS if _on_gpu() else None)
        return Forwarded(executable, sources, jax.tree.structure(shape))


def _aval(x) -> tuple:
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    return (tuple(shape), str(dtype)) if shape is not None else (type(x).__name__, x)


UNTIMED = Untimed()
