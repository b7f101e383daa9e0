"""Share of word tokens a table does not know (they back off to pieces and grams), in SciFact's queries and
abstracts and in the two retrieval dev sets of ``lab.mteb_levers``; with ``--words LIST``, the share left
unknown once the list's words had rows (the ``words:LIST`` lever). Reads SciFact's texts only to count, never to
choose anything.

    python -m lab.unknown_words models/minilm-256-shared --data ../shared/data \\
        [--words /usr/share/dict/american-english-huge]
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from lab.mteb_levers import docstring_dev, list_words, retrieval_dev
from swembed import load


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--words", type=Path, help="a word list (one word a line)")
    args = parser.parse_args(argv)
    tokenizer = load(args.model).tokenizer
    listed = set(list_words(args.words, tokenizer)) if args.words else set()
    scifact = args.data / "eval-mteb" / "SciFact"
    read = [json.loads(line) for line in (scifact / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    corpus = [json.loads(line) for line in (scifact / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    wiki_queries, wiki_docs, _ = retrieval_dev(args.data)
    doc_queries, doc_docs, _ = docstring_dev()
    sets = {"SciFact queries": [r["text"] for r in read],
            "SciFact abstracts": [f"{r['title']} {r['text']}" for r in corpus],
            "Wikipedia dev queries": wiki_queries, "Wikipedia dev documents": wiki_docs,
            "docstring dev queries": doc_queries, "docstring dev documents": doc_docs}
    for name, texts in sets.items():
        counts = Counter(w for text in texts for w in tokenizer.words(text))
        total = sum(counts.values())
        unknown = {w: n for w, n in counts.items() if w not in tokenizer.vocab}
        line = f"{name}: {100 * sum(unknown.values()) / total:.1f}% of {total:,} word tokens unknown"
        if args.words:
            left = sum(n for w, n in unknown.items() if w not in listed)
            line += f", {100 * left / total:.1f}% with the list's words"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
