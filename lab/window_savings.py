"""Issue 80, fewer teacher tokens: what ``[extract] window`` saves on a recipe, before building it. For each width,
the extract's own selection (``swembed.pipeline.extract.Selection.make``, as the build's plan makes it) with that
window: the sentences read as windows, the words and the padded teacher tokens the extract would run, against the
whole sentences. Reads the corpus and vocab stages of a work folder the recipe has built (or at least planned).

    SWEMBED_DATA_MIRROR=../shared/data python -m lab.window_savings --recipe pipelines/minilm-256-sci.toml \\
        --work models/minilm-sci-fresh-bf16.work --widths 3 5 8
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from swembed.pipeline.config import load_recipe
from swembed.pipeline.extract import Selection
from swembed.pipeline.stage import StageResult
from swembed.teachers import load_teacher


def stage(work: Path, name: str) -> StageResult:
    """The one finished ``name`` stage of a work folder."""
    found = [p for p in sorted(work.glob(f"{name}-*")) if (p / "manifest.json").is_file()]
    if len(found) != 1:
        raise SystemExit(f"{work}: {len(found)} finished {name} stages; name a work folder of this recipe alone")
    return StageResult(name, found[0].name.split("-", 1)[1], found[0],
                       json.loads((found[0] / "manifest.json").read_text(encoding="utf-8")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="pipelines/minilm-256-sci.toml")
    parser.add_argument("--work", type=Path, required=True, help="a work folder holding the recipe's corpus and vocab")
    parser.add_argument("--widths", type=int, nargs="+", default=[3, 5, 8])
    args = parser.parse_args(argv)
    config = load_recipe(args.recipe)
    lang = config.langs[0]
    corpus, vocab = stage(args.work, "corpus"), stage(args.work, "vocab")
    teacher = load_teacher(config.teacher)
    print(f"{args.recipe} over {corpus.path} and {vocab.path}; teacher batches of {teacher.batch_tokens} tokens")
    rows = []
    for width in [None, *args.widths]:
        extract = dataclasses.replace(config.extract, window=width)
        selection = Selection.make(extract, config.rules(lang), corpus, vocab, teacher, config.seed)
        words = sum(len(text.split()) for text in selection.texts)
        rows.append((width, len(selection.texts), words, selection.padded_tokens))
        print(f"window {width or 'none'}: {len(selection.texts):,} texts, {words:,} words, "
              f"{selection.padded_tokens:,} padded tokens", flush=True)
    base_words, base_tokens = rows[0][2], rows[0][3]
    print("\n| window | texts | words | padded tokens | tokens against whole sentences |\n|---|---:|---:|---:|---:|")
    for width, texts, words, tokens in rows:
        print(f"| {width or 'whole sentences'} | {texts:,} | {words:,} ({words / base_words:.1%}) | {tokens:,} | "
              f"{tokens / base_tokens:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
