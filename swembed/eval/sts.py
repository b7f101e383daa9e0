"""English STS as MTEB computes it: Spearman x100 of cosine similarity against gold scores.

Data formats are those of ``shared/data/eval`` (SemEval STS12-16 input/gs files, STS Benchmark TSV,
SICK TSV). Each set is scored over all its pairs at once, as MTEB does.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

EN_SETS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R")
DEV = "STSBenchmark-dev"  # where settings are chosen, never on the test sets
TRAIN = "STSBenchmark-train"  # a second dev signal (no swembed recipe trains on it)


class EvalDataError(ValueError):
    pass


@dataclass
class PairSet:
    name: str
    s1: list[str]
    s2: list[str]
    gold: np.ndarray


# The standard sets as shared/data/eval holds them (MTEB's): scored pairs, and a fingerprint of the first pair (see
# ``fingerprint``), so that a set which starts as the standard one but has another size (a truncated file) is refused
# instead of scored as if complete; a set of one's own (another first pair) is scored as it is.
STANDARD_SETS = {
    "STS12": (3108, "126ea9b310939d25"), "STS13": (1500, "b9489049dae5a8ae"), "STS14": (3750, "0b5f8dd98abe5435"),
    "STS15": (3000, "f3a16f0c73fd7568"), "STS16": (1186, "7624931e5fe17579"),
    "STSBenchmark": (1379, "a61aff36c6756d7b"), "STSBenchmark-dev": (1500, "b0fb4aab3639d3f6"),
    "STSBenchmark-train": (5749, "71c321b2dac62334"),
    "SICK-R": (9927, "56e4210d8cdda859"),
}


def fingerprint(pairs: PairSet) -> str:
    """sha256 of the first pair, ``s1<TAB>s2`` (16 hex digits): which set a file holds."""
    return hashlib.sha256(f"{pairs.s1[0]}\t{pairs.s2[0]}".encode()).hexdigest()[:16] if pairs.s1 else ""


def check_standard_size(pairs: PairSet, where: Path) -> PairSet:
    """Refuse a standard set (``STANDARD_SETS``) with a number of pairs other than its own."""
    size, first = STANDARD_SETS.get(pairs.name, (None, None))
    if first == fingerprint(pairs) and len(pairs.gold) != size:
        raise EvalDataError(f"{where}: {len(pairs.gold)} scored pairs, but {pairs.name} has {size} (the file starts "
                            "as the standard set does: truncated?); restore the whole set")
    return pairs


def _lines(path: Path) -> list[str]:
    """The lines of a UTF-8 file (a final newline ends the last line, it does not start another)."""
    if not path.is_file():
        raise EvalDataError(f"evaluation file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise EvalDataError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def _score(value: str, path: Path, line: int) -> float:
    try:
        return float(value)
    except ValueError:
        raise EvalDataError(f"{path}:{line}: gold score {value!r} is not a number") from None


def _columns(line: str, path: Path, number: int, expected: int, names: str) -> list[str]:
    cols = line.split("\t")
    if len(cols) < expected:
        raise EvalDataError(f"{path}:{number}: {len(cols)} column(s), expected {expected} ({names})")
    return cols


def _semeval_year(folder: Path, name: str) -> PairSet:
    """STS12-16: each ``STS.input.<x>.txt`` (``s1<TAB>s2``) and its ``STS.gs.<x>.txt`` (one score per line, blank
    = unlabelled), line by line; files that do not line up are refused, naming them."""
    s1, s2, gold = [], [], []
    inputs = sorted(folder.glob("STS.input.*.txt"))
    if not inputs:
        raise EvalDataError(f"{folder}: no STS.input.*.txt files")
    for path in inputs:
        gs = path.with_name(path.name.replace("STS.input.", "STS.gs."))
        if not gs.is_file():
            raise EvalDataError(f"{path}: no gold file {gs.name} beside it")
        pairs, scores = _lines(path), _lines(gs)
        if len(pairs) != len(scores):
            raise EvalDataError(f"{gs}: {len(scores)} lines, but {path.name} has {len(pairs)}; the gold scores must "
                                "line up with the pairs, one line each")
        for number, (pair, score) in enumerate(zip(pairs, scores), 1):
            if not score.strip():
                continue
            cols = _columns(pair, path, number, 2, "sentence1, sentence2")
            gold.append(_score(score, gs, number))
            s1.append(cols[0])
            s2.append(cols[1])
    return PairSet(name, s1, s2, np.asarray(gold))


def _stsb(path: Path, name: str) -> PairSet:
    s1, s2, gold = [], [], []
    for number, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        cols = _columns(line, path, number, 7, "genre, file, year, id, score, sentence1, sentence2")
        gold.append(_score(cols[4], path, number))
        s1.append(cols[5])
        s2.append(cols[6])
    return PairSet(name, s1, s2, np.asarray(gold))


def _sick(folder: Path) -> PairSet:
    s1, s2, gold = [], [], []
    fields = ("sentence_A", "sentence_B", "relatedness_score")
    for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        path = folder / name
        header, *rows = _lines(path)
        columns = header.split("\t")
        if not all(f in columns for f in fields):
            raise EvalDataError(f"{path}:1: the header must name {', '.join(fields)}")
        at = [columns.index(f) for f in fields]
        for number, line in enumerate(rows, 2):
            cols = _columns(line, path, number, len(columns), "\t".join(columns).replace("\t", ", "))
            s1.append(cols[at[0]])
            s2.append(cols[at[1]])
            gold.append(_score(cols[at[2]], path, number))
    return PairSet("SICK-R", s1, s2, np.asarray(gold))


def load_pair_set(data_dir: str | Path, name: str) -> PairSet:
    """Load one STS set by its MTEB name (also ``STSBenchmark-dev`` and ``STSBenchmark-train``)."""
    root = Path(data_dir)
    if not root.is_dir():
        raise EvalDataError(f"evaluation data folder not found: {root}")
    if name.startswith("STS1") and len(name) == 5:
        return check_standard_size(_semeval_year(root / name.lower(), name), root / name.lower())
    if name in ("STSBenchmark", DEV, TRAIN):
        path = root / "stsb" / {"STSBenchmark": "sts-test.csv", DEV: "sts-dev.csv", TRAIN: "sts-train.csv"}[name]
        return check_standard_size(_stsb(path, name), path)
    if name == "SICK-R":
        return check_standard_size(_sick(root / "sick"), root / "sick")
    raise EvalDataError(f"unknown STS set {name!r}; known: {', '.join(EN_SETS)}, {DEV}, {TRAIN}")


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


def pair_cosines(encode, pairs: PairSet) -> np.ndarray:
    """Each pair's cosine under ``encode``, every distinct text encoded once."""
    texts = list(dict.fromkeys(pairs.s1 + pairs.s2))
    vectors = encode(texts)
    row = {t: i for i, t in enumerate(texts)}
    return paired_cosine(vectors[[row[t] for t in pairs.s1]], vectors[[row[t] for t in pairs.s2]])


def score_pair_set(encode, pairs: PairSet) -> float:
    return spearman_x100(pairs.gold, pair_cosines(encode, pairs))


def evaluate_sts(encode, data_dir: str | Path, names: tuple[str, ...] = EN_SETS) -> dict[str, float]:
    """Scores for each set and their mean ("avg")."""
    scores = {name: round(score_pair_set(encode, load_pair_set(data_dir, name)), 4) for name in names}
    scores["avg"] = round(float(np.mean([scores[n] for n in names])), 4)
    return scores
