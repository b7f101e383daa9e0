"""`swembed shrink`: a smaller table from a built one, for phones and browsers (``pipelines/edge-*.toml``).

In order, each step optional:

1. **words**: keep the ``words`` words seen in the most corpus sentences (``word_contexts.npy``; without it the
   vocabulary order, which is by frequency). A dropped word backs off like any unknown word (its pieces and
   its gram rows), so the gram rows matter most once the vocabulary is cut.
2. **pieces**: keep the ``pieces`` piece rows that the back-off of the source's words uses most (each use weighs
   the word's sentences + 1); a piece no source word uses goes first.
3. **gram_buckets**: fit that many gram rows (``swembed.pipeline.grams``, the build's own ridge fit) to *every*
   source word row, kept or dropped, so each dropped word's grams recall it; 0 drops the gram rows. Unset, the
   source's gram rows are kept (projected). ``gram_target = "residual"`` fits each word's gram mean to
   2 row - its kept pieces' mean instead, so the back-off (half pieces, half grams) itself approaches the row.
   ``oov_weight`` sets an unknown word's weight in the mean: a cut vocabulary's unknown words are no longer only
   rare ones.
4. **dim**: project every row onto the top ``dim`` eigenvectors of the source word rows' second-moment matrix,
   each word weighted by its sentences + 1 (a sentence vector is a mean of frequent words' rows).
5. **storage**: float32, float16, int8 (a scale per row), int4 (a scale per row, two values a byte) or codebook
   (``centroids`` shared unit rows from spherical k-means, each row a code and a scale: model2vec's vocabulary
   quantisation). The last two are read by ``swembed.runtime.storage``.

The folder is written by ``write_model_folder``; its config.json says what was done under ``"shrink"``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import cast

import numpy as np

from swembed.runtime.ranges import Range, check_ranges
from swembed.runtime.tokenizer import WEIGHTS

STORAGES = ("float32", "float16", "int8", "int4", "codebook")
GRAM_TARGETS = ("word", "residual")
_DROPPED_KEYS = ("format", "format_version", "dtype", "dim", "vocab_size", "tokenizer", "storage", "pieces", "grams",
                 "shrink", "created", "kind_weights")


@dataclass
class ShrinkConfig:
    """What ``swembed shrink`` keeps; None keeps the source's."""

    words: int | None = None
    pieces: int | None = None
    dim: int | None = None
    gram_buckets: int | None = None
    gram_target: str = "word"  # "residual": fit (2 row - its pieces' mean), so the back-off's two halves sum to it
    oov_weight: float | None = None  # an unknown word's weight in the mean (the source's when None)
    storage: str = "float32"
    centroids: int = 4096  # codebook storage: shared rows
    seed: int = 0

    def validate(self) -> None:
        check_ranges(SHRINK_RANGES, self, lambda name: f"shrink {name}")
        if self.gram_target not in GRAM_TARGETS:
            raise ValueError(f"shrink gram_target must be one of {GRAM_TARGETS}, got {self.gram_target!r}")
        if self.storage not in STORAGES:
            raise ValueError(f"shrink storage must be one of {STORAGES}, got {self.storage!r}")


# ShrinkConfig's numeric settings (the recipe keys; the flags spell them with dashes)
SHRINK_RANGES = {
    "words": Range(1, unset="the source's words"),
    "pieces": Range(1, unset="the source's pieces"),
    "dim": Range(1, unset="the source's dim"),
    "gram_buckets": Range(0, unset="the source's gram rows; 0 drops them"),
    "oov_weight": Range(WEIGHTS.low, WEIGHTS.high, unset="the source's weight"),
    "centroids": Range(1),
}


@dataclass
class ShrinkRecipe:
    """A recipe file (``pipelines/edge-*.toml``): ``source`` and ``out`` folders, then ``ShrinkConfig`` keys."""

    source: str | None
    out: str | None
    config: ShrinkConfig


def load_shrink_recipe(path: str | Path) -> ShrinkRecipe:
    """Read a shrink recipe; a wrong key or type is one line naming the file and the key."""
    from swembed.pipeline.config import read_recipe_toml, recipe_path

    path = recipe_path(path)
    data = read_recipe_toml(path)
    types: dict[str, tuple[type, ...]] = {f.name: (str,) if f.name in ("storage", "gram_target") else (int, type(None))
             for f in fields(ShrinkConfig)}
    types["oov_weight"] = (int, float)
    types.update(source=(str,), out=(str,))
    for key, value in data.items():
        if key not in types:
            raise ValueError(f"{path}: unknown key {key!r} (known: {', '.join(types)})")
        if not isinstance(value, types[key]) or isinstance(value, bool):
            raise ValueError(f"{path}: {key} must be {' or '.join(t.__name__ for t in types[key])}, got {value!r}")
    settings = {k: v for k, v in data.items() if k not in ("source", "out")}
    return ShrinkRecipe(data.get("source"), data.get("out"), ShrinkConfig(**settings))


def word_order(contexts: np.ndarray | None, words: int) -> np.ndarray:
    """The ``words`` rows to keep, in their table order: most sentences first, ties in table order."""
    if contexts is None:
        return np.arange(words)
    return np.sort(np.argsort(-np.asarray(contexts, dtype=np.float64), kind="stable")[:words])


def word_piece_rows(tokenizer, words: list[str]) -> list[list[int]]:
    """The piece rows of each word's back-off (as if it were unknown)."""
    rows = tokenizer.piece_rows
    return [[r for r in (rows.get(piece) for piece in tokenizer.word_pieces(word)) if r is not None]
            for word in words]


def piece_usage(pieces_of: list[list[int]], weights: np.ndarray) -> dict[int, float]:
    """Piece row -> summed weight of the words whose back-off uses it."""
    usage: dict[int, float] = {}
    for rows, weight in zip(pieces_of, weights):
        for row in rows:
            usage[row] = usage.get(row, 0.0) + float(weight)
    return usage


def residual_targets(table: np.ndarray, word_end: int, pieces_of: list[list[int]], kept: np.ndarray) -> np.ndarray:
    """What each word's gram mean should be so that the back-off (half its kept pieces' mean, half its grams'
    mean) equals its row: 2 row - pieces' mean; the row itself for a word with no kept piece."""
    targets = np.array(table[:word_end], dtype=np.float32)
    keep = set(int(r) for r in kept)
    for i, rows in enumerate(pieces_of):
        rows = [r for r in rows if r in keep]
        if rows:
            targets[i] = 2 * targets[i] - table[rows].mean(axis=0)
    return targets


def projection(word_rows: np.ndarray, weights: np.ndarray, dim: int) -> np.ndarray:
    """(d, dim): the top eigenvectors of sum_i w_i r_i r_i^T (uncentred: the rows keep their common direction,
    which every sentence mean carries)."""
    rows = np.asarray(word_rows, dtype=np.float64)
    moment = (rows * weights[:, None]).T @ rows
    values, vectors = np.linalg.eigh(moment)
    return vectors[:, np.argsort(values)[::-1][:dim]].astype(np.float32)


def codebook(table: np.ndarray, centroids: int, seed: int = 0, iterations: int = 10) -> tuple[
        np.ndarray, np.ndarray, np.ndarray]:
    """Shared rows: spherical k-means of the rows' directions into ``centroids`` unit rows; each row keeps its
    nearest centroid and its least-squares scale onto it. (centroids (K, d), codes (V,), scales (V,)); faiss."""
    from swembed._extras import require

    require("dedup", "faiss")
    import faiss

    table = np.ascontiguousarray(table, dtype=np.float32)
    units = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    centroids = min(centroids, len(table))
    kmeans = faiss.Kmeans(table.shape[1], centroids, niter=iterations, seed=seed, spherical=True,
                          max_points_per_centroid=256, verbose=False)
    kmeans.train(units)
    trained = cast(np.ndarray, kmeans.centroids)  # set by train (faiss's stubs say Optional)
    shared = trained / np.maximum(np.linalg.norm(trained, axis=1, keepdims=True), 1e-12)
    index = faiss.IndexFlatIP(shared.shape[1])
    index.add(np.ascontiguousarray(shared, dtype=np.float32))
    _, nearest = index.search(units, 1)
    codes = nearest[:, 0].astype(np.uint16 if centroids <= 65536 else np.int32)
    scales = (table * shared[codes]).sum(axis=1)
    return shared.astype(np.float32), codes, scales.astype(np.float32)


def stored(table: np.ndarray, config: ShrinkConfig) -> tuple[np.ndarray, dict[str, np.ndarray], dict]:
    """(embeddings.npy, other arrays, config keys) of ``table`` in ``config.storage``."""
    from swembed.integrations.formats import quantize_int8
    from swembed.runtime.storage import quantize_int4

    if config.storage in ("float32", "float16"):
        return table.astype(config.storage), {}, {"dtype": config.storage}
    if config.storage == "int8":
        values, scales = quantize_int8(table)
        return values, {"scales": scales}, {"dtype": "int8"}
    if config.storage == "int4":
        packed, scales = quantize_int4(table)
        return packed, {"scales": scales}, {"dtype": "int4", "storage": {"kind": "int4"}}
    shared, codes, scales = codebook(table, config.centroids, config.seed)
    return (shared.astype(np.float16), {"scales": scales, "codes": codes},
            {"dtype": "float16", "storage": {"kind": "codebook", "centroids": int(len(shared))}})


def folder_bytes(folder: str | Path) -> int:
    """Bytes of every file in a model folder (what a device downloads)."""
    return sum(p.stat().st_size for p in Path(folder).iterdir() if p.is_file())


class Source:
    """A built table read once for any number of shrinks (``shrink(..., source=Source(path))``): its float rows,
    row spans and word weights, and the gram fits made so far (keyed by buckets, target and kept pieces)."""

    def __init__(self, path: str | Path, cache_dir: str | Path | None = None) -> None:
        from swembed.runtime.embedder import load

        self.path = Path(path)
        self.cache_dir = Path(cache_dir) if cache_dir else None  # gram fits saved here, for later runs
        model = load(path)
        if model.tokenizers or "ensemble" in model.config:
            raise ValueError(f"{path}: shrink reads one-language tables (this one has languages or ensemble members)")
        self.model = model
        self.table = model.float_rows()
        self.labels = model.labels
        self.piece_span = (model.config.get("pieces") or {}).get("rows")
        self.gram_span = (model.config.get("grams") or {}).get("rows")
        span = self.piece_span or self.gram_span
        self.word_end = span[0] if span else len(self.labels)
        contexts = model.word_contexts
        self.contexts = contexts if contexts is not None and len(contexts) == self.word_end else None
        counts = np.asarray(self.contexts, dtype=np.float64) if self.contexts is not None else np.zeros(self.word_end)
        self.weights = counts + 1.0
        self._pieces_of: list[list[int]] | None = None
        self._grams: dict[tuple, np.ndarray] = {}

    @property
    def pieces_of(self) -> list[list[int]]:
        if self._pieces_of is None:
            self._pieces_of = word_piece_rows(self.model.tokenizer, self.labels[: self.word_end])
        return self._pieces_of

    def grams(self, buckets: int, target: str, pieces: np.ndarray) -> np.ndarray:
        """Gram rows fitted to every word (at the source's dim; a projection is linear, so it follows them)."""
        import zlib

        key = (buckets, target, zlib.crc32(pieces.tobytes()) if target == "residual" else None)
        table_id = zlib.crc32(f"{self.path.resolve()} {self.model.config.get('created')}".encode())
        saved = self.cache_dir / f"grams-{table_id}-{key[0]}-{key[1]}-{key[2]}.npy" if self.cache_dir else None
        if key not in self._grams and saved is not None and saved.is_file():
            self._grams[key] = np.load(saved)
        if key not in self._grams:
            from swembed._extras import require

            require("build", "scipy")
            from swembed.pipeline.grams import fit_grams, gram_matrix

            words = self.table[: self.word_end]
            targets = residual_targets(self.table, self.word_end, self.pieces_of, pieces) if target == "residual" \
                else words
            self._grams[key] = fit_grams(gram_matrix(self.labels[: self.word_end], buckets), targets)
            if saved is not None:
                from swembed.runtime.folder import atomic_save_npy

                saved.parent.mkdir(parents=True, exist_ok=True)
                atomic_save_npy(saved, self._grams[key])
        return self._grams[key]


def shrink(source: str | Path | Source, out: str | Path, config: ShrinkConfig, overwrite: bool = False) -> dict:
    """Write a smaller model folder at ``out`` from the built one at ``source`` (a folder, or a ``Source`` read
    already); returns what it kept."""
    from swembed.runtime.folder import TOKENIZER_FILE, write_model_folder
    from swembed.runtime.outputs import check_writable

    config.validate()
    read = [str(source.path if isinstance(source, Source) else source)]
    check_writable(Path(out), overwrite, read)  # never the source, a folder inside it or one holding it
    src = source if isinstance(source, Source) else Source(source)
    if src.model.tokenizer.rules.oov_backoff != "pieces" and (config.gram_buckets or config.words):
        raise ValueError(f"{src.path}: its unknown words back off by {src.model.tokenizer.rules.oov_backoff!r}, not "
                         "through pieces and grams, so a vocabulary cut or gram rows would lose words")
    table, word_end, piece_span, gram_span = src.table, src.word_end, src.piece_span, src.gram_span
    words = word_order(src.contexts, min(config.words or word_end, word_end))
    pieces = np.arange(*piece_span) if piece_span else np.zeros(0, dtype=np.int64)
    if config.pieces is not None and config.pieces < len(pieces):
        usage = piece_usage(src.pieces_of, src.weights)
        ranked = sorted(pieces, key=lambda row: (-usage.get(int(row), 0.0), row))
        pieces = np.sort(np.array(ranked[: config.pieces], dtype=np.int64))
    if config.gram_buckets is None:
        grams = table[gram_span[0]: gram_span[1]] if gram_span else np.zeros((0, table.shape[1]), np.float32)
    elif config.gram_buckets == 0:
        grams = np.zeros((0, table.shape[1]), np.float32)
    else:
        grams = src.grams(config.gram_buckets, config.gram_target, pieces)
    rows = np.concatenate([words, pieces])
    new_table = np.vstack([table[rows], grams]).astype(np.float32)
    if config.dim is not None and config.dim < table.shape[1]:
        new_table = new_table @ projection(table[:word_end], src.weights, config.dim)
    labels = src.labels
    new_labels = [labels[i] for i in rows] + [f"<gram {i}>" for i in range(len(grams))]
    new_config = {k: v for k, v in src.model.config.items() if k not in _DROPPED_KEYS}
    new_config["dim"] = int(new_table.shape[1])
    if config.oov_weight is not None:
        new_config["tokenization"] = {**new_config.get("tokenization", {}), "oov_weight": float(config.oov_weight)}
    if len(pieces):
        new_config["pieces"] = {"rows": [len(words), len(rows)]}
    if len(grams):
        new_config["grams"] = {"rows": [len(rows), len(rows) + len(grams)]}
    values, arrays, storage_keys = stored(new_table, config)
    new_config.update(storage_keys)
    kept = {"words": int(len(words)), "pieces": int(len(pieces)), "gram_buckets": int(len(grams)),
            "dim": int(new_table.shape[1])}
    new_config["shrink"] = {"source": str(src.path), "settings": asdict(config), "kept": kept,
                            "source_rows": {"words": int(word_end), "pieces": _span_rows(piece_span),
                                            "gram_buckets": _span_rows(gram_span)}}
    if src.contexts is not None:
        arrays["word_contexts"] = np.asarray(src.contexts)[words].astype(np.int32)
    new_config.update(_kept_kind_weights(src.model.kind_weights, rows, gram_span if config.gram_buckets is None
                                         else None, len(grams), arrays))
    tokenizer_path = src.path / TOKENIZER_FILE
    tokenizer_json = tokenizer_path.read_text(encoding="utf-8") if tokenizer_path.is_file() else None
    write_model_folder(Path(out), values, new_labels, new_config, tokenizer_json, arrays, overwrite=overwrite,
                       inputs=read)
    return {**kept, "rows": len(new_labels), "storage": config.storage, "bytes": folder_bytes(out)}


def _kept_kind_weights(kind_weights: dict[str, np.ndarray], rows: np.ndarray, gram_span: list[int] | None,
                       grams: int, arrays: dict[str, np.ndarray]) -> dict:
    """Each kind's row weights (query, document) for the kept ``rows``, then the gram rows: the source's where its
    gram rows are kept as they are (``gram_span``), else 1 (new gram rows); into ``arrays``. Returns config.json's
    ``kind_weights`` (none: {})."""
    from swembed.runtime.folder import KIND_WEIGHT_FILES, KIND_WEIGHTS

    for kind, weights in kind_weights.items():
        gram_weights = weights[gram_span[0]: gram_span[1]] if gram_span else np.ones(grams, dtype=np.float32)
        arrays[KIND_WEIGHT_FILES[kind].removesuffix(".npy")] = np.concatenate([weights[rows], gram_weights])
    return {KIND_WEIGHTS: {kind: KIND_WEIGHT_FILES[kind] for kind in kind_weights}} if kind_weights else {}


def _span_rows(span: list[int] | None) -> int:
    return int(span[1] - span[0]) if span else 0
