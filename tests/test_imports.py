"""The runner's imports: a tree with the shared types at the bottom (runner/shape.py), no circle anywhere, and the
record readable without the code that measures."""

import ast
import subprocess
import sys

from helpers import REPO

RUNNER = REPO / "runner"


def imports() -> dict[str, set[str]]:
    """Each runner module -> the runner modules it imports, at its top or inside a function alike (an import moved
    into a function to dodge a circle is still a circle)."""
    graph = {}
    for path in RUNNER.rglob("*.py"):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "runner":
                graph[name] |= {f"runner.{alias.name}" for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("runner."):
                graph[name].add(node.module)
            elif isinstance(node, ast.Import):
                graph[name] |= {alias.name for alias in node.names if alias.name.startswith("runner.")}
    return graph


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports (its modules in order, the first repeated last), or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        found = next((c for dep in sorted(graph.get(module, ())) if (c := visit(dep, path + [module]))), None)
        done.add(module)
        return found

    return next((c for module in sorted(graph) if (c := visit(module, []))), None)


def test_the_runner_imports_in_no_circle():
    assert circle(imports()) is None


def test_a_circle_is_found():
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set(), "c": {"b"}}) is None


def test_no_import_hides_behind_type_checking():
    assert not [p.name for p in RUNNER.rglob("*.py") if "TYPE_CHECKING" in p.read_text()]


def test_the_record_imports_neither_the_metrics_nor_the_power_readings():
    loaded = subprocess.run([sys.executable, "-c", "import sys, runner.record; print(sorted(sys.modules))"],
                            capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert "'runner.record'" in loaded and "'runner.metrics'" not in loaded and "'runner.power'" not in loaded


PLAN_ON_AN_L4 = """
import sys
from runner import cli, plan, run, shard, spool, store  # the run command's modules, up to its plan
from runner.machine import Device

l4 = Device("gpu", "NVIDIA L4", 8.9, 22 << 30)
for path in ("specs/serving.yaml", "specs/context-parallel.yaml"):
    work = plan.plan(cli._select(cli._load(path, None), None, None), l4)
    assert any("the device has 22.0 GiB" in (reason or "") for reason in work.declined), path
print(sorted(name for name in sys.modules if name.split(".")[0] in ("jax", "jaxlib")))
"""


def test_the_supervisor_plans_a_gpus_memory_skips_without_importing_jax():
    """`attnbench run` is a supervisor that imports no JAX (docs/design.md): its plan decides each cell's skips, the
    memory rule's too (runner.memory), from the device its worker described, here an L4's 22 GiB."""
    done = subprocess.run([sys.executable, "-c", PLAN_ON_AN_L4], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "[]"
