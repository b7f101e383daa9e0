"""Stage 8, query weights: one weight per table row for search queries, fitted on the recipe's query -> passage pairs
with the rows frozen (issue 82: query/document asymmetry inside the lookup).

A query encodes as any text does, a weighted mean of its rows, except that each row's weight is multiplied by the
row's query weight (``encode(texts, kind="query")``; docs/format.md, "Query and document weights"). The weights are
``exp(s)``, one ``s`` per row, fitted by in-batch InfoNCE (temperature ``tau``) over each query's own passage, the
batch's other passages and ``negatives`` hard negatives per query mined with the table itself (the passages of the
training pairs nearest the query by today's cosine that are not its own), plus ``l2 * s^2`` for each row a batch
reads, over the batch's size (so ``l2`` weighs against one pair's evidence). Passages keep today's encoding; only
rows that occur in at least ``min_queries`` training queries move. Torch on the CPU, minutes.
Artifact: ``query_weights.npy`` (rows,) float32.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from swembed.runtime.embedder import StaticEmbedder, kind_weighted
from swembed.runtime.folder import KIND_WEIGHT_FILES, KIND_WEIGHT_RANGE
from swembed.runtime.tokenizer import TokenIds

if TYPE_CHECKING:  # annotations only
    from swembed.pipeline.config import QueryWeightsConfig

logger = logging.getLogger(__name__)

LOG_LIMIT = float(np.log(KIND_WEIGHT_RANGE[1]))  # |s| stays within the format's range of a weight
QUERY_WEIGHTS_FILE = KIND_WEIGHT_FILES["query"]


@dataclass
class Pairs:
    """Training pairs as the fit reads them: each query's rows, the passages' vectors (today's encoding) and the
    index of each query's passage."""

    queries: TokenIds
    starts: np.ndarray  # each query's first entry in ``queries.ids``
    passages: np.ndarray  # (passages, dim) float32, L2-normalised
    gold: np.ndarray  # (queries,) the row of ``passages`` of each query's passage

    def save(self, path: Path) -> None:
        """The encoded pairs in one .npz (an experiment's cache)."""
        arrays = {"ids": self.queries.ids, "lengths": self.queries.lengths, "passages": self.passages,
                  "gold": self.gold}
        if self.queries.weights is not None:
            arrays["weights"] = self.queries.weights
        np.savez(path, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as its allow_pickle

    @classmethod
    def load(cls, path: Path) -> Pairs:
        with np.load(path) as saved:
            queries = TokenIds(saved["ids"], saved["lengths"], saved["weights"] if "weights" in saved else None)
            return cls(queries, np.cumsum(queries.lengths) - queries.lengths, saved["passages"], saved["gold"])

    @classmethod
    def encode(cls, model: StaticEmbedder, pairs: Sequence[tuple[str, str]]) -> Pairs:
        index: dict[str, int] = {}
        gold = np.array([index.setdefault(passage, len(index)) for _, passage in pairs], dtype=np.int64)
        queries = model.tokenizer.encode_batch([query for query, _ in pairs])
        starts = np.cumsum(queries.lengths) - queries.lengths
        return cls(queries, starts, model.encode(list(index)), gold)

    def base_vectors(self, model: StaticEmbedder) -> np.ndarray:
        """Each query's vector as today (no query weights)."""
        return model.mean_rows(self.queries)


def fit_query_weights(model: StaticEmbedder, pairs: Sequence[tuple[str, str]], settings: QueryWeightsConfig,
                      seed: int = 0, progress: Callable[[str], None] = logger.info) -> tuple[np.ndarray, dict]:
    """(query weights, one per table row, float32; statistics) fitted on ``pairs`` (query, passage) with the fit's
    settings of ``settings`` (its ``files`` are not read: ``pairs`` are the pairs)."""
    from swembed.pipeline.train import mine_negatives

    started = time.time()
    data = Pairs.encode(model, pairs)
    negatives = mine_negatives(data.base_vectors(model), data.passages, data.gold, settings.negatives, seed)
    progress(f"query weights: {len(data.gold):,} pairs, {len(data.passages):,} passages encoded and "
             f"{settings.negatives} hard negatives a query mined in {time.time() - started:.0f} s")
    weights, stats = fit_on(model, data, negatives, settings, seed, progress)
    return weights, {**stats, "fit_s": round(time.time() - started, 1)}


def fit_on(model: StaticEmbedder, data: Pairs, negatives: np.ndarray, settings: QueryWeightsConfig, seed: int = 0,
           progress: Callable[[str], None] = logger.info) -> tuple[np.ndarray, dict]:
    """``fit_query_weights`` on pairs already encoded, with their hard negatives mined (the first
    ``settings.negatives`` columns of ``negatives`` are read)."""
    import torch

    negatives = negatives[:, : settings.negatives]
    torch.manual_seed(seed)
    table = torch.from_numpy(np.array(model.float_rows(), dtype=np.float32))  # a writable copy
    passages = torch.from_numpy(data.passages)
    log_weights = torch.zeros(model.rows, dtype=torch.float32, requires_grad=True)
    frozen = torch.from_numpy(np.bincount(data.queries.ids, minlength=model.rows) < settings.min_queries)
    optimiser = torch.optim.Adam([log_weights], lr=settings.lr)
    rng = np.random.default_rng(seed)
    losses = []
    for epoch in range(settings.epochs):
        order = rng.permutation(len(data.gold))
        for start in range(0, len(order), settings.batch_size):
            batch = order[start : start + settings.batch_size]
            loss = _batch_loss(torch, table, passages, log_weights, data, batch, negatives[batch], settings)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            with torch.no_grad():
                log_weights.clamp_(-LOG_LIMIT, LOG_LIMIT).masked_fill_(frozen, 0.0)
            losses.append(loss.item())
        progress(f"query weights: epoch {epoch + 1}/{settings.epochs}, loss {np.mean(losses[-50:]):.4f}")
    weights = np.exp(log_weights.detach().numpy().astype(np.float64)).astype(np.float32)
    weights = np.clip(weights, *KIND_WEIGHT_RANGE).astype(np.float32)
    moved = np.abs(np.log(weights)) > 1e-3
    return weights, {"pairs": len(data.gold), "passages": len(data.passages), "rows moved": int(moved.sum()),
                     "final loss": round(float(np.mean(losses[-50:])), 4) if losses else None}


def _batch_loss(torch, table, passages, log_weights, data: Pairs, batch: np.ndarray, negatives: np.ndarray,
                settings: QueryWeightsConfig):
    """InfoNCE of one batch of queries over the batch's passages and their hard negatives, plus the L2 term."""
    lengths = data.queries.lengths[batch]
    positions = np.concatenate([np.arange(s, s + n) for s, n in zip(data.starts[batch], lengths)]) \
        if lengths.sum() else np.zeros(0, dtype=np.int64)
    ids = torch.from_numpy(data.queries.ids[positions])
    base = torch.from_numpy(data.queries.weights[positions]) if data.queries.weights is not None else 1.0
    offsets = torch.from_numpy(np.concatenate(([0], np.cumsum(lengths)[:-1])))
    row_weights = base * torch.exp(log_weights.index_select(0, ids))  # a gradient summed in a fixed order
    queries = torch.nn.functional.embedding_bag(ids, table, offsets, mode="sum", per_sample_weights=row_weights)
    queries = torch.nn.functional.normalize(queries, dim=1)
    gold = data.gold[batch]
    candidates = np.concatenate([gold, negatives.ravel()])
    logits = queries @ passages[torch.from_numpy(candidates)].T / settings.tau
    same = torch.from_numpy(candidates[None, :] == gold[:, None])  # a query's own passage, wherever it appears
    same[torch.arange(len(batch)), torch.arange(len(batch))] = False
    logits = logits.masked_fill(same, float("-inf"))
    loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(batch)))
    rows = torch.unique(ids)
    return loss + settings.l2 * (log_weights.index_select(0, rows) ** 2).sum() / len(batch)


def query_weighted(model: StaticEmbedder, texts: Sequence[str], weights: np.ndarray) -> np.ndarray:
    """``texts`` encoded with ``weights`` as the query weights (what ``encode(texts, kind="query")`` gives a table
    that carries them), for measuring weights before they are written."""
    return model.mean_rows(kind_weighted(model.tokenizer.encode_batch(list(texts)), weights))
