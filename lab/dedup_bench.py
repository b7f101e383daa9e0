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
(float16), runs the same ANN pair search, and for ``sample`` random texts compares the pairs it found with
every pair an exact search over all texts finds at the same threshold.
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


def _splice(first: str, second: str) -> str:
    a, b = first.split(), second.split()
    return " ".join(a[: (len(a) + 1) // 2] + b[len(b) // 2 :])


def make(corpus: list[str], n: int, out: Path, seed: int = 0, splice: bool = False) -> dict:
    from swembed.pipeline.sources import expand_sources, read_source

    rng = random.Random(seed)
    sentences = []
    for path in expand_sources(corpus):
        for text in read_source(path):
            if text.strip():
                sentences.append(text.strip())
            if len(sentences) >= n:
                break
    base = sentences[: int(n * 0.7)]
    while splice and len(base) < int(n * 0.7):  # a corpus too small for n: texts of two sentences' halves
        base.append(_splice(rng.choice(sentences), rng.choice(sentences)))
    lines = list(base)
    while len(lines) < n:
        source = rng.choice(base)
        lines.append(_edit(source, rng) if rng.random() < 0.8 else source)
    rng.shuffle(lines)
    spliced = max(0, len(base) - len(sentences))
    out.write_text("".join(line.replace("\n", " ") + "\n" for line in lines), encoding="utf-8")
    return {"lines": len(lines), "corpus_sentences": len(base) - spliced, "spliced": spliced, "out": str(out)}


def recall(path: Path, model_path: str, threshold: float, sample: int, k: int, nprobe: int, seed: int) -> dict:
    from swembed import load
    from swembed.dedup.clusters import ann_search_pairs, normalized_key

    model = load(model_path)
    first_text: dict[str, str] = {}
    for text in path.read_text(encoding="utf-8").split("\n")[:-1]:
        first_text.setdefault(normalized_key(text), text)
    texts = list(first_text.values())  # the distinct texts, as swembed dedup encodes them
    vectors = model.encode(texts).astype(np.float16).astype(np.float32)
    start = time.perf_counter()
    a, b, _ = ann_search_pairs(vectors, threshold, k, nprobe)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make")
    p.add_argument("--corpus", nargs="+", required=True)
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--out", required=True)
    p.add_argument("--splice", action="store_true", help="make texts from halves of two sentences when short")
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
        print(json.dumps(make(args.corpus, args.n, Path(args.out), splice=args.splice), indent=2))
    else:
        print(json.dumps(recall(Path(args.input), args.model, args.threshold, args.sample, args.k, args.nprobe,
                                args.seed), indent=2))


if __name__ == "__main__":
    main()
