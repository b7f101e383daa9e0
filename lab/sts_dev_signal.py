"""Which STS dev set predicts the seven test sets' mean: STS-B dev and STS-B train against avg7 over the tables.

For every table with a ``reports/mteb/sts/NAME.json`` (its avg7 and STS-B dev, written by ``swembed eval``) and a
folder ``models/NAME``, STS-B train is scored here; the rank correlation of each dev signal with avg7 is printed per
teacher family. SICK-R's train and trial splits are not a dev signal: MTEB's SICK-R scores all 9,927 pairs.

    python -m lab.sts_dev_signal --json reports/mteb/sts-dev-signal.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from lab.mteb_report import STS
from swembed.eval.models import load_encoder
from swembed.eval.sts import TRAIN, load_pair_set, score_pair_set

FAMILIES = {"MiniLM": "minilm-", "mpnet + e5": "mpnet-me5-"}


def rank_correlation(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data/eval")
    parser.add_argument("--models", default="models")
    parser.add_argument("--json", type=Path, help="write each table's three figures and the correlations here")
    args = parser.parse_args(argv)
    pairs = load_pair_set(args.data, TRAIN)
    tables = {}
    for path in sorted(STS.glob("*.json")):
        folder = Path(args.models) / path.stem
        if not folder.is_dir() or not path.stem.startswith(tuple(FAMILIES.values())):
            continue
        scores = json.loads(path.read_text(encoding="utf-8"))["scores"]
        tables[path.stem] = {"STS-B train": round(score_pair_set(load_encoder(str(folder))[1], pairs), 2),
                             "STS-B dev": scores["STS-B dev"], "avg7": scores["avg"]}
        print(path.stem, tables[path.stem], flush=True)
    correlations = {}
    for family, prefix in FAMILIES.items():
        rows = [t for name, t in tables.items() if name.startswith(prefix)]
        if len(rows) < 3:
            continue
        avg7 = np.array([r["avg7"] for r in rows])
        correlations[family] = {"tables": len(rows), **{
            f"{signal} ~ avg7": round(rank_correlation([r[signal] for r in rows], avg7), 2)
            for signal in ("STS-B dev", "STS-B train")}}
        print(family, correlations[family])
    if args.json:
        args.json.write_text(json.dumps({"tables": tables, "rank correlations": correlations}, indent=1) + "\n",
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
