"""English STS as MTEB computes it: Spearman x100 of cosine similarity against gold scores.

Data formats are those of ``shared/data/eval`` (SemEval STS12-16 input/gs files, STS Benchmark TSV,
SICK TSV). Each set is scored over all its pairs at once, as MTEB does.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

EN_SETS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R")
DEV = "STSBenchmark-dev"  # where settings are chosen, never on the test sets


class EvalDataError(ValueError):
    pass


@dataclass
class PairSet:
    name: str
    s1: list[str]
    s2: list[str]
    gold: np.ndarray


def _semeval_year(folder: Path, name: str) -> PairSet:
    s1, s2, gold = [], [], []
    inputs = sorted(folder.glob("STS.input.*.txt"))
    if not inputs:
        raise EvalDataError(f"{folder}: no STS.input.*.txt files")
    for path in inputs:
        gs = path.with_name(path.name.replace("STS.input.", "STS.gs."))
        if not gs.is_file():
            continue
        pairs = path.read_text(encoding="utf-8").split("\n")
        scores = gs.read_text(encoding="utf-8").split("\n")
        for pair, score in zip(pairs, scores):
            if not score.strip():
                continue
            cols = pair.split("\t")
            s1.append(cols[0])
            s2.append(cols[1])
            gold.append(float(score))
    return PairSet(name, s1, s2, np.asarray(gold))


def _stsb(path: Path, name: str) -> PairSet:
    s1, s2, gold = [], [], []
    for line in path.read_text(encoding="utf-8").split("\n"):
        cols = line.split("\t")
        if len(cols) >= 7:
            gold.append(float(cols[4]))
            s1.append(cols[5])
            s2.append(cols[6])
    return PairSet(name, s1, s2, np.asarray(gold))


def _sick(folder: Path) -> PairSet:
    s1, s2, gold = [], [], []
    for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        with open(folder / name, encoding="utf-8") as handle:
            for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
                s1.append(row["sentence_A"])
                s2.append(row["sentence_B"])
                gold.append(float(row["relatedness_score"]))
    return PairSet("SICK-R", s1, s2, np.asarray(gold))


def load_pair_set(data_dir: str | Path, name: str) -> PairSet:
    """Load one STS set by its MTEB name (also ``STSBenchmark-dev``)."""
    root = Path(data_dir)
    if not root.is_dir():
        raise EvalDataError(f"evaluation data folder not found: {root}")
    if name.startswith("STS1") and len(name) == 5:
        return _semeval_year(root / name.lower(), name)
    if name == "STSBenchmark":
        return _stsb(root / "stsb" / "sts-test.csv", name)
    if name == "STSBenchmark-dev":
        return _stsb(root / "stsb" / "sts-dev.csv", name)
    if name == "SICK-R":
        return _sick(root / "sick")
    raise EvalDataError(f"unknown STS set {name!r}; known: {', '.join(EN_SETS)}, STSBenchmark-dev")


def spearman_x100(gold: np.ndarray, predicted: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(gold, predicted).statistic * 100)


def paired_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine computed exactly as MTEB does (sklearn's ``1 - paired_cosine_distances``).

    Rows are L2-normalised in their own dtype (a zero row stays zero) and the cosine is
    ``1 - ||a - b||^2 / 2``; keeping MTEB's float32 arithmetic keeps its tie order, so Spearman
    agrees to the last digit. A zero vector therefore scores 0.5 against a unit vector, as in MTEB.
    """
    def normalize(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        x = x.astype(np.float64) if x.dtype not in (np.float32, np.float64) else x
        norms = np.sqrt(np.einsum("ij,ij->i", x, x))
        norms[norms == 0.0] = 1.0
        return x / norms[:, None]

    diff = normalize(a) - normalize(b)
    return 1 - 0.5 * np.einsum("ij,ij->i", diff, diff)


def score_pair_set(encode, pairs: PairSet) -> float:
    texts = list(dict.fromkeys(pairs.s1 + pairs.s2))
    vectors = encode(texts)
    row = {t: i for i, t in enumerate(texts)}
    a = vectors[[row[t] for t in pairs.s1]]
    b = vectors[[row[t] for t in pairs.s2]]
    return spearman_x100(pairs.gold, paired_cosine(a, b))


def evaluate_sts(encode, data_dir: str | Path, names: tuple[str, ...] = EN_SETS) -> dict[str, float]:
    """Scores for each set and their mean ("avg")."""
    scores = {name: round(score_pair_set(encode, load_pair_set(data_dir, name)), 4) for name in names}
    scores["avg"] = round(float(np.mean([scores[n] for n in names])), 4)
    return scores
