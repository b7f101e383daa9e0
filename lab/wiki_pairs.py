"""Open-domain pseudo-queries from the Wikipedia prose in ``../shared/data/corpora/en`` (issue 57), for
``[retrieval] files``: the search recipe's pairs are scientific, health and news text, and its table retrieves
Wikipedia worse than the general recipe's.

The text is cut into the blocks of ``BLOCK`` consecutive lines that ``lab.mteb_levers``' Wikipedia retrieval dev set
is made of; the 4,000 blocks of that dev set (queries and distractors) are left out, and every other block gives
the pseudo-queries ``lab.sci_splits`` derives from a document: its first sentence -> the rest, and one seeded
middle sentence -> the block without it (queries of 5+ words). The dev set's own shape is the middle sentence
against the other eight, so its score rises partly by format; the held-out sets of ``lab.heldout_retrieval``
are the fair check.

    python -m lab.wiki_pairs --data ../shared/data --out models/corpora/general/wiki-pseudo.tsv.gz
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from lab.mteb_levers import RETRIEVAL_SOURCES, dev_block_ids, wiki_blocks
from swembed.pipeline.splits import gzip_bytes, pseudo_queries
from swembed.runtime.outputs import atomic_file


def wiki_pairs(data: Path, seed: int = 0) -> list[tuple[str, str]]:
    """(query, passage) pairs of every Wikipedia block outside the retrieval dev set."""
    blocks = wiki_blocks(data)
    held_out = set(dev_block_ids(len(blocks))[0])
    rng = random.Random(seed)
    return [pair for i, block in enumerate(blocks) if i not in held_out
            for pair in pseudo_queries(" ".join(block), rng)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=Path("models/corpora/general/wiki-pseudo.tsv.gz"))
    args = parser.parse_args(argv)
    missing = [source for source in RETRIEVAL_SOURCES if not (args.data / source).is_file()]
    if missing:
        print(f"{args.data}: missing {', '.join(missing)}", file=sys.stderr)
        return 2
    pairs = wiki_pairs(args.data)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(args.out, overwrite=True) as tmp:
        tmp.write_bytes(gzip_bytes([f"{q}\t{d}" for q, d in pairs]))
    print(f"{args.out}: {len(pairs):,} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
