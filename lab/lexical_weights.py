"""Learned match weights for the lexical channel (issue 82, direction 2: "BM25's IDF to start, then weights learned
on the pairs"), and the hybrid against the teacher alone on the held-out sets.

One weight per term (the stemmed words ``swembed.runtime.lexical`` indexes), multiplying the term's BM25 weight
(idf times saturated term frequency) wherever a query holds it; terms the training pairs never show keep 1. Fitted
on the search recipe's training pairs (``pairs.tsv.gz`` and ``pseudo.tsv.gz`` of ``lab.sci_splits``: 99k query ->
passage pairs, 94k distinct passages): BM25 over the training passages mines each query's ``NEGATIVES`` best other
passages; the loss is cross-entropy of the query's own passage against them, on BM25 scores with the weights
(``w = softplus(u + c)``, ``w = 1`` at ``u = 0``) times one learned scale, plus ``l2 * sum(u^2)`` over the terms of a
batch. Dev: the four held-out sets (``dev-{medquad,scitldr,agnews,pseudo}.tsv.gz``), each query's passage among its
own set's passages, BM25 and the hybrid (z-scores, ``alpha``) with and without the weights; ``l2`` and ``alpha`` are
chosen on their mean. Test (report only): SciFact through this module's pytrec_eval nDCG@10 (``lab.hybrid_search``'s,
which gives mteb's dense score to 0.01).

The teacher comparison: the issue asks the hybrid to beat the teacher alone on the outside evaluator's held-out
question -> passage sets; the nearest we hold are these four, where ``lab.heldout_retrieval`` scored the MiniLM
teacher per query (``reports/heldout-retrieval.json``, entry ``minilm``). Each hybrid is set beside it with a paired
bootstrap 95% interval.

    python -m lab.lexical_weights models/minilm-256-sci --json reports/mteb/lexical_weights.json \\
        --out reports/mteb/lexical_weights.md
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy import sparse

import swembed
from lab.heldout_retrieval import interval
from lab.hybrid_search import ALPHAS, SOURCES, ndcg, ndcg_per_query, scifact, trec_ndcg
from lab.mteb_levers import pairs_dev
from swembed.runtime.lexical import ALPHA, Lexical, standardised
from swembed.runtime.outputs import atomic_file

TRAINING = ("models/corpora/sci/pairs.tsv.gz", "models/corpora/sci/pseudo.tsv.gz")
NEGATIVES = 15  # BM25-mined passages a query's own is set against
L2S = (3e-5, 1e-4, 3e-4, 1e-3)
EPOCHS = 3
BATCH = 512
LR = 0.02
SCALE = float(np.exp(-1.0))  # the scale's start: BM25 sums of ~10-30 into logits of a few units
SHIFT = float(np.log(np.e - 1))  # softplus(SHIFT) = 1
MIN_GAIN = 0.1  # dev mean points a lever must gain to be kept (as lab.hybrid_search)
MINED_AT_ONCE = 2000
TEACHER = "minilm"


def read_pairs(paths: list[Path]) -> tuple[list[str], list[str], np.ndarray]:
    """(queries, distinct passages, each query's passage row)."""
    queries, passages = [], []
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                query, passage = line.rstrip("\n").split("\t")[:2]
                queries.append(query)
                passages.append(passage)
    rows = {p: i for i, p in enumerate(dict.fromkeys(passages))}
    return queries, list(rows), np.array([rows[p] for p in passages])


def weight_matrix(lexical: Lexical) -> sparse.csr_matrix:
    """(terms, passages) BM25 weights: the postings are CSR already."""
    return sparse.csr_matrix((lexical.weights(), lexical.docs, lexical.offsets),
                             shape=(len(lexical.terms), lexical.passages))


def query_matrix(term_lists: list[np.ndarray], terms: int) -> sparse.csr_matrix:
    """(queries, terms) counts of each query's terms (a repeated word counts each time, as ``Lexical.scores``)."""
    indptr = np.cumsum([0, *map(len, term_lists)])
    indices = np.concatenate(term_lists) if term_lists else np.zeros(0, np.int64)
    matrix = sparse.csr_matrix((np.ones(len(indices), np.float32), indices, indptr), shape=(len(term_lists), terms))
    matrix.sum_duplicates()
    return matrix


def mine(lexical: Lexical, term_lists: list[np.ndarray], gold: np.ndarray, negatives: int) -> np.ndarray:
    """(queries, 1 + negatives): each query's own passage, then its ``negatives`` best other passages by BM25."""
    weights, queries = weight_matrix(lexical), query_matrix(term_lists, len(lexical.terms))
    out = np.empty((len(gold), 1 + negatives), dtype=np.int64)
    for start in range(0, len(gold), MINED_AT_ONCE):
        scores = (queries[start : start + MINED_AT_ONCE] @ weights).toarray()
        own = gold[start : start + MINED_AT_ONCE]
        scores[np.arange(len(own)), own] = -np.inf
        out[start : start + len(own), 0] = own
        out[start : start + len(own), 1:] = np.argpartition(-scores, negatives, axis=1)[:, :negatives]
    return out


def features(lexical: Lexical, term_lists: list[np.ndarray], candidates: np.ndarray) -> tuple[np.ndarray, ...]:
    """(candidate row, term, BM25 weight) of every query term found in a candidate passage; candidate row =
    query * width + column of ``candidates``."""
    n, width = lexical.passages, candidates.shape[1]
    keys = np.repeat(np.arange(len(lexical.terms), dtype=np.int64), np.diff(lexical.offsets)) * n + lexical.docs
    weights = lexical.weights()
    rows, terms, values = [], [], []
    for q, query_terms in enumerate(term_lists):
        if not len(query_terms):
            continue
        wanted = (query_terms[None, :] * n + candidates[q][:, None]).ravel()
        at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
        found = keys[at] == wanted
        rows.append(np.repeat(q * width + np.arange(width), len(query_terms))[found])
        terms.append(np.tile(query_terms, width)[found])
        values.append(weights[at[found]])
    return np.concatenate(rows), np.concatenate(terms), np.concatenate(values)


def fit(rows: np.ndarray, terms: np.ndarray, values: np.ndarray, queries: int, width: int, n_terms: int,
        l2: float, seed: int = 0) -> np.ndarray:
    """Each term's weight (``n_terms``,) float32, fitted as the module's doc says."""
    torch.manual_seed(seed)
    rows_t, terms_t, values_t = map(torch.from_numpy, (rows, terms, values.astype(np.float32)))
    starts = torch.searchsorted(rows_t, torch.arange(0, queries * width + 1, width))
    u = torch.zeros(n_terms, requires_grad=True)
    log_scale = torch.tensor(float(np.log(SCALE)), requires_grad=True)
    optimizer = torch.optim.Adam([u, log_scale], lr=LR)
    rng = np.random.default_rng(seed)
    for _ in range(EPOCHS):
        order = rng.permutation(queries)
        for start in range(0, queries, BATCH):
            batch = order[start : start + BATCH]
            spans = [torch.arange(starts[q], starts[q + 1]) for q in batch]
            sizes = torch.tensor([len(s) for s in spans])
            at = torch.cat(spans)
            local = torch.repeat_interleave(torch.arange(len(batch)), sizes) * width + rows_t[at] % width
            w = torch.nn.functional.softplus(u[terms_t[at]] + SHIFT)
            scores = torch.zeros(len(batch) * width).index_add(0, local, w * values_t[at]).view(len(batch), width)
            own = torch.zeros(len(batch), dtype=torch.long)  # column 0: the query's own passage
            loss = torch.nn.functional.cross_entropy(scores * log_scale.exp(), own)
            loss = loss + l2 * (u[torch.unique(terms_t[at])] ** 2).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return torch.nn.functional.softplus(u + SHIFT).detach().numpy()


def weighted_bm25(model, passages: list[str], queries: list[str], weight_of: dict[str, float]) -> np.ndarray:
    """BM25 of ``queries`` over ``passages`` at the product's settings, each term's weight times ``weight_of`` its
    term (1 where absent)."""
    lexical = Lexical.build(model, passages)
    if weight_of:
        per_term = np.array([weight_of.get(t, 1.0) for t in lexical.terms], dtype=np.float32)
        lexical._weights = (lexical.k1, lexical.b, lexical.weights() * np.repeat(per_term, np.diff(lexical.offsets)))
    return lexical.scores(lexical.query_terms(model, queries))


def mixed(cosines: np.ndarray, bm25: np.ndarray, alpha: float) -> np.ndarray:
    return alpha * standardised(cosines) + (1 - alpha) * standardised(bm25)


def dev_scores(model, sets: dict, weight_of: dict[str, float], cosines: dict) -> dict:
    """Per set: BM25's nDCG@10 and the hybrid's at each alpha of ``ALPHAS`` (x100), and per-query hybrid nDCG at
    every alpha (for the teacher comparison)."""
    out = {}
    for name, (queries, passages, gold) in sets.items():
        bm25 = weighted_bm25(model, passages, queries, weight_of)
        hybrid = {a: ndcg_per_query(mixed(cosines[name], bm25, a), gold) for a in ALPHAS}
        out[name] = {"bm25": ndcg(bm25, gold), "hybrid": {a: 100 * float(v.mean()) for a, v in hybrid.items()},
                     "per_query": hybrid}
    return out


def mean_over_sets(scores: dict, key: str, alpha: float | None = None) -> float:
    return float(np.mean([s[key] if alpha is None else s[key][alpha] for s in scores.values()]))


def test_scores(model, folder: Path, weight_of: dict[str, float], alphas: list[float]) -> dict:
    """SciFact nDCG@10: BM25 with the weights, and the hybrid at each alpha named."""
    doc_ids, docs, query_ids, queries, qrels = scifact(folder)
    cosines = model.encode(queries) @ model.encode(docs).T
    bm25 = weighted_bm25(model, docs, queries, weight_of)
    row = {"bm25": trec_ndcg(bm25, doc_ids, query_ids, qrels)}
    for alpha in alphas:
        row[f"hybrid {alpha}"] = trec_ndcg(mixed(cosines, bm25, alpha), doc_ids, query_ids, qrels)
    return row


def measure(table: str, dev: Path, scifact_folder: Path, heldout: Path, l2s: tuple[float, ...]) -> dict:
    """Every lever's dev and test scores, the choice, and the teacher comparison."""
    start = time.time()
    model = swembed.load(table)
    queries, passages, gold = read_pairs([Path(p) for p in TRAINING])
    lexical = Lexical.build(model, passages)
    term_lists = lexical.query_terms(model, queries)
    candidates = mine(lexical, term_lists, gold, NEGATIVES)
    rows, terms, values = features(lexical, term_lists, candidates)
    print(f"{len(queries)} pairs, {len(passages)} passages, {len(lexical.terms)} terms, {len(rows)} features, "
          f"{time.time() - start:.0f} s", flush=True)
    sets = {s: pairs_dev(dev / f"dev-{s}.tsv.gz") for s in SOURCES}
    cosines = {s: model.encode(q) @ model.encode(p).T for s, (q, p, _) in sets.items()}
    levers: dict[str, dict] = {"BM25's idf alone": {"weights": {}}}
    for l2 in l2s:
        t = time.time()
        w = fit(rows, terms, values, len(queries), candidates.shape[1], len(lexical.terms), l2)
        levers[f"learned, l2 {l2:g}"] = {"weights": {lexical.terms[i]: float(w[i]) for i in np.flatnonzero(
            np.abs(w - 1) > 1e-6)}, "fit s": time.time() - t, "moved": int((np.abs(w - 1) > 0.05).sum())}
    for name, lever in levers.items():
        lever["dev"] = dev_scores(model, sets, lever["weights"], cosines)
        d = lever["dev"]
        lever["alpha"] = max(ALPHAS, key=lambda a: mean_over_sets(d, "hybrid", a))
        print(name, f"BM25 {mean_over_sets(d, 'bm25'):.2f}", f"hybrid@{ALPHA} {mean_over_sets(d, 'hybrid', ALPHA):.2f}",
              f"best alpha {lever['alpha']}", flush=True)
    base = levers["BM25's idf alone"]
    best = max((n for n in levers if n != "BM25's idf alone"),
               key=lambda n: mean_over_sets(levers[n]["dev"], "hybrid", ALPHA))
    gain = mean_over_sets(levers[best]["dev"], "hybrid", ALPHA) - mean_over_sets(base["dev"], "hybrid", ALPHA)
    kept = gain > MIN_GAIN
    for name in ("BM25's idf alone", best):
        lever = levers[name]
        lever["test"] = test_scores(model, scifact_folder, lever["weights"], sorted({ALPHA, lever["alpha"]}))
    teacher = {s: np.asarray(v) for s, v in json.loads(heldout.read_text())[TEACHER].items() if s in SOURCES}
    comparison = {}
    for name in ("BM25's idf alone", best):
        for alpha in sorted({ALPHA, levers[name]["alpha"]}):
            per_set = {s: levers[name]["dev"][s]["per_query"][alpha] for s in SOURCES}
            comparison[f"{name}, alpha {alpha}"] = {
                s: (100 * float(per_set[s].mean()), interval(per_set[s], teacher[s])) for s in SOURCES}
    return {"table": table, "levers": levers, "best": best, "kept": bool(kept), "teacher": {
        s: 100 * float(v.mean()) for s, v in teacher.items()}, "comparison": comparison,
        "training": {"pairs": len(queries), "passages": len(passages), "terms": len(lexical.terms)}}


def render(found: dict, command: str) -> str:
    levers, teacher = found["levers"], found["teacher"]
    lines = ["#### Learned lexical match weights (issue 82): each lever on the dev pairs", "",
             f"<!-- generated: {command} -->", "",
             "One weight per stemmed term multiplying its BM25 weight, fitted on the search recipe's training pairs "
             f"({found['training']['pairs']:,} pairs, {found['training']['passages']:,} passages, "
             f"{found['training']['terms']:,} terms) against {NEGATIVES} BM25-mined negatives a query, "
             f"{EPOCHS} epochs (`lab/lexical_weights.py`, its docstring). Dev: nDCG@10 of each query's passage among "
             f"its set's passages, BM25 alone and the hybrid at the product's alpha {ALPHA} (the alpha best on dev in "
             f"brackets), table `{found['table']}`.", "",
             "| lever | BM25 medquad | scitldr | agnews | pseudo | BM25 mean | hybrid mean | best alpha: hybrid mean "
             "| terms moved > 0.05 | fit s |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, lever in levers.items():
        d = lever["dev"]
        fitted = f"{lever['moved']} | {lever['fit s']:.0f}" if "fit s" in lever else " | "
        lines.append(f"| {name} | " + " | ".join(f"{d[s]['bm25']:.2f}" for s in SOURCES)
                     + f" | {mean_over_sets(d, 'bm25'):.2f} | {mean_over_sets(d, 'hybrid', ALPHA):.2f} | "
                     f"{lever['alpha']}: {mean_over_sets(d, 'hybrid', lever['alpha']):.2f} | {fitted} |")
    best = found["best"]
    verdict = "passes the dev rule: gains more than" if found["kept"] else "fails the dev rule: gains at most"
    lines += ["", f"Best on dev: **{best}** ({verdict} "
              f"{MIN_GAIN} on the hybrid's dev mean at alpha {ALPHA}). The product's lexical channel does not carry "
              "per-term weights yet (they would travel with a table and its saved indexes, in Python and JS). "
              "SciFact test (report only; this module's pytrec_eval nDCG@10):", "",
              "| lever | BM25 | hybrid |", "|---|---:|---:|"]
    for name in ("BM25's idf alone", best):
        test = levers[name]["test"]
        lines.append(f"| {name} | {test['bm25']:.2f} | " + ", ".join(
            f"{v:.2f} (alpha {k.split()[-1]})" for k, v in test.items() if k.startswith("hybrid")) + " |")
    lines += ["", "**The hybrid against the teacher alone on the held-out sets** (the MiniLM teacher's dense nDCG@10 "
              "per query from `reports/heldout-retrieval.json`; in brackets the hybrid's difference from it with a "
              "paired bootstrap 95% interval):", "",
              "| | " + " | ".join(SOURCES) + " | mean |", "|---" * (len(SOURCES) + 2) + "|",
              f"| teacher `{TEACHER}` alone | " + " | ".join(f"{teacher[s]:.2f}" for s in SOURCES)
              + f" | {np.mean([teacher[s] for s in SOURCES]):.2f} |"]
    for name, per_set in found["comparison"].items():
        lines.append(f"| hybrid, {name} | " + " | ".join(
            f"{v:.2f} ({v - teacher[s]:+.2f} [{lo:+.2f}, {hi:+.2f}])" for s, (v, (lo, hi)) in per_set.items())
            + f" | {np.mean([v for v, _ in per_set.values()]):.2f} |")
    return "\n".join(lines) + "\n"


def jsonable(found: dict) -> dict:
    """``found`` without the per-query arrays and the weights (the report's numbers only)."""
    levers = {name: {k: v for k, v in lever.items() if k != "weights"} for name, lever in found["levers"].items()}
    for lever in levers.values():
        lever["dev"] = {s: {"bm25": d["bm25"], "hybrid": {str(a): v for a, v in d["hybrid"].items()}}
                        for s, d in lever["dev"].items()}
    return {**found, "levers": levers}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", help="the search table (its tokeniser splits the terms; its cosines make the hybrid)")
    parser.add_argument("--dev", type=Path, default=Path("models/corpora/sci"), help="lab.sci_splits' output")
    parser.add_argument("--scifact", type=Path, default=Path("../shared/data/eval-mteb/SciFact"))
    parser.add_argument("--heldout", type=Path, default=Path("reports/heldout-retrieval.json"),
                        help="lab.heldout_retrieval's per-query scores (the teacher's entry)")
    parser.add_argument("--l2", type=float, nargs="+", default=list(L2S))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--out", type=Path, help="the Markdown subsection")
    args = parser.parse_args(argv)
    found = measure(args.table, args.dev, args.scifact, args.heldout, tuple(args.l2))
    command = f"python -m lab.lexical_weights {args.table}" + (f" --json {args.json}" if args.json else "") + (
        f" --out {args.out}" if args.out else "")
    text = render(found, command)
    print(text)
    for path, body in ((args.json, json.dumps(jsonable(found), indent=1) + "\n"), (args.out, text)):
        if path:
            with atomic_file(path, overwrite=True) as tmp:
                Path(tmp).write_text(body, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
