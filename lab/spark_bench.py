"""Evidence for ``swembed dedup --engine spark``: per-process peak memory of a run, and parity with the
single-machine command on the same input (``reports/spark-dedup.md`` has the numbers and commands).

    python -m lab.spark_bench memory --json run.json -- swembed dedup in.txt --engine spark ...
    python -m lab.spark_bench parity --model M --local out-local --spark out-spark
    python -m lab.spark_bench events /tmp/events/eventlog_v2_local-...   # shuffle bytes, executor peaks

``memory`` runs the command and every 0.5 s reads the peak resident set (VmHWM) of each process in its tree:
the Python driver, the JVM (in local mode the driver and the executor are one JVM) and each Python worker.
``parity`` reads both outputs of one input and checks that every record is mapped once, that exact duplicates are
handled alike (the same text always maps to one representative, never kept twice; a record exact in one output and
not the other has a different representative there, i.e. its near-duplicate cluster differs), how many records get
the same representative, and the
recall of the single-machine near-duplicate pairs among the Spark pairs. The single-machine pairs are recomputed
with the command's own code (``first_pass`` then ``near_pairs`` with the same settings), as it does not store them.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _peak_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            return next((int(line.split()[1]) for line in status if line.startswith("VmHWM:")), 0)
    except OSError:  # the process ended between listing and reading
        return 0


def _role(process, root_pid: int) -> str:
    if process.pid == root_pid:
        return "driver_python"
    try:
        command, name = " ".join(process.cmdline()), process.name()
    except Exception:  # noqa: BLE001 - gone (a short-lived child) or unreadable: not ours to count
        return "other"
    if "java" in name:
        return "jvm"
    return "python_worker" if "pyspark" in command else "other"


def watch(command: list[str], interval: float = 0.5) -> dict:
    """Run ``command``; its exit code, wall time and per-process peak RSS (MB) grouped by role."""
    import psutil

    start = time.perf_counter()
    child = subprocess.Popen(command)
    root = psutil.Process(child.pid)
    peaks: dict[int, tuple[str, int]] = {}
    tree_peak = 0
    while child.poll() is None:
        try:
            processes = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        total = 0
        for process in processes:
            role = _role(process, child.pid)  # each time: a child forked by the JVM is java until it execs
            if role == "other" and process.pid in peaks:
                role = peaks[process.pid][0]
            peak = max(peaks.get(process.pid, (role, 0))[1], _peak_kb(process.pid))
            peaks[process.pid] = (role, peak)
            try:
                total += process.memory_info().rss // 1024
            except psutil.NoSuchProcess:
                pass
        tree_peak = max(tree_peak, total)
        time.sleep(interval)
    by_role: dict[str, list[int]] = {}
    for role, peak in peaks.values():
        by_role.setdefault(role, []).append(peak)
    return {"command": command, "exit_code": child.wait(), "wall_s": round(time.perf_counter() - start, 1),
            "tree_peak_rss_mb": round(tree_peak / 1024),
            "peak_rss_mb": {role: {"processes": len(v), "max": round(max(v) / 1024)} for role, v in by_role.items()}}


def _event_lines(folder: Path):
    """The JSON events of one application's log (a file, or a v2 folder of rolled ``events_*`` files; zstd
    files through the ``zstd`` command)."""
    files = [folder] if folder.is_file() else sorted(folder.glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
    for path in files:
        if path.suffix == ".zstd":
            text = subprocess.run(["zstd", "-dcq", str(path)], capture_output=True, check=False).stdout.decode()
        else:
            text = path.read_text(encoding="utf-8")
        for line in text.splitlines():
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:  # the last line of a log still being written
                    pass


def events(folder: Path) -> dict:
    """What a run's Spark event log says: per stage its tasks, run time and shuffle/spill bytes; the totals;
    and each executor's peak metrics (JVM heap, JVM and Python process-tree RSS: needs
    ``spark.executor.processTreeMetrics.enabled=true``). In local mode the one executor is called ``driver``."""
    wanted = {"internal.metrics.shuffle.write.bytesWritten": "shuffle_write_bytes",
              "internal.metrics.shuffle.write.recordsWritten": "shuffle_write_records",
              "internal.metrics.shuffle.read.localBytesRead": "shuffle_read_local_bytes",
              "internal.metrics.shuffle.read.remoteBytesRead": "shuffle_read_remote_bytes",
              "internal.metrics.diskBytesSpilled": "disk_spill_bytes",
              "internal.metrics.memoryBytesSpilled": "memory_spill_bytes",
              "internal.metrics.peakExecutionMemory": "peak_execution_memory_sum",
              "internal.metrics.executorRunTime": "executor_run_ms",
              "internal.metrics.input.bytesRead": "input_bytes"}
    stages, peaks = [], {}
    for event in _event_lines(folder):
        kind = event.get("Event")
        if kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            row = {"stage": info["Stage ID"], "name": info["Stage Name"].split(" at ")[0],
                   "tasks": info["Number of Tasks"],
                   "seconds": round((info.get("Completion Time", 0) - info.get("Submission Time", 0)) / 1000, 1)}
            for accumulable in info.get("Accumulables", []):
                if accumulable.get("Name") in wanted:
                    row[wanted[accumulable["Name"]]] = int(accumulable.get("Value", 0))
            stages.append(row)
        elif kind in ("SparkListenerStageExecutorMetrics", "SparkListenerTaskEnd"):
            executor = event.get("Executor ID") or event.get("Task Info", {}).get("Executor ID", "?")
            metrics = event.get("Executor Metrics") or event.get("Task Executor Metrics") or {}
            mine = peaks.setdefault(executor, {})
            for key in ("JVMHeapMemory", "JVMOffHeapMemory", "ProcessTreeJVMRSSMemory", "ProcessTreePythonRSSMemory",
                        "OnHeapExecutionMemory", "OnHeapStorageMemory"):
                if key in metrics:
                    mine[key] = max(mine.get(key, 0), int(metrics[key]))
    totals = {name: sum(stage.get(name, 0) for stage in stages) for name in wanted.values()}
    return {"stages": stages, "totals": totals, "stage_count": len(stages),
            "peak_mb": {executor: {k: round(v / 2**20) for k, v in values.items()}
                        for executor, values in peaks.items()}}


def single_machine_pairs(model_path: str, summary: dict) -> tuple[set, np.ndarray, np.ndarray]:
    """The pairs ``swembed dedup`` searched (as first-record ids), with its settings; and per record the first
    record of its text, and the distinct texts' float32 vectors (rows in first-record order)."""
    from swembed import load
    from swembed.dedup.clusters import ExactKey, near_pairs
    from swembed.dedup.job import DedupConfig, first_pass

    config = DedupConfig(**{**summary["config"], "progress": False})
    model = load(model_path)
    with tempfile.TemporaryDirectory() as tmp:
        first = first_pass([Path(p) for p in summary["inputs"]], model, config, Path(tmp) / "vectors.f32",
                           ExactKey.of_model(model))
        vectors = np.array(first.vectors)
    a, b, _ = near_pairs(vectors.astype(np.float32), summary["threshold"], config.k, config.method, config.nprobe)
    ids = first.first_record
    return set(zip(ids[a].tolist(), ids[b].tolist())), ids[first.unique_of_record], vectors


def parity(model_path: str, local_out: Path, spark_out: Path) -> dict:
    """Compare the two outputs of one input (the inputs named in the local ``summary.json``)."""
    import pyarrow.parquet as pq

    local_summary = json.loads((local_out / "summary.json").read_text())
    spark_summary = json.loads((spark_out / "summary.json").read_text())
    columns = ["record", "representative", "reason"]
    spark = pq.read_table(spark_out / "mapping", columns=columns).sort_by("record").to_pydict()
    local = {name: [] for name in columns}
    with open(local_out / "mapping.tsv", encoding="utf-8") as mapping:
        next(mapping)
        for line in mapping:
            record, _, _, representative, _, reason = line.rstrip("\n").split("\t")
            for name, value in zip(columns, (int(record), int(representative), reason)):
                local[name].append(value)
    n = len(local["record"])
    local_pairs, first_of_record, vectors = single_machine_pairs(model_path, local_summary)
    table = pq.read_table(spark_out / "pairs").to_pydict()
    spark_pairs = set(zip(table["a"], table["b"]))
    found = len(local_pairs & spark_pairs)
    row_of_first = {f: i for i, f in enumerate(np.unique(first_of_record).tolist())}
    x = vectors.astype(np.float32)
    spark_a = np.array([row_of_first[a] for a in table["a"]], np.int64)
    spark_b = np.array([row_of_first[b] for b in table["b"]], np.int64)
    lowest = float(np.einsum("ij,ij->i", x[spark_a], x[spark_b]).min(initial=1.0))

    def exact_ok(mapping: dict) -> dict:
        rep = np.asarray(mapping["representative"])
        reason = np.asarray(mapping["reason"])
        one_rep = bool((rep == rep[first_of_record]).all())  # a text's copies share its representative
        copies_dropped = bool((reason[first_of_record != np.arange(n)] != "kept").all())
        exact_is_same_text = bool((first_of_record[rep[reason == "exact"]] == first_of_record[reason == "exact"]).all())
        return {"exact_duplicates": int((reason == "exact").sum()), "copies_share_representative": one_rep,
                "later_copies_never_kept": copies_dropped, "exact_means_same_text": exact_is_same_text}

    same_rep = np.asarray(spark["representative"]) == np.asarray(local["representative"])
    exact_l, exact_s = np.asarray(local["reason"]) == "exact", np.asarray(spark["reason"]) == "exact"
    differs = exact_l != exact_s
    return {
        "records": n, "spark_records": len(spark["record"]),
        "every_record_mapped_once": spark["record"] == list(range(n)),
        "distinct_texts": {"local": local_summary["distinct_texts"], "spark": spark_summary["distinct_texts"],
                           "reference": len(row_of_first)},
        "exact": {"local": exact_ok(local), "spark": exact_ok(spark)},
        "pairs": {"local": len(local_pairs), "spark": len(spark_pairs), "local_found_by_spark": found,
                  "recall_of_local_pairs": round(found / max(len(local_pairs), 1), 4),
                  "spark_only": len(spark_pairs - local_pairs), "lowest_spark_pair_cosine": round(lowest, 4)},
        "same_representative": round(float(same_rep.mean()), 4),
        # an exact duplicate in one output and not the other: only where the near-duplicate clusters differ?
        "exact_vs_local": {"exact_in_both": int((exact_l & exact_s).sum()),
                           "exact_in_both_same_representative": int((exact_l & exact_s & same_rep).sum()),
                           "exact_in_one_only": int(differs.sum()),
                           "exact_in_one_only_with_same_representative": int((differs & same_rep).sum())},
        "counts": {key: {"local": local_summary[key], "spark": spark_summary[key]}
                   for key in ("kept", "exact_duplicates", "near_duplicates")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("memory")
    p.add_argument("--json", help="also write the result here")
    p.add_argument("run", nargs=argparse.REMAINDER, help="-- then the command")
    p = sub.add_parser("events")
    p.add_argument("log", help="a Spark event log: the file, or the eventlog_v2_* folder")
    p.add_argument("--json")
    p = sub.add_parser("parity")
    p.add_argument("--model", required=True)
    p.add_argument("--local", required=True, help="the swembed dedup output folder")
    p.add_argument("--spark", required=True, help="the swembed dedup --engine spark output folder")
    p.add_argument("--json")
    args = parser.parse_args()
    if args.command == "memory":
        result = watch(args.run[1:] if args.run[:1] == ["--"] else args.run)
    elif args.command == "events":
        result = events(Path(args.log))
    else:
        result = parity(args.model, Path(args.local), Path(args.spark))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    if result.get("exit_code"):
        sys.exit(result["exit_code"])


if __name__ == "__main__":
    main()
