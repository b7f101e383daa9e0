"""Query expansion from the table's own neighbours (issue 82), no rebuild: the lexical channel also matches the
words nearest each query word in the table. A static table knows, for free, which words sit near a query word
("tumour" ~ "tumor", "carcinoma"; "mice" ~ "murine"); BM25 matches only the word itself. Here each query word with a
row of its own gets its ``k`` nearest word rows by cosine (rows of the letters a-z, at least ``MIN_LETTERS`` long,
seen in at least ``MIN_CONTEXTS`` sentences, a stem other than the word's), kept where the cosine is at least
``floor``; each kept neighbour's stemmed term is added to the query's BM25 terms at ``beta`` times its cosine times
the query word's own lexical weight (a term reached from several query words keeps its largest weight; terms the
query already holds and terms no passage holds are left out). The hybrid mixes that BM25 with the product's
windowed dense score as the product does (z-scores, alpha ``windows.ALPHA``).

Dev: the four held-out sets of ``lab.sci_splits`` (nDCG@10, each query's passage among its set's passages); the
lever is kept only where the hybrid's dev mean gains more than ``MIN_GAIN`` over the product's hybrid. SciFact
(test) for report only.

    python -m lab.query_expansion models/minilm-256-sci --json reports/mteb/query_expansion.json \\
        --out reports/mteb/query_expansion.md
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

from lab import lever_section, table_lever_main
from lab.corpus_idf import dev_mean, two_score_table
from lab.hybrid_search import lever_sets
from lab.passage_windows import PRODUCT_LEVER, lever_dense
from swembed.runtime.lexical import Lexical, hybrid, split_words
from swembed.runtime.stemmer import stem
from swembed.runtime.windows import ALPHA, WIDTH

KS = (3, 10)  # neighbours looked at per query word
FLOORS = (0.6, 0.7, 0.8)  # the least cosine a neighbour is kept at
BETAS = (0.25, 0.5, 1.0)  # a neighbour's weight: beta x cosine x its query word's lexical weight
MIN_LETTERS = 3
MIN_CONTEXTS = 5
MIN_GAIN = 0.1
PLAIN = "no expansion"
_LETTERS = re.compile(r"[a-z]+")


def candidate_rows(model, table: np.ndarray) -> tuple[list[str], np.ndarray]:
    """(the words a query word may be expanded to, their unit rows of ``table`` (the model's float rows))."""
    seen = model.word_contexts
    chosen = [(word, row) for word, row in model.tokenizer.vocab.items()
              if len(word) >= MIN_LETTERS and _LETTERS.fullmatch(word)
              and (seen is None or seen[row] >= MIN_CONTEXTS)]
    rows = table[[row for _, row in chosen]]
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    return [word for word, _ in chosen], rows


def neighbours(model, words: list[str], k: int) -> dict[str, list[tuple[str, float]]]:
    """Each of ``words`` with a row of its own: its ``k`` nearest candidate words of another stem, with cosines."""
    table = model.float_rows()
    names, rows = candidate_rows(model, table)
    stems = [stem(name) for name in names]
    vocab = model.tokenizer.vocab
    asked = [w for w in dict.fromkeys(words) if w in vocab]
    found: dict[str, list[tuple[str, float]]] = {}
    for start in range(0, len(asked), 1024):
        chunk = asked[start:start + 1024]
        q = table[[vocab[w] for w in chunk]]
        q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        sims = q @ rows.T
        top = np.argpartition(-sims, k + 4, axis=1)[:, : k + 4]  # a few spare for the word's own stem
        for i, word in enumerate(chunk):
            own = stem(word)
            order = top[i][np.argsort(-sims[i, top[i]])]
            found[word] = [(names[j], float(sims[i, j])) for j in order if stems[j] != own][:k]
    return found


def expanded_terms(model, lexical: Lexical, queries: list[str], near: dict, floor: float, beta: float
                   ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each query's BM25 term rows and weights (``Lexical.weighted_query_terms``) with its words' neighbours added."""
    terms, weights = lexical.weighted_query_terms(model, queries)
    lookup, vocab = lexical.lookup(), model.tokenizer.vocab
    lexical_weights = model.kind_weights.get("lexical")
    out_terms, out_weights = [], []
    for row, words in enumerate(split_words(model, queries)):
        own = terms[row]
        base = np.ones(len(own), np.float32) if weights is None else weights[row]
        held = set(own.tolist())
        added: dict[int, float] = {}
        for word in words:
            scale = 1.0 if lexical_weights is None or word not in vocab else float(lexical_weights[vocab[word]])
            for name, cosine in near.get(word, ()):
                term = lookup.get(stem(name))
                if cosine >= floor and term is not None and term not in held:
                    added[term] = max(added.get(term, 0.0), beta * cosine * scale)
        out_terms.append(np.concatenate([own, np.fromiter(added, np.int64, len(added))]))
        out_weights.append(np.concatenate([base, np.fromiter(added.values(), np.float32, len(added))]))
    return out_terms, out_weights


def levers() -> list[tuple[str, int, float, float]]:
    return [(PLAIN, 0, 1.0, 0.0), *[(f"k {k}, cosine >= {floor}, beta {beta}", k, floor, beta)
                                    for k in KS for floor in FLOORS for beta in BETAS]]


def measure(model, dev: Path, scifact_folder: Path) -> dict:
    """{lever: {set: [lexical nDCG@10, hybrid nDCG@10]}} for the plain lexical channel and each expansion."""
    found: dict[str, dict[str, list[float]]] = {}
    for name, asked, passages, score in lever_sets(dev, scifact_folder):
        dense = lever_dense(model, asked, passages, PRODUCT_LEVER)
        lexical = Lexical.build(model, passages)
        nearest = neighbours(model, [w for words in split_words(model, asked) for w in words], max(KS))
        near = {k: {word: listed[:k] for word, listed in nearest.items()} for k in KS}  # sorted: k's are a prefix
        for lever, k, floor, beta in levers():
            bm25 = lexical.scores(*expanded_terms(model, lexical, asked, near.get(k, {}), floor, beta))
            found.setdefault(lever, {})[name] = [score(bm25), score(hybrid(dense, bm25, ALPHA))]
        print(f"{name}: done", file=sys.stderr, flush=True)
    return found


def report(found: dict, table: str, command: str) -> str:
    plain = found[PLAIN]
    best = max(found, key=lambda lever: dev_mean(found[lever], 1))
    chosen = best if dev_mean(found[best], 1) - dev_mean(plain, 1) > MIN_GAIN else PLAIN
    lines = two_score_table(found, chosen, 1, ("lexical", "hybrid"), " hybrid")
    verdict = (f"Chosen on dev: **{chosen}** (hybrid dev mean {dev_mean(plain, 1):.2f} -> "
               f"{dev_mean(found[chosen], 1):.2f}; SciFact hybrid {plain['SciFact'][1]:.2f} -> "
               f"{found[chosen]['SciFact'][1]:.2f})." if chosen != PLAIN else
               f"Nothing passes the rule (hybrid dev mean up more than {MIN_GAIN}) over the plain lexical channel "
               f"(hybrid dev mean {dev_mean(plain, 1):.2f}; the best, {best}: {dev_mean(found[best], 1):.2f}); not "
               "in the product.")
    return lever_section(
        "#### Query expansion from the table's neighbours (issue 82)", command,
        f"Table `{table}`, no rebuild (`lab/query_expansion.py`, its docstring). The lexical channel (BM25 with the "
        "table's lexical weights) with each query word's k nearest word rows of another stem added at beta x "
        f"cosine, where the cosine reaches the floor; the hybrid mixes it with the product's windowed dense score "
        f"({WIDTH}-word windows, gamma 0.5) at alpha {ALPHA}. nDCG@10 per dev set (hybrid), the lexical channel's "
        "and the hybrid's dev means; SciFact (test) for report only. Sorted by the hybrid dev mean.", lines, verdict)


def main(argv: list[str] | None = None) -> int:
    return table_lever_main("query_expansion", __doc__, measure, report, argv)


if __name__ == "__main__":
    sys.exit(main())
