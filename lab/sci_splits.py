"""Training and dev splits of the scientific documents and query -> passage pairs in ``../shared/data/corpora``
(issue 57), and the pseudo-queries derived from the documents.

Every document (``docs/*.docs.jsonl.gz``) and every pair (``pairs/*.pairs.tsv.gz``) goes to dev when the first
digit of the SHA-1 of its key is 0 (about 1 in 16: a document's id, a pair's passage), so a passage asked for by
several questions is on one side only. Written to ``--out`` (git-ignored ``models/corpora/sci`` by default):

* ``documents.txt.gz``: the training documents, one a line (title, when it is not the text's first sentence,
  then the text; SumPubMed's ``<dig>`` placeholders removed; cut to ``--max-words`` words, about what MiniLM
  reads of a text, so the student averages the words the teacher saw): ``[paragraphs] files`` (document KD);
* ``pairs.tsv.gz``: the training pairs, ``query<TAB>passage`` (passages cut the same way): ``[retrieval] files``;
* ``pseudo.tsv.gz``: pseudo-queries from the training documents: the first sentence (or the title) -> the rest
  of the document, and one seeded middle sentence -> the document without it: ``[retrieval] files``;
* ``retrieval.tsv.gz``: a seeded sample of ``pairs.tsv.gz`` and ``pseudo.tsv.gz``, at most ``--sample`` pairs
  from each file of ``pairs/`` and from the pseudo-queries (what a recipe's teacher reads in minutes);
* ``dev.tsv.gz``: the dev pairs and the dev documents' pseudo-queries, in the same shape (``lab.mteb_levers
  --pairs-dev``: each query's passage ranked among all of the file's passages, nDCG@10);
* ``dev-SOURCE.tsv.gz``: the same dev pairs one file a source (a ``pairs/`` file's name, or ``pseudo``), so
  each is ranked among its own passages (``lab.heldout_retrieval``);
* ``dev_sentences.txt.gz``: every sentence of the dev texts, for a recipe's ``exclude``, so that no corpus
  sentence, KD target or training pair repeats dev text.

    python -m lab.sci_splits --data ../shared/data --out models/corpora/sci
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import random
import re
import sys
from pathlib import Path

from swembed.runtime.outputs import atomic_file

_DIG = re.compile(r"\s*<dig>\s*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def is_dev(key: str) -> bool:
    """Whether a text with this key is held out: about 1 in 16, stable across runs and machines."""
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[0] == "0"


def clean(text: str) -> str:
    """One line: SumPubMed's ``<dig>`` placeholders removed, whitespace collapsed."""
    return " ".join(_DIG.sub(" ", text).split())


def sentences_of(text: str) -> list[str]:
    """A document cut after ``.``, ``!`` or ``?`` followed by a space."""
    return [s for s in _SENTENCE_END.split(text) if s]


def read_documents(folder: Path) -> list[tuple[str, str]]:
    """(key, text) of every document, the title first where the text does not start with it."""
    documents = []
    for path in sorted(folder.glob("*.docs.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                record = json.loads(line)
                title, text = clean(record.get("title") or ""), clean(record["text"])
                if title and not text.startswith(title):
                    text = f"{title.rstrip('.')}. {text}"
                if text:
                    documents.append((f"{path.name}:{record.get('id', number)}", text))
    return documents


def read_source_pairs(folder: Path) -> list[tuple[str, str, str]]:
    """(file name, query, passage) of every ``query<TAB>passage`` pair (further tab fields ignored)."""
    pairs = []
    for path in sorted(folder.glob("*.pairs.tsv.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                query, _, rest = line.rstrip("\n").partition("\t")
                passage = clean(rest.split("\t")[0])
                if query.strip() and passage:
                    pairs.append((path.name.split(".")[0], clean(query), passage))
    return pairs


def pseudo_queries(text: str, rng: random.Random) -> list[tuple[str, str]]:
    """The first sentence -> the rest, and a middle sentence -> the document without it (documents of 4+
    sentences; the query has 5+ words)."""
    sentences = sentences_of(text)
    if len(sentences) < 4:
        return []
    pairs = [(sentences[0], " ".join(sentences[1:]))]
    i = rng.randrange(1, len(sentences) - 1)
    pairs.append((sentences[i], " ".join(sentences[:i] + sentences[i + 1 :])))
    return [(q, d) for q, d in pairs if len(q.split()) >= 5]


def write_lines(path: Path, lines: list[str]) -> None:
    """A gzip file whose bytes depend on ``lines`` only (no name or time in its header), so that running this again
    leaves the builds' caches, keyed on the files' content, valid."""
    with atomic_file(path, overwrite=True) as tmp, open(tmp, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed, \
            io.TextIOWrapper(packed, encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in lines)


def cut(text: str, max_words: int) -> str:
    """The first ``max_words`` words of ``text``."""
    words = text.split()
    return " ".join(words[:max_words])


def make_splits(data: Path, max_words: int = 200, sample: dict[str, int] | None = None,
                seed: int = 0) -> dict[str, list[str]]:
    """The files' lines (see the module docstring); ``sample``: pairs per source (a ``pairs/`` file's name, or
    ``pseudo``) in ``retrieval.tsv.gz``."""
    rng = random.Random(seed)
    train_docs, pseudo, held_out = [], [], []
    dev_by_source: dict[str, list[tuple[str, str]]] = {"pseudo": []}
    for key, text in read_documents(data / "corpora" / "docs"):
        pairs = pseudo_queries(text, rng)
        if is_dev(key):
            dev_by_source["pseudo"] += pairs
            held_out += sentences_of(text)
        else:
            train_docs.append(cut(text, max_words))
            pseudo += [(q, cut(d, max_words)) for q, d in pairs]
    by_source: dict[str, list[tuple[str, str]]] = {}
    for source, query, passage in read_source_pairs(data / "corpora" / "pairs"):
        if is_dev(passage):
            dev_by_source.setdefault(source, []).append((query, passage))
            held_out += [query, *sentences_of(passage)]
        else:
            by_source.setdefault(source, []).append((query, cut(passage, max_words)))
    train_pairs = [pair for pairs in by_source.values() for pair in pairs]
    dev = [pair for pairs in dev_by_source.values() for pair in pairs]
    sampled = []
    for source, pairs in [*by_source.items(), ("pseudo", pseudo)]:
        sampled += rng.sample(pairs, min(len(pairs), (sample or {}).get(source, len(pairs))))
    return {"documents.txt.gz": train_docs, "pairs.tsv.gz": [f"{q}\t{p}" for q, p in train_pairs],
            "pseudo.tsv.gz": [f"{q}\t{d}" for q, d in pseudo], "retrieval.tsv.gz": [f"{q}\t{d}" for q, d in sampled],
            "dev.tsv.gz": [f"{q}\t{d}" for q, d in dev], "dev_sentences.txt.gz": sorted(set(held_out)),
            **{f"dev-{source}.tsv.gz": [f"{q}\t{d}" for q, d in pairs] for source, pairs in dev_by_source.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=Path("models/corpora/sci"))
    parser.add_argument("--max-words", type=int, default=200, help="training documents and passages cut to this")
    parser.add_argument("--sample", default="scitldr=4000,medquad=2000,agnews=500,pseudo=2500",
                        help="retrieval.tsv.gz: pairs per source (SOURCE=N,...)")
    args = parser.parse_args(argv)
    sample = {name: int(n) for name, _, n in (item.partition("=") for item in args.sample.split(",") if item)}
    if not (args.data / "corpora" / "docs").is_dir():
        print(f"{args.data}: no corpora/docs folder (the shared data's scientific documents)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for name, lines in make_splits(args.data, args.max_words, sample).items():
        write_lines(args.out / name, lines)
        print(f"{args.out / name}: {len(lines):,} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
