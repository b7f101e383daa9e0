"""The primitives behind the search recipe's exact build-speed levers (issue 80, 2026-12-07), each timed both ways
on this CPU, with the answer checked equal (or, for the gram products, to float32 rounding):

* k-means cells: the float32 product of 8,192 rows with 2,232 centroids (the recipe's 357k sentences in cells of
  160) in torch (MKL) and in numpy (OpenBLAS); every row's nearest centroid in float64 in torch (as before) and by
  the float32 screen (``nearest_centroids``); the whole float64 ``spherical_kmeans`` in torch (as before) and now.
* gram products: a words x buckets ``gram_matrix`` (and its transpose) times 32 columns, torch's sparse CSR product
  against the ``embedding_bag`` sum ``fit_grams`` now uses.
* the corpus stage's sentence splitter: blingfire's ``text_to_sentences`` against ``SentenceSplitter``.
* the lexical weights' posting lookups: ``np.searchsorted`` with needles in any order against sorted needles.

Run: ``python -m lab.bench_build_levers --targets WORK/extract-*/targets.npy --words WORK/compose-* --corpus FILE``
(the targets and layout of a built recipe's work folder; a corpus file ``read_source`` reads). Prints a Markdown
table (``--out FILE`` writes it).
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def best_ms(run: Callable[[], object], rounds: int = 3) -> float:
    """The best wall time of ``rounds`` calls after one warm-up, in ms."""
    run()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * min(times)


def kmeans_rows(targets: Path, n: int, seed: int = 0) -> np.ndarray:
    rows = np.load(targets, mmap_mode="r")
    pick = np.sort(np.random.default_rng(seed).permutation(len(rows))[: min(n, len(rows))])
    return np.asarray(rows[pick], dtype=np.float64)


def bench_kmeans(rows: np.ndarray) -> list[tuple[str, float, float, str]]:
    import torch

    from swembed.pipeline.train import _torch_kmeans, nearest_centroids, spherical_kmeans

    n_cells = -(-len(rows) // 160)
    rng = np.random.default_rng(1)
    centroids = rows[rng.choice(len(rows), n_cells, replace=False)]
    block = rows[:8192].astype(np.float32)
    fast = centroids.astype(np.float32)
    block_t, fast_t = torch.from_numpy(block), torch.from_numpy(fast)
    torch_ms = best_ms(lambda: block_t @ fast_t.T)
    numpy_ms = best_ms(lambda: block @ fast.T)
    out = [(f"float32 product 8,192 x {n_cells:,} centroids (d {rows.shape[1]})", torch_ms, numpy_ms,
            "torch (MKL) / numpy (OpenBLAS)")]
    start = time.perf_counter()
    screened = nearest_centroids(rows, centroids)
    screen_s = time.perf_counter() - start
    rows_t, centroids_t = torch.from_numpy(rows), torch.from_numpy(centroids)
    start = time.perf_counter()
    exact = torch.cat([(rows_t[i : i + 65536] @ centroids_t.T).argmax(1) for i in range(0, len(rows), 65536)])
    float64_s = time.perf_counter() - start
    same = "same cells" if np.array_equal(screened, exact.numpy()) else "CELLS DIFFER"
    out.append((f"nearest centroid of {len(rows):,} rows, float64 in torch / float32 screen in numpy",
                1000 * float64_s, 1000 * screen_s, same))
    start = time.perf_counter()
    before = _torch_kmeans(rows_t, n_cells, 0, 10, 40, torch.float64)
    before_s = time.perf_counter() - start
    start = time.perf_counter()
    now = spherical_kmeans(rows_t, n_cells, seed=0)
    out.append((f"spherical_kmeans, {len(rows):,} rows, {n_cells:,} cells, float64: in torch / in numpy",
                1000 * before_s, 1000 * (time.perf_counter() - start),
                "same cells" if np.array_equal(before, now) else "CELLS DIFFER"))
    return out


def bench_grams(compose: Path, buckets: int = 65536) -> list[tuple[str, float, float, str]]:
    import warnings

    import torch

    from swembed.pipeline.compose import Layout
    from swembed.pipeline.grams import _sparse_product, gram_matrix

    layout = Layout.read(compose)
    rows = sorted({row for start, end in layout.languages.values() for row in range(start, end)})
    a = gram_matrix([layout.labels[row] for row in rows], buckets)
    out = []
    for name, matrix, width in (("words", a, buckets), ("buckets", a.T.tocsr(), a.shape[0])):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            csr = torch.sparse_csr_tensor(torch.from_numpy(matrix.indptr.astype(np.int64)),
                                          torch.from_numpy(matrix.indices.astype(np.int64)),
                                          torch.from_numpy(np.asarray(matrix.data, dtype=np.float32)),
                                          size=matrix.shape)
        bag = _sparse_product(matrix)
        x = torch.randn(width, 32)
        gap = float((csr @ x - bag(x)).abs().max())
        out.append((f"gram product over {name} ({matrix.shape[0]:,} x {matrix.shape[1]:,}, {matrix.nnz:,} nonzeros) "
                    "x 32 columns", best_ms(lambda c=csr, v=x: c @ v), best_ms(lambda b=bag, v=x: b(v)),
                    f"sparse CSR / embedding_bag; largest difference {gap:.1e}"))
    return out


def bench_splitter(corpus: str, limit: int) -> list[tuple[str, float, float, str]]:
    from blingfire import text_to_sentences

    from swembed.pipeline.corpus import SentenceSplitter
    from swembed.pipeline.sources import read_source

    units = []
    for unit in read_source(corpus, "text"):
        units.append(unit)
        if len(units) >= limit:
            break
    split = SentenceSplitter()
    same = [text_to_sentences(u).split("\n") for u in units] == [split(u) for u in units]
    return [(f"sentence splitting, {len(units):,} texts of {Path(corpus).name}",
             best_ms(lambda: [text_to_sentences(u).split("\n") for u in units], 1),
             best_ms(lambda: [split(u) for u in units], 1),
             "text_to_sentences / SentenceSplitter; " + ("same sentences" if same else "SENTENCES DIFFER"))]


def bench_lookups(keys_n: int = 9_000_000, needles: int = 1_300_000) -> list[tuple[str, float, float, str]]:
    rng = np.random.default_rng(0)
    keys = np.sort(rng.integers(0, 10**12, keys_n))
    wanted = rng.integers(0, 10**12, needles)

    def sorted_needles() -> np.ndarray:
        order = np.argsort(wanted)
        at = np.empty(len(wanted), dtype=np.int64)
        at[order] = np.searchsorted(keys, wanted[order])
        return at

    same = np.array_equal(np.searchsorted(keys, wanted), sorted_needles())
    return [(f"posting lookups, {needles:,} needles in {keys_n:,} keys", best_ms(lambda: np.searchsorted(keys, wanted)),
             best_ms(sorted_needles), "any order / sorted first (sort included); "
             + ("same positions" if same else "POSITIONS DIFFER"))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=Path, required=True, help="an extract stage's targets.npy")
    parser.add_argument("--words", type=Path, required=True, help="a compose stage's folder (its word labels)")
    parser.add_argument("--corpus", required=True, help="a corpus file to split into sentences")
    parser.add_argument("--rows", type=int, default=357000, help="k-means rows (the recipe's KD sentences)")
    parser.add_argument("--texts", type=int, default=100000, help="corpus texts to split")
    parser.add_argument("--out", type=Path, help="write the Markdown table here")
    args = parser.parse_args(argv)
    rows = [*bench_kmeans(kmeans_rows(args.targets, args.rows)), *bench_grams(args.words),
            *bench_splitter(args.corpus, args.texts), *bench_lookups()]
    command = "python -m lab.bench_build_levers " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = ["# Build-speed levers: the primitives, before and now", "", f"<!-- generated: {command} -->", "",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {cpu_name()}, 2 threads, by "
             f"`{command}` (`lab/bench_build_levers.py`; best of 3 after a warm-up, the splitter once). What each "
             "saves in a build: reports/build-times.md.", "",
             "| primitive | before, ms | now, ms | speed-up | note |", "|---|---|---|---|---|"]
    for name, before, now, note in rows:
        ratio = f"{before / now:.1f}x"
        lines.append(f"| {name} | {before:,.0f} | {now:,.0f} | {ratio} | {note} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "an unknown CPU"


if __name__ == "__main__":
    main()
