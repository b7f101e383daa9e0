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
        """Mean of consecutive runs of table rows: ``lengths[i]`` ids of ``flat`` per output row."""
        out = np.zeros((len(lengths), self.dim), dtype=np.float32)
        if len(flat) == 0:
            return out
        rows = np.asarray(self.table[flat], dtype=np.float32)
        if self.scales is not None:
            rows *= self.scales[flat, None]
        nonempty = lengths > 0
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[nonempty]
        out[nonempty] = np.add.reduceat(rows, starts, axis=0) / lengths[nonempty, None]
        if normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            np.divide(out, norms, out=out, where=norms > 0)
        return out

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
