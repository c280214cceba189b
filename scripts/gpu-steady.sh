#!/usr/bin/env bash
# Issue 19's H200 evidence, in the parts one device call can hold (run from the project root, TE installed):
#   scripts/gpu-steady.sh OUTDIR crosscheck   the cross-check rows, and the runner of 65e3e74 (build/old-runner) at 8k/16k
#   scripts/gpu-steady.sh OUTDIR long          hopper-long: bench_runner cold+warm (steady), a burst run, the soak
#   scripts/gpu-steady.sh OUTDIR lab5          lab5: bench_runner cold+warm
set -uo pipefail
out=${1:?usage: scripts/gpu-steady.sh OUTDIR crosscheck|long|lab5}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
day=$(date -u +%Y%m%d)
case "$2" in
  crosscheck)
    python3 scripts/steady_crosscheck.py "$out/steady-crosscheck-$day.json"
    PYTHONPATH="$PWD/build/old-runner:${PYTHONPATH:-}" python3 scripts/steady_crosscheck.py \
      "$out/steady-crosscheck-65e3e74-$day.json" --rows cudnn:fwd:8192:steady,cudnn:fwd:16384:steady ;;
  long)
    python3 scripts/bench_runner.py specs/hopper-long.yaml --out "$out"
    python3 -m runner run specs/hopper-long.yaml --power burst --out "$out/runs" --run-id "hopper-long-burst-$day"
    python3 -m runner soak specs/soak.yaml --out "$out/runs" --run-id "soak-$day" ;;
  lab5)
    python3 scripts/bench_runner.py specs/lab5.yaml --out "$out" ;;
esac
