"""A corpus of WordNet 3.0 definitions, one per synset: ``lemma, lemma: definition.`` (issue 51's "text like the
task's" lever: the shared corpora hold WordNet's usage examples but not its glosses, which define most of the
scientific, medical and technical vocabulary the tables lack).

Reads Debian's ``wordnet-base`` (``apt-get install wordnet-base``: ``/usr/share/wordnet/data.*``, WordNet licence)
and writes one gzip text file, one sentence a line, for a recipe's ``[corpus] sources``:

    python -m lab.wordnet_glosses --out models/corpora/wordnet_glosses.txt.gz

The quoted usage examples inside a gloss are dropped (``corpora/en/wordnet_examples.txt.gz`` has them); each
synset's definitions (its gloss without the examples, ``;`` between definitions) become one line, headed by the
synset's lemmas (underscores read as spaces, at most four).
"""
from __future__ import annotations

import argparse
import gzip
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from swembed.runtime.outputs import atomic_file

WORDNET = Path("/usr/share/wordnet")
PARTS = ("noun", "verb", "adj", "adv")
EXAMPLE = re.compile(r'"[^"]*"')
ADJ_MARKER = re.compile(r"\((?:a|p|ip)\)$")


def synset_lines(path: Path) -> Iterator[str]:
    """The data lines of one WordNet ``data.*`` file (its licence header starts with two spaces)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.startswith("  ") and "|" in line:
                yield line


def gloss_sentence(line: str, max_lemmas: int = 4) -> str | None:
    """``lemma, lemma: definition; definition.`` for one data line, or None if it defines nothing."""
    head, _, gloss = line.partition("|")
    fields = head.split()
    count = int(fields[3], 16)
    lemmas = [ADJ_MARKER.sub("", fields[4 + 2 * i]).replace("_", " ") for i in range(count)]
    definition = EXAMPLE.sub("", gloss).strip().strip(";").strip()
    definition = re.sub(r"\s*;\s*(;\s*)*", "; ", definition).strip("; ")
    if not definition:
        return None
    words = ", ".join(dict.fromkeys(lemmas[:max_lemmas]))
    return f"{words[:1].upper()}{words[1:]}: {definition.rstrip('.')}."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wordnet", type=Path, default=WORDNET, help="the folder with data.noun ... data.adv")
    parser.add_argument("--out", type=Path, required=True, help="the .txt.gz file to write")
    args = parser.parse_args(argv)
    missing = [p for p in PARTS if not (args.wordnet / f"data.{p}").is_file()]
    if missing:
        print(f"{args.wordnet}: no data.{missing[0]} (apt-get install wordnet-base)", file=sys.stderr)
        return 1
    written = 0
    with atomic_file(args.out, overwrite=True) as tmp, gzip.open(tmp, "wt", encoding="utf-8") as out:
        for part in PARTS:
            for line in synset_lines(args.wordnet / f"data.{part}"):
                sentence = gloss_sentence(line)
                if sentence:
                    out.write(sentence + "\n")
                    written += 1
    print(f"{args.out}: {written:,} glosses", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
