"""Query-document pairs from Debian's package descriptions: each package's one-line summary (a short query) and
its long description (the document it should find). Issue 51's "retrieval supervision" lever: the shared
corpora hold no query-passage pairs, and Debian's index, which apt reaches, holds about 64,000 of them, mostly
about software, some from Debian Med and Debian Science (bioinformatics, chemistry, medicine, statistics).

Reads the ``Translation-en`` index of Debian's main archive (fetched with ``apt-get update`` into a temporary
lists folder unless ``--translation`` names a copy; licence: each description is its package's, shipped in the
archive's index) and writes ``summary<TAB>description`` lines (gzip), for a recipe's ``[retrieval] files``:

    python -m lab.debian_descriptions --out models/corpora/debian_descriptions.tsv.gz

A description shared by several packages (``-dev``, ``-doc`` and library splits repeat their source's text)
is kept once, with the first summary (a repeat: the same first 20 words); descriptions under ``--min-words``
words and summaries under 2 words are dropped. ``--dev-out`` writes every ``--dev-every``-th source package's
pairs to a second file instead (held out: a retrieval dev set of text no build reads), split by source package so
that no split shares a text.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from swembed.runtime.outputs import atomic_file
from swembed.runtime.textfile import COMPRESSED

PREFIX_WORDS = 20
TRANSLATION_GLOB = "*_debian_dists_*_main_i18n_Translation-en*"


def fetch_translation(folder: Path) -> Path:
    """``apt-get update`` into ``folder`` with English descriptions on; the main archive's Translation-en file."""
    (folder / "partial").mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "-q", "-o", "Acquire::Languages=en", "-o", f"Dir::State::Lists={folder}",
                    "-o", "APT::Sandbox::User=root", "update"], check=True, stdout=subprocess.DEVNULL)
    found = sorted(p for p in folder.glob(TRANSLATION_GLOB) if "security" not in p.name and "updates" not in p.name)
    if not found:
        raise FileNotFoundError(f"{folder}: apt-get update wrote no main Translation-en index")
    return found[0]


def read_index(path: Path) -> str:
    """The text of a Translation-en index, plain, .lz4 (apt's own lists) or compressed as corpora may be."""
    if path.suffix == ".lz4":
        return subprocess.run(["lz4", "-dc", str(path)], check=True, capture_output=True).stdout.decode("utf-8",
                                                                                                       "replace")
    with COMPRESSED.get(path.suffix, open)(path, "rt", encoding="utf-8", errors="replace") as handle:
        return handle.read()


def descriptions(index: str) -> Iterator[tuple[str, str, str]]:
    """(package, summary, long description) of each record: continuation lines joined by spaces, ``.`` lines
    (paragraph breaks) dropped."""
    for record in index.split("\n\n"):
        package, summary, body, in_description = "", "", [], False
        for line in record.split("\n"):
            if line.startswith("Package:"):
                package = line.split(":", 1)[1].strip()
            elif line.startswith("Description-en:"):
                summary, in_description = line.split(":", 1)[1].strip(), True
            elif in_description and line.startswith(" "):
                text = line.strip()
                if text != ".":
                    body.append(text)
            else:
                in_description = False
        if package and summary and body:
            yield package, " ".join(summary.split()), " ".join(" ".join(body).split())


def source_key(package: str) -> str:
    """The name a package's split siblings share (``libfoo-dev``, ``libfoo-doc`` -> ``libfoo``)."""
    for suffix in ("-dev", "-doc", "-dbg", "-common", "-data", "-bin", "-utils", "-tools", "-examples"):
        if package.endswith(suffix):
            return package[: -len(suffix)]
    return package


def is_dev(package: str, every: int) -> bool:
    """Whether ``package``'s source falls in the held-out share (a stable hash, one in ``every``)."""
    return every > 0 and int(hashlib.sha1(source_key(package).encode()).hexdigest(), 16) % every == 0


def pairs(index: str, min_words: int) -> Iterator[tuple[str, str, str]]:
    """(package, summary, description) with short texts dropped, and a description whose first ``PREFIX_WORDS``
    words an earlier one had (split packages add a line to their source's text) dropped; tabs become spaces."""
    seen = set()
    for package, summary, body in descriptions(index):
        summary, body = summary.replace("\t", " "), body.replace("\t", " ")
        key = " ".join(body.lower().split()[:PREFIX_WORDS])
        if len(summary.split()) < 2 or len(body.split()) < min_words or key in seen:
            continue
        seen.add(key)
        yield package, summary, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the .tsv.gz file of training pairs")
    parser.add_argument("--translation", type=Path, help="a Translation-en index (default: fetch with apt-get)")
    parser.add_argument("--min-words", type=int, default=12, help="drop descriptions under this many words")
    parser.add_argument("--dev-out", type=Path, help="a .tsv.gz file for the held-out pairs")
    parser.add_argument("--dev-every", type=int, default=20, help="hold out one source package in this many")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = args.translation or fetch_translation(Path(tmp))
            index = read_index(path)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"{args.translation or 'apt-get update'}: {exc}", file=sys.stderr)
            return 1
    every = args.dev_every if args.dev_out else 0
    kept = {False: [], True: []}
    for package, summary, body in pairs(index, args.min_words):
        kept[is_dev(package, every)].append(f"{summary}\t{body}\n")
    outputs = [(args.out, kept[False])] + ([(args.dev_out, kept[True])] if args.dev_out else [])
    for out, lines in outputs:
        with atomic_file(out, overwrite=True) as tmp_path, gzip.open(tmp_path, "wt", encoding="utf-8") as handle:
            handle.writelines(lines)
        print(f"{out}: {len(lines):,} pairs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
