"""How often a contrastive batch holds a pair's sibling (issue 82, ``[retrieval] mask_siblings``), no training.

The search recipe's contrastive objective draws each batch of query -> passage pairs from one lexical cell
(``[retrieval] cell_size``); two pairs of one abstract (its pseudo-queries, its summary's pair) share nearly every
word, so they share a cell, and without ``mask_siblings`` each is the other's negative. Here the recipe's pairs are
read as the retrieval stage reads them (``swembed.pipeline.parallel.read_parallel``: each pair once; no exclusions),
tokenised by the table's tokeniser, sketched and clustered as training does (``train.lexical_sketches``,
``train.cell_batches``; over every pair, where training holds a few hundred out), and ``STEPS`` batches drawn as a
round of training draws them; for each batch row, whether another row of its batch is its sibling
(``retrieval.sibling_groups``). The same for random batches beside it.

    python -m lab.sibling_batches models/minilm-256-sci-zen4 models/corpora/sci/pairs.tsv.gz \\
        models/corpora/sci/pseudo.tsv.gz --json reports/mteb/sibling_batches.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from lab import save_json

STEPS = 2000


def sibling_rates(table: str, files: list[str], cell_size: int = 512, batch: int = 128, seed: int = 0) -> dict:
    """{"pairs", "with a sibling", "cells": share of batch rows with a sibling in the batch, "random": the same for
    random batches}."""
    import torch

    import swembed
    from swembed.pipeline.parallel import read_parallel
    from swembed.pipeline.retrieval import sibling_groups
    from swembed.pipeline.train import PackedRows, cell_batches, lexical_sketches, random_batches

    pairs = read_parallel(files)
    queries, documents = [q for q, _ in pairs], [d for _, d in pairs]
    groups = sibling_groups(queries, documents)
    tokenizer = swembed.load(table).tokenizer
    device = torch.device("cpu")
    sides = [PackedRows(tokenizer.encode_batch(texts), device) for texts in (queries, documents)]
    rows = np.arange(len(pairs))
    cells = cell_batches(lexical_sketches(sides, rows, seed), cell_size, seed, "hashed")
    counts = np.bincount(groups, minlength=len(groups))

    def rate(drawn: np.ndarray) -> float:
        shared = [np.unique(g, return_counts=True) for g in groups[drawn]]
        return float(np.mean([(c[np.searchsorted(u, g)] > 1).mean() for (u, c), g in zip(shared, groups[drawn])]))

    return {"pairs": len(pairs), "with a sibling": float((counts[groups] > 1).mean()),
            "cells": rate(cells(np.random.default_rng([seed, 0, 0]), len(rows), STEPS, batch)),
            "random": rate(random_batches(np.random.default_rng([seed, 0, 0]), len(rows), STEPS, batch))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table")
    parser.add_argument("files", nargs="+")
    parser.add_argument("--json", type=Path, help="where to keep the rates")
    args = parser.parse_args(argv)
    found = sibling_rates(args.table, args.files)
    if args.json:
        save_json(found, args.json)
    print(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
