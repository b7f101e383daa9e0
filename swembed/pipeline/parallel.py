"""Parallel text for bilingual tables: translation pairs from TSV or line-aligned files, with evaluation
sentences kept out (matched by a loose key, so tokenised or re-punctuated copies are caught too).
"""
from __future__ import annotations

import gzip
import re
from pathlib import Path


_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef\u3000-\u303f"
_CJK_GAP = re.compile(f"(?<=[{_CJK}]) +(?=[{_CJK}])")


def _lines(path: str) -> list[str]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        return [line.rstrip("\n") for line in handle]


_NOT_WORD = re.compile(r"[\W_]+")


def loose_key(text: str) -> str:
    """Case-folded text without spaces or punctuation: what evaluation-set exclusion compares, so tokenised or
    re-punctuated copies of a test sentence (e.g. Tanaka's lower-cased English) are caught too."""
    return _NOT_WORD.sub("", text.casefold())


def exclusions(paths: list[str]) -> set[str]:
    """Loose keys of every line (and tab-separated field) of the given files."""
    keys = set()
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            keys.update(loose_key(part) for part in line.split("\t"))
    keys.discard("")
    return keys


def read_parallel(paths: list[str], exclude: set[str] = frozenset()) -> list[tuple[str, str]]:
    """Translation pairs from ``english<TAB>other`` files (plain or .gz) or from ``EN_FILE::OTHER_FILE``
    line-aligned file pairs. Spaces between CJK characters are removed (segmented corpora such as Tanaka);
    pairs whose either side's ``loose_key`` is in ``exclude`` (the evaluation sentences) are dropped, as
    are exact repeats."""
    pairs, seen = [], set()
    for path in paths:
        if "::" in path:
            left, right = path.split("::", 1)
            a_lines, b_lines = _lines(left), _lines(right)
            if len(a_lines) != len(b_lines):
                raise ValueError(f"{left} has {len(a_lines)} lines but {right} has {len(b_lines)}")
            rows = zip(a_lines, b_lines)
        else:
            rows = (line.split("\t")[:2] for line in _lines(path) if line.count("\t") >= 1)
        for a, b in rows:
            a, b = a.strip(), _CJK_GAP.sub("", b.strip())
            if not a or not b or (a, b) in seen or loose_key(a) in exclude or loose_key(b) in exclude:
                continue
            seen.add((a, b))
            pairs.append((a, b))
    return pairs
