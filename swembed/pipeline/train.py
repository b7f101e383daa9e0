"""The one training loop: a static table refined by one or more objectives, each a loss over batches of texts
encoded exactly as the inference tokeniser encodes them (weighted mean of rows, then L2 norm).

* ``kd``: knowledge distillation of sentence similarities (paper eq. 2-3): the cross-entropy of the teacher's
  in-batch similarity softmax (diagonal excluded, temperature tau) to the student's.
* ``contrastive``: the symmetric in-batch InfoNCE on translation pairs (paper eq. 4-5).
* ``query kd``: asymmetric distillation: each short text's softmax over the batch's long texts (its own
  document among them, diagonal included), the teacher's to the student's; what a retrieval ranking asks for.

KD batches are random (the paper) or ``neighbours``: each batch is drawn from one cell of a spherical k-means
over the teacher vectors, so the in-batch softmax must rank close neighbours as the teacher does; that is the
fine-grained similarity STS asks for (+0.7 STS-B dev at an equal step budget, ``reports/ablations.md``).

Each step adds every objective's weighted loss on its own batch; Adam moves only the rows in the
batches. Early stopping on the weighted held-out loss of the objectives that ``select`` (patience in rounds of
``eval_every`` steps); the best table is kept. Batches are drawn per round from seeded generators and the state is
checkpointed (at most every ``checkpoint_seconds``), so a killed run resumes to the identical table. Runs on the
CPU or CUDA.
"""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

import numpy as np
import torch
import torch.nn.functional as F

from swembed.pipeline.stage import load_checkpoint
from swembed.runtime.outputs import atomic_file
from swembed.runtime.tokenizer import TokenIds
from swembed.runtime.windows import window_rows

logger = logging.getLogger(__name__)
_STATE = "train_state.pt"
_EXCLUDED = -1e4  # a logit whose exp underflows to 0 in float32: the diagonal, left out of the softmax


def kd_loss(student: torch.Tensor, teacher: torch.Tensor, tau: float) -> torch.Tensor:
    """Eq. 2-3: cross-entropy of the teacher's in-batch similarity softmax to the student's, j != i.

    Both inputs are (K, d) L2-normalised rows; dimensions may differ between them.
    """
    eye = torch.eye(student.shape[0], dtype=torch.bool, device=student.device)
    s = (student @ student.T / tau).masked_fill(eye, _EXCLUDED)
    t = (teacher @ teacher.T / tau).masked_fill(eye, _EXCLUDED)  # its softmax is exactly 0 there
    return -(t.softmax(dim=-1) * s.log_softmax(dim=-1)).sum(dim=-1).mean()


def contrastive_loss(a: torch.Tensor, b: torch.Tensor, tau: float, directions: str = "both",
                     excluded: torch.Tensor | None = None) -> torch.Tensor:
    """Symmetric in-batch InfoNCE over L2-normalised rows (paper eq. 4-5): row i of ``a`` and of ``b``
    are a translation pair; every other row of the batch is a negative, in both directions (``"query"``: each row
    of ``a`` picking its row of ``b`` only), but where ``excluded`` (K, K + M) is True. ``b`` may hold M rows past
    the K pairs (hard negatives): they count for the rows of ``a`` only (``in_batch_infonce``)."""
    return in_batch_infonce(F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T / tau, directions, excluded)


def sibling_mask(groups: np.ndarray, device: torch.device) -> torch.Tensor:
    """(K, K) True where two different pairs of a batch are siblings (the same ``groups`` id): left out of each
    other's negatives."""
    same = torch.as_tensor(groups[:, None] == groups[None, :], device=device)
    return same & ~torch.eye(len(groups), dtype=torch.bool, device=device)


@dataclass
class HardNegatives:
    """Each pair's mined negatives: ``candidates`` (pairs, k), pairs whose passages a table ranks near the pair's
    query (``mine_negatives``), and ``groups`` (pairs,), the sibling id of each pair (``retrieval.sibling_groups``).
    A batch row reads one of its k a step, drawn by a hash of the batch's rows: the same batch draws the same, so a
    resumed build trains as one that never stopped."""

    candidates: np.ndarray
    groups: np.ndarray

    def drawn(self, rows: np.ndarray) -> np.ndarray:
        """The pair whose passage is each row's hard negative in the batch ``rows``."""
        hashes = splitmix64(rows.astype(np.uint64))
        pick = splitmix64(hashes ^ np.bitwise_xor.reduce(hashes)) % np.uint64(self.candidates.shape[1])
        return self.candidates[rows, pick.astype(np.int64)]

    def excluded(self, rows: np.ndarray, drawn: np.ndarray, device: torch.device) -> torch.Tensor:
        """(K, K) True where the negative drawn for row j is row i's own pair or its sibling: no negative of i."""
        return torch.as_tensor(self.groups[rows][:, None] == self.groups[drawn][None, :], device=device)


def in_batch_infonce(logits: torch.Tensor, directions: str = "both",
                     excluded: torch.Tensor | None = None) -> torch.Tensor:
    """In-batch InfoNCE over ``logits`` (K, K + M) whose first K columns' diagonal holds the pairs: row to column
    and column to row (``"both"``; the M extra columns, hard negatives, count for the rows only), or row to column
    only (``"query"``: the rows are the queries); the cells ``excluded`` marks are no negatives (their softmax weight
    is exactly 0)."""
    if excluded is not None:
        logits = logits.masked_fill(excluded, _EXCLUDED)
    target = torch.arange(len(logits), device=logits.device)
    forward = F.cross_entropy(logits, target)
    if directions == "query":
        return forward
    return (forward + F.cross_entropy(logits[:, : len(logits)].T, target)) / 2


def windowed_contrastive_loss(queries: torch.Tensor, passages: torch.Tensor, windows: torch.Tensor,
                              owners: torch.Tensor, gamma: float, tau: float, directions: str = "both",
                              excluded: torch.Tensor | None = None) -> torch.Tensor:
    """``contrastive_loss`` on the search's windowed score (``swembed.runtime.windows``): a passage's cosine plus
    ``gamma`` times its best window's, over 1 + ``gamma`` (the cosine's range). ``windows`` (W, d) are the batch's
    passages' windows, ``owners`` (W,) the batch position of each window's passage; every row L2-normalised."""
    queries = F.normalize(queries, dim=-1)
    window_cosines = queries @ F.normalize(windows, dim=-1).T
    best = window_cosines.new_full((len(queries), len(passages)), -1.0).scatter_reduce(
        1, owners.expand(len(queries), -1), window_cosines, reduce="amax", include_self=False)
    return in_batch_infonce((queries @ F.normalize(passages, dim=-1).T + gamma * best) / ((1.0 + gamma) * tau),
                            directions, excluded)


def query_kd_loss(queries: torch.Tensor, documents: torch.Tensor, teacher_queries: torch.Tensor,
                  teacher_documents: torch.Tensor, tau: float) -> torch.Tensor:
    """Cross-entropy of the teacher's softmax of each query over the batch's documents to the student's (all
    rows L2-normalised; row i of the documents is query i's own)."""
    s = queries @ documents.T / tau
    t = teacher_queries @ teacher_documents.T / tau
    return -(t.softmax(dim=-1) * s.log_softmax(dim=-1)).sum(dim=-1).mean()


def centred(targets: torch.Tensor) -> torch.Tensor:
    """Teacher vectors minus their mean, re-normalised: for anisotropic teachers (e5 scores random sentence
    pairs ~0.8), whose in-batch softmax is otherwise too flat to teach a ranking."""
    return F.normalize(targets - targets.mean(dim=0), dim=-1)


class PackedRows:
    """The table rows (and weights) of many texts, packed flat on the training device; their lengths also stay on
    the CPU, where each batch's gather indices are computed (no device round trip per step)."""

    def __init__(self, batch: TokenIds, device: torch.device) -> None:
        self._lengths = np.asarray(batch.lengths, dtype=np.int64)
        self._starts = np.cumsum(self._lengths) - self._lengths
        self.ids = torch.as_tensor(batch.ids, dtype=torch.long, device=device)
        weights = batch.weights if batch.weights is not None else np.ones(len(batch.ids), dtype=np.float32)
        self.weights = torch.as_tensor(weights, dtype=torch.float32, device=device)

    def __len__(self) -> int:
        return len(self._lengths)

    @classmethod
    def joined(cls, parts: list[PackedRows]) -> tuple[PackedRows, list[int]]:
        """One store holding the texts of ``parts`` in order, and the index in it of each part's first text."""
        if len(parts) == 1:
            return parts[0], [0]
        out = cls.__new__(cls)
        out._lengths = np.concatenate([p._lengths for p in parts])
        out._starts = np.cumsum(out._lengths) - out._lengths
        out.ids = torch.cat([p.ids for p in parts])
        out.weights = torch.cat([p.weights for p in parts])
        return out, np.cumsum([0] + [len(p) for p in parts[:-1]]).tolist()

    def nonempty(self) -> np.ndarray:
        return np.flatnonzero(self._lengths > 0)

    def lengths(self, rows: np.ndarray) -> np.ndarray:
        """The number of rows each text of ``rows`` reads."""
        return self._lengths[np.asarray(rows)]

    def gather(self, rows: torch.Tensor | np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ids, offsets, per-row weights) of texts ``rows`` (indices on the CPU), for ``embedding_bag``."""
        rows = np.asarray(rows)
        lengths = self._lengths[rows]
        offsets = np.cumsum(lengths) - lengths
        index = np.repeat(self._starts[rows] - offsets, lengths) + np.arange(int(lengths.sum()))
        device = self.ids.device
        index_t = torch.from_numpy(index).to(device, non_blocking=True)
        return (self.ids.index_select(0, index_t), torch.from_numpy(offsets).to(device, non_blocking=True),
                self.weights.index_select(0, index_t))


def random_batches(rng: np.random.Generator, n_train: int, steps: int, batch: int) -> np.ndarray:
    """(steps, batch) positions into the training examples: seeded epochs of random order."""
    need = steps * batch
    order = np.concatenate([rng.permutation(n_train) for _ in range(-(-need // n_train))])[:need]
    return order.reshape(steps, batch)


def spherical_kmeans(vectors: torch.Tensor, n_cells: int, seed: int, iterations: int = 10,
                     sample_per_cell: int = 40, dtype: torch.dtype = torch.float64) -> np.ndarray:
    """The cell of each (L2-normalised) row: spherical k-means fitted on a seeded sample (k-means++ start on its
    first 16 rows per cell), then every row assigned to its nearest centroid. In float64 no CPU's rounding moves a
    row to another cell; it runs in numpy on the CPU (``nearest_centroids``). float32: the cells of tables built
    before 2026-12-06 (``cell_draws = "sampled"``), found in torch as they were then."""
    if dtype != torch.float64:
        return _torch_kmeans(vectors, n_cells, seed, iterations, sample_per_cell, dtype)
    rng = np.random.default_rng(seed)
    n_cells = max(1, min(n_cells, len(vectors)))
    pick = rng.permutation(len(vectors))[: n_cells * sample_per_cell]
    rows = vectors.detach().cpu().numpy()
    sample = rows[pick].astype(np.float64)
    seeds = sample[: 16 * n_cells]
    chosen = [0]
    distance = 1 - seeds @ seeds[0]
    for _ in range(n_cells - 1):
        weights = np.square(distance.clip(min=0))
        total = weights.sum()
        chosen.append(int(rng.choice(len(seeds), p=weights / total)) if total > 0 else int(rng.integers(len(seeds))))
        distance = np.minimum(distance, 1 - seeds @ seeds[chosen[-1]])
    centroids = seeds[chosen]
    for _ in range(iterations):
        labels = nearest_centroids(sample, centroids)
        sums = torch.zeros(centroids.shape, dtype=torch.float64).index_add_(0, torch.from_numpy(labels),
                                                                           torch.from_numpy(sample)).numpy()
        filled = np.bincount(labels, minlength=n_cells) > 0
        centroids = centroids.copy()
        centroids[filled] = sums[filled] / np.linalg.norm(sums[filled], axis=1, keepdims=True).clip(min=1e-12)
    return nearest_centroids(rows, centroids)


_ROWS_AT_ONCE = 8192  # rows scored against every centroid at once (8,192 x 2,231 cells: 73 MB in float32)


def nearest_centroids(rows: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The index of each row's largest float64 product with a centroid (float64 centroids; the first of exact
    ties). The products are taken in float32, and again in float64 only for the rows whose two largest float32
    products are within twice float32's error bound of each other (summed in any order, d products err by at most
    (d + 2) 2^-24 |row| |centroid|): float64's cells at float32's speed, a few rows in a thousand computed twice.
    numpy's BLAS (OpenBLAS) runs these products 1.3-2.2x faster than torch's (MKL) on an AVX2-only AMD EPYC, and
    no torch operation runs between them (torch's idle OpenMP threads would spin on the cores OpenBLAS needs): the
    recipe's k-means 2.3x faster, the same cells (reports/build-levers.md)."""
    if len(centroids) < 2:
        return np.zeros(len(rows), dtype=np.int64)
    fast = centroids.astype(np.float32)
    slack = 2 * (rows.shape[1] + 2) * 2.0**-24 * float(np.linalg.norm(centroids, axis=1).max())
    out = np.empty(len(rows), dtype=np.int64)
    for i in range(0, len(rows), _ROWS_AT_ONCE):
        block = rows[i : i + _ROWS_AT_ONCE]
        scores = block.astype(np.float32) @ fast.T
        labels = scores.argmax(axis=1)
        at = np.arange(len(block))
        best = scores[at, labels].astype(np.float64)
        scores[at, labels] = -np.inf
        margin = best - scores.max(axis=1)
        doubt = np.flatnonzero(margin <= slack * np.linalg.norm(block.astype(np.float64), axis=1) + 1e-12)
        if len(doubt):
            labels[doubt] = (block[doubt].astype(np.float64) @ centroids.T).argmax(axis=1)
        out[i : i + len(block)] = labels
    return out


def _torch_kmeans(vectors: torch.Tensor, n_cells: int, seed: int, iterations: int, sample_per_cell: int,
                  dtype: torch.dtype) -> np.ndarray:
    """``spherical_kmeans`` as it ran in torch up to 2026-12-07, in ``dtype``: in float32 the cells the tables
    built before 2026-12-06 learnt on (``lab.bench_build_levers`` times it in float64 against the numpy path)."""
    rng = np.random.default_rng(seed)
    n_cells = max(1, min(n_cells, len(vectors)))
    pick = rng.permutation(len(vectors))[: n_cells * sample_per_cell]
    sample = vectors[torch.as_tensor(pick, device=vectors.device)].to(dtype)
    seeds = sample[: 16 * n_cells]
    chosen = [0]
    distance = 1 - seeds @ seeds[0]
    for _ in range(n_cells - 1):
        weights = distance.clamp(min=0).square().double().cpu().numpy()
        total = weights.sum()
        chosen.append(int(rng.choice(len(seeds), p=weights / total)) if total > 0 else int(rng.integers(len(seeds))))
        distance = torch.minimum(distance, 1 - seeds @ seeds[chosen[-1]])
    centroids = seeds[torch.as_tensor(chosen, device=seeds.device)].clone()

    def nearest(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([(x[i : i + 65536].to(dtype) @ centroids.T).argmax(1) for i in range(0, len(x), 65536)])

    for _ in range(iterations):
        labels = nearest(sample)
        sums = torch.zeros_like(centroids).index_add_(0, labels, sample)
        filled = torch.bincount(labels, minlength=n_cells) > 0
        centroids = torch.where(filled[:, None], F.normalize(sums, dim=-1), centroids)
    return nearest(vectors).cpu().numpy()


def lexical_sketches(parts: list[PackedRows], rows: np.ndarray, seed: int, dim: int = 128) -> torch.Tensor:
    """A sketch of the words of texts ``rows`` (the same rows of each of ``parts``, summed): a seeded Gaussian
    projection of each row id, weighted by the texts' weights times the id's inverse document frequency over
    ``rows``, L2-normalised: texts that share rare words point the same way (a teacher-free TF-IDF). numpy draws
    the projection and the sums are float64, so every CPU gives the same sketches."""
    gathered = [part.gather(rows) for part in parts]
    device = parts[0].ids.device
    present, inverse = np.unique(torch.cat([ids for ids, _, _ in gathered]).cpu().numpy(), return_inverse=True)
    projection = torch.as_tensor(np.random.default_rng([seed, 7]).standard_normal((len(present), dim)),
                                 device=device)
    sketch = torch.zeros(len(rows), dim, dtype=torch.float64, device=device)
    start = 0
    for part, (ids, offsets, weights) in zip(parts, gathered):
        local = torch.as_tensor(inverse[start : start + len(ids)], device=device)
        start += len(ids)
        text = torch.repeat_interleave(torch.arange(len(rows), device=device),
                                       torch.as_tensor(part.lengths(rows), device=device))
        once = torch.unique(text * len(present) + local)  # document frequency: each (text, id) once
        df = torch.bincount(once % len(present), minlength=len(present)).double()
        idf = torch.log((1 + len(rows)) / (1 + df)) + 1
        sketch += F.embedding_bag(local, projection, offsets, mode="sum",
                                  per_sample_weights=weights.double() * idf[local])
    return F.normalize(sketch, dim=-1)


def splitmix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser of each uint64: a seeded order of ids that another id's presence does not change."""
    x = values + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@dataclass
class CellBatches:
    """Batches of neighbours, each from one cell; a cell smaller than the batch is topped up with random examples.

    ``hashed``: each step's cell is the cell of a uniformly drawn example, its members those of smallest SplitMix64
    hash under the step's salt: a row that changes cell changes only the batches it is (or would be) in. Else
    (``cell_draws = "sampled"``, tables before 2026-12-06): cells drawn in proportion to their size and members by
    ``rng.choice``, so one row more or less in a cell changes all of that cell's later batches."""

    cells: np.ndarray  # cell of each training example
    hashed: bool = True

    def __post_init__(self) -> None:
        self.order = np.argsort(self.cells, kind="stable")
        self.bounds = np.searchsorted(self.cells[self.order], np.arange(self.cells.max() + 2))

    def members(self, cell: int) -> np.ndarray:
        return self.order[self.bounds[cell] : self.bounds[cell + 1]]

    def __call__(self, rng: np.random.Generator, n_train: int, steps: int, batch: int) -> np.ndarray:
        out = rng.integers(0, n_train, size=(steps, batch))
        if not self.hashed:  # cells in proportion to their size
            sizes = np.diff(self.bounds)
            for step, cell in enumerate(rng.choice(len(sizes), size=steps, p=sizes / sizes.sum())):
                members = self.members(cell)
                take = min(batch, len(members))
                out[step, :take] = rng.choice(members, take, replace=False)
            return out
        anchors = rng.integers(0, n_train, size=steps)
        salts = rng.integers(0, 2**63, size=steps, dtype=np.int64).astype(np.uint64)
        for step, (anchor, salt) in enumerate(zip(anchors, salts)):
            members = self.members(self.cells[anchor])
            if len(members) > batch:
                members = members[np.argpartition(splitmix64(members.astype(np.uint64) ^ salt), batch - 1)[:batch]]
            out[step, : len(members)] = np.sort(members)
        return out


CELL_DTYPES = {"hashed": torch.float64, "sampled": torch.float32}  # the cells' precision under each cell_draws


def cell_batches(vectors: torch.Tensor, cell_size: int, seed: int, cell_draws: str) -> CellBatches:
    """Batches from the k-means cells of about ``cell_size`` rows of ``vectors`` (L2-normalised), fitted and drawn
    as ``cell_draws`` says ("hashed" or "sampled", ``DistillConfig.cell_draws``)."""
    cells = spherical_kmeans(vectors, -(-len(vectors) // cell_size), seed, dtype=CELL_DTYPES[cell_draws])
    return CellBatches(cells, hashed=cell_draws == "hashed")


@dataclass
class Objective:
    """One loss on batches of example indices (numpy): a batch ``rows`` encodes those texts of each of ``texts``
    (one side for KD, both sides of the pairs for contrastive) and ``loss(vectors, rows)`` scores the encoded
    sides. Training examples ``train``, drawn into batches by ``batches``; fixed held-out batches ``held_out``."""

    name: str
    weight: float
    train: np.ndarray
    held_out: list[np.ndarray]
    texts: tuple[PackedRows, ...]
    loss: Callable[[list[torch.Tensor], torch.Tensor], torch.Tensor]
    batches: Callable[[np.random.Generator, int, int, int], np.ndarray] = random_batches
    selects: bool = True  # its held-out loss counts in early stopping and in choosing the best table
    batch_size: int | None = None  # its examples a step; None: the loop's (``[distill] batch_size``)
    # the texts of ``texts`` a batch reads, one array each; None: the batch's own rows in every one of them
    rows_of: Callable[[np.ndarray], list[np.ndarray]] | None = None

    def sides(self, rows: np.ndarray) -> list[np.ndarray]:
        """The rows of each of ``texts`` that batch ``rows`` encodes."""
        return self.rows_of(rows) if self.rows_of is not None else [rows] * len(self.texts)


def kd_objective(packed: PackedRows, targets: torch.Tensor, *, tau: float, weight: float, name: str, n_held: int,
                 batch_size: int, rng: np.random.Generator, max_train: int | None = None,
                 cell_size: int = 0, seed: int = 0, cell_draws: str = "hashed") -> Objective:
    """Distillation on the texts of ``packed`` towards their teacher vectors ``targets`` (same order).

    ``cell_size``: draw each batch from one k-means cell of about this many training sentences (neighbours);
    held-out batches are then an anchor's nearest held-out sentences. 0: random batches (the paper).
    ``cell_draws``: ``CellBatches``'s draws, "hashed" (float64 cells and neighbours) or "sampled" (float32).
    """
    rows = packed.nonempty()
    rows = rows[rng.permutation(len(rows))]
    n_held = min(n_held, len(rows) // 10)
    if len(rows) - n_held < batch_size or n_held < 2:
        raise ValueError(f"{name}: distillation needs at least {batch_size + 2} sentences with known words, "
                         f"got {len(rows)}")
    held, train = np.sort(rows[:n_held]), rows[n_held:][:max_train]
    n_batches = max(1, n_held // batch_size)

    def loss(vectors: list[torch.Tensor], batch: torch.Tensor) -> torch.Tensor:
        return kd_loss(vectors[0], targets[batch], tau)

    if not cell_size:
        return Objective(name, weight, train, np.array_split(held, n_batches), (packed,), loss)

    def vectors(rows: np.ndarray) -> torch.Tensor:
        return targets[torch.as_tensor(rows, device=targets.device)].to(CELL_DTYPES[cell_draws])

    # the targets as they are: the k-means takes its own precision (a float64 copy of every training row was 1.1 GB
    # for the search recipe, which the float64 cells never read whole)
    batches = cell_batches(targets[torch.as_tensor(train, device=targets.device)], cell_size, seed, cell_draws)
    held_vectors = vectors(held)
    anchors = held_vectors[torch.as_tensor(rng.choice(len(held), n_batches, replace=False), device=targets.device)]
    nearest = (anchors @ held_vectors.T).topk(min(batch_size, len(held)), dim=1).indices.cpu().numpy()
    return Objective(name, weight, train, [np.sort(held[n]) for n in nearest], (packed,), loss, batches)


def query_kd_objective(queries: PackedRows, documents: PackedRows, query_targets: torch.Tensor,
                       document_targets: torch.Tensor, *, tau: float, weight: float, name: str, n_held: int,
                       batch_size: int, rng: np.random.Generator) -> Objective:
    """Asymmetric distillation (``query_kd_loss``) on pairs: row i of ``queries`` belongs with row i of
    ``documents``; teacher vectors in the same order. It trains beside the sentence objectives and does not
    select (a long text's loss would otherwise decide when sentence distillation stops)."""
    usable = np.intersect1d(queries.nonempty(), documents.nonempty())
    usable = usable[rng.permutation(len(usable))]
    n_held = min(n_held, len(usable) // 10)
    if len(usable) - n_held < batch_size or n_held < 2:
        raise ValueError(f"{name}: needs at least {batch_size + 2} pairs with known words, got {len(usable)}")
    held, train = np.sort(usable[:n_held]), usable[n_held:]

    def loss(vectors: list[torch.Tensor], batch: torch.Tensor) -> torch.Tensor:
        return query_kd_loss(vectors[0], vectors[1], query_targets[batch], document_targets[batch], tau)

    return Objective(name, weight, train, np.array_split(held, max(1, n_held // batch_size)), (queries, documents),
                     loss, selects=False, batch_size=batch_size)


def contrastive_objective(left: PackedRows, right: PackedRows, *, tau: float, weight: float, name: str, n_held: int,
                          batch_size: int, directions: str = "both", groups: np.ndarray | None = None,
                          negatives: Callable[[np.ndarray], HardNegatives] | None = None) -> Objective:
    """The contrastive loss on pairs (row i of ``left`` translates row i of ``right``); pairs already shuffled.
    ``groups`` (one id a pair): pairs of one id are siblings, never each other's negatives (``sibling_mask``).
    ``negatives``: the hard negatives of the pairs, given the training rows (the pool they are mined from); each
    batch row's query then also scores one drawn passage (``HardNegatives``)."""
    usable = np.intersect1d(left.nonempty(), right.nonempty())
    n_held = min(n_held, len(usable) // 5)
    if len(usable) - n_held < batch_size:
        raise ValueError(f"only {len(usable)} usable {name} parallel pairs; contrastive training needs more than "
                         f"{batch_size + n_held}")
    held, train = usable[len(usable) - n_held:], usable[: len(usable) - n_held]
    hard = None if negatives is None else negatives(train)

    def loss(vectors: list[torch.Tensor], batch: torch.Tensor) -> torch.Tensor:
        rows, device = batch.numpy(), vectors[0].device
        excluded = None if groups is None else sibling_mask(groups[rows], device)
        if hard is not None:  # the batch's passages, then each row's drawn negative
            square = excluded if excluded is not None else torch.zeros(len(rows), len(rows), dtype=torch.bool,
                                                                       device=device)
            excluded = torch.cat([square, hard.excluded(rows, hard.drawn(rows), device)], dim=1)
        return contrastive_loss(vectors[0], vectors[1], tau, directions, excluded)

    def with_negatives(rows: np.ndarray) -> list[np.ndarray]:
        assert hard is not None
        return [rows, np.concatenate([rows, hard.drawn(rows)])]

    whole = [held[i : i + batch_size] for i in range(0, n_held - batch_size + 1, batch_size)]
    return Objective(name, weight, train, whole or [held], (left, right), loss, batch_size=batch_size,
                     rows_of=None if hard is None else with_negatives)


def windowed_contrastive_objective(left: PackedRows, right: PackedRows, windows: PackedRows,
                                   window_offsets: np.ndarray, *, gamma: float, tau: float, weight: float, name: str,
                                   n_held: int, batch_size: int, directions: str = "both",
                                   groups: np.ndarray | None = None) -> Objective:
    """``contrastive_objective`` scored as the search scores a passage with windows (``windowed_contrastive_loss``):
    pair i's passage ``right[i]`` has the windows ``windows[window_offsets[i]:window_offsets[i + 1]]`` (at least
    one: a passage too short for windows is its own)."""
    whole = contrastive_objective(left, right, tau=tau, weight=weight, name=name, n_held=n_held,
                                  batch_size=batch_size, directions=directions, groups=groups)
    counts = np.diff(window_offsets)
    if (counts < 1).any():
        raise ValueError(f"{name}: every passage needs at least one window (a short passage is its own)")

    def rows_of(rows: np.ndarray) -> list[np.ndarray]:
        return [rows, rows, window_rows(window_offsets, rows)[0]]

    def loss(vectors: list[torch.Tensor], batch: torch.Tensor) -> torch.Tensor:
        owners = torch.repeat_interleave(torch.arange(len(batch)), torch.as_tensor(counts[batch.numpy()]))
        excluded = None if groups is None else sibling_mask(groups[batch.numpy()], vectors[0].device)
        return windowed_contrastive_loss(vectors[0], vectors[1], vectors[2], owners.to(vectors[0].device), gamma,
                                         tau, directions, excluded)

    return replace(whole, texts=(left, right, windows), loss=loss, rows_of=rows_of)


@torch.no_grad()
def encoded(table: np.ndarray, packed: PackedRows, rows: np.ndarray) -> torch.Tensor:
    """Texts ``rows`` of ``packed`` encoded with ``table``: each the weighted mean of its rows, L2-normalised."""
    ids, offsets, weights = packed.gather(rows)
    weight = torch.as_tensor(table, device=packed.ids.device)
    return F.normalize(F.embedding_bag(ids, weight, offsets, mode="sum", per_sample_weights=weights), dim=-1)


@torch.no_grad()
def retrieval_accuracy(table: np.ndarray, objective: Objective) -> float:
    """Share of held-out pairs whose left text's nearest neighbour among all held-out right texts is its own
    translation (a Tatoeba-like check that never sees a test set)."""
    left, right = objective.texts[:2]
    rows = np.concatenate(objective.held_out)
    nearest = (encoded(table, left, rows) @ encoded(table, right, rows).T).argmax(dim=1)
    return float((nearest == torch.arange(len(rows), device=nearest.device)).float().mean())


MINE_QUERIES = 1024  # queries scored against the pool at once when mining hard negatives
MINE_POOL = 8192  # passages (drawn at random) that hard negatives are mined from


def mine_negatives(queries: np.ndarray, passages: np.ndarray, gold: np.ndarray, count: int, seed: int = 0,
                   among: np.ndarray | None = None, groups: np.ndarray | None = None) -> np.ndarray:
    """(queries, count): the passages nearest each query by cosine (rows L2-normalised), best first, among a random
    pool of at most ``MINE_POOL`` of the passages ``among`` (default: all; the cost grows with queries x pool), its
    own passage ``gold`` left out and, with ``groups`` (one id a passage), every passage of its group (siblings).
    A query with fewer than ``count`` passages left gets the left-out ones last."""
    candidates = np.arange(len(passages)) if among is None else np.asarray(among)
    pool = np.sort(np.random.default_rng(seed).permutation(candidates)[:MINE_POOL])
    count = max(0, min(count, len(pool) - 1))
    out = np.empty((len(queries), count), dtype=np.int64)
    if count == 0:
        return out
    pool_groups, gold_groups = (pool, gold) if groups is None else (groups[pool], groups[gold])
    table = torch.from_numpy(np.ascontiguousarray(passages[pool], dtype=np.float32))
    for start in range(0, len(queries), MINE_QUERIES):
        scores = torch.from_numpy(np.ascontiguousarray(queries[start : start + MINE_QUERIES])) @ table.T
        own = torch.from_numpy(pool_groups[None, :] == gold_groups[start : start + MINE_QUERIES, None])
        scores.masked_fill_(own, -torch.inf)
        out[start : start + len(scores)] = pool[torch.topk(scores, count, dim=1).indices.numpy()]
    return out


def mined_hard_negatives(table: np.ndarray, left: PackedRows, right: PackedRows, groups: np.ndarray, count: int,
                         seed: int, train: np.ndarray) -> HardNegatives:
    """Each pair's ``count`` hard negatives: the passages of training pairs ``train`` nearest its query by
    ``table`` (``mine_negatives``), siblings (``groups``) left out."""
    started, every = time.time(), np.arange(len(left))
    queries, passages = (encoded(table, packed, every).cpu().numpy() for packed in (left, right))
    mined = HardNegatives(mine_negatives(queries, passages, every, count, seed, among=train, groups=groups), groups)
    logger.info("hard negatives: %d a pair for %d pairs, mined in %.1f s", mined.candidates.shape[1], len(every),
                time.time() - started)
    return mined


class RowAdam:
    """Adam on the rows a step touched, as ``torch.optim.SparseAdam`` does it (rows without a gradient keep their
    moments; same state_dict), from the dense gradient of just those rows: no sparse tensor to coalesce and mask."""

    def __init__(self, weight: torch.Tensor, lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.weight, self.lr, self.betas, self.eps = weight, lr, betas, eps
        self.exp_avg, self.exp_avg_sq, self.steps = torch.zeros_like(weight), torch.zeros_like(weight), 0

    @torch.no_grad()
    def step(self, rows: torch.Tensor, values: torch.Tensor, grad: torch.Tensor) -> None:
        """Update the distinct rows ``rows`` of the weight, whose values (a copy) are ``values``, by ``grad``."""
        (beta1, beta2), self.steps = self.betas, self.steps + 1
        exp_avg, exp_avg_sq = self.exp_avg.index_select(0, rows), self.exp_avg_sq.index_select(0, rows)
        values = values.detach()
        # one fused pass over the rows (torch.optim.Adam(fused=True)'s kernel). It adds eps to sqrt(v / (1 - beta2^t));
        # SparseAdam adds it to sqrt(v): eps / sqrt(1 - beta2^t) here gives SparseAdam's update
        step = torch.tensor(float(self.steps), device=values.device)
        torch._fused_adam_([values], [grad], [exp_avg], [exp_avg_sq], [], [step], lr=self.lr, beta1=beta1, beta2=beta2,
                           weight_decay=0.0, eps=self.eps / (1 - beta2 ** self.steps) ** 0.5, amsgrad=False,
                           maximize=False)
        self.exp_avg.index_copy_(0, rows, exp_avg)
        self.exp_avg_sq.index_copy_(0, rows, exp_avg_sq)
        self.weight.index_copy_(0, rows, values)

    def state_dict(self) -> dict:
        return {"state": {0: {"step": self.steps, "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq}},
                "param_groups": [{"lr": self.lr, "betas": self.betas, "eps": self.eps, "params": [0]}]}

    def load_state_dict(self, state: dict) -> None:
        moments = state["state"][0]
        self.steps = int(moments["step"])
        self.exp_avg.copy_(moments["exp_avg"])
        self.exp_avg_sq.copy_(moments["exp_avg_sq"])


def _save_state(path: Path, state: dict) -> None:
    """Tensors and plain values only (``_read_state`` loads with ``weights_only=True``)."""
    with atomic_file(path, checked=False) as tmp:  # no half file, even on SIGTERM
        torch.save(state, tmp)


def _read_state(path: Path, device: torch.device, shape: torch.Size) -> dict:
    """A training checkpoint, loaded without running pickled code (``weights_only=True``: tensors and plain
    values), and checked against a table of ``shape`` before anything is copied from it."""
    state = torch.load(path, weights_only=True, map_location=device)
    moments = state["optimizer"]["state"][0]
    tensors = (state["weight"], moments["exp_avg"], moments["exp_avg_sq"], state["best"]["weight"])
    if not all(isinstance(t, torch.Tensor) and t.shape == shape for t in tensors):
        raise ValueError(f"its tensors are not all of the table's shape {tuple(shape)}")
    int(moments["step"]), float(state["best"]["loss"]), int(state["best"]["step"])
    history = state["history"]
    if not (isinstance(history["rounds"], list) and isinstance(history["bad_rounds"], int)):
        raise ValueError("its history is not a list of rounds")
    return state


@dataclass
class LoopSettings:
    batch_size: int
    lr: float
    max_steps: int
    eval_every: int
    patience: int
    seed: int
    lr_decay: str = "none"  # "linear" or "cosine": the step size falls to zero at max_steps

    def lr_at(self, step: int) -> float:
        """The step size of step ``step`` (0-based) under the decay."""
        done = min(step / self.max_steps, 1.0)
        if self.lr_decay == "linear":
            return self.lr * (1.0 - done)
        if self.lr_decay == "cosine":
            return self.lr * 0.5 * (1.0 + math.cos(math.pi * done))
        return self.lr


class _Losses:
    """The objectives' losses over the table ``weight``, every text of a step gathered from one packed store."""

    def __init__(self, weight: torch.Tensor, objectives: list[Objective]) -> None:
        self.weight, self.objectives = weight, objectives
        stores = list({id(packed): packed for o in objectives for packed in o.texts}.values())
        self.store, firsts = PackedRows.joined(stores)
        self.first = {id(packed): n for packed, n in zip(stores, firsts)}

    def __call__(self, batches: list[tuple[Objective, np.ndarray]],
                 trainable: bool = False) -> tuple[list, tuple | None]:
        """Each objective's loss on its batch, every text of the step in one ``embedding_bag``; ``trainable``: over
        a copy of just the table rows used, returned with their row ids for the update."""
        sides = [(packed, side) for o, rows in batches for packed, side in zip(o.texts, o.sides(rows))]
        ids, offsets, weights = self.store.gather(np.concatenate([self.first[id(packed)] + rows
                                                                  for packed, rows in sides]))
        table, used = self.weight, None
        if trainable:
            used, ids = torch.unique(ids, return_inverse=True)
            table = self.weight.index_select(0, used).requires_grad_()
        bag = F.embedding_bag(ids, table, offsets, mode="sum", per_sample_weights=weights)
        vectors = F.normalize(bag, dim=-1).split([len(rows) for _, rows in sides])
        out, at = [], 0
        for o, rows in batches:
            out.append(o.loss(vectors[at : at + len(o.texts)], torch.as_tensor(rows, dtype=torch.long)))
            at += len(o.texts)
        return out, (used, table) if trainable else None

    @torch.no_grad()
    def held_out(self) -> tuple[float, dict]:
        """The weighted held-out loss of the objectives that select, and each objective's own (computed once for
        objectives that share their texts, loss and held-out batches: a random-batch companion's are its cell
        objective's)."""
        found: dict[tuple, float] = {}
        parts = {}
        for o in self.objectives:
            same = (id(o.loss), id(o.held_out), *map(id, o.texts))
            if same not in found:
                found[same] = float(np.mean([self([(o, rows)])[0][0].item() for rows in o.held_out]))
            parts[o.name] = found[same]
        return sum(o.weight * parts[o.name] for o in self.objectives if o.selects), parts

    def train_round(self, optimizer: RowAdam, settings: LoopSettings, r: int, steps: int) -> float:
        """Round ``r``: ``steps`` steps on batches drawn from its own seeded generators; the mean training loss."""
        objectives = self.objectives
        plans = [o.train[o.batches(np.random.default_rng([settings.seed, r, k]), len(o.train), steps,
                                   o.batch_size or settings.batch_size)] for k, o in enumerate(objectives)]
        train_losses = []
        for step in range(steps):
            parts, trained = self([(o, plan[step]) for o, plan in zip(objectives, plans)], trainable=True)
            rows, copy = cast(tuple, trained)  # trainable: the rows and their copy
            loss = sum(o.weight * part for o, part in zip(objectives, parts))
            loss.backward()
            optimizer.lr = settings.lr_at(optimizer.steps)
            optimizer.step(rows, copy, copy.grad)
            train_losses.append(loss.detach())
        return float(torch.stack(train_losses).mean())


@contextmanager
def denormals_flushed() -> Iterator[None]:
    """Float results too small for a normal float32 become 0 inside the block (the CPU's flush-to-zero mode), then
    the mode is off again. A decaying step makes such values in the update, and a CPU computes them tens of times
    slower: the default build's cosine schedule ran 183 steps/s without this and 273 with it, same held-out loss
    to 1e-4 (issue 80). A constant step makes few: those recipes train as before."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def train(table: np.ndarray, objectives: list[Objective], settings: LoopSettings, device: torch.device,
          partial: Path, checkpoint_seconds: float, on_checkpoint: Callable[[int], None] = lambda n: None,
          quiet: bool = False) -> tuple[np.ndarray, dict]:
    """Refine ``table``; returns the best table (by weighted held-out loss) and the training history. The steps
    run with denormals flushed (``denormals_flushed``)."""
    with denormals_flushed():
        return _train(table, objectives, settings, device, partial, checkpoint_seconds, on_checkpoint, quiet)


def _train(table: np.ndarray, objectives: list[Objective], settings: LoopSettings, device: torch.device,
           partial: Path, checkpoint_seconds: float, on_checkpoint: Callable[[int], None],
           quiet: bool) -> tuple[np.ndarray, dict]:
    from tqdm.auto import tqdm

    weight = torch.tensor(np.asarray(table, dtype=np.float32), device=device)
    optimizer = RowAdam(weight, settings.lr)
    losses = _Losses(weight, objectives)
    state_path = partial / _STATE
    state = load_checkpoint(state_path, lambda path: _read_state(path, device, weight.shape), "train") \
        if state_path.is_file() else None
    if state is not None:
        weight.copy_(state["weight"])
        optimizer.load_state_dict(state["optimizer"])
        best, history = state["best"], state["history"]
        logger.info("train: resuming after round %d", len(history["rounds"]))
    else:
        loss, parts = losses.held_out()
        best = {"loss": loss, "step": 0, "weight": weight.clone()}
        history = {"initial_val_loss": loss, "initial_parts": parts, "rounds": [], "bad_rounds": 0}
    max_rounds = -(-settings.max_steps // settings.eval_every)
    bar = tqdm(total=max_rounds * settings.eval_every, initial=len(history["rounds"]) * settings.eval_every,
               unit="step", desc="train", disable=quiet)
    t0 = last_save = time.time()
    for r in range(len(history["rounds"]), max_rounds):
        if history["bad_rounds"] >= settings.patience:
            break
        steps = min(settings.eval_every, settings.max_steps - r * settings.eval_every)
        train_loss = losses.train_round(optimizer, settings, r, steps)
        bar.update(steps)
        val, parts = losses.held_out()
        step = r * settings.eval_every + steps
        history["rounds"].append({"step": step, "train_loss": train_loss, "val_loss": val, "val_parts": parts})
        if val < best["loss"]:
            best = {"loss": val, "step": step, "weight": weight.clone()}
            history["bad_rounds"] = 0
        else:
            history["bad_rounds"] += 1
        bar.set_postfix(val=f"{val:.4f}", best=f"{best['loss']:.4f}")
        if time.time() - last_save >= checkpoint_seconds:  # the best table, when it is this one, saved once
            _save_state(state_path, {"weight": best["weight"] if best["step"] == step else weight,
                                     "optimizer": optimizer.state_dict(), "best": best, "history": history})
            last_save = time.time()
            on_checkpoint(r + 1)
    bar.close()
    steps_run = history["rounds"][-1]["step"] if history["rounds"] else 0
    history.update({"best_step": best["step"], "best_val_loss": best["loss"], "steps": steps_run,
                    "train_examples": {o.name: int(len(o.train)) for o in objectives},
                    "stopped_early": history["bad_rounds"] >= settings.patience,
                    "seconds_this_run": round(time.time() - t0, 2), "device": str(device)})
    return best["weight"].cpu().numpy(), history
