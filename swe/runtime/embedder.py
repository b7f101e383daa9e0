"""StaticEmbedder: mean of word vectors, L2-normalised. numpy and tokenizers only."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from swe.runtime.folder import (
    EMBEDDINGS_FILE,
    SCALES_FILE,
    TOKENIZER_FILE,
    VOCAB_FILE,
    ModelFolderError,
    read_config,
    read_vocab,
)
from swe.runtime.tokenizer import TokenizationRules, WordTokenizer

_GATHER_ROWS = 1 << 16  # table rows gathered at once by mean_rows


class StaticEmbedder:
    """A static word table plus its tokeniser. ``encode`` gives L2-normalised float32 sentence vectors.

    A text with no known word gets the zero vector (never NaN). An int8 table carries one float32
    scale per row (``row_float = row_int8 * scale``).
    """

    def __init__(self, table: np.ndarray, tokenizer: WordTokenizer, config: dict | None = None,
                 scales: np.ndarray | None = None) -> None:
        if table.ndim != 2:
            raise ValueError(f"table must be 2-D, got shape {table.shape}")
        if (table.dtype == np.int8) != (scales is not None):
            raise ValueError("an int8 table needs per-row scales, and only an int8 table takes them")
        self.table = table
        self._table = np.asarray(table)  # a plain ndarray view: memmap subclass indexing is slower
        self.scales = scales
        self.tokenizer = tokenizer
        self.config = dict(config or {})

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    @property
    def words(self) -> list[str]:
        inverse = sorted(self.tokenizer.vocab.items(), key=lambda item: item[1])
        return [word for word, _ in inverse]

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True) -> StaticEmbedder:
        """Load a model folder written by ``swe build`` / ``swe export``."""
        folder = Path(path)
        if not folder.is_dir():
            raise ModelFolderError(f"model folder not found: {folder}")
        config = read_config(folder)
        table = np.load(folder / EMBEDDINGS_FILE, mmap_mode="r" if mmap else None)
        words = read_vocab(folder / VOCAB_FILE)
        if len(words) != table.shape[0]:
            raise ModelFolderError(f"{folder}: {len(words)} words in {VOCAB_FILE} but {table.shape[0]} table rows")
        rules = TokenizationRules.from_dict(config.get("tokenization", {}))
        subword = None
        if rules.oov_backoff == "teacher_prefix" and (folder / TOKENIZER_FILE).is_file():
            from tokenizers import Tokenizer

            subword = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
            subword.no_padding()
            subword.no_truncation()
        vocab = {word: i for i, word in enumerate(words)}
        scales = np.load(folder / SCALES_FILE) if (folder / SCALES_FILE).is_file() else None
        return cls(table, WordTokenizer(vocab, rules, subword), config, scales)

    def encode_ids(self, id_lists: Sequence[Sequence[int]], normalize: bool = True) -> np.ndarray:
        """Mean (then L2-normalised) rows for each list of vocabulary ids."""
        lengths = np.fromiter((len(ids) for ids in id_lists), dtype=np.int64, count=len(id_lists))
        flat = np.fromiter((i for ids in id_lists for i in ids), dtype=np.int64, count=int(lengths.sum()))
        return self.mean_rows(flat, lengths, normalize)

    def mean_rows(self, flat: np.ndarray, lengths: np.ndarray, normalize: bool = True) -> np.ndarray:
        """Mean of consecutive runs of table rows: ``lengths[i]`` ids of ``flat`` per output row.

        Texts are grouped by word count, so each group is one (texts, words, dim) gather summed over
        words: ~10x faster than ``np.add.reduceat`` on short texts, and memory stays bounded by
        ``_GATHER_ROWS`` rows per step whatever the text lengths. Sums accumulate in float64, so a
        5000-word text is as exact as a pairwise sum.
        """
        out = np.zeros((len(lengths), self.dim), dtype=np.float32)
        starts = np.cumsum(lengths) - lengths
        order = np.argsort(lengths, kind="stable")
        for group in np.split(order, np.flatnonzero(np.diff(lengths[order])) + 1):
            n_words = int(lengths[group[0]]) if len(group) else 0
            if n_words == 0:
                continue
            step = max(1, _GATHER_ROWS // n_words)
            for i in range(0, len(group), step):
                texts = group[i : i + step]
                ids = flat[starts[texts, None] + np.arange(n_words)]
                rows = self._table[ids]
                if self.scales is not None:
                    rows = rows * self.scales[ids, None]
                out[texts] = rows.sum(axis=1, dtype=np.float64) / n_words
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

    def encode(self, texts: Sequence[str] | str, batch_size: int = 4096, normalize: bool = True) -> np.ndarray:
        """Encode texts into an (n, d) float32 array of L2-normalised sentence vectors."""
        if isinstance(texts, str):
            texts = [texts]
        chunks = [self.mean_rows(*self.tokenizer.batch_flat_ids(texts[i : i + batch_size]), normalize)
                  for i in range(0, len(texts), batch_size)]
        return np.concatenate(chunks) if chunks else np.zeros((0, self.dim), dtype=np.float32)


def load(path: str | Path, mmap: bool = True) -> StaticEmbedder:
    """Load a swe model folder."""
    return StaticEmbedder.load(path, mmap=mmap)
