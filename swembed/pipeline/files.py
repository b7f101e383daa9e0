"""The file names of every stage artifact, in one place (a later stage reads an earlier one's files by these).

| stage    | files                                                                                      |
|----------|--------------------------------------------------------------------------------------------|
| corpus   | SENTENCES (one normalised sentence per line)                                               |
| vocab    | VOCAB (word, corpus count; most frequent first), FREQUENCIES (every word seen)             |
| extract  | WORD_VECTORS, WORD_CONTEXTS, PIECE_VECTORS, PIECE_CONTEXTS, TARGET_SENTENCES, TARGETS      |
| compose  | TABLE (teacher space, word rows then piece rows), ROWS, PIECE_IDS, WORD_CONTEXTS           |
| pca      | TABLE, PCA (mean, all components, explained variance), PROJECTION (2-D views)              |
| alone    | ALONE                                                                                      |
| coteacher| TARGETS (the co-teacher's vectors of the extract's TARGET_SENTENCES)                       |
| paragraphs| TARGET_SENTENCES (one paragraph a line), TARGETS (the teacher's vectors of them)          |
| queries  | TARGET_SENTENCES (the query of each paragraph, same order), TARGETS                        |
| distill  | TABLE, HISTORY                                                                             |
| grams    | GRAMS                                                                                      |
"""
from __future__ import annotations

from pathlib import Path

SENTENCES = "sentences.txt"
VOCAB = "vocab.tsv"
FREQUENCIES = "frequencies.tsv"
WORD_VECTORS = "word_vectors.npy"  # (V, H) mean contextual vector of each vocabulary word
WORD_CONTEXTS = "word_contexts.npy"  # (V,) sentences that word's vector averages (0: encoded alone)
PIECE_VECTORS = "piece_vectors.npy"  # (teacher vocab, H) mean vector of each teacher token over its occurrences
PIECE_CONTEXTS = "piece_contexts.npy"  # (teacher vocab,) occurrences averaged (0: never seen)
TARGET_SENTENCES = "target_sentences.txt"  # the sentences the teacher encoded, in the order of TARGETS
TARGETS = "targets.npy"  # (N, H') the teacher's pooled, L2-normalised sentence vectors
TABLE = "table.npy"
ROWS = "rows.txt"
PIECE_IDS = "piece_ids.npy"  # teacher token id of each piece row
PCA = "pca.npz"
PROJECTION = "projection.npz"
HISTORY = "history.json"
ALONE = "alone.npy"  # (word rows, H') the teacher's pooled vector of each word row's word encoded on its own
GRAMS = "grams.npy"  # (buckets, d) the gram rows, fitted to the finished table's word rows


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 artifact written one item per line."""
    with open(path, encoding="utf-8") as handle:
        return handle.read().split("\n")[:-1]


def write_lines(path: Path, lines) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in lines)
