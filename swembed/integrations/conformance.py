"""`swembed conformance`: texts and the vectors the Python runtime gives them, for checking another reader.

The file (JSON) holds, for each text, the table rows and weights the tokenisation yields (``WordTokenizer.rows``)
and the sentence vector (``StaticEmbedder.encode``), so a third-party reader can check its tokenisation first and
its arithmetic second (docs/format.md, "Conformance"). The texts cover what a reader most easily gets wrong:
unknown words (pieces and gram rows), digits, CJK, empty and punctuation-only texts, mixed case, accents and
combining marks, compatibility characters (NFKC), Greek final sigma, underscores, words longer than the teacher's
100-character limit, and long texts; plus known words of the table itself and any texts the caller adds.
"""
from __future__ import annotations

import hashlib
import json
import unicodedata
from pathlib import Path

import numpy as np

from swembed.runtime import StaticEmbedder
from swembed.runtime.embedder import ENCODE_KINDS

CONFORMANCE_FORMAT = "swe-static-conformance"
CONFORMANCE_VERSION = 1

CASES = [
    ("empty text", ""),
    ("whitespace only", " \t \n "),
    ("punctuation only", "!!! ... ??? -- (*) [] {} @#$%^&"),
    ("known words", "the cat sat on the mat"),
    ("mixed case", "ThE QUICK bRoWn Fox JUMPS"),
    ("unknown words (pieces and grams)", "unbelievablyxyzzy words"),
    ("unknown words only", "xyzzyqwv plughfrobnitz"),
    ("digits", "In 1969, 3 of 12 astronauts paid $4.99 for 2,500 km at 10:45"),
    ("digits and letters", "mp3 4k b2b covid19 x86_64 ipv6"),
    ("accents (composed)", "café naïve Ångström façade über São Paulo"),
    ("accents (combining marks, NFKC composes them)", "cafe\u0301 nai\u0308ve"),
    ("compatibility characters (NFKC)", "ﬁnance ｆｕｌｌｗｉｄｔｈ x² ½ ℌilbert ①"),
    ("Greek with final sigma", "ΟΔΟΣ Σοφία λόγος"),
    ("Cyrillic", "Привет, как дела?"),
    ("Turkish dotted capital I", "İSTANBUL İzmir"),
    ("German sharp s", "STRASSE Straße ẞ"),
    ("CJK (each ideograph its own piece)", "中文文本 日本語のテキスト 한국어 텍스트"),
    ("CJK mixed with Latin in one word", "abc中文def"),
    ("Hindi (vowel signs are marks, which split words)", "हिन्दी भाषा"),
    ("Arabic", "مرحبا بالعالم"),
    ("emoji and symbols", "I ❤ pizza 🍕 ™ © → ∞"),
    ("underscores and hyphens split words", "snake_case_word well-known e-mail"),
    ("apostrophes", "don't can't it's o'clock"),
    ("URL and e-mail", "see https://example.com/path?q=1 or me@example.org"),
    ("zero-width and control characters", "zero\u200bwidth soft\u00adhyphen tab\there"),
    ("word over 100 characters", "a" * 120 + " " + "supercalifragilistic" * 6),
    ("repeated unknown word", "glorptastic glorptastic glorptastic"),
    ("newlines inside a text", "first line\nsecond line\r\nthird"),
]


def conformance_texts(model: StaticEmbedder, extra: list[str] | None = None) -> list[tuple[str, str]]:
    """(about, text) pairs: ``CASES``, texts made of the table's own words, and ``extra``."""
    words = model.words
    pieces = model.config.get("pieces")
    known = [w for w in words[: pieces["rows"][0] if pieces else len(words)] if w.isalnum()]
    cases = list(CASES)
    if known:
        step = max(1, len(known) // 50)
        cases.append(("table words", " ".join(known[::step][:50])))
        cases.append(("table words with unknown suffixes", " ".join(w + "xq" for w in known[::step][:20])))
        cases.append(("table words upper-cased", " ".join(w.upper() for w in known[1::step][:20])))
        long_words = [known[(i * 7919) % len(known)] if i % 9 else f"unk{i}zz" for i in range(3000)]
        cases.append(("long text (3000 words)", " ".join(long_words)))
    cases += [("given", text) for text in extra or []]
    return cases


def conformance(model_path: str | Path, extra: list[str] | None = None) -> dict:
    """The conformance record of a table (see the module docstring)."""
    model = StaticEmbedder.load(model_path)
    if model.tokenizers:
        raise ValueError(f"{model_path}: a multilingual table; conformance covers one-language tables")
    cases = conformance_texts(model, extra)
    texts = [text for _, text in cases]
    vectors = model.encode(texts)
    kinds = {f"{kind}_vector": model.encode(texts, kind=kind) for kind in sorted(model.kind_weights)
             if kind in ENCODE_KINDS}
    embeddings = Path(model_path) / "embeddings.npy"
    items = []
    for i, ((about, text), vector) in enumerate(zip(cases, vectors)):
        rows, weights = model.tokenizer.rows(text)
        items.append({"about": about, "text": text, "rows": [int(r) for r in rows],
                      "weights": [float(w) for w in weights], "vector": _digits(vector),
                      **{key: _digits(kind_vectors[i]) for key, kind_vectors in kinds.items()}})
    return {
        "format": CONFORMANCE_FORMAT, "format_version": CONFORMANCE_VERSION,
        "table": {"dtype": str(model.table.dtype), "rows": len(model.labels), "storage": model.config.get("storage"),
                  "embeddings_sha256": hashlib.sha256(embeddings.read_bytes()).hexdigest()},
        "dim": model.dim, "unicode_version": unicodedata.unidata_version, "texts": items,
    }


def _digits(vector: np.ndarray) -> list[float]:
    """A vector as the file holds it: float32 values to 9 significant digits."""
    return [float(f"{v:.9g}") for v in np.asarray(vector, dtype=np.float32)]


def write_conformance(model_path: str | Path, out: str | Path, texts: str | Path | None = None,
                      overwrite: bool = False) -> dict:
    """Write the conformance file atomically, with the lines of the text file ``texts`` as more texts; the output
    is checked as every output is (``check_writable``: an existing ``out`` only with ``overwrite``, never an
    input)."""
    from swembed.runtime.outputs import atomic_file, check_writable

    out = Path(out)
    read = [str(model_path), *([str(texts)] if texts else [])]
    check_writable(out, overwrite, read, folder=False)
    extra = None
    if texts:
        try:
            extra = Path(texts).read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise ValueError(f"{texts}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    record = conformance(model_path, extra)
    with atomic_file(out, overwrite, read) as tmp:
        tmp.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    return record
