"""The dedup core, shared by the one-machine command and the Spark integration: exact-duplicate keys,
near-duplicate pairs (ANN or exact blockwise search, float32 scores), clusters (stars that cannot chain by default,
also for a target size; or connected components) and representatives."""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from swembed.runtime.tokenizer import normalize_text

_SPACES = re.compile(r"\s+")
EXACT_SEARCH_BELOW = 50_000  # unique texts; below this an exact blockwise search is faster than building an index
SCORES_PER_BLOCK = 1 << 24  # exact search scores this many pairs at a time (64 MB of float32)
COARSE_DIMS = 64  # cell search: the dimensions in which each text's nearest cells are found
MAX_NEIGHBOURS = 1000  # k: a search holds k ids and scores per text of a block (65,536 texts: ~0.8 GB at 1000)


@dataclass(frozen=True)
class ExactKey:
    """What exact dedup compares: the text as the table reads it (its Unicode normalisation; lower-cased only
    when the table lower-cases), whitespace collapsed and stripped. A case-sensitive table keeps "US" and "us"
    apart."""

    form: str = "NFKC"
    lowercase: bool = True

    @classmethod
    def of_model(cls, model) -> ExactKey:
        """The key of a loaded table: its normalisation; lower-cased when every tokenizer of it lower-cases."""
        tokenizers = [model.tokenizer, *getattr(model, "tokenizers", {}).values()]
        return cls(model.tokenizer.rules.unicode_normalization, all(t.rules.lowercase for t in tokenizers))

    def key(self, text: str) -> str:
        text = normalize_text(text, self.form)
        return _SPACES.sub(" ", text.lower() if self.lowercase else text).strip()

    def record_key(self, record: str | Sequence[str]) -> str:
        """A record's key: its text's, or for the values of several text columns the JSON list of their keys, so
        that columns keep their boundaries (("what is", "love") and ("what", "is love") differ)."""
        if isinstance(record, str):
            return self.key(record)
        return json.dumps([self.key(value) for value in record], ensure_ascii=False)

    def hashes(self, texts: Sequence[str | Sequence[str]]) -> np.ndarray:
        """64-bit BLAKE2b of each record's key (``record_key``; collision odds ~N^2 / 2^65: 3e-8 for 1M texts)."""
        return np.fromiter((int.from_bytes(hashlib.blake2b(self.record_key(t).encode("utf-8", "replace"),
                                                           digest_size=8).digest(), "little") for t in texts),
                           dtype=np.uint64, count=len(texts))


def exact_neighbours(queries: np.ndarray, base: np.ndarray, k: int, skip_self_from: int | None = None
                     ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Blocks of (first query row, neighbour ids, float32 cosines) of each query row's ``k`` nearest rows of
    ``base`` (exact, ``SCORES_PER_BLOCK`` scores at a time, at most 4096 rows; unsorted within a row; a row with
    fewer than ``k`` candidates has id -1, score -inf). ``skip_self_from``: query row i is base row
    ``skip_self_from + i``, never its own neighbour."""
    x, y = np.asarray(queries, dtype=np.float32), np.asarray(base, dtype=np.float32)
    block = max(1, min(4096, SCORES_PER_BLOCK // max(len(y), 1)))
    take = min(k, len(y) - (skip_self_from is not None))
    for start in range(0, len(x), block):
        scores = x[start : start + block] @ y.T
        if skip_self_from is not None:
            here = np.arange(scores.shape[0])
            scores[here, skip_self_from + start + here] = -np.inf
        if take <= 0:
            yield start, np.full((len(scores), k), -1, np.int64), np.full((len(scores), k), -np.inf, np.float32)
            continue
        top = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        top_scores = np.take_along_axis(scores, top, axis=1)
        pad = k - take
        yield (start, np.pad(top, ((0, 0), (0, pad)), constant_values=-1),
               np.pad(top_scores, ((0, 0), (0, pad)), constant_values=-np.inf))


def ann_neighbours(vectors: np.ndarray, k: int, nprobe: int = 16, seed: int = 0, floor: float = -np.inf
                   ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """As ``exact_neighbours`` of ``vectors`` among themselves, approximately (``cell_neighbours``)."""
    return cell_neighbours(vectors, vectors, k, nprobe, skip_self=True, seed=seed, floor=floor)


def cell_count(n: int) -> int:
    """Cells of ``cell_neighbours`` over ``n`` rows: ~8 sqrt(N) (the cost of finding each row's nearest cells
    and of scoring it against their rows balance near there), at least 8 rows each on average."""
    return int(max(1, min(65_536, 8 * np.sqrt(n), n // 8)))


def coarse_projection(x: np.ndarray, seed: int = 0, sample_rows: int = 16_384) -> np.ndarray:
    """The ``COARSE_DIMS`` leading principal directions (uncentred) of a seeded sample of the rows ``x``, as a
    (d, COARSE_DIMS) matrix (the identity when d is no larger): cells are found in this cheaper space."""
    if x.shape[1] <= COARSE_DIMS:
        return np.eye(x.shape[1], dtype=np.float32)
    sample = x[np.sort(np.random.default_rng(seed).choice(len(x), size=min(len(x), sample_rows), replace=False))]
    _, _, directions = np.linalg.svd(sample.astype(np.float64), full_matrices=False)
    return np.ascontiguousarray(directions[:COARSE_DIMS].T, dtype=np.float32)


def spherical_cells(x: np.ndarray, cells: int, projection: np.ndarray, seed: int = 0, iterations: int = 2,
                    per_cell: int = 8) -> np.ndarray:
    """Unit centroids (in the ``projection``'s space) of ``cells`` spherical k-means cells of the rows ``x``
    projected (Lloyd's, a few ``iterations`` on a seeded sample of ``per_cell`` rows per cell: cells only group
    rows for the search)."""
    rng = np.random.default_rng(seed)
    sample = x[np.sort(rng.choice(len(x), size=min(len(x), per_cell * cells), replace=False))] @ projection
    centroids = sample[np.sort(rng.choice(len(sample), size=cells, replace=False))]
    for _ in range(iterations):
        nearest = np.concatenate([np.argmax(sample[i : i + 8192] @ centroids.T, axis=1)
                                  for i in range(0, len(sample), 8192)])
        sums = np.zeros_like(centroids)
        np.add.at(sums, nearest, sample)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = np.where(norms > 0, sums / np.maximum(norms, 1e-30), centroids).astype(np.float32)
    return centroids


def nearest_cells(centroids: np.ndarray, x: np.ndarray, m: int) -> np.ndarray:
    """Each row's ``m`` nearest centroids by inner product (unit vectors: cosine), best first, (n, m) int64."""
    import faiss

    index = faiss.IndexFlatIP(centroids.shape[1])
    index.add(centroids)
    return index.search(np.ascontiguousarray(x, dtype=np.float32), min(m, len(centroids)))[1]


def _nearest_cells(x: np.ndarray, centroids: np.ndarray, projection: np.ndarray, count: int) -> np.ndarray:
    """Each row's ``count`` most similar centroids in the projected space, best first (projected 65,536 rows at a
    time)."""
    return np.concatenate([nearest_cells(centroids, x[i : i + 65_536] @ projection, count)
                           for i in range(0, len(x), 65_536)] or [np.zeros((0, count), np.int64)])


def _by_cell(cell: np.ndarray, cells: int) -> tuple[np.ndarray, np.ndarray]:
    """Row ids grouped by cell (ascending within a cell) and each cell's bounds in them."""
    order = np.argsort(cell, kind="stable")
    return order, np.searchsorted(cell[order], np.arange(cells + 1))


def cell_neighbours(queries: np.ndarray, base: np.ndarray, k: int, nprobe: int = 16, skip_self: bool = False,
                    seed: int = 0, floor: float = -np.inf) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """As ``exact_neighbours``, approximately: ``base`` is split into ``cell_count`` spherical k-means cells
    (``spherical_cells``), and each query row is scored exactly (float32 matrix products, cell by cell, every
    query of a cell at once) against the rows of its ``nprobe`` nearest cells. Neighbours below ``floor`` may be
    left out (-1, -inf). ``skip_self``: queries are the base rows, never their own neighbour. All cells: exact."""
    from swembed._extras import require

    require("dedup", "faiss")
    x, y = np.ascontiguousarray(queries, dtype=np.float32), np.ascontiguousarray(base, dtype=np.float32)
    if len(x) == 0:
        return
    cells, projection = cell_count(len(y)), coarse_projection(y, seed)
    centroids = spherical_cells(y, cells, projection, seed)
    probes = _nearest_cells(x, centroids, projection, min(nprobe, cells))
    home = probes[:, 0] if skip_self else _nearest_cells(y, centroids, projection, 1)[:, 0]
    members, member_bounds = _by_cell(home, cells)
    visits, visit_bounds = _by_cell(probes.ravel(), cells)
    ids, sims = np.full((len(x), k), -1, np.int64), np.full((len(x), k), -np.inf, np.float32)
    for cell in range(cells):
        rows = members[member_bounds[cell] : member_bounds[cell + 1]]
        asking = visits[visit_bounds[cell] : visit_bounds[cell + 1]] // probes.shape[1]
        if len(rows) and len(asking):
            _merge_cell(x, y, rows, asking, ids, sims, skip_self, floor)
    ids[~np.isfinite(sims)] = -1
    for start in range(0, len(x), 65_536):
        yield start, ids[start : start + 65_536], sims[start : start + 65_536]


def _merge_cell(x: np.ndarray, y: np.ndarray, rows: np.ndarray, asking: np.ndarray, ids: np.ndarray,
                sims: np.ndarray, skip_self: bool, floor: float) -> None:
    """Score the queries ``asking`` against the base ``rows`` of one cell and merge each query's best into its
    running top ``k`` (``ids``, ``sims``); only queries with a score above their k-th best (and ``floor``) are
    merged."""
    k = ids.shape[1]
    scores = x[asking] @ y[rows].T
    if skip_self:  # a query is a row of its own cell at most once
        at = np.minimum(np.searchsorted(rows, asking), len(rows) - 1)
        own = np.flatnonzero(rows[at] == asking)
        scores[own, at[own]] = -np.inf
    hot = np.flatnonzero(scores.max(axis=1) > np.maximum(sims[asking].min(axis=1), floor - 1e-6))
    if not len(hot):
        return
    scores, asking = scores[hot], asking[hot]
    if scores.shape[1] > k:
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        scores = np.take_along_axis(scores, top, axis=1)
    else:
        top = np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
    both_scores = np.concatenate([sims[asking], scores], axis=1)
    both_ids = np.concatenate([ids[asking], rows[top]], axis=1)
    best = np.argpartition(-both_scores, k - 1, axis=1)[:, :k]
    sims[asking] = np.take_along_axis(both_scores, best, axis=1)
    ids[asking] = np.take_along_axis(both_ids, best, axis=1)


def nearest_in(queries: np.ndarray, base: np.ndarray, method: str = "auto", nprobe: int = 16
               ) -> tuple[np.ndarray, np.ndarray]:
    """Each query row's most similar row of ``base`` and their float32 cosine (exact blockwise below
    ``EXACT_SEARCH_BELOW`` base rows, else ``cell_neighbours``; ``method`` forces one); no base rows: id -1, -inf."""
    x, y = np.ascontiguousarray(queries, dtype=np.float32), np.ascontiguousarray(base, dtype=np.float32)
    ids, sims = np.full(len(x), -1, np.int64), np.full(len(x), -np.inf, np.float32)
    if len(y) == 0 or len(x) == 0:
        return ids, sims
    search = (exact_neighbours(x, y, 1) if method == "exact" or (method == "auto" and len(y) < EXACT_SEARCH_BELOW)
              else cell_neighbours(x, y, 1, nprobe))
    for start, top, scores in search:
        ids[start : start + len(top)], sims[start : start + len(top)] = top[:, 0], scores[:, 0]
    return ids, sims


def neighbours(vectors: np.ndarray, k: int, method: str = "auto", nprobe: int = 16, floor: float = -np.inf
               ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Each row's ``k`` nearest other rows in blocks (see ``exact_neighbours``); ``method``: auto, exact or ann
    (``cell_neighbours``; auto: ann from ``EXACT_SEARCH_BELOW`` rows, where neighbours below ``floor`` may be
    left out)."""
    if method not in ("auto", "exact", "ann"):
        raise ValueError(f"search method must be auto, exact or ann, got {method!r}")
    if method == "exact" or (method == "auto" and len(vectors) < EXACT_SEARCH_BELOW):
        return exact_neighbours(vectors, vectors, k, skip_self_from=0)
    return ann_neighbours(vectors, k, nprobe, floor=floor)


def _unique_pairs(rows, cols, sims) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    r, c, s = np.concatenate(rows).astype(np.int64), np.concatenate(cols).astype(np.int64), np.concatenate(sims)
    a, b = np.minimum(r, c), np.maximum(r, c)
    _, first = np.unique(a * (int(b.max(initial=0)) + 1) + b, return_index=True)
    return a[first], b[first], s[first].astype(np.float32)


def near_pairs(vectors: np.ndarray, threshold: float, k: int = 16, method: str = "auto", nprobe: int = 16
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Near-duplicate pairs (i < j, float32 cosine >= threshold) among each row's ``k`` nearest; ``method``: auto,
    exact or ann (``cell_neighbours``). The pairs at a higher threshold are exactly these pairs filtered (same
    neighbours)."""
    rows, cols, sims = [], [], []
    for start, ids, scores in neighbours(vectors, k, method, nprobe, threshold):
        ok = (ids >= 0) & (scores >= threshold)
        r, c = np.nonzero(ok)
        rows.append(r + start)
        cols.append(ids[r, c])
        sims.append(scores[r, c])
    return _unique_pairs(rows, cols, sims)


def connected_roots(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Root (smallest member) of each element's connected component under the pairs (a, b)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    smallest = np.full(labels.max(initial=-1) + 1, n, dtype=np.int64)
    np.minimum.at(smallest, labels, np.arange(n))
    return smallest[labels]


@dataclass(frozen=True)
class Clustering:
    """One ``--clusters`` mode: ``transitive`` groups join texts through chains of pairs (single linkage, and the
    summary gives the lowest cosine of a removed record to its keeper); otherwise every removed record is a near
    duplicate of the record that keeps it (a star). The CLI, both engines and the summary read this one registry."""

    name: str
    transitive: bool
    help: str


CLUSTERINGS = {mode.name: mode for mode in (
    Clustering("star", False, "each removed record is a near duplicate of the one that keeps it"),
    Clustering("components", True, "transitive groups (a~b~c chains merge; the summary gives the lowest cosine)"),
)}


def clustering(name: str) -> Clustering:
    """The registered mode ``name``; any other is refused in one line (never run as another mode)."""
    if name not in CLUSTERINGS:
        raise ValueError(f"--clusters must be one of {', '.join(CLUSTERINGS)}, got {name!r}")
    return CLUSTERINGS[name]


def preference_rank(ids: np.ndarray, lengths: np.ndarray, keep: str) -> np.ndarray:
    """Each text's place in the order in which texts are kept: by ``ids`` (first occurrence) for ``keep="first"``,
    longest first (ties: the first) for ``"longest"``. Depends only on the texts' relative order, so a subset
    (one Spark component) ranks its texts as the whole collection does."""
    if keep not in ("first", "longest"):
        raise ValueError(f"--keep must be first or longest, got {keep!r}")
    ids = np.asarray(ids, dtype=np.int64)
    order = np.argsort(ids, kind="stable") if keep == "first" else np.lexsort((ids, -np.asarray(lengths)))
    rank = np.empty(len(ids), dtype=np.int64)
    rank[order] = np.arange(len(ids))
    return rank


def star_representatives(n: int, a: np.ndarray, b: np.ndarray, sims: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Clusters that cannot chain: the representative of each of ``n`` texts under the near-duplicate pairs
    (a, b, sims), every non-representative joined *directly* to its representative (cosine >= the search
    threshold). Texts are visited in ``rank`` order; one none of whose pair partners is already a
    representative becomes one (semhash's leader rule, so the kept texts are themselves never near duplicates
    of each other); every other text joins its most similar representative partner (ties: the one kept first)."""
    rep = np.arange(n)
    if len(a) == 0:
        return rep
    src, dst = np.r_[a, b], np.r_[b, a]
    edge_sims = np.r_[sims, sims]
    by_src = np.argsort(src, kind="stable")
    src, dst, edge_sims = src[by_src], dst[by_src], edge_sims[by_src]
    starts = np.searchsorted(src, np.arange(n + 1))
    leader = np.zeros(n, dtype=bool)
    linked = np.flatnonzero(starts[1:] > starts[:-1])
    for node in linked[np.argsort(rank[linked], kind="stable")].tolist():
        leader[node] = not leader[dst[starts[node]:starts[node + 1]]].any()
    join = ~leader[src] & leader[dst]  # (member, its leader partner) edges
    member, partner, score = src[join], dst[join], edge_sims[join]
    best = np.lexsort((rank[partner], -score, member))  # per member: most similar, then the one kept first
    first = np.r_[True, member[best][1:] != member[best][:-1]]
    rep[member[best][first]] = partner[best][first]
    return rep


def star_to_target(n: int, a: np.ndarray, b: np.ndarray, sims: np.ndarray, rank: np.ndarray, target: int,
                   floor: float) -> tuple[np.ndarray, float]:
    """Stars (``star_representatives``) at the highest threshold among the pairs' similarities that keeps at most
    ``target`` of the ``n`` texts (a binary search over those similarities; the kept count falls as the threshold
    does, almost always monotonically). Every removed text has cosine >= the returned threshold to its keeper.
    When even ``floor`` (all the pairs) keeps more than ``target``, that is the result. When the target needs no cut
    (``n <= target``) the threshold is 1, the highest a cosine has (only pairs of equal vectors join). The threshold
    returned is the one applied: a re-cut there gives the same stars. Returns (representatives, threshold)."""
    if n <= target:
        keep = sims >= 1.0
        return star_representatives(n, a[keep], b[keep], sims[keep], rank), 1.0
    if len(sims) == 0:
        return np.arange(n), floor

    def stars_at(value: float) -> np.ndarray:
        keep = sims >= value
        return star_representatives(n, a[keep], b[keep], sims[keep], rank)

    values = np.unique(sims)
    lowest = stars_at(float(values[0]))
    if int((lowest == np.arange(n)).sum()) > target:
        return lowest, floor
    low, high = 0, len(values) - 1  # values[low] keeps <= target
    while low < high:
        middle = (low + high + 1) // 2
        if int((stars_at(float(values[middle])) == np.arange(n)).sum()) <= target:
            low = middle
        else:
            high = middle - 1
    return stars_at(float(values[low])), float(values[low])


def merge_to_target(n: int, a: np.ndarray, b: np.ndarray, sims: np.ndarray, target: int
                    ) -> tuple[np.ndarray, float]:
    """Single-linkage: merge the most similar pairs first until ``target`` clusters remain (or pairs run out).
    Returns the roots and the similarity of the last merge (the threshold that yields this many clusters; 1 when
    none was needed, with the pairs of equal vectors merged as a cut at 1 merges them)."""
    if n <= target:
        return connected_roots(n, a[sims >= 1.0], b[sims >= 1.0]), 1.0
    order = np.argsort(-sims, kind="stable")
    parent, clusters, last = np.arange(n), n, 1.0

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for index in order.tolist():
        if clusters <= target:
            break
        ri, rj = find(int(a[index])), find(int(b[index]))
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
            clusters -= 1
            last = float(sims[index])
    return np.fromiter((find(i) for i in range(n)), dtype=np.int64, count=n), last


def representatives(roots: np.ndarray, lengths: np.ndarray, keep: str) -> np.ndarray:
    """The kept member of each element's cluster: the first, or the longest (ties: the first)."""
    if keep == "first":
        return roots.copy()
    if keep != "longest":
        raise ValueError(f"--keep must be first or longest, got {keep!r}")
    order = np.lexsort((np.arange(len(roots)), -lengths, roots))  # by cluster, longest first, then index
    first_of_cluster = np.r_[True, roots[order][1:] != roots[order][:-1]]
    best = dict(zip(roots[order][first_of_cluster].tolist(), order[first_of_cluster].tolist()))
    return np.fromiter((best[r] for r in roots.tolist()), dtype=np.int64, count=len(roots))
