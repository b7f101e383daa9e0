"""Passage windows (issue 82): a long passage's dense score is its cosine plus ``gamma`` times its best window's
(``swembed.runtime.windows``). Checked against the definition written out here (each passage's windows encoded
one by one, a loop over them), in every search mode, blocked or not, saved and loaded, float32 and int8, through
the CLI and mteb, refusals of damaged window files, the shortlist of a dense search over more passages than
``SHORTLIST``, and the JS package's search against Python's."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_lexical import brute_bm25, cli, write_scifact
from test_search import assert_same_hits, random_texts, write_word_model

import swembed
from swembed.runtime import lexical as lexical_module
from swembed.runtime import search as search_module
from swembed.runtime import windows as windows_module
from swembed.runtime.index import SearchIndex, SearchIndexError
from swembed.runtime.windows import GAMMA, SHORTLIST, SHORTLIST_FROM, word_windows

WIDTH = 4  # small, so that the random passages here have windows


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> swembed.StaticEmbedder:
    return swembed.load(write_word_model(tmp_path_factory.mktemp("windows") / "words", words=80))


@pytest.fixture(scope="module")
def corpus(model) -> list[str]:
    texts = random_texts(model, 120, seed=21)
    long = [" ".join(texts[i : i + 3]) for i in range(0, 60, 3)]  # 9 to 30 words: several windows each
    return [*texts, *long, "", texts[4], "Unknownword " + long[2]]


def queries_of(model, corpus: list[str]) -> list[str]:
    return [*random_texts(model, 10, seed=22), corpus[130].split(" ", 2)[2], "nothing known", ""]


_ALONE: dict = {}  # (table, corpus, width) -> each passage's vector and its windows' vectors, each encoded alone


def brute_dense(model, query: str, corpus: list[str], width: int = WIDTH, gamma: float = GAMMA) -> np.ndarray:
    """The definition, a passage at a time: its cosine plus gamma times the best cosine of its windows (each
    encoded alone), or of itself where it has none."""
    key = (str(model.path), tuple(corpus), width)
    if key not in _ALONE and len(corpus) > 2000:  # a large corpus: each text still encoded as itself, in batches
        owned = [word_windows(p, width) for p in corpus]
        passages = model.encode(corpus, kind="document")
        windows = iter(model.encode([w for found in owned for w in found], kind="document"))
        _ALONE[key] = [(passage, [next(windows) for _ in found]) for passage, found in zip(passages, owned)]
    if key not in _ALONE:
        _ALONE[key] = [(model.encode([p], kind="document")[0],
                        [model.encode([w], kind="document")[0] for w in word_windows(p, width)]) for p in corpus]
    q = model.encode([query], kind="query")[0]
    scores = []
    for whole_vector, window_vectors in _ALONE[key]:
        whole = float(whole_vector @ q)
        best = max((float(v @ q) for v in window_vectors), default=whole)
        scores.append(whole + gamma * best)
    return np.asarray(scores)


def expected_scores(model, query: str, corpus: list[str], mode: str) -> np.ndarray:
    """A mode's scores by the definitions: the windowed dense score, BM25, or their hybrid at the default alpha of
    an index with windows."""
    dense = brute_dense(model, query, corpus)
    bm25 = brute_bm25(model, query, corpus, lexical_module.K1, lexical_module.B)
    alpha = windows_module.ALPHA
    return {"dense": dense, "lexical": bm25, "hybrid": alpha * z(dense) + (1 - alpha) * z(bm25)}[mode]


def z(row: np.ndarray) -> np.ndarray:
    return (row - row.mean()) / row.std() if row.std() > 0 else np.zeros_like(row)


def check_order(hits, expected: np.ndarray, top_k: int) -> None:
    """Hits best first as ``expected`` ranks them, to float32 precision (rows tied within it in either order)."""
    order = np.lexsort((np.arange(len(expected)), -np.round(expected, 5)))[:top_k]
    got = [h.index for h in hits]
    assert len(got) == len(set(got)) == len(order)
    np.testing.assert_allclose([h.score for h in hits], expected[order], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(expected[got], expected[order], rtol=1e-5, atol=1e-5)


def test_word_windows_split_as_python_and_cover_every_word():
    text = "a b\u2003c\x1cd\x85e\u3000f g\th\ni j k \ufeffl"  # \ufeff is no white space to str.split()
    words = text.split()
    assert word_windows(text, len(words)) == [] and word_windows("one two", 2) == []
    for width in (2, 3, 4, 5, 8):
        found = word_windows(text, width)
        step = width // 2
        assert found[0].split() == words[:width] and found[-1].split() == words[-len(found[-1].split()):]
        assert [w.split() for w in found] == [words[s : s + width] for s in range(0, len(words) - width + step, step)]
        assert {w for window in found for w in window.split()} == set(words)
        assert all(len(w.split()) <= width for w in found)


@pytest.mark.parametrize("mode", ["dense", "hybrid", "lexical"])
def test_windowed_search_ranks_as_the_definition(model, corpus, mode):
    queries = queries_of(model, corpus)
    index = model.index(corpus, windows=WIDTH)
    assert index.windows is not None and index.windows.width == WIDTH
    assert len(index.windows.vectors) == sum(len(word_windows(p, WIDTH)) for p in corpus) > len(corpus)
    found = index.search(queries, 12, mode=mode)
    for query, hits in zip(queries, found):
        check_order(hits, expected_scores(model, query, corpus, mode), 12)
        dense = brute_dense(model, query, corpus)
        np.testing.assert_allclose([h.dense for h in hits], dense[[h.index for h in hits]], rtol=1e-5, atol=1e-5)
    assert_same_hits(model.search(queries, corpus, 12, mode=mode, windows=WIDTH), found)


def test_windows_scored_in_blocks_rank_as_at_once(model, corpus, monkeypatch):
    queries = queries_of(model, corpus)
    index = model.index(corpus, windows=WIDTH)
    at_once = index.search(queries, 20)
    mixed = {mode: index.search(queries, 20, mode=mode) for mode in ("hybrid", "lexical")}
    monkeypatch.setattr(windows_module, "SCORE_CELLS", 7)  # a handful of windows a block, runs cut across blocks
    monkeypatch.setattr(windows_module, "PASSAGES_AT_ONCE", 5)
    assert_same_hits(index.search(queries, 20), at_once)
    monkeypatch.setattr(search_module, "SCORE_CELLS", 40)  # blocks of passages, each with its windows
    monkeypatch.setattr(search_module, "QUERIES_AT_ONCE", 3)
    assert_same_hits(index.search(queries, 20), at_once)
    for mode, expected in mixed.items():  # whole rows of a few queries at a time
        assert_same_hits(index.search(queries, 20, mode=mode), expected)
    blocked = model.index(corpus, windows=WIDTH, lexical=False)
    np.testing.assert_array_equal(blocked.windows.offsets, index.windows.offsets)
    np.testing.assert_allclose(blocked.windows.vectors, index.windows.vectors, atol=1e-6)


def test_a_corpus_without_long_passages_scores_its_cosine_times_one_plus_gamma(model):
    short = random_texts(model, 30, seed=23)
    index = model.index(short, windows=50)
    assert len(index.windows.vectors) == 0
    plain = model.search(short[:3], short, 5)
    for hits, reference in zip(index.search(short[:3], 5), plain):
        assert [h.index for h in hits] == [h.index for h in reference]
        np.testing.assert_allclose([h.score for h in hits], [(1 + GAMMA) * h.score for h in reference], atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_windows_saved_and_loaded_give_the_same_hits(model, corpus, tmp_path, dtype):
    queries = queries_of(model, corpus)
    index = model.index(corpus, dtype=dtype, windows=WIDTH)
    index.save(tmp_path / "ix")
    info = json.loads((tmp_path / "ix" / "index.json").read_text())
    assert info["format_version"] == 2 and info["windows"] == {"width": WIDTH, "gamma": GAMMA,
                                                              "windows": len(index.windows.vectors)}
    loaded = SearchIndex.load(tmp_path / "ix", model)
    for mode in ("dense", "hybrid"):
        assert_same_hits(loaded.search(queries, 10, mode=mode), index.search(queries, 10, mode=mode))
    if dtype == "int8":  # int8 windows score within about 0.01 of float32's
        exact = model.index(corpus, windows=WIDTH).search(queries, 5)
        for hits, reference in zip(index.search(queries, 5), exact):
            np.testing.assert_allclose([h.score for h in hits], [h.score for h in reference], atol=0.03)
    model.index(corpus).save(tmp_path / "plain")  # an index without windows stays version 1
    assert json.loads((tmp_path / "plain" / "index.json").read_text())["format_version"] == 1


@pytest.fixture
def saved(model, corpus, tmp_path) -> Path:
    model.index(corpus, windows=WIDTH, lexical=False).save(tmp_path / "ix")
    return tmp_path / "ix"


def test_damaged_windows_are_refused_in_one_line(saved, model):
    offsets = np.load(saved / "window_offsets.npy")
    offsets[3], offsets[4] = offsets[4], offsets[3] - 1
    np.save(saved / "window_offsets.npy", offsets)
    with pytest.raises(SearchIndexError, match=r"window_offsets.npy: offsets must rise from 0"):
        SearchIndex.load(saved, model)


def test_windows_of_the_wrong_shape_or_declared_badly_are_refused(saved, model):
    vectors = np.load(saved / "window_vectors.npy")
    np.save(saved / "window_vectors.npy", vectors[:-1])
    with pytest.raises(SearchIndexError, match=r"window_vectors.npy: expected shape"):
        SearchIndex.load(saved, model)
    np.save(saved / "window_vectors.npy", np.where(np.arange(len(vectors))[:, None] == 2, np.nan, vectors))
    with pytest.raises(SearchIndexError, match=r"row 2 is not a sentence vector"):
        SearchIndex.load(saved, model)
    info = json.loads((saved / "index.json").read_text())
    for bad in ({"width": 1, "gamma": 1.0, "windows": 3}, {"width": 4, "gamma": -1, "windows": 3}, [4], "4"):
        (saved / "index.json").write_text(json.dumps({**info, "windows": bad}))
        with pytest.raises(SearchIndexError, match=r"index.json: windows must be null or an object"):
            SearchIndex.load(saved, model)


@pytest.mark.parametrize("width", [0, 1, 2.5, True, "8"])
def test_a_bad_width_is_refused(model, corpus, width):
    with pytest.raises(ValueError, match="windows must be a number of words of at least 2"):
        model.index(corpus, windows=width)
    with pytest.raises(ValueError, match="windows must be a number of words of at least 2"):
        model.search("a query", corpus, windows=width)


def test_the_server_searches_a_windowed_index_as_the_index_does(model, corpus, tmp_path):
    """``swembed serve --index`` over an index built with windows: ``POST /v1/search`` answers as its ``search``,
    the hybrid (the route's default) at the windows' default alpha, each hit's dense score the windowed one."""
    from test_serve import request

    from swembed.integrations.serve import ServeLimits, make_server

    saved = model.index(corpus, windows=WIDTH).save(tmp_path / "ix")
    queries = queries_of(model, corpus)[:4]
    with make_server(model.path, port=0, limits=ServeLimits(max_top_k=5, timeout_s=5), index=saved) as running:
        server = running.start()
        index = server.index
        for mode in (None, "dense", "hybrid"):
            payload = {"query": queries, "top_k": 5, **({"mode": mode} if mode else {})}
            status, _, body = request(server, "POST", "/v1/search", json.dumps(payload).encode())
            assert status == 200, body
            for result, hits in zip(body["data"], index.search(queries, 5, mode or "hybrid")):
                assert [h["index"] for h in result["hits"]] == [hit.index for hit in hits]
                assert [h["score"] for h in result["hits"]] == pytest.approx([hit.score for hit in hits], abs=1e-6)
        hits = index.search(queries[0], 5, "hybrid")
        assert [h.index for h in hits] == [h.index for h in index.search(queries[0], 5, "hybrid", windows_module.ALPHA)]
        np.testing.assert_allclose([h.dense for h in hits], brute_dense(model, queries[0], corpus)[
            [h.index for h in hits]], atol=1e-5)


def test_swembed_index_and_search_with_windows(model, corpus, tmp_path):
    (tmp_path / "corpus.txt").write_text("\n".join(t or "-" for t in corpus) + "\n", encoding="utf-8")
    passages = (tmp_path / "corpus.txt").read_text(encoding="utf-8").splitlines()
    code, _, err = cli("index", model.path, "--corpus", tmp_path / "corpus.txt", "--out", tmp_path / "ix",
                       "--windows", WIDTH)
    assert code == 0, err
    assert f"windows of {WIDTH} words" in err
    query = corpus[131]
    expected = model.search(query, passages, 4, mode="hybrid", windows=WIDTH)
    for where in (["--index", tmp_path / "ix"], ["--corpus", tmp_path / "corpus.txt", "--windows", WIDTH]):
        code, out, err = cli("search", model.path, *where, "--query", query, "--top-k", "4", "--json", "--mode",
                             "hybrid")
        assert code == 0, err
        hits = json.loads(out)["hits"]
        assert [h["index"] for h in hits] == [h.index for h in expected]
        np.testing.assert_allclose([h["dense"] for h in hits], [h.dense for h in expected], atol=1e-5)
    code, _, err = cli("search", model.path, "--index", tmp_path / "ix", "--query", "x", "--windows", "8")
    assert code == 2 and "--windows reads a corpus file into windows" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli("index", model.path, "--corpus", tmp_path / "corpus.txt", "--out", tmp_path / "iy",
                       "--windows", "1")
    assert code == 2 and "windows must be a number of words of at least 2" in err
    assert not (tmp_path / "iy").exists()


def test_mteb_retrieval_ranks_with_windows(model, tmp_path):
    """``swembed eval --suite mteb --search dense --windows N`` scores SciFact as the windowed search ranks, and
    ``--windows`` needs ``--search``."""
    pytest.importorskip("mteb")
    texts = random_texts(model, 40, seed=24)
    docs = [" ".join(texts[i : i + 4]) for i in range(0, 40, 4)]  # long documents
    queries = [d.split()[-3] + " " + d.split()[-2] for d in docs]  # words at a document's end
    write_scifact(tmp_path / "SciFact", docs, queries)
    code, out, err = cli("eval", model.path, "--suite", "mteb", "--tasks", "SciFact", "--data", tmp_path,
                         "--search", "dense", "--windows", WIDTH)
    assert code == 0, err
    printed = float(out.splitlines()[1].split()[-1])
    hits = model.search(queries, docs, 10, windows=WIDTH)
    ranks = [next(r for r, h in enumerate(found) if h.index == i) for i, found in enumerate(hits)]
    ndcg = 100 * np.mean([1 / np.log2(r + 2) for r in ranks])
    assert printed == pytest.approx(ndcg, abs=0.01)
    code, _, err = cli("eval", model.path, "--suite", "mteb", "--tasks", "SciFact", "--data", tmp_path,
                       "--windows", WIDTH)
    assert code == 2 and "--windows reads documents into windows for swembed's own search" in err


@pytest.fixture(scope="module")
def big(model) -> list[str]:
    """More passages than a dense search shortlists from, a third of them long (several windows each)."""
    texts = random_texts(model, SHORTLIST_FROM + 300, seed=25)
    return [" ".join(texts[i : i + 3]) if i % 3 == 0 else text for i, text in enumerate(texts)]


def shortlisted_dense(model, query: str, corpus: list[str]) -> np.ndarray:
    """The definition of a dense search's scores over more than ``SHORTLIST_FROM`` passages: the windowed score of
    the query's ``SHORTLIST`` highest cosines (equal ones by lower passage), (1 + gamma) times the cosine elsewhere."""
    exact = brute_dense(model, query, corpus)
    q = model.encode([query], kind="query")[0]
    cosines = np.asarray([float(whole @ q) for whole, _ in _ALONE[(str(model.path), tuple(corpus), WIDTH)]])
    listed = np.lexsort((np.arange(len(cosines)), -np.round(cosines, 6)))[:SHORTLIST]
    scores = (1 + GAMMA) * cosines
    scores[listed] = exact[listed]
    return scores


def test_a_dense_search_over_many_passages_reads_the_windows_of_a_shortlist(model, big):
    """Dense: windows read for each query's ``SHORTLIST`` highest cosines, the rest scored as passages without
    windows (which here changes most scores: the test is not the full reading again); hybrid and lexical: every
    window read, as their z-scores and hits' dense scores need. Batched or one query at a time, the same hits."""
    queries = [*random_texts(model, 4, seed=26), big[300].split(" ", 4)[4]]
    index = model.index(big, windows=WIDTH)
    changed = 0
    for query, hits in zip(queries, index.search(queries, 10)):
        expected, every = shortlisted_dense(model, query, big), brute_dense(model, query, big)
        changed += int(np.sum(np.abs(expected - every) > 1e-4))
        check_order(hits, expected, 10)
        assert_same_hits([index.search(query, 10)], [hits])
    assert changed > len(queries) * len(big) // 10  # passages outside the shortlist whose windows score otherwise
    postings, alpha = index.postings(), windows_module.ALPHA
    for query in queries[:2]:  # BM25 as the index scores it (tests/test_lexical.py checks it against its definition)
        bm25 = postings.scores(*postings.weighted_query_terms(model, [query]))[0]
        every = brute_dense(model, query, big)
        check_order(index.search(query, 10, mode="hybrid"), alpha * z(every) + (1 - alpha) * z(bm25), 10)
        hits = index.search(query, 10, mode="lexical")
        np.testing.assert_allclose([h.dense for h in hits], every[[h.index for h in hits]], rtol=1e-5, atol=1e-5)


SEARCH_IN_NODE = """
import { readFileSync } from 'node:fs';
import {
  WINDOW_GAMMA, WINDOW_SHORTLIST, WINDOW_SHORTLIST_FROM, WINDOW_WIDTH, loadModel, search, wordWindows,
} from './src/index.js';
const { table, queries, corpus, big, bigQueries, topK, width, texts } = JSON.parse(readFileSync(0, 'utf-8'));
const model = await loadModel(table);
const found = {};
for (const mode of ['dense', 'hybrid', 'lexical']) {
  found[mode] = search(model, queries, corpus, topK, { mode, windows: width });
}
const large = search(model, bigQueries, big, topK, { windows: width });
console.log(JSON.stringify({ found, large, windows: texts.map((t) => wordWindows(t, width)),
  defaults: [WINDOW_WIDTH, WINDOW_GAMMA, WINDOW_SHORTLIST, WINDOW_SHORTLIST_FROM] }));
"""


def test_node_ranks_with_windows_as_python(model, corpus, big):
    """Every mode over a small corpus and over one of more passages than a dense search shortlists from."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    queries = queries_of(model, corpus)
    odd = ["a b\u2003c\x1cd\x85e\u3000f g\th\ni j k \ufeffl", "  lead and  trail  ", corpus[130]]
    request = {"table": str(model.path), "queries": queries, "corpus": corpus, "big": big, "bigQueries": queries[:4],
               "topK": 10, "width": WIDTH, "texts": odd}
    result = subprocess.run([node, "--input-type=module", "-e", SEARCH_IN_NODE], input=json.dumps(request),
                            capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent / "js",
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout)
    assert answer["defaults"] == [windows_module.WIDTH, GAMMA, SHORTLIST, SHORTLIST_FROM]
    assert answer["windows"] == [word_windows(t, WIDTH) for t in odd]
    index = model.index(corpus, windows=WIDTH)
    for mode, found in answer["found"].items():
        for query, js_hits, python_hits in zip(queries, found, index.search(queries, 10, mode=mode)):
            expected = expected_scores(model, query, corpus, mode)
            for hit, reference in zip(js_hits, python_hits, strict=True):
                assert hit["score"] == pytest.approx(reference.score, abs=1e-5)
                assert hit["dense"] == pytest.approx(reference.dense, abs=1e-5)
                assert hit["index"] == reference.index or abs(expected[hit["index"]] - reference.score) < 1e-5
    shortlisting = model.index(big, windows=WIDTH, lexical=False)  # a dense search over more than SHORTLIST_FROM
    for query, js_hits, python_hits in zip(queries[:4], answer["large"], shortlisting.search(queries[:4], 10)):
        expected = shortlisted_dense(model, query, big)
        for hit, reference in zip(js_hits, python_hits, strict=True):
            assert hit["score"] == pytest.approx(reference.score, abs=1e-5)
            assert hit["index"] == reference.index or abs(expected[hit["index"]] - reference.score) < 1e-5


def test_the_defaults_are_the_dev_choice_of_the_committed_measurements():
    """WIDTH, GAMMA and the hybrid's ALPHA beside windows are what ``lab.passage_windows`` chooses from its committed
    dev measurements (reports/mteb/passage_windows.json), and the report says so."""
    from lab.passage_windows import choose, report

    root = Path(__file__).resolve().parent.parent
    found = json.loads((root / "reports" / "mteb" / "passage_windows.json").read_text(encoding="utf-8"))
    assert choose(found) == (f"{windows_module.WIDTH}-word windows, gamma {windows_module.GAMMA}", windows_module.ALPHA)
    committed = (root / "reports" / "mteb" / "passage_windows.md").read_text(encoding="utf-8")
    command = committed.split("<!-- generated: ", 1)[1].split(" -->", 1)[0]
    assert report(found, command.split()[3], command) == committed
