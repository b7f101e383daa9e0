"""Inference tokenisation (paper 4.1): words, punctuation dropped, lower-cased lookup, OOV back-off.

A *word* is a maximal run of letters, digits and marks (regex ``[^\\W_]+``); everything else
(punctuation, symbols, whitespace, underscores) separates words and is dropped. This is the same
split BERT's pre-tokenizer makes, so word spans never cut through a WordPiece token.

An out-of-vocabulary word is split by the teacher's sub-word tokenizer and trailing sub-words are
dropped until the remaining prefix is a vocabulary word (``goodness`` -> ``good`` + ``##ness`` ->
``good``); a word with no such prefix is skipped.

For languages written without spaces (zh, ja) a table may instead use the teacher's own tokens as
its words (``words = "teacher"``, the paper's choice for its zh/ja tables): the teacher tokenizer
splits the text and each token (its ``▁`` marker stripped) is looked up; there is no back-off. Or a
real word segmenter splits them (``words = "jieba"`` for Chinese, ``"fugashi"`` for Japanese with
unidic-lite; optional packages imported on first use), with the usual back-off for unknown words.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import repeat

import numpy as np

WORD_PATTERN = r"[^\W_]+"
WORD_MODES = ("pattern", "teacher", "jieba", "fugashi")  # jieba (zh) and fugashi + unidic-lite (ja): segmenters
_HAS_WORD_CHAR = re.compile(r"[^\W_]")
_OOV_CACHE_LIMIT = 1_000_000


@dataclass(frozen=True)
class TokenizationRules:
    """How text becomes words; saved in the model's config.json so every reader agrees."""

    word_pattern: str = WORD_PATTERN
    lowercase: bool = True
    unicode_normalization: str = "NFKC"
    oov_backoff: str = "teacher_prefix"  # or "none"
    words: str = "pattern"  # or "teacher" (the teacher's tokens), "jieba" / "fugashi" (segmenters): WORD_MODES

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> TokenizationRules:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


def normalize_text(text: str, form: str) -> str:
    """Unicode-normalise ``text`` (ASCII needs nothing, so it skips the call)."""
    if not form or text.isascii():
        return text
    return unicodedata.normalize(form, text)


class WordTokenizer:
    """Turns text into vocabulary ids with the rules of one model folder."""

    def __init__(
        self,
        vocab: Mapping[str, int],
        rules: TokenizationRules | None = None,
        subword_tokenizer: object | None = None,
    ) -> None:
        self.vocab = vocab
        self.rules = rules or TokenizationRules()
        if self.rules.words not in WORD_MODES:
            raise ValueError(f"tokenization words must be one of {WORD_MODES}, got {self.rules.words!r}")
        if self.rules.words == "teacher" and subword_tokenizer is None:
            raise ValueError("words = 'teacher' needs the teacher's tokenizer.json")
        self._pattern = re.compile(self.rules.word_pattern)
        self._find_words = self._pattern.findall if self.rules.words == "pattern" else self._split_words
        self.pieces = subword_tokenizer  # the teacher's tokenizer: back-off pieces, or the words themselves
        self._special = ({t.content for t in subword_tokenizer.get_added_tokens_decoder().values() if t.special}
                         if subword_tokenizer is not None else set())
        self.subword_tokenizer = subword_tokenizer if self.rules.oov_backoff == "teacher_prefix" else None
        self._oov: dict[str, int] = {}
        # Batch path: one regex pass over texts joined by "\n", where "\n" itself is a token (id -2).
        self._find_tokens = re.compile(f"(?:{self.rules.word_pattern})|\n").findall
        self._lookup: dict[str, int] | None = None

    def prepare(self, text: str) -> str:
        """Normalise and (if the rules say so) lower-case ``text``."""
        text = normalize_text(text, self.rules.unicode_normalization)
        return text.lower() if self.rules.lowercase else text

    def words(self, text: str) -> list[str]:
        """The words of ``text`` after normalisation, punctuation dropped."""
        return self._find_words(self.prepare(text))

    def _split_words(self, text: str) -> list[str]:
        return [w for w, _, _ in self._mode_spans(text)]

    def _mode_spans(self, text: str) -> list[tuple[str, int, int]]:
        if self.rules.words == "teacher":
            return self._teacher_spans(text)
        return [(w, a, b) for w, a, b in segment(text, self.rules.words) if _HAS_WORD_CHAR.search(w)]

    def _teacher_spans(self, text: str) -> list[tuple[str, int, int]]:
        encoding = self.pieces.encode(text, add_special_tokens=False)
        return [(token.lstrip("\u2581"), start, end) for token, (start, end) in zip(encoding.tokens, encoding.offsets)
                if token not in self._special and _HAS_WORD_CHAR.search(token)]

    def spans(self, text: str) -> list[tuple[str, int, int]]:
        """(word, start, end) for each word of an already normalised ``text``, spans in its characters (the
        extraction stage credits the teacher tokens that overlap each span); case-folded if the rules say so."""
        if self.rules.words == "pattern":
            found = [(m.group(), m.start(), m.end()) for m in self._pattern.finditer(text)]
        else:
            found = self._mode_spans(text)
        return [(w.lower(), a, b) for w, a, b in found] if self.rules.lowercase else found

    def ids(self, text: str) -> list[int]:
        """Vocabulary ids of ``text``'s words, with OOV back-off; unknown words are skipped."""
        vocab_get = self.vocab.get
        out = []
        for word in self._find_words(self.prepare(text)):
            idx = vocab_get(word)
            if idx is None:
                idx = self._backoff(word)
                if idx < 0:
                    continue
            out.append(idx)
        return out

    def batch_ids(self, texts: Iterable[str]) -> list[list[int]]:
        return [self.ids(t) for t in texts]

    def batch_flat_ids(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The ids of all texts concatenated, and each text's id count; same result as ``ids`` per text.

        One regex pass over the texts joined by newlines and C-level dictionary lookups; only OOV
        words go through Python (and are cached).
        """
        texts = [t.replace("\n", " ") if "\n" in t else t for t in texts]
        # Teacher-token or segmenter words, or normalisation made or ate a newline: go text by text.
        prepared = self.prepare("\n".join(texts)) if self.rules.words == "pattern" else None
        if prepared is None or prepared.count("\n") != len(texts) - 1:
            ids_per_text = self.batch_ids(texts)
            lengths = np.fromiter(map(len, ids_per_text), dtype=np.int64, count=len(texts))
            return np.fromiter((i for ids in ids_per_text for i in ids), dtype=np.int64), lengths
        if self._lookup is None:
            self._lookup = {**self.vocab, "\n": -2}
        tokens = self._find_tokens(prepared)
        ids = np.fromiter(map(self._lookup.get, tokens, repeat(-1)), dtype=np.int64, count=len(tokens))
        for position in np.flatnonzero(ids == -1):
            ids[position] = self._backoff(tokens[position])
        text_of_token = np.cumsum(ids == -2)
        keep = ids >= 0
        return ids[keep], np.bincount(text_of_token[keep], minlength=len(texts))

    def _backoff(self, word: str) -> int:
        """Id of the longest vocabulary prefix made of the word's leading sub-words, else -1."""
        cached = self._oov.get(word)
        if cached is not None:
            return cached
        idx = -1
        if self.subword_tokenizer is not None:
            ends = [end for _, end in self.subword_tokenizer.encode(word, add_special_tokens=False).offsets]
            for end in reversed(ends[:-1]):
                candidate = self.vocab.get(word[:end])
                if candidate is not None:
                    idx = candidate
                    break
        if len(self._oov) < _OOV_CACHE_LIMIT:
            self._oov[word] = idx
        return idx


_SEGMENTERS: dict[str, object] = {}


def segment(text: str, name: str) -> list[tuple[str, int, int]]:
    """(word, start, end) from a word segmenter: ``jieba`` (Chinese) or ``fugashi`` (Japanese, unidic-lite)."""
    if name == "jieba":
        if "jieba" not in _SEGMENTERS:
            import logging

            import jieba

            jieba.setLogLevel(logging.WARNING)
            _SEGMENTERS["jieba"] = jieba
        return list(_SEGMENTERS["jieba"].tokenize(text))
    if name == "fugashi":
        if "fugashi" not in _SEGMENTERS:
            import fugashi

            _SEGMENTERS["fugashi"] = fugashi.Tagger()
        spans, at = [], 0
        for node in _SEGMENTERS["fugashi"](text):
            start = text.find(node.surface, at)
            if start < 0:  # the tagger normalised this piece: no span in the text to credit, skip it
                continue
            at = start + len(node.surface)
            spans.append((node.surface, start, at))
        return spans
    raise ValueError(f"unknown segmenter {name!r}; known: jieba, fugashi")
