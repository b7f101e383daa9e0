"""Search bench: index build time, index size on disk, load time and queries/s on one core, for 100k and 1M passages;
with the lexical channel (BM25 postings: their build time and bytes, queries/s of ``mode="lexical"`` and
``"hybrid"``).

    python -m lab.bench_search --model models/minilm-256 --data ../shared/data/corpora/en --out reports/search.md

Passages are synthesised: with ``--data``, each is 1 to 3 lines sampled from the folder's ``*.txt.gz`` files; without,
8 to 40 words sampled from the table's vocabulary. Queries are further lines (or word draws) of their own. Per size:
``model.index(passages, lexical=False)`` (float32; int8 = the same vectors quantised, its extra time added), the
postings (``Lexical.build``, timed on their own), ``save`` (the folder's bytes, the postings' apart),
``SearchIndex.load`` (memory-mapped, checked), and ``index.search(queries, 10, mode)`` for each mode (lexical and
hybrid on the float32 index; the postings are the same for int8): wall and CPU seconds. It
runs on one thread (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS`` at 1: it starts itself
again where they are not). A size is skipped when the CPU seconds of the one before it, scaled, would pass
``--max-seconds`` (the CPU is shared: wall time says little; the bench is bounded).
"""
from __future__ import annotations

import argparse
import gzip
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import swembed
from swembed.runtime.index import POSTINGS_FILES, SearchIndex, quantise
from swembed.runtime.lexical import Lexical

GENERATED = "<!-- generated: {command} -->"
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def on_one_thread(module: str) -> None:
    """Start ``python -m module`` again on one thread (OMP, MKL, OpenBLAS) unless it runs so: BLAS pools start with
    numpy, so the variables must be set before the process starts."""
    if any(os.environ.get(name) != "1" for name in ONE_THREAD):
        os.execve(sys.executable, [sys.executable, "-m", module, *sys.argv[1:]], {**os.environ, **ONE_THREAD})


def sample_lines(folder: Path, limit: int, seed: int) -> list[str]:
    """Non-empty lines of ``folder/*.txt.gz`` (at most ``limit``, a random sample), stripped."""
    lines = []
    for path in sorted(folder.glob("*.txt.gz")):
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
            lines.extend(line.strip() for line in handle if len(line.split()) >= 3)
    random.Random(seed).shuffle(lines)
    return lines[:limit]


def synthesise(pool: list[str], n: int, parts: tuple[int, int], seed: int, joiner: str) -> list[str]:
    """``n`` texts, each ``parts`` (lowest, highest) items of ``pool`` drawn at random and joined."""
    rng = random.Random(seed)
    return [joiner.join(rng.choices(pool, k=rng.randint(*parts))) for _ in range(n)]


def timed(call, *args):
    """(call(*args), wall seconds, CPU seconds)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = call(*args)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


def search_rate(index: SearchIndex, queries: list[str], top_k: int, mode: str = "dense") -> tuple[float, float]:
    """(queries/s by wall time, by CPU time) of ``index.search`` in ``mode``."""
    _, wall, cpu = timed(index.search, queries, top_k, mode)
    return len(queries) / wall, len(queries) / max(cpu, 1e-9)


POSTINGS_BYTES = ("terms.npy", "term_offsets.npy", *POSTINGS_FILES)


def bench_size(model, passages: list[str], queries: list[str], top_k: int, work: Path) -> list[dict]:
    """One row per dtype (float32, int8) for one corpus size."""
    index, wall, cpu = timed(model.index, passages, None, "float32", True, False)
    index.lexical, postings_s, postings_cpu_s = timed(Lexical.build, model, passages)
    rows = []
    for dtype in ("float32", "int8"):
        extra = 0.0
        if dtype == "int8":
            (vectors, scales), extra, _ = timed(quantise, np.asarray(index.vectors), "int8")
            index = SearchIndex(vectors, index.table, None, index.texts, scales, model, lexical=index.lexical)
        folder = index.save(work / f"{len(passages)}-{dtype}")
        loaded, load_s, _ = timed(SearchIndex.load, folder, model)
        rate, cpu_rate = search_rate(loaded, queries, top_k)
        modes = {mode: search_rate(loaded, queries, top_k, mode) for mode in ("lexical", "hybrid")
                 if dtype == "float32"}
        rows.append({"passages": len(passages), "dtype": dtype, "build_s": wall + extra, "build_cpu_s": cpu + extra,
                     "bytes": folder_bytes(folder), "vector_bytes": (folder / "vectors.npy").stat().st_size,
                     "postings_s": postings_s, "postings_cpu_s": postings_cpu_s,
                     "postings_bytes": sum((folder / name).stat().st_size for name in POSTINGS_BYTES),
                     "load_s": load_s, "qps": rate, "cpu_qps": cpu_rate, "queries": len(queries),
                     **{f"{mode}_qps": r for mode, (r, _) in modes.items()},
                     **{f"{mode}_cpu_qps": r for mode, (_, r) in modes.items()}})
        print(rows[-1], file=sys.stderr, flush=True)
        shutil.rmtree(folder)
    return rows


def report(rows: list[dict], notes: list[str], command: str, model: str, source: str) -> str:
    header = ["passages", "dtype", "build (encode + index), wall s", "CPU s", "postings, wall s", "CPU s",
              "index on disk (vectors; postings)", "load s", "queries/s, one core (wall)", "per CPU s",
              "lexical q/s (wall)", "per CPU s", "hybrid q/s (wall)", "per CPU s"]
    lines = [f"| {' | '.join(header)} |", "|" + "---|" * len(header)]
    for r in rows:
        size = f"{r['bytes'] / 1e6:,.1f} MB ({r['vector_bytes'] / 1e6:,.1f} MB; {r['postings_bytes'] / 1e6:,.1f} MB)"
        modes = " | ".join(f"{r[key]:,.0f}" if key in r else "-" for key in ("lexical_qps", "lexical_cpu_qps",
                                                                               "hybrid_qps", "hybrid_cpu_qps"))
        lines.append(f"| {r['passages']:,} | {r['dtype']} | {r['build_s']:.1f} | {r['build_cpu_s']:.1f} | "
                     f"{r['postings_s']:.1f} | {r['postings_cpu_s']:.1f} | {size} | {r['load_s']:.2f} | "
                     f"{r['qps']:,.0f} | {r['cpu_qps']:,.0f} | {modes} |")
    cpu = platform.processor() or platform.machine()
    return "\n".join([
        "# Search: index build, size and query speed", "",
        GENERATED.format(command=command), "",
        f"Generated {time.strftime('%Y-%m-%d')} by `{command}` on {cpu} ({platform.python_implementation()} "
        f"{platform.python_version()}, numpy {np.__version__}), a CPU shared with other work: wall times vary, the "
        "CPU-second figures less.", "",
        f"Table `{model}`; passages {source}. Build: `model.index(passages, lexical=False)` (encoding is nearly all "
        "of it; int8 adds quantising the same vectors); postings: the BM25 postings of the same passages "
        "(`Lexical.build`: splitting into words and the CSR arrays), which `model.index(passages)` adds by default. "
        "On disk: the whole index folder (vectors, the passages' texts and offsets, the postings, index.json), the "
        "vectors and the postings alone in brackets. Load: `SearchIndex.load(folder, model)` (memory-mapped, every "
        "array checked, vectors scanned). Queries: `index.search(queries, 10)`, each query encoded and ranked against "
        "every passage (exact search: one matrix product per batch of queries, `np.argpartition`); lexical: BM25 "
        "of every passage (one `np.bincount` over the query's terms' postings); hybrid: both, each z-normalised per "
        "query. One thread throughout (OMP/MKL/OpenBLAS threads 1).", "", *lines, "", *notes, ""])


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        on_one_thread("lab.bench_search")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="models/minilm-256")
    parser.add_argument("--data", type=Path, help="a folder of *.txt.gz corpora to sample passages from")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--max-seconds", type=float, default=180.0,
                        help="skip a size expected to take more CPU seconds (scaled from the size before it)")
    parser.add_argument("--out", type=Path, help="write the report here (e.g. reports/search.md)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    command = "python -m lab.bench_search " + " ".join(argv if argv is not None else sys.argv[1:])
    model = swembed.load(args.model)
    if args.data:
        pool = sample_lines(args.data, 2_000_000, args.seed)
        queries, pool = pool[: args.queries], pool[args.queries :]
        parts, joiner, source = (1, 3), " ", f"1 to 3 random lines of `{args.data}/*.txt.gz` ({len(pool):,} lines)"
    else:
        pool = model.words
        queries = synthesise(pool, args.queries, (3, 8), args.seed + 1, " ")
        parts, joiner, source = (8, 40), " ", "8 to 40 random words of the table's vocabulary"
    rows, notes, last = [], [], None
    with tempfile.TemporaryDirectory(prefix="bench-search-") as work:
        for size in sorted(args.sizes):
            if last is not None and (last[1] * size / last[0]) > args.max_seconds:
                notes.append(f"{size:,} passages skipped: expected {last[1] * size / last[0]:.0f} CPU s from the "
                             f"{last[0]:,} row, over --max-seconds {args.max_seconds:g}.")
                continue
            passages = synthesise(pool, size, parts, args.seed + size, joiner)
            start = time.process_time()
            rows += bench_size(model, passages, queries, args.top_k, Path(work))
            last = (size, time.process_time() - start)
            del passages
    text = report(rows, notes, command, args.model, source)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
