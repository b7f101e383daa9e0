"""Reverse dictionary on WordNet: find a noun from its definition, with gold that no teacher made.

Each WordNet 3.0 noun synset gives a query (its gloss, examples cut) and an answer (its first lemma). Synsets are
kept when the lemma is lower-case, letters only, the only synset of its lemma, and shares no word with its gloss.
They fall in two buckets by the vocabulary of a reference swembed table (``--vocab-of``): **unseen** (some word of
the lemma has no row, so that table reads it through its sub-word back-off) and **seen**. Within a bucket each gloss
ranks every lemma of the bucket (up to ``--size``, a seeded sample) by cosine; the score is the mean reciprocal rank
x100 and the share ranked first. WordNet's glosses are not in the shared corpus (its example sentences are).

    python -m lab.ood_reverse_dictionary MODEL [MODEL ...] --vocab-of models/minilm-256-shared

MODEL is anything ``swembed eval`` takes, or a swembed folder with the suffix ``:no-backoff``
(``lab/ood_agreement.py``). WordNet comes from Debian's ``wordnet-base`` (``apt-get download``), or ``--wordnet
DIR`` holding ``data.noun``.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

LEMMA = re.compile(r"^[a-z]+(?: [a-z]+)*$")


def wordnet_nouns(folder: Path) -> list[tuple[str, str]]:
    """(lemma, gloss) of every noun synset whose first lemma is a lower-case letters-only word or phrase."""
    entries, lemma_count = [], {}
    for line in (folder / "data.noun").read_text(encoding="utf-8").splitlines():
        if line.startswith(" ") or "|" not in line:
            continue  # the licence header
        fields, gloss = line.split("|", 1)
        parts = fields.split()
        lemmas = [parts[4 + 2 * i].replace("_", " ") for i in range(int(parts[3], 16))]
        for lemma in lemmas:
            lemma_count[lemma.lower()] = lemma_count.get(lemma.lower(), 0) + 1
        gloss = re.split(r';\s*"', gloss)[0].strip().strip(";").strip()
        entries.append((re.sub(r"\(.*?\)$", "", lemmas[0]).strip(), gloss))
    return [(lemma, gloss) for lemma, gloss in entries
            if LEMMA.match(lemma) and lemma_count.get(lemma) == 1 and gloss
            and not set(lemma.split()) & set(re.findall(r"[a-z]+", gloss.lower()))]


def fetch_wordnet() -> Path:
    """Debian's wordnet-base, downloaded and unpacked into a temporary folder."""
    folder = Path(tempfile.mkdtemp(prefix="wordnet-"))
    subprocess.run(["apt-get", "download", "wordnet-base"], cwd=folder, check=True, capture_output=True)
    subprocess.run(["dpkg-deb", "-x", next(folder.glob("wordnet-base*.deb")), folder / "x"], check=True)
    return folder / "x/usr/share/wordnet"


def reverse_dictionary(encode, glosses: list[str], lemmas: list[str]) -> tuple[float, float]:
    """(MRR x100, accuracy at 1 x100) of each gloss finding its own lemma among all the lemmas."""
    def unit(x):
        x = np.asarray(x, dtype=np.float64)
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    similarity = unit(encode(glosses)) @ unit(encode(lemmas)).T
    rank = (similarity > np.diag(similarity)[:, None]).sum(axis=1) + 1
    return 100 * float(np.mean(1 / rank)), 100 * float(np.mean(rank == 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--vocab-of", required=True, help="the swembed table whose vocabulary splits the buckets")
    parser.add_argument("--wordnet", type=Path,
                        help="a folder with WordNet 3.0's data.noun (default: apt-get download)")
    parser.add_argument("--size", type=int, default=3000, help="synsets per bucket at most (seeded sample)")
    args = parser.parse_args()
    from ood_agreement import encoder  # this folder

    from swembed import load

    try:
        nouns = wordnet_nouns(args.wordnet or fetch_wordnet())
    except (OSError, subprocess.CalledProcessError, StopIteration) as error:
        sys.exit(f"ood_reverse_dictionary: cannot read WordNet ({error}); pass --wordnet DIR")
    vocab = load(args.vocab_of).tokenizer.vocab
    rng = np.random.default_rng(0)
    buckets = {}
    for name, wanted in (("unseen", False), ("seen", True)):
        chosen = [n for n in nouns if all(w in vocab for w in n[0].split()) == wanted]
        buckets[name] = [chosen[i] for i in sorted(rng.permutation(len(chosen))[: args.size])]
        print(f"{name}: {len(buckets[name]):,} of {len(chosen):,} synsets", file=sys.stderr)
    print("model\t" + "\t".join(f"{b} MRR\t{b} acc@1" for b in buckets))
    for spec in args.models:
        encode = encoder(spec)
        scores = [reverse_dictionary(encode, [g for _, g in pairs], [lemma for lemma, _ in pairs])
                  for pairs in buckets.values()]
        print(spec + "".join(f"\t{mrr:.2f}\t{acc:.2f}" for mrr, acc in scores), flush=True)


if __name__ == "__main__":
    main()
