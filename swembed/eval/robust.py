"""`swembed eval --suite robust`: how a table holds up on words it has seen rarely or never.

* **Hidden vocabulary**: English STS with the rarest 25/50/75% of the word rows hidden at inference (the
  rows stay, the tokeniser no longer knows those words), so the back-off (pieces and grams, or a prefix) must
  carry them: what an out-of-domain text with specialised vocabulary asks of the table. Also STS-B dev so, where
  back-off settings are chosen.
* **By context count**: the STS pairs of all seven sets pooled (gold scores rescaled to [0, 1] per set) and
  bucketed by the fewest contexts any of their words had at build time (0: a word with no row); Spearman
  per bucket. Needs the folder's ``word_contexts.npy`` (written by ``swembed build``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from swembed.eval.sts import DEV, EN_SETS, evaluate_sts, load_pair_set, paired_cosine, spearman_x100
from swembed.runtime import StaticEmbedder, WordTokenizer

HIDDEN = (0.25, 0.5, 0.75)
BUCKETS = ((0, 0), (1, 4), (5, 29), (30, 299), (300, None))
CONTEXTS_FILE = "word_contexts.npy"


def with_hidden_words(model: StaticEmbedder, fraction: float) -> StaticEmbedder:
    """The same table whose tokenisers do not know the rarest ``fraction`` of their words (each language's rows
    are in frequency order); a multilingual table keeps its language identifier, so texts go where they did.
    A table with gram rows gets them fitted again on the known words only, as if the hidden ones had never been
    seen (else the grams would recall the hidden words' rows)."""
    def hide(tokenizer: WordTokenizer) -> WordTokenizer:
        rows = sorted(tokenizer.vocab.items(), key=lambda item: item[1])
        known = dict(rows[: int(round(len(rows) * (1 - fraction)))])
        return WordTokenizer(known, tokenizer.rules, tokenizer.teacher_tokenizer, tokenizer.piece_rows,
                             tokenizer.gram_rows)

    tokenizers = {lang: hide(tokenizer) for lang, tokenizer in model.tokenizers.items()}
    tokenizer = hide(model.tokenizer)
    table, scales, codes = model.table, model.scales, model.codes
    if tokenizer.gram_rows and fraction > 0:
        from swembed.integrations.formats import float_table
        from swembed.pipeline.grams import fit_grams, gram_matrix

        known = {word: row for t in (tokenizers.values() or [tokenizer]) for word, row in t.vocab.items()}
        start, end = tokenizer.gram_rows
        table, scales, codes = float_table(model).copy(), None, None
        table[start:end] = fit_grams(gram_matrix(list(known), end - start), table[list(known.values())])
    hidden = StaticEmbedder(table, tokenizer, model.config, scales, tokenizers, codes=codes)
    if tokenizers:
        hidden._language_identifier = model.language_identifier
    return hidden


def context_buckets(model: StaticEmbedder, contexts: np.ndarray, data_dir: Path) -> dict[str, dict]:
    """Spearman x100 per bucket of pooled pairs, by the fewest contexts of any word of the pair (its English
    rows' counts for a multilingual table)."""
    tokenizer = model.tokenizers.get("en", model.tokenizer)
    count_of = {word: int(contexts[row]) for word, row in tokenizer.vocab.items()}
    fewest: list[int] = []
    gold: list[float] = []
    cosine: list[float] = []
    for name in EN_SETS:
        pairs = load_pair_set(data_dir, name)
        span = np.ptp(pairs.gold) or 1.0
        gold += ((pairs.gold - pairs.gold.min()) / span).tolist()
        cosine += paired_cosine(model.encode(pairs.s1), model.encode(pairs.s2)).tolist()
        fewest += [min((count_of.get(w, 0) for w in tokenizer.words(a) + tokenizer.words(b)), default=0)
                   for a, b in zip(pairs.s1, pairs.s2)]
    fewest_array, gold_array, cosine_array = np.array(fewest), np.array(gold), np.array(cosine)
    out = {}
    for low, high in BUCKETS:
        mask = (fewest_array >= low) & (fewest_array <= (high if high is not None else np.inf))
        label = f"{low}" if low == high else f"{low}+" if high is None else f"{low}-{high}"
        if mask.sum() >= 10:
            spearman = spearman_x100(gold_array[mask], cosine_array[mask])
            out[label] = {"pairs": int(mask.sum()), "spearman": round(spearman, 2)}
    return out


def robust_scores(folder: str | Path, data_dir: str | Path) -> dict[str, float]:
    """Flat scores for ``swembed eval``: the full table's average, each hidden fraction's, and the buckets."""
    from swembed.runtime.embedder import load

    model = load(folder)
    scores = {"full avg": evaluate_sts(model.encode, data_dir)["avg"]}
    for fraction in HIDDEN:
        encode = with_hidden_words(model, fraction).encode
        scores[f"{fraction:.0%} hidden avg"] = evaluate_sts(encode, data_dir)["avg"]
        scores[f"{fraction:.0%} hidden STS-B dev"] = evaluate_sts(encode, data_dir, (DEV,))[DEV]
    contexts_path = Path(folder) / CONTEXTS_FILE
    if contexts_path.is_file():
        for label, result in context_buckets(model, np.load(contexts_path), Path(data_dir)).items():
            scores[f"contexts {label}"] = result["spearman"]
            scores[f"pairs with contexts {label}"] = result["pairs"]
    return scores
