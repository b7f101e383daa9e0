"""The lexical channel of search (issue 82): BM25 postings over the table's stemmed words, the hybrid score, their
place in ``SearchIndex`` (save, load, refusals of damaged postings, old dense-only and unstemmed indexes) and
``swembed search --mode``. Scores are checked against brute-force formulas written out here (loops over passages
and words), and BM25's ranking against the ``bm25s`` package given the same terms."""
from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from test_search import assert_same_hits, random_texts, write_word_model

import swembed
from swembed.pipeline.row_weights import write_row_weights
from swembed.runtime import lexical as lexical_module
from swembed.runtime import search as search_module
from swembed.runtime.index import SearchIndex, SearchIndexError
from swembed.runtime.stemmer import stem


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> swembed.StaticEmbedder:
    return swembed.load(write_word_model(tmp_path_factory.mktemp("lexical") / "words", words=60))


@pytest.fixture(scope="module")
def weighted(model, tmp_path_factory) -> swembed.StaticEmbedder:
    """``model`` with random lexical weights (kind_weights "lexical"), as the build's stage adds them."""
    folder = model.save(tmp_path_factory.mktemp("lexical") / "weighted")
    weights = np.exp(np.random.default_rng(3).normal(size=model.rows)).astype(np.float32)
    write_row_weights(folder, "lexical", weights)
    return swembed.load(folder)


@pytest.fixture(scope="module")
def corpus(model) -> list[str]:
    texts = random_texts(model, 150, seed=11)
    # no words; words the table lacks; a copy; inflected words the table lacks
    return [*texts, "", "Unknownword UNKNOWNWORD " + texts[0], texts[5], *INFLECTED.values()]


INFLECTED = {"mutation study": "Mutations were studied", "connect generously": "connected, connecting generous"}


def terms(model, text: str, stemmed: bool = True) -> list[str]:
    return [stem(w) if stemmed else w for w in model.tokenizer.words(text)]


def brute_bm25(model, query: str, corpus: list[str], k1: float, b: float, stemmed: bool = True) -> np.ndarray:
    """BM25 written out: Lucene's idf and saturation, over the tokeniser's words (stemmed unless ``stemmed`` is
    False), one passage at a time; a table with lexical weights multiplies a query word's term by its row's."""
    docs = [Counter(terms(model, text, stemmed)) for text in corpus]
    lengths = [sum(d.values()) for d in docs]
    average = sum(lengths) / len(docs)
    scores = np.zeros(len(docs))
    rows, lexical = model.tokenizer.vocab, model.kind_weights.get("lexical")
    for word, term in zip(model.tokenizer.words(query), terms(model, query, stemmed)):
        weight = 1.0 if lexical is None or word not in rows else float(lexical[rows[word]])
        df = sum(1 for d in docs if term in d)
        idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
        for i, d in enumerate(docs):
            if d[term]:
                scores[i] += weight * idf * d[term] / (d[term] + k1 * (1 - b + b * lengths[i] / average))
    return scores


def brute_hybrid(model, query: str, corpus: list[str], alpha: float) -> np.ndarray:
    def z(row: np.ndarray) -> np.ndarray:
        return (row - row.mean()) / row.std() if row.std() > 0 else np.zeros_like(row)

    cosines = np.asarray(model.similarity(query, corpus), dtype=np.float64)
    return alpha * z(cosines) + (1 - alpha) * z(brute_bm25(model, query, corpus, lexical_module.K1, lexical_module.B))


def queries_of(model, corpus: list[str]) -> list[str]:
    return [*random_texts(model, 12, seed=12), corpus[3], "Unknownword and " + corpus[7], "nothing known here", ""]


def check_ranking(hits, expected: np.ndarray, top_k: int) -> None:
    """Hits best first as ``expected`` ranks, scores equal to float32 precision: rows whose expected scores tie
    within it may come in either order (float32 arithmetic against float64 here; exact ties go to the lower row,
    test_search.py's test_ties_go_to_the_lower_index_also_at_the_cut)."""
    order = np.lexsort((np.arange(len(expected)), -np.round(expected, 5)))[:top_k]
    got = [h.index for h in hits]
    assert len(got) == len(set(got)) == len(order)
    np.testing.assert_allclose([h.score for h in hits], expected[order], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(expected[got], expected[order], rtol=1e-5, atol=1e-5)  # each hit where its score ranks


@pytest.mark.parametrize(("k1", "b"), [(lexical_module.K1, lexical_module.B), (2.0, 0.3), (0.5, 1.0)])
def test_bm25_equals_the_formula(model, corpus, k1, b):
    index = model.index(corpus)
    index.postings().k1, index.postings().b = k1, b
    queries = queries_of(model, corpus)
    found = index.postings().scores(index.postings().query_terms(model, queries))
    for query, row in zip(queries, found):
        np.testing.assert_allclose(row, brute_bm25(model, query, corpus, k1, b), rtol=1e-5, atol=1e-6)
    for query, hits in zip(queries, index.search(queries, 8, mode="lexical")):
        if k1 == lexical_module.K1:
            check_ranking(hits, brute_bm25(model, query, corpus, k1, b), 8)


def test_lexical_weights_multiply_each_query_words_term_weights(model, weighted, corpus):
    """A table's lexical weights scale a query word's BM25 term weights by its row's weight (a word without a row:
    1) in lexical and hybrid search; the postings, the cosines and a table without them are as before."""
    queries = queries_of(weighted, corpus)
    assert any(word not in weighted.tokenizer.vocab for q in queries for word in weighted.tokenizer.words(q))
    index, plain = weighted.index(corpus), model.index(corpus)
    for name in ("offsets", "docs", "counts", "lengths"):
        np.testing.assert_array_equal(getattr(index.postings(), name), getattr(plain.postings(), name))
    found = index.postings().scores(*index.postings().weighted_query_terms(weighted, queries))
    unweighted = plain.postings().scores(plain.postings().query_terms(model, queries))
    for query, row, before in zip(queries, found, unweighted):
        np.testing.assert_allclose(row, brute_bm25(weighted, query, corpus, lexical_module.K1, lexical_module.B),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(before, brute_bm25(model, query, corpus, lexical_module.K1, lexical_module.B),
                                   rtol=1e-5, atol=1e-6)
    assert not np.allclose(found, unweighted)
    for query, hits in zip(queries, index.search(queries, 9, mode="hybrid")):
        check_ranking(hits, brute_hybrid(weighted, query, corpus, lexical_module.ALPHA), 9)
    assert weighted.search(queries, corpus, 9, mode="lexical") == index.search(queries, 9, "lexical")
    assert [[h.index for h in hits] for hits in index.search(queries, 9)] == \
        [[h.index for h in hits] for hits in plain.search(queries, 9)]  # dense search does not read them
    with pytest.raises(ValueError, match="kind must be one of query, document or None, got 'lexical'"):
        weighted.encode("a text", kind="lexical")


def test_bm25_ranks_as_bm25s_with_the_same_words(model, corpus):
    import bm25s

    words = [terms(model, text) for text in corpus]
    reference = bm25s.BM25(k1=lexical_module.K1, b=lexical_module.B, method="lucene")
    reference.index(words, show_progress=False)
    index = model.index(corpus)
    for query in queries_of(model, corpus):
        asked = terms(model, query)
        if not asked:
            continue
        theirs = reference.get_scores(asked)
        hits = index.search(query, 10, mode="lexical")
        np.testing.assert_allclose([h.score for h in hits], np.sort(theirs)[::-1][:10], rtol=1e-5, atol=1e-6)
        assert {h.index for h in hits if h.score > hits[-1].score + 1e-5} <= set(np.argsort(-theirs)[:10].tolist())


@pytest.mark.parametrize("alpha", [0.0, 0.3, lexical_module.ALPHA, 1.0])
def test_hybrid_ranks_as_brute_force(model, corpus, alpha):
    index = model.index(corpus)
    queries = queries_of(model, corpus)
    for query, hits in zip(queries, index.search(queries, 12, mode="hybrid", alpha=alpha)):
        check_ranking(hits, brute_hybrid(model, query, corpus, alpha), 12)
        cosines = model.similarity(query, corpus)
        assert [h.dense for h in hits] == pytest.approx([float(cosines[h.index]) for h in hits], abs=1e-6)
        assert [h.lexical for h in hits] == pytest.approx(
            brute_bm25(model, query, corpus, lexical_module.K1, lexical_module.B)[[h.index for h in hits]], abs=1e-5)
    assert_same_hits(model.search(queries, corpus, 12, mode="hybrid", alpha=alpha),
                     index.search(queries, 12, "hybrid", alpha))


def test_dense_hits_carry_their_cosine_and_batches_rank_as_one(model, corpus, monkeypatch):
    queries = queries_of(model, corpus)
    for hits in model.search(queries, corpus, 5):
        assert all(h.dense == h.score and h.lexical is None for h in hits)
    index = model.index(corpus)
    whole = index.search(queries, 7, mode="hybrid")
    monkeypatch.setattr(search_module, "SCORE_CELLS", 2 * len(corpus))  # two queries a batch
    assert_same_hits(index.search(queries, 7, mode="hybrid"), whole)


def test_lexical_hits_carry_their_cosine_and_weights_made_in_runs_are_the_same(model, corpus, monkeypatch):
    """A lexical search computes the cosines of its hits alone: they equal the full cosines; BM25's posting weights
    made a few terms at a time equal those made at once."""
    index = model.index(corpus)
    queries = queries_of(model, corpus)
    for query, hits in zip(queries, index.search(queries, 10, mode="lexical")):
        cosines = model.similarity(query, corpus)
        assert [h.dense for h in hits] == pytest.approx([float(cosines[h.index]) for h in hits], abs=1e-6)
    whole = index.postings().weights()
    monkeypatch.setattr(lexical_module, "_WEIGHED_AT_ONCE", 5)
    np.testing.assert_array_equal(model.index(corpus).postings().weights(), whole)


def test_mode_and_alpha_are_checked(model, corpus):
    with pytest.raises(ValueError, match="^mode must be one of dense, hybrid, lexical, got 'sparse'$"):
        model.search("a", corpus, mode="sparse")
    for bad in (1.5, -0.1, True, "0.5"):
        with pytest.raises(ValueError) as caught:
            model.index(corpus[:5]).search("a", mode="hybrid", alpha=bad)
        assert str(caught.value) == f"alpha must be a number from 0 to 1, got {bad!r}"
    with pytest.raises(ValueError, match="^search needs a corpus of at least one passage; this one is empty$"):
        model.search("a", [], mode="hybrid")


def test_postings_saved_and_loaded_give_the_same_hits(model, corpus, tmp_path):
    index = model.index(corpus, ids=[f"p{i}" for i in range(len(corpus))], dtype="int8")
    queries = queries_of(model, corpus)
    before = {mode: index.search(queries, 9, mode=mode) for mode in lexical_module.MODES}
    index.save(tmp_path / "ix")
    info = json.loads((tmp_path / "ix" / "index.json").read_text())
    assert info["lexical"] == {"terms": len(index.postings().terms), "postings": len(index.postings().docs),
                               "stemmer": lexical_module.STEMMER}
    loaded = SearchIndex.load(tmp_path / "ix", model)
    for mode in lexical_module.MODES:
        assert loaded.search(queries, 9, mode=mode) == before[mode]
    for name in ("offsets", "docs", "counts", "lengths"):
        np.testing.assert_array_equal(getattr(loaded.postings(), name), getattr(index.postings(), name))


def test_a_query_finds_the_inflections_of_its_words(model, corpus):
    """Stemmed terms: a query finds the passage that holds its words' inflections (words the table lacks) first;
    unstemmed, that passage scores nothing."""
    for query, passage in INFLECTED.items():
        hits = model.search(query, corpus, 3, "lexical")
        assert hits[0].index == corpus.index(passage) and hits[0].score > 0 and hits[1].score == 0
        assert brute_bm25(model, query, corpus, lexical_module.K1, lexical_module.B, stemmed=False).max() == 0


def test_an_index_saved_before_stemming_searches_its_words_unstemmed(model, corpus, tmp_path):
    """An index.json whose lexical object names no stemmer (indexes saved before stemming): its terms are words as
    they are, and so are its queries' terms; a stemmer this swembed does not know is refused in one line."""
    index = model.index(corpus)
    index.lexical = lexical_module.Lexical.build(model, corpus, stemmer=None)
    index.save(tmp_path / "ix")
    info = json.loads((tmp_path / "ix" / "index.json").read_text())
    del info["lexical"]["stemmer"]
    (tmp_path / "ix" / "index.json").write_text(json.dumps(info))
    loaded = SearchIndex.load(tmp_path / "ix", model)
    assert loaded.postings().stemmer is None
    queries = queries_of(model, corpus)
    for query, hits in zip(queries, loaded.search(queries, 8, mode="lexical")):
        check_ranking(hits, brute_bm25(model, query, corpus, lexical_module.K1, lexical_module.B, stemmed=False), 8)
    info["lexical"]["stemmer"] = "porter9"
    (tmp_path / "ix" / "index.json").write_text(json.dumps(info))
    assert refused(tmp_path / "ix", model) == (f'{tmp_path / "ix" / "index.json"}: lexical stemmer must be None or '
                                               "one of snowball-english, got 'porter9'; index the corpus again with "
                                               "this swembed")
    with pytest.raises(ValueError, match="^stemmer must be None or one of snowball-english, got 'porter9'$"):
        lexical_module.Lexical.build(model, corpus, stemmer="porter9")


def dense_only_folder(model, corpus, folder: Path, old: bool) -> Path:
    """An index without postings: saved with ``lexical=False``, or (``old``) as indexes were before postings."""
    model.index(corpus, lexical=False).save(folder)
    if old:
        info = json.loads((folder / "index.json").read_text())
        del info["lexical"]
        (folder / "index.json").write_text(json.dumps(info))
    return folder


@pytest.mark.parametrize("old", [False, True])
def test_a_dense_only_index_loads_and_searches_by_cosine(model, corpus, tmp_path, old):
    folder = dense_only_folder(model, corpus, tmp_path / "ix", old)
    assert not (folder / "terms.npy").exists()
    loaded = SearchIndex.load(folder, model)
    assert loaded.lexical is None
    assert loaded.search(corpus[:4], 5) == model.search(corpus[:4], corpus, 5)
    for mode in ("hybrid", "lexical"):
        with pytest.raises(SearchIndexError) as caught:
            loaded.search("a", 3, mode=mode)
        assert str(caught.value) == (f"{folder}: holds no lexical postings (saved before they existed, or without "
                                     "them); search it with mode dense, or index the corpus again (swembed index)")


@pytest.fixture
def saved(model, corpus, tmp_path) -> Path:
    return model.index(corpus).save(tmp_path / "index")


def refused(folder: Path, model) -> str:
    with pytest.raises(SearchIndexError) as caught:
        SearchIndex.load(folder, model)
    assert "\n" not in str(caught.value)
    return str(caught.value)


def rewrite(folder: Path, name: str, change) -> None:
    array = np.load(folder / name)
    change(array)
    np.save(folder / name, array)


def test_damaged_postings_are_refused_in_one_line(saved, model, corpus):
    damage = [
        ("posting_docs.npy", lambda a: a.__setitem__(0, 10_000), f"a posting names a passage outside the "
                                                                   f"{len(corpus)} of the index; the index is damaged"),
        ("posting_docs.npy", lambda a: a.__setitem__(1, a[0]), "posting 1 does not rise within its term's run"),
        ("posting_counts.npy", lambda a: a.__setitem__(2, 0), "a count below 1; the index is damaged"),
        ("lengths.npy", lambda a: a.__setitem__(4, a[4] + 1), "passage 4's length is not the sum of its postings' "
                                                              "counts; the index is damaged"),
        ("term_postings.npy", lambda a: a.__setitem__(2, a[1]), "offsets must rise from 0 to the"),
    ]
    for name, change, message in damage:
        original = (saved / name).read_bytes()
        rewrite(saved, name, change)
        found = refused(saved, model)
        assert found.startswith(f"{saved / name}: ") and message in found, found
        (saved / name).write_bytes(original)
    SearchIndex.load(saved, model)  # every file restored: accepted again


def test_postings_of_the_wrong_shape_or_missing_are_refused(saved, model):
    docs = np.load(saved / "posting_docs.npy")
    np.save(saved / "posting_docs.npy", docs.astype(np.int64))
    assert refused(saved, model) == (f"{saved / 'posting_docs.npy'}: expected shape ({len(docs)}) int32, got "
                                     f"({len(docs)},) int64; the index is damaged or another index's")
    (saved / "posting_docs.npy").unlink()
    assert refused(saved, model) == f"{saved}: posting_docs.npy is missing; the index is incomplete"
    info = json.loads((saved / "index.json").read_text())
    info["lexical"] = {"terms": -1}
    (saved / "index.json").write_text(json.dumps(info))
    assert refused(saved, model) == (f'{saved / "index.json"}: lexical must be null or an object with the numbers of '
                                     '"terms" and "postings", got {"terms": -1}')


def test_a_term_listed_twice_is_refused(saved, model):
    offsets = np.load(saved / "term_offsets.npy")
    data = np.load(saved / "terms.npy")
    first = data[offsets[0] : offsets[1]]
    second = data[offsets[1] : offsets[2]]
    fixed = np.concatenate([first, first, data[offsets[2] :]])
    np.save(saved / "terms.npy", fixed)
    np.save(saved / "term_offsets.npy", np.concatenate([offsets[:2], offsets[2:] - len(second) + len(first)]))
    loaded = SearchIndex.load(saved, model)
    with pytest.raises(ValueError, match=f"^{saved / 'terms.npy'}: a term is listed twice; the index is damaged$"):
        loaded.search("a", 3, mode="hybrid")


# --- the command line -------------------------------------------------------------------------------------------


def cli(*args) -> tuple[int, str, str]:
    result = run_cli([str(a) for a in args], same_process=True)
    return result.returncode, result.stdout, result.stderr


def test_swembed_search_modes_from_a_corpus_and_an_index(model, corpus, tmp_path):
    (tmp_path / "corpus.txt").write_text("\n".join(t or "-" for t in corpus) + "\n", encoding="utf-8")
    passages = (tmp_path / "corpus.txt").read_text(encoding="utf-8").splitlines()
    assert cli("index", model.path, "--corpus", tmp_path / "corpus.txt", "--out", tmp_path / "ix")[0] == 0
    query = corpus[9]
    for mode in ("lexical", "hybrid"):
        alpha = ["--alpha", "0.4"] if mode == "hybrid" else []
        args = ["--query", query, "--top-k", "4", "--json", "--mode", mode, *alpha]
        from_corpus = cli("search", model.path, "--corpus", tmp_path / "corpus.txt", *args)
        from_index = cli("search", model.path, "--index", tmp_path / "ix", *args)
        assert from_corpus == from_index and from_index[0] == 0, from_index[2]
        hits = json.loads(from_index[1])["hits"]
        expected = model.search(query, passages, 4, mode=mode, alpha=0.4 if mode == "hybrid" else None)
        assert [(h["index"], h["score"], h["dense"], h["lexical"]) for h in hits] == [
            (e.index, round(e.score, 6), round(e.dense, 6), round(e.lexical, 6)) for e in expected]
    code, out, _ = cli("search", model.path, "--index", tmp_path / "ix", "--query", query, "--mode", "hybrid")
    assert code == 0 and out.splitlines()[1].split()[2] == "dense"


def test_swembed_search_refusals_of_the_modes(model, corpus, tmp_path):
    (tmp_path / "corpus.txt").write_text("\n".join(corpus[:20]) + "\n", encoding="utf-8")
    code = cli("index", model.path, "--corpus", tmp_path / "corpus.txt", "--out", tmp_path / "ix", "--dense-only")[0]
    assert code == 0
    code, out, err = cli("search", model.path, "--index", tmp_path / "ix", "--query", "x", "--mode", "hybrid")
    assert (code, out, err.splitlines()) == (2, "", [
        f"swembed search: error: {tmp_path / 'ix'}: holds no lexical postings (saved before they existed, or without "
        "them); search it with mode dense, or index the corpus again (swembed index)"])
    code, _, err = cli("search", model.path, "--index", tmp_path / "ix", "--query", "x", "--alpha", "0.5")
    assert (code, err.strip()) == (2, "swembed search: error: --alpha weighs the hybrid score; give --mode hybrid "
                                      "with it")
    code, _, err = cli("search", model.path, "--index", tmp_path / "ix", "--query", "x", "--mode", "hybrid",
                       "--alpha", "2")
    assert (code, err.strip()) == (2, "swembed search: error: alpha must be a number from 0 to 1, got 2.0")


# --- MTEB's retrieval through swembed's search ------------------------------------------------------------------


def test_mteb_retrieval_ranks_by_the_chosen_mode(tmp_path):
    """Documents alike but for a word the table lacks: the cosine cannot tell them apart, BM25 can; the dense mode
    scores as mteb's own cosine path does."""
    pytest.importorskip("mteb")
    from swembed.eval.mteb_tasks import evaluate_mteb
    from swembed.runtime import StaticEmbedder, WordTokenizer

    words = ["cell", "gene", "protein", "study"]
    model = StaticEmbedder(np.eye(len(words), dtype=np.float32), WordTokenizer({w: i for i, w in enumerate(words)}))
    marks = ["qxa", "qxb", "qxc", "qxd", "qxe"]
    write_scifact(tmp_path / "SciFact", [f"{m} cell gene protein {words[i % 4]}" for i, m in enumerate(marks)],
                  [f"about {m}" for m in marks])
    score = {mode: evaluate_mteb(model.encode, tmp_path, ["SciFact"], search=mode, searcher=model)["SciFact"]
             for mode in ("dense", "lexical", "hybrid")}
    assert score["lexical"] == pytest.approx(100.0) and score["dense"] < 100
    assert score["dense"] == pytest.approx(evaluate_mteb(model.encode, tmp_path, ["SciFact"])["SciFact"])


def write_scifact(folder: Path, docs: list[str], queries: list[str]) -> None:
    """A SciFact folder as mteb reads it: query i's one relevant document is document i."""
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": text}) + "\n"
                                                 for i, text in enumerate(docs)))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": text}) + "\n"
                                                  for i, text in enumerate(queries)))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\td{i}\t1\n" for i in range(len(queries))))


def test_swembed_eval_reports_the_dense_score_beside_a_hybrid_search(model, tmp_path):
    """``swembed eval --suite mteb --search hybrid`` (or lexical) prints SciFact's dense-only score beside, the
    score of ``--search dense``."""
    pytest.importorskip("mteb")
    texts = random_texts(model, 12, seed=5)
    write_scifact(tmp_path / "SciFact", texts, [" ".join(t.split()[:2]) for t in texts])
    printed = {}
    for mode in ("dense", "hybrid", "lexical"):
        code, out, err = cli("eval", model.path, "--suite", "mteb", "--tasks", "SciFact", "--data", tmp_path,
                             "--search", mode)
        assert code == 0, err
        printed[mode] = dict(line.rsplit(maxsplit=1) for line in out.splitlines()[1:])
        printed[mode] = {name.strip(): float(value) for name, value in printed[mode].items()}
    assert list(printed["dense"]) == ["SciFact"]
    for mode in ("hybrid", "lexical"):
        assert list(printed[mode]) == ["SciFact", "SciFact (dense)"]
        assert printed[mode]["SciFact (dense)"] == printed["dense"]["SciFact"]


def test_eval_search_flags_apply_to_mteb_only(tmp_path):
    folder = write_word_model(tmp_path / "model")
    for flags in (["--search", "hybrid"], ["--search", "dense", "--windows"]):
        code, _, err = cli("eval", folder, "--suite", "en", "--data", tmp_path, *flags)
        assert (code, err.strip()) == (2, "swembed eval: error: --search, --alpha and --windows rank retrieval tasks: "
                                          "they apply to --suite mteb only")


# --- the same ranking in JavaScript -----------------------------------------------------------------------------

SEARCH_IN_NODE = """
import { readFileSync } from 'node:fs';
import { BM25_B, BM25_K1, HYBRID_ALPHA, loadModel, search } from './src/index.js';
const { table, queries, corpus, topK } = JSON.parse(readFileSync(0, 'utf-8'));
const model = await loadModel(table);
const found = {};
for (const [mode, alpha] of [['lexical', HYBRID_ALPHA], ['hybrid', HYBRID_ALPHA], ['hybrid', 0.2]]) {
  found[`${mode} ${alpha}`] = search(model, queries, corpus, topK, { mode, alpha });
}
console.log(JSON.stringify({ found, defaults: [BM25_K1, BM25_B, HYBRID_ALPHA] }));
"""


@pytest.mark.parametrize("lexical_weights", [False, True])
def test_node_ranks_lexical_and_hybrid_as_python(model, weighted, corpus, lexical_weights):
    """The JS package's ``search(..., {mode, alpha})`` gives Python's hits: the same scores (float32, to 1e-5),
    cosines and BM25 scores, in the same order except where Python's scores lie within 1e-5 of each other; with the
    table's lexical weights too."""
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    model = weighted if lexical_weights else model
    queries = queries_of(model, corpus)
    request = {"table": str(model.path), "queries": queries, "corpus": corpus, "topK": 10}
    result = subprocess.run([node, "--input-type=module", "-e", SEARCH_IN_NODE], input=json.dumps(request),
                            capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent / "js",
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout)
    assert answer["defaults"] == [lexical_module.K1, lexical_module.B, lexical_module.ALPHA]
    index = model.index(corpus)
    for key, found in answer["found"].items():
        mode, alpha = key.split()
        expected = index.search(queries, 10, mode=mode, alpha=float(alpha))
        for query, js_hits, python_hits in zip(queries, found, expected):
            scores = (brute_bm25(model, query, corpus, lexical_module.K1, lexical_module.B) if mode == "lexical"
                      else brute_hybrid(model, query, corpus, float(alpha)))
            for hit, reference in zip(js_hits, python_hits, strict=True):
                assert hit["score"] == pytest.approx(reference.score, abs=1e-5)
                assert hit["dense"] == pytest.approx(reference.dense, abs=1e-6)
                assert hit["lexical"] == pytest.approx(reference.lexical, abs=1e-5)
                assert hit["index"] == reference.index or abs(scores[hit["index"]] - reference.score) < 1e-5
