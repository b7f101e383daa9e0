"""Windows read for a shortlist (issue 82): a dense search with passage windows over more than ``SHORTLIST``
passages reads the windows of each query's ``SHORTLIST`` highest cosines alone; any other passage scores as one
without windows, (1 + gamma) times its cosine (``swembed.runtime.windows.shortlisted``). Here, against reading every
window (``windowed`` over every passage): nDCG@10 at each shortlist size on the held-out dev sets and SciFact (test;
its documents as mteb joins them), the share of each query's top 10 that is the same, and the milliseconds the
scoring takes a query beside the passages' cosines (one thread: the script starts itself again on one where it
does not run so; one run). A dev set of more than ``QUERIES`` queries
is scored on a seeded sample of them (each query's passage among every passage of its set).

The index is the product's (``model.index(passages, windows=WIDTH)``), the scores its functions'.

    python -m lab.window_shortlist models/minilm-256-sci-avx2b \\
        --json reports/mteb/window_shortlist.json --out reports/mteb/window_shortlist.md
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

import swembed
from lab import command_line, publish, save_json
from lab.bench_search import on_one_thread
from lab.hybrid_search import SOURCES, ndcg, scifact, trec_ndcg
from lab.mteb_levers import pairs_dev
from swembed.runtime.search import scores_at, top_hits
from swembed.runtime.windows import SHORTLIST, SHORTLIST_FROM, WIDTH, shortlisted, shortlists, windowed

SIZES = (50, 100, 200, 500, SHORTLIST)
TOP = 10
QUERIES = 500  # a dev set's queries scored at most (seeded sample)
SEED = 0


def timed(work: Callable[[], np.ndarray]) -> tuple[np.ndarray, float]:
    """(what ``work`` returns, its wall seconds)."""
    began = time.perf_counter()
    out = work()
    return out, time.perf_counter() - began


def one_set(model, queries: list[str], passages: list[str], score: Callable[[np.ndarray], float]) -> dict:
    """Every window read, then each shortlist size: nDCG@10, the share of the top 10 kept, seconds a query."""
    index = model.index(passages, windows=WIDTH, lexical=False)
    windows = index.windows
    assert windows is not None
    q = model.encode(queries, kind="query")
    whole = q @ np.asarray(index.vectors).T

    def cosines_of(asked: np.ndarray, rows: np.ndarray | slice) -> np.ndarray:
        return scores_at(asked, windows.vectors, windows.scales, rows)

    def read_shortlists(size: int) -> np.ndarray:  # the shortlists chosen, then their windows read
        return shortlisted(whole, q, windows.offsets, shortlists(whole, size), cosines_of, windows.gamma)

    every, seconds = timed(lambda: windowed(whole, q, windows.offsets, np.arange(len(passages)), cosines_of,
                                            windows.gamma))
    reference = top_hits(every, TOP)[0]
    rows = {"every window": {"nDCG@10": score(every), "top 10 kept": 1.0, "ms a query": 1000 * seconds / len(q)}}
    for size in SIZES:
        if size >= len(passages):
            continue
        found, seconds = timed(partial(read_shortlists, size))
        kept = np.mean([len(np.intersect1d(a, b)) / TOP for a, b in zip(top_hits(found, TOP)[0], reference)])
        rows[f"shortlist of {size}"] = {"nDCG@10": score(found), "top 10 kept": float(kept),
                                        "ms a query": 1000 * seconds / len(q)}
    return {"passages": len(passages), "windows": int(len(windows.vectors)), "queries": len(queries), "rows": rows}


def measure(model, dev: Path, scifact_folder: Path) -> dict:
    sets = {}
    for name in SOURCES:
        queries, passages, gold = pairs_dev(dev / f"dev-{name}.tsv.gz")
        if len(queries) > QUERIES:
            picked = np.sort(np.random.default_rng(SEED).choice(len(queries), QUERIES, replace=False))
            queries, gold = [queries[i] for i in picked], gold[picked]
        sets[name] = one_set(model, queries, passages, partial(ndcg, gold=gold))
    doc_ids, docs, query_ids, queries, qrels = scifact(scifact_folder)
    sets["SciFact"] = one_set(model, queries, docs,
                              lambda scores: trec_ndcg(scores, doc_ids, query_ids, qrels))
    return sets


def render(table: str, found: dict, command: str) -> str:
    lines = ["#### Windows read for a shortlist (issue 82)", "", f"<!-- generated: {command} -->", "",
             f"Table `{table}`, windows of {WIDTH} words (`lab/window_shortlist.py`, its docstring). A dense search "
             f"over more than {SHORTLIST_FROM:,} passages reads the windows of each query's {SHORTLIST:,} highest "
             "cosines alone; here each shortlist size against reading every window, on sets smaller than that (what "
             "the shortlist would change on them). A set is not shortlisted at a size it does not exceed. "
             f"Dev sets: a seeded sample of at most {QUERIES} queries each.", "",
             "| set | passages | windows | reading | nDCG@10 | top 10 kept | ms a query |",
             "|---|---:|---:|---|---:|---:|---:|"]
    for name, one in found.items():
        for reading, row in one["rows"].items():
            lines.append(f"| {name} | {one['passages']:,} | {one['windows']:,} | {reading} | {row['nDCG@10']:.2f} | "
                         f"{100 * row['top 10 kept']:.2f}% | {row['ms a query']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", help="a search table folder (its lexical weights unused: dense search)")
    parser.add_argument("--dev", type=Path, default=Path("models/corpora/sci"), help="lab.sci_splits' folder")
    parser.add_argument("--scifact", type=Path, default=Path("../shared/data/eval-mteb/SciFact"))
    parser.add_argument("--json", type=Path, help="write the measurements here")
    parser.add_argument("--out", type=Path, help="write the Markdown section here (default: print it)")
    args = parser.parse_args(argv)
    if argv is None:
        on_one_thread("lab.window_shortlist")
    for path in (args.dev, args.scifact):
        if not path.is_dir():
            print(f"{path}: not a folder", file=sys.stderr)
            return 2
    found = measure(swembed.load(args.table), args.dev, args.scifact)
    if args.json:
        save_json({"table": args.table, "sets": found}, args.json)
    publish(render(args.table, found, command_line("window_shortlist", args.table, json=args.json, out=args.out)),
            args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
