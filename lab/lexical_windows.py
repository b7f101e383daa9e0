"""Windows for the lexical channel too (issue 82), no rebuild: a passage's BM25 plus ``g`` times its best window's
BM25 (the windows of ``swembed.runtime.windows``, each indexed as a document of its own: BM25 over windows, their
own document frequencies and lengths), beside the product's windowed dense score, mixed as the product's hybrid does
(z-scores, ``alpha``). Does a rare query word matched inside one window, not just anywhere in a long passage, help
the hybrid?

Dev: the four held-out sets of ``lab.sci_splits`` (nDCG@10); the lever (``g``, then ``alpha``) chosen by the
hybrid's dev mean against the product's hybrid with windows (``g`` 0, alpha ``windows.ALPHA``), kept only where it
gains more than ``MIN_GAIN``. SciFact (test) for report only.

    python -m lab.lexical_windows models/minilm-256-sci-avx2b --json reports/mteb/lexical_windows.json \\
        --out reports/mteb/lexical_windows.md
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from lab import lever_section, table_lever_main
from lab.hybrid_search import SOURCES, lever_sets
from swembed.runtime.lexical import Lexical, hybrid
from swembed.runtime.windows import ALPHA, WIDTH, word_windows

WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0)  # g: the best window's BM25 beside the passage's
ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9)
MIN_GAIN = 0.1
QUERIES_AT_ONCE = 256  # queries x windows BM25 scores held at once


def channels(model, queries: list[str], passages: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the product's windowed dense scores, the passages' BM25, each passage's best window's BM25 (its own BM25
    over the windows' statistics where it has no window: the passage read as its one window)), (queries, passages)."""
    index = model.index(passages, windows=WIDTH)
    q = model.encode(queries, kind="query")
    dense = index.dense(q, q @ np.asarray(index.vectors).T, np.arange(len(passages)))
    terms, weights = index.postings().weighted_query_terms(model, queries)
    whole = index.postings().scores(terms, weights)
    owned = [word_windows(p, WIDTH) or [p] for p in passages]
    starts = np.r_[0, np.cumsum([len(found) for found in owned])[:-1]]
    lexical = Lexical.build(model, [w for found in owned for w in found])
    terms, weights = lexical.weighted_query_terms(model, queries)
    best = np.empty_like(whole)
    for start in range(0, len(queries), QUERIES_AT_ONCE):
        rows = slice(start, start + QUERIES_AT_ONCE)
        scores = lexical.scores(terms[rows], None if weights is None else weights[rows])
        best[rows] = np.maximum.reduceat(scores, starts, axis=1)
    return dense, whole, best


def measure(model, dev: Path, scifact_folder: Path) -> dict:
    """{"g W, alpha A": {set: nDCG@10}} for every pair, the dev sets and SciFact."""
    found: dict[str, dict[str, float]] = {}
    for name, asked, passages, score in lever_sets(dev, scifact_folder):
        dense, whole, best = channels(model, asked, passages)
        for g in WEIGHTS:
            lexical = whole + np.float32(g) * best
            for alpha in ALPHAS:
                mixed = hybrid(dense, lexical, alpha)
                found.setdefault(f"g {g}, alpha {alpha}", {})[name] = score(mixed)
        print(f"{name}: done", file=sys.stderr, flush=True)
    return found


def dev_mean(row: dict[str, float]) -> float:
    return float(np.mean([row[s] for s in SOURCES]))


def report(found: dict, table: str, command: str) -> str:
    base = f"g 0.0, alpha {ALPHA}"
    best = max(found, key=lambda lever: dev_mean(found[lever]))
    chosen = best if dev_mean(found[best]) - dev_mean(found[base]) > MIN_GAIN else base
    lines = ["| lever | " + " | ".join(SOURCES) + " | dev mean | SciFact |",
             "|---" + "|---:" * (len(SOURCES) + 2) + "|"]
    for lever in sorted(found, key=lambda name: -dev_mean(found[name])):
        row, mark = found[lever], "**" if lever == chosen else ""
        lines.append(f"| {mark}{lever}{mark} | " + " | ".join(f"{row[s]:.2f}" for s in SOURCES)
                     + f" | {dev_mean(row):.2f} | {row['SciFact']:.2f} |")
    verdict = (f"Chosen on dev: **{chosen}** (hybrid dev mean {dev_mean(found[base]):.2f} -> "
               f"{dev_mean(found[chosen]):.2f}; SciFact {found[base]['SciFact']:.2f} -> "
               f"{found[chosen]['SciFact']:.2f})." if chosen != base else
               f"Nothing passes the rule of {MIN_GAIN} over the product's hybrid with windows ({base}: dev mean "
               f"{dev_mean(found[base]):.2f}" + ("" if best == base else
                                                 f"; the best, {best}: {dev_mean(found[best]):.2f}")
               + "); not in the product: a rare word matched within one window adds nothing the windowed dense "
               "score and the passage's BM25 do not already give.")
    return lever_section(
        "#### Windows for the lexical channel too (issue 82): BM25 plus g times the best window's", command,
        f"Table `{table}`, no rebuild (`lab/lexical_windows.py`, its docstring). The hybrid of the product's "
        f"windowed dense score ({WIDTH}-word windows) and a passage's BM25 plus g times its best window's BM25 (the "
        "windows indexed as documents of their own), nDCG@10 on the held-out dev sets; SciFact (test) for report "
        "only. g 0 is the product's hybrid. Sorted by the dev mean; the chosen lever in bold.", lines, verdict)


def main(argv: list[str] | None = None) -> int:
    return table_lever_main("lexical_windows", __doc__, measure, report, argv)


if __name__ == "__main__":
    sys.exit(main())
