"""A variant of a table (any ``lab.mteb_levers`` variant: ``scale:2``, ``zipf:0.15``, ...) scored on the test
splits, once dev data chose it: the five MTEB tasks, and with ``--sts`` the English STS average of 7 (issue 51's
acceptance keeps it >= 75.0).

    python -m lab.mteb_variant models/minilm-256-shared zipf:0.15 --sts --json reports/mteb/scores/NAME.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lab.mteb_levers import variant_encoder
from swembed.eval.mteb_tasks import TASKS, evaluate_mteb
from swembed.eval.sts import evaluate_sts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("variant", help="as lab.mteb_levers --variants takes one (not center)")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--sts", action="store_true", help="also the English STS sets (avg7)")
    parser.add_argument("--work", type=Path, help="the build's work folder (for words:LIST)")
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    encode = variant_encoder(args.model, args.variant, [], args.work)
    scores = evaluate_mteb(encode, args.data / "eval-mteb", TASKS)
    extra = {}
    if args.sts:
        extra = {"sts": evaluate_sts(encode, args.data / "eval")}  # its "avg" is the average of 7
    flags = (" --sts" if args.sts else "") + (f" --work {args.work}" if args.work else "")
    command = f"python -m lab.mteb_variant {args.model} {args.variant}{flags} --json {args.json}"
    label = f"{Path(args.model).name}, {args.variant} (chosen on dev)"
    Path(args.json).write_text(json.dumps({"model": args.model, "label": label, "command": command,
                                           "scores": scores, **extra}, indent=2))
    print(json.dumps({**scores, **extra}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
