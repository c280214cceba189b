"""Shared test helpers: tiny shapes, a fast timing section, spec and params builders, the CLI in this process (its
exit code, output, time and memory) or in a subprocess."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import yaml

from runner.cells import resolve
from runner.shape import Params

REPO = Path(__file__).resolve().parents[1]
FAST_TIMING = {"warmup": 0, "min_samples": 2, "max_samples": 3, "budget_s": 0.05}
H200_MEMORY = int(104.85 * 2**30)  # JAX's bytes_limit on an H200: the low edge of the 104.9 GiB its runs' skip
# lines say (tests/test_memory_records.py reads them), not 75 % of its 141 GiB (105.75 GiB)
TINY = {"batch": 1, "seq_len": 8, "heads": 4, "head_dim": 8, "dtype": "float32"}


def spec_data(*experiments: dict, **top) -> dict:
    """A valid spec document: tiny defaults, fast timing, the given experiments (one xla experiment if none)."""
    experiments = experiments or ({"name": "a", "variants": ["xla"]},)
    return {"name": "test", "defaults": dict(TINY), "timing": dict(FAST_TIMING), "experiments": list(experiments), **top}


def write_spec(path: Path, data: dict | str) -> Path:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def params(**shape) -> Params:
    """Resolved cell parameters; tiny unless overridden (pass_ sets `pass`)."""
    shape = {**TINY, "kv_seq_len": None, "kv_heads": None, "causal": False, "pass": shape.pop("pass_", "fwd"), "devices": 1,
             **shape}
    return resolve(shape)


DASHBOARD_APP = REPO / "dashboard" / "app.py"
DASHBOARD_SERVER = REPO / "dashboard" / "serve.py"  # app.py served as `attnbench dashboard` serves it


def open_app(monkeypatch, results: Path | str | None = None, **query):
    """The dashboard run by streamlit's AppTest on `results` (its default, the shipped runs, when None)."""
    from streamlit.testing.v1 import AppTest  # only the dashboard tests need streamlit

    from dashboard import data

    # the shipped runs named, not left to the default, which is results/ once `make demo` wrote a run there
    monkeypatch.setenv(data.RESULTS_ENV, str(data.SHIPPED_RESULTS if results is None else results))
    app = AppTest.from_file(str(DASHBOARD_APP), default_timeout=60)
    for key, value in query.items():
        app.query_params[key] = value
    return app.run()


def charts(app) -> int:
    """How many plotly charts an AppTest run drew."""
    return len(app.get("plotly_chart"))


def figures(app) -> list[dict]:
    """The plotly figures an AppTest run drew, as the JSON the browser receives, typed arrays as lists."""
    import json

    return [json.loads(chart.proto.spec, object_hook=_array) for chart in app.get("plotly_chart")]


def _array(value: dict):
    """plotly sends numeric arrays as {'dtype', 'bdata': base64} (plotly.js typed arrays)."""
    if set(value) - {"shape"} != {"dtype", "bdata"}:
        return value
    import base64

    import numpy as np

    return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).tolist()


def command(*args) -> list[str]:
    """`python -m runner ARGS`, run from the repository root without installing."""
    return [sys.executable, "-m", "runner", *map(str, args)]


def environment(**extra: str) -> dict[str, str]:
    """This process's environment plus `extra`, without a terminal width: output goes to pipes, as in a pod."""
    return {**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}, **extra}


def attnbench(*args, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    """Run the CLI to the end, output captured as text."""
    return subprocess.run(command(*args), cwd=REPO, capture_output=True, text=True, timeout=timeout, env=environment(**env))


@dataclass
class Outcome:
    """What `main(ARGS)` did in this process."""

    code: int
    out: str
    err: str
    seconds: float
    peak_mib: float  # the most memory Python held at once while it ran (tracemalloc)

    @property
    def errors(self) -> list[str]:
        return self.err.splitlines()


def in_process(capsys, *args, measure: bool = False) -> Outcome:
    """`attnbench ARGS` as runner.cli.main in this process; `measure` also traces its peak memory (slower)."""
    from runner.cli import main

    capsys.readouterr()  # what earlier steps of the test printed is theirs
    if measure:
        tracemalloc.start()
    start = time.perf_counter()
    try:
        code = main([str(a) for a in args])
    finally:
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] if measure else 0
        tracemalloc.stop()
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err, seconds, peak / 2**20)


def table_rows(out: str) -> list[dict[str, str]]:
    """A rich table's rows by header; a cell wrapped onto the next lines is joined back."""
    lines = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith(("│", "┃"))]
    header, rows = lines[0], []
    for cells in lines[1:]:
        if cells[0]:
            rows.append(dict(zip(header, cells)))
        else:
            rows[-1] = {k: f"{v} {c}".strip() for (k, v), c in zip(rows[-1].items(), cells)}
    return rows


def children(pid: int) -> list[int]:
    """The process ids whose parent is `pid`."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status").read_text() if Path(f"/proc/{pid}/status").exists() else ""
    return "State:\tZ" not in status  # a zombie has exited, its parent just has not reaped it


def script(path: str):
    """A repository script (e.g. scripts/bench_runner.py) as a module, registered under its name so its dataclasses
    resolve their annotations."""
    file = REPO / path
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = sys.modules[file.stem] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_gpu(monkeypatch, capability: str | None) -> None:
    """jax.devices() answers one device of this compute capability (None: a device that reports none, as a CPU)."""
    import types

    import jax

    device = types.SimpleNamespace(compute_capability=capability) if capability else types.SimpleNamespace()
    monkeypatch.setattr(jax, "devices", lambda: [device])
