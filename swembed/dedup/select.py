"""``swembed dedup-select``: outliers and representatives among a finished run's kept records (each kept distinct
text once), from the run's stored vectors.

- **Outliers**: the texts with the lowest *outlier score*, the mean cosine to their ``k`` nearest other kept texts
  (exact search below 50k texts, k-means cells above); the least like the rest come first.
- **Representatives**: greedy facility location on the ``k``-nearest-neighbour graph. A text *covers* itself
  (cosine 1) and the texts that have it among their ``k`` nearest (their cosine, clipped at 0); the coverage of a
  set is the sum over texts of the best cosine to a chosen text that covers it. Each step adds the text that raises
  the coverage most (lazy greedy; ties: the first), so the first picks come from the largest dense groups, one per
  group before a second from any, and isolated texts come last.
"""
from __future__ import annotations

import heapq
from pathlib import Path
from typing import Any

import numpy as np

from swembed.dedup.clusters import MAX_NEIGHBOURS, neighbours
from swembed.dedup.state import Run, write_tsv
from swembed.runtime.folder import atomic_directory


def knn(vectors: np.ndarray, k: int, method: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` nearest other rows (ids, -1 where fewer exist) and their float32 cosines."""
    ids = np.full((len(vectors), k), -1, np.int64)
    sims = np.full((len(vectors), k), -np.inf, np.float32)
    for start, top, scores in neighbours(vectors, k, method):
        scores = np.where(top >= 0, scores, -np.inf)
        best = np.argsort(-scores, axis=1, kind="stable")[:, :k]  # ann blocks carry k + 1 columns (self: -1)
        top, scores = np.take_along_axis(top, best, axis=1), np.take_along_axis(scores, best, axis=1)
        ids[start : start + len(top), : top.shape[1]], sims[start : start + len(top), : top.shape[1]] = top, scores
    ids[~np.isfinite(sims)] = -1
    return ids, sims


def outlier_scores(ids: np.ndarray, sims: np.ndarray) -> np.ndarray:
    """Mean cosine to the nearest neighbours found (no neighbour: -1)."""
    found = ids >= 0
    total = np.where(found, sims, 0.0).sum(axis=1)
    return np.where(found.any(axis=1), total / np.maximum(found.sum(axis=1), 1), -1.0).astype(np.float32)


def facility_location(ids: np.ndarray, sims: np.ndarray, count: int) -> tuple[list[int], list[float]]:
    """``count`` rows chosen greedily for coverage (see the module's doc) and the coverage each one added."""
    n = len(ids)
    owner, member = np.nonzero(ids >= 0)
    covers = ids[owner, member]  # the candidate covers `owner` with the cosine sims[owner, member]
    cand = np.r_[covers, np.arange(n)]
    covered = np.r_[owner, np.arange(n)]
    gains = np.r_[np.maximum(sims[owner, member], 0.0), np.ones(n, np.float32)].astype(np.float64)
    order = np.argsort(cand, kind="stable")
    cand, covered, gains = cand[order], covered[order], gains[order]
    starts = np.searchsorted(cand, np.arange(n + 1))
    coverage = np.zeros(n)

    def gain(c: int) -> float:
        span = slice(starts[c], starts[c + 1])
        return float(np.maximum(gains[span] - coverage[covered[span]], 0.0).sum())

    heap = [(-gain(c), c) for c in range(n)]
    heapq.heapify(heap)
    chosen: list[int] = []
    added: list[float] = []
    picked = np.zeros(n, bool)
    while heap and len(chosen) < count:
        _, c = heapq.heappop(heap)
        if picked[c]:
            continue
        fresh = gain(c)
        if heap and -heap[0][0] > fresh + 1e-12:  # another may now gain more: re-queue with the fresh gain
            heapq.heappush(heap, (-fresh, c))
            continue
        picked[c] = True
        chosen.append(c)
        added.append(fresh)
        span = slice(starts[c], starts[c + 1])
        np.maximum.at(coverage, covered[span], gains[span])
    return chosen, added


def select(run_folder: str | Path, out: str | Path, outliers: int = 0, representatives: int = 0, k: int = 16,
           overwrite: bool = False) -> str:
    """Write ``outliers.tsv`` and ``representatives.tsv`` for the run's kept texts to the new folder ``out``;
    returns them as text."""
    if isinstance(k, int) and not isinstance(k, bool) and k > MAX_NEIGHBOURS:
        raise ValueError(f"--k must be at most {MAX_NEIGHBOURS} (neighbours per text), got {k}")
    for name, value, low in (("--outliers", outliers, 0), ("--representatives", representatives, 0), ("--k", k, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer of at least {low}, got {value!r}")
    if outliers == 0 and representatives == 0:
        raise ValueError("give --outliers N and/or --representatives N")
    run = Run(run_folder)
    run.check_inputs_unchanged()
    kept = np.flatnonzero(run.arrays["reason"] == 0)
    unique, first = np.unique(run.arrays["unique_of_record"][kept], return_index=True)
    records = kept[first]
    vectors = np.asarray(run.vectors[unique], dtype=np.float32)
    ids, sims = knn(vectors, k, run.config.method)
    scores = outlier_scores(ids, sims)
    worst = np.argsort(scores, kind="stable")[:outliers].tolist()
    chosen, added = facility_location(ids, sims, representatives) if representatives else ([], [])
    texts = run.texts(records[[*worst, *chosen]].tolist())
    rows_out: list[list[Any]]  # rank, score, record, file, position, text
    rows_rep: list[list[Any]]
    rows_out = [[rank, f"{scores[i]:.4f}", int(records[i]), *run.address(int(records[i])), texts[int(records[i])]]
                for rank, i in enumerate(worst, 1)]
    rows_rep = [[rank, f"{gain:.4f}", int(records[i]), *run.address(int(records[i])), texts[int(records[i])]]
                for rank, (i, gain) in enumerate(zip(chosen, added), 1)]
    with atomic_directory(Path(out), overwrite, "dedup-select", [str(run.folder), *map(str, run.inputs)]) as tmp:
        if outliers:
            write_tsv(tmp / "outliers.tsv", ["rank", "mean_knn_cosine", "record", "file", "position", "text"],
                      rows_out)
        if representatives:
            write_tsv(tmp / "representatives.tsv", ["rank", "coverage_gain", "record", "file", "position", "text"],
                      rows_rep)
    lines = [f"outliers (mean cosine to the {k} nearest):"] * bool(outliers)
    lines += [f"  {r[1]}  [{r[2]}] {r[5][:70]!r}" for r in rows_out]
    lines += ["representatives (coverage gain):"] * bool(representatives)
    lines += [f"  {r[1]}  [{r[2]}] {r[5][:70]!r}" for r in rows_rep]
    return "\n".join(lines)
