"""Snowball's English stemmer (Porter2, as Snowball 3.1 generates it), in pure Python, for the lexical channel
(``swembed.runtime.lexical``): its terms are the stems of the table's words, so "mutations" matches "mutation".

The algorithm: https://snowballstem.org/algorithms/english/stemmer.html, with Snowball 3's revisions (the R1
prefixes, "ogist", the "-ing" exceptions, "past"). It gives the ``snowballstemmer`` package's (3.1.1) stem of every
a-z word of the search table (``python -m lab.hybrid_search --check-stemmer models/minilm-256-sci``: 137,043 words),
of MiniLM's vocabulary and of 60,000 made-up words (tests/test_stemmer.py).
``js/src/stemmer.js`` is the same code step for step (tests/test_stemmer.py compares them over many words). Only
words of the letters a-z are stemmed (words are lower-cased before); any other word (digits, accents, other
scripts) is its own stem. No apostrophes: the table's words never hold one.
"""
from __future__ import annotations

import re

_ASCII_WORD = re.compile(r"[a-z]+")
_VOWELS = frozenset("aeiouy")
_DOUBLES = ("bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt")
_LI_ENDINGS = frozenset("cdeghkmnrt")
_R1_PREFIXES = ("arsen", "commun", "emerg", "gener", "inter", "later", "organ", "past", "univers")
_EXCEPTIONS = {  # whole words
    "skis": "ski", "skies": "sky", "idly": "idl", "gently": "gentl", "ugly": "ugli", "early": "earli",
    "only": "onli", "singly": "singl", "sky": "sky", "news": "news", "howe": "howe", "atlas": "atlas",
    "cosmos": "cosmos", "bias": "bias", "andes": "andes",
}
_KEEP_EED = frozenset(("succ", "proc", "exc"))  # succeed, proceed, exceed keep their -eed
_KEEP_ING = frozenset(("even", "cann", "inn", "earr", "herr", "out"))  # evening, canning, ... keep their -ing
# Steps 2-4: (suffix, replacement), longest first: the longest suffix a word ends with is the one tried
_STEP_2 = (
    ("ization", "ize"), ("ational", "ate"), ("fulness", "ful"), ("ousness", "ous"), ("iveness", "ive"),
    ("tional", "tion"), ("biliti", "ble"), ("lessli", "less"), ("entli", "ent"), ("ation", "ate"),
    ("alism", "al"), ("aliti", "al"), ("ogist", "og"), ("ousli", "ous"), ("iviti", "ive"), ("fulli", "ful"),
    ("enci", "ence"), ("anci", "ance"), ("abli", "able"), ("izer", "ize"), ("ator", "ate"), ("alli", "al"),
    ("bli", "ble"), ("ogi", "og"), ("li", ""),
)
_STEP_3 = (("ational", "ate"), ("tional", "tion"), ("alize", "al"), ("icate", "ic"), ("iciti", "ic"),
           ("ative", ""), ("ical", "ic"), ("ness", ""), ("ful", ""))
_STEP_4 = ("ement", "ance", "ence", "able", "ible", "ment", "ant", "ent", "ism", "ate", "iti", "ous", "ive", "ize",
           "ion", "al", "er", "ic")


def _is_vowel(word: str, i: int) -> bool:
    return word[i] in _VOWELS


def _region_after_vc(word: str, start: int) -> int:
    """The index after the first non-vowel that follows a vowel, from ``start`` (len(word) when none)."""
    for i in range(start + 1, len(word)):
        if not _is_vowel(word, i) and _is_vowel(word, i - 1):
            return i + 1
    return len(word)


def _regions(word: str) -> tuple[int, int]:
    r1 = next((len(p) for p in _R1_PREFIXES if word.startswith(p)), -1)
    if r1 < 0:
        r1 = _region_after_vc(word, 0)
    return r1, _region_after_vc(word, r1)


def _short_syllable_at_end(word: str) -> bool:
    """Snowball's shortv: a non-vowel (not w, x or Y) after a vowel after a non-vowel; a vowel and a non-vowel
    that are the whole word; or the ending "past"."""
    n = len(word)
    if n >= 3 and word[-1] not in "wxY" and not _is_vowel(word, n - 1) and _is_vowel(word, n - 2) \
            and not _is_vowel(word, n - 3):
        return True
    if n == 2 and _is_vowel(word, 0) and not _is_vowel(word, 1):
        return True
    return word.endswith("past")


def _has_vowel(text: str) -> bool:
    return any(c in _VOWELS for c in text)


def _step_1a(word: str) -> str:
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith(("ied", "ies")):
        return word[:-2] if len(word) > 4 else word[:-1]
    if word.endswith(("us", "ss")):
        return word
    if word.endswith("s") and _has_vowel(word[:-2]):
        return word[:-1]
    return word


def _step_1b(word: str, r1: int) -> str:
    for suffix in ("eedly", "eed"):
        if word.endswith(suffix):
            start = len(word) - len(suffix)
            return word[:start] + "ee" if start >= r1 and word[:start] not in _KEEP_EED else word
    suffix = next((s for s in ("ingly", "edly", "ing", "ed") if word.endswith(s)), "")
    stem = word[: len(word) - len(suffix)]
    if suffix == "ing" and len(stem) == 2 and stem[1] == "y" and not _is_vowel(stem, 0):
        return stem[0] + "ie"  # dying, lying, tying
    if not suffix or (suffix == "ing" and stem in _KEEP_ING) or not _has_vowel(stem):
        return word
    return _after_1b_deletion(stem, r1)


def _after_1b_deletion(stem: str, r1: int) -> str:
    if stem.endswith(("at", "bl", "iz")):
        return stem + "e"
    if stem.endswith(_DOUBLES):
        return stem if len(stem) == 3 and stem[0] in "aeo" else stem[:-1]
    return stem + "e" if r1 == len(stem) and _short_syllable_at_end(stem) else stem


def _step_1c(word: str) -> str:
    if len(word) > 2 and word[-1] in "yY" and not _is_vowel(word, len(word) - 2):
        return word[:-1] + "i"
    return word


def _step_2(word: str, r1: int) -> str:
    for suffix, replacement in _STEP_2:
        if word.endswith(suffix):
            if len(word) - len(suffix) < r1:
                return word
            stem = word[: -len(suffix)]
            if suffix == "ogi" and not stem.endswith("l"):
                return word
            if suffix == "li" and (not stem or stem[-1] not in _LI_ENDINGS):
                return word
            return stem + replacement
    return word


def _step_3(word: str, r1: int, r2: int) -> str:
    for suffix, replacement in _STEP_3:
        if word.endswith(suffix):
            start = len(word) - len(suffix)
            if start < r1 or (suffix == "ative" and start < r2):
                return word
            return word[:start] + replacement
    return word


def _step_4(word: str, r2: int) -> str:
    for suffix in _STEP_4:
        if word.endswith(suffix):
            start = len(word) - len(suffix)
            if start < r2 or (suffix == "ion" and (start == 0 or word[start - 1] not in "st")):
                return word
            return word[:start]
    return word


def _step_5(word: str, r1: int, r2: int) -> str:
    last = len(word) - 1
    if word.endswith("e") and (last >= r2 or (last >= r1 and not _short_syllable_at_end(word[:-1]))):
        return word[:-1]
    if word.endswith("ll") and last >= r2:
        return word[:-1]
    return word


def _mark_ys(word: str) -> str:
    """Initial y, and y after a vowel, as Y (a consonant)."""
    chars = list(word)
    for i, c in enumerate(chars):
        if c == "y" and (i == 0 or chars[i - 1] in _VOWELS):
            chars[i] = "Y"
    return "".join(chars)


def stem(word: str) -> str:
    """The Porter2 stem of a lower-case word of the letters a-z; any other word unchanged."""
    if len(word) <= 2 or not _ASCII_WORD.fullmatch(word):
        return word
    if word in _EXCEPTIONS:
        return _EXCEPTIONS[word]
    word = _mark_ys(word)
    r1, r2 = _regions(word)
    word = _step_1c(_step_1b(_step_1a(word), r1))
    word = _step_5(_step_4(_step_3(_step_2(word, r1), r1, r2), r2), r1, r2)
    return word.replace("Y", "y")
