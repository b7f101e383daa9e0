"""The OpenAI embeddings protocol as ``swembed serve`` speaks it: what a request may hold, the response, and the
error shape. Every refusal is an ``ApiError``: an HTTP status and OpenAI's ``{"error": {...}}`` body."""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, fields

import numpy as np

from swembed.runtime.lexical import MODES
from swembed.runtime.ranges import Range, check_ranges
from swembed.runtime.search import Hit
from swembed.runtime.searchfile import hit_record

REQUEST_FIELDS = ("input", "model", "dimensions", "encoding_format", "user")
SEARCH_FIELDS = ("query", "model", "top_k", "mode", "alpha")
ENCODINGS = ("float", "base64")
TOKEN_IDS_REFUSAL = ("'input' holds token ids (integers); a word table reads text, and token ids of another "
                     "tokenizer cannot be read back faithfully: send the texts themselves (LangChain: "
                     "OpenAIEmbeddings(..., check_embedding_ctx_length=False))")
_SURROGATES = ("\ud800", "\udfff")


# what each limit is (swembed serve's help and docs/serve.md say the same)
LIMIT_HELP = {
    "max_batch": "texts per encode call (queries per search): concurrent requests are joined up to this (a larger "
                 "request is answered alone)",
    "batch_wait_ms": "how long the batcher waits for more requests after the first of a batch (0: take only what "
                     "is queued)",
    "max_inputs": "texts per request (OpenAI's limit; a search: queries per request); more: 400",
    "max_top_k": "hits a search request may ask for per query (top_k); more: 400",
    "max_input_chars": "characters per text; longer: 400 (never cut silently)",
    "max_body_bytes": "request body, refused (413) from its Content-Length before it is read",
    "max_in_flight": "requests (embeddings or searches) being read, queued or answered at once; past it: 503 at "
                     "once",
    "max_connections": "open connections (a thread each); past it a new one gets 503 and is closed",
    "timeout_s": "seconds a connection may sit idle or take to send a request before it is closed",
}


@dataclass(frozen=True)
class ServeLimits:
    """What one server takes at most (``LIMIT_HELP``); past a limit a request is refused with a 4xx or a 503, never
    queued without bound."""

    max_batch: int = 1024
    batch_wait_ms: float = 0.0
    max_inputs: int = 2048
    max_top_k: int = 1000
    max_input_chars: int = 100_000
    max_body_bytes: int = 8 * 1024 * 1024
    max_in_flight: int = 128
    max_connections: int = 256
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            integer = field.type == "int"
            if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
                raise ValueError(f"{flag_of(field.name)} must be {'an integer' if integer else 'a number'}, "
                                 f"got {value!r}")
        check_ranges(SERVE_RANGES, self, flag_of)


SERVE_RANGES = {
    "max_batch": Range(1, 1_000_000), "batch_wait_ms": Range(0, 1000), "max_inputs": Range(1, 1_000_000),
    "max_top_k": Range(1, 1_000_000), "max_input_chars": Range(1), "max_body_bytes": Range(2),
    "max_in_flight": Range(1, 100_000), "max_connections": Range(1, 100_000), "timeout_s": Range(0, 86_400, above=True),
}


def flag_of(field: str) -> str:
    """The ``swembed serve`` flag of a ServeLimits field."""
    return "--" + field.removesuffix("_s").replace("_", "-")


class ApiError(Exception):
    """A refused request: ``status`` and OpenAI's error body; ``headers`` to send with it (Allow, Retry-After)."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = dict(headers or {})

    def body(self) -> dict:
        kind = "server_error" if self.status >= 500 else "invalid_request_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class EmbeddingRequest:
    texts: list[str]
    dimensions: int | None
    encoding_format: str


@dataclass(frozen=True)
class ServedModel:
    """What the server says about its table: its name, dimension, and whether leading dims may be kept
    (``dimensions``: not for an ensemble, whose dims are its members' blocks)."""

    name: str
    dim: int
    truncatable: bool = True


def json_type(value: object) -> str:
    """JSON's name for the type of a parsed value."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def parse_json(body: bytes) -> object:
    try:
        return json.loads(body)
    except UnicodeDecodeError:
        raise ApiError(400, "the request body is not UTF-8 text; send JSON") from None
    except RecursionError:
        raise ApiError(400, "the request body is JSON nested too deeply to read") from None
    except ValueError as exc:
        raise ApiError(400, f"the request body is not valid JSON ({exc})") from None


def parse_embedding_request(body: bytes, limits: ServeLimits, model: ServedModel) -> EmbeddingRequest:
    """The texts and options of a ``POST /v1/embeddings`` body, or an ``ApiError`` naming the first problem."""
    data, texts = _request_object(body, REQUEST_FIELDS, "input", limits)
    _check_model(data.get("model"), model)
    _check_string(data, "user")
    encoding = _check_string(data, "encoding_format") or "float"
    if encoding not in ENCODINGS:
        raise ApiError(400, f"'encoding_format' must be 'float' or 'base64', got {encoding!r}", "encoding_format")
    return EmbeddingRequest(texts, parse_dimensions(data.get("dimensions"), model), encoding)


@dataclass(frozen=True)
class SearchRequest:
    queries: list[str]
    top_k: int
    mode: str
    alpha: float | None


def parse_search_request(body: bytes, limits: ServeLimits, model: ServedModel, modes: tuple[str, ...]
                         ) -> SearchRequest:
    """The queries and options of a ``POST /v1/search`` body, or an ``ApiError`` naming the first problem.
    ``modes``: what the index can rank by (dense only when it holds no lexical postings); the default mode is
    hybrid where it can, else dense."""
    data, queries = _request_object(body, SEARCH_FIELDS, "query", limits)
    _check_model(data.get("model"), model)
    top_k = data.get("top_k", min(10, limits.max_top_k))
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise ApiError(400, f"'top_k' must be an integer, got {json_type(top_k)}", "top_k")
    if not 1 <= top_k <= limits.max_top_k:
        raise ApiError(400, f"'top_k' must be from 1 to {limits.max_top_k:,} (--max-top-k), got {top_k}", "top_k")
    mode = _check_string(data, "mode") or ("hybrid" if "hybrid" in modes else "dense")
    if mode not in MODES:
        raise ApiError(400, f"'mode' must be one of {', '.join(MODES)}, got {mode!r}", "mode")
    if mode not in modes:
        raise ApiError(400, f"'mode' {mode!r} needs the index's lexical postings, which this index does not hold "
                       "(made with swembed index --dense-only, or before they existed): use 'dense'", "mode")
    alpha = data.get("alpha")
    if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1):
        raise ApiError(400, f"'alpha' must be a number from 0 to 1, got {json.dumps(alpha)}", "alpha")
    if alpha is not None and mode != "hybrid":
        raise ApiError(400, f"'alpha' weighs the cosine against BM25 in mode 'hybrid'; this search is {mode!r}",
                       "alpha")
    return SearchRequest(queries, top_k, mode, alpha)


def search_response(request: SearchRequest, hits: list[list[Hit]], texts: list[list[str | None]],
                    model_name: str) -> dict:
    """One ``search.result`` per query, in order, its hits best first as ``swembed search --json`` writes them
    (a hybrid or lexical hit: its cosine and BM25 score beside its score)."""
    return {"object": "list", "model": model_name, "mode": request.mode,
            "data": [{"object": "search.result", "index": i, "query": query,
                      "hits": [hit_record(rank, hit, text) for rank, (hit, text) in enumerate(zip(found, shown), 1)]}
                     for i, (query, found, shown) in enumerate(zip(request.queries, hits, texts))]}


def _request_object(body: bytes, known: tuple[str, ...], texts: str, limits: ServeLimits) -> tuple[dict, list[str]]:
    """The body as a JSON object holding only ``known`` keys, and its texts (the key ``texts``) checked."""
    data = parse_json(body)
    if not isinstance(data, dict):
        raise ApiError(400, f"the request body must be a JSON object, got {json_type(data)}")
    unknown = [key for key in data if key not in known]
    if unknown:
        raise ApiError(400, f"unrecognized request argument supplied: {unknown[0]!r} (this route reads "
                       f"{', '.join(known)})", param=unknown[0])
    if texts not in data:
        raise ApiError(400, f"'{texts}' is required: a string or an array of strings", param=texts)
    return data, parse_input(data[texts], limits, texts)


def _check_string(data: dict, key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ApiError(400, f"'{key}' must be a string, got {json_type(value)}", param=key)
    return value


def _check_model(name: object, model: ServedModel) -> None:
    if name is None:
        return
    if not isinstance(name, str):
        raise ApiError(400, f"'model' must be a string, got {json_type(name)}", param="model")
    if name != model.name:
        raise ApiError(404, f"the model {name!r} does not exist; this server serves {model.name!r}", "model",
                       "model_not_found")


def parse_input(value: object, limits: ServeLimits, param: str = "input") -> list[str]:
    """``input`` (a search's ``query``: ``param``) as a list of non-empty texts within the limits."""
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list):
        raise ApiError(400, f"'{param}' must be a string or an array of strings, got {json_type(value)}", param)
    if not texts:
        raise ApiError(400, f"'{param}' is an empty array; give at least one text", param)
    if len(texts) > limits.max_inputs:
        raise ApiError(400, f"'{param}' holds {len(texts):,} texts; this server takes at most "
                       f"{limits.max_inputs:,} per request (--max-inputs): send them in several requests", param)
    if not all(type(text) is str for text in texts):
        if param == "input" and all(isinstance(item, (int, list)) and not isinstance(item, bool) for item in texts):
            raise ApiError(400, TOKEN_IDS_REFUSAL, "input", "token_ids_not_supported")
        first = next(i for i, text in enumerate(texts) if type(text) is not str)
        raise ApiError(400, f"'{param}[{first}]' must be a string, got {json_type(texts[first])}", param)
    for i, text in enumerate(texts):
        if not text:
            raise ApiError(400, f"'{param}[{i}]' is an empty string; every text needs at least one character", param)
        if len(text) > limits.max_input_chars:
            raise ApiError(400, f"'{param}[{i}]' has {len(text):,} characters; this server takes at most "
                           f"{limits.max_input_chars:,} per text (--max-input-chars)", param)
    return [_readable(text) for text in texts]


def _readable(text: str) -> str:
    """``text`` with each lone surrogate (JSON's ``"\\ud800"`` decodes to one) as U+FFFD, as ``encode`` reads it."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if _SURROGATES[0] <= c <= _SURROGATES[1] else c for c in text)
    return text


def parse_dimensions(value: object, model: ServedModel) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"'dimensions' must be an integer, got {json_type(value)}", "dimensions")
    if not model.truncatable:
        raise ApiError(400, "'dimensions' is not served for this table: it is an ensemble, whose dimensions are "
                       "its members' blocks, not one ordered basis", "dimensions")
    if not 1 <= value <= model.dim:
        raise ApiError(400, f"'dimensions' must be between 1 and {model.dim} (the table's dimension), got {value}",
                       "dimensions")
    return value


def leading_dims(vectors: np.ndarray, dimensions: int) -> np.ndarray:
    """The first ``dimensions`` columns, each row L2-normalised again (a zero row stays zero)."""
    kept = np.array(vectors[:, :dimensions], dtype=np.float32)
    norms = np.linalg.norm(kept, axis=1, keepdims=True)
    return np.divide(kept, norms, out=kept, where=norms > 0)


def embedding_response(vectors: np.ndarray, request: EmbeddingRequest, model_name: str, tokens: int) -> dict:
    """OpenAI's response to ``request``: one ``embedding`` object per text, in order."""
    if request.dimensions is not None and request.dimensions < vectors.shape[1]:
        vectors = leading_dims(vectors, request.dimensions)
    rows: list
    if request.encoding_format == "base64":
        raw = np.ascontiguousarray(vectors, dtype="<f4")
        rows = [base64.b64encode(row.tobytes()).decode("ascii") for row in raw]
    else:
        rows = vectors.tolist()
    return {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": row}
                                       for i, row in enumerate(rows)],
            "model": model_name, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def model_object(model: ServedModel, created: int) -> dict:
    """The model as ``GET /v1/models`` lists it."""
    return {"id": model.name, "object": "model", "created": created, "owned_by": "swembed"}
