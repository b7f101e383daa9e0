"""STS-B dev of a built table under other post-training settings, without retraining.

* ``--shrinkage K,...``: the ``[shrinkage]`` stage's k. The folder's table was built at ``--built-k``
  (its recipe's k): each word row seen in n > 0 sentences is ``(n v + k u) / (n + k)``, u its piece composition
  (piece rows are never shrunk, so u is what training left), which this script inverts and re-applies at each k.
* ``--oov-weight W,...``: the weight of an unknown word's pieces at inference (``[tokenization] oov_weight``).

    python -m lab.inference_sweep models/mpnet-me5-256 --built-k 1 --shrinkage 0,0.5,1,2,4,8,16
    python -m lab.inference_sweep models/mpnet-me5-256 --oov-weight 1,1.5,2,3,4
"""
from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np

import swembed
from swembed.eval.sts import DEV, load_pair_set, score_pair_set
from swembed.pipeline.compose import blend_by_contexts
from swembed.runtime.embedder import StaticEmbedder
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

    def dev_score(table: np.ndarray, tokenizer: WordTokenizer) -> str:
        embedder = StaticEmbedder(table, tokenizer, model.config, word_contexts=model.word_contexts)
        return f"STS-B dev {score_pair_set(embedder.encode, dev):.2f}"

    table = np.array(model.table, dtype=np.float32)
    contexts = np.asarray(model.word_contexts, dtype=np.float32)
    composed, found = np.zeros((len(contexts), table.shape[1]), dtype=np.float32), np.zeros(len(contexts), dtype=bool)
    for row, word in enumerate(model.words[: len(contexts)]):
        rows, weights = model.tokenizer.backoff(word)
        if rows:
            composed[row], found[row] = np.asarray(weights, dtype=np.float32) @ table[rows], True
    plain = table.copy()  # the word rows before the build's shrinkage: v = ((n + k) v' - k u) / n
    moved = found & (contexts > 0)
    n = contexts[moved][:, None]
    words = table[: len(contexts)]
    plain[: len(contexts)][moved] = ((n + args.built_k) * words[moved] - args.built_k * composed[moved]) / n
    for k in args.shrinkage:
        shrunk = plain.copy()
        blend_by_contexts(shrunk[: len(contexts)], composed, contexts, k, found)  # the distill stage's own rule
        print(f"shrinkage k {k:g}: {dev_score(shrunk, model.tokenizer)}", flush=True)
    for weight in args.oov_weight:
        tokenizer = WordTokenizer(model.tokenizer.vocab, replace(model.tokenizer.rules, oov_weight=weight),
                                  model.tokenizer.teacher_tokenizer, model.tokenizer.piece_rows)
        print(f"oov_weight {weight:g}: {dev_score(table, tokenizer)}", flush=True)

if __name__ == "__main__":
    main()
