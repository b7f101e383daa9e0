"""Is a row-weight fit reproducible? Fits a model folder's lexical weights twice on the same pairs (as the build's
``[lexical_weights]`` stage reads them: held-out texts dropped) and prints the largest difference between the two fits
and against the folder's own weights. Before 2026-12-07 two fits differed by up to 2.6e-5 (advanced indexing's
gradient is scattered in no fixed order on the CPU); with ``index_select`` they agree bit for bit.

Run: ``python -m lab.fit_twice MODEL --pairs FILE [FILE ...] --exclude PATH [PATH ...] [--l2 X]``, e.g.
``python -m lab.fit_twice models/minilm-256-sci --pairs models/corpora/sci/pairs.tsv.gz
models/corpora/sci/pseudo.tsv.gz --exclude ../shared/data/eval models/corpora/sci/dev_sentences.txt.gz``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> None:
    from swembed.pipeline.config import LexicalWeightsConfig
    from swembed.pipeline.lexical_weights import fit_lexical_weights
    from swembed.pipeline.parallel import read_parallel
    from swembed.pipeline.sources import held_out_keys
    from swembed.runtime.embedder import StaticEmbedder

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--pairs", nargs="+", required=True, help="query<TAB>passage files")
    parser.add_argument("--exclude", nargs="*", default=[], help="held-out files whose texts the pairs drop")
    parser.add_argument("--l2", type=float, default=1e-4, help="the fit's l2 (the search recipe's)")
    args = parser.parse_args(argv)
    pairs = read_parallel(args.pairs, held_out_keys(args.exclude))
    model = StaticEmbedder.load(args.model)
    settings = LexicalWeightsConfig(files=list(args.pairs), l2=args.l2)
    first, second = (fit_lexical_weights(model, pairs, settings, 0, lambda line: None)[0] for _ in range(2))
    print(f"{len(pairs):,} pairs; two fits: largest difference {np.abs(first - second).max():.3g} "
          f"({'bit for bit the same' if np.array_equal(first, second) else 'they differ'})")
    own = args.model / "lexical_weights.npy"
    if own.is_file():
        print(f"against {own}: largest difference {np.abs(first - np.load(own)).max():.3g}")


if __name__ == "__main__":
    main()
