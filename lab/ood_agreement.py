"""Agreement with the teacher on text with specialised vocabulary that no build here trains on.

The texts are the one-line descriptions of Debian packages in the science, gnu-r, math, electronics and hamradio
sections, or tagged with a field (biology, medicine, chemistry, ...), from ``apt-cache dumpavail`` on this
machine. Each description is paired with its nearest description by the teacher, one at rank 3-29, one at rank
30-299 and one at random. The gold is the teacher's cosine, so the score (Spearman x100 of a model's cosine
against it) measures how well a table stands in for its teacher on unseen words. It does not measure agreement
with human judgements. The teacher scores 100 by construction.

    python -m lab.ood_agreement MODEL [MODEL ...] [--teacher minilm] [--packages FILE]

MODEL is anything ``swembed eval`` takes (a model folder, ``wordllama``, ``model2vec:<folder>``). Add the
suffix ``:no-backoff`` to a swembed folder to read it without its sub-word back-off.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys

import numpy as np

SECTIONS = {"science", "gnu-r", "math", "electronics", "hamradio"}
PACKAGING = re.compile(r"\s*[-(][^-()]*(documentation|data files|development files|header files|debug symbols|"
                       r"transitional|dummy|metapackage|library|Python 3|shared lib)[^()]*\)?\s*$", re.I)


def descriptions(dump: str) -> list[str]:
    """Unique (case-insensitive) 4-20-word descriptions of the chosen sections and fields, packaging notes cut."""
    chosen = {}
    for record in dump.split("\n\n"):
        fields = dict(line.split(":", 1) for line in record.split("\n") if line[:1].strip() and ":" in line)
        text = PACKAGING.sub("", fields.get("Description", "").strip())
        if 4 <= len(text.split()) <= 20 and (fields.get("Section", "").strip() in SECTIONS
                                              or "field::" in record):
            chosen.setdefault(text.lower(), text)
    return sorted(chosen.values())


def pairs(texts: list[str], vectors: np.ndarray, seed: int = 0) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Four partners per text (nearest, rank 3-29, rank 30-299, random); the teacher's cosine of each pair."""
    rng = np.random.default_rng(seed)
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -1)
    order = np.argsort(-similarity, axis=1)
    chosen = set()
    last = len(texts) - 2  # the text itself sorts last
    for i in range(len(texts)):
        for j in (order[i, 0], order[i, min(rng.integers(3, 30), last)], order[i, min(rng.integers(30, 300), last)],
                  rng.integers(len(texts))):
            if j != i:
                chosen.add((min(i, int(j)), max(i, int(j))))
    chosen = sorted(chosen)
    return chosen, np.array([similarity[i, j] for i, j in chosen])


def encoder(spec: str):
    from swembed.eval.models import load_encoder

    if not spec.endswith(":no-backoff"):
        return load_encoder(spec, device="cpu")[1]
    from swembed import StaticEmbedder, WordTokenizer, load

    model = load(spec.removesuffix(":no-backoff"))
    t = model.tokenizer
    bare = WordTokenizer(t.vocab, t.rules.splitting_only(), t.teacher_tokenizer, t.piece_rows)
    return StaticEmbedder(model.table, bare, model.config, model.scales).encode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--teacher", default="minilm")
    parser.add_argument("--packages", help="a saved `apt-cache dumpavail` (default: run it)")
    args = parser.parse_args()
    from swembed.eval.models import load_encoder
    from swembed.eval.sts import paired_cosine, spearman_x100

    try:
        dump = (open(args.packages, encoding="utf-8").read() if args.packages
                else subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True).stdout)
    except (OSError, subprocess.CalledProcessError) as error:
        sys.exit(f"ood_agreement: cannot read the package list ({error}); pass --packages FILE")
    texts = descriptions(dump)
    if len(texts) < 400:
        sys.exit(f"ood_agreement: only {len(texts)} usable descriptions in the package list; it needs 400")
    teacher = np.asarray(load_encoder(args.teacher, device="cpu")[1](texts), dtype=np.float64)
    chosen, gold = pairs(texts, teacher / np.linalg.norm(teacher, axis=1, keepdims=True))
    left, right = [texts[i] for i, _ in chosen], [texts[j] for _, j in chosen]
    print(f"{len(texts):,} descriptions, {len(chosen):,} pairs, teacher {args.teacher}", file=sys.stderr)
    for spec in args.models:
        encode = encoder(spec)
        print(f"{spec}\t{spearman_x100(gold, paired_cosine(encode(left), encode(right))):.2f}", flush=True)


if __name__ == "__main__":
    main()
