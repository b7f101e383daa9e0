"""``swembed serve``: an OpenAI-compatible embedding server over one table, on the standard library only; given a
search index made with that table (``swembed index``), it also answers ``POST /v1/search``.

One thread per connection (``ThreadingHTTPServer``, at most ``max_connections``), one batcher thread that encodes
the texts of concurrent requests together (``MicroBatcher``). Every answer is JSON; every refusal is a 4xx (or 503
when saturated) in OpenAI's error shape, and an unexpected exception is a 500 logged once.
"""
from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import cast
from urllib.parse import unquote, urlsplit

from swembed._version import __version__
from swembed.integrations.serve.batcher import BatcherClosed, MicroBatcher
from swembed.integrations.serve.protocol import (
    ApiError,
    ServedModel,
    ServeLimits,
    embedding_response,
    model_object,
    parse_embedding_request,
    parse_search_request,
    search_response,
)
from swembed.runtime import StaticEmbedder, load
from swembed.runtime.index import SearchIndex
from swembed.runtime.lexical import MODES
from swembed.runtime.search import Hit

log = logging.getLogger(__name__)
EMBEDDINGS, MODELS, HEALTH = ("/v1/embeddings", "/embeddings"), ("/v1/models", "/models"), "/health"
SEARCH = ("/v1/search", "/search")
ROUTES_TEXT = "POST /v1/embeddings, GET /v1/models, GET /health"
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
         b"Retry-After: 1\r\nContent-Length: %d\r\n\r\n%s")


def count_tokens(model: StaticEmbedder, texts: list[str]) -> int:
    """The words the table's tokenizer splits ``texts`` into (``usage`` in a response): punctuation is dropped, and
    an unknown word counts once, whatever rows its back-off reads."""
    if not model.tokenizers:
        return sum(len(model.tokenizer.words(text)) for text in texts)
    langs = model.language_identifier.predict(texts)
    return sum(len(model.tokenizers[lang].words(text)) for lang, text in zip(langs, texts))


class EmbeddingServer(ThreadingHTTPServer):
    """The server: ``start()`` serves on a thread (or ``serve_forever()`` on this one), ``close()`` stops it after
    the requests under way are answered. ``url`` is where it listens (port 0 picks a free port)."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 1024  # the listen backlog (socketserver's 5 resets connections of a burst of clients)

    def __init__(self, model: StaticEmbedder, address: tuple[str, int], name: str, limits: ServeLimits,
                 index: SearchIndex | None = None) -> None:
        self.model, self.limits, self.index = model, limits, index
        self.modes = () if index is None else MODES if index.lexical is not None else ("dense",)
        if index is not None and index.lexical is not None:  # made once here, not by two requests at once
            index.lexical.warm()
        ensemble = bool((model.config.get("ensemble") or {}).get("subspaces"))
        self.served = ServedModel(name, model.dim, truncatable=not ensemble)
        self.created = int(time.time())
        self.closing = False
        self._lock = threading.Condition()
        self._busy = 0  # embedding requests in flight
        self._connections: set[socket.socket] = set()
        self._serving = False
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, EmbeddingHandler)
        self.batcher = MicroBatcher(model.encode, limits.max_batch, limits.batch_wait_ms / 1000)
        self.searcher = None if index is None else MicroBatcher(lambda items: search_batch(index, items),
                                                                limits.max_batch, limits.batch_wait_ms / 1000)

    @property
    def url(self) -> str:
        host, port = self.socket.getsockname()[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._serving = True
        super().serve_forever(poll_interval)

    def start(self) -> EmbeddingServer:
        """Serve on a daemon thread; returns the server."""
        self._serving = True
        threading.Thread(target=self.serve_forever, name="swembed-serve", daemon=True).start()
        return self

    def close(self, grace_s: float = 10.0) -> None:
        """Stop accepting, answer the requests under way (``grace_s`` at most), close idle connections, stop the
        batcher. Safe to call twice, and from a signal's unwinding of ``serve_forever``."""
        if self.closing:
            return
        self.closing = True
        if self._serving:
            self.shutdown()  # returns at once when serve_forever has already ended
        self.server_close()
        deadline = time.monotonic() + grace_s
        with self._lock:
            while self._busy and time.monotonic() < deadline:
                self._lock.wait(deadline - time.monotonic())
            idle = list(self._connections)
        for connection in idle:
            try:
                connection.shutdown(socket.SHUT_RDWR)  # its thread's read returns and the thread ends
            except OSError:
                pass
        self.batcher.close(grace_s)
        if self.searcher is not None:
            self.searcher.close(grace_s)

    def __enter__(self) -> EmbeddingServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def enter(self) -> bool:
        """Count one more embedding request in flight; False (and nothing counted) past ``max_in_flight``."""
        with self._lock:
            if self._busy >= self.limits.max_in_flight:
                return False
            self._busy += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._busy -= 1
            self._lock.notify_all()

    def process_request(self, request, client_address) -> None:
        with self._lock:
            full = len(self._connections) >= self.limits.max_connections
            if not full:
                self._connections.add(request)
        if full:  # answered here, on the accepting thread, without reading: no thread is started for it
            self._refuse_connection(request)
            return
        super().process_request(request, client_address)

    def _refuse_connection(self, request: socket.socket) -> None:
        body = json.dumps(ApiError(503, f"the server is busy: {self.limits.max_connections} connections are open "
                                   "(--max-connections); retry shortly", code="server_busy").body()).encode()
        try:
            request.settimeout(0.5)
            request.sendall(_BUSY % (len(body), body))
        except OSError:
            pass
        self.shutdown_request(request)

    def shutdown_request(self, request) -> None:
        with self._lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address) -> None:
        """A connection that broke (reset, timed out) is no error of the server's; anything else is logged once."""
        import sys

        if isinstance(sys.exc_info()[1], OSError):
            log.debug("connection from %s closed: %s", client_address, sys.exc_info()[1])
            return
        log.exception("internal error on a connection from %s", client_address)


class EmbeddingHandler(BaseHTTPRequestHandler):
    """One connection: requests one after another (HTTP/1.1 keep-alive), each answered with JSON."""

    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.1"  # an unparsable request line is answered with a status line and headers too
    disable_nagle_algorithm = True  # headers and body are two writes: Nagle + delayed ACK would add 40 ms to each
    server_version = f"swembed/{__version__}"
    sys_version = ""
    server: EmbeddingServer

    def setup(self) -> None:
        self._body_read = False
        super().setup()
        self.connection.settimeout(self.server.limits.timeout_s)

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self._dispatch()

    do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET  # noqa: N815

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        log.debug("%s %s", self.address_string(), format % args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a malformed request line or header, an unknown method) as JSON errors."""
        if code == 501:  # a method http.server has no do_ method for
            code, message = 405, f"the method {getattr(self, 'command', '')!r} is not allowed"
        self.close_connection = True
        self._send_json(code, ApiError(code, message or explain or "bad request").body())

    def _dispatch(self) -> None:
        self._body_read = False
        try:
            self._route()
        except ApiError as exc:
            self._send_json(exc.status, exc.body(), exc.headers)
        except BatcherClosed as exc:
            self._send_json(503, ApiError(503, str(exc), code="shutting_down").body())
        except OSError as exc:  # the connection broke or timed out mid-request
            log.debug("%s: connection closed (%s)", self.address_string(), exc)
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - the boundary: the server keeps serving
            log.exception("internal error answering %s %s", self.command, self.path)
            self._send_json(500, ApiError(500, f"internal error ({type(exc).__name__}); the server's log has the "
                                          "traceback").body())

    def _route(self) -> None:
        path = unquote(urlsplit(self.path).path)
        method = "GET" if self.command == "HEAD" else self.command
        prefix = next((p + "/" for p in MODELS if path.startswith(p + "/")), None)
        if path in EMBEDDINGS:
            allowed, action = "POST", self._embeddings
        elif path in SEARCH:
            allowed, action = "POST", self._search
        elif path in MODELS:
            allowed, action = "GET", self._models
        elif prefix:
            allowed, action = "GET", lambda: self._model(path[len(prefix):])
        elif path == HEALTH:
            allowed, action = "GET", self._health
        else:
            routes = ROUTES_TEXT + (", POST /v1/search" if self.server.index is not None else "")
            raise ApiError(404, f"no route {path!r}; this server answers {routes}", code="not_found")
        if method != allowed:
            raise ApiError(405, f"{self.command} is not allowed on {path}; use {allowed}", code="method_not_allowed",
                           headers={"Allow": allowed + (", HEAD" if allowed == "GET" else "")})
        action()

    def _health(self) -> None:
        server = self.server
        ready = not server.closing
        search = {} if server.index is None else {"search": {"passages": len(server.index), "modes": server.modes}}
        self._send_json(200 if ready else 503, {"status": "ok" if ready else "shutting down", "ready": ready,
                                                "model": server.served.name, "dim": server.served.dim, **search})

    def _models(self) -> None:
        self._send_json(200, {"object": "list", "data": [model_object(self.server.served, self.server.created)]})

    def _model(self, name: str) -> None:
        if name != self.server.served.name:
            raise ApiError(404, f"the model {name!r} does not exist; this server serves {self.server.served.name!r}",
                           "model", "model_not_found")
        self._send_json(200, model_object(self.server.served, self.server.created))

    def _embeddings(self) -> None:
        server = self.server
        with self._in_flight():
            request = parse_embedding_request(self._read_body(), server.limits, server.served)
            vectors = server.batcher.encode(request.texts)
            tokens = count_tokens(server.model, request.texts)
            self._send_json(200, embedding_response(vectors, request, server.served.name, tokens))

    def _search(self) -> None:
        """The index's ``top_k`` passages for each query, searched by the search batcher together with the queries
        of concurrent requests (one pass over the index's vectors for all of them)."""
        server, index = self.server, self.server.index
        if index is None or server.searcher is None:
            raise ApiError(404, "this server has no search index: start it with --index FOLDER (a folder swembed "
                           "index made with this table)", code="not_found")
        with self._in_flight():
            request = parse_search_request(self._read_body(), server.limits, server.served, server.modes)
            hits = server.searcher.encode([(query, request.mode, request.top_k, request.alpha)
                                           for query in request.queries])
            self._send_json(200, search_response(request, hits, [index.hit_texts(found) for found in hits],
                                                 server.served.name))

    @contextmanager
    def _in_flight(self) -> Iterator[None]:
        """Count the request in flight while it is read and answered; 503 at once past ``max_in_flight``."""
        server = self.server
        if server.closing:
            raise ApiError(503, "the server is shutting down", code="shutting_down")
        if not server.enter():
            raise ApiError(503, f"the server is busy: {server.limits.max_in_flight} requests are in flight "
                           "(--max-in-flight); retry shortly", code="server_busy", headers={"Retry-After": "1"})
        try:
            yield
        finally:
            server.leave()

    def _read_body(self) -> bytes:
        """The request body, read only when its Content-Length is given and within ``max_body_bytes``."""
        limit = self.server.limits.max_body_bytes
        if "Transfer-Encoding" in self.headers:
            raise ApiError(411, "a chunked request body is not read; send the body with a Content-Length")
        lengths = self.headers.get_all("Content-Length") or []
        if not lengths:
            raise ApiError(411, "a POST needs a Content-Length header")
        value = lengths[0].strip()
        if len(set(lengths)) > 1 or not (value.isascii() and value.isdigit()):
            raise ApiError(400, f"the Content-Length header is not one whole number: {', '.join(lengths)[:80]!r}")
        if int(value) > limit:
            raise ApiError(413, f"the request body is {int(value):,} bytes; this server takes at most {limit:,} "
                           "(--max-body-bytes): send fewer texts per request")
        body = self.rfile.read(int(value))
        if len(body) < int(value):
            raise ConnectionError(f"the client sent {len(body)} of {value} body bytes, then closed")
        self._body_read = True
        return body

    def _unread_body(self) -> bool:
        headers = getattr(self, "headers", None)
        if headers is None or self._body_read:
            return False
        return "Transfer-Encoding" in headers or headers.get("Content-Length", "0").strip() not in ("", "0")

    def _send_json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        """``payload`` as the response; the connection closes after it when the request's body was left unread
        (it cannot be skipped), when the server is closing, or when http.server says so."""
        body = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
        if self._unread_body() or self.server.closing:
            self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def search_batch(index: SearchIndex, items: list[tuple[str, str, int, float | None]]) -> list[list[Hit]]:
    """Each item's (query, mode, top_k, alpha) hits: one ``index.search`` for the queries of each (mode, alpha),
    at their largest ``top_k``, each query given the first ``top_k`` of its hits (the ranking is a total order:
    score, then row)."""
    found: list[list[Hit]] = [[] for _ in items]
    groups: dict[tuple[str, float | None], list[int]] = {}
    for i, (_, mode, _, alpha) in enumerate(items):
        groups.setdefault((mode, alpha), []).append(i)
    for (mode, alpha), rows in groups.items():
        hits = cast(list[list[Hit]], index.search([items[i][0] for i in rows], max(items[i][2] for i in rows), mode,
                                                  alpha))
        for i, mine in zip(rows, hits):
            found[i] = mine[: items[i][2]]
    return found


def make_server(model: StaticEmbedder | str | Path, host: str = "127.0.0.1", port: int = 8000,
                model_name: str | None = None, limits: ServeLimits | None = None,
                index: SearchIndex | str | Path | None = None) -> EmbeddingServer:
    """An embedding server over ``model`` (a table folder, or a loaded ``StaticEmbedder``), bound and ready:
    ``.start()`` it on a thread or ``.serve_forever()``; ``.close()`` it. Port 0 picks a free port (see ``.url``).
    ``model_name`` (default: the folder's name) is what clients give as ``model``. ``index``: a search index folder
    (or a loaded ``SearchIndex``) made with this table, searched by ``POST /v1/search``."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"--port must be between 0 and 65535, got {port!r}")
    if not isinstance(model, StaticEmbedder):
        model = load(model)
    name = model_name if model_name is not None else (model.path.name if model.path else "swembed")
    if not name or name != name.strip() or "/" in name:
        raise ValueError(f"--model-name must be a non-empty name without '/' or surrounding spaces, got {name!r}")
    if index is not None and not isinstance(index, SearchIndex):
        index = SearchIndex.load(index, model)  # refused in one line unless this table made it
    elif index is not None:
        index.attach(model)
    return EmbeddingServer(model, (host, port), name, limits or ServeLimits(), index)


def serve_until_stopped(server: EmbeddingServer) -> str:
    """Serve on this thread until Ctrl-C or SIGTERM (which ``swembed.runtime.outputs.terminate_raises`` turns into
    an exception), then close gracefully; returns what stopped it."""
    stopped = "Ctrl-C"
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    except SystemExit:
        stopped = "SIGTERM"
    finally:
        server.close()
    return stopped
