"""Corpus IDF in the dense mean (issue 82), no rebuild: each word's weight in a text's mean multiplied by
``idf ** p``, its inverse document frequency over the passages searched (BM25's ``ln(1 + (N - df + 0.5) / (df +
0.5))``, over its mean among the rows the passages hold; a row no passage holds gets the idf of ``df`` 0), for the
passages (and their windows), the queries, or both. The table's rows already carry a salience learned on general
text; does the corpus's own rarity (a term every abstract repeats weighs little) help the query find its passage?

Scored as the product scores with windows (``lab.passage_windows``: the whole passage's cosine plus 0.5 times its
best 8-word window's; the hybrid at the product's alpha 0.8 with the table's lexical channel). Dev: the four
held-out sets of ``lab.sci_splits`` (nDCG@10, each query's passage among its set's passages, the IDF over that
set's passages); a lever is adopted where the dense dev mean gains more than ``MIN_GAIN`` and the hybrid's does not
fall. SciFact (test, the IDF over its corpus) for report only.

    python -m lab.corpus_idf models/minilm-256-sci-avx2b --json reports/mteb/corpus_idf.json \\
        --out reports/mteb/corpus_idf.md
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from lab import lever_section, table_lever_main
from lab.hybrid_search import SOURCES, lever_sets
from lab.passage_windows import PRODUCT_LEVER as LEVER
from lab.passage_windows import lever_dense, table_bm25
from swembed.runtime.lexical import hybrid
from swembed.runtime.windows import ALPHA, WIDTH

POWERS = (0.25, 0.5, 1.0)
SIDES = (("query", "document"), ("document",), ("query",))
MIN_GAIN = 0.1
PLAIN = "no idf"
PLURAL = {"query": "queries", "document": "documents"}


def corpus_idf(model, passages: list[str]) -> np.ndarray:
    """(rows,) float32: each table row's BM25 idf over ``passages``, over its mean among the rows they hold."""
    batch = model.tokenizer.encode_batch(passages)
    owner = np.repeat(np.arange(len(passages)), batch.lengths)
    held = np.unique(np.stack([owner, np.asarray(batch.ids)]), axis=1)[1]  # each (passage, row) once
    df = np.bincount(held, minlength=model.rows).astype(np.float64)
    idf = np.log1p((len(passages) - df + 0.5) / (df + 0.5))
    return (idf / idf[df > 0].mean()).astype(np.float32)


def idf_dense(model, queries: list[str], passages: list[str], power: float, sides: tuple[str, ...]) -> np.ndarray:
    """The product's windowed dense scores, (queries, passages), with each of ``sides``' texts ("query",
    "document") weighed by the passages' idf ** ``power``."""
    own = dict(model.kind_weights)
    idf = corpus_idf(model, passages) if sides else None
    try:
        model.kind_weights = {**own, **{side: idf ** np.float32(power) for side in sides}}
        return lever_dense(model, queries, passages, LEVER)
    finally:
        model.kind_weights = own


def idf_scores(model, queries: list[str], passages: list[str], power: float,
               sides: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(``idf_dense``, BM25 with the table's lexical weights): the lexical channel does not see the idf."""
    return idf_dense(model, queries, passages, power, sides), table_bm25(model, queries, passages)


def levers() -> list[tuple[str, float, tuple[str, ...]]]:
    """(name, power, sides) of the plain score and of each corpus-IDF lever."""
    return [(PLAIN, 0.0, ()), *[(f"idf^{p}, {' and '.join(PLURAL[s] for s in side)}", p, side)
                                for p in POWERS for side in SIDES]]


def measure(model, dev: Path, scifact_folder: Path) -> dict:
    """{lever: {set: [dense nDCG@10, hybrid nDCG@10]}} for the plain score and each (power, side)."""
    found: dict[str, dict[str, list[float]]] = {}
    for name, asked, passages, score in lever_sets(dev, scifact_folder):
        bm25 = table_bm25(model, asked, passages)  # the same for every lever
        for lever, power, sides in levers():
            dense = idf_dense(model, asked, passages, power, sides)
            found.setdefault(lever, {})[name] = [score(dense), score(hybrid(dense, bm25, ALPHA))]
        print(f"{name}: done", file=sys.stderr, flush=True)
    return found


def dev_mean(row: dict[str, list[float]], column: int) -> float:
    return float(np.mean([row[s][column] for s in SOURCES]))


def two_score_table(found: dict, chosen: str, column: int, names: tuple[str, str], set_label: str = "") -> list[str]:
    """The Markdown rows of ``found`` ({lever: {set: [first score, second score]}}, the dev ``SOURCES`` and
    ``SciFact``): each dev set's score ``column``, both dev means and both SciFact scores (``names`` the two
    scores), sorted by the dev mean of ``column``, ``chosen`` in bold; ``set_label`` follows each set's name."""
    first, second = names
    lines = ["| lever | " + " | ".join(f"{s}{set_label}" for s in SOURCES) + f" | {first} dev mean | {second} dev mean "
             f"| SciFact {first} | SciFact {second} |", "|---" + "|---:" * (len(SOURCES) + 4) + "|"]
    for lever in sorted(found, key=lambda name: -dev_mean(found[name], column)):
        row, mark = found[lever], "**" if lever == chosen else ""
        lines.append(f"| {mark}{lever}{mark} | " + " | ".join(f"{row[s][column]:.2f}" for s in SOURCES)
                     + f" | {dev_mean(row, 0):.2f} | {dev_mean(row, 1):.2f} | {row['SciFact'][0]:.2f} "
                     f"| {row['SciFact'][1]:.2f} |")
    return lines


def report(found: dict, table: str, command: str) -> str:
    plain = found[PLAIN]
    passing = [lever for lever, row in found.items() if dev_mean(row, 0) - dev_mean(plain, 0) > MIN_GAIN
               and dev_mean(row, 1) >= dev_mean(plain, 1)]
    chosen = max(passing, key=lambda lever: dev_mean(found[lever], 0)) if passing else PLAIN
    best = max(found, key=lambda lever: dev_mean(found[lever], 0))
    top = max(found, key=lambda lever: found[lever]["SciFact"][0])
    lines = two_score_table(found, chosen, 0, ("dense", "hybrid"))
    verdict = (f"Chosen on dev: **{chosen}** (dense dev mean {dev_mean(plain, 0):.2f} -> "
               f"{dev_mean(found[chosen], 0):.2f})." if chosen != PLAIN else
               f"Nothing passes the rule (dense dev mean up more than {MIN_GAIN}, hybrid dev mean not down) over the "
               f"plain score ({dev_mean(plain, 0):.2f} / {dev_mean(plain, 1):.2f}; the best dense dev mean, {best}: "
               f"{dev_mean(found[best], 0):.2f} / {dev_mean(found[best], 1):.2f}); not in the product (the "
               f"best at test, {top}: SciFact dense {found[top]['SciFact'][0]:.2f} against {plain['SciFact'][0]:.2f}, "
               f"dev mean {dev_mean(found[top], 0):.2f}: what SciFact rewards, the dev sets do not).")
    return lever_section(
        "#### Corpus IDF in the dense mean (issue 82)", command,
        f"Table `{table}`, no rebuild (`lab/corpus_idf.py`, its docstring). Each word's weight in the mean times "
        "idf^p over the passages searched, for the passages (and their windows), the queries or both; scored as the "
        f"product scores with windows ({WIDTH} words, gamma 0.5; the hybrid at alpha {ALPHA}). Dense nDCG@10 per "
        "dev set; SciFact (test) for report only. Sorted by the dense dev mean.", lines, verdict)


def main(argv: list[str] | None = None) -> int:
    return table_lever_main("corpus_idf", __doc__, measure, report, argv)


if __name__ == "__main__":
    sys.exit(main())
