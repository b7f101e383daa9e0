"""Query/document asymmetry inside the lookup (issue 82): a table's per-row query weights (``query_weights.npy``,
named by config.json's ``kind_weights``), ``encode(kind=...)`` and what passes it (search, the index, the CLI, the
mteb wrapper, exports), the loader's checks, and the fit (``swembed.pipeline.query_weights``) with its cached stage.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_WORDS, run_cli, snapshot, write_tiny_model

import swembed
from swembed.runtime.folder import KIND_WEIGHTS, update_config, write_model_folder

TEXTS = ["the cat sat on the mat", "a good dog", "goodness the cat", "", "unknownword", "The MAT!"]


def with_query_weights(folder: Path, weights: np.ndarray) -> Path:
    """``folder`` (a table) given ``weights`` as its query weights, as the build's stage adds them."""
    np.save(folder / "query_weights.npy", np.asarray(weights))
    update_config(folder, {KIND_WEIGHTS: {"query": "query_weights.npy"}})
    return folder


def rng_weights(rows: int, seed: int = 1) -> np.ndarray:
    return np.exp(np.random.default_rng(seed).normal(size=rows)).astype(np.float32)


def test_a_table_without_kind_weights_encodes_every_kind_as_today(tiny_model):
    model = swembed.load(tiny_model)
    plain = model.encode(TEXTS)
    for kind in ("query", "document"):
        assert np.array_equal(model.encode(TEXTS, kind=kind), plain)
    assert model.kind_weights == {}


def test_query_weights_multiply_each_rows_weight_in_the_mean(tiny_model):
    before = swembed.load(tiny_model)
    plain, digest = before.encode(TEXTS), before.digest()
    weights = rng_weights(len(TINY_WORDS))
    model = swembed.load(with_query_weights(tiny_model, weights))
    assert np.array_equal(model.encode(TEXTS), plain) and np.array_equal(model.encode(TEXTS, kind="document"), plain)
    queries = model.encode(TEXTS, kind="query")
    table = np.asarray(model.table, dtype=np.float64)
    for text, vector in zip(TEXTS, queries):
        rows, row_weights = model.tokenizer.rows(text)
        expected = (np.asarray(row_weights) * weights[rows].astype(np.float64)) @ table[rows]
        norm = np.linalg.norm(expected)
        np.testing.assert_allclose(vector, expected / norm if norm else expected, atol=1e-6)
    assert not np.allclose(queries[0], plain[0])  # the weights change a query of several words
    assert model.digest() != digest


def test_search_encodes_queries_as_queries_and_passages_as_documents(tiny_model):
    model = swembed.load(with_query_weights(tiny_model, rng_weights(len(TINY_WORDS))))
    queries, corpus = ["the cat", "a good mat", "dog on the mat"], TEXTS[:3] + ["the dog sat", "a cat on a mat"]
    expected = model.encode(queries, kind="query") @ model.encode(corpus, kind="document").T
    np.testing.assert_allclose(model.similarity(queries, corpus, "query", "document"), expected, atol=1e-6)
    for hits, row in zip(model.search(queries, corpus, top_k=5), expected):
        assert [h.index for h in hits] == sorted(range(len(corpus)), key=lambda i: (-row[i], i))
        np.testing.assert_allclose([h.score for h in hits], sorted(row, reverse=True), atol=1e-6)
    indexed = model.index(corpus).search(queries, top_k=5)
    assert [[h.index for h in hits] for hits in indexed] == [[h.index for h in hits]
                                                             for hits in model.search(queries, corpus, top_k=5)]


def test_an_unknown_kind_is_refused(tiny_model):
    with pytest.raises(ValueError, match="kind must be one of query, document or None, got 'queries'"):
        swembed.load(tiny_model).encode(TEXTS, kind="queries")


def test_swembed_encode_kind_query(tiny_model, tmp_path):
    model = swembed.load(with_query_weights(tiny_model, rng_weights(len(TINY_WORDS))))
    (tmp_path / "in.txt").write_text("\n".join(TEXTS[:3]) + "\n", encoding="utf-8")
    for kind in ("query", None):
        out = tmp_path / f"{kind}.npy"
        result = run_cli(["encode", tiny_model, "--input", tmp_path / "in.txt", "--output", out,
                          *(["--kind", kind] if kind else [])], same_process=True)
        assert result.returncode == 0, result.stderr
        np.testing.assert_array_equal(np.load(out), model.encode(TEXTS[:3], kind=kind))
    result = run_cli(["encode", tiny_model, "--input", tmp_path / "in.txt", "--output", tmp_path / "x.npy",
                      "--kind", "passage"], same_process=True)
    assert result.returncode == 2 and "invalid choice: 'passage'" in result.stderr


def test_save_and_npy_export_keep_the_query_weights(tiny_model, tmp_path):
    from swembed.integrations.formats import kinds_left_out

    model = swembed.load(with_query_weights(tiny_model, rng_weights(len(TINY_WORDS))))
    model.save(tmp_path / "saved")
    model_files = lambda folder: {k: v for k, v in snapshot(folder).items() if not k.startswith(".")}  # noqa: E731
    assert model_files(tmp_path / "saved") == model_files(tiny_model)  # the marker aside, byte for byte
    result = run_cli(["export", tiny_model, "--format", "npy", "--dtype", "int8", "--out", tmp_path / "int8"],
                     same_process=True)
    assert result.returncode == 0, result.stderr
    exported = swembed.load(tmp_path / "int8")
    np.testing.assert_array_equal(exported.kind_weights["query"], model.kind_weights["query"])
    assert np.min(np.sum(exported.encode(TEXTS, kind="query") * model.encode(TEXTS, kind="query"), axis=1)[:3]) > 0.99
    assert kinds_left_out(tiny_model, "npy") is None
    assert "the document side" in kinds_left_out(tiny_model, "st") and "query weights are left out" in kinds_left_out(
        tiny_model, "model2vec")
    assert kinds_left_out(write_tiny_model(tmp_path / "plain"), "st") is None


def test_the_mteb_wrapper_passes_the_texts_role_as_kind(tiny_model):
    pytest.importorskip("mteb")
    from mteb.types import PromptType

    from swembed.integrations.mteb import encode_kind, mteb_encoder

    assert [encode_kind(t) for t in (PromptType.query, PromptType.document, None, "query")] == [
        "query", "document", None, "query"]
    model = swembed.load(with_query_weights(tiny_model, rng_weights(len(TINY_WORDS))))
    wrapper = mteb_encoder(model)
    batches = [{"text": TEXTS[:2]}, {"text": TEXTS[2:3]}]
    for prompt_type, kind in ((PromptType.query, "query"), (PromptType.document, "document"), (None, None)):
        got = wrapper.encode(batches, task_metadata=None, hf_split="test", hf_subset="default",
                             prompt_type=prompt_type)
        np.testing.assert_array_equal(got, model.encode(TEXTS[:3], kind=kind))
    no_kinds = _NoKinds(model)  # an encoder without kinds: called as before
    mteb_encoder(no_kinds).encode(batches, task_metadata=None, hf_split="test", hf_subset="default",
                                  prompt_type=PromptType.query)
    assert no_kinds.calls == 1


class _NoKinds:
    """Any encoder with ``encode(texts)`` only (a teacher, model2vec): the wrapper must not pass it a kind."""

    def __init__(self, model) -> None:
        self.model, self.calls, self.dim = model, 0, model.dim

    def encode(self, texts):
        self.calls += 1
        return self.model.encode(texts)


# --- the fit and its stage -------------------------------------------------------------------------------------

TOPICS = [f"topic{i}" for i in range(60)]
FILLERS = ["what", "is", "about", "find", "me"]  # in every query, in no passage


def pair_table(folder: Path, dim: int = 16) -> Path:
    """A table of topic words, filler words and passage words (random rows, no tokenizer)."""
    words = TOPICS + FILLERS + [f"word{i}" for i in range(40)]
    table = np.random.default_rng(0).normal(size=(len(words), dim)).astype(np.float32)
    return write_model_folder(folder, table, words, {"tokenization": {"oov_backoff": "none"}}, None)


def make_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """Queries of one topic word amid every filler word; passages of the topic word and three random words."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        topic = TOPICS[rng.integers(len(TOPICS))]
        filler = " ".join(rng.permutation(FILLERS)[:4])
        pairs.append((f"{filler} {topic}", f"{topic} " + " ".join(f"word{i}" for i in rng.integers(40, size=3))))
    return pairs


def accuracy(queries: np.ndarray, passages: np.ndarray) -> float:
    return float(np.mean(np.argmax(queries @ passages.T, axis=1) == np.arange(len(queries))))


def test_the_fit_weighs_down_words_every_query_has_and_finds_more_passages(tmp_path):
    pytest.importorskip("torch")
    from swembed.pipeline.config import QueryWeightsConfig
    from swembed.pipeline.query_weights import fit_query_weights, query_weighted

    model = swembed.load(pair_table(tmp_path / "table"))
    settings = QueryWeightsConfig(epochs=6, batch_size=32, negatives=2)
    weights, stats = fit_query_weights(model, make_pairs(600, seed=0), settings)
    assert weights.dtype == np.float32 and weights.shape == (model.rows,)
    rows = {word: i for i, word in enumerate(model.labels)}
    filler, topic = weights[[rows[w] for w in FILLERS]], weights[[rows[w] for w in TOPICS]]
    assert filler.max() < 1 < np.median(topic)
    assert np.all(weights[[rows[f"word{i}"] for i in range(40)]] == 1)  # never in a query: never moved
    assert stats["rows moved"] == len(TOPICS) + len(FILLERS)
    held_out = make_pairs(200, seed=1)
    passages = model.encode([p for _, p in held_out])
    queries = [q for q, _ in held_out]
    assert accuracy(query_weighted(model, queries, weights), passages) > accuracy(model.encode(queries), passages)


def test_the_stage_fits_once_and_the_folder_then_encodes_queries_with_the_weights(tmp_path):
    pytest.importorskip("torch")
    from swembed.pipeline.config import QueryWeightsConfig
    from swembed.pipeline.query_weights import fit_query_weights, query_weighted
    from swembed.pipeline.row_weights import add_row_weights, run_row_weights
    from swembed.pipeline.stage import StageContext

    folder = pair_table(tmp_path / "table")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{q}\t{p}\n" for q, p in make_pairs(300, seed=0)), encoding="utf-8")
    config = QueryWeightsConfig(files=[str(pairs)], epochs=2, batch_size=32, negatives=2)
    ctx = StageContext(tmp_path / "work", quiet=True)

    def run_query_weights(ctx, config, folder):
        return run_row_weights(ctx, "query_weights", "query", config, folder, [], [], fit_query_weights)

    stage = run_query_weights(ctx, config, folder)
    assert not stage.cached and stage.stats["pairs"] == 300
    assert run_query_weights(ctx, config, folder).cached
    add_row_weights(folder, "query", stage)
    assert json.loads((folder / "config.json").read_text())[KIND_WEIGHTS] == {"query": "query_weights.npy"}
    model = swembed.load(folder)
    weights = np.load(stage.path / "query_weights.npy")
    np.testing.assert_array_equal(model.kind_weights["query"], weights)
    queries = [q for q, _ in make_pairs(20, seed=2)]
    np.testing.assert_allclose(model.encode(queries, kind="query"), query_weighted(swembed.load(folder), queries,
                                                                                     weights), atol=1e-6)
    other = run_query_weights(ctx, QueryWeightsConfig(files=[str(pairs)], epochs=2, batch_size=32, negatives=2,
                                                      tau=0.1), folder)
    assert not other.cached  # a setting is in the stage's key


def test_a_recipe_section_is_read_and_checked(tmp_path):
    from swembed.pipeline.config import BuildConfig, load_recipe

    recipe = tmp_path / "r.toml"
    recipe.write_text('[query_weights]\nfiles = ["pairs.tsv"]\ntau = 0\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"tau must be above 0"):
        load_recipe(recipe).validate()
    assert BuildConfig().query_weights.files == []


def test_node_encodes_queries_as_python(tmp_path):
    """The conformance file of a table with query weights holds each text's query vector; Node gives the same."""
    from test_js_runtime import JS, need, write_small_table

    node = need("node")
    table = write_small_table(tmp_path / "table")
    rows = len((table / "vocab.txt").read_text(encoding="utf-8").splitlines())
    with_query_weights(table, rng_weights(rows))
    exported, record = tmp_path / "int8", tmp_path / "int8.conformance.json"
    for args in (["export", table, "--format", "npy", "--dtype", "int8", "--out", exported],
                 ["conformance", exported, "--out", record]):
        result = run_cli(args, same_process=True)
        assert result.returncode == 0, result.stderr
    items = json.loads(record.read_text(encoding="utf-8"))["texts"]
    assert all("query_vector" in item for item in items) and not any("document_vector" in item for item in items)
    assert any(item["query_vector"] != item["vector"] for item in items)
    result = subprocess.run([node, str(JS / "bin" / "check-conformance.mjs"), str(exported), str(record)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["failures"] == [] and report["texts"] > 10


def test_shrink_keeps_each_kept_rows_query_weight(tmp_path):
    from test_js_runtime import write_small_table

    from swembed.pipeline.shrink_table import ShrinkConfig, shrink

    table = write_small_table(tmp_path / "table", buckets=512)
    rows = len((table / "vocab.txt").read_text(encoding="utf-8").splitlines())
    source = swembed.load(with_query_weights(table, rng_weights(rows)))
    shrink(table, tmp_path / "small", ShrinkConfig(words=40))
    small = swembed.load(tmp_path / "small")
    weights, before = small.kind_weights["query"], source.kind_weights["query"]
    assert len(weights) == small.rows
    assert all(weights[row] == before[source.tokenizer.vocab[word]] for word, row in small.tokenizer.vocab.items())
    (start, end), (old_start, _) = small.config["grams"]["rows"], source.config["grams"]["rows"]
    np.testing.assert_array_equal(weights[start:end], before[old_start : old_start + end - start])
    shrink(table, tmp_path / "regrammed", ShrinkConfig(words=40, gram_buckets=64))
    regrammed = swembed.load(tmp_path / "regrammed")
    start, end = regrammed.config["grams"]["rows"]
    assert np.all(regrammed.kind_weights["query"][start:end] == 1)  # new gram rows weigh 1
