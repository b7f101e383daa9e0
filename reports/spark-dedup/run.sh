#!/bin/bash
# The runs of reports/spark-dedup.md: run.sh N [local|spark|both], on /tmp/spark-bench/dedup-N.txt (made by
# `python -m lab.dedup_bench make`). One BLAS/OpenMP thread; priority NICE (default 19, the lowest, as on the
# shared machine; the 5M run used NICE=0).
NICE=${NICE:-19}; echo $NICE > /proc/self/autogroup 2>/dev/null; renice -n $NICE $$ >/dev/null
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)" || exit 1
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE PYTHONPATH=$PWD
PY=${PY:-/work/main/.venv/bin/python}; M=${MODEL:-/work/main/models/v0-minilm-256-shared}
N=$1; WHAT=${2:-both}; B=/tmp/spark-bench
mkdir -p $B/events
if [ "$WHAT" != spark ]; then
  $PY -m lab.spark_bench memory --json $B/mem-local-$N.json -- \
    $PY -m swembed.cli dedup $B/dedup-$N.txt --model $M --out $B/out-local-$N --overwrite --quiet
fi
if [ "$WHAT" != local ]; then
  $PY -m lab.spark_bench memory --json $B/mem-spark-$N.json -- \
    $PY -m swembed.cli dedup $B/dedup-$N.txt --model $M --out $B/out-spark-$N --overwrite --quiet \
    --engine spark --spark-master 'local[2]' --spark-conf spark.driver.memory=2g \
    --spark-conf spark.sql.shuffle.partitions=200 \
    --spark-conf spark.eventLog.enabled=true --spark-conf spark.eventLog.dir=file://$B/events \
    --spark-conf spark.executor.processTreeMetrics.enabled=true
fi
