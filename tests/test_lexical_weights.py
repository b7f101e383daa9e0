"""Learned lexical weights (issue 82): the fit (``swembed.pipeline.lexical_weights``) on query -> passage pairs, its
cached stage, and the folder it writes (config.json's ``kind_weights`` naming ``lexical_weights.npy`` beside query
weights). How search applies them, in Python and JS: tests/test_lexical.py."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import swembed
from swembed.runtime.folder import KIND_WEIGHTS, write_model_folder
from swembed.runtime.stemmer import stem

TOPICS = [f"topic{i}" for i in range(60)]
FILLERS = ["what", "about", "find", "studies", "there"]  # in every query, in few passages, at random
WORDS = [f"word{i}" for i in range(40)]


def pair_table(folder: Path, dim: int = 8) -> Path:
    words = TOPICS + FILLERS + WORDS + ["study"]  # "study": a word of the stem of "studies", not in any pair
    table = np.random.default_rng(0).normal(size=(len(words), dim)).astype(np.float32)
    return write_model_folder(folder, table, words, {"tokenization": {"oov_backoff": "none"}}, None)


def make_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """Queries of two filler words, a topic word and one of their passage's words; passages of a topic word and two
    random words, one in ten with a random filler word too (rare in passages, so BM25 weighs a filler match highly,
    though it is no sign of the query's passage)."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        topic, words, fillers = TOPICS[rng.integers(len(TOPICS))], rng.choice(WORDS, 2), rng.choice(FILLERS, 3)
        filler = f" {fillers[2]}" if rng.random() < 0.1 else ""
        pairs.append((f"{fillers[0]} {fillers[1]} {topic} {words[0]}", f"{topic} {words[0]} {words[1]}{filler}"))
    return pairs


def lexical_accuracy(model: swembed.StaticEmbedder, pairs: list[tuple[str, str]]) -> float:
    """How often lexical search puts each query's own passage first among the pairs' passages."""
    hits = model.search([q for q, _ in pairs], [p for _, p in pairs], 1, mode="lexical")
    return float(np.mean([found[0].index == i for i, found in enumerate(hits)]))


def test_the_fit_weighs_down_rare_words_that_match_at_random_and_finds_more_passages(tmp_path):
    pytest.importorskip("torch")
    from swembed.pipeline.config import LexicalWeightsConfig
    from swembed.pipeline.lexical_weights import fit_lexical_weights
    from swembed.pipeline.row_weights import write_row_weights

    folder = pair_table(tmp_path / "table")
    model = swembed.load(folder)
    settings = LexicalWeightsConfig(negatives=8, epochs=8, batch_size=32, lr=0.05, l2=0)
    weights, stats = fit_lexical_weights(model, make_pairs(600, seed=0), settings)
    assert weights.dtype == np.float32 and weights.shape == (model.rows,)
    rows = {word: i for i, word in enumerate(model.labels)}
    assert weights[[rows[w] for w in FILLERS]].max() < 1 < np.median(weights[[rows[w] for w in TOPICS]])
    assert weights[rows["study"]] == weights[rows["studies"]] != 1  # a word row gets its stem's weight
    assert stem("study") == stem("studies")
    assert stats["pairs"] == 600 and stats["terms"] == len(TOPICS) + len(FILLERS) + len(WORDS)
    held_out = make_pairs(300, seed=1)
    before = lexical_accuracy(model, held_out)
    write_row_weights(folder, "lexical", weights)
    assert lexical_accuracy(swembed.load(folder), held_out) > before


@pytest.mark.parametrize("max_df", [1.0, None])
def test_mining_finds_each_querys_best_other_passages_by_bm25_and_the_features_are_its_matches(tmp_path, max_df,
                                                                                            monkeypatch):
    """Every term counted in the shortlist (max_df 1): the mined are the 6 best by BM25, ties aside; the commoner terms
    only added to a shortlist found by the rarer (the default): nearly so."""
    from swembed.pipeline import lexical_weights
    from swembed.pipeline.lexical_weights import TermPairs

    if max_df is not None:
        monkeypatch.setattr(lexical_weights, "MINE_MAX_DF", max_df)
    model = swembed.load(pair_table(tmp_path / "table"))
    data = TermPairs(model, make_pairs(300, seed=0))
    postings = [np.array(a) for a in (data.lexical.offsets, data.lexical.docs, data.lexical.counts)]
    mined = data.mine(6)
    for before, after in zip(postings, (data.lexical.offsets, data.lexical.docs, data.lexical.counts)):
        np.testing.assert_array_equal(before, after)  # mining leaves the postings as they were
    bm25 = data.lexical.scores(data.queries)
    assert np.array_equal(mined[:, 0], data.gold)
    near = []
    for q, row in enumerate(bm25):
        row[data.gold[q]] = -np.inf
        assert data.gold[q] not in mined[q, 1:] and len(set(mined[q, 1:].tolist())) == 6
        best = np.sort(row)[-6:]
        if max_df == 1.0:
            assert np.sort(row[mined[q, 1:]]) == pytest.approx(best, abs=1e-5)
        near.append(row[mined[q, 1:]].sum() >= 0.9 * best.sum())
    assert np.mean(near) > 0.9
    rows, terms, values = data.features(mined)
    sums = np.bincount(rows, weights=values, minlength=mined.size).reshape(mined.shape)
    np.testing.assert_allclose(sums, data.lexical.scores(data.queries)[np.arange(len(mined))[:, None], mined],
                               rtol=1e-5)
    for q, c in ((0, 0), (7, 3), (150, 5)):
        held = set(data.queries[q].tolist())
        in_passage = {t for t in held if mined[q, c] in data.lexical.docs[data.lexical.offsets[t]:
                                                                          data.lexical.offsets[t + 1]]}
        assert set(terms[rows == q * mined.shape[1] + c].tolist()) == in_passage


def test_the_stage_fits_once_and_names_its_weights_beside_the_query_weights(tmp_path):
    pytest.importorskip("torch")
    from swembed.pipeline.config import LexicalWeightsConfig
    from swembed.pipeline.lexical_weights import fit_lexical_weights
    from swembed.pipeline.row_weights import add_row_weights, run_row_weights, write_row_weights
    from swembed.pipeline.stage import StageContext

    folder = pair_table(tmp_path / "table")
    write_row_weights(folder, "query", np.full(swembed.load(folder).rows, 0.5, dtype=np.float32))
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{q}\t{p}\n" for q, p in make_pairs(200, seed=0)), encoding="utf-8")
    config = LexicalWeightsConfig(files=[str(pairs)], epochs=1, negatives=4)
    ctx = StageContext(tmp_path / "work", quiet=True)
    stage = run_row_weights(ctx, "lexical_weights", "lexical", config, folder, [], [], fit_lexical_weights)
    assert not stage.cached and stage.stats["pairs"] == 200
    assert run_row_weights(ctx, "lexical_weights", "lexical", config, folder, [], [], fit_lexical_weights).cached
    other = LexicalWeightsConfig(files=[str(pairs)], epochs=1, negatives=4, l2=1.0)
    assert not run_row_weights(ctx, "lexical_weights", "lexical", other, folder, [], [],
                               fit_lexical_weights).cached  # a setting is in the stage's key
    add_row_weights(folder, "lexical", stage)
    assert json.loads((folder / "config.json").read_text())[KIND_WEIGHTS] == {
        "query": "query_weights.npy", "lexical": "lexical_weights.npy"}
    model = swembed.load(folder)
    np.testing.assert_array_equal(model.kind_weights["lexical"], np.load(stage.path / "lexical_weights.npy"))
    assert np.all(model.kind_weights["query"] == 0.5)
    saved = swembed.load(model.save(tmp_path / "saved"))
    np.testing.assert_array_equal(saved.kind_weights["lexical"], model.kind_weights["lexical"])


def test_a_recipe_section_is_read_and_checked(tmp_path):
    from swembed.pipeline.config import BuildConfig, load_recipe

    recipe = tmp_path / "r.toml"
    recipe.write_text('[lexical_weights]\nfiles = ["pairs.tsv"]\nnegatives = 0\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"negatives must be"):
        load_recipe(recipe).validate()
    assert BuildConfig().lexical_weights.files == []
