"""A table's MTEB test scores with its sentence vectors times S (the vector-scale lever of lab/mteb_levers.py,
with S chosen there on dev). Cosine tasks (SciFact) do not change with S; the classifiers' LogisticRegression does.

    python -m lab.mteb_scaled models/minilm-256-shared 2 --json reports/mteb/scores/NAME.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from swembed.eval.models import load_encoder
from swembed.eval.mteb_tasks import TASKS, evaluate_mteb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("scale", type=float)
    parser.add_argument("--data", default="../shared/data/eval-mteb")
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    _, encode, _ = load_encoder(args.model)
    scores = evaluate_mteb(lambda texts: args.scale * encode(texts), args.data, TASKS)
    command = f"python -m lab.mteb_scaled {args.model} {args.scale:g} --json {args.json}"
    Path(args.json).write_text(json.dumps({"model": args.model, "label": f"{Path(args.model).name}, vectors x "
                                           f"{args.scale:g} (scale chosen on dev)", "command": command,
                                           "scores": scores}, indent=2))
    print(json.dumps(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
