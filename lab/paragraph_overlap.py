"""The retrieval dev set (``lab.mteb_levers``) scored on all queries and on those whose sentence is in no paragraph
the ``[paragraphs]`` stage distilled (and, with ``--queries``, is no query line of its ``queries`` stage): a query
inside a training text or pair may favour the variant.

    python -m lab.paragraph_overlap WORK_DIR MODEL [MODEL ...] --data ../shared/data [--queries]
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

from lab.mteb_levers import ndcg_at_10, retrieval_dev
from swembed.eval.models import load_encoder
from swembed.pipeline import files


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def paragraph_sentences(work: Path, per_paragraph: int, queries: bool = False) -> set[str]:
    """The (keyed) corpus sentences inside a distilled paragraph of the work folder's paragraphs stage, and with
    ``queries`` the query lines of its queries stage."""
    paragraphs = {_key(p) for p in files.read_lines(next(work.glob("paragraphs-*/" + files.TARGET_SENTENCES)))}
    lines = {_key(q) for stage in work.glob("queries-*/" + files.TARGET_SENTENCES) for q in files.read_lines(stage)}
    corpus = files.read_lines(next(work.glob("corpus-*/" + files.SENTENCES)))
    used: set[str] = set()
    for start in range(0, len(corpus) - per_paragraph + 1, per_paragraph):
        run = corpus[start : start + per_paragraph]
        if _key(" ".join(run)) in paragraphs:
            used.update(map(_key, run))
    return used | lines if queries else used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path, help="the build's work folder (one paragraphs stage)")
    parser.add_argument("models", nargs="+")
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--sentences", type=int, default=4, help="[paragraphs] sentences of that stage")
    parser.add_argument("--queries", action="store_true", help="also leave out the query lines of its queries stage")
    args = parser.parse_args(argv)
    queries, docs, gold = retrieval_dev(Path(args.data))
    used = paragraph_sentences(args.work, args.sentences, args.queries)
    clean = np.array([_key(q) not in used for q in queries])
    for spec in args.models:
        encode = load_encoder(spec)[1]
        print(f"{spec}: all {ndcg_at_10(encode, queries, docs, gold):.2f}; {int(clean.sum())} queries in no "
              f"paragraph {ndcg_at_10(encode, [q for q, c in zip(queries, clean) if c], docs, gold[clean]):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
