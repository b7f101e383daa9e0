"""Which language of a multilingual table a text is in, when the caller does not say.

Script first: kana -> ja, Han -> zh (else ja). Texts in the other (space-delimited) languages are scored by
a multinomial naive Bayes over their lower-cased words, with each language's word probabilities taken from
the build's own corpus (the sentences each vocabulary word was seen in, ``word_contexts.npy``), add-one
smoothed; the best-scoring language wins, the first language on a tie (no known word). It costs one
byte-level word split and a dictionary lookup per word, like encoding itself.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import repeat
from typing import cast

import numpy as np

from swembed.runtime.tokenizer import _NEWLINE, WORD_PATTERN, _split_bytes

SPACELESS = ("zh", "ja")
_KANA = re.compile(r"[\u3040-\u30ff]")
HAN = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf]")  # CJK unified ideographs (and extension A)


def script_language(text: str, languages: Sequence[str]) -> str | None:
    """ja for kana, zh (else ja) for Han, when the table has that language; None otherwise."""
    if "ja" in languages and _KANA.search(text):
        return "ja"
    if HAN.search(text):
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
        self._index = {w.encode(): i for w, i in index.items()}  # the word split works on UTF-8 bytes
        self._index[_NEWLINE] = -1  # a text boundary
        self._scores = scores
        self._pattern = re.compile(WORD_PATTERN)

    def predict(self, texts: Sequence[str]) -> list[str]:
        """One language code per text."""
        out: list[str | None] = [script_language(t, self.languages) for t in texts]
        todo = [i for i, lang in enumerate(out) if lang is None]
        if len(self.latin) == 1 or not todo:
            return [lang or self.latin[0] for lang in out]
        joined = "\n".join(texts[i].replace("\n", " ") for i in todo).lower()
        tokens = _split_bytes(joined, self._pattern)
        unknown = len(self._scores) - 1
        rows = np.fromiter(map(self._index.get, tokens, repeat(unknown)), dtype=np.int64, count=len(tokens))
        newline = rows == -1
        text_of = np.cumsum(newline)[~newline]
        per_word = self._scores[rows[~newline]]
        totals = np.stack([np.bincount(text_of, weights=per_word[:, column], minlength=len(todo))
                           for column in range(len(self.latin))], axis=1)
        best = totals.argmax(axis=1)  # ties (all zero: no known word) pick the first language
        for k, i in enumerate(todo):
            out[i] = self.latin[best[k]]
        return cast("list[str]", out)  # every None is filled
