"""The dedup core, shared by the one-machine command and the Spark integration: exact-duplicate keys,
near-duplicate pairs (ANN or exact blockwise search), clusters (stars that cannot chain by default, or connected
components) and representatives."""
from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence

import numpy as np

_SPACES = re.compile(r"\s+")
EXACT_SEARCH_BELOW = 50_000  # unique texts; below this an exact blockwise search is faster than building an index
SCORES_PER_BLOCK = 1 << 24  # exact search scores this many pairs at a time (64 MB of float32)


def normalized_key(text: str) -> str:
    """What exact dedup compares: NFKC, case-folded, whitespace collapsed and stripped."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def text_hashes(texts: Sequence[str]) -> np.ndarray:
    """64-bit BLAKE2b of each text's normalised key (collision odds ~N^2 / 2^65: 3e-8 for 1M texts)."""
    return np.fromiter((int.from_bytes(hashlib.blake2b(normalized_key(t).encode("utf-8", "replace"),
                                                       digest_size=8).digest(), "little") for t in texts),
                       dtype=np.uint64, count=len(texts))


def exact_search_pairs(vectors: np.ndarray, threshold: float, k: int, block: int | None = None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All pairs i < j with cosine >= threshold among each row's ``k`` nearest (exact, blockwise: by default
    ``SCORES_PER_BLOCK`` scores at a time, at most 4096 rows)."""
    x = np.asarray(vectors, dtype=np.float32)
    block = block or max(1, min(4096, SCORES_PER_BLOCK // max(len(x), 1)))
    rows, cols, sims = [], [], []
    for start in range(0, len(x), block):
        scores = x[start : start + block] @ x.T
        rows_here = np.arange(scores.shape[0])
        scores[rows_here, start + rows_here] = -np.inf  # drop self-matches
        take = min(k, len(x) - 1)
        if take <= 0:
            break
        top = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        top_scores = np.take_along_axis(scores, top, axis=1)
        r, c = np.nonzero(top_scores >= threshold)
        rows.append(r + start)
        cols.append(top[r, c])
        sims.append(top_scores[r, c])
    return _unique_pairs(rows, cols, sims)


def ann_search_pairs(vectors: np.ndarray, threshold: float, k: int, nprobe: int = 16, seed: int = 0
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs i < j with cosine >= threshold among each row's ``k`` approximate nearest neighbours: faiss IVF
    (inner product on unit vectors, ~4 sqrt(N) lists, trained on a seeded sample), exact scores."""
    from swembed._extras import require

    require("dedup", "faiss")
    import faiss

    x = np.ascontiguousarray(vectors, dtype=np.float32)
    n, dim = x.shape
    if n < 2:
        return _unique_pairs([], [], [])
    # ~4 sqrt(N) lists, but never more than the points can train (faiss wants 39 per list; a tiny input: one list)
    nlist = int(max(1, min(65_536, max(16, 4 * np.sqrt(n)), n // 39)))
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    sample = np.random.default_rng(seed).choice(n, size=min(n, 64 * nlist), replace=False)
    index.train(x[np.sort(sample)])
    index.add(x)
    index.nprobe = nprobe
    rows, cols, sims = [], [], []
    for start in range(0, n, 65_536):
        scores, neighbours = index.search(x[start : start + 65_536], k + 1)
        row = np.repeat(np.arange(start, start + len(scores)), k + 1).reshape(scores.shape)
        ok = (neighbours >= 0) & (neighbours != row) & (scores >= threshold)
        rows.append(row[ok])
        cols.append(neighbours[ok])
        sims.append(scores[ok])
    return _unique_pairs(rows, cols, sims)


def _unique_pairs(rows, cols, sims) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    r, c, s = np.concatenate(rows).astype(np.int64), np.concatenate(cols).astype(np.int64), np.concatenate(sims)
    a, b = np.minimum(r, c), np.maximum(r, c)
    _, first = np.unique(a * (int(b.max(initial=0)) + 1) + b, return_index=True)
    return a[first], b[first], s[first].astype(np.float32)


def near_pairs(vectors: np.ndarray, threshold: float, k: int = 16, method: str = "auto", nprobe: int = 16
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Near-duplicate pairs (i < j, cosine >= threshold); ``method``: auto, exact or ann (faiss)."""
    if method not in ("auto", "exact", "ann"):
        raise ValueError(f"search method must be auto, exact or ann, got {method!r}")
    if method == "exact" or (method == "auto" and len(vectors) < EXACT_SEARCH_BELOW):
        return exact_search_pairs(vectors, threshold, k)
    return ann_search_pairs(vectors, threshold, k, nprobe)


def connected_roots(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Root (smallest member) of each element's connected component under the pairs (a, b)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    smallest = np.full(labels.max(initial=-1) + 1, n, dtype=np.int64)
    np.minimum.at(smallest, labels, np.arange(n))
    return smallest[labels]


CLUSTERINGS = ("star", "components")


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


def merge_to_target(n: int, a: np.ndarray, b: np.ndarray, sims: np.ndarray, target: int
                    ) -> tuple[np.ndarray, float]:
    """Single-linkage: merge the most similar pairs first until ``target`` clusters remain (or pairs run out).
    Returns the roots and the similarity of the last merge (the threshold that yields this many clusters)."""
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
