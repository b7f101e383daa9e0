"""Near-duplicate pairs on Spark without gathering the vectors anywhere.

1. A coarse quantiser: spherical k-means (faiss) on a bounded sample of the vectors, trained at the driver.
2. On the executors each vector goes to its ``cells_per_text`` nearest cells (multi-assignment: a pair on a
   cell boundary still meets in one of them).
3. Each cell is one search task; a cell the sample says is larger than ``max_task_rows`` is cut into blocks
   of half that size by a hash of the id, and each pair of blocks is a task, so no task holds more than about
   ``max_task_rows`` vectors and every pair of the cell still meets in one task.
4. A task runs ``swembed dedup``'s own search (``clusters.near_pairs``: each row's ``k`` nearest, exact below
   50k rows) and emits the pairs with cosine >= threshold (pairs found in several tasks are merged), and its
   pairs' connected components (``clusters.connected_roots``) as stars: the same components globally, but
   with paths of a few hops, so the distributed components need few rounds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
from pyspark import AccumulatorParam

from swembed.dedup.clusters import connected_roots, near_pairs, nearest_cells
from swembed.dedup.job import DedupConfig
from swembed.dedup.spark.model import vectors_from_bytes
from swembed.runtime.ranges import Range, check_ranges

MAX_AUTO_CELLS = 16_384
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # multiplicative hash: spreads consecutive ids over the blocks


@dataclass
class CellSearch:
    """How the distributed search partitions the vectors."""

    cells: int | None = None  # coarse cells; default: distinct texts * cells_per_text / cell_rows
    cells_per_text: int = 2  # each vector is searched in its this-many nearest cells
    cell_rows: int = 2_000  # the mean cell size the default cell count aims at
    max_task_rows: int = 40_000  # vectors per search task at most (larger cells are split)
    sample_per_cell: int = 64  # k-means training vectors per cell, collected to the driver ...
    max_sample: int = 65_536  # ... but never more than this many (64 MB at d = 256): the driver stays flat
    kmeans_iterations: int = 10
    seed: int = 0

    def validate(self) -> None:
        check_ranges(CELL_SEARCH_RANGES, self)

    def cell_count(self, n_vectors: int) -> int:
        wanted = self.cells or min(MAX_AUTO_CELLS, round(n_vectors * self.cells_per_text / self.cell_rows))
        return max(1, min(wanted, n_vectors))

    def sample_size(self, n_vectors: int) -> int:
        """How many vectors the driver collects to train the cells."""
        return min(n_vectors, self.cell_count(n_vectors) * self.sample_per_cell, self.max_sample)


CELL_SEARCH_RANGES = {
    "cells": Range(1, unset="distinct texts * cells_per_text / cell_rows"),
    **{name: Range(1) for name in ("cells_per_text", "cell_rows", "sample_per_cell", "max_sample",
                                   "kmeans_iterations")},
    "max_task_rows": Range(2),
}


def _joined(frames):
    """One byte string per batch of float32 vectors: the driver receives a few large rows, not many small ones."""
    import pandas as pd

    for frame in frames:
        yield pd.DataFrame({"blob": [b"".join(frame["_vector"].tolist())]})


def train_cells(vectors, n_vectors: int, dim: int, search: CellSearch) -> tuple[np.ndarray, np.ndarray]:
    """Spherical k-means centroids from a seeded sample of ``vectors`` (columns _id, _vector), and each
    cell's estimated size (vectors assigned to it, multi-assignment included). The driver holds at most
    ``search.sample_size`` vectors, whatever the collection's size."""
    import faiss

    cells, wanted = search.cell_count(n_vectors), search.sample_size(n_vectors)
    fraction = min(1.0, 1.2 * wanted / max(n_vectors, 1))
    chosen = vectors.select("_vector").sample(fraction=fraction, seed=search.seed).limit(wanted)
    sample = vectors_from_bytes([r["blob"] for r in chosen.mapInPandas(_joined, "blob binary").collect()], dim)
    cells = min(cells, len(sample))
    kmeans = faiss.Kmeans(dim, cells, niter=search.kmeans_iterations, spherical=True, seed=search.seed,
                          max_points_per_centroid=search.sample_per_cell, min_points_per_centroid=1)
    kmeans.train(sample)
    centroids = cast(np.ndarray, kmeans.centroids)  # set by train (faiss's stubs say Optional)
    counts = np.bincount(nearest_cells(centroids, sample, search.cells_per_text).ravel(), minlength=cells)
    return centroids, counts * (n_vectors / len(sample))


def blocks_per_cell(estimated_rows: np.ndarray, max_task_rows: int) -> np.ndarray:
    """1 for a cell searched whole; else its number of blocks (>= 3), each about ``max_task_rows / 2``."""
    blocks = np.ceil(2 * estimated_rows / max_task_rows).astype(np.int64)
    return np.where(estimated_rows > max_task_rows, np.maximum(blocks, 3), 1)


def task_keys(ids: np.ndarray, cells: np.ndarray, blocks: np.ndarray) -> tuple[np.ndarray, ...]:
    """The search tasks of each (id, cell) assignment: (its row in the inputs, cell, low block, high block),
    ``blocks`` being ``blocks_per_cell``'s answer. A whole cell is
    task (cell, 0, 0); a split cell's row in block b joins tasks (cell, min(b, o), max(b, o)) for every other
    block o, so each pair of its rows shares at least one task."""
    n_blocks = blocks[cells]
    copies = np.where(n_blocks > 1, n_blocks - 1, 1)
    row = np.repeat(np.arange(len(ids)), copies)
    cell, n = cells[row], n_blocks[row]
    own = ((ids[row].astype(np.uint64) * _GOLDEN) >> np.uint64(32)).astype(np.int64) % n
    other = np.arange(len(row)) - np.repeat(np.cumsum(copies) - copies, copies)
    other = other + (other >= own)  # every block but its own
    split = n > 1
    low = np.where(split, np.minimum(own, other), 0)
    high = np.where(split, np.maximum(own, other), 0)
    return row, cell, low, high


class MaxParam(AccumulatorParam):
    """A running maximum (idempotent, so a retried task does not distort it)."""

    def zero(self, value: int) -> int:
        return 0

    def addInPlace(self, a: int, b: int) -> int:
        return max(a, b)


def candidate_pairs(vectors, n_vectors: int, dim: int, threshold: float, config: DedupConfig,
                    search: CellSearch) -> tuple[object, object, dict]:
    """Distinct pairs (a < b ids, cosine >= threshold) among ``vectors`` (columns _id long, _vector float32
    bytes) as a DataFrame (a, b, similarity); links (a, b) with the pairs' connected components, each task's
    components as stars (fewer rounds for ``components.connected_roots``); and what the search did."""
    from pyspark.sql import functions as F

    spark = vectors.sparkSession
    centroids, estimated = train_cells(vectors, n_vectors, dim, search)
    blocks = blocks_per_cell(estimated, search.max_task_rows)
    shared = spark.sparkContext.broadcast((centroids, blocks))
    largest, tasks_run = spark.sparkContext.accumulator(0, MaxParam()), spark.sparkContext.accumulator(0)
    k, method, nprobe, m = config.k, config.method, config.nprobe, search.cells_per_text

    def assign(frames):
        import pandas as pd

        centres, n_blocks = shared.value
        for frame in frames:
            ids, raw = frame["_id"].to_numpy(np.int64), frame["_vector"].to_numpy()
            cells = nearest_cells(centres, vectors_from_bytes(raw, dim), m)
            owner, rank = np.nonzero(cells >= 0)
            row, cell, low, high = task_keys(ids[owner], cells[owner, rank], n_blocks)
            yield pd.DataFrame({"_cell": cell, "_low": low, "_high": high, "_id": ids[owner[row]],
                                "_vector": raw[owner[row]]})

    def search_task(frame):
        import pandas as pd

        largest.add(len(frame))
        tasks_run.add(1)
        frame = frame.sort_values("_id")  # local roots (smallest row) are then the smallest ids: stars are final
        ids = frame["_id"].to_numpy(np.int64)
        i, j, sims = near_pairs(vectors_from_bytes(frame["_vector"].tolist(), dim), threshold, k, method, nprobe)
        roots = connected_roots(len(ids), i, j)
        joined = np.flatnonzero(roots != np.arange(len(ids)))
        a, b = ids[i], ids[j]
        return pd.DataFrame({"a": np.r_[np.minimum(a, b), ids[roots[joined]]],
                             "b": np.r_[np.maximum(a, b), ids[joined]],
                             "similarity": np.r_[sims, np.zeros(len(joined), np.float32)],
                             "link": np.r_[np.zeros(len(a), bool), np.ones(len(joined), bool)]})

    tasks = vectors.select("_id", "_vector").mapInPandas(
        assign, "_cell int, _low int, _high int, _id long, _vector binary")
    found = tasks.groupBy("_cell", "_low", "_high").applyInPandas(
        search_task, "a long, b long, similarity float, link boolean").localCheckpoint()
    pairs = found.filter(~F.col("link")).groupBy("a", "b").agg(F.max("similarity").alias("similarity"))
    links = found.filter(F.col("link")).select("a", "b")
    stats = {"cells": int(len(centroids)), "cells_per_text": m, "split_cells": int((blocks > 1).sum()),
             "search_tasks": int(tasks_run.value),
             "largest_cell_estimate": int(estimated.max(initial=0)), "largest_task_rows": int(largest.value),
             "kmeans_sample": search.sample_size(n_vectors)}
    return pairs, links, stats
