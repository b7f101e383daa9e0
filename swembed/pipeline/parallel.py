"""Parallel text for bilingual tables: translation pairs from TSV or line-aligned files, with evaluation
sentences kept out (matched by a loose key, so tokenised or re-punctuated copies are caught too).
"""
from __future__ import annotations

import gzip
import re
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import cast

import numpy as np

from swembed.pipeline import files, public_data
from swembed.pipeline.sources import HELD_OUT_RULE, describe_source, expand_sources, held_out_keys, is_held_out

PAIRS = "pairs.tsv"
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef\u3000-\u303f"
_CJK_GAP = re.compile(f"(?<=[{_CJK}]) +(?=[{_CJK}])")


def _lines(path: str) -> list[str]:
    path = public_data.local_file(path)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        return [line.rstrip("\n") for line in handle]


def read_parallel(paths: list[str], exclude: AbstractSet[str] = frozenset()) -> list[tuple[str, str]]:
    """Translation pairs from ``english<TAB>other`` files (plain or .gz) or from ``EN_FILE::OTHER_FILE``
    line-aligned file pairs. Spaces between CJK characters are removed (segmented corpora such as Tanaka);
    pairs either side of which repeats an ``exclude`` text (``is_held_out``: the evaluation sentences) are
    dropped, as are exact repeats."""
    pairs, seen = [], set()
    for path in paths:
        rows: Iterable[Sequence[str]]
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
            if not a or not b or (a, b) in seen or is_held_out(a, exclude) or is_held_out(b, exclude):
                continue
            seen.add((a, b))
            pairs.append((a, b))
    return pairs


def encode_reusing(teacher, texts: list[str], extracts) -> tuple[np.ndarray, int]:
    """The teacher's sentence vectors of ``texts`` and how many were reused: a text that an extract stage already
    sent through the teacher takes that stage's cached vector (``files.TARGETS``); only the rest are encoded."""
    out = np.zeros((len(texts), teacher.pooled_dim), dtype=np.float32)
    todo = np.arange(len(texts))
    for extract in extracts:
        position = {s: i for i, s in enumerate(files.read_lines(Path(extract.path) / files.TARGET_SENTENCES))}
        found = np.array([position.get(texts[i], -1) for i in todo], dtype=np.int64)
        hit = found >= 0
        if hit.any():
            out[todo[hit]] = np.load(Path(extract.path) / files.TARGETS, mmap_mode="r")[found[hit]]
        todo = todo[~hit]
    if len(todo):
        out[todo] = teacher.encode([texts[i] for i in todo])
    return out, len(texts) - len(todo)


def run_pairs(ctx, lang: str, paths: list[str], exclude: list[str], teacher, score: bool = True, extracts=()):
    """Stage ``pairs-xx``: the translation pairs of one language pair with the evaluation sentences excluded, and
    (``score``) the teacher's cosine of each, so that distillation can drop the pairs the teacher does not
    consider translations; texts the ``extracts`` already encoded are not encoded again. Artifact ``pairs.tsv``,
    ``similarity.npy``."""
    from swembed.pipeline.stage import StageRun, teacher_identity

    identity = {"lang": lang, "files": [describe_source(p.split("::")[0]) | {"spec": p} for p in paths],
                "exclude": [describe_source(p) for p in expand_sources(exclude)], **HELD_OUT_RULE,
                **(teacher_identity(teacher) if score else {"teacher": None})}

    def compute(run: StageRun) -> dict:
        pairs = read_parallel(paths, held_out_keys(exclude))
        write_pairs(run.out, pairs)
        stats: dict[str, object] = {"pairs_read": len(pairs)}
        if score and pairs:
            vectors, reused = encode_reusing(teacher, [text for pair in pairs for text in pair], extracts)
            similarity = np.sum(vectors[0::2] * vectors[1::2], axis=1)
            stats["texts_reused_from_extract"] = reused
            np.save(run.out / "similarity.npy", similarity.astype(np.float32))
            stats["similarity_deciles"] = [round(float(q), 3) for q in np.quantile(similarity, np.linspace(0, 1, 11))]
        return stats

    return ctx.run(f"pairs-{lang}", identity, [], compute)


def write_pairs(folder: Path, pairs: list[tuple[str, str]]) -> None:
    """A stage's ``pairs.tsv``: one ``a<TAB>b`` line per pair (``read_pairs`` reads it back)."""
    with open(folder / PAIRS, "w", encoding="utf-8") as handle:
        handle.writelines(f"{a}\t{b}\n" for a, b in pairs)


def read_pairs(result, min_similarity: float | None = None) -> list[tuple[str, str]]:
    """The pairs of a ``pairs`` stage artifact, those the teacher scores below ``min_similarity`` dropped."""
    with open(Path(result.path) / PAIRS, encoding="utf-8") as handle:
        pairs = [cast("tuple[str, str]", tuple(line.rstrip("\n").split("\t", 1))) for line in handle]
    if min_similarity is None:
        return pairs
    similarity = np.load(Path(result.path) / "similarity.npy")
    return [p for p, s in zip(pairs, similarity) if s >= min_similarity]
