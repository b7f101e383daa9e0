"""Issue 78 (5): ``swembed serve``, the OpenAI-compatible embedding server. Real clients (the ``openai`` package,
LangChain's OpenAIEmbeddings) get exactly ``model.encode``'s vectors; bad, huge, fuzzed and concurrent requests each
get a JSON answer (2xx or 4xx, 503 when saturated), never a crash or a traceback. Servers run in-process on
127.0.0.1, port 0, over a tiny model folder."""
from __future__ import annotations

import base64
import http.client
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli, write_tiny_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import swembed
from swembed.integrations.serve import ServeLimits, make_server
from swembed.integrations.serve.batcher import MicroBatcher

DIM = 16
TEXTS = ["the cat sat on the mat", "a good dog", "goodness, the dog!", "cat", "the mat sat on a cat", "???"]
LOG = "swembed.integrations.serve"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("serve") / "tiny", dim=DIM)


@pytest.fixture(scope="module")
def server(folder):
    limits = ServeLimits(max_inputs=64, max_input_chars=1000, max_body_bytes=64 * 1024, timeout_s=5)
    with make_server(folder, port=0, limits=limits) as running:
        yield running.start()


@pytest.fixture(scope="module")
def model(folder):
    return swembed.load(folder)


def leading(vectors: np.ndarray, k: int) -> np.ndarray:
    kept = vectors[:, :k]
    norms = np.linalg.norm(kept, axis=1, keepdims=True)
    return kept / np.where(norms > 0, norms, 1)  # a text with no known word: the zero vector


def vectors_of(data) -> np.ndarray:
    """The embeddings of a response's data, base64 strings decoded as OpenAI's client does."""
    return np.array([np.frombuffer(base64.b64decode(e), "<f4") if isinstance(e, str) else e
                     for e in (d.embedding if hasattr(d, "embedding") else d["embedding"] for d in data)])


def request(server, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    """(status, headers, parsed JSON body) of one request on a fresh connection."""
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read() or b"null")
    finally:
        connection.close()


def embed(server, payload) -> tuple[int, dict]:
    status, _, body = request(server, "POST", "/v1/embeddings", json.dumps(payload).encode())
    return status, body


def raw_exchange(server, data: bytes) -> bytes:
    """Send ``data`` as is and read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def assert_json_error(status: int, body: object, expected: int | None = None) -> None:
    assert 400 <= status < 500 or status == 503, (status, body)
    assert expected is None or status == expected, (status, body)
    assert isinstance(body, dict) and set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"} and body["error"]["message"], body


# --- real clients ---------------------------------------------------------------------------------------------


def test_the_openai_client_gets_the_vectors_of_encode(server, model):
    from openai import OpenAI

    client = OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    expected = model.encode(TEXTS)
    # None: the client's default, which asks for base64 and decodes it with numpy; "base64" given: it is left to us
    for encoding in ("float", "base64", None):
        options = {"encoding_format": encoding} if encoding else {}
        one = client.embeddings.create(input=TEXTS[0], model="tiny", **options)
        assert len(one.data) == 1 and one.data[0].index == 0 and one.model == "tiny"
        np.testing.assert_allclose(vectors_of(one.data), expected[:1], atol=1e-6)
        many = client.embeddings.create(input=TEXTS, model="tiny", **options)
        assert [d.index for d in many.data] == list(range(len(TEXTS)))
        np.testing.assert_allclose(vectors_of(many.data), expected, atol=1e-6)
        short = client.embeddings.create(input=TEXTS, model="tiny", dimensions=5, **options)
        np.testing.assert_allclose(vectors_of(short.data), leading(expected, 5), atol=1e-6)
    assert many.usage.prompt_tokens == many.usage.total_tokens == sum(
        len(model.tokenizer.words(text)) for text in TEXTS) == 6 + 3 + 3 + 1 + 6 + 0  # words, no punctuation
    assert [m.id for m in client.models.list().data] == ["tiny"]


def test_langchain_openai_embeddings_get_the_vectors_of_encode(server, model):
    from langchain_openai import OpenAIEmbeddings

    # check_embedding_ctx_length=False: send the texts (the default sends tiktoken token ids, refused below)
    embeddings = OpenAIEmbeddings(model="tiny", base_url=server.url + "/v1", api_key="x",
                                  check_embedding_ctx_length=False, max_retries=0)
    np.testing.assert_allclose(embeddings.embed_documents(TEXTS), model.encode(TEXTS), atol=1e-6)
    np.testing.assert_allclose(embeddings.embed_query("a good dog"), model.encode("a good dog")[0], atol=1e-6)
    short = OpenAIEmbeddings(model="tiny", base_url=server.url + "/v1", api_key="x", dimensions=3,
                             check_embedding_ctx_length=False, max_retries=0, chunk_size=4)
    np.testing.assert_allclose(short.embed_documents(TEXTS), leading(model.encode(TEXTS), 3), atol=1e-6)
    # what LangChain sends by default (check_embedding_ctx_length=True): token ids, one array per text
    status, body = embed(server, {"input": [[1820, 8415], [64, 1695, 5679]], "model": "tiny"})
    assert_json_error(status, body, 400)
    assert "check_embedding_ctx_length=False" in body["error"]["message"]
    assert body["error"]["code"] == "token_ids_not_supported"


# --- the protocol's answers ---------------------------------------------------------------------------------------


def test_health_models_and_every_refusal_in_openais_shape(server):
    status, _, body = request(server, "GET", "/health")
    assert status == 200 and body == {"status": "ok", "ready": True, "model": "tiny", "dim": DIM}
    status, _, body = request(server, "GET", "/v1/models")
    assert status == 200 and body["object"] == "list" and [m["id"] for m in body["data"]] == ["tiny"]
    assert request(server, "GET", "/v1/models/tiny")[0] == 200
    cases = [  # (payload, status, words of the message)
        ({"input": []}, 400, "empty array"),
        ({"input": ""}, 400, "empty string"),
        ({"input": ["a", 5]}, 400, "'input[1]' must be a string"),
        ({"input": {"a": 1}}, 400, "must be a string or an array"),
        ({"model": "tiny"}, 400, "'input' is required"),
        ({"input": "cat", "model": "gpt"}, 404, "does not exist"),
        ({"input": "cat", "dimensions": 0}, 400, "between 1 and 16"),
        ({"input": "cat", "dimensions": 17}, 400, "between 1 and 16"),
        ({"input": "cat", "dimensions": 2.0}, 400, "must be an integer"),
        ({"input": "cat", "encoding_format": "int8"}, 400, "'float' or 'base64'"),
        ({"input": "cat", "dimension": 4}, 400, "unrecognized request argument supplied: 'dimension'"),
        ({"input": ["cat"] * 65}, 400, "at most 64 per request (--max-inputs)"),
        ({"input": "cat " * 300}, 400, "at most 1,000 per text (--max-input-chars)"),
        ([1, 2], 400, "must be a JSON object"),
    ]
    for payload, expected, words in cases:
        status, body = embed(server, payload)
        assert_json_error(status, body, expected)
        assert words in body["error"]["message"], (payload, body)
    status, headers, body = request(server, "GET", "/v1/embeddings")
    assert_json_error(status, body, 405)
    assert headers["Allow"] == "POST"
    assert_json_error(*request(server, "GET", "/v2/nothing")[::2], 404)
    assert_json_error(*request(server, "POST", "/v1/embeddings", b"{not json")[::2], 400)


# --- search (issue 82: the hybrid score behind the server's search route, the dense score beside it) ----------

PASSAGES = ["the cat sat on the mat", "a good dog barks", "goodness, the dog!", "the mat is red", "cats and dogs",
            "a red cat on a good mat"]


@pytest.fixture(scope="module")
def search_server(folder, model, tmp_path_factory):
    saved = model.index(PASSAGES, [f"p{i}" for i in range(len(PASSAGES))]).save(
        tmp_path_factory.mktemp("search") / "index")
    limits = ServeLimits(max_inputs=8, max_top_k=5, timeout_s=5)
    with make_server(folder, port=0, limits=limits, index=saved) as running:
        yield running.start()


def search(server, payload) -> tuple[int, dict]:
    status, _, body = request(server, "POST", "/v1/search", json.dumps(payload).encode())
    return status, body


def test_the_search_route_answers_index_search_in_every_mode(search_server, model):
    """``POST /v1/search`` ranks as ``SearchIndex.search`` on the same index (hybrid by default), each hit with its
    text, and for hybrid and lexical its cosine and BM25 score beside; ``swembed search --json``'s hit records."""
    index = search_server.index
    queries = ["a cat on the mat", "good dogs"]
    for mode in (None, "dense", "lexical", "hybrid"):
        payload = {"query": queries, "top_k": 3, **({"mode": mode} if mode else {}), "model": "tiny"}
        status, body = search(search_server, payload)
        assert status == 200, body
        expected = index.search(queries, 3, mode or "hybrid")
        assert body["object"] == "list" and body["model"] == "tiny" and body["mode"] == (mode or "hybrid")
        assert [r["query"] for r in body["data"]] == queries and [r["index"] for r in body["data"]] == [0, 1]
        for result, hits in zip(body["data"], expected):
            assert [h["id"] for h in result["hits"]] == [hit.id for hit in hits]
            assert [h["text"] for h in result["hits"]] == [PASSAGES[hit.index] for hit in hits]
            assert [h["score"] for h in result["hits"]] == pytest.approx([hit.score for hit in hits], abs=1e-6)
            assert all(("dense" in h) == ((mode or "hybrid") != "dense") for h in result["hits"])
    status, body = search(search_server, {"query": "the red mat", "top_k": 2, "mode": "hybrid", "alpha": 1.0})
    cosines = [h["dense"] for h in body["data"][0]["hits"]]
    assert status == 200 and [h["score"] for h in body["data"][0]["hits"]] == pytest.approx(
        [hit.score for hit in index.search("the red mat", 2, "hybrid", 1.0)], abs=1e-6)
    assert cosines == pytest.approx([float(hit.dense) for hit in index.search("the red mat", 2, "hybrid", 1.0)],
                                    abs=1e-6)
    status, _, health = request(search_server, "GET", "/health")
    assert health["search"] == {"passages": len(PASSAGES), "modes": ["dense", "hybrid", "lexical"]}


def test_concurrent_searches_each_get_their_own_hits(search_server):
    """Concurrent search requests are joined into batches (one pass over the vectors for all their queries), and
    each request gets its own queries' hits."""
    queries = [f"{a} {b}" for a in ("the cat", "a dog", "red mat", "good") for b in ("on a mat", "barks", "cats")]
    expected = {q: search(search_server, {"query": q, "top_k": 3})[1]["data"][0]["hits"] for q in queries}
    got: dict[str, list] = {}

    def client(mine: list[str]) -> None:
        for query in mine * 5:
            got.setdefault(query, []).append(search(search_server, {"query": query, "top_k": 3})[1]["data"][0]["hits"])

    threads = [threading.Thread(target=client, args=(queries[i::6],)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got.keys() == expected.keys()
    for query, answers in got.items():  # joined into batches: the same passages; scores to float32 rounding
        assert len(answers) == 5 and all([h["id"] for h in hits] == [h["id"] for h in expected[query]]
                                         for hits in answers)
        for hits in answers:
            assert [h["score"] for h in hits] == pytest.approx([h["score"] for h in expected[query]], abs=1e-5)


def test_search_refusals_in_openais_shape(search_server, server, folder, model, tmp_path):
    cases = [  # (payload, words of the message, param)
        ({"top_k": 3}, "'query' is required", "query"),
        ({"query": []}, "empty array", "query"),
        ({"query": ["cat", 5]}, "'query[1]' must be a string", "query"),
        ({"query": ["cat"] * 9}, "at most 8 per request (--max-inputs)", "query"),
        ({"query": "cat", "top_k": 0}, "'top_k' must be from 1 to 5 (--max-top-k), got 0", "top_k"),
        ({"query": "cat", "top_k": 6}, "'top_k' must be from 1 to 5", "top_k"),
        ({"query": "cat", "top_k": "3"}, "'top_k' must be an integer, got a string", "top_k"),
        ({"query": "cat", "top_k": True}, "'top_k' must be an integer, got a boolean", "top_k"),
        ({"query": "cat", "mode": "bm25"}, "'mode' must be one of dense, hybrid, lexical, got 'bm25'", "mode"),
        ({"query": "cat", "alpha": 1.5}, "'alpha' must be a number from 0 to 1, got 1.5", "alpha"),
        ({"query": "cat", "alpha": "0.5"}, "'alpha' must be a number from 0 to 1, got \"0.5\"", "alpha"),
        ({"query": "cat", "k": 3}, "unrecognized request argument supplied: 'k'", "k"),
        ({"query": "cat", "mode": "dense", "alpha": 0.5}, "in mode 'hybrid'; this search is 'dense'", "alpha"),
    ]
    for payload, words, param in cases:
        status, body = search(search_server, payload)
        assert_json_error(status, body, 400)
        assert words in body["error"]["message"] and body["error"]["param"] == param, (payload, body)
    status, body = search(search_server, {"query": "cat", "model": "gpt"})
    assert_json_error(status, body, 404)
    status, headers, body = request(search_server, "GET", "/v1/search")
    assert_json_error(status, body, 405)
    assert headers["Allow"] == "POST"
    status, body = search(server, {"query": "cat"})  # a server started without --index
    assert_json_error(status, body, 404)
    assert body["error"]["message"].startswith("this server has no search index: start it with --index FOLDER")
    assert "POST /v1/search" not in request(server, "GET", "/v2/nothing")[2]["error"]["message"]
    assert "POST /v1/search" in request(search_server, "GET", "/v2/nothing")[2]["error"]["message"]
    dense_only = model.index(PASSAGES, lexical=False)
    with make_server(folder, port=0, index=dense_only) as running:
        running.start()
        status, body = search(running, {"query": "cat"})  # the default mode where no postings are: dense
        assert status == 200 and body["mode"] == "dense"
        status, body = search(running, {"query": "cat", "mode": "lexical"})
        assert_json_error(status, body, 400)
        assert "needs the index's lexical postings, which this index does not hold" in body["error"]["message"]


def test_serve_refuses_an_index_of_another_table_in_one_line(tmp_path, folder):
    other = write_tiny_model(tmp_path / "other", tokenizer=False, dim=DIM)  # another table: no sub-word back-off
    saved = swembed.load(other).index(PASSAGES).save(tmp_path / "index")
    result = run_cli(["serve", folder, "--index", saved, "--port", "0"], same_process=True)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "built with another table" in result.stderr
    result = run_cli(["serve", folder, "--index", tmp_path / "missing", "--port", "0"], same_process=True)
    assert (result.returncode, result.stderr.strip()) == (
        2, f"swembed serve: error: index folder not found: {tmp_path / 'missing'}")


def test_bodies_over_the_limit_chunked_or_without_a_length_are_refused_unread(server):
    huge = b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n{\"input\": \"cat\""
    answer = raw_exchange(server, huge)  # refused from the header: the server closes without reading 10 GB
    assert answer.startswith(b"HTTP/1.1 413 ") and b"Connection: close" in answer
    assert b"--max-body-bytes" in answer.split(b"\r\n\r\n", 1)[1]
    chunked = b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    assert raw_exchange(server, chunked).startswith(b"HTTP/1.1 411 ")
    assert raw_exchange(server, b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 411 ")
    bad_length = b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\nConnection: close\r\n\r\n"
    assert raw_exchange(server, bad_length).startswith(b"HTTP/1.1 400 ")
    answer = raw_exchange(server, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n")  # a TLS hello
    assert answer.startswith(b"HTTP/1.1 400 ") and json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]


def test_a_client_that_stops_mid_body_is_dropped_after_the_timeout_and_others_are_served(folder):
    limits = ServeLimits(timeout_s=0.5)
    with make_server(folder, port=0, limits=limits).start() as server:
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10) as sock:
            sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"input\"")
            assert embed(server, {"input": "cat"})[0] == 200  # served meanwhile
            assert sock.recv(100) == b""  # closed after the timeout, no answer to half a request
        assert embed(server, {"input": "cat"})[0] == 200


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4),
                           max_leaves=12)
FIELDS = st.sampled_from(["input", "model", "dimensions", "encoding_format", "user", "extra"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(FIELDS, JSON_VALUES | st.lists(st.text(max_size=30), min_size=1, max_size=5),
                            max_size=5))
def test_fuzzed_json_bodies_get_json_answers(server, model, body):
    status, answer = embed(server, body)
    if status == 200:
        np.testing.assert_allclose([d["embedding"] for d in answer["data"]],
                                   model.encode([body["input"]] if isinstance(body["input"], str) else body["input"]),
                                   atol=1e-6)
    else:
        assert_json_error(status, answer)


def test_fuzzed_bytes_methods_and_routes_never_crash_the_server(server, model, capfd, caplog):
    rng = np.random.default_rng(0)
    port = server.server_address[1]
    methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW", "HEAD"]
    paths = ["/v1/embeddings", "/embeddings", "/health", "/v1/models", "/v1/models/x", "/", "/%ff%00",
             "/v1/" + "a" * 3000]
    bodies = [b"\xff\xfe\x00garbage", b"[" * 20000, b'{"input": "' + b"\xc3\x28" * 10 + b'"}', b"{}" * 1000,
              json.dumps({"input": ["cat"] * 10_000}).encode(), b'{"input": "\\ud800 cat"}', b"", b"null",
              b'{"input": "cat", "dimensions": 1' + b"0" * 5000 + b"}", bytes(rng.integers(0, 256, 3000, np.uint8))]
    caplog.set_level(logging.DEBUG, logger=LOG)
    for _ in range(120):
        method, path = methods[rng.integers(len(methods))], paths[rng.integers(len(paths))]
        body = bodies[rng.integers(len(bodies))]
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request(method, path, body=body if method != "GET" else None)
        response = connection.getresponse()
        data = response.read()
        connection.close()
        if method == "HEAD":
            assert data == b"" and response.status in (200, 404, 405), response.status
            continue
        answer = json.loads(data)
        if response.status != 200:
            assert_json_error(response.status, answer)
    answers = [embed(server, {"input": ["a"] * n})[1] for n in (10_000, 64)]  # over --max-inputs, then at it
    assert "at most 64 per request" in answers[0]["error"]["message"] and len(answers[1]["data"]) == 64
    status, body = embed(server, {"input": "\ud800 cat"})
    np.testing.assert_allclose(body["data"][0]["embedding"], model.encode("\ud800 cat")[0], atol=1e-6)
    assert request(server, "GET", "/health")[0] == 200
    assert "Traceback" not in capfd.readouterr().err
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_concurrent_requests_each_get_their_own_vectors(server, model):
    rng = np.random.default_rng(1)
    words = ["the", "cat", "sat", "on", "mat", "good", "dog", "a", "goodness", "zebra"]
    requests = [[" ".join(rng.choice(words, rng.integers(1, 8))) for _ in range(rng.integers(1, 20))]
                for _ in range(64)]
    answers: dict[int, tuple[int, dict]] = {}

    def send(i: int) -> None:
        answers[i] = embed(server, {"input": requests[i], "model": "tiny", "encoding_format": "base64"})

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i, texts in enumerate(requests):
        status, body = answers[i]
        assert status == 200, body
        np.testing.assert_allclose(vectors_of(body["data"]), model.encode(texts), atol=1e-6)
    assert request(server, "GET", "/health")[0] == 200


# --- batching, saturation, shutdown -------------------------------------------------------------------------------


def test_the_batcher_joins_queued_requests_and_hands_each_its_rows():
    """While one batch encodes, the requests that arrive queue up; the next encode call takes them all (up to
    max_batch texts), and each request gets the rows of its own texts."""
    calls: list[list[str]] = []
    first_call_may_finish = threading.Event()

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        if len(calls) == 1:
            first_call_may_finish.wait(10)
        return np.array([[float(text.split()[0]), len(text)] for text in texts])

    batcher = MicroBatcher(encode, max_batch=10, wait_s=0)
    jobs = [[f"{i} {'x' * j}" for j in range(n)] for i, n in enumerate([1, 3, 4, 2, 5, 12])]
    results: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, batcher.encode(jobs[i])))
               for i in range(len(jobs))]
    threads[0].start()
    while not calls:
        time.sleep(0.01)
    for thread in threads[1:]:
        thread.start()
    while batcher._jobs.qsize() < len(jobs) - 1:
        time.sleep(0.01)
    first_call_may_finish.set()
    for thread in threads:
        thread.join(10)
    batcher.close()
    assert [len(call) for call in calls] == [1, 3 + 4 + 2, 5, 12]  # joined up to 10 texts; 12 alone
    for i, texts in enumerate(jobs):
        np.testing.assert_array_equal(results[i], [[i, len(text)] for text in texts])


def hold_a_slot(server) -> socket.socket:
    """A connection whose request (an embedding of 'cat') has sent its headers and half its body."""
    sock = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10)
    sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n{\"input\":")
    return sock


def finish(sock: socket.socket) -> bytes:
    """Send the rest of the held request; its whole response (headers, blank line, Content-Length bytes)."""
    sock.sendall(b' "cat"}')
    answer = b""
    while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < int(
            re.search(rb"Content-Length: (\d+)", answer).group(1)):
        chunk = sock.recv(65536)
        assert chunk, answer
        answer += chunk
    return answer


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_past_max_in_flight_and_max_connections_a_request_gets_503_at_once(folder):
    with make_server(folder, port=0, limits=ServeLimits(max_in_flight=2, max_connections=3)).start() as server:
        held = [hold_a_slot(server) for _ in range(2)]
        wait_for(lambda: server._busy == 2, "two requests in flight")
        status, headers, body = request(server, "POST", "/v1/embeddings", b'{"input": "cat"}')
        assert_json_error(status, body, 503)
        assert "--max-in-flight" in body["error"]["message"] and headers["Retry-After"] == "1"
        # the refused request's connection closes on its own thread: until then it still counts, and the idle
        # connection below would be refused in its place
        wait_for(lambda: len(server._connections) == 2, "the refused request's connection closed")
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10) as idle:
            wait_for(lambda: len(server._connections) == 3, "three connections open")
            answer = raw_exchange(server, b"")  # the fourth connection: answered and closed without a thread
            assert answer.startswith(b"HTTP/1.1 503 ") and b"--max-connections" in answer
            idle.close()
        for sock in held:
            assert finish(sock).startswith(b"HTTP/1.1 200 ")
            sock.close()
        assert embed(server, {"input": "cat"})[0] == 200


def test_close_answers_the_requests_under_way_then_stops(folder, model):
    server = make_server(folder, port=0).start()
    sock = hold_a_slot(server)
    wait_for(lambda: server._busy == 1, "one request in flight")
    closer = threading.Thread(target=server.close)
    closer.start()
    wait_for(lambda: server.closing, "closing")
    answer = finish(sock)
    sock.close()
    closer.join(10)
    assert not closer.is_alive()
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 ") and b"Connection: close" in head
    np.testing.assert_allclose(json.loads(body)["data"][0]["embedding"], model.encode("cat")[0], atol=1e-6)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=2)


def test_an_unexpected_failure_is_a_500_logged_once_and_the_server_goes_on(folder, caplog, capfd):
    damaged = swembed.load(folder, mmap=False)
    table = np.array(damaged.table)
    table[damaged.tokenizer.vocab["dog"]] = np.nan  # damaged after its load check: encode refuses what reads it
    damaged.table = table
    caplog.set_level(logging.INFO, logger=LOG)
    with make_server(damaged, port=0).start() as server:
        status, body = embed(server, {"input": ["a good dog", "the cat"]})
        assert status == 500 and "internal error" in body["error"]["message"]
        assert body["error"]["type"] == "server_error"
        assert embed(server, {"input": ["the cat"]})[0] == 200
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "dog" in str(errors[0].exc_info[1])
    assert "Traceback" not in capfd.readouterr().err  # logged through logging, which pytest captures


# --- the command --------------------------------------------------------------------------------------------------


def test_serve_with_a_bad_model_folder_or_limit_fails_in_one_line(tmp_path, folder):
    result = run_cli(["serve", tmp_path / "missing"])
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"swembed serve: error: model folder not found: {tmp_path / 'missing'}"]
    (tmp_path / "empty").mkdir()
    result = run_cli(["serve", tmp_path / "empty"])
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    result = run_cli(["serve", folder, "--max-batch", "0", "--port", "0"], same_process=True)
    assert (result.returncode, result.stderr.strip()) == (2, "swembed serve: error: --max-batch must be between 1 "
                                                             "and 1e+06, got 0")
    result = run_cli(["serve", folder, "--port", "70000"], same_process=True)
    assert (result.returncode, result.stderr.strip()) == (2, "swembed serve: error: --port must be between 0 and "
                                                             "65535, got 70000")


def test_serve_stops_gracefully_on_sigterm(folder):
    process = subprocess.Popen([sys.executable, "-m", "swembed.cli", "serve", str(folder), "--port", "0"],
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = process.stderr.readline()
        url = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert url, line
        connection = http.client.HTTPConnection("127.0.0.1", int(url.group(1)), timeout=10)
        connection.request("GET", "/health")
        assert connection.getresponse().status == 200
        connection.close()
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 0 and rest.strip() == "swembed serve: stopped (SIGTERM); requests under way were " \
                                                       "answered", rest


def test_the_docs_rows_name_tests_of_this_file():
    text = (Path(__file__).resolve().parents[1] / "docs" / "what-happens-when.md").read_text(encoding="utf-8")
    named = set(re.findall(r"tests/test_serve\.py::(\w+)", text))
    assert named and named <= {name for name in globals() if name.startswith("test_")}
