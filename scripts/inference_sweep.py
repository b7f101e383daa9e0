"""STS-B dev of a built table under other post-training settings, without retraining.

* ``--shrinkage K,...``: the distill stage's ``[distill] shrinkage`` k. The folder's table was built at ``--built-k``
  (its recipe's k): each word row seen in n > 0 sentences is ``(n v + k u) / (n + k)``, u its piece composition
  (piece rows are never shrunk, so u is what training left), which this script inverts and re-applies at each k.
* ``--oov-weight W,...``: the weight of an unknown word's pieces at inference (``[tokenization] oov_weight``).

    .venv/bin/python scripts/inference_sweep.py models/mpnet-me5-256 --built-k 1 --shrinkage 0,0.5,1,2,4,8,16
    .venv/bin/python scripts/inference_sweep.py models/mpnet-me5-256 --oov-weight 1,1.5,2,3,4
"""
from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np

import swembed
from swembed.eval.sts import DEV, load_pair_set, score_pair_set
from swembed.runtime.tokenizer import WordTokenizer


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--data", default="../shared/data/eval")
    parser.add_argument("--built-k", type=float, default=1.0)
    parser.add_argument("--shrinkage", type=floats, default=[])
    parser.add_argument("--oov-weight", type=floats, default=[])
    args = parser.parse_args()
    model = swembed.load(args.model, mmap=False)
    dev = load_pair_set(args.data, DEV)
    table = np.array(model.table, dtype=np.float32)
    contexts = np.asarray(model.word_contexts, dtype=np.float32)
    words = table[: len(contexts)]
    composed, found = np.zeros_like(words), np.zeros(len(contexts), dtype=bool)
    for row, word in enumerate(model.words[: len(contexts)]):
        rows, weights = model.tokenizer.backoff(word)
        if rows:
            composed[row], found[row] = np.asarray(weights, dtype=np.float32) @ table[rows], True
    moved = found & (contexts > 0)
    n = contexts[moved][:, None]
    plain = ((n + args.built_k) * words[moved] - args.built_k * composed[moved]) / n  # the rows before shrinkage
    for k in args.shrinkage:
        shrunk = table.copy()
        shrunk[: len(contexts)][moved] = (n * plain + k * composed[moved]) / (n + k)
        model.table = model._table = shrunk
        print(f"shrinkage k {k:g}: STS-B dev {score_pair_set(model.encode, dev):.2f}", flush=True)
    model.table = model._table = table
    tokenizer = model.tokenizer
    for weight in args.oov_weight:
        model.tokenizer = WordTokenizer(tokenizer.vocab, replace(tokenizer.rules, oov_weight=weight),
                                        tokenizer.pieces, tokenizer.piece_rows)
        print(f"oov_weight {weight:g}: STS-B dev {score_pair_set(model.encode, dev):.2f}", flush=True)


if __name__ == "__main__":
    main()
