"""Passage windows: a long passage is also read as windows of its words, and its dense score is its own cosine plus
``GAMMA`` times its best window's.

A static table encodes a passage as the mean of its words, so a query that matches one part of a long passage (one
sentence of an abstract, one answer of a page) is diluted by the rest. A passage of more than ``width`` words
(split at whitespace, as Python's ``str.split()`` splits) is also read as windows of ``width`` words every
``width // 2`` words, the last one ending at the passage's end; each window is encoded as a document. A passage of
``width`` words or fewer has no windows: its best window is itself. ``WIDTH``, ``GAMMA`` and the hybrid's
``ALPHA`` beside windows were chosen on the held-out dev pairs (``python -m lab.passage_windows``,
reports/mteb/passage_windows.md); the JavaScript runtime splits and scores the same way (js/src/search.js).

A dense search over more than ``SHORTLIST_FROM`` passages reads windows for each query's shortlist alone: its
``SHORTLIST`` passages of highest cosine. A passage outside it scores as a passage without windows, (1 + ``gamma``)
times its cosine, so it ranks behind the shortlist unless its cosine is close to the shortlist's best. A hybrid
reads every window (its z-scores are taken over every passage's dense score), and so do the dense scores of a
lexical search's hits. Against reading every window (``python -m lab.window_shortlist``,
reports/mteb/window_shortlist.md), a shortlist of 1,000 gives every query's top 10 on SciFact and the dev
pseudo-queries, and their nDCG@10 (61.53, 44.48); one of 200 keeps 99.86-100% of the top 10 (SciFact 61.53,
pseudo-queries 44.42). Fewer passages than ``SHORTLIST_FROM`` read every window: one matrix product for many
queries is cheaper than gathering each query's shortlisted windows (SciFact's 5,183 passages: 2 ms a query against
21), and from a few tens of thousands of passages the gather costs less (a million: reports/million-windows.md).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import numpy as np

from swembed.runtime.search import top_hits

WIDTH = 8  # words a window (chosen on dev: reports/mteb/passage_windows.md)
GAMMA = 0.5  # weight of the best window's cosine beside the passage's own
ALPHA = 0.8  # the hybrid's default weight of the dense score where passages have windows (without: lexical.ALPHA)
SHORTLIST = 1000  # passages a query's windows are read for in a dense search of ...
SHORTLIST_FROM = 20_000  # ... more passages than this (see the module's doc)
SCORE_CELLS = 1 << 24  # window cosines computed at once (queries x windows)
PASSAGES_AT_ONCE = 1 << 14  # passages split into windows and encoded at once while an index is built
# Python's str.split() whitespace, spelled out so that JavaScript splits the same characters
WHITESPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_SPLIT = re.compile(f"[{WHITESPACE}]+")


class DocumentEncoder(Protocol):
    def encode(self, texts: Iterable[str] | str, *, kind: str | None = None) -> np.ndarray: ...


def check_width(width: object) -> int | None:
    """``width`` as the windows' words (an integer of at least 2), or None (no windows)."""
    if width is None:
        return None
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width < 2:
        raise ValueError(f"windows must be a number of words of at least 2 (or None: no windows), got {width!r}")
    return int(width)


def _words(text: str) -> list[str]:
    return [word for word in _SPLIT.split(text) if word]


def window_count(words: int, width: int) -> int:
    """How many windows a text of ``words`` words has: none up to ``width`` words, then one every ``width // 2``
    words until one reaches the end."""
    step = width // 2
    return 0 if words <= width else -(-(words - width) // step) + 1


def word_windows(text: str, width: int) -> list[str]:
    """``text``'s windows of ``width`` words every ``width // 2``, the last ending at the text's end, each its words
    joined by one space; none for a text of ``width`` words or fewer."""
    words = _words(text)
    step = width // 2
    return [" ".join(words[start : start + width]) for start in range(0, window_count(len(words), width) * step, step)]


def encode_windows(model: DocumentEncoder, passages: Sequence[str], width: int,
                   dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(window vectors (windows, ``dim``) float32, offsets (passages + 1,) int64: passage i's windows are rows
    ``offsets[i]:offsets[i + 1]``): the windows counted first, then encoded ``PASSAGES_AT_ONCE`` passages at a time
    into their rows of the one array (no copy of every vector at the end)."""
    counts = np.fromiter((window_count(len(_words(p)), width) for p in passages), dtype=np.int64, count=len(passages))
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    vectors = np.zeros((int(offsets[-1]), dim), dtype=np.float32)
    for start in range(0, len(passages), PASSAGES_AT_ONCE):
        texts = [window for passage in passages[start : start + PASSAGES_AT_ONCE]
                 for window in word_windows(passage, width)]
        if texts:
            first = offsets[start]
            vectors[first : first + len(texts)] = model.encode(texts, kind="document")
    return vectors, offsets


def window_rows(offsets: np.ndarray, passages: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the window rows of ``passages`` in their order, where each passage's run of them starts among those rows)."""
    first, counts = offsets[passages], offsets[passages + 1] - offsets[passages]
    starts = np.cumsum(counts) - counts
    return np.repeat(first - starts, counts) + np.arange(int(counts.sum())), starts


def windowed(whole: np.ndarray, queries: np.ndarray, offsets: np.ndarray, passages: np.ndarray,
             cosines_of: Callable[[np.ndarray, np.ndarray | slice], np.ndarray], gamma: float = GAMMA) -> np.ndarray:
    """(queries, passages) float32 dense scores: ``whole`` (the queries' cosines with ``passages``) plus ``gamma``
    times each passage's best window's cosine (its own where it has no window). ``cosines_of(queries, rows)``: the
    queries' cosines with those window rows (an array of rows, or a slice where they are one run); at most
    ``SCORE_CELLS`` of them are computed at once."""
    best = np.array(whole, dtype=np.float32, copy=True)
    counts = offsets[passages + 1] - offsets[passages]
    have = np.flatnonzero(counts)
    if len(have):
        cap = max(1, SCORE_CELLS // max(1, len(queries)))
        reach = np.cumsum(counts[have])
        begin = 0
        while begin < len(have):
            done = int(reach[begin - 1]) if begin else 0
            end = max(begin + 1, int(np.searchsorted(reach, done + cap, side="right")))
            columns = have[begin:end]
            rows, starts = window_rows(offsets, passages[columns])
            one_run = rows[-1] - rows[0] + 1 == len(rows)  # passages in order: a view of the rows, no gathered copy
            asked: np.ndarray | slice = slice(int(rows[0]), int(rows[-1]) + 1) if one_run else rows
            best[:, columns] = np.maximum.reduceat(cosines_of(queries, asked), starts, axis=1)
            begin = end
    best *= np.float32(gamma)
    best += whole
    return best


def shortlists(cosines: np.ndarray, size: int = SHORTLIST) -> list[np.ndarray]:
    """Each query's shortlist, in rising order of passage: its ``size`` passages of highest cosine (equal scores by
    lower passage, as a ranking keeps them)."""
    return [np.sort(row) for row in top_hits(cosines, size)[0]]


def shortlisted(whole: np.ndarray, queries: np.ndarray, offsets: np.ndarray, lists: Sequence[np.ndarray],
                cosines_of: Callable[[np.ndarray, np.ndarray | slice], np.ndarray], gamma: float = GAMMA) -> np.ndarray:
    """(queries, passages) float32 dense scores from ``whole`` (the queries' cosines with every passage): each
    query's passages of ``lists`` (its shortlist, rising) windowed as ``windowed`` scores them, every other passage
    (1 + ``gamma``) times its cosine, as a passage without windows."""
    scores = np.array(whole, dtype=np.float32, copy=True)
    scores *= np.float32(gamma)
    scores += whole
    for row, passages in enumerate(lists):
        scores[row, passages] = windowed(whole[row : row + 1, passages], queries[row : row + 1], offsets, passages,
                                         cosines_of, gamma)[0]
    return scores
