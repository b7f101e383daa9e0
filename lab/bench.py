"""Encode throughput, load time and memory of embedding models, side by side in one run.

Each model is loaded in a fresh subprocess (so load time and memory are its own), warmed up, then
timed over the same texts: one process (wall-clock rate, and the rate per CPU-second the process used
in all its threads: the figure that stays comparable on a busy machine and charges multi-threaded
tokenizers for every core they take), and all cores (one independent process per core, each
encoding its share of the texts, all measuring from a common start time; their rates are summed). Kinds: a
swembed folder, a model2vec folder (``model2vec:<path>``), WordLlama's shipped table (``wordllama``), or a
teacher (short name / folder / hub id).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

_WORKER = r"""
import json, resource, sys, time
spec, texts_path, min_seconds, share, shares, start_at = sys.argv[1:7]
texts = open(texts_path, encoding="utf-8").read().split("\n")[:-1][int(share)::int(shares)]
t0 = time.perf_counter()
from swembed.eval.models import load_encoder
encode = load_encoder(spec, "cpu")[1]
load_s = time.perf_counter() - t0
encode(texts[:64])
while time.time() < float(start_at):
    time.sleep(0.01)
n, start, cpu_start = 0, time.perf_counter(), time.process_time()
while time.perf_counter() - start < float(min_seconds):
    encode(texts)
    n += len(texts)
rate = n / (time.perf_counter() - start)
cpu_rate = n / max(time.process_time() - cpu_start, 1e-9)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"load_s": load_s, "sent_per_s": rate, "sent_per_cpu_s": cpu_rate, "peak_rss_mb": rss}))
"""


def _run_workers(spec: str, path: str, min_seconds: float, shares: int, start_delay: float) -> list[dict]:
    """``shares`` fresh processes, each encoding its share of the texts, measuring from one common start."""
    start_at = time.time() + start_delay
    env = dict(os.environ)
    if shares > 1:  # one thread per process, so that N processes use N cores (no oversubscription)
        env.update({name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                           "RAYON_NUM_THREADS")})
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, spec, path, str(min_seconds), str(i), str(shares),
                               str(start_at)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for i in range(shares)]
    results = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(err.strip().splitlines()[-1][:300] if err.strip() else f"exit {proc.returncode}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def bench(specs: list[str], texts: list[str], min_seconds: float = 3.0, cores: int | None = None) -> list[dict]:
    cores = cores or os.cpu_count() or 1
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as handle:
        handle.writelines(t.replace("\n", " ") + "\n" for t in texts)
        path = handle.name
    rows = []
    try:
        for spec in specs:
            try:
                single = _run_workers(spec, path, min_seconds, 1, 0.0)[0]
                row = {"model": spec, **single, "sent_per_s_all_cores": None}
                if cores > 1:
                    # Start measuring once every worker has loaded (twice the single load time, plus a second).
                    multi = _run_workers(spec, path, min_seconds, cores, 2 * single["load_s"] + 1.0)
                    row["sent_per_s_all_cores"] = sum(r["sent_per_s"] for r in multi)
            except RuntimeError as exc:
                row = {"model": spec, "error": str(exc)}
            rows.append({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()})
    finally:
        os.unlink(path)
    return rows


def stsb_texts(data_dir: str | Path) -> list[str]:
    """The benchmark text set: every sentence of STS-B test (short sentences), in file order."""
    from swembed.eval.sts import load_pair_set

    pairs = load_pair_set(data_dir, "STSBenchmark")
    return pairs.s1 + pairs.s2


def format_rows(rows: list[dict]) -> str:
    lines = [f"{'model':<40}{'sent/s (1 proc)':>17}{'sent/CPU-s':>12}{'sent/s (all)':>14}{'load s':>9}{'peak MB':>9}"]
    for row in rows:
        if "error" in row:
            lines.append(f"{row['model']:<40}  error: {row['error']}")
            continue
        multi = row["sent_per_s_all_cores"]
        lines.append(f"{row['model']:<40}{row['sent_per_s']:>17,.0f}{row['sent_per_cpu_s']:>12,.0f}"
                     f"{(multi or float('nan')):>14,.0f}"
                     f"{row['load_s']:>9.2f}{row['peak_rss_mb']:>9.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    from swembed.eval.suites import data_dir

    p = argparse.ArgumentParser(prog="python -m lab.bench", description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="+", help="swembed folders, model2vec:<folder>, wordllama, or teachers (minilm)")
    p.add_argument("--data", help="eval folder: STS-B test sentences are the default texts ($SWEMBED_DATA/eval)")
    p.add_argument("--texts", help="a text file (one text per line) instead of STS-B")
    p.add_argument("--seconds", type=float, default=3.0, help="time each measurement at least this long")
    p.add_argument("--cores", type=int, help="workers for the all-core column (default: every core)")
    p.add_argument("--json")
    args = p.parse_args(argv)
    texts = Path(args.texts).read_text(encoding="utf-8").splitlines() if args.texts else stsb_texts(data_dir(args.data))
    rows = bench(args.models, texts, args.seconds, args.cores)
    print(f"{len(texts)} texts, {args.cores or 'all'} cores for the all-core column")
    print(format_rows(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"texts": len(texts), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
