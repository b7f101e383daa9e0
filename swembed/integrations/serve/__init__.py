"""An OpenAI-compatible embedding server over one table (``swembed serve``; docs/serve.md), standard library only:
``make_server(folder, port=0).start()``, then ``POST /v1/embeddings``; ``.close()`` stops it."""
from swembed.integrations.serve.protocol import ServeLimits
from swembed.integrations.serve.server import EmbeddingServer, make_server, serve_until_stopped

__all__ = ["EmbeddingServer", "ServeLimits", "make_server", "serve_until_stopped"]
