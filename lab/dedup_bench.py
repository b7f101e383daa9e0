"""The dedup benchmark: a 1M-line text file with known duplicates, the `swembed dedup` run on it (wall time,
peak memory), and the recall of its near-duplicate pairs against exact search for a sample of texts.

    python -m lab.dedup_bench make --corpus '../shared/data/corpora/en/*.txt.gz' --n 1000000 --out /tmp/dedup-1m.txt
    /usr/bin/time -v swembed dedup /tmp/dedup-1m.txt --model models/minilm-256-shared --out /tmp/dedup-1m.out
    python -m lab.dedup_bench recall /tmp/dedup-1m.txt --model models/minilm-256-shared --sample 50000

``make`` takes corpus sentences and adds, for a third of them, a copy with one edit (a word dropped,
doubled or swapped with its neighbour, case changed, punctuation changed), and exact copies, until
``n`` lines. With ``--splice``, when the corpus has fewer than ``0.7 n`` sentences, the rest of the base texts
are synthetic: the first half of one random sentence joined to the second half of another (the 5M-record Spark
benchmark, ``reports/spark-dedup.md``). ``recall`` encodes the distinct lines as ``swembed dedup`` does
(float32), runs the same ANN pair search, and for ``sample`` random texts compares the pairs it found with
every pair an exact search over all texts finds at the same threshold.

``leak`` is issue 60's full-size acceptance check, on synthetic data with a synthetic table (each of 3,000 words its
own random 64-d row; no model build, no corpus): a training file with 2,000 near and exact copies of test-set lines
among 100,000 others (``planted_leak``, which the test suite runs at 5,000), ``swembed dedup --against`` on one
machine (and with ``--spark`` on Spark ``local[2]``, same mapping), then a plain dedup of the same file, its re-cut at
another threshold against a fresh run there (same mapping, and the time of each). It writes reports/dedup-leak.md:

    python -m lab.dedup_bench leak --work /tmp/dedup-leak --spark

``versus`` is issue 60's speed check: ``swembed dedup`` and semhash 0.5.0 (``semhash-run``: ``self_deduplicate``
on a model2vec export of the same table) back to back on a ``make`` file, ``--repeat`` times, each in its own
process: wall time, peak RSS, planted copies removed, the ratio; ``--out`` writes reports/dedup.md's section:

    python -m lab.dedup_bench make --corpus '../shared/data/corpora/en/*.txt.gz' --n 300000 --copies 100000 \
        --out /tmp/dedup-300k.txt
    swembed export MODEL --format model2vec --out /tmp/model-m2v
    python -m lab.dedup_bench versus /tmp/dedup-300k.txt --model MODEL --semhash-model /tmp/model-m2v \
        --out reports/dedup.md
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np


def _edit(sentence: str, rng: random.Random) -> str:
    words = sentence.split()
    kind = rng.randrange(5)
    if len(words) > 3 and kind == 0:
        del words[rng.randrange(len(words))]
    elif kind == 1:
        i = rng.randrange(len(words))
        words.insert(i, words[i])
    elif len(words) > 2 and kind == 2:
        i = rng.randrange(len(words) - 1)
        words[i], words[i + 1] = words[i + 1], words[i]
    elif kind == 3:
        return sentence.upper() if rng.random() < 0.5 else sentence.lower()
    else:
        return sentence.rstrip(".!?") + rng.choice(["!", "?", "...", ""])
    return " ".join(words)


def planted_leak(folder: Path, others: int, copies: int, seed: int = 0) -> tuple[Path, Path, Path, set[int]]:
    """A test set and a training set holding ``copies`` near and exact copies of test lines (half of each: a near
    copy has one of its 16 words replaced) among ``others`` random 16-word lines over 3,000 words, with a table
    that gives each word its own random 64-d row. Returns (model, train, test, planted line numbers, 0-based)."""
    from swembed.runtime.folder import write_model_folder

    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(3000)]
    table = rng.normal(size=(len(words), 64)).astype(np.float32)
    model = write_model_folder(folder / "model", table, words, {"tokenization": {"lowercase": True}}, None)
    draw = lambda count: rng.integers(0, len(words), (count, 16))  # noqa: E731
    test = draw(max(copies // 2, 1))
    copied = test[np.arange(copies) % len(test)].copy()
    near = np.arange(copies) % 2 == 1
    copied[near, rng.integers(0, 16, int(near.sum()))] = rng.integers(0, len(words), int(near.sum()))
    train = np.concatenate([draw(others), copied])
    order = rng.permutation(len(train))
    planted = set(np.flatnonzero(order >= others).tolist())
    as_text = lambda rows: "".join(" ".join(words[i] for i in row) + "\n" for row in rows)  # noqa: E731
    (folder / "test.txt").write_text(as_text(test), encoding="utf-8")
    (folder / "train.txt").write_text(as_text(train[order]), encoding="utf-8")
    return model, folder / "train.txt", folder / "test.txt", planted


def _mapping(out: Path) -> list[tuple]:
    """(representative, reason) of every record of a run: from mapping.tsv, or a Spark run's mapping/ parquet."""
    if (out / "mapping.tsv").is_file():
        rows = (out / "mapping.tsv").read_text(encoding="utf-8").split("\n")[1:-1]
        return [(int(r.split("\t")[3]), r.split("\t")[5]) for r in rows]
    import pyarrow.parquet as pq

    return [(r["representative"], r["reason"]) for r in pq.read_table(out / "mapping").to_pylist()]


def leak(work: Path, others: int, copies: int, threshold: float, spark: bool, command: str, out: Path) -> str:
    """issue 60's acceptance figures (see the module's doc), written to ``out``."""
    from swembed.cli import main as swembed_main
    from swembed.dedup.state import rethreshold

    work.mkdir(parents=True, exist_ok=True)
    model, train, test, planted = planted_leak(work, others, copies)
    common = [str(train), "--model", str(model), "--threshold", str(threshold), "--quiet", "--overwrite"]
    start = time.perf_counter()
    assert swembed_main(["dedup", *common, "--against", str(test), "--out", str(work / "against")]) == 0
    against_s = time.perf_counter() - start
    mapping = _mapping(work / "against")
    removed = {i for i, (_, reason) in enumerate(mapping) if reason == "reference"}
    rows = [("records", f"{len(mapping):,}"), ("planted copies", f"{len(planted):,}"),
            ("copies removed", f"{len(removed & planted):,} ({100 * len(removed & planted) / len(planted):.2f}%)"),
            ("others removed", f"{len(removed - planted):,} ({100 * len(removed - planted) / others:.3f}%)"),
            ("`--against` wall s (one machine)", f"{against_s:.1f}")]
    if spark:
        start = time.perf_counter()
        assert swembed_main(["dedup", *common, "--against", str(test), "--out", str(work / "against-spark"),
                             "--engine", "spark", "--spark-master", "local[2]"]) == 0
        same = _mapping(work / "against-spark") == mapping
        rows += [("`--against` wall s (Spark local[2])", f"{time.perf_counter() - start:.1f}"),
                 ("Spark mapping = one machine's", str(same))]
    cut = threshold + 0.05
    times = {}
    for name, value in (("run", threshold), ("fresh", cut)):
        start = time.perf_counter()
        assert swembed_main(["dedup", str(train), "--model", str(model), "--threshold", str(value), "--quiet",
                             "--overwrite", "--out", str(work / name)]) == 0
        times[name] = time.perf_counter() - start
    start = time.perf_counter()
    rethreshold(work / "run", cut, work / "recut", overwrite=True, progress=False)
    times["recut"] = time.perf_counter() - start
    equal = (work / "recut" / "mapping.tsv").read_bytes() == (work / "fresh" / "mapping.tsv").read_bytes()
    rows += [(f"plain dedup at {threshold} wall s", f"{times['run']:.1f}"),
             (f"fresh run at {cut:.2f} wall s", f"{times['fresh']:.1f}"),
             (f"`dedup-rethreshold` to {cut:.2f} wall s", f"{times['recut']:.1f} "
              f"({100 * times['recut'] / times['fresh']:.1f}% of the fresh run)"),
             ("re-cut mapping = fresh run's", str(equal))]
    text = (f"# Dedup against a reference set, and re-cuts\n\nGenerated by `{command}` (issue 60's acceptance "
            f"check; see `lab/dedup_bench.py`): synthetic data, {copies:,} near and exact copies of test lines "
            f"planted among {others:,} others, threshold {threshold}, on this machine (2 shared CPU cores, "
            "`nice`d, other jobs running: wall times are rough).\n\n<!-- generated: " + command + " -->\n\n"
            "| figure | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows) + "\n")
    out.write_text(text, encoding="utf-8")
    return text


def _splice(first: str, second: str) -> str:
    a, b = first.split(), second.split()
    return " ".join(a[: (len(a) + 1) // 2] + b[len(b) // 2 :])


def make(corpus: list[str], n: int, out: Path, seed: int = 0, splice: bool = False, copies: int | None = None) -> dict:
    """``n`` lines: corpus sentences and ``copies`` copies of them (default 30% of ``n``), 80% with one edit."""
    from swembed.pipeline.sources import expand_sources, read_source

    rng = random.Random(seed)
    n_base = n - copies if copies is not None else int(n * 0.7)
    sentences = []
    for path in expand_sources(corpus):
        for text in read_source(path):
            if text.strip():
                sentences.append(text.strip())
            if len(sentences) >= n:
                break
    base = sentences[:n_base]
    while splice and len(base) < n_base:  # a corpus too small for n: texts of two sentences' halves
        base.append(_splice(rng.choice(sentences), rng.choice(sentences)))
    lines = list(base)
    source_of = list(range(len(base)))  # each line's base text (a base line is its own)
    while len(lines) < n:
        source = rng.randrange(len(base))
        lines.append(_edit(base[source], rng) if rng.random() < 0.8 else base[source])
        source_of.append(source)
    order = list(range(len(lines)))
    rng.shuffle(order)
    lines, source_of = [lines[i] for i in order], [source_of[i] for i in order]
    spliced = max(0, len(base) - len(sentences))
    out.write_text("".join(line.replace("\n", " ") + "\n" for line in lines), encoding="utf-8")
    first_line = {}
    for number, source in enumerate(source_of):
        first_line.setdefault(source, number)
    planted = [(first_line[source], number) for number, source in enumerate(source_of) if first_line[source] != number]
    Path(f"{out}.planted.json").write_text(json.dumps(planted))  # (base line, copy line) of every planted copy
    Path(f"{out}.made.json").write_text(json.dumps({"corpus": corpus, "n": n, "copies": copies, "seed": seed,
                                                    "splice": splice}))
    return {"lines": len(lines), "corpus_sentences": len(base) - spliced, "spliced": spliced, "out": str(out),
            "planted_pairs": len(planted)}


def clustering_figures(path: Path, model_path: str, clusters: str, threshold: float, out: Path) -> dict:
    """``swembed dedup`` on ``path`` with one clustering: wall time, what it removed, and the removed records whose
    cosine to their representative is below the threshold (the chained ones)."""
    from swembed.dedup import DedupConfig, dedup

    start, cpu = time.perf_counter(), time.process_time()
    summary = dedup([path], model_path, out, DedupConfig(threshold=threshold, clusters=clusters, progress=False),
                    overwrite=True)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    rows = [line.split("\t") for line in (out / "mapping.tsv").read_text(encoding="utf-8").split("\n")[1:-1]]
    representative = [int(row[3]) for row in rows]
    near = [float(row[4]) for row in rows if row[5] == "near"]
    sizes: dict[int, int] = {}
    for rep in representative:
        sizes[rep] = sizes.get(rep, 0) + 1
    return {"clusters": clusters, "seconds": round(seconds, 1), "cpu_s": round(cpu, 1),
            "grouping_cpu_s": summary["seconds"]["grouping_cpu"], "records": summary["records"],
            "kept": summary["kept"],
            "exact": summary["exact_duplicates"], "near": summary["near_duplicates"],
            "near_below_threshold": sum(s < threshold for s in near), "lowest_near_similarity": min(near, default=None),
            "multi_record_clusters": sum(size > 1 for size in sizes.values()), "representative": representative}


def planted_recall(path: Path, figures: dict) -> float:
    """Share of the planted (base, copy) pairs that end in one cluster."""
    planted = json.loads(Path(f"{path}.planted.json").read_text())
    rep = figures["representative"]
    return sum(rep[a] == rep[b] for a, b in planted) / max(len(planted), 1)


REPORT_HEADER = ("| data | clusters | records | kept | exact | near | near below threshold | lowest near cosine | "
                 "multi-record clusters | planted recall | CPU s | of which grouping CPU s | wall s |")


def report(model_path: str, corpus: list[str], n: int, real: list[str], real_lines: int, threshold: float,
           work: Path, out: Path, command: str) -> str:
    """reports/dedup.md: stars (the default) against connected components on a planted benchmark and real text."""
    from swembed.pipeline.sources import expand_sources, read_source

    work.mkdir(parents=True, exist_ok=True)
    planted_path = work / "planted.txt"
    made = make(corpus, n, planted_path)
    real_path = work / "real.txt"
    texts = []
    for source in expand_sources(real):
        texts.extend(t.replace("\n", " ").strip() for t in read_source(source) if t.strip())
        if len(texts) >= real_lines:
            break
    real_path.write_text("".join(t + "\n" for t in texts[:real_lines]), encoding="utf-8")
    rows = []
    for name, path in (("planted", planted_path), ("real text", real_path)):
        for clusters in ("star", "components"):
            figures = clustering_figures(path, model_path, clusters, threshold, work / f"{name[:4]}-{clusters}")
            recall = f"{100 * planted_recall(path, figures):.2f}%" if name == "planted" else "-"
            lowest = figures["lowest_near_similarity"]
            rows.append(f"| {name} | {clusters}{' (default)' if clusters == 'star' else ''} | {figures['records']:,} | "
                        f"{figures['kept']:,} | {figures['exact']:,} | {figures['near']:,} | "
                        f"{figures['near_below_threshold']:,} | {'-' if lowest is None else f'{lowest:.4f}'} | "
                        f"{figures['multi_record_clusters']:,} | {recall} | {figures['cpu_s']} | "
                        f"{figures['grouping_cpu_s']} | {figures['seconds']} |")
    text = f"""# Dedup clusters: stars (default) against connected components

Generated by `{command}`.

`swembed dedup --clusters star` (the default) keeps a text only when none of its near-duplicate partners
(cosine >= threshold) is kept already, visiting texts in keep order, and every other text joins its most similar
kept partner, so each removed record is a near duplicate of the record that keeps it. `--clusters components`
joins connected components (single linkage): chains a ~ b ~ c merge texts that are not near duplicates of each
other. Threshold {threshold}; model `{model_path}`; search `auto` (exact below 50,000 distinct texts, k = 16).

- planted: {made['lines']:,} lines from `{' '.join(corpus)}` (`python -m lab.dedup_bench make`): 70% corpus
  sentences, the rest copies of them, 80% of those with one edit; {made['planted_pairs']:,} planted (base, copy)
  pairs. Recall: planted pairs that end in one cluster.
- real text: the first {len(texts[:real_lines]):,} non-empty lines of `{' '.join(real)}`.

<!-- generated: {command} -->

{REPORT_HEADER}
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
""" + "\n".join(rows) + """

"near below threshold": removed near duplicates whose cosine to their representative (the mapping's
`similarity`, 4 decimals) is below the threshold. "exact"/"near" count records; an exact copy of a text removed as
a near duplicate counts as near, so the split moves by a record or two with the clustering. Speed: CPU seconds of
the whole `swembed dedup` run (this process: hashing, encoding, search, grouping, writing) and of the grouping
step alone (stars or components, `summary.json` `seconds.grouping_cpu`; the first components run of the process also
pays scipy's import); the pair search, which dominates, is the same for both, and so is the ANN recall that
`python -m lab.dedup_bench recall` measures (it checks pairs, not clusters). Wall
seconds are of one run on a shared 2-core machine under heavy load from other jobs, so they are not comparable
between rows; CPU seconds are.
"""
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    out.write_text(text, encoding="utf-8")
    if SPEED_HEADING in old:  # versus's section (its own command) stays
        write_section(out, SPEED_HEADING, old[old.index(SPEED_HEADING) :])
    return text


def recall(path: Path, model_path: str, threshold: float, sample: int, k: int, nprobe: int, seed: int) -> dict:
    from swembed import load
    from swembed.dedup.clusters import ExactKey, near_pairs

    model = load(model_path)
    key = ExactKey.of_model(model)
    first_text: dict[str, str] = {}
    for text in path.read_text(encoding="utf-8").split("\n")[:-1]:
        first_text.setdefault(key.key(text), text)
    texts = list(first_text.values())  # the distinct texts, as swembed dedup encodes them
    vectors = np.asarray(model.encode(texts), dtype=np.float32)
    start = time.perf_counter()
    a, b, _ = near_pairs(vectors, threshold, k, "ann", nprobe)
    ann_seconds = time.perf_counter() - start
    queries = np.sort(np.random.default_rng(seed).choice(len(texts), size=min(sample, len(texts)), replace=False))
    found = {(int(x), int(y)) for x, y in zip(a, b)}
    true, hit, found_for_sample = 0, 0, 0
    flagged_exact, flagged_ann = 0, 0
    partners = {}
    for x, y in found:
        partners.setdefault(x, set()).add(y)
        partners.setdefault(y, set()).add(x)
    start = time.perf_counter()
    for i in range(0, len(queries), 2048):
        block = queries[i : i + 2048]
        scores = vectors[block] @ vectors.T
        scores[np.arange(len(block)), block] = -np.inf
        for q, row in zip(block.tolist(), scores):
            neighbours = set(np.flatnonzero(row >= threshold).tolist())
            mine = partners.get(q, set())
            true += len(neighbours)
            hit += len(neighbours & mine)
            found_for_sample += len(mine)
            flagged_exact += bool(neighbours)
            flagged_ann += bool(mine & neighbours)
    exact_seconds = time.perf_counter() - start
    return {"distinct_texts": len(texts), "threshold": threshold, "k": k, "nprobe": nprobe,
            "sample": len(queries), "pair_recall": hit / max(true, 1), "pair_precision": hit / max(found_for_sample, 1),
            "pairs_true": true, "pairs_found": hit, "record_recall": flagged_ann / max(flagged_exact, 1),
            "ann_search_s": round(ann_seconds, 1), "exact_search_s_for_sample": round(exact_seconds, 1)}


def semhash_run(path: Path, model_dir: str, threshold: float, out: Path) -> None:
    """semhash's ``self_deduplicate`` over the lines of ``path`` (records ``{"line", "text"}``, deduplicated on
    ``text``) with the model2vec model ``model_dir``: the kept lines to ``out``, the removed line numbers to
    ``out.removed.npy``."""
    from model2vec import StaticModel
    from semhash import SemHash

    texts = path.read_text(encoding="utf-8").split("\n")[:-1]
    records = [{"line": i, "text": text} for i, text in enumerate(texts)]
    index = SemHash.from_records(records, columns=["text"], model=StaticModel.from_pretrained(model_dir))
    result = index.self_deduplicate(threshold=threshold)
    out.write_text("".join(r["text"] + "\n" for r in result.selected), encoding="utf-8")
    np.save(f"{out}.removed.npy", np.asarray(sorted(d.record["line"] for d in result.filtered), np.int64))


def _timed(command: list[str]) -> tuple[float, float]:
    """Run ``command`` (it must succeed): its wall seconds and its own peak RSS in GB."""
    import os
    import subprocess

    start = time.perf_counter()
    process = subprocess.Popen(command)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed ({os.waitstatus_to_exitcode(status)})")
    return seconds, usage.ru_maxrss / 1024 ** 2


def copies_removed(path: Path, removed: np.ndarray) -> tuple[float, int]:
    """Share of the planted copies (the later line of each planted pair) that a run removed, and how many other
    lines it removed."""
    copies = np.unique(np.asarray(json.loads(Path(f"{path}.planted.json").read_text()), np.int64)[:, 1])
    return float(np.isin(copies, removed).mean()), int(len(removed) - np.isin(removed, copies).sum())


def versus(path: Path, model: str, semhash_model: str, threshold: float, repeat: int, work: Path) -> list[dict]:
    """``swembed dedup`` then semhash 0.5.0 on ``path``, ``repeat`` times back to back (each its own process, so
    both see the same load): wall seconds, peak RSS, planted copies removed, other lines removed, the ratio, the
    load average before each pair and swembed's own pass timings."""
    import os
    import sys

    swembed = str(Path(sys.executable).with_name("swembed"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for _ in range(repeat):
        load = os.getloadavg()[0]
        ours = _timed([swembed, "dedup", str(path), "--model", model, "--threshold", str(threshold), "--quiet",
                       "--overwrite", "--out", str(work / "swembed")])
        theirs = _timed([sys.executable, "-m", "lab.dedup_bench", "semhash-run", str(path), "--model", semhash_model,
                         "--threshold", str(threshold), "--out", str(work / "semhash.txt")])
        reasons = [line.rsplit("\t", 1)[1] for line in
                   (work / "swembed" / "mapping.tsv").read_text(encoding="utf-8").split("\n")[1:-1]]
        removed = np.flatnonzero(np.asarray(reasons) != "kept")
        ours_recall, ours_others = copies_removed(path, removed)
        theirs_recall, theirs_others = copies_removed(path, np.load(f"{work / 'semhash.txt'}.removed.npy"))
        summary = json.loads((work / "swembed" / "summary.json").read_text(encoding="utf-8"))
        rows.append({"swembed_s": ours[0], "semhash_s": theirs[0], "ratio": theirs[0] / ours[0],
                     "swembed_recall": ours_recall, "semhash_recall": theirs_recall, "swembed_others": ours_others,
                     "semhash_others": theirs_others, "swembed_peak_gb": ours[1], "semhash_peak_gb": theirs[1],
                     "load_before": load, "swembed_passes_s": summary["seconds"],
                     "distinct_texts": summary["distinct_texts"]})
        print(json.dumps(rows[-1]), flush=True)
    return rows


SPEED_HEADING = "## Speed against semhash 0.5.0"
SPEED_COLUMNS = ("| run | load before | swembed wall s | semhash wall s | speed-up | swembed copies removed | "
                 "semhash copies removed | others removed (swembed / semhash) | peak GB (swembed / semhash) | "
                 "swembed passes s |")


def speed_section(rows: list[dict], path: Path, model: str, command: str, note: str = "") -> str:
    """reports/dedup.md's section on ``versus``'s runs (one table row per run)."""
    import shlex

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    planted = len(json.loads(Path(f"{path}.planted.json").read_text()))
    made = json.loads(Path(f"{path}.made.json").read_text())
    make_command = (f"python -m lab.dedup_bench make --corpus {' '.join(map(shlex.quote, made['corpus']))} "
                    f"--n {made['n']}" + (f" --copies {made['copies']}" if made["copies"] is not None else "")
                    + (" --splice" if made["splice"] else "") + f" --out {path}")
    lines = sum(1 for _ in path.open(encoding="utf-8"))
    table = "\n".join(
        f"| {i + 1} | {r['load_before']:.1f} | {r['swembed_s']:.1f} | {r['semhash_s']:.1f} | **{r['ratio']:.1f}x** | "
        f"{100 * r['swembed_recall']:.2f}% | {100 * r['semhash_recall']:.2f}% | {r['swembed_others']:,} / "
        f"{r['semhash_others']:,} | {r['swembed_peak_gb']:.2f} / {r['semhash_peak_gb']:.2f} | "
        f"{r['swembed_passes_s']['pass1_hash_encode']} / {r['swembed_passes_s']['pass2_search_cluster']} / "
        f"{r['swembed_passes_s']['pass3_write']} |" for i, r in enumerate(rows))
    return f"""{SPEED_HEADING}

<!-- generated: {command} -->

Generated {time.strftime('%Y-%m-%d')} by `{command}` (issue 60): `swembed dedup` and semhash 0.5.0's
`self_deduplicate` (usearch HNSW, its default) on the same {lines:,} lines (`{make_command}`:
{planted:,} planted copies of corpus lines, 80% of them with one edit; {rows[0]['distinct_texts']:,} distinct texts),
threshold 0.9, the same table (`{model}`; semhash reads its `swembed export --format model2vec`). Each row runs
swembed, then semhash, back to back, each in its own process, timed end to end (start-up, reading, encoding, search,
grouping, writing the kept lines). Recall: planted copies removed (the later line of each planted pair). Peak: each
process's own maximum RSS. Machine: {cpu}, 2 cores shared with other jobs (a model build was running; the load
average before each pair is given), every process `nice`d with `OMP_NUM_THREADS=1`, so wall times are rough and
only the ratio within a row compares like with like. swembed's passes: read + exact hash + encode / search + group
/ write.{" " + note if note else ""}

{SPEED_COLUMNS}
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{table}
"""


def write_section(report: Path, heading: str, section: str) -> None:
    """Replace ``report``'s section under ``heading`` (to the next ``## `` heading or the end), or append it."""
    text = report.read_text(encoding="utf-8") if report.exists() else ""
    start = text.find(heading)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(heading))
        text = text[:start] + (section.rstrip("\n") + "\n\n" + text[end + 1 :] if end >= 0 else section)
    report.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make")
    p.add_argument("--corpus", nargs="+", required=True)
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--out", required=True)
    p.add_argument("--splice", action="store_true", help="make texts from halves of two sentences when short")
    p.add_argument("--copies", type=int, help="planted copies (default 30%% of --n)")
    p = sub.add_parser("report", help="reports/dedup.md: stars against connected components")
    p.add_argument("--model", required=True)
    p.add_argument("--corpus", nargs="+", required=True, help="sources of the planted benchmark")
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--real", nargs="+", required=True, help="sources of the real-text run")
    p.add_argument("--real-lines", type=int, default=20_000)
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("--work", default="/tmp/swembed-dedup-report")
    p.add_argument("--out", default="reports/dedup.md")
    p = sub.add_parser("leak", help="reports/dedup-leak.md: --against on planted leaks, re-cut vs fresh run")
    p.add_argument("--work", default="/tmp/swembed-dedup-leak")
    p.add_argument("--others", type=int, default=100_000)
    p.add_argument("--copies", type=int, default=2_000)
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("--spark", action="store_true", help="also run --against on Spark local[2] and compare")
    p.add_argument("--out", default="reports/dedup-leak.md")
    p = sub.add_parser("semhash-run", help="semhash 0.5.0's self_deduplicate on a text file (one run)")
    p.add_argument("input")
    p.add_argument("--model", required=True, help="a model2vec folder (swembed export MODEL --format model2vec)")
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("--out", required=True)
    p = sub.add_parser("versus", help="swembed dedup against semhash 0.5.0, back to back: time, memory, recall")
    p.add_argument("input", help="a file from make (with its .planted.json)")
    p.add_argument("--model", required=True)
    p.add_argument("--semhash-model", required=True, help="the same table exported: --format model2vec")
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--work", default="/tmp/swembed-dedup-versus")
    p.add_argument("--out", help="write the runs as a section of this report (reports/dedup.md)")
    p.add_argument("--note", default="", help="a sentence for the report on the conditions (what the table is)")
    p = sub.add_parser("recall")
    p.add_argument("input")
    p.add_argument("--model", required=True)
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("--sample", type=int, default=50_000)
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--nprobe", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.command == "make":
        print(json.dumps(make(args.corpus, args.n, Path(args.out), splice=args.splice, copies=args.copies), indent=2))
    elif args.command == "leak":
        import shlex
        import sys

        command = "python -m lab.dedup_bench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        print(leak(Path(args.work), args.others, args.copies, args.threshold, args.spark, command, Path(args.out)))
    elif args.command == "report":
        import shlex
        import sys

        command = "python -m lab.dedup_bench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        print(report(args.model, args.corpus, args.n, args.real, args.real_lines, args.threshold, Path(args.work),
                     Path(args.out), command))
    elif args.command == "semhash-run":
        semhash_run(Path(args.input), args.model, args.threshold, Path(args.out))
    elif args.command == "versus":
        import shlex
        import sys

        rows = versus(Path(args.input), args.model, args.semhash_model, args.threshold, args.repeat, Path(args.work))
        if args.out:
            command = "python -m lab.dedup_bench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
            write_section(Path(args.out), SPEED_HEADING, speed_section(rows, Path(args.input), args.model, command,
                                                                   args.note))
    else:
        print(json.dumps(recall(Path(args.input), args.model, args.threshold, args.sample, args.k, args.nprobe,
                                args.seed), indent=2))


if __name__ == "__main__":
    main()
