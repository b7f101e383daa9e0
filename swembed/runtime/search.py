"""Ranking by cosine: sentence vectors are unit vectors (or zero), so a float32 dot product is their cosine (an
ensemble's: the weighted mean of its members' cosines). Ties go to the lower index, so a ranking is the same however
it is batched or blocked. ``SearchIndex`` (``swembed.runtime.index``) and ``StaticEmbedder.search`` rank through
``rank`` (a scorer of whole rows: the cosine, BM25 or their hybrid) or ``rank_vectors`` (the cosine of a corpus's
vectors: ``QUERIES_AT_ONCE`` queries a matrix product, over blocks of passages, so that a million passages are
read once for many queries). Each query's top k are kept as blocks of scores go by (``best_of_blocks``): the first
block by ``np.argpartition``, then only the scores above the k-th best so far, so most of a million scores are
looked at once, by a row maximum."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

SCORE_CELLS = 1 << 24  # scores computed at once (queries x passages): 64 MB of float32
QUERIES_AT_ONCE = 256  # rank_vectors: queries in one matrix product (more: the passages are read fewer times)
SELECTED_COLUMNS = 1 << 14  # best_of_blocks: scores looked through at once
_DEQUANTISED_ROWS = 1 << 15  # int8 passage rows turned into float32 at once


class Hit(NamedTuple):
    """One passage found for a query: its row (position in the corpus), its score (the cosine; a hybrid or lexical
    search: that score), its id (the row, unless the index was given ids), its cosine (always; an index with passage
    windows: its dense score, the cosine plus gamma times its best window's) and its BM25 score (a hybrid or
    lexical search; else None)."""

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


def _partition_top(scores: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """(columns, scores), each (rows, min(top_k, columns)): every row's highest scores, highest first, equal scores
    by lower column (also where the k-th score is shared with columns left out)."""
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


def _merged(indices: np.ndarray, values: np.ndarray, new_indices: np.ndarray, new_values: np.ndarray,
            top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``top_k`` of the best so far (``indices``, ``values``) and of ``new_values`` (at ``new_indices``, all
    higher, rising): equal scores by lower index, as the best so far are put first."""
    columns = np.concatenate([indices, np.broadcast_to(new_indices, new_values.shape)], axis=1)
    picked, best = _partition_top(np.concatenate([values, new_values], axis=1), top_k)
    return np.take_along_axis(columns, picked, axis=1), best


def best_of_blocks(blocks: Iterable[tuple[int, np.ndarray]], rows: int,
                   top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices, scores), each (rows, min(top_k, passages)), highest first, equal scores by lower index, of the
    (rows, width) ``blocks`` of scores given as (first index, block), in rising order of index. Once ``top_k`` are
    kept, a block counts only for the rows whose maximum passes their k-th best, and there only its scores above
    it (an equal score at a higher index never displaces one kept)."""
    indices, values = np.zeros((rows, 0), dtype=np.int64), None
    for first, block in blocks:
        for start in range(0, block.shape[1], SELECTED_COLUMNS):
            part = block[:, start : start + SELECTED_COLUMNS]
            if values is None or values.shape[1] < top_k:  # not k kept yet: every score counts
                values = np.zeros((rows, 0), dtype=part.dtype) if values is None else values
                indices, values = _merged(indices, values, np.arange(first + start, first + start + part.shape[1]),
                                          part, top_k)
                continue
            kth = values[:, -1]
            for row in np.flatnonzero(part.max(axis=1) > kth):
                above = np.flatnonzero(part[row] > kth[row])
                found, best = _merged(indices[row : row + 1], values[row : row + 1], first + start + above,
                                      part[row : row + 1, above], top_k)
                indices[row], values[row] = found[0], best[0]
    assert values is not None  # a corpus of one passage at least
    return indices, values


def top_hits(scores: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices, scores), each (queries, min(top_k, passages)): every row's highest scores, highest first, equal
    scores by lower index (also where the k-th score is shared with passages left out)."""
    return best_of_blocks([(0, scores)], len(scores), top_k)


Scored = np.ndarray | tuple[np.ndarray, np.ndarray | None, np.ndarray]  # cosines, or (ranking score, cosines, BM25)
HitCosines = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (a batch of queries, their hits' indices) -> cosines


def _hits(indices: np.ndarray, values: np.ndarray, cosines: np.ndarray, lexical: np.ndarray | None,
          ids: Sequence[int | str] | None) -> list[list[Hit]]:
    """Each row's ``Hit``s from its (indices, scores, cosines and BM25 scores of the hits)."""
    dense, bm25 = cosines.tolist(), None if lexical is None else lexical.tolist()
    return [[Hit(i, s, i if ids is None else ids[i], dense[row][j], bm25[row][j] if bm25 else None)
             for j, (i, s) in enumerate(zip(row_indices, row_values))]
            for row, (row_indices, row_values) in enumerate(zip(indices.tolist(), values.tolist()))]


def _checked(top_k: object, passages: int) -> int:
    """``top_k`` checked, and a corpus of one passage at least."""
    checked = check_top_k(top_k)
    if passages < 1:
        raise ValueError("search needs a corpus of at least one passage; this one is empty")
    return checked


def rank(score: Callable[[np.ndarray], Scored], queries: np.ndarray, passages: int, top_k: int,
         ids: Sequence[int | str] | None = None, cosines: HitCosines | None = None) -> list[list[Hit]]:
    """Each query's ``top_k`` passages as ``Hit``s, best first. ``score(batch)`` gives a batch of queries' (batch,
    passages) cosines, or (the scores ranked by, the cosines, the BM25 scores): the one scoring function of the
    caller; batches hold ``SCORE_CELLS`` scores at most. Where ``score`` gives None for the cosines (a lexical
    search), ``cosines(batch, indices)`` gives those of the hits alone."""
    top_k = _checked(top_k, passages)
    batch = max(1, SCORE_CELLS // passages)
    found: list[list[Hit]] = []
    for start in range(0, len(queries), batch):
        asked = queries[start : start + batch]
        scored = score(asked)
        ranked, dense, lexical = scored if isinstance(scored, tuple) else (scored, scored, None)
        indices, values = top_hits(ranked, top_k)
        if dense is None:
            if cosines is None:
                raise ValueError("rank: the scorer gave no cosines, and no cosines of hits were given")
            hit_cosines = cosines(asked, indices)
        else:
            hit_cosines = np.take_along_axis(dense, indices, axis=1)
        bm25 = np.take_along_axis(lexical, indices, axis=1) if lexical is not None else None
        found += _hits(indices, values, hit_cosines, bm25, ids)
    return found


def dense_blocks(queries: np.ndarray, vectors: np.ndarray,
                 scales: np.ndarray | None) -> Iterator[tuple[int, np.ndarray]]:
    """(first passage, the cosines of ``queries`` with a block of passages), ``SCORE_CELLS`` scores a block."""
    width = max(1, SCORE_CELLS // max(1, len(queries)))
    for start in range(0, len(vectors), width):
        yield start, dense_scores(queries, vectors[start : start + width],
                                  None if scales is None else scales[start : start + width])


def rank_blocks(queries: np.ndarray, blocks_of: Callable[[np.ndarray], Iterable[tuple[int, np.ndarray]]],
                passages: int, top_k: int, ids: Sequence[int | str] | None = None) -> list[list[Hit]]:
    """``rank`` by dense scores given block by block, without holding every score: ``QUERIES_AT_ONCE`` queries a
    batch, ``blocks_of(batch)`` giving (first passage, the batch's scores with a block of passages) in rising order
    of passage (``best_of_blocks``); each hit's score is its dense score."""
    top_k = _checked(top_k, passages)
    found: list[list[Hit]] = []
    for start in range(0, len(queries), QUERIES_AT_ONCE):
        asked = queries[start : start + QUERIES_AT_ONCE]
        indices, values = best_of_blocks(blocks_of(asked), len(asked), top_k)
        found += _hits(indices, values, values, None, ids)
    return found


def rank_vectors(queries: np.ndarray, vectors: np.ndarray, scales: np.ndarray | None, top_k: int,
                 ids: Sequence[int | str] | None = None) -> list[list[Hit]]:
    """``rank`` by the cosine of query vectors with passage vectors (int8 rows: times ``scales``), block by block
    (``rank_blocks``, ``dense_blocks``)."""
    return rank_blocks(queries, lambda asked: dense_blocks(asked, vectors, scales), len(vectors), top_k, ids)


def scores_at(queries: np.ndarray, vectors: np.ndarray, scales: np.ndarray | None,
              rows: np.ndarray | slice) -> np.ndarray:
    """``dense_scores`` of the queries with the ``rows`` of ``vectors`` alone (an array of rows, or a slice: a view,
    nothing gathered), int8 rows times their scales."""
    return dense_scores(queries, vectors[rows], None if scales is None else scales[rows])
