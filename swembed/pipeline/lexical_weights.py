"""Stage 9, lexical weights: one weight per word row multiplying the BM25 weight of the word's term wherever a search
query holds it (the lexical channel of hybrid and lexical search, ``swembed.runtime.lexical``), fitted on the recipe's
query -> passage pairs (issue 82: "BM25's IDF to start, then weights learned on the pairs").

The fit works on terms (stemmed words, as the lexical channel indexes them): BM25 postings of the pairs' distinct
passages at the product's settings; for each query its ``negatives`` best other passages by BM25, mined once (from a
shortlist of ``SHORTLIST`` times as many by BM25 over its terms in at most ``MINE_MAX_DF`` of the passages: the
commonest terms cost most of a search over every passage and move its ranking least); then cross-entropy of the
query's own passage against them on BM25 scores whose term weights are multiplied by ``w = softplus(u + c)`` (``w =
1`` at ``u = 0``), times one learned scale, plus ``l2 * sum(u^2)`` over the terms of a batch; ``epochs`` passes of
Adam at ``lr`` in batches of ``batch_size`` queries. A word row gets its stem's weight (1 for a stem no training
query holds, and for piece and gram rows, which are not words). Torch on the CPU, about a minute for 99k pairs.
Artifact: ``lexical_weights.npy`` (rows,) float32.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from swembed.runtime.embedder import StaticEmbedder
from swembed.runtime.folder import KIND_WEIGHT_RANGE
from swembed.runtime.lexical import Lexical
from swembed.runtime.stemmer import stem

if TYPE_CHECKING:  # annotations only
    from swembed.pipeline.config import LexicalWeightsConfig

logger = logging.getLogger(__name__)

MINE_MAX_DF = 0.05  # terms in more of the passages than this are left out of the mining search (not of the fit)
MINED_AT_ONCE = 256  # queries whose rare-term scores are found at once while mining (fewer: less padding)
SHORTLIST = 4  # times the negatives asked: the passages mined by the rarer terms, then ranked by all
COMMON_BYTES = 256 << 20  # the commoner terms' weights are added to the shortlist from dense rows of at most this
MATCHED_AT_ONCE = 8192  # queries whose terms are looked up in their candidates at once
SCALE = float(np.exp(-1.0))  # the learned scale's start: BM25 sums of ~10-30 into logits of a few units
SHIFT = float(np.log(np.e - 1))  # softplus(SHIFT) = 1


class TermPairs:
    """The training pairs as the fit reads them: the postings of their distinct passages, each query's terms (rows of
    the postings) and the row of each query's passage."""

    def __init__(self, model: StaticEmbedder, pairs: Sequence[tuple[str, str]]) -> None:
        rows: dict[str, int] = {}
        self.gold = np.array([rows.setdefault(passage, len(rows)) for _, passage in pairs], dtype=np.int64)
        self.lexical = Lexical.build(model, list(rows))
        self.queries = self.lexical.query_terms(model, [query for query, _ in pairs])
        self._keys: np.ndarray | None = None  # each posting's term * passages + passage (made on first use)
        self._mined: dict[int, np.ndarray] = {}  # negatives -> mine's answer (mined once for every fit)

    def mine(self, negatives: int) -> np.ndarray:
        """(queries, 1 + negatives): each query's own passage, then its ``negatives`` best other passages by BM25
        (fewer columns where there are fewer other passages): a shortlist of ``SHORTLIST`` times as many by BM25 over
        the query's terms in at most ``MINE_MAX_DF`` of the passages, then ranked by BM25 over all its terms (the
        commoner terms' weights added from dense rows of them, ``COMMON_BYTES`` at a time); float32 sums."""
        from scipy import sparse

        lexical, n = self.lexical, self.lexical.passages
        negatives = max(0, min(negatives, n - 1))
        if negatives in self._mined:
            return self._mined[negatives]
        df = np.diff(lexical.offsets)
        rare = df <= MINE_MAX_DF * n
        indptr = np.cumsum([0, *map(len, self.queries)])
        indices = np.concatenate(self.queries) if self.queries else np.zeros(0, np.int64)
        held = sparse.csr_matrix((np.ones(len(indices), np.float32), indices, indptr),
                                 shape=(len(self.queries), len(lexical.terms)))
        held.sum_duplicates()  # a repeated word counts each time, as Lexical.scores counts it
        shortlist, scores = self._shortlist(held, rare, min(SHORTLIST * negatives, n - 1))
        scores += self._common_scores(held, ~rare, shortlist)
        best = np.argsort(-scores, axis=1, kind="stable")[:, :negatives]
        out = np.concatenate([self.gold[:, None], np.take_along_axis(shortlist, best, axis=1)], axis=1)
        self._mined[negatives] = out
        return out

    def _shortlist(self, held, rare: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """((queries, count) passages, their float32 BM25 over the ``rare`` terms ``held`` holds): the ``count``
        highest of each query's passages, its own left out; where fewer passages share a rare term, the next
        passages after its own fill the row (their score 0, -inf where one repeats a passage already there)."""
        import torch
        from scipy import sparse

        lexical, n = self.lexical, self.lexical.passages
        df = np.diff(lexical.offsets)
        kept = np.repeat(rare, df)  # new arrays: the postings themselves stay as they are
        weights = sparse.csr_matrix((lexical.weights()[kept], lexical.docs[kept],
                                     np.concatenate([[0], np.cumsum(np.where(rare, df, 0))])),
                                    shape=(len(lexical.terms), n))
        passages = np.empty((len(self.gold), count), dtype=np.int64)
        scores = np.empty((len(self.gold), count), dtype=np.float32)
        for start in range(0, len(self.gold), MINED_AT_ONCE):
            found = (held[start : start + MINED_AT_ONCE] @ weights).tocsr()
            own = self.gold[start : start + MINED_AT_ONCE]
            found.data[found.indices == np.repeat(own, np.diff(found.indptr))] = -np.inf  # never its own
            lengths = np.diff(found.indptr)
            row_of = np.repeat(np.arange(len(own)), lengths)
            at = np.arange(len(found.data)) - np.repeat(found.indptr[:-1], lengths)
            width = count + int(lengths.max(initial=0))  # room for count fill passages after the found
            padded = np.full((len(own), width), -np.inf, dtype=np.float32)
            padded[row_of, at] = found.data
            top = torch.topk(torch.from_numpy(padded), count, dim=1)
            value, position = top.values.numpy(), top.indices.numpy()
            inside = position < lengths[:, None]
            found_column = found.indices[np.minimum(found.indptr[:-1, None] + position, max(found.nnz - 1, 0))] \
                if found.nnz else np.zeros_like(position)
            chosen = np.where(inside, found_column, (own[:, None] + 1 + position) % n)  # fill: passages after its own
            filled = ~np.isfinite(value)
            value[filled] = 0
            repeated = np.zeros_like(filled)  # a fill passage that is a found one too
            for row in np.flatnonzero(filled.any(axis=1)):
                _, first = np.unique(chosen[row], return_index=True)
                repeated[row] = True
                repeated[row, first] = False
            value[repeated | (chosen == own[:, None])] = -np.inf
            passages[start : start + len(own)], scores[start : start + len(own)] = chosen, value
        return passages, scores

    def _common_scores(self, held, common: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """(queries, candidates) float32 BM25 of each query's ``common`` terms in its candidate passages: each block
        of those terms' weights as dense rows (at most ``COMMON_BYTES``), gathered at the candidates."""
        lexical, n = self.lexical, self.lexical.passages
        weights = lexical.weights()
        out = np.zeros(candidates.shape, dtype=np.float32)
        pairs = held.tocoo()  # (query, term, count), by query
        terms = np.flatnonzero(common)
        per_block = max(1, COMMON_BYTES // (4 * max(n, 1)))
        for first in range(0, len(terms), per_block):
            block = terms[first : first + per_block]
            dense = np.zeros((len(block), n), dtype=np.float32)
            for i, term in enumerate(block.tolist()):
                start, stop = lexical.offsets[term], lexical.offsets[term + 1]
                dense[i, lexical.docs[start:stop]] = weights[start:stop]
            local = np.full(len(lexical.terms), -1, dtype=np.int64)
            local[block] = np.arange(len(block))
            mine = local[pairs.col] >= 0
            rows, counts = pairs.row[mine], pairs.data[mine]
            gathered = dense[local[pairs.col[mine]][:, None], candidates[rows]] * counts[:, None]
            np.add.at(out, rows, gathered)
        return out

    def features(self, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(candidate row, term, BM25 weight) of every query term found in a candidate passage; candidate row =
        query * width + column of ``candidates``; by candidate row."""
        parts = [self._matches(start, min(start + MATCHED_AT_ONCE, len(self.gold)), candidates)
                 for start in range(0, len(self.gold), MATCHED_AT_ONCE)]
        offsets = np.arange(0, len(self.gold), MATCHED_AT_ONCE) * candidates.shape[1]
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
        return (np.concatenate([rows + offset for (rows, _, _), offset in zip(parts, offsets)]),
                np.concatenate([terms for _, terms, _ in parts]), np.concatenate([values for _, _, values in parts]))

    def _matches(self, start: int, stop: int, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``features`` of queries ``start:stop``, their candidate rows counted from ``start``."""
        lexical, n, width = self.lexical, self.lexical.passages, candidates.shape[1]
        if self._keys is None:
            self._keys = np.repeat(np.arange(len(lexical.terms), dtype=np.int64), np.diff(lexical.offsets)) * n + \
                lexical.docs
        keys, queries = self._keys, self.queries[start:stop]
        lengths = np.fromiter(map(len, queries), dtype=np.int64, count=len(queries))
        terms = np.repeat(np.concatenate(queries) if queries else np.zeros(0, np.int64), width)
        query_of = np.repeat(np.arange(len(queries)), lengths * width)
        columns = np.tile(np.arange(width), len(terms) // max(width, 1))  # each query term against each candidate
        wanted = terms * n + candidates[start + query_of, columns]
        by_key = np.argsort(wanted)  # sorted needles: searchsorted walks the keys once (8-14x, reports/build-levers.md)
        at = np.empty(len(wanted), dtype=np.int64)
        at[by_key] = np.minimum(np.searchsorted(keys, wanted[by_key]), max(len(keys) - 1, 0))
        found = keys[at] == wanted if len(keys) else np.zeros(len(wanted), bool)
        rows = query_of[found] * width + columns[found]
        order = np.argsort(rows, kind="stable")
        return rows[order], terms[found][order], lexical.weights()[at[found]][order]


def fit_term_weights(data: TermPairs, settings: LexicalWeightsConfig, seed: int = 0,
                     progress: Callable[[str], None] = logger.info) -> tuple[np.ndarray, dict]:
    """(each term of ``data.lexical``'s weight, float32; statistics), fitted as the module's doc says."""
    import torch

    started = time.time()
    candidates = data.mine(settings.negatives)
    rows, terms, values = data.features(candidates)
    queries, width, n_terms = len(data.gold), candidates.shape[1], len(data.lexical.terms)
    progress(f"lexical weights: {queries:,} pairs, {data.lexical.passages:,} passages, {n_terms:,} terms; "
             f"{width - 1} BM25 negatives a query mined in {time.time() - started:.0f} s")
    torch.manual_seed(seed)
    rows_t, terms_t, values_t = map(torch.from_numpy, (rows, terms, values.astype(np.float32)))
    starts = torch.searchsorted(rows_t, torch.arange(0, queries * width + 1, width))
    u = torch.zeros(n_terms, requires_grad=True)
    log_scale = torch.tensor(float(np.log(SCALE)), requires_grad=True)
    optimiser = torch.optim.Adam([u, log_scale], lr=settings.lr)
    rng = np.random.default_rng(seed)
    losses = []
    for epoch in range(settings.epochs if width > 1 else 0):
        order = rng.permutation(queries)
        for start in range(0, queries, settings.batch_size):
            batch = torch.from_numpy(order[start : start + settings.batch_size])
            sizes = starts[batch + 1] - starts[batch]
            at = torch.repeat_interleave(starts[batch] - torch.cumsum(sizes, 0) + sizes, sizes) + \
                torch.arange(int(sizes.sum()))
            local = torch.repeat_interleave(torch.arange(len(batch)), sizes) * width + rows_t[at] % width
            # index_select, not u[...]: its gradient is summed in a fixed order (advanced indexing's scatter-add on the
            # CPU is not, and two fits of the same pairs differed by up to 2.6e-5)
            w = torch.nn.functional.softplus(u.index_select(0, terms_t[at]) + SHIFT)
            scores = torch.zeros(len(batch) * width).index_add(0, local, w * values_t[at]).view(len(batch), width)
            own = torch.zeros(len(batch), dtype=torch.long)  # column 0: the query's own passage
            loss = torch.nn.functional.cross_entropy(scores * log_scale.exp(), own)
            loss = loss + settings.l2 * (u.index_select(0, torch.unique(terms_t[at])) ** 2).sum()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
        progress(f"lexical weights: epoch {epoch + 1}/{settings.epochs}, loss {np.mean(losses[-50:]):.4f}")
    weights = torch.nn.functional.softplus(u + SHIFT).detach().numpy().astype(np.float32)
    weights = np.clip(weights, *KIND_WEIGHT_RANGE).astype(np.float32)
    return weights, {"pairs": queries, "passages": data.lexical.passages, "terms": n_terms,
                     "terms moved": int((np.abs(weights - 1) > 0.05).sum()),
                     "final loss": round(float(np.mean(losses[-50:])), 4) if losses else None}


def row_weights(model: StaticEmbedder, terms: Sequence[str], weights: np.ndarray) -> np.ndarray:
    """(rows,) float32: each word row the weight of its stem among ``terms`` (1 where absent; piece and gram rows
    1)."""
    of_term = dict(zip(terms, weights.tolist()))
    out = np.ones(model.rows, dtype=np.float32)
    for vocab in [model.tokenizer.vocab, *(t.vocab for t in model.tokenizers.values())]:
        for word, row in vocab.items():
            out[row] = of_term.get(stem(word), 1.0)
    return out


def fit_lexical_weights(model: StaticEmbedder, pairs: Sequence[tuple[str, str]], settings: LexicalWeightsConfig,
                        seed: int = 0, progress: Callable[[str], None] = logger.info) -> tuple[np.ndarray, dict]:
    """(lexical weights, one per table row, float32; statistics) fitted on ``pairs`` (query, passage) with the fit's
    settings of ``settings`` (its ``files`` are not read: ``pairs`` are the pairs)."""
    started = time.time()
    data = TermPairs(model, pairs)
    weights, stats = fit_term_weights(data, settings, seed, progress)
    out = row_weights(model, data.lexical.terms, weights)
    return out, {**stats, "rows moved": int((np.abs(out - 1) > 0.05).sum()), "fit_s": round(time.time() - started, 1)}
