"""Issue 15, item 0: two language-free rules on one bilingual table, scored without naming any language.

* identify: the runtime's rule (each text's language by script, then by the table's own word counts);
* merged: one vocabulary over every language, a shared surface form keeping the row of the language that saw it
  most (the rule the st/model2vec exports must use), with the same piece back-off.

    python -m lab.langid_vs_merged models/me5-en-de [--data ../shared/data/eval]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import swembed
from swembed.eval import xling
from swembed.eval.sts import evaluate_sts
from swembed.integrations.wordpiece import END_OF_WORD, word_tokens
from swembed.runtime import StaticEmbedder, WordTokenizer


def scores(encode, data: Path, langs: list[str]) -> dict[str, float]:
    by_lang = lambda texts, lang: encode(texts)  # noqa: E731 - no language is ever passed on
    found = xling.evaluate_xling(by_lang, data, languages=langs)
    return {"English avg (7)": evaluate_sts(encode, data)["avg"],
            **{k: v for k, v in found.items() if not k.endswith("F1")}}


def merged_words(model) -> dict[str, int]:
    """The word -> row map of the st/model2vec exports' merged vocabulary (its word-final tokens)."""
    return {token.removesuffix(END_OF_WORD): row for token, row in word_tokens(model).items()
            if token.endswith(END_OF_WORD) and not token.startswith("##")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--data", default="../shared/data/eval", type=Path)
    args = parser.parse_args()
    model = swembed.load(args.model)
    tok = model.tokenizer
    merged = StaticEmbedder(model.table,
                            WordTokenizer(merged_words(model), tok.rules, tok.teacher_tokenizer, tok.piece_rows),
                            model.config, model.scales)
    for label, embedder in (("identify", model), ("merged", merged)):
        found = scores(embedder.encode, args.data, model.languages)
        print(f"{label:9s}", "  ".join(f"{k} {v:.2f}" for k, v in found.items()))


if __name__ == "__main__":
    main()
