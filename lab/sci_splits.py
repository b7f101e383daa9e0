"""The scientific recipes' splits from a local data folder, as ``[splits]`` in ``pipelines/minilm-256-sci.toml``
makes them during a build (``swembed.pipeline.splits``: what each file holds). Kept for the lab's commands that
name it; ``swembed data splits --recipe pipelines/minilm-256-sci.toml`` does the same from the recipe's public
sources.

    python -m lab.sci_splits --data ../shared/data --out models/corpora/sci
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from swembed.pipeline.config import SplitsConfig
from swembed.pipeline.splits import make_splits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=Path("models/corpora/sci"))
    parser.add_argument("--max-words", type=int, default=200, help="training documents and passages cut to this")
    args = parser.parse_args(argv)
    corpora = args.data / "corpora"
    if not (corpora / "docs").is_dir():
        print(f"{args.data}: no corpora/docs folder (the shared data's scientific documents)", file=sys.stderr)
        return 2
    config = SplitsConfig(documents=[str(corpora / "docs" / "*.docs.jsonl.gz")],
                          pairs=[str(corpora / "pairs" / "*.pairs.tsv.gz")], out=str(args.out),
                          max_words=args.max_words)
    for name, lines in make_splits(config).items():
        print(f"{args.out / name}: {lines:,} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
