"""StaticEmbedder: mean of word vectors, L2-normalised. numpy and tokenizers only."""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from swembed.runtime.folder import (
    TOKENIZER_FILE,
    bad_row_error,
    first_bad_row,
    read_model_folder,
    write_model_folder,
)
from swembed.runtime.hub import local_or_hub, push_table
from swembed.runtime.index import SearchIndex
from swembed.runtime.langid import LanguageIdentifier
from swembed.runtime.lexical import check_mode
from swembed.runtime.search import Hit, rank_vectors
from swembed.runtime.tokenizer import TokenIds, TokenizationRules, WordTokenizer
from swembed.runtime.windows import check_width

_GATHER_ROWS = 1 << 11  # table rows gathered at once by mean_rows (the gather stays in cache: ~1.5x over 1 << 16)
_FLOAT32_WORDS = 64  # longer texts are summed in float64
_COLUMN_TEXTS = 1 << 10  # texts summed a column at a time at once by mean_rows (a (texts, dim) gather per row)
_STEP_CHARACTERS = 1 << 22  # characters encoded at once by encode (and at most batch_size texts): ~30 MB of words
_COLUMN_MIN_TEXTS = 16  # fewer texts of one length are gathered whole (a column's numpy calls would cost more)
_DIGEST_ROWS = 1 << 16  # table rows hashed at once by digest
_FLOAT32_TINY = float(np.finfo(np.float32).tiny)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
ENCODE_KINDS = ("query", "document")  # encode's kinds besides None (search: queries and passages)


class StaticEmbedder:
    """A static word table plus its tokeniser. ``encode`` gives L2-normalised float32 sentence vectors.

    A text with no known word gets the zero vector (never NaN). An int8 table carries one float32
    scale per row (``row_float = row_int8 * scale``). A multilingual table has one tokenizer per
    language over its own rows (``config["languages"]``); ``encode(texts, lang=...)`` picks one, or
    each text's language is detected from its script.
    """

    def __init__(self, table: np.ndarray, tokenizer: WordTokenizer, config: dict | None = None,
                 scales: np.ndarray | None = None, tokenizers: dict[str, WordTokenizer] | None = None,
                 word_contexts: np.ndarray | None = None, codes: np.ndarray | None = None) -> None:
        if table.ndim != 2:
            raise ValueError(f"table must be 2-D, got shape {table.shape}")
        if (table.dtype == np.int8 or codes is not None) != (scales is not None):
            raise ValueError("an int8 or codebook table needs per-row scales, and only such a table takes them")
        self._given_table = table
        self._table = np.asarray(table)  # a plain ndarray view: memmap subclass indexing is slower
        self.scales = scales
        self.codes = None if codes is None else np.asarray(codes, dtype=np.int64)
        self.tokenizer = tokenizer
        self.tokenizers = dict(tokenizers or {})
        self.config = dict(config or {})
        self._labels: list[str] | None = None
        self.word_contexts = word_contexts
        self._language_identifier: LanguageIdentifier | None = None
        self.arrays: dict[str, np.ndarray] = {}  # the model folder's other .npy files (pca_mean, word_contexts, ...)
        self.kind_weights: dict[str, np.ndarray] = {}  # per-row weights of "query" / "document" texts (encode's kind)
        self.tokenizer_json: str | None = None  # the text of the folder's tokenizer.json, as read
        self.path: Path | None = None  # the model folder it was loaded from
        self._digest: tuple[np.ndarray, str] | None = None  # (the table it was computed for, digest)

    @property
    def table(self) -> np.ndarray:
        """The rows (words, pieces, grams; a codebook table's shared rows), as loaded (a read-only memmap unless
        ``load(..., mmap=False)``). Assigning an array of the same shape and kind (int8 or float) changes what
        ``encode`` returns, e.g. ``model.table = model.table @ rotation``."""
        return self._given_table

    @table.setter
    def table(self, table: np.ndarray) -> None:
        old = self._given_table
        if table.shape != old.shape or (table.dtype == np.int8) != (old.dtype == np.int8):
            raise ValueError(f"a new table must keep the old one's shape {old.shape} and kind (int8 or float) "
                             f"(int8 rows keep their scales), got {table.shape} {table.dtype}")
        self._given_table, self._table = table, np.asarray(table)

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    @property
    def rows(self) -> int:
        """Table rows (words, pieces, grams): a codebook table's coded rows, not its shared rows."""
        return len(self.codes) if self.codes is not None else int(self.table.shape[0])

    def float_rows(self) -> np.ndarray:
        """Every row as float32, de-quantised (int8/int4 scales) and de-shared (a codebook's codes)."""
        table = np.asarray(self.table, dtype=np.float32)
        if self.codes is not None:
            table = table[self.codes]
        return table * self.scales[:, None] if self.scales is not None else table

    @property
    def labels(self) -> list[str]:
        """The label of every table row, in row order (words, then the teacher pieces of a table that has them)."""
        if self._labels is None:
            rows = {i: w for tok in (self.tokenizers.values() or [self.tokenizer]) for w, i in tok.vocab.items()}
            teacher_tokenizer = self.tokenizer.teacher_tokenizer
            for token_id, row in self.tokenizer.piece_rows.items():
                assert teacher_tokenizer is not None  # piece rows come with the teacher's tokenizer
                rows[row] = teacher_tokenizer.id_to_token(token_id) or ""
            self._labels = [rows.get(i, "") for i in range(self.rows)]
        return self._labels

    @property
    def words(self) -> list[str]:
        """The word of every word row, in row order (piece rows excluded)."""
        pieces = self.config.get("pieces")
        return self.labels[: pieces["rows"][0]] if pieces else self.labels

    @property
    def languages(self) -> list[str]:
        return list(self.tokenizers)

    @property
    def language_identifier(self) -> LanguageIdentifier:
        """Picks each text's language when ``encode`` is not told (``swembed.runtime.langid``): word counts from
        the build's corpus (``word_contexts.npy``), else one count per vocabulary word."""
        if self._language_identifier is None:
            counts: dict[str, dict[str, float]] = {}
            for lang, tokenizer in self.tokenizers.items():
                per_word = counts.setdefault(lang, {})
                for word, row in tokenizer.vocab.items():
                    weight = float(self.word_contexts[row]) if self.word_contexts is not None else 1.0
                    per_word[word.lower()] = per_word.get(word.lower(), 0.0) + weight
            self._language_identifier = LanguageIdentifier(self.languages, counts)
        return self._language_identifier

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True, revision: str | None = None) -> StaticEmbedder:
        """Load a model folder written by ``swembed build`` / ``swembed export`` (checked first: see
        ``swembed.runtime.folder.read_model_folder``), or a Hub repo id (``org/name``, at ``revision``: see
        ``swembed.runtime.hub.local_or_hub``; an existing local path always wins)."""
        path = local_or_hub(path, revision)
        folder = read_model_folder(Path(path), mmap)
        config, table, words = folder.config, folder.table, folder.words
        subword = folder.teacher_tokenizer
        pieces = config.get("pieces")
        piece_rows: dict[int, int] = {}
        if pieces and subword is not None:
            start, end = pieces["rows"]
            ids = ((subword.token_to_id(words[row]), row) for row in range(start, end))
            piece_rows = {token_id: row for token_id, row in ids if token_id is not None}
        languages = {lang: (spec["rows"], TokenizationRules.from_dict(spec.get("tokenization", {})))
                     for lang, spec in (config.get("languages") or {}).items()}
        rules = TokenizationRules.from_dict(config.get("tokenization", {}))
        grams = (config.get("grams") or {}).get("rows")
        end = pieces["rows"][0] if pieces else len(words)
        vocab = {words[i]: i for i in range(end)}
        contexts = folder.arrays.get("word_contexts")
        contexts = np.asarray(contexts) if contexts is not None else None
        if not languages:
            model = cls(table, WordTokenizer(vocab, rules, subword, piece_rows, grams), config, folder.scales,
                        word_contexts=contexts, codes=folder.codes)
        else:
            tokenizers = {lang: WordTokenizer({words[i]: i for i in range(start, end)}, lang_rules, subword,
                                              piece_rows, grams)
                          for lang, ((start, end), lang_rules) in languages.items()}
            model = cls(table, next(iter(tokenizers.values())), config, folder.scales, tokenizers, contexts,
                        folder.codes)
        model._labels = words
        model.arrays = dict(folder.arrays)
        model.kind_weights = dict(folder.kind_weights)
        if subword is not None:
            model.tokenizer_json = (Path(path) / TOKENIZER_FILE).read_text(encoding="utf-8")
        model.path = Path(path)
        return model

    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write the model as a model folder at ``path`` (atomically; an existing ``path`` only with ``overwrite``).
        A loaded model is written back byte for byte: ``load(p).save(q)`` gives ``q`` the files of ``p``."""
        tokenizer_json = self.tokenizer_json
        if tokenizer_json is None and self.tokenizer.teacher_tokenizer is not None:
            tokenizer_json = self.tokenizer.teacher_tokenizer.to_str()
        arrays = dict(self.arrays)
        if self.word_contexts is not None:
            arrays["word_contexts"] = self.word_contexts
        if self.scales is not None:
            arrays["scales"] = self.scales
        return write_model_folder(Path(path), self.table, self.labels, self.config, tokenizer_json, arrays,
                                  overwrite=overwrite)

    def push_to_hub(self, repo_id: str, *, private: bool = False, revision: str | None = None,
                    commit_message: str | None = None, token: str | None = None,
                    eval_files: Sequence[str | Path] = ()) -> str:
        """Upload the model to the Hugging Face Hub as ``swembed push`` does (``swembed.runtime.hub.push_table``):
        its model folder's files, as ``save`` writes them, plus a README.md card (with the scores of
        ``eval_files``, ``swembed eval --json`` results). Returns the commit's URL."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="swembed-push-") as tmp:
            folder = self.save(Path(tmp) / (self.path.name if self.path else "table"))
            return push_table(folder, repo_id, private=private, revision=revision, commit_message=commit_message,
                              token=token, eval_files=eval_files)

    def digest(self) -> str:
        """A digest of everything encoding reads: config.json's settings, the rows (with their scales and codes),
        the labels and tokenizer.json. A search index records it, and searches only with a table that has it."""
        if self._digest is not None and self._digest[0] is self._given_table:
            return self._digest[1]
        digest = hashlib.blake2b(digest_size=16)
        tokenizer = self.tokenizer_json or (self.tokenizer.teacher_tokenizer.to_str()
                                            if self.tokenizer.teacher_tokenizer is not None else "")
        for text in (json.dumps(self.config, sort_keys=True, default=str), "\n".join(self.labels), tokenizer):
            digest.update(text.encode("utf-8", errors="surrogatepass") + b"\0")
        kinds = [self.kind_weights[kind] for kind in sorted(self.kind_weights)]  # none: the digest of before
        for array in (self.table, self.scales, self.codes, *kinds):
            if array is not None:
                digest.update(f"{array.dtype.str}{array.shape}".encode())
                for start in range(0, len(array), _DIGEST_ROWS):
                    digest.update(np.ascontiguousarray(array[start : start + _DIGEST_ROWS]).data)
        self._digest = (self._given_table, digest.hexdigest())
        return self._digest[1]

    def similarity(self, a: Iterable[str] | str, b: Iterable[str] | str, kind_a: str | None = None,
                   kind_b: str | None = None) -> np.ndarray | float:
        """Cosine similarities of texts ``a`` with texts ``b``: (len(a), len(b)) float32; one ``str`` on a side
        drops that axis ((len(b),) or (len(a),)), two give a float. ``kind_a``/``kind_b``: each side's ``encode``
        kind (``similarity(queries, passages, "query", "document")`` scores as ``search`` does)."""
        scores = self.encode(a, kind=kind_a) @ self.encode(b, kind=kind_b).T
        if isinstance(a, str) and isinstance(b, str):
            return float(scores[0, 0])
        return scores[0] if isinstance(a, str) else scores[:, 0] if isinstance(b, str) else scores

    def search(self, queries: Iterable[str] | str, corpus: Iterable[str], top_k: int = 10, mode: str = "dense",
               alpha: float | None = None, windows: int | None = None) -> list[list[Hit]] | list[Hit]:
        """Each query's ``top_k`` passages of ``corpus`` by cosine, best first, as ``Hit(index, score, id, dense,
        lexical)`` (id = index); ties go to the lower index; a ``top_k`` above the corpus gives them all; one ``str``
        query gives its list alone. ``mode`` ``lexical`` ranks by BM25, ``hybrid`` by both (``SearchIndex.search``);
        ``windows`` (words): a long passage's dense score adds its best window's cosine (``swembed.runtime.windows``).
        To search one corpus many times, ``index`` it."""
        if check_mode(mode) != "dense" or check_width(windows) is not None:
            passages = _text_list(corpus)
            if not passages:
                raise ValueError("search needs a corpus of at least one passage; this one is empty")
            return SearchIndex.build(self, passages, keep_texts=False, lexical=mode != "dense",
                                     windows=windows).search(queries, top_k, mode, alpha)
        vectors = self.encode(corpus, kind="document")
        hits = rank_vectors(self.encode(queries, kind="query"), vectors, None, top_k)
        return hits[0] if isinstance(queries, str) else hits

    def index(self, corpus: Iterable[str], ids: Iterable[int | str] | None = None, dtype: str = "float32",
              keep_texts: bool = True, lexical: bool = True, windows: int | None = None) -> SearchIndex:
        """A ``SearchIndex`` of ``corpus`` (see ``SearchIndex.build``): ``index.search(queries, top_k, mode)``,
        ``index.save(folder)``; ``lexical=False`` leaves the BM25 postings out (dense search only); ``windows``:
        each long passage's windows of that many words beside it (``swembed.runtime.windows``)."""
        return SearchIndex.build(self, corpus, ids, dtype, keep_texts, lexical, windows)

    def mean_rows(self, batch: TokenIds, normalize: bool = True, out: np.ndarray | None = None) -> np.ndarray:
        """Weighted mean of consecutive runs of table rows: ``batch.lengths[i]`` rows of ``batch.ids`` per text;
        written into ``out`` (float32, (texts, dim)) when given, else into a new array.

        Texts are grouped by row count (and by whether any of their rows has a weight other than 1: the pieces of
        unknown words). A group of many short texts with no weights is summed a column at a time (``_column_means``:
        the j-th row of every text added at once, a (texts, dim) gather per row, that stays in cache); other groups
        are one (texts, rows, dim) gather summed over rows (``_gathered_means``). Both add a text's rows in order in
        float32, so a text's vector does not depend on which path, or which other texts, it was encoded with; both
        are far faster than ``np.add.reduceat`` on short texts. Memory stays bounded by ``_GATHER_ROWS`` rows per
        step whatever the text lengths. Texts longer than ``_FLOAT32_WORDS`` rows accumulate in float64, so a
        5000-word text is as exact as a pairwise sum; shorter ones in float32 (error below 1e-7 relative).
        """
        lengths = np.asarray(batch.lengths)
        starts = np.cumsum(lengths) - lengths
        weighted = _weighted_texts(batch.weights, lengths)
        key = lengths if weighted is None else 2 * lengths + weighted
        order = np.argsort(key, kind="stable")
        bounds = np.concatenate(([0], np.flatnonzero(np.diff(key[order])) + 1, [len(order)]))
        if out is None:
            out = np.zeros((len(lengths), self.dim), dtype=np.float32)
        else:
            out[lengths == 0] = 0  # every other text's row is written below
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            texts = order[lo:hi]
            n_rows = int(lengths[texts[0]]) if hi > lo else 0
            if n_rows == 0:
                continue
            weights = batch.weights if weighted is not None and weighted[texts[0]] else None
            by_columns = n_rows <= _FLOAT32_WORDS and hi - lo >= _COLUMN_MIN_TEXTS
            means = self._column_means if by_columns else self._gathered_means
            for chunk, sums, divisor in means(batch.ids, weights, starts[texts], n_rows):
                mean = sums if sums.dtype == np.float32 else np.empty(sums.shape, dtype=np.float32)
                np.multiply(sums, divisor, out=mean, casting="unsafe")
                if normalize:
                    self._normalize(mean)  # while the chunk is in cache
                out[texts[chunk]] = mean
        return out

    def _column_means(self, flat: np.ndarray, weights: np.ndarray | None, starts: np.ndarray,
                      n_rows: int) -> Iterator[tuple[slice, np.ndarray, np.ndarray | float]]:
        """(a slice of ``starts``, the weighted sums of its texts' rows, the divisors of their means) for the texts of
        ``n_rows`` (at most ``_FLOAT32_WORDS``) rows of ``flat`` from each of ``starts`` (``weights``: theirs, or
        None for all 1), summed a column at a time in float32: the j-th rows of all the texts gathered, weighted and
        added together, in row order (the same sums and divisors, bit for bit, as ``_gathered_means``' over a
        (texts, rows, dim) gather)."""
        offsets = np.arange(n_rows)[:, None]
        for a in range(0, len(starts), _COLUMN_TEXTS):
            positions = starts[a : a + _COLUMN_TEXTS] + offsets  # (n_rows, texts): row j of each text
            columns = flat[positions]
            divisor: np.ndarray | float = 1.0 / n_rows
            if weights is None:
                sums = self._rows_at(columns[0]).astype(np.float32, copy=False)  # a gather: a new array
                for column in columns[1:]:
                    sums += self._rows_at(column)
            else:
                column_weights = weights[positions][..., None]
                sums = column_weights[0] * self._rows_at(columns[0])
                for j in range(1, n_rows):
                    sums += column_weights[j] * self._rows_at(columns[j])
                divisor = (1.0 / weights[positions.T].sum(axis=1, dtype=np.float64))[:, None]
            yield slice(a, a + _COLUMN_TEXTS), sums, divisor

    def _gathered_means(self, flat: np.ndarray, weights: np.ndarray | None, starts: np.ndarray,
                        n_rows: int) -> Iterator[tuple[slice, np.ndarray, np.ndarray | float]]:
        """(a slice of ``starts``, the weighted sums of its texts' rows, the divisors of their means) for the texts of
        ``n_rows`` rows of ``flat`` from each of ``starts`` (``weights``: theirs, or None for all 1), gathered
        ``_GATHER_ROWS`` rows at a time and summed over the rows."""
        accumulate = np.float32 if n_rows <= _FLOAT32_WORDS else np.float64
        step = max(1, _GATHER_ROWS // n_rows)
        for a in range(0, len(starts), step):
            chunk = starts[a : a + step]
            sums: np.ndarray | None = None
            total: np.ndarray | float = 0.0
            weighted = False
            for c in range(0, n_rows, _GATHER_ROWS):  # one gather, unless a text has more rows than that
                positions = chunk[:, None] + np.arange(c, min(c + _GATHER_ROWS, n_rows))
                part, part_total, part_weighted = self._gather_sum(flat, weights, positions, accumulate)
                sums = part if sums is None else np.add(sums, part, out=sums)
                total, weighted = total + part_total, weighted or part_weighted
            divisor = (1.0 / np.asarray(total))[:, None] if weighted else (1.0 / n_rows)
            assert sums is not None  # n_rows > 0: one gather at least
            yield slice(a, a + step), sums, divisor

    def _rows_at(self, ids: np.ndarray) -> np.ndarray:
        """The table rows of row ids ``ids`` (any shape), as numbers: a codebook's shared rows, int8 rows scaled."""
        rows = self._table.take(ids if self.codes is None else self.codes[ids], axis=0)  # faster than [ids]
        return rows if self.scales is None else rows * self.scales[ids][..., None]

    def _gather_sum(self, flat: np.ndarray, weights: np.ndarray | None, positions: np.ndarray,
                    accumulate: type) -> tuple[np.ndarray, np.ndarray | float, bool]:
        """(weighted sums of the rows at ``positions``, one per text, the texts' sums of weights, whether any
        weight is not 1) for one gather."""
        ids = flat[positions]
        rows = self._rows_at(ids)
        sums = rows.sum(axis=1, dtype=accumulate)
        if weights is None:
            return sums, 0.0, False
        # Only texts with a weighted row (the back-off rows of an unknown word) pay for the weights: their sums are
        # made again from weight * row (a correction of the plain sum by (w - 1) * row cancelled: a long unknown
        # word's many gram rows of weight w << 1 lost 4 of float32's 7 digits).
        w = weights[positions]
        odd = np.flatnonzero((w != 1).any(axis=1))
        if len(odd):
            sums[odd] = (w[odd][..., None] * rows[odd]).sum(axis=1, dtype=accumulate)
        return sums, w.sum(axis=1, dtype=np.float64), bool(len(odd))

    def _normalize(self, out: np.ndarray) -> None:
        """L2-normalise rows in place; an ensemble normalises each member's sub-space and weights it by
        sqrt(w / sum w), so dot products are weighted means of the members' cosines."""
        blocks = [(0, self.dim, 1.0)]
        subspaces = (self.config.get("ensemble") or {}).get("subspaces")
        if subspaces:
            top = max(s["weight"] for s in subspaces)  # weights over the largest: their sum cannot overflow
            total = sum(s["weight"] / top for s in subspaces)
            ends = np.cumsum([s["dim"] for s in subspaces])
            blocks = [(end - s["dim"], end, (s["weight"] / top / total) ** 0.5) for s, end in zip(subspaces, ends)]
        for start, end, scale in blocks:
            part = out[:, start:end]
            if scale < _FLOAT32_TINY:  # a weight too small beside the largest to count in float32
                part[:] = 0
                continue
            with np.errstate(over="ignore"):  # a norm over a tiny scale may overflow: that part becomes 0
                norms = np.linalg.norm(part, axis=1, keepdims=True) / scale
            norms[~(norms > 0)] = 1  # a zero vector stays as it is (a divide with where= is slower)
            np.divide(part, norms, out=part)

    def encode(self, texts: Iterable[str] | str, batch_size: int = 1 << 16, normalize: bool = True,
               lang: str | None = None, kind: str | None = None) -> np.ndarray:
        """Encode texts (one ``str``, or any iterable of them) into an (n, d) float32 array of L2-normalised
        sentence vectors; never NaN (a table value that would make one is an error naming its row).

        ``lang`` selects a multilingual table's language (identified per text when omitted: see
        ``language_identifier``); a monolingual table ignores it. ``batch_size``: the most texts encoded at once (and
        about 4M characters at most): it bounds memory and never changes a vector.

        ``kind`` ``"query"`` or ``"document"``: the texts are search queries or passages; a table with that kind's
        row weights (``kind_weights``, docs/format.md) multiplies each row's weight in the mean by its own. None
        (the default), or a table without them: every text encodes the same way.
        """
        texts = _text_list(texts)
        row_weights = self._kind_row_weights(kind)
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer of at least 1, got {batch_size!r}")
        try:
            return self._encode_texts(texts, batch_size, normalize, lang, row_weights)
        except UnicodeEncodeError:  # a lone surrogate (no UTF-8 for it): read as a non-word character, U+FFFD
            return self._encode_texts([_LONE_SURROGATE.sub("\ufffd", t) for t in texts], batch_size, normalize, lang,
                                      row_weights)

    def _encode_texts(self, texts: Sequence[str], batch_size: int, normalize: bool, lang: str | None,
                      row_weights: np.ndarray | None = None) -> np.ndarray:
        if not self.tokenizers:
            return self._encode_with(self.tokenizer, texts, batch_size, normalize, row_weights)
        if lang is not None:
            if lang not in self.tokenizers:
                raise ValueError(f"this table has languages {self.languages}, not {lang!r}")
            return self._encode_with(self.tokenizers[lang], texts, batch_size, normalize, row_weights)
        detected = np.array(self.language_identifier.predict(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for code in np.unique(detected):
            rows = np.flatnonzero(detected == code)
            out[rows] = self._encode_with(self.tokenizers[code], [texts[i] for i in rows.tolist()], batch_size,
                                          normalize, row_weights)
        return out

    def _encode_with(self, tokenizer: WordTokenizer, texts: Sequence[str], batch_size: int,
                     normalize: bool, row_weights: np.ndarray | None = None) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start, end in _steps(texts, batch_size):
            batch = kind_weighted(tokenizer.encode_batch(texts[start:end]), row_weights)
            self.mean_rows(batch, normalize, out=out[start:end])
        if not np.isfinite(out).all():
            raise self._non_finite(tokenizer, texts, out)
        return out

    def _kind_row_weights(self, kind: str | None) -> np.ndarray | None:
        """The row weights ``encode`` applies for ``kind`` (None: none, as for a table without them)."""
        if kind is not None and kind not in ENCODE_KINDS:
            raise ValueError(f"kind must be one of {', '.join(ENCODE_KINDS)} or None, got {kind!r}")
        return self.kind_weights.get(kind) if kind is not None else None

    def _non_finite(self, tokenizer: WordTokenizer, texts: Sequence[str], out: np.ndarray) -> ValueError:
        """The error for a vector that is not finite: the first table row the text reads that holds NaN or an
        infinity (a table damaged after its load-time check), else an overflow of the sum."""
        text = int(np.flatnonzero(~np.isfinite(out).all(axis=1))[0])
        rows = np.unique(tokenizer.encode_batch([texts[text]]).ids)
        table_rows = self._table[rows if self.codes is None else self.codes[rows]]  # a codebook: the words' shared rows
        bad = first_bad_row(table_rows, None if self.scales is None else self.scales[rows])
        if bad is not None:
            return bad_row_error(self.path or Path("<table>"), bad._replace(row=int(rows[bad.row])), self.labels)
        return ValueError(f"text {text}: its vector overflows float32 (the table's values are too large to sum)")


def _steps(texts: Sequence[str], batch_size: int) -> Iterator[tuple[int, int]]:
    """[start, end) of each step of ``encode``: at most ``batch_size`` texts, and no more characters than
    ``_STEP_CHARACTERS`` unless one text has more (memory bounded whatever the texts' lengths; a text's vector does not
    depend on its step)."""
    ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
    start = 0
    while start < len(texts):
        budget = (int(ends[start - 1]) if start else 0) + _STEP_CHARACTERS
        end = min(start + batch_size, max(start + 1, int(np.searchsorted(ends, budget, side="right"))))
        yield start, end
        start = end


def _weighted_texts(weights: np.ndarray | None, lengths: np.ndarray) -> np.ndarray | None:
    """Whether each text has a row of weight other than 1 (None when no row has: ``weights`` is None)."""
    if weights is None:
        return None
    text_of_row = np.repeat(np.arange(len(lengths)), lengths)
    return np.bincount(text_of_row[weights != 1], minlength=len(lengths)) > 0


def kind_weighted(batch: TokenIds, row_weights: np.ndarray | None) -> TokenIds:
    """``batch`` with each row's weight in the mean multiplied by its row's weight in ``row_weights`` (a kind's
    weights: ``StaticEmbedder.kind_weights``), rounded to float32; ``batch`` itself when there are none."""
    if row_weights is None or not len(batch.ids):
        return batch
    weights = row_weights[batch.ids].astype(np.float64)
    if batch.weights is not None:
        weights *= batch.weights
    return TokenIds(batch.ids, batch.lengths, weights.astype(np.float32))


def _text_list(texts: object) -> list[str] | Sequence[str]:
    """``texts`` as a sequence of ``str``: one string, a sequence, or any iterable (a generator is read once);
    a clear TypeError for anything else, naming the first text that is not a string."""
    if isinstance(texts, np.ndarray) and texts.ndim == 0:  # np.array("x"): one text, as "x" is
        texts = texts.item()
    if isinstance(texts, str):
        return [texts]
    if texts is None or isinstance(texts, (bytes, bytearray, memoryview)):
        hint = ": decode them first, e.g. data.decode('utf-8')" if texts is not None else ""
        raise TypeError(f"encode takes a str or an iterable of str, got {type(texts).__name__}{hint}")
    refusal = _not_texts(texts)
    if refusal:
        raise TypeError(f"encode takes a str or an iterable of str, not {refusal}")
    if not isinstance(texts, Sequence):
        if not isinstance(texts, Iterable):
            raise TypeError(f"encode takes a str or an iterable of str, got {type(texts).__name__}")
        texts = list(texts)
    if set(map(type, texts)) - {str}:
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"encode takes texts of type str; text {i} is {type(t).__name__}: {t!r:.60}")
    return texts


def _not_texts(texts: object) -> str | None:
    """Why an iterable is not a list of texts although iterating it gives strings (a DataFrame its column names, a
    dict its keys, a set an arbitrary order, a 2-D array rows), or None."""
    kind = type(texts).__name__
    if any(cls.__name__ == "DataFrame" for cls in type(texts).__mro__):  # pandas, polars, ...
        return f"a {kind} (it would encode its column names): pass one column, e.g. df['text']"
    if isinstance(texts, Mapping):
        return f"a {kind} (it would encode its keys): pass list(d.values()) for its values, or list(d) for its keys"
    if isinstance(texts, (set, frozenset)):
        return f"a {kind} (its order is arbitrary: the vectors would not line up with it): pass a list, e.g. sorted(s)"
    if isinstance(texts, np.ndarray) and texts.ndim > 1:
        return f"a {texts.ndim}-D array of shape {texts.shape}: pass a 1-D array of texts, e.g. a.ravel()"
    return None


def load(path: str | Path, mmap: bool = True, revision: str | None = None) -> StaticEmbedder:
    """Load a swembed model folder, or a table from the Hugging Face Hub by repo id (``org/name``, at
    ``revision``); an existing local path always wins."""
    return StaticEmbedder.load(path, mmap=mmap, revision=revision)
