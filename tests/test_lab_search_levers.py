"""Issue 82's search-time lab levers: corpus IDF in the dense mean (``lab.corpus_idf``) and query expansion from the
table's neighbours (``lab.query_expansion``) against their definitions written out here, and the pooled SciFact-sized
dev set (``lab.pooled_dev``) leaving out the abstracts that repeat a SciTLDR one."""
from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pytest
from test_search import random_texts, write_word_model

import swembed
from lab import corpus_idf, pooled_dev, query_expansion
from lab.passage_windows import lever_dense, table_bm25
from swembed.runtime.lexical import Lexical
from swembed.runtime.stemmer import stem


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> swembed.StaticEmbedder:
    return swembed.load(write_word_model(tmp_path_factory.mktemp("idf") / "words", words=60))


def test_corpus_idf_is_bm25s_idf_of_each_row_over_its_mean_among_the_rows_held(model):
    passages = random_texts(model, 40, seed=3)
    idf = corpus_idf.corpus_idf(model, passages)
    raw = {}
    for row, word in enumerate(model.words):
        df = sum(word in p.split() for p in passages)
        raw[row] = (math.log(1 + (len(passages) - df + 0.5) / (df + 0.5)), df)
    mean = np.mean([value for value, df in raw.values() if df])
    expected = np.array([raw[row][0] / mean for row in range(len(model.words))], dtype=np.float32)
    np.testing.assert_allclose(idf[: len(model.words)], expected, rtol=1e-5)
    assert any(df == 0 for _, df in raw.values())  # a row no passage holds: the highest idf
    assert idf[[r for r, (_, df) in raw.items() if df == 0][0]] == idf.max()


def test_idf_scores_weigh_each_side_as_asked_and_leave_the_table_as_it_was(model):
    passages, queries = random_texts(model, 30, seed=4), random_texts(model, 6, seed=5)
    plain = lever_dense(model, queries, passages, corpus_idf.LEVER), table_bm25(model, queries, passages)
    same = corpus_idf.idf_scores(model, queries, passages, 0.0, ())
    np.testing.assert_array_equal(plain[0], same[0])
    dense, bm25 = corpus_idf.idf_scores(model, queries, passages, 1.0, ("document",))
    np.testing.assert_array_equal(bm25, plain[1])  # the lexical channel does not see the weights
    assert model.kind_weights == {}  # restored
    idf = corpus_idf.corpus_idf(model, passages)
    words = {w: i for i, w in enumerate(model.words)}
    by_hand = np.stack([(lambda rows: (idf[rows, None] * model.table[rows]).sum(0))(
        np.array([words[w] for w in p.split()])) for p in passages])
    by_hand /= np.linalg.norm(by_hand, axis=1, keepdims=True)
    q = model.encode(queries)
    short = [i for i, p in enumerate(passages) if len(p.split()) <= corpus_idf.WIDTH]  # no window: 1.5 x the cosine
    np.testing.assert_allclose(dense[:, short], 1.5 * (q @ by_hand[short].T), rtol=1e-4, atol=1e-5)
    assert not np.allclose(dense, plain[0])


def _write(path: Path, pairs: list[tuple[str, str]]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(f"{q}\t{p}\n" for q, p in pairs)


def test_the_pooled_set_adds_the_other_abstracts_but_not_those_sharing_a_word_run(tmp_path):
    words = [f"w{i}" for i in range(400)]
    scitldr = [(f"summary {i}", " ".join(words[i * 30:(i + 1) * 30])) for i in range(3)]
    repeat = " ".join(["other", "start", *words[5:5 + pooled_dev.RUN], "tail"])  # the same paper as scitldr 0
    near = " ".join(["other", *words[40:40 + pooled_dev.RUN - 1], "x", "y"])  # a run one word short: kept
    fresh = " ".join(words[200:240])
    _write(tmp_path / "dev-scitldr.tsv.gz", scitldr)
    _write(tmp_path / "dev-pseudo.tsv.gz", [("a", repeat), ("b", near), ("c", fresh)])
    queries, passages, gold = pooled_dev.pooled_set(tmp_path)
    assert queries == [q for q, _ in scitldr]
    assert passages == [p for _, p in scitldr] + [near, fresh]
    assert [passages[g] for g in gold] == [p for _, p in scitldr]


def test_neighbours_are_the_nearest_rows_of_another_stem_by_cosine(model):
    rows = model.float_rows()
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    asked = model.words[:5]
    near = query_expansion.neighbours(model, asked + ["notaword"], 3)
    assert set(near) == set(asked)  # a word without a row is not expanded
    for word in asked:
        cosines = unit @ unit[model.words.index(word)]
        ranked = [(w, float(cosines[i])) for i in np.argsort(-cosines) if stem(w := model.words[i]) != stem(word)]
        assert [w for w, _ in near[word]] == [w for w, _ in ranked[:3]]
        np.testing.assert_allclose([c for _, c in near[word]], [c for _, c in ranked[:3]], rtol=1e-5)


def test_expanded_terms_add_each_kept_neighbour_once_at_its_largest_weight(model):
    passages, queries = random_texts(model, 40, seed=6), random_texts(model, 5, seed=7)
    lexical = Lexical.build(model, passages)
    plain = lexical.weighted_query_terms(model, queries)[0]
    near = query_expansion.neighbours(model, [w for q in queries for w in q.split()], 3)
    same, _ = query_expansion.expanded_terms(model, lexical, queries, near, floor=1.01, beta=0.5)
    for a, b in zip(same, plain):
        np.testing.assert_array_equal(a, b)  # no neighbour reaches the floor: the plain terms
    terms, weights = query_expansion.expanded_terms(model, lexical, queries, near, floor=-1.0, beta=0.5)
    lookup = lexical.lookup()
    for query, own, got, weight in zip(queries, plain, terms, weights):
        expected: dict[int, float] = {}
        for word in query.split():
            for name, cosine in near[word]:
                term = lookup.get(stem(name))
                if term is not None and term not in set(own.tolist()):
                    expected[term] = max(expected.get(term, -np.inf), 0.5 * cosine)
        np.testing.assert_array_equal(got[: len(own)], own)
        np.testing.assert_array_equal(weight[: len(own)], 1)
        assert dict(zip(got[len(own):].tolist(), weight[len(own):].tolist())) == pytest.approx(expected)
    assert any(len(t) > len(o) for t, o in zip(terms, plain))


def test_sibling_batches_counts_rows_whose_sibling_shares_their_batch(tmp_path, monkeypatch):
    """Pairs in sibling twos, each two sharing its own rare words: the lexical cells put a pair beside its sibling
    far more often than random batches do, and the shares are of rows with a sibling at all."""
    from lab import sibling_batches

    table = swembed.load(write_word_model(tmp_path / "words", words=400))
    rng = np.random.default_rng(0)
    words = np.array(table.words)
    pairs = []
    for i in range(300):
        topic = " ".join(rng.choice(words, 8, replace=False))
        sentence = f"{topic} {' '.join(rng.choice(words, 2))}."
        pairs += [(f"{topic.split()[0]} query {i}", f"{sentence} One more sentence here {i}."),
                  (f"{topic.split()[1]} question {i}", f"{sentence} Another closing sentence {i}.")]
    pairs.append(("a lone query", "a lone passage without any sibling at all"))
    _write(tmp_path / "p.tsv.gz", pairs)
    monkeypatch.setattr(sibling_batches, "STEPS", 50)
    found = sibling_batches.sibling_rates(str(tmp_path / "words"), [str(tmp_path / "p.tsv.gz")], cell_size=32,
                                          batch=16)
    assert found["pairs"] == 601 and found["with a sibling"] == pytest.approx(600 / 601)
    assert found["cells"] > 0.25 > 0.1 > found["random"]  # a cell holds 32 rows, its batch 16 of them
