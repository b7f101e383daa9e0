"""Which language of a multilingual table a text is in, when the caller does not say.

Script first: kana -> ja, Han -> zh (else ja). Texts in the other (space-delimited) languages are scored by
a multinomial naive Bayes over their lower-cased words, with each language's word probabilities taken from
the build's own corpus (the sentences each vocabulary word was seen in, ``word_contexts.npy``), add-one
smoothed; the best-scoring language wins, the first language on a tie (no known word). It costs one
regex pass and a dictionary lookup per word, like encoding itself.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import repeat

import numpy as np

from swembed.runtime.tokenizer import WORD_PATTERN

SPACELESS = ("zh", "ja")
_KANA = re.compile(r"[\u3040-\u30ff]")
_HAN = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf]")


def script_language(text: str, languages: Sequence[str]) -> str | None:
    """ja for kana, zh (else ja) for Han, when the table has that language; None otherwise."""
    if "ja" in languages and _KANA.search(text):
        return "ja"
    if _HAN.search(text):
        return next((code for code in ("zh", "ja") if code in languages), None)
    return None


class LanguageIdentifier:
    """Script rules, then naive Bayes over words for the space-delimited languages."""

    def __init__(self, languages: Sequence[str], word_counts: dict[str, dict[str, float]]) -> None:
        self.languages = list(languages)
        self.latin = [lang for lang in self.languages if lang not in SPACELESS] or self.languages[:1]
        vocabulary = sorted({w for lang in self.latin for w in word_counts.get(lang, {})})
        index = {w: i for i, w in enumerate(vocabulary)}
        scores = np.zeros((len(vocabulary) + 1, len(self.latin)), dtype=np.float32)  # last row: unknown word
        for column, lang in enumerate(self.latin):
            counts = np.ones(len(vocabulary) + 1)
            for word, count in word_counts.get(lang, {}).items():
                counts[index[word]] += count
            scores[:, column] = np.log(counts / counts.sum())
        scores[-1] = 0.0  # a word no language knows says nothing
        self._index = index
        self._scores = scores
        self._find = re.compile(f"(?:{WORD_PATTERN})|\n").findall

    def predict(self, texts: Sequence[str]) -> list[str]:
        """One language code per text."""
        out: list[str | None] = [script_language(t, self.languages) for t in texts]
        todo = [i for i, lang in enumerate(out) if lang is None]
        if len(self.latin) == 1 or not todo:
            return [lang or self.latin[0] for lang in out]
        joined = "\n".join(texts[i].replace("\n", " ") for i in todo).lower()
        tokens = self._find(joined)
        unknown = len(self._scores) - 1
        rows = np.fromiter(map(self._index.get, tokens, repeat(unknown)), dtype=np.int64, count=len(tokens))
        newline = np.array([t == "\n" for t in tokens], dtype=bool)
        text_of = np.cumsum(newline)
        rows, text_of = rows[~newline], text_of[~newline]
        totals = np.zeros((len(todo), len(self.latin)), dtype=np.float64)
        np.add.at(totals, text_of, self._scores[rows])
        best = totals.argmax(axis=1)  # ties (all zero: no known word) pick the first language
        for k, i in enumerate(todo):
            out[i] = self.latin[best[k]]
        return out
