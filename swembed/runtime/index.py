"""SearchIndex: a corpus's sentence vectors, its ids and texts, and the identity of the table that encoded them, in
a folder that saves and loads.

```
index.json         format, passages, dim, dtype, the table's digest and path, what the folder holds
vectors.npy        (passages, dim) float32, or int8 with scales.npy (passages,) float32: row = int8 row * scale
ids.npy            (passages,) int64 ids, or the UTF-8 bytes of string ids with id_offsets.npy (passages + 1,) int64
texts.npy          the UTF-8 bytes of the passages, with text_offsets.npy (passages + 1,) int64
terms.npy          the lexical channel (``swembed.runtime.lexical``; absent from a dense-only index): the UTF-8 bytes
                   of the corpus's terms (its words, stemmed as index.json's lexical.stemmer says), with
                   term_offsets.npy (terms + 1,) int64; term_postings.npy (terms + 1,) int64, posting_docs.npy and
                   posting_counts.npy (postings,) int32, lengths.npy (passages,) int32
window_vectors.npy passage windows (``swembed.runtime.windows``; only in an index built with them, format_version
                   2): (windows, dim) float32, or int8 with window_scales.npy (windows,) float32; window_offsets.npy
                   (passages + 1,) int64: passage i's windows are rows offsets[i]:offsets[i + 1]
```

A loaded folder is untrusted input: every file must be a regular file, every array loads without pickles and has
the shape and dtype ``index.json`` declares, vectors are finite, and anything else is refused in one line naming
the file; postings must point at passages in rising order, count each word at least once, and sum to each
passage's length. An index searches only with the table it was built with (``StaticEmbedder.digest``). Scores come
from one method, ``SearchIndex.scores``: the cosine, BM25 or their hybrid. An index saved without postings (before
they existed, or with ``lexical=False``) loads and searches by cosine.
"""
from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeGuard

import numpy as np

from swembed.runtime.lexical import Lexical, Splitter, check_alpha, check_mode, check_stemmer, hybrid
from swembed.runtime.outputs import atomic_directory
from swembed.runtime.search import Hit, Scored, dense_blocks, dense_scores, rank, rank_blocks, scores_at
from swembed.runtime.windows import ALPHA as WINDOWS_ALPHA
from swembed.runtime.windows import (
    GAMMA,
    SHORTLIST_FROM,
    check_width,
    encode_windows,
    shortlisted,
    shortlists,
    windowed,
)

INDEX_FORMAT = "swembed-index"
INDEX_VERSION = 2  # 2: passage windows (an index without them is written as version 1)
INDEX_FILE = "index.json"
VECTORS_FILE = "vectors.npy"
SCALES_FILE = "scales.npy"
WINDOW_FILES = ("window_vectors.npy", "window_scales.npy", "window_offsets.npy")
POSTINGS_FILES = ("term_postings.npy", "posting_docs.npy", "posting_counts.npy", "lengths.npy")
DTYPES = ("float32", "int8")
_MAX_INDEX_JSON = 1 << 20
_QUANTISED_ROWS = 1 << 16  # rows quantised to int8 at once (an index of 10M window vectors: 64 MB blocks, not 30 GB)


class SearchIndexError(ValueError):
    """An index folder that cannot be read, or an index searched with another table."""


class Encoder(Splitter, Protocol):  # what an index needs of a model (StaticEmbedder)
    path: Path | None

    def encode(self, texts: Iterable[str] | str, *, kind: str | None = None) -> np.ndarray: ...

    def digest(self) -> str: ...


class Strings(Sequence[str]):
    """Strings kept as their UTF-8 bytes and offsets (one array each): decoded one at a time when read."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray, where: Path | str = "<strings>") -> None:
        self.data, self.offsets, self.where = data, offsets, where

    @classmethod
    def of(cls, values: Iterable[object]) -> Strings:
        encoded = [str(v).encode("utf-8", errors="surrogatepass") for v in values]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        return cls(np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def tolist(self) -> list[str]:
        """Every string, decoded (one pass over the bytes)."""
        raw, bounds = bytes(self.data), self.offsets.tolist()
        try:
            return [raw[a:b].decode("utf-8", errors="surrogatepass") for a, b in zip(bounds, bounds[1:])]
        except UnicodeDecodeError as exc:
            reason = exc.reason
        raise SearchIndexError(f"{self.where}: a string is not UTF-8 ({reason}); the index is damaged")

    def __getitem__(self, i):  # type: ignore[override]  # an int only, no slices
        if not isinstance(i, (int, np.integer)):
            raise TypeError("Strings are indexed by one int")
        i = int(i) + len(self) if i < 0 else int(i)
        if not 0 <= i < len(self):
            raise IndexError(i)
        raw = bytes(self.data[self.offsets[i] : self.offsets[i + 1]])
        try:
            return raw.decode("utf-8", errors="surrogatepass")
        except UnicodeDecodeError as exc:
            reason = exc.reason
        raise SearchIndexError(f"{self.where}: string {i} is not UTF-8 ({reason}); the index is damaged")


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


# index.json's keys: (whether a value is valid, what it must be)
_FIELDS: dict[str, tuple[Any, str]] = {
    "passages": (_is_count, "an integer of at least 1"),
    "dim": (_is_count, "an integer of at least 1"),
    "dtype": (lambda v: v in DTYPES, " or ".join(DTYPES)),
    "ids": (lambda v: v in (None, "int", "str"), '"int", "str" or null'),
    "texts": (lambda v: isinstance(v, bool), "true or false"),
    "table": (lambda v: isinstance(v, dict) and isinstance(v.get("digest"), str),
              'an object with the table\'s "digest"'),
}


def _regular_file(path: Path) -> Path:
    """``path`` when it is a regular file (not a link, folder, FIFO or device); else a one-line error."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise SearchIndexError(f"{path.parent}: {path.name} is missing; the index is incomplete") from None
    if not stat.S_ISREG(mode):
        raise SearchIndexError(f"{path}: not a regular file (a link, folder or special file); an index folder holds "
                               "plain files")
    return path


def _read_info(folder: Path) -> dict:
    """index.json, checked: the format, its version and every key of ``_FIELDS``."""
    path = _regular_file(folder / INDEX_FILE)
    try:
        if path.stat().st_size > _MAX_INDEX_JSON:
            raise ValueError(f"larger than {_MAX_INDEX_JSON} bytes")
        info = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:
        raise SearchIndexError(f"{path}: not a readable index.json ({str(exc).splitlines()[0]})") from None
    if not isinstance(info, dict) or info.get("format") != INDEX_FORMAT:
        found = info.get("format") if isinstance(info, dict) else info
        raise SearchIndexError(f"{path}: format is {json.dumps(found)[:60]}, not {INDEX_FORMAT!r}; not a swembed index")
    version = info.get("format_version")
    if not (isinstance(version, int) and not isinstance(version, bool) and 1 <= version <= INDEX_VERSION):
        raise SearchIndexError(f"{path}: format_version {json.dumps(version)[:60]} is not one this swembed reads "
                               f"(1 to {INDEX_VERSION})")
    for key, (valid, what) in _FIELDS.items():
        if key not in info or not valid(info[key]):
            raise SearchIndexError(f"{path}: {key} must be {what}, got {json.dumps(info.get(key))[:60]}")
    return info


def _load_array(folder: Path, name: str, shape: tuple[int | None, ...], dtype: str, mmap: bool) -> np.ndarray:
    """``folder/name`` as a .npy array of ``shape`` (None: any length) and ``dtype``, loaded without pickles."""
    path = _regular_file(folder / name)
    try:
        array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise SearchIndexError(f"{path}: unreadable or truncated .npy file ({str(exc).splitlines()[0]})") from None
    if not isinstance(array, np.ndarray):
        raise SearchIndexError(f"{path}: not a .npy array")
    fits = len(array.shape) == len(shape) and all(want in (None, got) for want, got in zip(shape, array.shape))
    if array.dtype != np.dtype(dtype) or not fits:
        expected = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ")"
        raise SearchIndexError(f"{path}: expected shape {expected} {dtype}, got {array.shape} {array.dtype}; the index "
                               "is damaged or another index's")
    return array


def _check_vectors(path: Path, vectors: np.ndarray, scales: np.ndarray | None) -> None:
    """Sentence vectors: finite, every value within [-1, 1] (int8 rows times their scale), scales finite and >= 0."""
    if scales is not None and not (np.isfinite(scales).all() and (scales >= 0).all()):
        raise SearchIndexError(f"{path.parent / SCALES_FILE}: holds negative, NaN or infinite scales; the index is "
                               "damaged")
    for start in range(0, len(vectors), 1 << 16):
        block = np.abs(np.asarray(vectors[start : start + (1 << 16)], dtype=np.float32))
        peaks = block.max(axis=1) * (scales[start : start + len(block)] if scales is not None else 1)
        bad = np.flatnonzero(~(peaks <= 1.001))  # NaN fails too
        if len(bad):
            raise SearchIndexError(f"{path}: row {start + int(bad[0])} is not a sentence vector (NaN, infinite or "
                                   "beyond 1); the index is damaged")


def _load_strings(folder: Path, name: str, passages: int, mmap: bool) -> Strings:
    """``name``.npy (UTF-8 bytes) and ``<name without s>_offsets.npy``: ``passages + 1`` offsets from 0, never
    decreasing, ending at the bytes' length."""
    data = _load_array(folder, f"{name}.npy", (None,), "uint8", mmap)
    offsets_name = f"{name[:-1]}_offsets.npy"
    offsets = _load_array(folder, offsets_name, (passages + 1,), "int64", False)
    if offsets[0] != 0 or offsets[-1] != len(data) or (np.diff(offsets) < 0).any():
        raise SearchIndexError(f"{folder / offsets_name}: offsets must rise from 0 to the {len(data)} bytes of "
                               f"{name}.npy; the index is damaged")
    return Strings(data, offsets, folder / f"{name}.npy")


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_postings(folder: Path, lexical: Lexical) -> None:
    """Postings that BM25 can trust: each term's run of passages non-empty and rising, every passage one of the
    index's, every count at least 1, and each passage's counts summing to its length."""
    offsets, docs, counts, lengths = lexical.offsets, lexical.docs, lexical.counts, lexical.lengths
    if offsets[0] != 0 or offsets[-1] != len(docs) or (np.diff(offsets) < 1).any():
        raise SearchIndexError(f"{folder / POSTINGS_FILES[0]}: offsets must rise from 0 to the {len(docs)} postings, "
                               "each term holding one at least; the index is damaged")
    if len(docs) and (int(docs.min()) < 0 or int(docs.max()) >= len(lengths)):
        raise SearchIndexError(f"{folder / POSTINGS_FILES[1]}: a posting names a passage outside the "
                               f"{len(lengths)} of the index; the index is damaged")
    falls = np.diff(np.asarray(docs, dtype=np.int64)) <= 0
    falls[offsets[1:-1] - 1] = False  # a new term starts its run again
    if falls.any():
        raise SearchIndexError(f"{folder / POSTINGS_FILES[1]}: posting {int(np.argmax(falls)) + 1} does not rise "
                               "within its term's run; the index is damaged")
    if len(counts) and int(counts.min()) < 1:
        raise SearchIndexError(f"{folder / POSTINGS_FILES[2]}: a count below 1; the index is damaged")
    summed = np.bincount(docs, weights=counts, minlength=len(lengths)) if len(docs) else np.zeros(len(lengths))
    if (summed != lengths).any():
        raise SearchIndexError(f"{folder / POSTINGS_FILES[3]}: passage {int(np.argmax(summed != lengths))}'s length "
                               "is not the sum of its postings' counts; the index is damaged")


def _load_lexical(folder: Path, info: dict, mmap: bool) -> Lexical | None:
    """The postings ``info["lexical"]`` declares (``{"terms": T, "postings": P, "stemmer": S}``; no stemmer: the
    terms are words as they are), checked; None when absent."""
    sizes = info.get("lexical")
    if sizes is None:
        return None
    if not (isinstance(sizes, dict) and _is_size(sizes.get("terms")) and _is_size(sizes.get("postings"))):
        raise SearchIndexError(f"{folder / INDEX_FILE}: lexical must be null or an object with the numbers of "
                               f'"terms" and "postings", got {json.dumps(sizes)[:60]}')
    terms, postings = sizes["terms"], sizes["postings"]
    try:
        stemmer = check_stemmer(sizes.get("stemmer"))
    except ValueError as error:
        raise SearchIndexError(f"{folder / INDEX_FILE}: lexical {str(error)[:200]}; index the corpus again with "
                               "this swembed") from None
    lexical = Lexical(_load_strings(folder, "terms", terms, mmap),
                      _load_array(folder, POSTINGS_FILES[0], (terms + 1,), "int64", False),
                      _load_array(folder, POSTINGS_FILES[1], (postings,), "int32", mmap),
                      _load_array(folder, POSTINGS_FILES[2], (postings,), "int32", mmap),
                      _load_array(folder, POSTINGS_FILES[3], (info["passages"],), "int32", False),
                      where=folder / "terms.npy", stemmer=stemmer)
    _check_postings(folder, lexical)
    return lexical


def _save_lexical(folder: Path, lexical: Lexical) -> None:
    _save_strings(folder, "terms", lexical.terms)
    for name, array in zip(POSTINGS_FILES, (lexical.offsets, lexical.docs, lexical.counts, lexical.lengths)):
        np.save(folder / name, np.ascontiguousarray(array))


def _save_strings(folder: Path, name: str, values: Sequence[object]) -> None:
    strings = values if isinstance(values, Strings) else Strings.of(values)
    np.save(folder / f"{name}.npy", np.asarray(strings.data))
    np.save(folder / f"{name[:-1]}_offsets.npy", np.asarray(strings.offsets))


class Windows(NamedTuple):
    """An index's passage windows: their width in words, the weight of the best one's cosine, their vectors (int8
    rows times ``scales``) and ``offsets`` (passage i's windows: rows offsets[i]:offsets[i + 1])."""

    width: int
    gamma: float
    vectors: np.ndarray
    scales: np.ndarray | None
    offsets: np.ndarray


def _is_weight(value: object) -> TypeGuard[float]:
    """A finite number of at least 0 (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf")


def _load_windows(folder: Path, info: dict, mmap: bool) -> Windows | None:
    """The windows ``info["windows"]`` declares (``{"width": W, "gamma": G, "windows": N}``), checked; None when
    absent."""
    sizes = info.get("windows")
    if sizes is None:
        return None
    gamma = sizes.get("gamma") if isinstance(sizes, dict) else None
    if not (isinstance(sizes, dict) and _is_size(sizes.get("windows")) and _is_count(sizes.get("width"))
            and sizes["width"] >= 2 and _is_weight(gamma)):
        raise SearchIndexError(f"{folder / INDEX_FILE}: windows must be null or an object with their \"width\" (2 or "
                               f'more words), "gamma" (a number >= 0) and the number of "windows", got '
                               f"{json.dumps(sizes)[:60]}")
    count, dtype = sizes["windows"], info["dtype"]
    vectors = _load_array(folder, WINDOW_FILES[0], (count, info["dim"]), dtype, mmap)
    scales = _load_array(folder, WINDOW_FILES[1], (count,), "float32", False) if dtype == "int8" else None
    _check_vectors(folder / WINDOW_FILES[0], vectors, scales)
    offsets = _load_array(folder, WINDOW_FILES[2], (info["passages"] + 1,), "int64", False)
    if offsets[0] != 0 or offsets[-1] != count or (np.diff(offsets) < 0).any():
        raise SearchIndexError(f"{folder / WINDOW_FILES[2]}: offsets must rise from 0 to the {count} windows; the "
                               "index is damaged")
    return Windows(sizes["width"], float(gamma), vectors, scales, offsets)


def _save_windows(folder: Path, windows: Windows) -> None:
    np.save(folder / WINDOW_FILES[0], np.ascontiguousarray(windows.vectors))
    if windows.scales is not None:
        np.save(folder / WINDOW_FILES[1], windows.scales)
    np.save(folder / WINDOW_FILES[2], np.ascontiguousarray(windows.offsets, dtype=np.int64))


def _ids_kind(ids: Sequence[int | str] | None) -> str | None:
    """How ``ids`` are stored: "int", "str" or None (no ids); mixed or other ids are refused."""
    if ids is None:
        return None
    if all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in ids):
        return "int"
    if all(isinstance(i, str) for i in ids):
        return "str"
    raise ValueError("ids must be all integers or all strings")


def quantise(vectors: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(rows, scales) of float32 vectors in ``dtype``: float32 as they are; int8 with one scale a row,
    ``max|row| / 127`` (1 for a zero row), as int8 tables are stored (docs/format.md)."""
    if dtype not in DTYPES:
        raise ValueError(f"an index's dtype must be one of {DTYPES}, got {dtype!r}")
    if dtype == "float32":
        return np.ascontiguousarray(vectors, dtype=np.float32), None
    rows, scales = np.empty(np.shape(vectors), dtype=np.int8), np.empty(len(vectors), dtype=np.float32)
    for start in range(0, len(vectors), _QUANTISED_ROWS):  # temporaries of a block, not of every vector
        block = np.asarray(vectors[start : start + _QUANTISED_ROWS], dtype=np.float32)
        peaks = np.abs(block).max(axis=1) if block.size else np.zeros(len(block), dtype=np.float32)
        scale = np.where(peaks > 0, peaks / 127, 1).astype(np.float32)
        rows[start : start + len(block)] = np.clip(np.rint(block / scale[:, None]), -127, 127)
        scales[start : start + len(block)] = scale
    return rows, scales


class SearchIndex:
    """A corpus's sentence vectors for search, their ids and texts, and the digest of the table that encoded them.

    ``SearchIndex.build(model, corpus)`` (or ``model.index(corpus)``) encodes and makes the BM25 postings;
    ``search(queries, top_k, mode)`` ranks by cosine, BM25 or their hybrid (``swembed.runtime.search.rank``);
    ``save(folder)`` / ``SearchIndex.load(folder, model)`` keep it. Built with ``windows`` (a width in words), a
    long passage's dense score is its cosine plus ``gamma`` times its best window's (``swembed.runtime.windows``).
    """

    def __init__(self, vectors: np.ndarray, table: dict, ids: Sequence[int | str] | None = None,
                 texts: Sequence[str] | None = None, scales: np.ndarray | None = None, model: Encoder | None = None,
                 where: Path | str = "<index>", lexical: Lexical | None = None,
                 windows: Windows | None = None) -> None:
        self.vectors, self.scales, self.table = vectors, scales, dict(table)
        self.ids, self.texts, self.where, self.lexical, self.windows = ids, texts, where, lexical, windows
        self.model: Encoder | None = None
        if model is not None:
            self.attach(model)

    @classmethod
    def build(cls, model: Encoder, corpus: Iterable[str], ids: Iterable[int | str] | None = None,
              dtype: str = "float32", keep_texts: bool = True, lexical: bool = True,
              windows: int | None = None) -> SearchIndex:
        """Encode ``corpus`` (passages) with ``model``. ``ids``: one per passage, all integers or all strings
        (default: hits name their row); ``dtype`` int8 stores a quarter of the bytes (scores within about 0.01);
        ``keep_texts``: store the passages' texts (what ``swembed search`` prints); ``lexical``: make the BM25
        postings (``mode="lexical"`` and ``"hybrid"`` need them); ``windows``: also encode each passage's windows
        of that many words (``swembed.runtime.windows.WIDTH`` recommended; more vectors to store, better dense
        ranking of long passages)."""
        width = check_width(windows)
        passages = [corpus] if isinstance(corpus, str) else list(corpus)
        if not passages:
            raise ValueError("an index needs a corpus of at least one passage; this one is empty")
        id_list = None if ids is None else [int(i) if isinstance(i, np.integer) else i for i in ids]
        _ids_kind(id_list)
        if id_list is not None and len(id_list) != len(passages):
            raise ValueError(f"ids: {len(id_list)} ids for {len(passages)} passages; give one id a passage")
        vectors, scales = quantise(model.encode(passages, kind="document"), dtype)
        table = {"digest": model.digest(), "path": None if model.path is None else str(model.path)}
        postings = Lexical.build(model, passages) if lexical else None
        found = None
        if width is not None:
            window_vectors, offsets = encode_windows(model, passages, width, vectors.shape[1])
            found = Windows(width, GAMMA, *quantise(window_vectors, dtype), offsets)
        return cls(vectors, table, id_list, passages if keep_texts else None, scales, model, lexical=postings,
                   windows=found)

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def dtype(self) -> str:
        return str(self.vectors.dtype)

    def attach(self, model: Encoder) -> None:
        """Search with ``model`` from now on: refused unless it is the table the index was built with."""
        if model.digest() != self.table["digest"]:
            built = self.table.get("path") or "a table in memory"
            raise SearchIndexError(f"{self.where}: built with another table ({built}), not {model.path or 'this one'}; "
                                   "build the index again with this table (swembed index)")
        self.model = model

    def scores(self, query_vectors: np.ndarray, query_terms: Sequence[np.ndarray] | None = None,
               mode: str = "dense", alpha: float | None = None,
               term_weights: Sequence[np.ndarray] | None = None) -> Scored:
        """The scores of a batch of queries against every passage, (queries, passages) each: ``mode`` dense, the
        dense scores of the query vectors (``dense``); hybrid, (the hybrid score, the dense scores, BM25) with
        ``query_terms`` and their ``term_weights`` (``Lexical.weighted_query_terms``); lexical, (BM25, None, BM25):
        the dense scores of its hits alone are computed (``hit_cosines``). The one place an index scores (``rank``
        asks it batch by batch; a dense search over passages without windows, or over at most ``SHORTLIST_FROM``
        with them, ranks ``dense_scores`` block by block instead, ``search.rank_blocks``)."""
        if mode == "lexical":
            bm25 = self.postings().scores(query_terms or [], term_weights)
            return bm25, None, bm25
        cosines = dense_scores(query_vectors, self.vectors, self.scales)
        if mode == "dense":
            return self.dense(query_vectors, cosines)
        every = None if self.windows is None else np.arange(len(self))  # a hybrid's z-scores: every window read
        cosines = self.dense(query_vectors, cosines, every)
        bm25 = self.postings().scores(query_terms or [], term_weights)
        return hybrid(cosines, bm25, self.alpha(alpha)), cosines, bm25

    def alpha(self, alpha: float | None = None) -> float:
        """``alpha`` checked; None: the hybrid's default, ``lexical.ALPHA`` (``windows.ALPHA`` with windows)."""
        return check_alpha(alpha) if alpha is not None or self.windows is None else WINDOWS_ALPHA

    def dense(self, query_vectors: np.ndarray, cosines: np.ndarray, passages: np.ndarray | None = None) -> np.ndarray:
        """The dense scores from the queries' ``cosines`` with ``passages``: those cosines, or with windows each plus
        ``gamma`` times the passage's best window's cosine. ``passages`` None: every passage, for a dense ranking;
        over more than ``SHORTLIST_FROM`` of them windows are read for each query's shortlist alone (its
        ``SHORTLIST`` highest cosines; ``swembed.runtime.windows``)."""
        if self.windows is None:
            return cosines
        windows = self.windows

        def cosines_of(queries: np.ndarray, found: np.ndarray | slice) -> np.ndarray:
            return scores_at(queries, windows.vectors, windows.scales, found)

        if passages is None and len(self) > SHORTLIST_FROM:
            return shortlisted(cosines, query_vectors, windows.offsets, shortlists(cosines), cosines_of,
                               windows.gamma)
        rows = np.arange(len(self)) if passages is None else np.asarray(passages, dtype=np.int64)
        return windowed(cosines, query_vectors, windows.offsets, rows, cosines_of, windows.gamma)

    def hit_texts(self, hits: Sequence[Hit]) -> list[str | None]:
        """The passage text of each hit (None for each where the index keeps no texts)."""
        return [self.texts[hit.index] if self.texts is not None else None for hit in hits]

    def hit_cosines(self, query_vectors: np.ndarray, indices: np.ndarray) -> np.ndarray:
        """(queries, k) dense scores (``dense``) of each query vector with the passages of its row of ``indices``:
        one matrix product over their union (a lexical search's hits)."""
        union = np.unique(indices)
        scores = self.dense(query_vectors, scores_at(query_vectors, self.vectors, self.scales, union), union)
        return np.take_along_axis(scores, np.searchsorted(union, indices), axis=1)

    def postings(self) -> Lexical:
        """The lexical postings; refused in one line for an index saved without them."""
        if self.lexical is None:
            raise SearchIndexError(f"{self.where}: holds no lexical postings (saved before they existed, or without "
                                   "them); search it with mode dense, or index the corpus again (swembed index)")
        return self.lexical

    def search(self, queries: Iterable[str] | str, top_k: int = 10, mode: str = "dense",
               alpha: float | None = None) -> list[list[Hit]] | list[Hit]:
        """Each query's ``top_k`` passages, best first (ties: lower row); one ``str`` query gives its list alone.
        ``mode``: ``dense`` (cosine), ``lexical`` (BM25) or ``hybrid`` (``alpha`` times the cosine's z-score plus
        ``1 - alpha`` times BM25's, per query; ``swembed.runtime.lexical``); each hit carries its cosine beside."""
        mode, alpha = check_mode(mode), self.alpha(alpha)
        if self.model is None:
            raise SearchIndexError(f"{self.where}: no table to encode queries with; load it with "
                                   "SearchIndex.load(folder, model)")
        texts = [queries] if isinstance(queries, str) else list(queries)
        vectors = self.model.encode(texts, kind="query")
        if mode == "dense":
            hits = self.search_vectors(vectors, top_k)
        else:
            terms, weights = self.postings().weighted_query_terms(self.model, texts)
            hits = rank(lambda rows: self.scores(vectors[rows], [terms[r] for r in rows], mode, alpha,
                                                 None if weights is None else [weights[r] for r in rows]),
                        np.arange(len(texts)), len(self), top_k, self.ids,
                        lambda rows, indices: self.hit_cosines(vectors[rows], indices))
        return hits[0] if isinstance(queries, str) else hits

    def search_vectors(self, query_vectors: np.ndarray, top_k: int = 10) -> list[list[Hit]]:
        """As ``search``, for query vectors already encoded with the index's table."""
        vectors = np.asarray(query_vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ValueError(f"query vectors must be (queries, {self.dim}), got shape {vectors.shape}")

        if self.windows is not None and len(self) > SHORTLIST_FROM:  # every passage's score, its shortlist windowed
            return rank(lambda rows: self.scores(vectors[rows]), np.arange(len(vectors)), len(self), top_k, self.ids)

        def blocks_of(asked: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:  # a block's windows with it, if any
            for first, cosines in dense_blocks(asked, self.vectors, self.scales):
                yield first, self.dense(asked, cosines, np.arange(first, first + cosines.shape[1]))

        return rank_blocks(vectors, blocks_of, len(self), top_k, self.ids)

    def save(self, folder: str | Path, overwrite: bool = False) -> Path:
        """Write the index folder atomically (an existing one only with ``overwrite`` and when swembed wrote it)."""
        info = {"format": INDEX_FORMAT, "format_version": 1 if self.windows is None else INDEX_VERSION,
                "passages": len(self), "dim": self.dim,
                "dtype": self.dtype, "ids": _ids_kind(self.ids), "texts": self.texts is not None, "table": self.table,
                "lexical": None if self.lexical is None else {"terms": len(self.lexical.terms),
                                                               "postings": len(self.lexical.docs),
                                                               "stemmer": self.lexical.stemmer},
                "windows": None if self.windows is None else {"width": self.windows.width, "gamma": self.windows.gamma,
                                                              "windows": len(self.windows.vectors)}}
        inputs = [self.model.path] if self.model is not None and self.model.path is not None else []
        with atomic_directory(folder, overwrite, "search-index", inputs) as tmp:
            np.save(tmp / VECTORS_FILE, np.ascontiguousarray(self.vectors))
            if self.scales is not None:
                np.save(tmp / SCALES_FILE, self.scales)
            if info["ids"] == "int":
                np.save(tmp / "ids.npy", np.asarray(self.ids, dtype=np.int64))
            elif info["ids"] == "str":
                _save_strings(tmp, "ids", self.ids or [])
            if self.texts is not None:
                _save_strings(tmp, "texts", self.texts)
            if self.lexical is not None:
                _save_lexical(tmp, self.lexical)
            if self.windows is not None:
                _save_windows(tmp, self.windows)
            (tmp / INDEX_FILE).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
        return Path(folder)

    @classmethod
    def load(cls, folder: str | Path, model: Encoder | None = None, mmap: bool = True) -> SearchIndex:
        """Read and check an index folder (see the module's doc); with ``model``, refused unless it is the table
        the index was built with."""
        folder = Path(folder)
        if not folder.is_dir():
            raise SearchIndexError(f"index folder not found: {folder}")
        info = _read_info(folder)
        passages, dim, dtype = info["passages"], info["dim"], info["dtype"]
        vectors = _load_array(folder, VECTORS_FILE, (passages, dim), dtype, mmap)
        scales = _load_array(folder, SCALES_FILE, (passages,), "float32", False) if dtype == "int8" else None
        _check_vectors(folder / VECTORS_FILE, vectors, scales)
        ids: Sequence[int | str] | None = None
        if info["ids"] == "int":
            ids = _load_array(folder, "ids.npy", (passages,), "int64", False).tolist()
        elif info["ids"] == "str":
            ids = _load_strings(folder, "ids", passages, mmap)
        texts = _load_strings(folder, "texts", passages, mmap) if info["texts"] else None
        return cls(vectors, info["table"], ids, texts, scales, model, folder, _load_lexical(folder, info, mmap),
                   _load_windows(folder, info, mmap))
