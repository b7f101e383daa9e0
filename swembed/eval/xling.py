"""Cross-lingual evaluation: STS17 en-de, STS-B en vs de/zh/ja, Tatoeba retrieval (as MTEB computes them),
and BUCC 2017/2018 bitext mining when BUCC files are given.

Encoders are called as ``encode(texts, lang)``; monolingual encoders may ignore ``lang``.
"""
from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import numpy as np

from swembed.eval.sts import PairSet, paired_cosine, spearman_x100

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


def _bucc_file(path: Path) -> tuple[list[str], list[str]]:
    ids, sentences = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if not line.strip():
            continue
        cols = line.split("\t", 1)
        if len(cols) != 2:
            raise ValueError(f"{path}:{number}: expected 'id<TAB>sentence'")
        ids.append(cols[0].strip())
        sentences.append(cols[1].strip())
    return ids, sentences


def load_bucc(folder: Path, lang: str, split: str = "test") -> tuple[list[str], list[str], list[str], list[str],
                                                                      set[tuple[str, str]]]:
    """The BUCC shared-task layout: ``{lang}-en.{split}.{lang}``, ``.en`` (``id<TAB>sentence``) and ``.gold``
    (``{lang}_id<TAB>en_id``). Returns (xx ids, xx sentences, en ids, en sentences, gold pairs)."""
    stem = Path(folder) / f"{lang}-en.{split}"
    missing = [str(p) for p in (stem.with_name(stem.name + f".{x}") for x in (lang, "en", "gold")) if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"BUCC {lang}-en {split}: missing {', '.join(missing)}")
    xx_ids, xx = _bucc_file(stem.with_name(stem.name + f".{lang}"))
    en_ids, en = _bucc_file(stem.with_name(stem.name + ".en"))
    gold = set()
    for line in stem.with_name(stem.name + ".gold").read_text(encoding="utf-8").splitlines():
        cols = line.split()
        if len(cols) == 2:
            gold.add((cols[0], cols[1]))
    return xx_ids, xx, en_ids, en, gold


def margin_scores(x: np.ndarray, y: np.ndarray, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Forward candidates of the ratio margin (Artetxe & Schwenk 2019): for each row of ``x``, its best ``y`` and
    the score cos(x, y) / (mean of the k nearest cosines of x in y / 2 + those of y in x / 2)."""
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    y = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)
    sims = x @ y.T
    kx, ky = min(k, sims.shape[1]), min(k, sims.shape[0])
    x_knn = np.mean(-np.partition(-sims, kx - 1, axis=1)[:, :kx], axis=1)
    y_knn = np.mean(-np.partition(-sims, ky - 1, axis=0)[:ky, :], axis=0)
    margin = sims / ((x_knn[:, None] + y_knn[None, :]) / 2)
    best = np.argmax(margin, axis=1)
    return best, margin[np.arange(len(x)), best]


def best_threshold_f1(candidates: list[tuple[str, str]], scores: np.ndarray,
                      gold: set[tuple[str, str]]) -> dict[str, float]:
    """Precision/recall/F1 of the candidates above the threshold that maximises F1 (the BUCC evaluation script
    optimises it on the gold of the same split; pass a train-split threshold for a held-out figure)."""
    order = np.argsort(-scores)
    hits = np.cumsum([candidates[i] in gold for i in order])
    kept = np.arange(1, len(order) + 1)
    precision, recall = hits / kept, hits / max(len(gold), 1)
    f1 = np.where(hits > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-12), 0.0)
    i = int(np.argmax(f1))
    return {"f1": float(f1[i] * 100), "precision": float(precision[i] * 100), "recall": float(recall[i] * 100),
            "threshold": float(scores[order[i]])}


def bucc(encode: LangEncoder, folder: Path, lang: str, split: str = "test") -> dict[str, float]:
    """BUCC mining F1 (margin, best threshold) over the full files, and MTEB's BUCC figure: nearest-neighbour
    F1 between the gold sentences only."""
    xx_ids, xx, en_ids, en, gold = load_bucc(folder, lang, split)
    x, y = encode(xx, lang), encode(en, "en")
    best, scores = margin_scores(x, y)
    result = {f"mining {k}": v for k, v in
              best_threshold_f1([(xx_ids[i], en_ids[j]) for i, j in enumerate(best)], scores, gold).items()}
    x_row, y_row = {s: i for i, s in enumerate(xx_ids)}, {s: i for i, s in enumerate(en_ids)}
    pairs = sorted(p for p in gold if p[0] in x_row and p[1] in y_row)
    gold_nn = bitext_mining(x[[x_row[a] for a, _ in pairs]], y[[y_row[b] for _, b in pairs]])
    result.update({"gold-pairs f1": gold_nn["f1"], "gold-pairs accuracy": gold_nn["accuracy"]})
    return result


def evaluate_xling(encode: LangEncoder, root: Path, bucc_dir: Path | None = None,
                   languages: list[str] | None = None) -> dict[str, float]:
    """Every cross-lingual set; with ``languages`` (a multilingual table's), only the sets it can encode."""
    def covered(lang: str) -> bool:
        return languages is None or ("en" in languages and lang in languages)

    scores = {}
    if covered("de"):
        scores["STS17 en-de"] = score_cross_pairs(encode, load_sts17_en_de(root), "en", "de")
    for lang in STSB_LANGS:
        if covered(lang):
            scores[f"STSB en-{lang}"] = score_cross_pairs(encode, load_stsb_cross(root, lang), "en", lang)
    for lang in TATOEBA_LANGS:
        if not covered(ISO1[lang]):
            continue
        result = tatoeba(encode, root, lang)
        scores[f"Tatoeba {lang} acc"] = result["accuracy"]
        scores[f"Tatoeba {lang} F1"] = result["f1"]
    if bucc_dir is not None:
        langs = sorted({p.name.split("-")[0] for p in Path(bucc_dir).glob("*-en.*.gold")})
        if not langs:
            raise FileNotFoundError(f"no BUCC '<xx>-en.<split>.gold' files in {bucc_dir}")
        for lang in [code for code in langs if covered(code)]:
            split = "test" if (Path(bucc_dir) / f"{lang}-en.test.gold").is_file() else "training"
            result = bucc(encode, Path(bucc_dir), lang, split)
            scores[f"BUCC {lang}-en mining F1"] = result["mining f1"]
            scores[f"BUCC {lang}-en gold-pairs F1"] = result["gold-pairs f1"]
    return {k: round(v, 2) for k, v in scores.items()}
