"""Search on a million passages on one core (issue 82): index build time (encode + BM25 postings), index size on
disk (the dense vectors and the lexical postings apart), load time, queries per second of ``mode`` dense, lexical
and hybrid, peak memory, and whether each held-out query finds its own passage among a million.

    nice -n 10 python -m lab.bench_million --out reports/million.md
    nice -n 10 python -m lab.bench_million --windows 8 --out reports/million-windows.md
    nice -n 10 python -m lab.bench_million --windows 8 --dtype int8 --out reports/million-windows-int8.md

``--windows N`` builds the index with passage windows of N words (``swembed.runtime.windows``): every mode's dense
score is then the windowed one, and the index holds the windows' vectors beside the passages'.

About 2.5 CPU minutes (the build 1.5: encoding and postings of a million passages); 15 to 20 minutes of wall time
on a shared 2-core machine. Queries are bounded by ``--budget`` wall seconds a mode; the build is not.

Corpus (deterministic, deduplicated, written to ``--work``, never into the repository): passages of 1 to 3
consecutive lines (the window's length drawn per line with ``--seed``; one window starting at every line) of the
sentence files of ``sci/``, ``en/`` and ``news/``, and the whole abstracts of ``docs/``; a seeded sample of
``--passages`` of them, plus the passage of each query. Queries: the held-out dev pairs of the search recipe
(``models/corpora/sci/dev-{medquad,scitldr,agnews}.tsv.gz``, query<TAB>passage), a seeded ``--queries`` of them.

The index is built, saved and searched as ``swembed index`` and ``swembed search --index`` do it (``read_passages``,
``model.index`` and ``Lexical.build``: ``corpus_index``'s steps, timed apart; ``SearchIndex.save``, ``.load``,
``.search``), on one thread (OMP, MKL and OpenBLAS threads 1:
the bench starts itself again where they are not). Search runs in a process of its own (memory-mapped load, then
each mode), so its peak memory is the searching process's alone.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

import swembed
from lab.bench_search import GENERATED, on_one_thread, timed
from swembed.runtime.index import POSTINGS_FILES, SCALES_FILE, VECTORS_FILE, WINDOW_FILES, SearchIndex
from swembed.runtime.lexical import MODES, Lexical
from swembed.runtime.outputs import atomic_file
from swembed.runtime.search import QUERIES_AT_ONCE
from swembed.runtime.textfile import read_passages
from swembed.runtime.windows import SHORTLIST

SENTENCE_FOLDERS = ("sci", "en", "news")
DEV_PAIRS = ("medquad", "scitldr", "agnews")
WINDOW = (1, 3)  # lines in a passage
LEXICAL_FILES = ("terms.npy", "term_offsets.npy", *POSTINGS_FILES)
TOP_K = 10
SINGLE_QUERIES = 50  # queries searched one a call (a server's latency), besides the batches


def windows(lines: list[str], rng: random.Random) -> Iterator[str]:
    """One passage starting at every line: it and the next 0 to 2 lines (a length drawn per line)."""
    for start in range(len(lines)):
        yield " ".join(lines[start : start + rng.randint(*WINDOW)])


def candidate_passages(data: Path, seed: int) -> list[str]:
    """Every passage the corpus folders offer, first seen first, each once: windows of the sentence files' lines
    and the documents' whole texts."""
    found: dict[str, None] = {}
    for folder in SENTENCE_FOLDERS:
        for path in sorted((data / folder).glob("*.txt.gz")):
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
                lines = [line.strip() for line in handle if line.strip()]
            found.update(dict.fromkeys(windows(lines, random.Random(f"{seed} {path.name}"))))
    for path in sorted((data / "docs").glob("*.docs.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
            found.update(dict.fromkeys(" ".join(json.loads(line)["text"].split()) for line in handle))
    return list(found)


def dev_pairs(folder: Path, count: int, seed: int) -> list[tuple[str, str]]:
    """``count`` (query, passage) pairs drawn with ``seed`` from the dev files, each query once."""
    pairs: dict[str, str] = {}
    for name in DEV_PAIRS:
        with gzip.open(folder / f"dev-{name}.tsv.gz", "rt", encoding="utf-8") as handle:
            for line in handle:
                query, _, passage = line.rstrip("\n").partition("\t")
                pairs.setdefault(query, passage)
    drawn = sorted(pairs.items())
    random.Random(seed).shuffle(drawn)
    return drawn[:count]


def million_corpus(data: Path, size: int, pairs: list[tuple[str, str]], seed: int) -> list[str]:
    """``size`` passages drawn with ``seed`` from ``candidate_passages``, the pairs' passages among them, in a
    shuffled order."""
    wanted = dict.fromkeys(passage for _, passage in pairs)
    others = [p for p in candidate_passages(data, seed) if p not in wanted]
    rng = random.Random(seed)
    if len(others) + len(wanted) < size:
        raise ValueError(f"{data}: {len(others) + len(wanted):,} distinct passages, fewer than the {size:,} asked")
    passages = rng.sample(others, size - len(wanted)) + list(wanted)
    rng.shuffle(passages)
    return passages


def corpus_files(args: argparse.Namespace) -> tuple[Path, Path]:
    """(the corpus file, one passage a line; the queries file, JSON (query, its passage's row)), written to
    ``--work`` once for the size, seed and data (a later run reads them again)."""
    stem = args.work / f"corpus-{args.passages}-{args.seed}"
    corpus, queries = stem.with_suffix(".txt"), stem.with_suffix(".queries.json")
    if not (corpus.exists() and queries.exists()):
        pairs = dev_pairs(args.dev, args.queries, args.seed)
        passages = million_corpus(args.data, args.passages, pairs, args.seed)
        row = {passage: i for i, passage in enumerate(passages)}
        with atomic_file(corpus, checked=False) as tmp:
            tmp.write_text("".join(p.replace("\n", " ") + "\n" for p in passages), encoding="utf-8")
        with atomic_file(queries, checked=False) as tmp:
            tmp.write_text(json.dumps([[q, row[p]] for q, p in pairs], ensure_ascii=False), encoding="utf-8")
    return corpus, queries


def memory() -> dict[str, float]:
    """This process's peak resident memory and its resident memory now (anonymous; mapped files), in MB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    kb = {name: int(fields[name].split()[0]) for name in ("VmHWM", "RssAnon", "RssFile")}
    return {name: value / 1024 for name, value in kb.items()}


def build(args: argparse.Namespace, model, corpus: Path) -> dict:
    """Read the corpus, encode it, make its postings and save the index, as ``swembed index`` does; timings and
    sizes."""
    row: dict = {}
    (texts, positions, _), row["read_s"], row["read_cpu_s"] = timed(read_passages, str(corpus))
    index, row["encode_s"], row["encode_cpu_s"] = timed(model.index, texts, positions, args.dtype, True, False,
                                                        args.windows)
    index.lexical, row["postings_s"], row["postings_cpu_s"] = timed(Lexical.build, model, texts)
    folder = args.work / "index"
    _, row["save_s"], row["save_cpu_s"] = timed(index.save, folder, True)
    row["build_peak_mb"] = memory()["VmHWM"]
    row["passages"], row["terms"], row["postings"] = len(index), len(index.lexical.terms), len(index.lexical.docs)
    files = {path.name: path.stat().st_size for path in folder.iterdir() if path.is_file()}
    row["bytes"] = sum(size for name, size in files.items() if not name.startswith("."))
    row["dense_bytes"] = files.get(VECTORS_FILE, 0) + files.get(SCALES_FILE, 0)
    row["lexical_bytes"] = sum(files.get(name, 0) for name in LEXICAL_FILES)
    row["text_bytes"] = sum(files.get(name, 0) for name in ("texts.npy", "text_offsets.npy"))
    row["window_bytes"] = sum(files.get(name, 0) for name in WINDOW_FILES)
    row["windows"] = 0 if index.windows is None else len(index.windows.vectors)
    return row


def rate(index: SearchIndex, queries: list[str], mode: str, at_once: int, budget: float) -> tuple[dict, list]:
    """Queries per second (wall, CPU) of ``index.search`` in ``mode``, ``at_once`` queries a call, until every query
    is done or ``budget`` wall seconds are spent; and the hits."""
    hits: list = []
    wall, cpu = time.perf_counter(), time.process_time()
    while len(hits) < len(queries) and time.perf_counter() - wall < budget:
        hits += index.search(queries[len(hits) : len(hits) + at_once], TOP_K, mode)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"queries": len(hits), "qps": len(hits) / wall, "cpu_qps": len(hits) / max(cpu, 1e-9)}, hits


def search(folder: Path, model_path: str, queries_file: Path, budget: float) -> dict:
    """In a process of its own: load the index, warm its lexical channel, and time each mode (batches and one
    query at a time); hit@10 of each query's own passage; memory."""
    model = swembed.load(model_path)
    asked = json.loads(queries_file.read_text(encoding="utf-8"))
    queries, wanted = [q for q, _ in asked], [row for _, row in asked]
    result: dict = {}
    index, result["load_s"], result["load_cpu_s"] = timed(SearchIndex.load, folder, model)
    result["after_load"] = memory()
    postings = index.postings()
    _, result["warm_s"], result["warm_cpu_s"] = timed(postings.warm)
    plain = None if index.windows is None else SearchIndex(  # the same index read without its windows
        index.vectors, index.table, index.ids, index.texts, index.scales, model, folder, index.lexical)
    for name, searched, mode in [(mode, index, mode) for mode in MODES] + (
            [] if plain is None else [(f"{mode}, no windows", plain, mode) for mode in ("dense", "hybrid")]):
        result[name], hits = rate(searched, queries, mode, QUERIES_AT_ONCE, budget)
        result[name]["found"] = [int(row in {h.index for h in found}) for row, found in zip(wanted, hits)]
        result[f"{name}_single"], _ = rate(searched, queries[:SINGLE_QUERIES], mode, 1, budget / 4)
    result["memory"] = memory()
    return result


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _mb(value: float) -> str:
    return f"{value / 1e6:,.1f} MB"


def _lexical_note(model: str) -> str:
    """Whether the table's learned lexical weights (``kind_weights["lexical"]``) weigh its lexical channel."""
    kinds = json.loads((Path(model) / "config.json").read_text(encoding="utf-8")).get("kind_weights", {})
    return ("its learned lexical weights applied in the lexical and hybrid modes" if "lexical" in kinds
            else "no learned lexical weights: BM25's own term weights")


def report(built: dict, searched: dict, command: str, args: argparse.Namespace, loads: tuple) -> str:
    """reports/million.md: the build, the index's size, load and query speed, memory."""
    b, s = built, searched
    per_passage = b["bytes"] / b["passages"]
    build_rows = [
        ("read the corpus file", b["read_s"], b["read_cpu_s"]),
        ("encode (the dense vectors" + (", the windows' too)" if b.get("windows") else ")"), b["encode_s"],
         b["encode_cpu_s"]),
        ("BM25 postings (split into terms, CSR arrays)", b["postings_s"], b["postings_cpu_s"]),
        ("save (atomic folder)", b["save_s"], b["save_cpu_s"]),
        ("**index build (encode + postings)**", b["encode_s"] + b["postings_s"],
         b["encode_cpu_s"] + b["postings_cpu_s"]),
        ("load (`SearchIndex.load`: memory-mapped, every array checked)", s["load_s"], s["load_cpu_s"]),
        ("first lexical use (BM25 weights of every posting, term lookup)", s["warm_s"], s["warm_cpu_s"])]
    windowed = b.get("windows", 0) > 0
    size_rows = [(f"dense: vectors.npy ({args.dtype}" + (", scales.npy)" if args.dtype == "int8" else ")"),
                  b["dense_bytes"]),
                 *([(f"windows: {b['windows']:,} window vectors ({args.dtype})"
                     + (", their scales and offsets" if args.dtype == "int8" else " and their offsets"),
                     b["window_bytes"])]
                   if windowed else []),
                 ("lexical: terms and postings", b["lexical_bytes"]), ("the passages' texts", b["text_bytes"]),
                 ("whole folder (also ids, index.json)", b["bytes"])]
    names = [name for name in s if name in MODES or name.endswith(", no windows")]
    mode_rows, common = [], min(len(s[name]["found"]) for name in names)  # hit@10 over the queries all finished
    for mode in names:
        batch, single = s[mode], s[f"{mode}_single"]
        mode_rows.append(f"| {mode} | {batch['cpu_qps']:,.1f} | {batch['qps']:,.1f} | {batch['queries']:,} | "
                         f"{single['cpu_qps']:,.1f} | {single['qps']:,.1f} | {single['queries']:,} | "
                         f"{100 * sum(batch['found'][:common]) / common:.1f} |")
    memory, loaded = s["memory"], s["after_load"]
    return "\n".join([
        "# Search on a million passages, one core" + (f", with passage windows of {args.windows} words"
                                                       if windowed else ""), "",
        GENERATED.format(command=command), "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `{command}` on {cpu_model()} "
        f"({os.cpu_count()} CPUs shared with other work; load average {loads[0]:.1f} at the start, {loads[1]:.1f} at "
        f"the end), CPython {platform.python_version()}, numpy {np.__version__}. One thread (OMP, MKL and OpenBLAS "
        "threads 1). The CPU is shared, so wall times say little: the CPU-second figures are the ones to compare.", "",
        f"Table `{args.model}` ({_lexical_note(args.model)}); {b['passages']:,} passages ({b['terms']:,} terms, "
        f"{b['postings']:,} postings): "
        f"{CORPUS_NOTE} Queries: {s['dense']['queries']:,} held-out questions and summaries (the dev pairs "
        "`models/corpora/sci/dev-{medquad,scitldr,agnews}.tsv.gz`), each one's own passage in the corpus."
        + (f" Passage windows of {args.windows} words (`model.index(..., windows={args.windows})`, "
           "`swembed.runtime.windows`): every mode's dense score is the passage's cosine plus gamma times its best "
           "window's, and the hybrid's alpha is the windows' default; a dense search reads the windows of each "
           f"query's {SHORTLIST:,} highest cosines alone (its shortlist; the hybrid reads every window), scoring "
           "every passage for a few queries at a time (`search.rank`, as the hybrid does) instead of a block of "
           f"passages for {QUERIES_AT_ONCE} queries."
           if windowed else ""), "",
        "## Build and load", "",
        "| step | wall s | CPU s |", "|---|---|---|",
        *(f"| {name} | {wall:.1f} | {cpu:.1f} |" for name, wall, cpu in build_rows), "",
        f"Peak resident memory of the building process: {b['build_peak_mb']:,.0f} MB (the passages' texts, their "
        "vectors and the postings' temporaries).", "",
        "## Index on disk", "",
        "| part | bytes |", "|---|---|",
        *(f"| {name} | {_mb(size)} |" for name, size in size_rows),
        f"| per passage | {per_passage:,.0f} B |", "",
        "## Queries per second, one core", "",
        f"`index.search(queries, {TOP_K}, mode)` on the loaded index: every passage scored, each query "
        f"encoded and ranked. Batches: {QUERIES_AT_ONCE} queries a call (dense: one matrix product a block of "
        "passages for all of them); one at a time: a call per query (a server answering one request). A mode stops "
        f"after {args.budget:g} s of wall time (one at a time: a quarter of it); the queries it finished are "
        f"counted. hit@10: the share of the first {common:,} queries (those every mode finished) whose own passage "
        "is among their 10 hits." + (" With windows, the same index searched without them (its passages' "
                                     "vectors alone) is timed beside, on the same queries." if windowed else ""), "",
        "| mode | q/s per CPU s (batches) | q/s wall | queries | q/s per CPU s (one at a time) | q/s wall | queries | "
        "hit@10 % |", "|---|---|---|---|---|---|---|---|", *mode_rows, "",
        f"Searching process: peak resident memory {memory['VmHWM']:,.0f} MB; after load {loaded['RssAnon']:,.0f} "
        f"MB anonymous + {loaded['RssFile']:,.0f} MB of mapped files; at the end {memory['RssAnon']:,.0f} MB "
        f"anonymous + {memory['RssFile']:,.0f} MB of mapped files (the vectors and postings, read through the page "
        "cache: memory the kernel can take back).", ""])


CORPUS_NOTE = ("windows of 1 to 3 consecutive lines (one starting at every line) of the sentence files of "
               "`sci/`, `en/` and `news/` and the whole abstracts of `docs/` (`../shared/data/corpora`), "
               "deduplicated, a seeded sample (`lab.bench_million.million_corpus`).")


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        on_one_thread("lab.bench_million")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="models/minilm-256-sci")
    parser.add_argument("--data", type=Path, default=Path("../shared/data/corpora"))
    parser.add_argument("--dev", type=Path, default=Path("models/corpora/sci"), help="the dev pairs' folder")
    parser.add_argument("--work", type=Path, default=Path("models/bench-million"),
                        help="corpus (kept for the next run) and index (removed unless --keep)")
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--budget", type=float, default=30.0, help="wall seconds of queries per mode at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the index folder")
    parser.add_argument("--windows", type=int, help="build the index with passage windows of this many words")
    parser.add_argument("--dtype", choices=["float32", "int8"], default="float32", help="the index's vectors")
    parser.add_argument("--out", type=Path, help="write the report here (reports/million.md)")
    parser.add_argument("--search", type=Path, help=argparse.SUPPRESS)  # the searching process: this index folder
    args = parser.parse_args(argv)
    if args.search:
        print(json.dumps(search(args.search, args.model, args.work / "queries.json", args.budget)))
        return 0
    command = "python -m lab.bench_million " + " ".join(argv if argv is not None else sys.argv[1:])
    started = os.getloadavg()[0]
    corpus, queries = corpus_files(args)
    built = build(args, swembed.load(args.model), corpus)
    print(json.dumps(built), file=sys.stderr, flush=True)
    shutil.copyfile(queries, args.work / "queries.json")
    answer = subprocess.run([sys.executable, "-m", "lab.bench_million", "--model", args.model, "--work",
                             str(args.work), "--budget", str(args.budget), "--search", str(args.work / "index")],
                            capture_output=True, text=True, check=False)
    if answer.returncode != 0:
        raise SystemExit(f"the searching process failed: {answer.stderr.strip()[-2000:]}")
    searched = json.loads(answer.stdout)
    print(json.dumps(searched), file=sys.stderr, flush=True)
    if not args.keep:
        shutil.rmtree(args.work / "index")
    text = report(built, searched, command, args, (started, os.getloadavg()[0]))
    if args.out:
        with atomic_file(args.out, overwrite=True) as tmp:
            tmp.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
