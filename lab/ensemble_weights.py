"""STS-B dev of an ensemble at each weight of its first member (the others 1): how an ensemble's weight is chosen.

The ensemble is built once; each weight only rescales its sub-spaces (``config["ensemble"]["subspaces"]``).

    python -m lab.ensemble_weights models/mpnet-me5-256-sci-grams models/minilm-256-shared --weights 1 2 3 4
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from swembed.eval.sts import DEV, evaluate_sts


def weigh_first(model, weight: float) -> None:
    """Give an ensemble's first member ``weight`` and every other member 1."""
    for i, subspace in enumerate(model.config["ensemble"]["subspaces"]):
        subspace["weight"] = float(weight if i == 0 else 1)


def dev_by_first_weight(model, data: str | Path, weights) -> dict[float, float]:
    """STS-B dev of the loaded ensemble ``model`` at each first-member weight; ``model`` keeps the last one."""
    scores = {}
    for w in weights:
        weigh_first(model, w)
        scores[w] = evaluate_sts(model.encode, data, (DEV,))[DEV]
    return scores


def main(argv: list[str] | None = None) -> int:
    from swembed import load
    from swembed.integrations.ensemble import build_ensemble

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("members", nargs="+", help="ensemble members, as swembed ensemble takes them")
    parser.add_argument("--weights", nargs="+", type=float, required=True, help="first-member weights to try")
    parser.add_argument("--data", default="../shared/data/eval")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        model = load(build_ensemble(args.members, Path(tmp) / "ensemble"), mmap=False)
        scores = dev_by_first_weight(model, args.data, args.weights)
    others = ["1"] * (len(args.members) - 1)
    for w, score in scores.items():
        print(f"{':'.join([f'{w:g}', *others])}: STS-B dev {score:.2f}")
    best = max(scores, key=scores.__getitem__)
    print(f"chosen: --weights {','.join([f'{best:g}', *others])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
