"""Search (issue 78): ``model.similarity``, ``model.search``, ``SearchIndex`` (build, search, save, load, refusals),
``swembed search`` / ``swembed index``, and ``swembed encode --text-column``. Rankings are checked against a
brute-force numpy ranking of the same vectors (one matrix product, then a full sort by score and index)."""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli, snapshot

import swembed
from swembed.runtime import search as search_module
from swembed.runtime.folder import write_model_folder
from swembed.runtime.index import SearchIndex, SearchIndexError


def write_word_model(folder: Path, seed: int = 0, words: int = 300, dim: int = 16) -> Path:
    """A table of ``words`` random lower-case words (no back-off), random float32 rows."""
    rng = random.Random(seed)
    vocab = sorted({"".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 8))) for _ in range(words)})
    table = np.random.default_rng(seed).normal(size=(len(vocab), dim)).astype(np.float32)
    return write_model_folder(folder, table, vocab, {"tokenization": {"oov_backoff": "none"}}, None)


def random_texts(model: swembed.StaticEmbedder, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(model.words, k=rng.randint(3, 10))) for _ in range(n)]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> swembed.StaticEmbedder:
    return swembed.load(write_word_model(tmp_path_factory.mktemp("search") / "words"))


@pytest.fixture(scope="module")
def corpus(model) -> list[str]:
    texts = random_texts(model, 400, seed=1)
    return texts + texts[10:15] + [texts[3]]  # duplicates: equal scores, ranked by lower index


def brute_force(model, queries: list[str], corpus: list[str], top_k: int) -> list[list[tuple[int, float]]]:
    """Every passage scored by one matrix product, sorted by score (highest first), then by index."""
    scores = model.encode(queries) @ model.encode(corpus).T
    ranked = []
    for row in scores:
        order = np.lexsort((np.arange(len(row)), -row))[:top_k]
        ranked.append([(int(i), float(row[i])) for i in order])
    return ranked


def pairs(hits) -> list[list[tuple[int, float]]]:
    return [[(hit.index, hit.score) for hit in found] for found in hits]


def assert_same_hits(found, expected, tol: float = 1e-6) -> None:
    """Hits per query as ``expected`` gives them, to float32 rounding: each score, cosine and BM25 score within
    ``tol``, and a hit changes places (or crosses the cut) only with hits whose scores tie with its own within
    ``tol``. A matrix product of another shape can round the last bit otherwise on some CPUs (OpenBLAS's AVX2
    kernels: 0.6238749027 against 0.6238749623), which may swap two hits that tie that closely."""
    assert len(found) == len(expected)
    for got, want in zip(found, expected):
        assert len(got) == len(want)
        np.testing.assert_allclose([h.score for h in got], [h.score for h in want], rtol=0, atol=tol)
        mine, theirs = {h.index: h for h in got}, {h.index: h for h in want}
        cut = min(got[-1].score, want[-1].score) if want else 0.0
        for index in mine.keys() ^ theirs.keys():
            assert (mine.get(index) or theirs[index]).score <= cut + tol, f"row {index} above the cut in one only"
        for index in mine.keys() & theirs.keys():
            a, b = mine[index], theirs[index]
            assert a.id == b.id and abs(a.score - b.score) <= tol
            for side in ("dense", "lexical"):
                x, y = getattr(a, side), getattr(b, side)
                assert (x is None) == (y is None) and (x is None or abs(x - y) <= tol)


@pytest.mark.parametrize("top_k", [1, 3, 10, 406, 1000])
def test_search_ranks_as_brute_force(model, corpus, top_k):
    queries = random_texts(model, 25, seed=2) + corpus[10:12] + [corpus[3]]
    expected = brute_force(model, queries, corpus, top_k)
    hits = model.search(queries, corpus, top_k=top_k)
    assert pairs(hits) == expected
    assert all(len(found) == min(top_k, len(corpus)) for found in hits)
    assert all(hit.id == hit.index for found in hits for hit in found)
    index = model.index(corpus)
    assert pairs(index.search(queries, top_k)) == expected


def test_batches_of_queries_rank_as_one(model, corpus, monkeypatch):
    queries = random_texts(model, 30, seed=3)
    whole = model.search(queries, corpus, top_k=7)
    monkeypatch.setattr(search_module, "SCORE_CELLS", 3 * len(corpus))  # three queries a batch
    assert_same_hits(model.search(queries, corpus, top_k=7), whole)


def test_ties_go_to_the_lower_index_also_at_the_cut(model, corpus):
    text = corpus[3]
    copies = [i for i, t in enumerate(corpus) if t == text]
    assert len(copies) == 2
    mixed = [text, corpus[0], text, corpus[1], text, text]
    assert [h.index for h in model.search(text, mixed, top_k=2)] == [0, 2]  # the cut falls inside the tie
    assert [h.index for h in model.search(text, mixed, top_k=4)] == [0, 2, 4, 5]
    nothing = "zzzzzzzzzz"  # no word of the table: the zero vector, every score 0
    assert not model.encode(nothing).any()
    found = model.search(nothing, corpus, top_k=5)
    assert [(h.index, h.score) for h in found] == [(i, 0.0) for i in range(5)]


def test_top_hits_in_blocks_rank_as_a_full_sort(monkeypatch):
    """Scores looked through in blocks (the k kept so far, then only the scores above the k-th) rank as a full sort
    by score and index: with equal scores everywhere, the k-th shared, a constant row and a rising one."""
    rng = np.random.default_rng(5)
    scores = rng.integers(0, 6, size=(9, 500)).astype(np.float32)  # six values: ties everywhere
    scores[3] = 0
    scores[4] = np.arange(500)  # rising: every block passes the k-th best
    expected = np.lexsort((np.broadcast_to(np.arange(500), scores.shape), -scores), axis=-1)
    for columns in (7, 64, 1 << 14):
        monkeypatch.setattr(search_module, "SELECTED_COLUMNS", columns)
        for k in (1, 5, 37, 499, 500, 800):
            indices, values = search_module.top_hits(scores, k)
            np.testing.assert_array_equal(indices, expected[:, :k])
            np.testing.assert_array_equal(values, np.take_along_axis(scores, expected[:, :k], axis=1))


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_dense_search_in_blocks_of_passages_ranks_as_one_product(model, corpus, monkeypatch, dtype):
    queries = random_texts(model, 30, seed=6) + [corpus[3], "zzzzzzzzzz"]
    index = model.index(corpus, dtype=dtype)
    whole = index.search(queries, 9)
    if dtype == "float32":
        assert pairs(whole) == brute_force(model, queries, corpus, 9)
    monkeypatch.setattr(search_module, "QUERIES_AT_ONCE", 4)
    monkeypatch.setattr(search_module, "SCORE_CELLS", 4 * 37)  # blocks of 37 passages
    monkeypatch.setattr(search_module, "SELECTED_COLUMNS", 11)
    assert_same_hits(index.search(queries, 9), whole)


def test_top_k_and_empty_corpus_are_refused_in_one_line(model, corpus):
    for bad in (0, -1, True, 2.5, "3"):
        with pytest.raises(ValueError) as caught:
            model.search("a", corpus, top_k=bad)
        assert str(caught.value) == f"top_k must be an integer of at least 1, got {bad!r}"
    with pytest.raises(ValueError, match="^search needs a corpus of at least one passage; this one is empty$"):
        model.search("a", [], top_k=3)
    with pytest.raises(ValueError, match="^an index needs a corpus of at least one passage; this one is empty$"):
        model.index([])
    assert model.search([], corpus) == []


def test_similarity_shapes(model, corpus):
    a, b = corpus[:3], corpus[5:9]
    matrix = model.similarity(a, b)
    assert matrix.shape == (3, 4) and matrix.dtype == np.float32
    np.testing.assert_array_equal(matrix, model.encode(a) @ model.encode(b).T)
    np.testing.assert_allclose(model.similarity(a[0], b), matrix[0], atol=1e-6)
    np.testing.assert_allclose(model.similarity(a, b[1]), matrix[:, 1], atol=1e-6)
    assert model.similarity(a[0], b[1]) == pytest.approx(float(matrix[0, 1]), abs=1e-6)
    assert isinstance(model.similarity(a[0], b[1]), float)
    assert model.similarity(a[2], a[2]) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("ids", [None, "int", "str"])
def test_an_index_saved_and_loaded_gives_the_same_hits(model, corpus, tmp_path, ids):
    given = {None: None, "int": [10 * i + 7 for i in range(len(corpus))], "str": [f"doc-{i}" for i in
                                                                                   range(len(corpus))]}[ids]
    index = model.index(corpus, ids=given)
    queries = random_texts(model, 12, seed=4)
    before = index.search(queries, 8)
    assert index.save(tmp_path / "index") == tmp_path / "index"
    loaded = SearchIndex.load(tmp_path / "index", model)
    assert loaded.search(queries, 8) == before
    assert [hit.id for hit in before[0]] == [hit.index if given is None else given[hit.index] for hit in before[0]]
    assert [loaded.texts[i] for i in range(len(corpus))] == corpus
    assert len(loaded) == len(corpus) and loaded.dim == model.dim
    with pytest.raises(ValueError, match="already exists; pass --overwrite to replace it$"):
        index.save(tmp_path / "index")
    index.save(tmp_path / "index", overwrite=True)


def test_an_int8_index_is_smaller_and_scores_as_float32(model, corpus, tmp_path):
    full, small = model.index(corpus), model.index(corpus, dtype="int8", keep_texts=False)
    full.save(tmp_path / "f32")
    small.save(tmp_path / "i8")
    size = {name: sum(p.stat().st_size for p in (tmp_path / name).glob("vectors.npy")) for name in ("f32", "i8")}
    assert size["i8"] < size["f32"] / 3
    loaded = SearchIndex.load(tmp_path / "i8", model)
    assert loaded.texts is None and loaded.dtype == "int8"
    queries = random_texts(model, 10, seed=5)
    exact = model.similarity(queries, corpus)
    for row, found in zip(exact, loaded.search(queries, 5)):
        assert all(abs(hit.score - row[hit.index]) < 0.01 for hit in found)
    with pytest.raises(ValueError, match=r"^an index's dtype must be one of \('float32', 'int8'\), got 'int4'$"):
        model.index(corpus, dtype="int4")


def test_ids_must_match_the_corpus(model, corpus):
    with pytest.raises(ValueError, match="^ids: 2 ids for 406 passages; give one id a passage$"):
        model.index(corpus, ids=[1, 2])
    with pytest.raises(ValueError, match="^ids must be all integers or all strings$"):
        model.index(corpus[:2], ids=[1, "b"])


@pytest.fixture
def saved(model, corpus, tmp_path) -> Path:
    return model.index(corpus[:50], ids=[f"d{i}" for i in range(50)]).save(tmp_path / "index")


def refused(folder: Path, model) -> str:
    with pytest.raises(SearchIndexError) as caught:
        SearchIndex.load(folder, model)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_an_index_of_another_table_is_refused(saved, model, tmp_path):
    other = swembed.load(write_word_model(tmp_path / "other", seed=7))
    assert refused(saved, other) == (f"{saved}: built with another table ({model.path}), "
                                     f"not {other.path}; build the index again with this table (swembed index)")


def test_a_table_changed_in_memory_is_another_table(saved, model, tmp_path):
    changed = swembed.load(model.path)
    changed.table = np.asarray(changed.table) * 2
    assert "built with another table" in refused(saved, changed)
    SearchIndex.load(saved, swembed.load(model.path))  # the same table, loaded again: accepted


def test_a_truncated_array_is_refused(saved, model):
    vectors = saved / "vectors.npy"
    vectors.write_bytes(vectors.read_bytes()[:-100])
    assert refused(saved, model).startswith(f"{vectors}: unreadable or truncated .npy file (")


def test_arrays_of_the_wrong_shape_or_dtype_are_refused(saved, model):
    np.save(saved / "vectors.npy", np.zeros((50, model.dim + 1), dtype=np.float32))
    assert refused(saved, model) == (f"{saved / 'vectors.npy'}: expected shape (50, {model.dim}) float32, got "
                                     f"(50, {model.dim + 1}) float32; the index is damaged or another index's")
    np.save(saved / "vectors.npy", np.zeros((50, model.dim), dtype=np.float64))
    assert "expected shape (50, 16) float32, got (50, 16) float64" in refused(saved, model)
    np.save(saved / "vectors.npy", np.full((50, model.dim), np.nan, dtype=np.float32))
    assert refused(saved, model) == (f"{saved / 'vectors.npy'}: row 0 is not a sentence vector (NaN, infinite or "
                                     "beyond 1); the index is damaged")


def test_offsets_that_do_not_fit_their_bytes_are_refused(saved, model):
    offsets = np.load(saved / "text_offsets.npy")
    offsets[3] = offsets[-1] + 5
    np.save(saved / "text_offsets.npy", offsets)
    assert refused(saved, model).endswith("text_offsets.npy: offsets must rise from 0 to the "
                                          f"{len(np.load(saved / 'texts.npy'))} bytes of texts.npy; the index is "
                                          "damaged")


def test_a_pickle_is_never_loaded(saved, model, tmp_path):
    flag = tmp_path / "pwned"

    class Planted:
        def __reduce__(self):
            return exec, (f"open({str(flag)!r}, 'w').write('ran')",)

    np.save(saved / "ids.npy", np.array([Planted()], dtype=object), allow_pickle=True)
    message = refused(saved, model)
    assert not flag.exists()
    assert message.startswith(f"{saved / 'ids.npy'}: unreadable or truncated .npy file (") and "pickle" in message


def test_links_missing_files_and_a_foreign_index_json_are_refused(saved, model, tmp_path):
    (saved / "texts.npy").rename(tmp_path / "texts.npy")
    os.symlink(tmp_path / "texts.npy", saved / "texts.npy")
    assert refused(saved, model) == (f"{saved / 'texts.npy'}: not a regular file (a link, folder or special file); "
                                     "an index folder holds plain files")
    (saved / "texts.npy").unlink()
    assert refused(saved, model) == f"{saved}: texts.npy is missing; the index is incomplete"
    info = saved / "index.json"
    info.write_text(json.dumps({"format": "swe-static"}))
    assert refused(saved, model) == f"{info}: format is \"swe-static\", not 'swembed-index'; not a swembed index"
    info.write_text(json.dumps({"format": "swembed-index", "format_version": 1, "passages": 0}))
    assert refused(saved, model) == f"{info}: passages must be an integer of at least 1, got 0"
    info.write_text("{not json")
    assert refused(saved, model).startswith(f"{info}: not a readable index.json (")
    assert refused(tmp_path / "nowhere", model) == f"index folder not found: {tmp_path / 'nowhere'}"


# --- the command line -------------------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path) -> dict[str, Path]:
    folder = write_word_model(tmp_path / "model")
    model = swembed.load(folder)
    passages = random_texts(model, 30, seed=6)
    (tmp_path / "corpus.txt").write_text("\n".join(passages) + "\n", encoding="utf-8")
    (tmp_path / "queries.txt").write_text(f"{passages[4]}\n{passages[9]}\n", encoding="utf-8")
    return {"model": folder, "corpus": tmp_path / "corpus.txt", "queries": tmp_path / "queries.txt"}


def cli(*args) -> tuple[int, str, str]:
    result = run_cli(list(args), same_process=True)
    return result.returncode, result.stdout, result.stderr


def test_swembed_search_prints_ranked_hits(files):
    code, out, err = cli("search", files["model"], "--corpus", files["corpus"], "--queries", files["queries"],
                         "--top-k", "3")
    assert code == 0, err
    passages = files["corpus"].read_text(encoding="utf-8").splitlines()
    model = swembed.load(files["model"])
    lines = out.splitlines()
    assert lines[0] == f"query: {passages[4]}" and lines[4] == f"query: {passages[9]}" and len(lines) == 8
    for at, query in ((0, passages[4]), (4, passages[9])):
        for rank, (line, hit) in enumerate(zip(lines[at + 1 : at + 4], model.search(query, passages, 3)), 1):
            assert line == f"{rank:>4}  {hit.score:.4f}  {hit.index + 1}  {passages[hit.index]}"  # id: the line
    assert lines[1].startswith("   1  1.0000  5  ")


def test_swembed_index_then_search_it_as_json(files, tmp_path):
    code, _, err = cli("index", files["model"], "--corpus", files["corpus"], "--out", tmp_path / "ix")
    assert code == 0 and err.strip() == f"30 passages -> {tmp_path / 'ix'} (16 float32)"
    from_corpus = cli("search", files["model"], "--corpus", files["corpus"], "--query", "anything", "--top-k", "4",
                      "--json")
    from_index = cli("search", files["model"], "--index", tmp_path / "ix", "--query", "anything", "--top-k", "4",
                     "--json")
    assert from_corpus == from_index and from_index[0] == 0
    record = json.loads(from_index[1])
    passages = files["corpus"].read_text(encoding="utf-8").splitlines()
    assert record["query"] == "anything" and [h["rank"] for h in record["hits"]] == [1, 2, 3, 4]
    assert all(h["text"] == passages[h["index"]] and h["id"] == h["index"] + 1 for h in record["hits"])


def test_search_refusals_are_one_line(files, tmp_path):
    cases = [
        (["--corpus", files["corpus"], "--query", "x", "--top-k", "0"], "--top-k must be at least 1, got 0"),
        (["--index", tmp_path, "--query", "x", "--text-column", "body"],
         "--text-column reads a corpus file; a saved index holds its passages already"),
        (["--corpus", tmp_path / "missing.txt", "--query", "x"], f"[Errno 2] No such file or directory: "
                                                                   f"'{tmp_path / 'missing.txt'}'"),
    ]
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    cases.append((["--corpus", tmp_path / "empty.txt", "--query", "x"],
                  f"{tmp_path / 'empty.txt'}: no passages to search; the corpus is empty"))
    cases.append((["--corpus", files["corpus"], "--queries", tmp_path / "empty.txt"],
                  f"{tmp_path / 'empty.txt'}: no queries; the file is empty"))
    for args, message in cases:
        code, out, err = cli("search", files["model"], *args)
        assert (code, out, err.splitlines()) == (2, "", [f"swembed search: error: {message}"])
    other = write_word_model(tmp_path / "other", seed=3)
    assert cli("index", files["model"], "--corpus", files["corpus"], "--out", tmp_path / "ix")[0] == 0
    code, _, err = cli("search", other, "--index", tmp_path / "ix", "--query", "x")
    assert code == 2 and "built with another table" in err and len(err.splitlines()) == 1
    before = snapshot(tmp_path / "ix")
    code, _, err = cli("index", files["model"], "--corpus", files["corpus"], "--out", tmp_path / "ix")
    assert (code, err.strip()) == (2, f"swembed index: error: {tmp_path / 'ix'} already exists; pass --overwrite "
                                      "to replace it")
    assert snapshot(tmp_path / "ix") == before


# --- records: encode --text-column, search over records ----------------------------------------------------------


def record_bodies(model: swembed.StaticEmbedder) -> list[str | None]:
    """Five texts of the table's words: one null, one empty, one of two lines."""
    w = model.words
    return [f"{w[0]} {w[1]} {w[2]}", None, "", f"{w[3]} {w[4]}\n{w[5]}", f"{w[6]} {w[7]} {w[8]}"]


def write_records(tmp_path: Path, bodies: list[str | None]) -> dict[str, Path]:
    """The records ``bodies`` (a column ``body`` beside an ``id``) as .jsonl, .csv and .parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"id": i, "body": body} for i, body in enumerate(bodies)]
    jsonl = tmp_path / "records.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    csv = tmp_path / "records.csv"
    csv.write_text("id,body\n" + "".join(f'{row["id"]},"{row["body"] or ""}"\n' for row in rows), encoding="utf-8")
    parquet = tmp_path / "records.parquet"
    pq.write_table(pa.table({"id": list(range(5)), "body": bodies}), parquet)
    return {"jsonl": jsonl, "csv": csv, "parquet": parquet}


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_encode_reads_a_text_column(files, tmp_path, kind):
    model = swembed.load(files["model"])
    bodies = record_bodies(model)
    path = write_records(tmp_path, bodies)[kind]
    code, _, err = cli("encode", files["model"], "--input", path, "--text-column", "body", "--output",
                       tmp_path / "v.npy")
    assert code == 0 and err.strip() == f"5 texts -> {tmp_path / 'v.npy'} (5, 16)", err
    expected = model.encode([body or "" for body in bodies])
    assert np.abs(expected).sum(axis=1).astype(bool).tolist() == [True, False, False, True, True]
    np.testing.assert_array_equal(np.load(tmp_path / "v.npy"), expected)
    code, _, err = cli("encode", files["model"], "--input", path, "--text-column", "title", "--output",
                       tmp_path / "w.npy")
    columns = "its fields are ['id', 'body']" if kind == "jsonl" else "columns are ['id', 'body']"
    where = f"{path}:1: no 'title' field" if kind == "jsonl" else f"{path}: no column 'title'"
    assert (code, err.strip()) == (2, f"swembed encode: error: {where}; {columns}")
    assert not (tmp_path / "w.npy").exists()


def test_search_over_records_names_their_lines(files, tmp_path):
    bodies = record_bodies(swembed.load(files["model"]))
    paths = write_records(tmp_path, bodies)
    found = {}
    for kind, path in paths.items():
        code, out, err = cli("search", files["model"], "--corpus", path, "--text-column", "body", "--query",
                             bodies[4], "--top-k", "5", "--json")
        assert code == 0, err
        found[kind] = [(h["index"], h["id"], h["text"]) for h in json.loads(out)["hits"]]
    lines = {0: 1, 1: 2, 2: 3, 3: 4, 4: 6}  # jsonl: one record a line; csv: after its header, the two-line text
    assert [i for i, _, _ in found["jsonl"]] == [i for i, _, _ in found["csv"]] == [i for i, _, _ in found["parquet"]]
    assert all(line == i + 1 for i, line, _ in found["jsonl"])
    assert all(line == lines[i] + 1 for i, line, _ in found["csv"])
    assert all(row == i for i, row, _ in found["parquet"])
    assert found["parquet"][0][2] == bodies[4] and found["csv"][0][0] == 4


def test_a_text_column_of_a_lines_file_is_refused(files, tmp_path):
    code, _, err = cli("encode", files["model"], "--input", files["corpus"], "--text-column", "body", "--output",
                       tmp_path / "v.npy")
    assert (code, err.strip()) == (2, f"swembed encode: error: {files['corpus']}: a text column is read from .jsonl, "
                                      ".csv or .parquet records; this file is read as lines of text (leave out "
                                      "--text-column)")


def test_int8_rows_quantised_in_blocks_are_those_quantised_at_once(monkeypatch):
    """``quantise`` works a block of rows at a time (an index of millions of window vectors would need three
    float32 copies of them at once): the same int8 rows and scales, zero rows and an empty array included."""
    from swembed.runtime import index as index_module

    vectors = np.random.default_rng(5).normal(size=(50, 16)).astype(np.float32)
    vectors[7] = 0
    at_once = index_module.quantise(vectors, "int8")
    monkeypatch.setattr(index_module, "_QUANTISED_ROWS", 6)
    blocked = index_module.quantise(vectors, "int8")
    assert blocked[0].dtype == np.int8 and np.array_equal(blocked[0], at_once[0])
    assert np.array_equal(blocked[1], at_once[1]) and blocked[1][7] == 1 and not blocked[0][7].any()
    rows, scales = index_module.quantise(np.zeros((0, 16), dtype=np.float32), "int8")
    assert rows.shape == (0, 16) and rows.dtype == np.int8 and scales.shape == (0,)
