"""The lexical channel of search: BM25 over the terms of a corpus, and the hybrid score that joins it to the dense
cosine. A text's terms are its words as the table's own tokeniser splits them (the words ``encode`` looks up,
before any back-off: an unknown word is a term like any other), each stemmed by Snowball's English stemmer
(``swembed.runtime.stemmer``: words of the letters a-z only; no stop words). Postings record whether their terms
are stemmed (``stemmer``; indexes saved before stemming have unstemmed terms, and their queries are not stemmed).

Postings are kept by term, CSR-like, as four numpy arrays: ``offsets`` (terms + 1,) int64 (term t's postings are
``offsets[t]:offsets[t + 1]``), ``docs`` (postings,) int32 (passages, rising within a term), ``counts`` (postings,)
int32 (the term's occurrences in that passage) and ``lengths`` (passages,) int32 (words in each passage). BM25 is
Lucene's: ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` and ``tf / (tf + k1 * (1 - b + b * length / avgdl))``,
a query's score the sum over its words (a repeated word counts each time); each posting's weight is computed once.
A query is scored against every passage by adding its terms' runs of postings (no loop over passages). A table with
lexical weights (``kind_weights`` ``"lexical"``, one per row, docs/format.md) multiplies each query word's term
weights by the weight of the word's row (float32 products; a word without a row of its own: 1), weights learned on
query -> passage pairs (``swembed.pipeline.lexical_weights``); the postings are the same either way.

Hybrid: per query, the cosines and the BM25 scores over all passages are each z-normalised (minus their mean,
over their standard deviation; a constant row is all 0) and mixed, ``alpha * z(cosine) + (1 - alpha) * z(bm25)``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from swembed.runtime.langid import LanguageIdentifier
from swembed.runtime.stemmer import stem
from swembed.runtime.tokenizer import WordTokenizer

K1 = 1.5  # BM25 term-frequency saturation, chosen on dev data (lab/hybrid_search.py, reports/hybrid.md)
B = 0.9  # BM25 length normalisation, chosen likewise
ALPHA = 0.55  # weight of the normalised cosine in the hybrid score, chosen likewise (with stemmed terms)
STEMMER = "snowball-english"  # the stemmer of new postings (swembed.runtime.stemmer); None: words as they are
STEMMERS = (STEMMER,)
MODES = ("dense", "hybrid", "lexical")
_WORDS_AT_ONCE = 1 << 16  # passages split into words at once while postings are built
_WEIGHED_AT_ONCE = 1 << 22  # postings weighed at once (float64 temporaries of 32 MB each)


class Splitter(Protocol):  # what the lexical channel needs of a model (StaticEmbedder)
    tokenizer: WordTokenizer
    tokenizers: dict[str, WordTokenizer]
    kind_weights: dict[str, np.ndarray]

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


def check_stemmer(stemmer: str | None) -> str | None:
    if stemmer is not None and stemmer not in STEMMERS:
        raise ValueError(f"stemmer must be None or one of {', '.join(STEMMERS)}, got {stemmer!r}")
    return stemmer


def split_words(model: Splitter, texts: Sequence[str]) -> list[list[str]]:
    """The words of each text, split by the tokeniser its encoding uses (a multilingual table: its language's)."""
    return [tokenizer.words(text) for tokenizer, text in zip(tokenizers_of(model, texts), texts)]


def tokenizers_of(model: Splitter, texts: Sequence[str]) -> list[WordTokenizer]:
    """The tokeniser each text's encoding uses (a multilingual table: its language's)."""
    if not model.tokenizers:
        return [model.tokenizer] * len(texts)
    return [model.tokenizers[code] for code in model.language_identifier.predict(list(texts))]


def word_weights(model: Splitter, tokenizers: Sequence[WordTokenizer], words: Sequence[Sequence[str]]
                 ) -> list[np.ndarray] | None:
    """Each word's lexical weight (``words[i]``: the words ``tokenizers[i]`` split a text into), float32: its row's in
    the table's ``kind_weights["lexical"]``, 1 for a word without a row; None for a table without lexical weights."""
    weights = model.kind_weights.get("lexical")
    if weights is None:
        return None
    one = np.float32(1)
    return [np.array([weights[row] if (row := tokenizer.vocab.get(word)) is not None else one for word in text],
                     dtype=np.float32).reshape(-1)
            for tokenizer, text in zip(tokenizers, words)]


def split_terms(model: Splitter, texts: Sequence[str], stemmer: str | None = STEMMER) -> list[list[str]]:
    """The lexical channel's terms of each text: its words (``split_words``), stemmed unless ``stemmer`` is None."""
    words = split_words(model, texts)
    return words if check_stemmer(stemmer) is None else _stemmed(words)


def _stemmed(words: list[list[str]]) -> list[list[str]]:
    stems: dict[str, str] = {}  # texts repeat their words: each distinct word is stemmed once a call
    return [[stems[w] if w in stems else stems.setdefault(w, stem(w)) for w in text] for text in words]


def _stems(words: list[str], stemmer: str | None) -> tuple[list[str], np.ndarray]:
    """(the terms of ``words`` under ``stemmer``, in first-seen order; each word's term): words of one stem share it."""
    check_stemmer(stemmer)
    if stemmer is None:
        return words, np.arange(len(words), dtype=np.int64)
    terms: dict[str, int] = {}
    term_of_word = np.fromiter((terms.setdefault(stem(word), len(terms)) for word in words), dtype=np.int64,
                               count=len(words))
    return list(terms), term_of_word


def _term_runs(offsets: np.ndarray, postings: int) -> list[tuple[int, int]]:
    """(first, last) terms of consecutive runs of about ``postings`` postings each (more where one term has more)."""
    holding = np.searchsorted(offsets, np.arange(postings, offsets[-1], postings), side="right") - 1
    bounds = np.unique(np.concatenate([[0], holding, [len(offsets) - 1]])).tolist()
    return list(zip(bounds[:-1], bounds[1:]))


class Lexical:
    """BM25 postings of a corpus (see the module's doc) and the term list they are indexed by."""

    def __init__(self, terms: Sequence[str], offsets: np.ndarray, docs: np.ndarray, counts: np.ndarray,
                 lengths: np.ndarray, k1: float = K1, b: float = B, where: object = "<postings>",
                 stemmer: str | None = None) -> None:
        self.terms, self.offsets, self.docs, self.counts, self.lengths = terms, offsets, docs, counts, lengths
        self.k1, self.b, self.where, self.stemmer = k1, b, where, stemmer
        self._lookup: dict[str, int] | None = None
        self._weights: tuple[float, float, np.ndarray] | None = None

    @classmethod
    def build(cls, model: Splitter, passages: Sequence[str], stemmer: str | None = STEMMER) -> Lexical:
        """The postings of ``passages``, split into terms with ``model``'s tokeniser (``split_terms``: the words,
        numbered as they come, then each distinct word's stem once for the whole corpus)."""
        lookup: dict[str, int] = {}  # words numbered in first-seen order
        chunks, lengths = [], []
        for start in range(0, len(passages), _WORDS_AT_ONCE):
            words = split_words(model, passages[start : start + _WORDS_AT_ONCE])
            lengths.append(np.fromiter(map(len, words), dtype=np.int64, count=len(words)))
            flat = [word for text in words for word in text]
            for word in dict.fromkeys(flat):  # the chunk's distinct words
                lookup.setdefault(word, len(lookup))
            chunks.append(np.fromiter(map(lookup.__getitem__, flat), dtype=np.int64, count=len(flat)))
        terms, term_of_word = _stems(list(lookup), stemmer)
        lexical = cls.from_term_ids(terms, [term_of_word[chunk] for chunk in chunks],
                                    np.concatenate(lengths) if lengths else np.zeros(0, int))
        lexical._lookup, lexical.stemmer = {term: i for i, term in enumerate(terms)}, stemmer
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

    def warm(self) -> None:
        """Make now what the first search would (the term lookup, the postings' BM25 weights): before threads share
        the postings, or to time a search without them."""
        self.lookup()
        self.weights()

    def weights(self) -> np.ndarray:
        """Each posting's BM25 weight, idf times the saturated term frequency, float32 (made once per k1, b; in
        float64, a run of terms at a time)."""
        if self._weights is not None and self._weights[:2] == (self.k1, self.b):
            return self._weights[2]
        df = np.diff(self.offsets)
        n = self.passages
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        average = float(self.lengths.mean()) if n else 0.0
        weights = np.empty(len(self.docs), dtype=np.float32)
        for first, last in _term_runs(self.offsets, _WEIGHED_AT_ONCE):  # float64 temporaries of a run alone
            start, stop = self.offsets[first], self.offsets[last]
            norm = self.k1 * (1 - self.b + self.b * self.lengths[self.docs[start:stop]] / max(average, 1e-12))
            counts = self.counts[start:stop].astype(np.float64)
            weights[start:stop] = np.repeat(idf[first:last], df[first:last]) * counts / (counts + norm)
        self._weights = (self.k1, self.b, weights)
        return weights

    def query_terms(self, model: Splitter, queries: Sequence[str]) -> list[np.ndarray]:
        """Each query's terms (stemmed as the postings' are) as term rows; terms the corpus lacks are left out (they
        score nothing)."""
        return self.weighted_query_terms(model, queries)[0]

    def weighted_query_terms(self, model: Splitter, queries: Sequence[str]
                             ) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
        """(``query_terms``, each of those terms' weight from the word it came from: ``word_weights``, None for a
        table without lexical weights), what ``scores`` takes."""
        tokenizers = tokenizers_of(model, queries)  # a multilingual table identifies each query's language once
        words = [tokenizer.words(query) for tokenizer, query in zip(tokenizers, queries)]
        weights = word_weights(model, tokenizers, words)
        terms = words if check_stemmer(self.stemmer) is None else _stemmed(words)
        get = self.lookup().get
        rows = [np.array([-1 if t is None else t for t in map(get, text)], dtype=np.int64) for text in terms]
        kept = [text >= 0 for text in rows]
        return ([text[keep] for text, keep in zip(rows, kept)],
                None if weights is None else [w[keep] for w, keep in zip(weights, kept)])

    def scores(self, term_lists: Sequence[np.ndarray], term_weights: Sequence[np.ndarray] | None = None
               ) -> np.ndarray:
        """(queries, passages) float32 BM25 scores of queries given as term rows: a query's words' runs of
        postings, each added to the passages it names (a sum of a few columns of the term x passage weights), in
        float64 and in the query's order of words; ``term_weights`` (``weighted_query_terms``): each posting's
        weight times its query term's, in float32, first."""
        weights = self.weights()
        out = np.zeros((len(term_lists), self.passages), dtype=np.float32)
        summed = np.zeros(self.passages, dtype=np.float64)
        for row, terms in enumerate(term_lists):
            if len(terms):
                summed.fill(0)
                scale = term_weights[row].tolist() if term_weights is not None else [1.0] * len(terms)
                for term, weight in zip(terms.tolist(), scale):  # a term names each passage once: no index repeats
                    start, stop = self.offsets[term], self.offsets[term + 1]
                    posted = weights[start:stop]
                    summed[self.docs[start:stop]] += posted if weight == 1 else posted * np.float32(weight)
                out[row] = summed
        return out


def _centre_and_scale(rows: np.ndarray, weight: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(each row's mean, ``weight`` over its standard deviation; 0 for a constant row), (rows, 1) float32 each; the
    sums in float64 (as ``mean`` and ``std`` make them, bit for bit), a row at a time (temporaries of one row)."""
    mean, spread = np.zeros((len(rows), 1)), np.zeros((len(rows), 1))
    for row in range(len(rows)):
        values = rows[row : row + 1]
        mean[row] = np.add.reduce(values, axis=1, dtype=np.float64) / values.shape[1]
        deviations = values - mean[row]
        np.multiply(deviations, deviations, out=deviations)
        spread[row] = np.sqrt(np.add.reduce(deviations, axis=1) / values.shape[1])
    scale = np.divide(weight, spread, out=np.zeros_like(spread), where=spread > 0)
    return mean.astype(np.float32), scale.astype(np.float32)


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
