#!/usr/bin/env bash
# The GPU evidence in one go, on an NVIDIA GPU machine, from the project root:
#   scripts/gpu-check.sh OUTDIR [SPEC...]     (default specs: specs/lab5.yaml specs/hopper-long.yaml)
# runs the gpu-marked tests and each spec, and writes the results and one log (check.log) into OUTDIR.
set -uo pipefail
out=${1:?usage: scripts/gpu-check.sh OUTDIR [SPEC...]}
shift
specs=("$@")
((${#specs[@]})) || specs=(specs/lab5.yaml specs/hopper-long.yaml)
mkdir -p "$out"
log="$out/check.log"
status=0
run() { echo "\$ $*" | tee -a "$log"; "$@" 2>&1 | tee -a "$log"; local rc=${PIPESTATUS[0]}; [[ $rc == 0 ]] || status=$rc; }
export PYTHONUNBUFFERED=1
run python3 -m runner env
run python3 -m runner list
# no preallocation: the TE tests start `attnbench run`, whose worker needs GPU memory beside this process's
XLA_PYTHON_CLIENT_PREALLOCATE=false run python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_gpu.py tests/test_pallas_gpu.py
for spec in "${specs[@]}"; do
  run python3 -m runner run "$spec" --out "$out"
done
echo "gpu-check: exit $status" | tee -a "$log"
exit $status
