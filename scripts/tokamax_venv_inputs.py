"""What .venv-tools/tokamax is built from, one line: the running interpreter's version and pyproject.toml's
requirements that `pip install '.[jax,tokamax]'` reads. scripts/install-test-tools.sh rebuilds the venv when it
changes; tests/test_tokamax_cpu.py fails when the venv's stamp is not today's line."""

import json
import platform
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

project = tomllib.loads(PYPROJECT.read_text())["project"]
extras = project["optional-dependencies"]
print(json.dumps({"python": platform.python_version(), "dependencies": project["dependencies"],
                  "jax": extras["jax"], "tokamax": extras["tokamax"]}))
