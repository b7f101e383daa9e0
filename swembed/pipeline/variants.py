"""Script variants: rows for spellings a language's corpus does not use, made from the rows of the spelling it does.

Chinese is written in simplified and in traditional characters; a corpus of one (the shared zh corpus is
simplified) leaves the other's words without rows, and a zh table then drops them (its words are the teacher's
tokens, whose piece rows exist only where some corpus had them). With ``script_variants = {zh = "t2s"}`` the build
adds, after distillation, a row for each traditional-script word (each teacher token, and each word's OpenCC
``s2t`` spelling) that the table lacks, that the language's tokeniser reads as one word, and whose ``t2s``
conversion it can encode: the mean of the rows the inference tokeniser gives the converted text. Added rows copy
trained rows, so exports (which read the vocabulary) behave the same as ``swembed.load``. On me5-en-zh, 4.3% of
Tatoeba cmn tokens had no row before, 0.5% after.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, cast

import numpy as np

from swembed._extras import require
from swembed.pipeline.compose import Layout
from swembed.pipeline.config import SCRIPT_CONVERSIONS
from swembed.runtime.langid import HAN
from swembed.runtime.tokenizer import WordTokenizer

if TYPE_CHECKING:
    from tokenizers import Tokenizer


def converters(name: str):
    """(to the variant, to the corpus's script) as two str -> str functions."""
    require("multilingual", "opencc")
    import opencc

    forward, back = SCRIPT_CONVERSIONS[name]
    return opencc.OpenCC(forward).convert, opencc.OpenCC(back).convert


def variant_rows(tokenizer: WordTokenizer, table: np.ndarray, conversion: str) -> tuple[list[str], np.ndarray]:
    """New (words, rows) for the variant spellings of one language: each new word's row is the weighted mean of
    the rows of its converted text."""
    to_variant, to_corpus = converters(conversion)
    candidates = [to_variant(word) for word in tokenizer.vocab]
    if tokenizer.rules.words == "teacher":
        vocab = cast("Tokenizer", tokenizer.teacher_tokenizer).get_vocab()  # words = "teacher": it has one
        by_id = sorted(vocab.items(), key=lambda item: item[1])  # its dict order varies
        candidates += [token.lstrip("\u2581") for token, _ in by_id]
    words, rows = [], []
    seen = set(tokenizer.vocab)
    for word in candidates:
        if not word or word in seen or not HAN.search(word):
            continue
        seen.add(word)
        converted = to_corpus(word)
        if converted == word or tokenizer.words(word) != [word]:  # a text never yields this word: no row for it
            continue
        ids, weights = tokenizer.rows(converted)
        if not ids:
            continue
        words.append(word)
        rows.append(np.average(np.asarray(table[ids], dtype=np.float32), axis=0, weights=weights))
    return words, np.array(rows, dtype=np.float32).reshape(-1, table.shape[1])


def add_variants(layout: Layout, table: np.ndarray, contexts: np.ndarray, tokenizers: dict[str, WordTokenizer],
                 variants: dict[str, str]) -> tuple[Layout, np.ndarray, np.ndarray, dict[str, int]]:
    """The table (and its layout and word context counts) with each named language's variant rows inserted at
    the end of its block of word rows; returns also how many rows each language gained. A variant row counts 0
    contexts, as the corpus never had its spelling: a merged export then leaves a word another language does
    have (Japanese 湯 against the traditional spelling of Chinese 汤) that language's row (Tatoeba jpn 84.1 -> 87.5
    on the me5-multi model2vec export)."""
    added = {}
    for lang, conversion in variants.items():
        start, end = layout.languages[lang]
        words, rows = variant_rows(tokenizers[lang], table, conversion)
        n = len(words)
        added[lang] = n
        if not n:
            continue
        table = np.concatenate([table[:end], rows.astype(table.dtype), table[end:]])
        contexts = np.concatenate([contexts[:end], np.zeros(n, dtype=contexts.dtype), contexts[end:]])
        spans = {other: ([a, b + n] if a <= start and b >= end else [a + n, b + n] if a >= end else [a, b])
                 for other, (a, b) in layout.languages.items()}
        layout = replace(layout, languages=spans, pieces=[p + n for p in layout.pieces],
                         labels=layout.labels[:end] + words + layout.labels[end:])
        subword = next(iter(tokenizers.values())).teacher_tokenizer
        tokenizers = layout.tokenizers({k: t.rules for k, t in tokenizers.items()}, subword)
    return layout, table, contexts, added
