"""StaticEmbedder: mean of word vectors, L2-normalised. numpy and tokenizers only."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from swembed.runtime.folder import read_model_folder
from swembed.runtime.langid import LanguageIdentifier
from swembed.runtime.tokenizer import TokenIds, TokenizationRules, WordTokenizer

_GATHER_ROWS = 1 << 11  # table rows gathered at once by mean_rows (the gather stays in cache: ~1.5x over 1 << 16)
_FLOAT32_WORDS = 64  # longer texts are summed in float64


class StaticEmbedder:
    """A static word table plus its tokeniser. ``encode`` gives L2-normalised float32 sentence vectors.

    A text with no known word gets the zero vector (never NaN). An int8 table carries one float32
    scale per row (``row_float = row_int8 * scale``). A multilingual table has one tokenizer per
    language over its own rows (``config["languages"]``); ``encode(texts, lang=...)`` picks one, or
    each text's language is detected from its script.
    """

    def __init__(self, table: np.ndarray, tokenizer: WordTokenizer, config: dict | None = None,
                 scales: np.ndarray | None = None, tokenizers: dict[str, WordTokenizer] | None = None,
                 word_contexts: np.ndarray | None = None) -> None:
        if table.ndim != 2:
            raise ValueError(f"table must be 2-D, got shape {table.shape}")
        if (table.dtype == np.int8) != (scales is not None):
            raise ValueError("an int8 table needs per-row scales, and only an int8 table takes them")
        self.table = table
        self._table = np.asarray(table)  # a plain ndarray view: memmap subclass indexing is slower
        self.scales = scales
        self.tokenizer = tokenizer
        self.tokenizers = dict(tokenizers or {})
        self.config = dict(config or {})
        self._labels: list[str] | None = None
        self.word_contexts = word_contexts
        self._language_identifier: LanguageIdentifier | None = None

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    @property
    def labels(self) -> list[str]:
        """The label of every table row, in row order (words, then the teacher pieces of a table that has them)."""
        if self._labels is None:
            rows = {i: w for tok in (self.tokenizers.values() or [self.tokenizer]) for w, i in tok.vocab.items()}
            for token_id, row in self.tokenizer.piece_rows.items():
                rows[row] = self.tokenizer.pieces.id_to_token(token_id)
            self._labels = [rows.get(i, "") for i in range(self.table.shape[0])]
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
    def load(cls, path: str | Path, mmap: bool = True) -> StaticEmbedder:
        """Load a model folder written by ``swembed build`` / ``swembed export`` (checked first: see
        ``swembed.runtime.folder.read_model_folder``)."""
        folder = read_model_folder(Path(path), mmap)
        config, table, words = folder.config, folder.table, folder.words
        subword = folder.subword_tokenizer
        pieces = config.get("pieces")
        piece_rows = {}
        if pieces and subword is not None:
            start, end = pieces["rows"]
            piece_rows = {subword.token_to_id(words[row]): row for row in range(start, end)}
            piece_rows.pop(None, None)
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
                        word_contexts=contexts)
        else:
            tokenizers = {lang: WordTokenizer({words[i]: i for i in range(start, end)}, lang_rules, subword,
                                              piece_rows, grams)
                          for lang, ((start, end), lang_rules) in languages.items()}
            model = cls(table, next(iter(tokenizers.values())), config, folder.scales, tokenizers, contexts)
        model._labels = words
        return model

    def mean_rows(self, batch: TokenIds, normalize: bool = True) -> np.ndarray:
        """Weighted mean of consecutive runs of table rows: ``batch.lengths[i]`` rows of ``batch.ids`` per text.

        Texts are grouped by row count, so each group is one (texts, rows, dim) gather summed over
        rows: ~10x faster than ``np.add.reduceat`` on short texts, and memory stays bounded by
        ``_GATHER_ROWS`` rows per step whatever the text lengths. Texts longer than ``_FLOAT32_WORDS``
        rows accumulate in float64, so a 5000-word text is as exact as a pairwise sum; shorter ones in
        float32 (error below 1e-7 relative, and faster). Weights (pieces of unknown words) multiply only
        the groups that have any.
        """
        flat, lengths, weights = batch.ids, np.asarray(batch.lengths), batch.weights
        order = np.argsort(lengths, kind="stable")
        sorted_out = np.zeros((len(lengths), self.dim), dtype=np.float32)  # rows in ``order``
        sorted_lengths = lengths[order]
        sorted_starts = (np.cumsum(lengths) - lengths)[order]
        bounds = np.concatenate(([0], np.flatnonzero(np.diff(sorted_lengths)) + 1, [len(order)]))
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            n_rows = int(sorted_lengths[lo]) if hi > lo else 0
            if n_rows == 0:
                continue
            accumulate = np.float32 if n_rows <= _FLOAT32_WORDS else np.float64
            step = max(1, _GATHER_ROWS // n_rows)
            for a in range(lo, hi, step):
                b = min(a + step, hi)
                positions = sorted_starts[a:b, None] + np.arange(n_rows)
                ids = flat[positions]
                rows = self._table[ids]
                if self.scales is not None:
                    rows = rows * self.scales[ids][..., None]
                sums = rows.sum(axis=1, dtype=accumulate)
                total = None
                if weights is not None:
                    # Only texts with a weighted row (pieces of an unknown word) pay for the weights: their
                    # sums are corrected by (w - 1) * row, so no weighted copy of the whole gather is made.
                    w = weights[positions]
                    odd = np.flatnonzero((w != 1).any(axis=1))
                    if len(odd):
                        sums[odd] += ((w[odd] - 1)[..., None] * rows[odd]).sum(axis=1, dtype=accumulate)
                        total = w.sum(axis=1, dtype=np.float64)
                divisor = (1.0 / n_rows) if total is None else (1.0 / total)[:, None]
                np.multiply(sums, divisor, out=sorted_out[a:b], casting="unsafe")
        out = np.empty_like(sorted_out)
        out[order] = sorted_out
        if normalize:
            self._normalize(out)
        return out

    def _normalize(self, out: np.ndarray) -> None:
        """L2-normalise rows in place; an ensemble normalises each member's sub-space and weights it by
        sqrt(w / sum w), so dot products are weighted means of the members' cosines."""
        blocks = [(0, self.dim, 1.0)]
        subspaces = self.config.get("ensemble", {}).get("subspaces")
        if subspaces:
            total = sum(s["weight"] for s in subspaces)
            ends = np.cumsum([s["dim"] for s in subspaces])
            blocks = [(end - s["dim"], end, (s["weight"] / total) ** 0.5) for s, end in zip(subspaces, ends)]
        for start, end, scale in blocks:
            part = out[:, start:end]
            norms = np.linalg.norm(part, axis=1, keepdims=True) / scale
            np.divide(part, norms, out=part, where=norms > 0)

    def encode(self, texts: Sequence[str] | str, batch_size: int = 4096, normalize: bool = True,
               lang: str | None = None) -> np.ndarray:
        """Encode texts into an (n, d) float32 array of L2-normalised sentence vectors.

        ``lang`` selects a multilingual table's language (identified per text when omitted: see
        ``language_identifier``); a monolingual table ignores it.
        """
        if isinstance(texts, str):
            texts = [texts]
        if not self.tokenizers:
            return self._encode_with(self.tokenizer, texts, batch_size, normalize)
        if lang is not None:
            if lang not in self.tokenizers:
                raise ValueError(f"this table has languages {self.languages}, not {lang!r}")
            return self._encode_with(self.tokenizers[lang], texts, batch_size, normalize)
        detected = np.array(self.language_identifier.predict(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for code in np.unique(detected):
            rows = np.flatnonzero(detected == code)
            out[rows] = self._encode_with(self.tokenizers[code], [texts[i] for i in rows], batch_size, normalize)
        return out

    def _encode_with(self, tokenizer: WordTokenizer, texts: Sequence[str], batch_size: int,
                     normalize: bool) -> np.ndarray:
        chunks = [self.mean_rows(tokenizer.encode_batch(texts[i : i + batch_size]), normalize)
                  for i in range(0, len(texts), batch_size)]
        return np.concatenate(chunks) if chunks else np.zeros((0, self.dim), dtype=np.float32)


def load(path: str | Path, mmap: bool = True) -> StaticEmbedder:
    """Load a swembed model folder."""
    return StaticEmbedder.load(path, mmap=mmap)
