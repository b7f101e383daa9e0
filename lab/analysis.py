"""Paper section 5 analyses on a build: word-vector norms by part of speech and against frequency,
and the words at both ends of chosen principal components.

Parts of speech come from the Brown corpus tags (NLTK's ``brown.zip``: ``word/tag`` tokens); each
vocabulary word gets its most frequent coarse tag.
"""
from __future__ import annotations

import re
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

# Brown tag prefixes -> coarse classes (order matters: longest prefixes first).
COARSE_TAGS = [
    ("nn", "noun"), ("np", "proper noun"), ("vb", "verb"), ("be", "verb"), ("hv", "verb"), ("do", "verb"),
    ("md", "modal"), ("jj", "adjective"), ("rb", "adverb"), ("in", "preposition"), ("at", "determiner"),
    ("dt", "determiner"), ("ap", "determiner"), ("abn", "determiner"), ("pp", "pronoun"), ("wp", "pronoun"),
    ("cc", "conjunction"), ("cs", "conjunction"), ("cd", "number"), ("od", "number"), ("uh", "interjection"),
]
_TOKEN = re.compile(r"(\S+)/([a-z$*+\-]+)")


def coarse(tag: str) -> str | None:
    tag = tag.split("-")[0].rstrip("$*")
    for prefix, label in COARSE_TAGS:
        if tag.startswith(prefix):
            return label
    return None


def brown_pos(path: str | Path) -> dict[str, str]:
    """Most frequent coarse POS of each lower-cased word in the tagged Brown corpus."""
    counts: dict[str, Counter] = defaultdict(Counter)
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            name = Path(member).name
            if not re.fullmatch(r"c[a-r]\d\d", name):
                continue
            for word, tag in _TOKEN.findall(archive.read(member).decode("utf-8", errors="replace")):
                label = coarse(tag)
                if label:
                    counts[word.lower()][label] += 1
    return {word: c.most_common(1)[0][0] for word, c in counts.items()}


def norms_by_pos(table: np.ndarray, words: list[str], pos: dict[str, str], min_words: int = 20) -> dict[str, float]:
    """Mean L2 norm of the word vectors of each POS class, relative to the mean norm of all tagged words."""
    norms = np.linalg.norm(np.asarray(table, dtype=np.float32), axis=1)
    groups: dict[str, list[float]] = defaultdict(list)
    for word, norm in zip(words, norms):
        if word in pos:
            groups[pos[word]].append(norm)
    overall = np.mean([n for g in groups.values() for n in g])
    return {label: float(np.mean(v) / overall) for label, v in sorted(groups.items()) if len(v) >= min_words}


def norm_frequency_spearman(table: np.ndarray, counts: np.ndarray) -> float:
    """Spearman between word-vector norm and frequency rank (rank 1 = most frequent), over corpus words."""
    from scipy.stats import spearmanr

    seen = counts > 0
    norms = np.linalg.norm(np.asarray(table, dtype=np.float32), axis=1)[seen]
    rank = np.argsort(np.argsort(-counts[seen], kind="stable"), kind="stable") + 1
    return float(spearmanr(norms, rank).statistic)


def pc_extremes(table: np.ndarray, words: list[str], mean: np.ndarray, component: np.ndarray,
                counts: np.ndarray, k: int = 10, min_count: int = 50) -> tuple[list[str], list[str]]:
    """The ``k`` words with the largest and smallest values on one principal component (frequent words only)."""
    values = (np.asarray(table, dtype=np.float64) - mean) @ component
    eligible = np.nonzero(counts >= min_count)[0]
    order = eligible[np.argsort(values[eligible])]
    return [words[i] for i in order[::-1][:k]], [words[i] for i in order[:k]]
