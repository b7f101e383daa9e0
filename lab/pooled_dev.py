"""A SciFact-sized dev view (issue 82): does the four-set dev mean rank search levers as SciFact does, and would a
larger pool of abstracts?

Every lever of issue 82 since the passage windows moved the four-set dev mean (``lab.sci_splits``' MedQuAD,
SciTLDR, AG News and pseudo-query sets) by less than 0.15 while moving SciFact by up to 1.6 either way. SciFact asks
300 claims against 5,183 abstracts; our SciTLDR dev set asks 295 one-sentence summaries (claim-like) against only
183 abstracts, where the table already finds 95% of them. The pooled set asks the same 295 summaries against every
held-out abstract: the SciTLDR abstracts plus the pseudo-query set's (those sharing a 12-word run with a SciTLDR
abstract left out, since they are the same paper), about as many as SciFact's. Nothing in it is trained on
(``lab.sci_splits`` holds every one of those abstracts out of the builds).

Each row is a table (or the reference with a corpus-IDF lever, ``lab.corpus_idf``) scored as the product scores with
windows (``lab.passage_windows``: the whole passage's cosine plus 0.5 times its best 8-word window's; the hybrid at
the product's alpha 0.8): the four-set dev mean, the pooled set and SciFact (test), dense and hybrid; then the rank
correlation (Spearman) of each dev view with SciFact across the rows. A diagnostic only: levers stay judged by the
four-set rule of ``lab.mteb_report``.

    python -m lab.pooled_dev models/minilm-256-sci-avx2b models/minilm-380-sci-v2 ... \\
        --json reports/mteb/pooled_dev.json --out reports/mteb/pooled_dev.md
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

import swembed
from lab import table_lever_main
from lab.corpus_idf import dev_mean, idf_dense, levers
from lab.heldout_retrieval import interval
from lab.hybrid_search import SOURCES, ndcg, scifact, trec_ndcg_per_query
from lab.mteb_levers import pairs_dev
from lab.passage_windows import table_bm25
from swembed.runtime.lexical import hybrid
from swembed.runtime.windows import ALPHA

RUN = 12  # words: a pseudo-query abstract sharing a run this long with a SciTLDR abstract is the same paper
POOLED = "pooled"


def word_runs(text: str) -> set[str]:
    words = re.findall(r"\w+", text.lower())
    return {" ".join(words[i:i + RUN]) for i in range(max(1, len(words) - RUN + 1))}


def pooled_set(dev: Path) -> tuple[list[str], list[str], np.ndarray]:
    """(SciTLDR dev queries, their abstracts then every pseudo-query abstract not sharing a word run with one, each
    query's passage)."""
    queries, passages, gold = pairs_dev(dev / "dev-scitldr.tsv.gz")
    seen = set().union(*map(word_runs, passages))
    others = [p for p in pairs_dev(dev / "dev-pseudo.tsv.gz")[1] if not word_runs(p) & seen]
    return queries, passages + others, gold


def measure(tables: list[str], dev: Path, scifact_folder: Path) -> dict:
    """{"pooled": {"queries": n, "passages": n}, "rows": {row: {set: [dense nDCG@10, hybrid nDCG@10]}}} with the
    product's windows, on the four dev sets, the pooled one and SciFact: each table's row, then the first table's
    with each corpus-IDF lever (the IDF over each set's passages)."""
    sets = {s: pairs_dev(dev / f"dev-{s}.tsv.gz") for s in SOURCES}
    sets[POOLED] = pooled_set(dev)
    doc_ids, docs, query_ids, queries, qrels = scifact(scifact_folder)
    sets["SciFact"] = (queries, docs, None)
    pool = {"queries": len(sets[POOLED][0]), "passages": len(sets[POOLED][1])}
    rows = [(Path(t).name, t, 0.0, ()) for t in tables] + [
        (f"{Path(tables[0]).name}, {lever}", tables[0], power, sides) for lever, power, sides in levers()[1:]]
    found: dict[str, dict[str, list[float]]] = {}
    per_query: dict[str, list[list[float]]] = {}  # SciFact's per query (dense, hybrid), for the paired intervals
    models = {table: swembed.load(table) for table in tables}
    bm25s: dict[tuple[str, str], np.ndarray] = {}  # (table, set): the same for each corpus-IDF row of a table
    for name, table, power, sides in rows:
        model = models[table]
        for which, (asked, passages, gold) in sets.items():
            dense = idf_dense(model, asked, passages, power, sides)
            if (table, which) not in bm25s:
                bm25s[table, which] = table_bm25(model, asked, passages)
            bm25 = bm25s[table, which]
            if gold is None:
                per_query[name] = [list(trec_ndcg_per_query(s, doc_ids, query_ids, qrels).values())
                                   for s in (dense, hybrid(dense, bm25, ALPHA))]
                found.setdefault(name, {})[which] = [100 * float(np.mean(q)) for q in per_query[name]]
            else:
                found.setdefault(name, {})[which] = [ndcg(s, gold) for s in (dense, hybrid(dense, bm25, ALPHA))]
        print(f"{name}: done", file=sys.stderr, flush=True)
    return {"pooled": pool, "rows": found, "SciFact per query": per_query}


def spearman(a: list[float], b: list[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def report(found: dict, tables: list[str], command: str) -> str:
    header = ["row", "dev mean, dense", "pooled, dense", "SciFact, dense", "dev mean, hybrid", "pooled, hybrid",
              "SciFact, hybrid"]
    lines = ["| " + " | ".join(header) + " | SciFact dense against the first row (95%) |",
             "|---" + "|---:" * (len(header) - 1) + "|---|"]
    views: dict[str, list[float]] = {h: [] for h in header[1:]}
    per_query = {name: np.asarray(q[0]) for name, q in found["SciFact per query"].items()}
    first = per_query[next(iter(found["rows"]))]
    for name, row in found["rows"].items():
        cells = [dev_mean(row, 0), row[POOLED][0], row["SciFact"][0], dev_mean(row, 1), row[POOLED][1],
                 row["SciFact"][1]]
        for h, c in zip(header[1:], cells):
            views[h].append(c)
        low, high = interval(per_query[name], first)
        gain = 100 * float((per_query[name] - first).mean())
        lines.append(f"| `{name}` | " + " | ".join(f"{c:.2f}" for c in cells) + f" | {gain:+.2f} [{low:+.2f}, "
                     f"{high:+.2f}] |")
    rho = {kind: (spearman(views[f"dev mean, {kind}"], views[f"SciFact, {kind}"]),
                  spearman(views[f"pooled, {kind}"], views[f"SciFact, {kind}"])) for kind in ("dense", "hybrid")}
    return "\n".join([
        "#### A SciFact-sized dev view (issue 82): the SciTLDR summaries among every held-out abstract", "",
        f"<!-- generated: {command} -->", "",
        f"`lab/pooled_dev.py`, its docstring: the {found['pooled']['queries']} SciTLDR dev summaries against "
        f"{found['pooled']['passages']:,} held-out abstracts (the dev set's plus the pseudo-query set's others), "
        "beside the four-set dev mean and SciFact (test), each row scored with the product's windows (8 words, "
        "gamma 0.5; the hybrid at alpha 0.8). nDCG@10. A diagnostic: the levers stay judged by the four-set rule.", "",
        *lines, "",
        f"Rank correlation with SciFact across these rows: dense, the four-set dev mean {rho['dense'][0]:+.2f}, the "
        f"pooled set {rho['dense'][1]:+.2f}; hybrid, {rho['hybrid'][0]:+.2f} and {rho['hybrid'][1]:+.2f}. The last "
        "column: each row's SciFact dense score minus the first row's, with its paired bootstrap 95% interval over "
        f"SciFact's {len(first)} queries (`lab.heldout_retrieval.interval`).", ""])


def main(argv: list[str] | None = None) -> int:
    """``python -m lab.pooled_dev TABLE... [--dev FOLDER] [--scifact FOLDER] [--json FILE] [--out FILE]``; the
    corpus-IDF levers run on the first table."""
    return table_lever_main("pooled_dev", __doc__, measure, report, argv, several=True)


if __name__ == "__main__":
    sys.exit(main())
