"""Query -> window pairs for the search recipe's contrastive objective (issue 82): teach the table what a windowed
search asks of it, that a query's words land near the one window of its passage that answers it.

Each training pair of the search recipe's ``[retrieval] files`` (``query<TAB>passage``) gives the passage's window
(``swembed.runtime.windows.word_windows``, 8 words every 4) that shares the most with the query: the sum of the IDF
(over the pairs' passages) of the distinct lower-cased words the two share, the first such window on ties. A pair
whose passage has no window (8 words or fewer) or whose best window shares no word is left out. No teacher time.

    python -m lab.window_pairs models/corpora/sci/pairs.tsv.gz models/corpora/sci/pseudo.tsv.gz \\
        --out models/corpora/sci-windows/windows.tsv.gz

``lab/pipelines/minilm-256-sci-wpairs.toml`` adds the file to the recipe's ``[retrieval] files``.
"""
from __future__ import annotations

import argparse
import gzip
import math
import re
import sys
from collections import Counter
from pathlib import Path

from swembed.pipeline.parallel import read_parallel
from swembed.runtime.outputs import atomic_file
from swembed.runtime.windows import WIDTH, word_windows

_WORD = re.compile(r"\w+")


def words_of(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def best_window(query: str, passage: str, idf: dict[str, float], width: int = WIDTH) -> str | None:
    """The window of ``passage`` sharing the most IDF with ``query``; None where it has none or none shares."""
    asked = words_of(query)
    best, best_score = None, 0.0
    for window in word_windows(passage, width):
        score = sum(idf.get(w, 0.0) for w in asked & words_of(window))
        if score > best_score:
            best, best_score = window, score
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="query<TAB>passage files (.tsv or .tsv.gz)")
    parser.add_argument("--out", type=Path, required=True, help="the query<TAB>window file to write (.tsv.gz)")
    args = parser.parse_args(argv)
    pairs = read_parallel([str(f) for f in args.files])
    passages = list(dict.fromkeys(p for _, p in pairs))
    counts = Counter(w for p in passages for w in words_of(p))
    idf = {w: math.log(len(passages) / c) for w, c in counts.items()}
    lines = []
    for query, passage in pairs:
        window = best_window(query, passage, idf)
        if window is not None:
            lines.append(f"{query}\t{window}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(args.out) as tmp:
        Path(tmp).write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0))
    print(f"{args.out}: {len(lines):,} query -> window pairs of {len(pairs):,} pairs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
