"""Query weights (issue 82): each lever of ``swembed.pipeline.query_weights`` measured on the dev pairs, the chosen
settings fitted and written into a copy of a table, and the report's subsection.

Dev: the dev pairs of ``python -m lab.sci_splits`` (``dev-{medquad,scitldr,agnews,pseudo}.tsv.gz``), each query's
passage ranked among its own file's passages, nDCG@10 (``lab.hybrid_search.ndcg``), queries encoded with the
fitted query weights, passages as today. The choice: the settings with the best mean over the four sets.

    cp -r models/minilm-256-sci models/minilm-256-sci-qw
    python -m lab.query_weights models/minilm-256-sci-qw --json reports/mteb/query_weights.jsonl --write
    python -m lab.query_weights models/minilm-256-sci-qw --json reports/mteb/query_weights.jsonl --report-only \\
        --out reports/mteb/query_weights.md
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

import swembed
from lab.hybrid_search import SOURCES, ndcg
from lab.mteb_levers import pairs_dev
from swembed.pipeline.config import QueryWeightsConfig
from swembed.pipeline.parallel import read_parallel
from swembed.pipeline.query_weights import Pairs, fit_on, query_weighted
from swembed.pipeline.row_weights import write_row_weights
from swembed.pipeline.train import mine_negatives
from swembed.runtime.outputs import atomic_file

SPLITS = Path("models/corpora/sci")
TEST_FILE = Path("reports/mteb/query_weights-test.json")  # the chosen settings' test scores, written by hand
TRAIN = (SPLITS / "pairs.tsv.gz", SPLITS / "pseudo.tsv.gz")
BASE = QueryWeightsConfig(l2=0.01)  # the first base; dev chose l2 1, the package's default
# One lever at a time from BASE (the last rows: combinations of the best single levers)
LEVERS: dict[str, QueryWeightsConfig] = {
    "base": BASE,
    "no hard negatives": replace(BASE, negatives=0),
    "l2 0.1": replace(BASE, l2=0.1),
    "l2 1": replace(BASE, l2=1.0),
    "l2 3": replace(BASE, l2=3.0),
    "l2 10": replace(BASE, l2=10.0),
    "min 20 queries": replace(BASE, min_queries=20),
    "lr 0.01": replace(BASE, lr=0.01),
    "1 epoch": replace(BASE, epochs=1),
    "tau 0.1": replace(BASE, tau=0.1),
}


def knobs(config: QueryWeightsConfig) -> dict:
    """The fit's settings of ``config`` (its files are the recipe's)."""
    return {k: v for k, v in asdict(config).items() if k != "files"}


def dev_sets(model) -> dict[str, tuple[list[str], np.ndarray, np.ndarray]]:
    """Each dev set's queries, its passages' vectors (as today: passages keep their encoding) and the gold rows."""
    sets = {}
    for name in SOURCES:
        queries, passages, gold = pairs_dev(SPLITS / f"dev-{name}.tsv.gz")
        sets[name] = (queries, model.encode(passages), gold)
    return sets


def dev_scores(model, sets: dict, weights: np.ndarray | None) -> dict[str, float]:
    """Each dev set's nDCG@10 (queries with ``weights``, or as today), and their mean."""
    scores = {}
    for name, (queries, passages, gold) in sets.items():
        q = model.encode(queries) if weights is None else query_weighted(model, queries, weights)
        scores[name] = round(ndcg(q @ passages.T, gold), 2)
    scores["mean"] = round(float(np.mean([scores[s] for s in sets])), 2)
    return scores


def encoded_pairs(model, cache: Path | None, negatives: int) -> tuple[Pairs, np.ndarray]:
    """The training pairs encoded and their hard negatives mined (kept in ``cache``, an .npz, when given)."""
    if cache is not None and cache.is_file():
        mined = np.load(cache.with_suffix(".negatives.npy"))
        if mined.shape[1] >= negatives:
            return Pairs.load(cache), mined
    data = Pairs.encode(model, read_parallel([str(p) for p in TRAIN]))
    mined = mine_negatives(data.base_vectors(model), data.passages, data.gold, negatives)
    if cache is not None:
        data.save(cache)
        np.save(cache.with_suffix(".negatives.npy"), mined)
    return data, mined


def run_levers(model, names: list[str], out: Path | None, cache: Path | None, write: str | None,
               keep: Path | None = None) -> list[dict]:
    sets = dev_sets(model)
    rows = []
    if out is None or not out.is_file():
        rows.append({"lever": "no query weights", "dev": dev_scores(model, sets, None)})
        _record(rows[0], out)
    most = max(LEVERS[name].negatives for name in names)
    data, negatives = encoded_pairs(model, cache, most)
    print(f"{len(data.gold)} pairs encoded, {negatives.shape[1]} negatives mined", file=sys.stderr, flush=True)
    for name in names:
        started = time.time()
        weights, stats = fit_on(model, data, negatives, LEVERS[name], 0, lambda line: print(line, file=sys.stderr))
        stats["fit_s"] = round(time.time() - started, 1)
        rows.append({"lever": name, "settings": {**knobs(LEVERS[name]), "seed": 0}, "stats": stats,
                     "dev": dev_scores(model, sets, weights)})
        _record(rows[-1], out)
        if name == write:
            write_row_weights(model.path, "query", weights)
        if keep is not None:
            np.save(keep / f"{name.replace(' ', '-')}.npy", weights)
    return rows


def _record(row: dict, out: Path | None) -> None:
    print(json.dumps(row), flush=True)
    if out:
        with out.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")


def report(rows: list[dict], command: str) -> str:
    """The subsection of reports/mteb.md, "Search": each lever's dev nDCG@10."""
    lines = ["#### Query weights (issue 82): each lever on the dev pairs", "",
             f"<!-- generated: {command} -->", "",
             "Per-row query weights fitted on the training pairs with the rows frozen (`[query_weights]`, "
             "`swembed.pipeline.query_weights`); dev nDCG@10 of each query's passage among its file's passages, "
             "queries encoded with `kind=\"query\"`, passages as today. One lever at a time from the base "
             f"settings ({', '.join(f'{k} {v}' for k, v in knobs(BASE).items())}); the training "
             "pairs are the recipe's (`pairs.tsv.gz`, `pseudo.tsv.gz`: 99,000 pairs, 93,872 passages). Rows marked "
             "*(L2 per occurrence)* ran with the first form of the L2 term (the mean of s^2 over a batch's row "
             "occurrences, far weaker); the others with l2 s^2 per row a batch reads, over the batch size. fit s: "
             "wall seconds of the fit alone (pairs encoded and negatives mined once, cached), at nice 10 on the "
             "two shared cores beside a build, so mostly waiting. Rows *no fit*: a closed-form prior instead of a fit, "
             "w = (c / geometric mean of c)^-gamma on word rows (c: the build's `word_contexts`, sentences a word "
             "was seen in), 1 on piece and gram rows.", "",
             "| lever | " + " | ".join(SOURCES) + " | mean | rows moved | fit s |",
             "|---|" + "---:|" * (len(SOURCES) + 3)]
    for row in rows:
        stats = row.get("stats", {})
        lines.append(f"| {row['lever']} | " + " | ".join(f"{row['dev'][s]:.2f}" for s in SOURCES) +
                     f" | {row['dev']['mean']:.2f} | {stats.get('rows moved', '')} | {stats.get('fit_s', '')} |")
    test = TEST_FILE
    if test.is_file():
        found = json.loads(test.read_text(encoding="utf-8"))
        lines += ["", f"Test, the chosen settings only ({found['chosen']}): {found['text']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", help="a copy of the search table (its query weights are written with --write)")
    parser.add_argument("--levers", default=",".join(LEVERS), help="comma-separated names of LEVERS")
    parser.add_argument("--json", type=Path, help="append one JSON line per lever here; read by --report-only")
    parser.add_argument("--report-only", action="store_true", help="write the Markdown from --json, fit nothing")
    parser.add_argument("--out", type=Path, help="the Markdown subsection")
    parser.add_argument("--cache", type=Path, help="an .npz keeping the encoded pairs and their negatives between runs")
    parser.add_argument("--keep", type=Path, help="a folder to save each lever's weights in (LEVER.npy)")
    parser.add_argument("--write", metavar="LEVER", help="write this lever's weights into the table")
    args = parser.parse_args(argv)
    model = swembed.load(args.table)
    if args.report_only:
        rows = [json.loads(line) for line in args.json.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        rows = run_levers(model, args.levers.split(","), args.json, args.cache, args.write, args.keep)
    if args.out:
        command = f"python -m lab.query_weights {args.table} --json {args.json} --report-only --out {args.out}"
        with atomic_file(args.out, checked=False) as tmp:
            tmp.write_text(report(rows, command), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
