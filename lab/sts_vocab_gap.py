"""Does the search table's vocabulary cut cost STS? The words a reference vocabulary keeps and the search vocabulary
does not (at its 150k cap the scientific text pushes out words seen once, cut alphabetically) mark the STS pairs that
hold one; each table is then scored on all pairs, on the pairs without such a word and on the pairs with one (sets
with at least 20 of them). If the gap between tables stays on the pairs without, the cut is not what holds STS back.
The reference below is the general corpora's vocabulary (``lab/pipelines/minilm-256-en-cover.toml``'s work folder:
the corpora and vocabulary settings of ``minilm-256-shared``); the search one, the menu recipe's.

    python -m lab.sts_vocab_gap --reference-vocab 'models/*/vocab-ad1a81cbbac6f396/vocab.tsv' \\
        --vocab 'models/*/vocab-c8f342d3ffa8e450/vocab.tsv' \\
        models/minilm-256-en-cover models/minilm-256-sci models/minilm-256-sci-allgen-int8
"""
from __future__ import annotations

import argparse
import glob
import json
from pathlib import Path

import numpy as np


def read_words(pattern: str) -> set[str]:
    """The words of a vocab stage's ``vocab.tsv`` (a glob matching one stage: its folder name, the stage's key, may
    sit in several work folders)."""
    paths = sorted(glob.glob(pattern))
    stages = {Path(p).parent.name for p in paths}
    if len(stages) != 1:
        raise SystemExit(f"{pattern}: matches {len(paths)} files of {len(stages)} stages, not one stage")
    with open(paths[0], encoding="utf-8") as handle:
        return {line.split("\t", 1)[0] for line in handle}


def main(argv: list[str] | None = None) -> int:
    from swembed import load
    from swembed.eval.sts import EN_SETS, load_pair_set, paired_cosine, spearman_x100

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--reference-vocab", required=True, help="vocab.tsv of the vocabulary before the cut")
    parser.add_argument("--vocab", required=True, help="vocab.tsv of the search vocabulary")
    parser.add_argument("--data", default="../shared/data/eval")
    args = parser.parse_args(argv)
    lost = read_words(args.reference_vocab) - read_words(args.vocab)
    tables = {name: load(name) for name in args.models}
    split = tables[args.models[0]].tokenizer
    scores: dict[str, dict[str, list[float]]] = {name: {"all": [], "without": [], "with": []} for name in tables}
    marked = {}
    for set_name in EN_SETS:
        pairs = load_pair_set(args.data, set_name)
        holds = np.array([any(w in lost for w in split.words(a) + split.words(b)) for a, b in zip(pairs.s1, pairs.s2)])
        marked[set_name] = [int(holds.sum()), len(holds)]
        for name, table in tables.items():
            cosine = paired_cosine(table.encode(pairs.s1), table.encode(pairs.s2))
            scores[name]["all"].append(spearman_x100(pairs.gold, cosine))
            scores[name]["without"].append(spearman_x100(pairs.gold[~holds], cosine[~holds]))
            scores[name]["with"].append(spearman_x100(pairs.gold[holds], cosine[holds]) if holds.sum() >= 20
                                        else float("nan"))
    print(json.dumps({"words_cut": len(lost), "pairs_holding_a_cut_word": marked,
                      "avg7": {name: {part: round(float(np.nanmean(v)), 2) for part, v in parts.items()}
                               for name, parts in scores.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
