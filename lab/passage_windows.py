"""Passage windows (issue 82), no rebuild: a long passage is scored by its whole vector and by its best window.

A static table encodes a passage as the mean of its words, so a query that matches one part of a long passage
(an abstract's sentence, one answer among a page's) is diluted by the rest. Here a passage of more than ``W``
whitespace-separated words is also read as windows of ``W`` words every ``W / 2`` (the last one ending at the
passage's end), each encoded as a document; the dense score is the whole passage's cosine plus ``gamma`` times its
best window's (a passage of ``W`` words or fewer: its own cosine is its best window's). Sentence windows (split
after ``.``, ``!`` or ``?``) are scored the same way beside them. The hybrid mixes that dense score with the table's
lexical channel as the product does (``swembed.runtime.lexical.hybrid``: z-scores, the table's lexical weights).

Dev: the four held-out sets of ``lab.sci_splits`` (each query's passage among its set's passages, nDCG@10); the
lever (windows, ``gamma``) is chosen by the dense dev mean, a lever replacing the plain score only where it gains
more than ``MIN_GAIN``; then ``alpha`` for the chosen lever by the hybrid's dev mean over ``ALPHAS`` (kept at the
product's ``ALPHA`` unless another gains more than ``MIN_GAIN``). SciFact test (MTEB's files, title + text as mteb
joins them; ``lab.hybrid_search``'s pytrec_eval nDCG@10, which gives mteb's score) for report only.

    python -m lab.passage_windows models/minilm-256-sci --json reports/mteb/passage_windows.json \\
        --out reports/mteb/passage_windows.md

``--cost`` (with ``--json``) measures what the product's windows cost on SciFact instead, and adds it to the JSON:
``SearchIndex.build`` with and without ``windows=WIDTH`` (seconds, vectors, bytes of vectors) and the seconds of a
search of SciFact's 300 queries in each mode, on one thread (``OMP_NUM_THREADS=1`` and the like, set before numpy
loads: run it as its own process), best of three.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

import swembed
from lab import command_line, publish, save_json
from lab.heldout_retrieval import interval, versus_rows
from lab.hybrid_search import SOURCES, ndcg, ndcg_per_query, scifact, trec_ndcg
from lab.mteb_levers import pairs_dev
from swembed.runtime.index import SearchIndex
from swembed.runtime.lexical import ALPHA, Lexical, hybrid
from swembed.runtime.windows import GAMMA, WIDTH, word_windows

WIDTHS = (4, 6, 8, 12, 16, 24, 32, 48)  # words a window; each steps by half its width
GAMMAS = (0.5, 1.0, 2.0)
ALPHAS = tuple(round(float(a), 2) for a in np.arange(0.3, 0.9001, 0.05))
MIN_GAIN = 0.1  # dev mean points a lever must gain (as lab.hybrid_search)
TEACHER = "minilm"  # reports/heldout-retrieval.json's entry of the teacher, per query
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentence_windows(text: str) -> list[str]:
    """``text``'s sentences (split after . ! ?), none for a text of one sentence."""
    sentences = [s for s in _SENTENCE_END.split(text) if s.strip()]
    return sentences if len(sentences) > 1 else []


def best_window(model, queries: np.ndarray, passages: list[str], whole: np.ndarray,
                windows: Callable[[str], list[str]]) -> tuple[np.ndarray, int]:
    """((queries, passages) cosine of each query with each passage's best window; the passage's own cosine where it
    has none), the number of windows encoded."""
    owners, texts = [], []
    for row, passage in enumerate(passages):
        found = windows(passage)
        owners += [row] * len(found)
        texts += found
    best = whole.copy()
    if texts:
        cosines = queries @ model.encode(texts, kind="document").T
        owner = np.asarray(owners)
        starts = np.r_[0, np.flatnonzero(np.diff(owner)) + 1]
        best[:, owner[starts]] = np.maximum.reduceat(cosines, starts, axis=1)
    return best, len(texts)


def window_lever(width: int = WIDTH) -> str:
    """The name ``levers_of`` gives the product's windowed score with windows of ``width`` words (its ``GAMMA``)."""
    return f"{width}-word windows, gamma {GAMMA}"


PRODUCT_LEVER = window_lever()  # the product's windowed dense score, as named here


def table_bm25(model, queries: list[str], passages: list[str]) -> np.ndarray:
    """(queries, passages) BM25 with the table's lexical weights, the product's lexical channel."""
    lexical = Lexical.build(model, passages)
    return lexical.scores(*lexical.weighted_query_terms(model, queries))


def levers_of(model, queries: list[str], passages: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray, dict]:
    """({lever: (queries, passages) dense scores}, BM25 with the table's lexical weights, {windows: count})."""
    q, p = model.encode(queries, kind="query"), model.encode(passages, kind="document")
    bm25 = table_bm25(model, queries, passages)
    whole = q @ p.T
    levers, counts = {"whole passages": whole}, {}
    kinds: dict[str, Callable[[str], list[str]]] = {
        f"{w}-word windows": partial(word_windows, width=w) for w in WIDTHS}
    kinds["sentences"] = sentence_windows
    for name, windows in kinds.items():
        best, counts[name] = best_window(model, q, passages, whole, windows)
        for gamma in GAMMAS:
            levers[f"{name}, gamma {gamma}"] = whole + np.float32(gamma) * best
    return levers, bm25, counts


def lever_dense(model, queries: list[str], passages: list[str], lever: str) -> np.ndarray:
    """One lever's (queries, passages) dense scores, the lever named as ``levers_of`` names it."""
    q, p = model.encode(queries, kind="query"), model.encode(passages, kind="document")
    whole = q @ p.T
    if lever == "whole passages":
        return whole
    kind, gamma = lever.rsplit(", gamma ", 1)
    windows = sentence_windows if kind == "sentences" else (
        lambda text: word_windows(text, int(kind.split("-", 1)[0])))
    return whole + np.float32(float(gamma)) * best_window(model, q, passages, whole, windows)[0]


def versus_teacher(model, dev: Path, heldout: Path, lever: str, alpha: float) -> dict:
    """Whole passages (hybrid at ``ALPHA``) and the chosen lever (dense; hybrid at ``alpha``) against the teacher
    alone on the four dev sets: per set the mean nDCG@10 and the paired bootstrap 95% interval of the difference."""
    teacher = {s: np.asarray(v) for s, v in json.loads(heldout.read_text(encoding="utf-8"))[TEACHER].items()
               if s in SOURCES}
    rows: dict[str, dict] = {}
    for name in SOURCES:
        queries, passages, gold = pairs_dev(dev / f"dev-{name}.tsv.gz")
        assert len(gold) == len(teacher[name]), f"{name}: the teacher's queries are not these"
        bm25 = table_bm25(model, queries, passages)
        dense = {chosen: lever_dense(model, queries, passages, chosen) for chosen in dict.fromkeys(
            ("whole passages", lever))}
        for label, chosen, mix in ((f"hybrid, whole passages, alpha {ALPHA}", "whole passages", ALPHA),
                                   (f"dense, {lever}", lever, None), (f"hybrid, {lever}, alpha {alpha}", lever, alpha)):
            per_query = ndcg_per_query(dense[chosen] if mix is None else hybrid(dense[chosen], bm25, mix), gold)
            rows.setdefault(label, {})[name] = [100 * float(per_query.mean()), interval(per_query, teacher[name])]
    return {"teacher": {s: 100 * float(v.mean()) for s, v in teacher.items()}, "rows": rows}


def measure(model, dev: Path, scifact_folder: Path) -> dict:
    """Per lever: dense nDCG@10 on each dev set and SciFact, and the hybrid's at each alpha; window counts."""
    sets = {s: pairs_dev(dev / f"dev-{s}.tsv.gz") for s in SOURCES}
    doc_ids, docs, query_ids, queries, qrels = scifact(scifact_folder)
    dense: dict[str, dict[str, float]] = {}
    mixed: dict[str, dict[str, dict[str, float]]] = {}
    windows: dict[str, dict[str, int]] = {}
    for name, (asked, passages, gold) in [*sets.items(), ("SciFact", (queries, docs, None))]:
        began = time.perf_counter()
        levers, bm25, counts = levers_of(model, asked, passages)

        def score(scores: np.ndarray, gold=gold) -> float:
            return trec_ndcg(scores, doc_ids, query_ids, qrels) if gold is None else ndcg(scores, gold)

        for lever, scores in levers.items():
            dense.setdefault(lever, {})[name] = score(scores)
            for alpha in ALPHAS:
                mixed.setdefault(lever, {}).setdefault(str(alpha), {})[name] = score(hybrid(scores, bm25, alpha))
        windows[name] = {**counts, "passages": len(passages)}
        print(f"{name}: {len(levers)} levers in {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    return {"dense": dense, "hybrid": mixed, "windows": windows}


def cost(model, scifact_folder: Path, rounds: int = 3) -> dict:
    """Per index kind (whole passages, windows of ``WIDTH``): build seconds, vectors, bytes of vectors, and each
    mode's seconds for SciFact's queries (best of ``rounds``)."""
    _, docs, _, queries, _ = scifact(scifact_folder)
    found: dict = {"threads": os.environ.get("OMP_NUM_THREADS"), "passages": len(docs), "queries": len(queries)}
    for name, windows in (("whole passages", None), (f"{WIDTH}-word windows", WIDTH)):
        began = time.perf_counter()
        index = SearchIndex.build(model, docs, keep_texts=False, windows=windows)
        row = {"build s": time.perf_counter() - began, "vectors": len(index) + (
            0 if index.windows is None else len(index.windows.vectors))}
        row["vector bytes"] = int(index.vectors.nbytes + (0 if index.windows is None else index.windows.vectors.nbytes))
        for mode in ("dense", "hybrid"):
            best = float("inf")
            for _ in range(rounds):
                began = time.perf_counter()
                index.search(queries, 10, mode=mode)
                best = min(best, time.perf_counter() - began)
            row[f"{mode} s"] = best
        found[name] = row
        print(f"{name}: {row}", file=sys.stderr, flush=True)
    return found


def dev_mean(row: dict[str, float]) -> float:
    return float(np.mean([row[s] for s in SOURCES]))


def choose(found: dict) -> tuple[str, float]:
    """(the lever by the dense dev mean, alpha by the hybrid's dev mean), each kept at the plain one unless it gains
    more than ``MIN_GAIN``."""
    dense = found["dense"]
    best = max(dense, key=lambda lever: dev_mean(dense[lever]))
    lever = best if dev_mean(dense[best]) - dev_mean(dense["whole passages"]) > MIN_GAIN else "whole passages"
    by_alpha = found["hybrid"][lever]
    alpha = max(by_alpha, key=lambda a: dev_mean(by_alpha[a]))
    keep = dev_mean(by_alpha[alpha]) - dev_mean(by_alpha[str(ALPHA)]) > MIN_GAIN
    return lever, float(alpha) if keep else ALPHA


def report(found: dict, table: str, command: str) -> str:
    lever, alpha = choose(found)
    dense, mixed = found["dense"], found["hybrid"]
    header = "| lever | " + " | ".join(SOURCES) + " | dev mean | SciFact | hybrid dev mean | hybrid SciFact |"
    lines = [header, "|---" + "|---:" * (len(SOURCES) + 4) + "|"]
    for name in sorted(dense, key=lambda n: -dev_mean(dense[n])):
        row, hyb = dense[name], mixed[name][str(ALPHA)]
        mark = "**" if name == lever else ""
        lines.append(f"| {mark}{name}{mark} | " + " | ".join(f"{row[s]:.2f}" for s in SOURCES)
                     + f" | {dev_mean(row):.2f} | {row['SciFact']:.2f} | {dev_mean(hyb):.2f} | {hyb['SciFact']:.2f} |")
    alphas = ["| alpha | hybrid dev mean, whole passages | SciFact | hybrid dev mean, chosen lever | SciFact |",
              "|---|---:|---:|---:|---:|"]
    for a in ALPHAS:
        plain, chosen = mixed["whole passages"][str(a)], mixed[lever][str(a)]
        alphas.append(f"| {a} | {dev_mean(plain):.2f} | {plain['SciFact']:.2f} | {dev_mean(chosen):.2f} | "
                      f"{chosen['SciFact']:.2f} |")
    counts = ["| set | passages | " + " | ".join(k for k in found["windows"]["SciFact"] if k != "passages") + " |",
              "|---|---:" + "|---:" * (len(found["windows"]["SciFact"]) - 1) + "|"]
    for name, row in found["windows"].items():
        counts.append(f"| {name} | {row['passages']:,} | "
                      + " | ".join(f"{v:,}" for k, v in row.items() if k != "passages") + " |")
    plain, chosen = dense["whole passages"], dense[lever]
    return "\n".join([
        "#### Passage windows (issue 82): the whole passage's cosine plus its best window's", "",
        f"<!-- generated: {command} -->", "",
        f"Table `{table}`, no rebuild (`lab/passage_windows.py`, its docstring). nDCG@10 on the held-out dev sets "
        f"(each query's passage among its set's passages); SciFact (test) for report only. Dense: the whole "
        f"passage's cosine plus gamma times its best window's; hybrid: that dense score mixed with the table's "
        f"lexical channel at the product's alpha {ALPHA}. Sorted by the dense dev mean; the chosen lever in bold.", "",
        *lines, "",
        f"Chosen on dev: **{lever}** (dense dev mean {dev_mean(plain):.2f} -> {dev_mean(chosen):.2f}; SciFact "
        f"{plain['SciFact']:.2f} -> {chosen['SciFact']:.2f}), then **alpha {alpha}** for its hybrid (dev mean "
        f"{dev_mean(mixed[lever][str(alpha)]):.2f}; SciFact {mixed[lever][str(alpha)]['SciFact']:.2f}, against "
        f"{mixed['whole passages'][str(ALPHA)]['SciFact']:.2f} for whole passages at alpha {ALPHA}).", "",
        "The hybrid by alpha (dev mean of the four sets; SciFact for report only):", "", *alphas, "",
        "Windows encoded (what an index stores beside one vector a passage):", "", *counts, "",
        *teacher_lines(found.get("versus teacher")), *cost_lines(found.get("cost")), ])


def teacher_lines(found: dict | None) -> list[str]:
    """The table of the chosen lever against the teacher alone on the dev sets, empty where not measured."""
    if not found:
        return []
    return ["Against the teacher alone on the four dev sets (the MiniLM teacher's dense nDCG@10 per query from "
            "`reports/heldout-retrieval.json`; in brackets the difference from it with a paired bootstrap 95% "
            "interval):", "", *versus_rows(f"teacher `{TEACHER}` alone", found["teacher"], found["rows"]), ""]


def cost_lines(found: dict | None) -> list[str]:
    """The cost section of the report (``--cost``), empty where it was not measured."""
    if not found:
        return []
    kinds = [k for k in found if isinstance(found[k], dict)]
    lines = [f"What the product's windows cost on SciFact ({found['passages']:,} passages, {found['queries']} "
             f"queries; `python -m lab.passage_windows TABLE --cost --json FILE`, OMP_NUM_THREADS="
             f"{found['threads']}, best of three):", "",
             "| index | build s | vectors | bytes of vectors | dense search s | hybrid search s |",
             "|---|---:|---:|---:|---:|---:|"]
    for kind in kinds:
        row = found[kind]
        lines.append(f"| {kind} | {row['build s']:.1f} | {row['vectors']:,} | {row['vector bytes'] / 1e6:.1f} MB | "
                     f"{row['dense s']:.2f} | {row['hybrid s']:.2f} |")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table")
    parser.add_argument("--dev", type=Path, default=Path("models/corpora/sci"), help="lab.sci_splits' output")
    parser.add_argument("--scifact", type=Path, default=Path("../shared/data/eval-mteb/SciFact"))
    parser.add_argument("--heldout", type=Path, default=Path("reports/heldout-retrieval.json"),
                        help="the teacher's per-query nDCG@10 on the dev sets (lab.heldout_retrieval)")
    parser.add_argument("--json", type=Path, help="measurements to write (and, with --report-only, to read)")
    parser.add_argument("--report-only", action="store_true", help="write the report from --json, measuring nothing")
    parser.add_argument("--cost", action="store_true", help="measure the windows' cost on SciFact into --json")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.report_only or args.cost:
        if args.json is None:
            parser.error("--report-only and --cost need --json")
        found = json.loads(args.json.read_text(encoding="utf-8"))
        if args.cost:
            found["cost"] = cost(swembed.load(args.table), args.scifact)
            save_json(found, args.json)
    else:
        model = swembed.load(args.table)
        found = measure(model, args.dev, args.scifact)
        found["versus teacher"] = versus_teacher(model, args.dev, args.heldout, *choose(found))
        earlier = json.loads(args.json.read_text(encoding="utf-8")) if args.json and args.json.is_file() else {}
        if "cost" in earlier:
            found["cost"] = earlier["cost"]  # measured by --cost apart
        if args.json:
            save_json(found, args.json)
    publish(report(found, args.table, command_line("passage_windows", args.table, json=args.json, out=args.out)),
            args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
