#!/usr/bin/env bash
# The whole test suite N times in a row (default 5) beside two CPU-bound jobs, as issue 79 asks of a suite that never
# flakes: each run's closing line and time go to OUT/summary.txt, its whole log to OUT/runN.log.
#   bash lab/suite_under_load.sh /tmp/five 5
set -u
out=${1:?usage: lab/suite_under_load.sh OUT [RUNS]}
runs=${2:-5}
cd "$(dirname "$0")/.."
mkdir -p "$out"
.venv/bin/python -c "while True: pass" & hog1=$!
.venv/bin/python -c "while True: pass" & hog2=$!
trap 'kill $hog1 $hog2 2>/dev/null' EXIT
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  SWEMBED_REQUIRE_JS=1 .venv/bin/python -m pytest -q -p no:cacheprovider > "$out/run$i.log" 2>&1
  rc=$?
  echo "run $i: rc=$rc $(( $(date +%s) - start )) s: $(tail -1 "$out/run$i.log")" >> "$out/summary.txt"
done
