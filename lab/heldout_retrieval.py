"""Held-out retrieval, one set a source (issue 57): each table's nDCG@10 on the dev pairs of every ``pairs/``
file (MedQuAD health questions -> answers, SciTLDR summaries -> abstracts, AG News headlines -> leads) and on the
dev documents' pseudo-queries, each query's passage ranked among its own set's passages, with a paired bootstrap
95% interval of each table's difference from the first one named.

The evaluator outside the repository scores held-out biomedical and open-domain question -> passage sets; these
are the nearest we hold. ``lab.sci_splits`` carves them (``dev-SOURCE.tsv.gz``) by a hash of the passage, and every
sentence of them is excluded from the search recipes' builds; the general recipes (``minilm-256-shared``, the
default table) read none of them. The Wikipedia set of ``lab.mteb_levers`` is added as the last column with a
caveat: its sentences are corpus text, which the general recipes read whole (KD on every sentence) and the search
recipes only in part, so it favours the former.

    python -m lab.sci_splits
    python -m lab.heldout_retrieval models/minilm-256-sci models/minilm-256-shared ... wordllama \\
        --json reports/heldout-retrieval.json --out reports/heldout-retrieval.md
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from lab import command_line
from lab.mteb_levers import ndcg_per_query, pairs_dev, retrieval_dev
from swembed.eval.models import load_encoder
from swembed.runtime.outputs import atomic_file

SOURCES = {"medquad": "MedQuAD question -> answer", "scitldr": "SciTLDR summary -> abstract",
           "agnews": "AG News headline -> lead", "pseudo": "abstract sentence -> rest of abstract"}
WIKI = "wiki"
BOOTSTRAP = 2000


def dev_sets(dev: Path, data: Path) -> dict[str, tuple[list[str], list[str], np.ndarray]]:
    """(queries, passages, each query's passage) of every held-out set, the Wikipedia set last."""
    sets = {}
    for source in SOURCES:
        path = dev / f"dev-{source}.tsv.gz"
        if not path.is_file():
            raise SystemExit(f"{path}: missing; run python -m lab.sci_splits --out {dev}")
        sets[source] = pairs_dev(path)
    sets[WIKI] = retrieval_dev(data)
    return sets


def score_model(spec: str, sets: dict) -> dict[str, np.ndarray]:
    """Each set's per-query nDCG@10 (0..1) for one table, peer or teacher."""
    _, encode, _ = load_encoder(spec)
    return {name: ndcg_per_query(encode, *dev_set) for name, dev_set in sets.items()}


def interval(gain: np.ndarray, reference: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """Paired bootstrap 95% interval of the difference of the means (x100)."""
    diff = 100 * (gain - reference)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(BOOTSTRAP, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def versus_rows(reference: str, means: dict[str, float], rows: dict[str, dict]) -> list[str]:
    """Markdown: the reference's mean nDCG@10 on each set, then each row's (``{label: {set: (mean, (low, high))}}``)
    with its difference from the reference and that difference's 95% interval, and each row's mean over the sets."""
    sets = list(means)
    lines = ["| | " + " | ".join(sets) + " | mean |", "|---" * (len(sets) + 2) + "|",
             f"| {reference} | " + " | ".join(f"{means[s]:.2f}" for s in sets)
             + f" | {np.mean([means[s] for s in sets]):.2f} |"]
    for label, per_set in rows.items():
        lines.append(f"| {label} | " + " | ".join(
            f"{v:.2f} ({v - means[s]:+.2f} [{lo:+.2f}, {hi:+.2f}])" for s, (v, (lo, hi)) in per_set.items())
            + f" | {np.mean([v for v, _ in per_set.values()]):.2f} |")
    return lines


def table(scores: dict[str, dict[str, np.ndarray]]) -> list[str]:
    """Markdown: nDCG@10 of each model on each set; below the first row, the difference from it and its 95%
    interval."""
    names = list(scores)
    first = scores[names[0]]
    sets = list(first)
    held_out = [s for s in sets if s != WIKI]
    header = ["model", *[f"{s} ({len(first[s])} queries)" for s in sets], "mean of the held-out sets"]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for name in names:
        cells = []
        for s in sets:
            value = 100 * scores[name][s].mean()
            if name == names[0]:
                cells.append(f"{value:.2f}")
            else:
                low, high = interval(scores[name][s], first[s])
                cells.append(f"{value:.2f} ({value - 100 * first[s].mean():+.2f} [{low:+.2f}, {high:+.2f}])")
        mean = np.mean([100 * scores[name][s].mean() for s in held_out])
        lines.append(f"| `{name}` | " + " | ".join(cells) + f" | {mean:.2f} |")
    return lines


def render(scores: dict[str, dict[str, np.ndarray]], command: str) -> str:
    sources = "; ".join(f"`{s}`: {what}" for s, what in SOURCES.items())
    return "\n".join([
        "# Held-out retrieval by source", "", f"<!-- generated: {command} -->", "",
        "nDCG@10 x 100 on the dev pairs `python -m lab.sci_splits` holds out (1 in 16 passages by hash; their "
        f"sentences excluded from every search build), one set a source, each query's passage ranked among its own "
        f"set's passages: {sources}. `wiki`: `lab.mteb_levers`' Wikipedia set (a sentence -> the 8 around it), "
        "whose sentences the general recipes were distilled on one by one, so it is not held out for them. In "
        f"brackets: the difference from the first row and its paired bootstrap 95% interval ({BOOTSTRAP} resamples "
        "of the queries). Caveat: MedQuAD's questions follow a few templates (\"What are the symptoms of X?\"), "
        "which the training pairs share though no passage repeats, so a table trained on them (`[retrieval]`) gains "
        "there partly by learning the templates; AG News headlines and SciTLDR summaries are free text. Module "
        "docstring: `lab/heldout_retrieval.py`.", "", *table(scores), ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="swembed folders, model2vec:<folder>, wordllama or teachers; "
                                                  "the first is the reference of the intervals")
    parser.add_argument("--dev", type=Path, default=Path("models/corpora/sci"), help="lab.sci_splits' output")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--json", type=Path, help="per-query nDCG@10 of each model (reused: a model in it is "
                                                  "not scored again)")
    parser.add_argument("--out", type=Path, help="the Markdown table")
    args = parser.parse_args(argv)
    sets = dev_sets(args.dev, args.data)
    saved = json.loads(args.json.read_text()) if args.json and args.json.is_file() else {}
    scores = {}
    for spec in args.models:
        if spec in saved and set(saved[spec]) == set(sets):
            scores[spec] = {s: np.array(v) for s, v in saved[spec].items()}
            continue
        start = time.time()
        scores[spec] = score_model(spec, sets)
        print(f"{spec}: " + ", ".join(f"{s} {100 * v.mean():.2f}" for s, v in scores[spec].items())
              + f" ({time.time() - start:.0f} s)", flush=True)
        if args.json:
            saved[spec] = {s: [round(float(x), 5) for x in v] for s, v in scores[spec].items()}
            with atomic_file(args.json, overwrite=True) as tmp:
                Path(tmp).write_text(json.dumps(saved), encoding="utf-8")
    command = command_line("heldout_retrieval", *args.models, json=args.json, out=args.out)
    text = render(scores, command)
    if args.out:
        with atomic_file(args.out, overwrite=True) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
