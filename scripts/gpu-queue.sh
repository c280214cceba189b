#!/usr/bin/env bash
# Run specs one after another until a deadline, on a GPU machine held for short calls:
#   scripts/gpu-queue.sh WORKDIR SECONDS DATE SPEC [SPEC...] [-- RUN-OPTIONS...]
# Each spec runs as `attnbench run SPEC --run-id NAME-DATE` into WORKDIR/results, with its spool in WORKDIR/spool,
# so calling this again with the same arguments resumes where the last call stopped: finished specs are passed
# over and a run stopped at the deadline (SIGTERM: the cell in flight is abandoned, what is done is kept) goes on.
# A spec counts as done when its run's manifest in WORKDIR/results says the run ended, so what decides it travels
# with the results (a device copy that keeps WORKDIR/results, which .gitignore's results/ matches, but drops
# the rest of WORKDIR still passes finished runs over). When $OUT is set, WORKDIR/results and the log are
# packed into $OUT/results.tgz at the end of each call.
set -uo pipefail
work=${1:?usage: scripts/gpu-queue.sh WORKDIR SECONDS DATE SPEC [SPEC...] [-- RUN-OPTIONS...]}
seconds=${2:?seconds}
date=${3:?date, e.g. 20261203}
shift 3
specs=()
while (($#)) && [[ $1 != -- ]]; do specs+=("$1"); shift; done
[[ ${1:-} == -- ]] && shift
options=("$@")
for option in "${options[@]}"; do  # done means manifest.json ended; a shard writes manifest-I-of-N.json
  [[ $option == --shard* ]] && { echo "gpu-queue: $option: the queue runs whole runs on one machine, not shards" >&2; exit 2; }
done
deadline=$((SECONDS + seconds))
mkdir -p "$work/results"
ended() {  # the run's manifest has an end time
  python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1])).get("ended_at") else 1)' \
    "$work/results/$1/manifest.json" 2>/dev/null
}
log="$work/queue.log"
touch "$log"
export PYTHONUNBUFFERED=1
for spec in "${specs[@]}"; do
  name=$(basename "$spec" .yaml)
  run_id="$name-$date"
  ended "$run_id" && continue
  left=$((deadline - SECONDS))
  if ((left < 30)); then echo "gpu-queue: deadline: $run_id not started" | tee -a "$log"; break; fi
  echo "gpu-queue: $run_id, ${left}s left" | tee -a "$log"
  start=$SECONDS
  timeout --signal=TERM --kill-after=20 "$left" \
    python3 -m runner run "$spec" --out "$work/results" --run-id "$run_id" --spool "$work/spool" "${options[@]}" \
    2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  echo "gpu-queue: $run_id exit $rc after $((SECONDS - start))s" | tee -a "$log"
done
if [[ -n ${OUT:-} ]]; then
  cp "$log" "$OUT/queue.log"
  tar -C "$work" -czf "$OUT/results.tgz" results queue.log
fi
