#!/usr/bin/env bash
# Stage tokamax 0.0.17 for the GPU machine (CPython 3.12, x86-64, jax 0.11.2 with flax 0.12, no network) into
# .devtokamax/, a folder of the checkout that git ignores, with the install line it needs there:
#
#   bash scripts/stage-tokamax.sh                     # here, from the project root (it downloads from PyPI)
#   source .devwheels/install.sh && source .devtokamax/install.sh     # there, before `python3 -m runner ...`
#
# `import tokamax` imports more than its attention needs: xprof (tokamax/_src/benchmarking.py imports
# xprof.cli.tools at import time, and that loads xprof's 40 MB profiler C API), qwix (quantized arrays),
# jaxtyping, einshape, immutabledict and tqdm. Those are staged, and nothing else: each wheel without its own
# dependencies (--no-deps), as `import tokamax` needs it. The rest of its declared dependencies are on the GPU
# machine already (jax, jaxlib, numpy, pydantic from .devwheels; absl-py, etils and ml_dtypes with flax and jax)
# or never imported by `import tokamax` (tensorboardx; xprof's duckdb, fire, google-cloud-storage, gcsfs, ...).
# install.sh imports tokamax at the end and names the module that is missing, if one is.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
folder=.devtokamax
# git must ignore it, or it is committed or counted twice in a device call (stage.sh does the same for .devwheels)
exclude="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qxF "/$folder/" "$exclude" 2>/dev/null || echo "/$folder/" >> "$exclude"
limit_mib=40  # a device call carries 64 MiB: the tracked tree (~14), .devwheels (~3) and this folder
wheels=(tokamax==0.0.17 xprof==2.24.2 qwix==0.1.8 jaxtyping==0.3.11 wadler-lindig==0.1.8 einshape==1.0
        immutabledict==4.3.1 tqdm==4.70.1)  # xprof: tokamax asks >= 2.23.1; jaxtyping imports wadler_lindig

rm -rf "$folder" && mkdir -p "$folder"
# binary wheels for exactly that machine; xprof >= 2.23 ships as py3-none-manylinux_2_27 only
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$folder" "${wheels[@]}"

cat > "$folder/install.sh" <<'EOF'
# Source on the GPU machine after .devwheels/install.sh (which puts /tmp/site on PYTHONPATH).
_tokamax_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$_tokamax_here"/*.whl || { echo ".devtokamax/install.sh: pip could not install the wheels" >&2; return 1; }
if _tokamax_said="$(python3 -c 'import tokamax; print("tokamax", tokamax.__version__, "ready")' 2>&1)"; then
  echo "${_tokamax_said##*$'\n'}"
else
  echo ".devtokamax/install.sh: import tokamax failed: ${_tokamax_said##*$'\n'}" >&2
  echo "  stage the package it names too (scripts/stage-tokamax.sh, its wheels)" >&2
  return 1
fi
EOF

size_mib=$(( $(du -sb "$folder" | cut -f1) / 1048576 ))
ls "$folder"
if (( size_mib >= limit_mib )); then
  echo "stage-tokamax: $folder is ${size_mib} MiB, over the ${limit_mib} MiB a device call can carry beside the rest" >&2
  exit 1
fi
echo "staged $folder (${size_mib} MiB): carry it with .devwheels; there: source .devwheels/install.sh && source $folder/install.sh"
