"""The lexical channel of search: BM25 over the words of a corpus, as the table's own tokeniser splits them (the
words ``encode`` looks up, before any back-off: an unknown word is a term like any other), and the hybrid score
that joins it to the dense cosine.

Postings are kept by term, CSR-like, as four numpy arrays: ``offsets`` (terms + 1,) int64 (term t's postings are
``offsets[t]:offsets[t + 1]``), ``docs`` (postings,) int32 (passages, rising within a term), ``counts`` (postings,)
int32 (the term's occurrences in that passage) and ``lengths`` (passages,) int32 (words in each passage). BM25 is
Lucene's: ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` and ``tf / (tf + k1 * (1 - b + b * length / avgdl))``,
a query's score the sum over its words (a repeated word counts each time); each posting's weight is computed once.
A query is scored against every passage by one ``np.bincount`` over its terms' postings (no loop over passages).

Hybrid: per query, the cosines and the BM25 scores over all passages are each z-normalised (minus their mean,
over their standard deviation; a constant row is all 0) and mixed, ``alpha * z(cosine) + (1 - alpha) * z(bm25)``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from swembed.runtime.langid import LanguageIdentifier
from swembed.runtime.tokenizer import WordTokenizer

K1 = 1.5  # BM25 term-frequency saturation, chosen on dev data (lab/hybrid_search.py, reports/hybrid.md)
B = 0.9  # BM25 length normalisation, chosen likewise
ALPHA = 0.6  # weight of the normalised cosine in the hybrid score, chosen likewise
MODES = ("dense", "hybrid", "lexical")
_WORDS_AT_ONCE = 1 << 16  # passages split into words at once while postings are built


class Splitter(Protocol):  # what the lexical channel needs of a model (StaticEmbedder)
    tokenizer: WordTokenizer
    tokenizers: dict[str, WordTokenizer]

    @property
    def language_identifier(self) -> LanguageIdentifier: ...


def check_mode(mode: object) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return str(mode)


def check_alpha(alpha: object) -> float:
    """``alpha`` as a float in [0, 1] (None: the default ``ALPHA``)."""
    if alpha is None:
        return ALPHA
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) or not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be a number from 0 to 1, got {alpha!r}")
    return float(alpha)


def split_words(model: Splitter, texts: Sequence[str]) -> list[list[str]]:
    """The words of each text, split by the tokeniser its encoding uses (a multilingual table: its language's)."""
    if not model.tokenizers:
        words = model.tokenizer.words
        return [words(text) for text in texts]
    detected = model.language_identifier.predict(list(texts))
    return [model.tokenizers[code].words(text) for code, text in zip(detected, texts)]


def _ranges(offsets: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """The positions ``offsets[t]:offsets[t + 1]`` of every term ``t`` of ``terms``, concatenated."""
    starts, sizes = offsets[terms], offsets[terms + 1] - offsets[terms]
    total = int(sizes.sum())
    return np.repeat(starts - (np.cumsum(sizes) - sizes), sizes) + np.arange(total, dtype=np.int64)


class Lexical:
    """BM25 postings of a corpus (see the module's doc) and the term list they are indexed by."""

    def __init__(self, terms: Sequence[str], offsets: np.ndarray, docs: np.ndarray, counts: np.ndarray,
                 lengths: np.ndarray, k1: float = K1, b: float = B, where: object = "<postings>") -> None:
        self.terms, self.offsets, self.docs, self.counts, self.lengths = terms, offsets, docs, counts, lengths
        self.k1, self.b, self.where = k1, b, where
        self._lookup: dict[str, int] | None = None
        self._weights: tuple[float, float, np.ndarray] | None = None

    @classmethod
    def build(cls, model: Splitter, passages: Sequence[str]) -> Lexical:
        """The postings of ``passages``, split into words with ``model``'s tokeniser."""
        lookup: dict[str, int] = {}  # terms numbered in first-seen order
        chunks, lengths = [], []
        for start in range(0, len(passages), _WORDS_AT_ONCE):
            words = split_words(model, passages[start : start + _WORDS_AT_ONCE])
            lengths.append(np.fromiter(map(len, words), dtype=np.int64, count=len(words)))
            flat = [word for text in words for word in text]
            for word in dict.fromkeys(flat):  # the chunk's distinct words
                lookup.setdefault(word, len(lookup))
            chunks.append(np.fromiter(map(lookup.__getitem__, flat), dtype=np.int64, count=len(flat)))
        lexical = cls.from_term_ids(list(lookup), chunks, np.concatenate(lengths) if lengths else np.zeros(0, int))
        lexical._lookup = lookup
        return lexical

    @classmethod
    def from_term_ids(cls, terms: list[str], chunks: list[np.ndarray], lengths: np.ndarray) -> Lexical:
        """Postings from each passage's term ids (``chunks``, concatenated: passage i owns the next
        ``lengths[i]``)."""
        passages = len(lengths)
        term_ids = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
        docs = np.repeat(np.arange(passages, dtype=np.int64), lengths)
        keys, counts = np.unique(term_ids * passages + docs, return_counts=True)  # by term, then by passage
        per_term = np.bincount(keys // passages, minlength=len(terms))
        offsets = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(per_term, out=offsets[1:])
        return cls(terms, offsets, (keys % passages).astype(np.int32), counts.astype(np.int32),
                   lengths.astype(np.int32))

    @property
    def passages(self) -> int:
        return len(self.lengths)

    def lookup(self) -> dict[str, int]:
        """Term -> its row of ``offsets`` (made on first use)."""
        if self._lookup is None:
            terms = self.terms.tolist() if hasattr(self.terms, "tolist") else list(self.terms)
            lookup = {term: i for i, term in enumerate(terms)}
            if len(lookup) != len(terms):
                raise ValueError(f"{self.where}: a term is listed twice; the index is damaged")
            self._lookup = lookup
        return self._lookup

    def weights(self) -> np.ndarray:
        """Each posting's BM25 weight, idf times the saturated term frequency, float32 (made once per k1, b)."""
        if self._weights is not None and self._weights[:2] == (self.k1, self.b):
            return self._weights[2]
        df = np.diff(self.offsets)
        n = self.passages
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        average = float(self.lengths.mean()) if n else 0.0
        norm = self.k1 * (1 - self.b + self.b * self.lengths[self.docs] / max(average, 1e-12))
        counts = self.counts.astype(np.float64)
        weights = (np.repeat(idf, df) * counts / (counts + norm)).astype(np.float32)
        self._weights = (self.k1, self.b, weights)
        return weights

    def query_terms(self, model: Splitter, queries: Sequence[str]) -> list[np.ndarray]:
        """Each query's words as term rows; words the corpus lacks are left out (they score nothing)."""
        get = self.lookup().get
        return [np.array([t for t in map(get, words) if t is not None], dtype=np.int64)
                for words in split_words(model, queries)]

    def scores(self, term_lists: Sequence[np.ndarray]) -> np.ndarray:
        """(queries, passages) float32 BM25 scores of queries given as term rows."""
        weights = self.weights()
        out = np.zeros((len(term_lists), self.passages), dtype=np.float32)
        for row, terms in enumerate(term_lists):  # a loop over queries; each is scored in one bincount
            if len(terms):
                at = _ranges(self.offsets, terms)
                out[row] = np.bincount(self.docs[at], weights=weights[at], minlength=self.passages)
        return out


def _centre_and_scale(rows: np.ndarray, weight: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(each row's mean, ``weight`` over its standard deviation; 0 for a constant row), (rows, 1) float32 each; the
    sums in float64."""
    spread = rows.std(axis=1, dtype=np.float64, keepdims=True)
    scale = np.divide(weight, spread, out=np.zeros_like(spread), where=spread > 0)
    return rows.mean(axis=1, dtype=np.float64, keepdims=True).astype(np.float32), scale.astype(np.float32)


def standardised(scores: np.ndarray, weight: float = 1.0) -> np.ndarray:
    """Each row minus its mean, over its standard deviation (a constant row: all 0), times ``weight``; float32."""
    rows = np.asarray(scores, dtype=np.float32)
    mean, scale = _centre_and_scale(rows, weight)
    out = np.subtract(rows, mean)
    out *= scale
    return out


def hybrid(dense: np.ndarray, lexical: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """The hybrid score: ``alpha * z(dense) + (1 - alpha) * z(lexical)``, each z over a query's row (float32)."""
    out = standardised(dense, alpha)
    out += standardised(lexical, 1 - alpha)
    return out
