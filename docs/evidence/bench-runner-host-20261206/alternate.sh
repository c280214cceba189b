#!/bin/bash
# alternate before/after runs of scripts/bench_runner.py; each with the load average around it
cd /work/wt/host
LOG=$1; shift
SPEC=$1; shift
N=$1; shift
for i in $(seq 1 $N); do
  for side in before after; do
    echo "=== $side $SPEC round $i: $(date -u +%H:%M:%S) load: $(cut -d' ' -f1-3 /proc/loadavg)"
    nice .venv/bin/python scripts/bench_runner.py $SPEC --budget 0.05 --label $side --out /tmp/host-bench --root /tmp/host-$side
    echo "=== end $side $SPEC round $i: $(date -u +%H:%M:%S) load: $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done > $LOG 2>&1
