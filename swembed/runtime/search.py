"""Ranking by cosine: sentence vectors are unit vectors (or zero), so a float32 dot product is their cosine (an
ensemble's: the weighted mean of its members' cosines). Each query's top k come from one matrix product over a
batch of queries and ``np.argpartition``; ties go to the lower index, so a ranking is the same however it is
batched. ``SearchIndex`` (``swembed.runtime.index``) and ``StaticEmbedder.search`` rank through ``rank``."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

SCORE_CELLS = 1 << 24  # scores computed at once (queries x passages): 64 MB of float32
_DEQUANTISED_ROWS = 1 << 15  # int8 passage rows turned into float32 at once


class Hit(NamedTuple):
    """One passage found for a query: its row (position in the corpus), its score (the cosine; a hybrid or lexical
    search: that score), its id (the row, unless the index was given ids), its cosine (always) and its BM25 score
    (a hybrid or lexical search; else None)."""

    index: int  # type: ignore[assignment]  # the field shadows tuple.index, which a hit has no use for
    score: float
    id: int | str
    dense: float | None = None
    lexical: float | None = None


def check_top_k(top_k: object) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise ValueError(f"top_k must be an integer of at least 1, got {top_k!r}")
    return int(top_k)


def dense_scores(queries: np.ndarray, vectors: np.ndarray, scales: np.ndarray | None = None) -> np.ndarray:
    """(queries, passages) float32 dot products of query vectors with passage vectors (int8 rows times their
    scale, de-quantised ``_DEQUANTISED_ROWS`` at a time)."""
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    if scales is None:
        return queries @ np.asarray(vectors).T
    out = np.empty((len(queries), len(vectors)), dtype=np.float32)
    for start in range(0, len(vectors), _DEQUANTISED_ROWS):
        block = np.asarray(vectors[start : start + _DEQUANTISED_ROWS], dtype=np.float32)
        out[:, start : start + len(block)] = (queries @ block.T) * scales[start : start + len(block)]
    return out


def top_hits(scores: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices, scores), each (queries, min(top_k, passages)): every row's highest scores, highest first, equal
    scores by lower index (also where the k-th score is shared with passages left out)."""
    n = scores.shape[1]
    k = min(top_k, n)
    if k < n:
        picked = np.argpartition(scores, n - k, axis=1)[:, n - k :]
        kth = np.take_along_axis(scores, picked, axis=1).min(axis=1)
        shared = (scores == kth[:, None]).sum(axis=1) > (np.take_along_axis(scores, picked, axis=1)
                                                         == kth[:, None]).sum(axis=1)
        for row in np.flatnonzero(shared):  # the k-th score ties with a passage left out: lower indices first
            above = np.flatnonzero(scores[row] > kth[row])
            picked[row] = np.concatenate([above, np.flatnonzero(scores[row] == kth[row])[: k - len(above)]])
    else:
        picked = np.broadcast_to(np.arange(n), scores.shape)
    values = np.take_along_axis(scores, picked, axis=1)
    order = np.lexsort((picked, -values), axis=-1)
    return np.take_along_axis(picked, order, axis=1), np.take_along_axis(values, order, axis=1)


Scored = np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray]  # cosines, or (ranking score, cosine, BM25)


def rank(score: Callable[[np.ndarray], Scored], queries: np.ndarray, passages: int, top_k: int,
         ids: Sequence[int | str] | None = None) -> list[list[Hit]]:
    """Each query's ``top_k`` passages as ``Hit``s, best first. ``score(batch)`` gives a batch of queries' (batch,
    passages) cosines, or (the scores ranked by, the cosines, the BM25 scores): the one scoring function of the
    caller; batches hold ``SCORE_CELLS`` scores at most."""
    top_k = check_top_k(top_k)
    if passages < 1:
        raise ValueError("search needs a corpus of at least one passage; this one is empty")
    batch = max(1, SCORE_CELLS // passages)
    found: list[list[Hit]] = []
    for start in range(0, len(queries), batch):
        scored = score(queries[start : start + batch])
        ranked, dense, lexical = scored if isinstance(scored, tuple) else (scored, scored, None)
        indices, values = top_hits(ranked, top_k)
        cosines = np.take_along_axis(dense, indices, axis=1).tolist()
        bm25 = np.take_along_axis(lexical, indices, axis=1).tolist() if lexical is not None else None
        for row, (row_indices, row_values) in enumerate(zip(indices.tolist(), values.tolist())):
            found.append([Hit(i, s, i if ids is None else ids[i], cosines[row][j], bm25[row][j] if bm25 else None)
                          for j, (i, s) in enumerate(zip(row_indices, row_values))])
    return found
