#!/usr/bin/env bash
# The H200 evidence that issues 37 (training), 38 (serving) and 42 (GPU-hours) wait for, as named steps that one
# device call runs in order until its deadline, from the project root with tokamax staged (scripts/stage-tokamax.sh):
#   DEADLINE=$(( $(date +%s) + 540 )) [FROM=results/gpu-plan] scripts/gpu-plan.sh OUTDIR STEP...   (`list`: the steps)
# Each run writes into OUTDIR/results under a dated run id (DAY: the first call's date in UTC, kept in OUTDIR/day).
# FROM: the folder an earlier call brought back, carried into this one; it is copied into OUTDIR first, so its runs
# resume under their day, even after midnight, and every step that ended there (not cut by its deadline) is passed
# over: each call can name the same steps (docs/benchmarks.md, "What the H200 is waited for"). It exits 1 if any
# step failed, one passed over that failed in an earlier call and one its deadline cut among them (exit 124, or 137
# where it outlived the TERM by 15 s): a call whose deadline cut a step exits 1 (one that only left steps unstarted
# does not). Every step's output goes to OUTDIR/plan.log, and a short account (command, exit, seconds) to
# OUTDIR/steps.txt; OUTDIR/gpu names the GPU (nvidia-smi; none without one: land-gpu-plan.py lands an H200's alone).
# PACK=FILE: at its exit, a failed one too (not a KILL), OUTDIR packed as FILE.0, FILE.1 ... (tar.gz cut at 15 MiB: a
# device call brings back at most 8 files of 16 MiB from $OUT, two folders down, where one run's folder alone holds
# more); put OUTDIR outside $OUT and PACK under it. `scripts/gpu-plan.sh unpack PARTS_FOLDER FOLDER` unpacks them into
# FOLDER, replaced only where they unpack (no part, a torn one: FOLDER stays as it was, exit 2).
set -uo pipefail
declare -A STEPS=(
  [env]="python3 -m runner env"
  [probe-energy]="python3 scripts/probe_stream.py OUTDIR/probe-energy-DAY.json 4 8192"
  # -v: each test's verdict is in plan.log as it ends, where a deadline cuts the suite; the tests against the direct
  # protocol are left to cross and cross-carried, which measure the same cells among their rows
  [gputests]="python3 -m pytest -m gpu -v -p no:cacheprovider tests/test_gpu.py tests/test_pallas_gpu.py tests/test_paged_gpu.py --deselect tests/test_gpu.py::test_device_tflops_match_an_independent_direct_measurement --deselect tests/test_gpu.py::test_a_steady_cell_that_carries_the_cap_of_the_cell_before_matches_the_direct_measurement"
  [train-fwd]="RUN training-fwd specs/training.yaml --only fwd"
  [train-fwdbwd]="RUN training-fwdbwd specs/training.yaml --only fwd-bwd"
  [train-packed]="RUN training-packed specs/training.yaml --only packed deterministic"
  [train-tuned]="RUN training-tuned specs/training.yaml --only tuned"
  # each model axis, FP8 and MLA at the small shape, every variant against the float32 reference; fp8 and chunked at 4k+
  [train-rest]="RUN training-rest specs/training.yaml --only fp8 chunked axes logits mla packed-small deterministic-small"
  [train-burst]="RUN training-fwd-burst specs/training.yaml --only fwd --power burst"
  [serve-sweep]="RUN serving-sweep specs/serving.yaml --only decode-sweep"
  [serve-rest]="RUN serving-rest specs/serving.yaml --only dense shuffled ragged multi-token page-size mla"
  [serve-burst]="RUN serving-sweep-burst specs/serving.yaml --only decode-sweep --power burst"
  [bench-lab5]="python3 scripts/bench_runner.py specs/lab5.yaml --out OUTDIR/bench"
  [bench-hopper]="python3 scripts/bench_runner.py specs/hopper-long.yaml --out OUTDIR/bench"
  [preset-70b]="RUN llama3.1-70b-steady specs/models/llama3.1-70b.yaml"
  [cross]="python3 scripts/steady_crosscheck.py OUTDIR/steady-crosscheck-DAY.json"
  [cross-carried]="python3 scripts/steady_crosscheck.py OUTDIR/steady-crosscheck-carried-DAY.json --carried"
)
ORDER=(env probe-energy cross gputests train-fwd train-fwdbwd serve-sweep cross-carried train-packed train-rest train-tuned serve-rest
       train-burst serve-burst bench-lab5 bench-hopper preset-70b)
if [[ ${1:-} == list ]]; then for step in "${ORDER[@]}"; do echo "$step: ${STEPS[$step]}"; done; exit 0; fi
if [[ ${1:-} == unpack ]]; then  # unpack PARTS_FOLDER FOLDER: a call's PACK parts into FOLDER, replaced only if they read
  parts=${2:?usage: scripts/gpu-plan.sh unpack PARTS_FOLDER FOLDER} into=${3:?usage: scripts/gpu-plan.sh unpack PARTS_FOLDER FOLDER}
  compgen -G "$parts/*.tgz.[0-9]" > /dev/null || { echo "gpu-plan: no pack in $parts (no *.tgz.N: $into left as it was)" >&2; exit 2; }
  rm -rf "$into.new" && mkdir -p "$into.new" || exit 2
  cat "$parts"/*.tgz.[0-9] | tar -xzf - -C "$into.new" ||
    { rm -rf "$into.new"; echo "gpu-plan: the pack in $parts does not unpack ($into left as it was)" >&2; exit 2; }
  rm -rf "$into" && mv "$into.new" "$into" && echo "gpu-plan: $into holds what the call brought back" && exit 0
  exit 2
fi
out=${1:?usage: scripts/gpu-plan.sh OUTDIR STEP... (scripts/gpu-plan.sh list: the steps)}
shift
for step in "$@"; do
  [[ -v STEPS[$step] ]] || { echo "gpu-plan: no step $step (scripts/gpu-plan.sh list: the steps)" >&2; exit 2; }
done
: "${DEADLINE:?gpu-plan: set DEADLINE, the epoch second by which every step has ended}"
if [[ -n ${FROM:-} ]]; then
  [[ -d $FROM ]] || { echo "gpu-plan: FROM=$FROM is not a folder (carry the folder the last call brought back)" >&2; exit 2; }
  mkdir -p "$out" && cp -R "$FROM"/. "$out"/ || exit 2
fi
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
mkdir -p "$out/results"
if [[ -n ${PACK:-} ]]; then
  pack() { rm -f "$PACK".[0-9]; tar -czf - -C "$out" . | split -b 15m -d -a 1 - "$PACK."; }
  trap pack EXIT
fi
day=${DAY:-$(cat "$out/day" 2>/dev/null || date -u +%Y%m%d)}
echo "$day" > "$out/day"
# the GPU the plan ran on, as NVML names it (scripts/land-gpu-plan.py lands an H200's alone); none: no NVIDIA driver
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "${gpu:-none}" > "$out/gpu"
ended() {  # the exit of the step's last account, where it ran to its end (124, 137: cut by its deadline)
  local rc
  rc=$(sed -n "s/^$1: exit \([0-9]*\) after .*/\1/p" "$out/steps.txt" 2>/dev/null | tail -1)
  [[ -n $rc && $rc != 124 && $rc != 137 ]] && echo "$rc"
}
failed=0
for step in "$@"; do
  if rc=$(ended "$step"); then
    ((rc == 0)) || failed=1
    echo "$step: passed over (it ended with exit $rc in an earlier call)" | tee -a "$out/steps.txt"
    continue
  fi
  line=${STEPS[$step]//OUTDIR/$out}
  line=${line//DAY/$day}
  if [[ $line == RUN\ * ]]; then  # RUN NAME SPEC ARGS...: a run into OUTDIR/results, resumed if it is there
    read -r _ name rest <<< "$line"
    line="python3 -m runner run $rest --out $out/results --run-id $name-$day"
  fi
  left=$(( DEADLINE - $(date +%s) ))
  if (( left < 25 )); then echo "$step: not started (deadline)" | tee -a "$out/steps.txt"; continue; fi
  start=$(date +%s)
  # shellcheck disable=SC2086  # the step's words, split as written above
  timeout --signal=TERM --kill-after=15 "$left" $line >> "$out/plan.log" 2>&1
  rc=$?
  ((rc == 0)) || failed=1
  echo "$step: exit $rc after $(( $(date +%s) - start ))s: $line" | tee -a "$out/steps.txt"
done
exit $failed
