"""Encode throughput, load time and memory of embedding models, side by side in one run.

Each model is loaded in a fresh subprocess (so load time and memory are its own), warmed up, then
timed over the same texts: one process, and all cores (one worker process per core, each encoding a
share of the texts). Kinds: a swe folder, a model2vec folder (``model2vec:<path>``), WordLlama's
shipped table (``wordllama``), or a teacher (short name / folder / hub id).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_WORKER = r"""
import json, os, resource, sys, time
spec, texts_path, min_seconds, cores = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
texts = open(texts_path, encoding="utf-8").read().split("\n")[:-1]
t0 = time.perf_counter()
from swe.eval.models import load_encoder
encode = load_encoder(spec, 'cpu')[1]
load_s = time.perf_counter() - t0
encode(texts[:64])
def rate(chunk):
    n, start = 0, time.perf_counter()
    while True:
        encode(chunk); n += len(chunk)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return n / elapsed
single = rate(texts)
multi = None
if cores > 1:
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    shares = [texts[i::cores] for i in range(cores)]
    with ctx.Pool(cores) as pool:
        multi = sum(pool.map(rate, shares))
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"load_s": load_s, "sent_per_s": single, "sent_per_s_all_cores": multi, "peak_rss_mb": rss}))
"""


def bench(specs: list[str], texts: list[str], min_seconds: float = 3.0, cores: int | None = None) -> list[dict]:
    cores = cores or os.cpu_count() or 1
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as handle:
        handle.writelines(t.replace("\n", " ") + "\n" for t in texts)
        path = handle.name
    rows = []
    try:
        for spec in specs:
            result = subprocess.run([sys.executable, "-c", _WORKER, spec, path, str(min_seconds), str(cores)],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                rows.append({"model": spec, "error": result.stderr.strip().splitlines()[-1][:300]})
                continue
            row = json.loads(result.stdout.strip().splitlines()[-1])
            rows.append({"model": spec, **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}})
    finally:
        os.unlink(path)
    return rows


def stsb_texts(data_dir: str | Path) -> list[str]:
    """The benchmark text set: every sentence of STS-B test (short sentences), in file order."""
    from swe.eval.sts import load_pair_set

    pairs = load_pair_set(data_dir, "STSBenchmark")
    return pairs.s1 + pairs.s2


def format_rows(rows: list[dict]) -> str:
    lines = [f"{'model':<40}{'sent/s (1 proc)':>17}{'sent/s (all)':>14}{'load s':>9}{'peak MB':>9}"]
    for row in rows:
        if "error" in row:
            lines.append(f"{row['model']:<40}  error: {row['error']}")
            continue
        multi = row["sent_per_s_all_cores"]
        lines.append(f"{row['model']:<40}{row['sent_per_s']:>17,.0f}{(multi or float('nan')):>14,.0f}"
                     f"{row['load_s']:>9.2f}{row['peak_rss_mb']:>9.0f}")
    return "\n".join(lines)
