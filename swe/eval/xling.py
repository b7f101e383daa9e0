"""Cross-lingual evaluation: STS17 en-de, STS-B en vs de/zh/ja, Tatoeba retrieval (as MTEB computes them).

Encoders are called as ``encode(texts, lang)``; monolingual encoders may ignore ``lang``.
"""
from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import numpy as np

from swe.eval.sts import PairSet, paired_cosine, spearman_x100

LangEncoder = Callable[[list[str], str], np.ndarray]
TATOEBA_LANGS = ("deu", "cmn", "jpn")
STSB_LANGS = ("de", "zh", "ja")
ISO1 = {"deu": "de", "cmn": "zh", "jpn": "ja"}


def load_sts17_en_de(root: Path) -> PairSet:
    s_en, s_de, gold = [], [], []
    for line in (Path(root) / "sts17" / "STS.input.extended.de-en.txt").read_text(encoding="utf-8").split("\n"):
        cols = line.split("\t")
        if len(cols) >= 3 and cols[2].strip():
            s_en.append(cols[0])
            s_de.append(cols[1])
            gold.append(float(cols[2]))
    return PairSet("STS17 en-de", s_en, s_de, np.asarray(gold))


def _stsb_csv(path: Path) -> list[tuple[str, str, float]]:
    with open(path, encoding="utf-8", newline="") as handle:
        return [(r[0], r[1], float(r[2])) for r in csv.reader(handle) if len(r) >= 3]


def load_stsb_cross(root: Path, lang: str, split: str = "test") -> PairSet:
    """s1 from the English file, s2 from the ``lang`` file, gold from English (rows are aligned)."""
    folder = Path(root) / "stsb-multi-mt"
    en = _stsb_csv(folder / f"stsb-en-{split}.csv")
    xx = _stsb_csv(folder / f"stsb-{lang}-{split}.csv")
    if len(en) != len(xx):
        raise ValueError(f"stsb-multi-mt {lang}: {len(xx)} rows but English has {len(en)}")
    return PairSet(f"STSB en-{lang}", [r[0] for r in en], [r[1] for r in xx], np.asarray([r[2] for r in en]))


def score_cross_pairs(encode: LangEncoder, pairs: PairSet, lang1: str, lang2: str) -> float:
    return spearman_x100(pairs.gold, paired_cosine(encode(pairs.s1, lang1), encode(pairs.s2, lang2)))


def weighted_prf(labels: np.ndarray, predictions: np.ndarray) -> tuple[float, float, float]:
    """sklearn's precision/recall/F1 with average='weighted', zero_division=0."""
    classes, support = np.unique(labels, return_counts=True)
    precision, recall, f1 = [], [], []
    for c in classes:
        tp = np.sum((predictions == c) & (labels == c))
        predicted = np.sum(predictions == c)
        actual = np.sum(labels == c)
        p = tp / predicted if predicted else 0.0
        r = tp / actual if actual else 0.0
        precision.append(p)
        recall.append(r)
        f1.append(2 * p * r / (p + r) if p + r else 0.0)
    weights = support / support.sum()
    return float(weights @ precision), float(weights @ recall), float(weights @ f1)


def bitext_mining(queries: np.ndarray, corpus: np.ndarray) -> dict[str, float]:
    """Nearest neighbour by cosine of every query in the corpus; gold is the same index (MTEB)."""
    q = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    c = corpus / np.maximum(np.linalg.norm(corpus, axis=1, keepdims=True), 1e-12)
    predictions = np.argmax(q @ c.T, axis=1)
    labels = np.arange(len(q))
    precision, recall, f1 = weighted_prf(labels, predictions)
    return {"accuracy": float(np.mean(predictions == labels) * 100), "f1": f1 * 100,
            "precision": precision * 100, "recall": recall * 100}


def tatoeba(encode: LangEncoder, root: Path, lang: str) -> dict[str, float]:
    folder = Path(root) / "tatoeba"
    xx = (folder / f"tatoeba.{lang}-eng.{lang}").read_text(encoding="utf-8").split("\n")
    en = (folder / f"tatoeba.{lang}-eng.eng").read_text(encoding="utf-8").split("\n")
    n = min(len([x for x in xx if x]), len([e for e in en if e]))
    return bitext_mining(encode(xx[:n], ISO1[lang]), encode(en[:n], "en"))


def evaluate_xling(encode: LangEncoder, root: Path) -> dict[str, float]:
    scores = {"STS17 en-de": score_cross_pairs(encode, load_sts17_en_de(root), "en", "de")}
    for lang in STSB_LANGS:
        scores[f"STSB en-{lang}"] = score_cross_pairs(encode, load_stsb_cross(root, lang), "en", lang)
    for lang in TATOEBA_LANGS:
        result = tatoeba(encode, root, lang)
        scores[f"Tatoeba {lang} acc"] = result["accuracy"]
        scores[f"Tatoeba {lang} F1"] = result["f1"]
    return {k: round(v, 2) for k, v in scores.items()}
