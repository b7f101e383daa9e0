"""STS-B dev of a weighted mix of teachers, before any table is built: how a ``[coteacher]`` weight is chosen.

Each teacher's cosine over the dev pairs is put in standard units (the distillation's ``standard units``), the
mix is their weighted sum, and its Spearman x100 against the gold scores is printed per weight vector.

    python -m lab.teacher_mix mpnet me5-small minilm --weights "1,0,0 1,0.5,0 1,0.5,0.25 1,0.5,1"
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from swembed.eval.models import load_encoder
from swembed.eval.sts import DEV, PairSet, load_pair_set, pair_cosines, spearman_x100


def standard_cosines(encode, pairs: PairSet) -> np.ndarray:
    """The pairs' cosines under ``encode``, centred and scaled to unit variance."""
    cosines = pair_cosines(encode, pairs)
    return (cosines - cosines.mean()) / cosines.std()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("teachers", nargs="+", help="teacher names, as swembed eval takes them")
    parser.add_argument("--weights", required=True, help="space-separated weight vectors, one weight per teacher")
    parser.add_argument("--data", default="../shared/data/eval")
    args = parser.parse_args(argv)
    mixes = [[float(w) for w in item.split(",")] for item in args.weights.split()]
    if any(len(mix) != len(args.teachers) for mix in mixes):
        print(f"--weights: each vector needs {len(args.teachers)} weights, one per teacher", file=sys.stderr)
        return 2
    pairs = load_pair_set(args.data, DEV)
    cosines = [standard_cosines(load_encoder(name)[1], pairs) for name in args.teachers]
    for mix in mixes:
        score = spearman_x100(pairs.gold, sum(w * c for w, c in zip(mix, cosines)))
        print(f"{' + '.join(f'{w:g} {t}' for w, t in zip(mix, args.teachers))}: STS-B dev {score:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
