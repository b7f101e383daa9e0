"""Load anything we evaluate or benchmark into an ``encode(list[str]) -> ndarray`` function.

Kinds: a swembed model folder, ``model2vec:<folder>``, ``wordllama`` (its shipped l2_supercat 256 table,
offline), or a teacher (short name, sentence-transformers folder, hub id). Each kind imports only
what it needs.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

Encoder = Callable[[list[str]], np.ndarray]


def load_encoder(spec: str, device: str = "auto") -> tuple[str, Encoder, list[str]]:
    """(kind, encode, languages of a multilingual swembed table) for ``spec``."""
    from swembed._extras import require

    if spec.startswith("model2vec:"):
        require("peers", "model2vec")
        from model2vec import StaticModel

        model = StaticModel.from_pretrained(spec.split(":", 1)[1])
        return "model2vec", lambda texts: model.encode(texts, use_multiprocessing=False), []
    if spec == "wordllama":
        require("peers", "wordllama")
        import wordllama
        from wordllama import WordLlama

        model = WordLlama.load(disable_download=True, cache_dir=Path(wordllama.__file__).parent)
        return "wordllama", model.embed, []
    config = Path(spec) / "config.json"
    folder = Path(spec) if config.is_file() and json.loads(config.read_text()).get("format") == "swe-static" else \
        _table_on_hub(spec)
    if folder is not None:
        from swembed.runtime.embedder import load

        table = load(folder)
        return "swembed", table.encode, table.languages
    require("build", "torch", "transformers")
    from swembed.teachers import load_teacher

    return "teacher", load_teacher(spec, device=device).encode, []


def _table_on_hub(spec: str) -> Path | None:
    """The download of a swembed table that a Hub repo id names (not a registered teacher's), else None: ``spec``
    is then read as a teacher (a sentence-transformers repo, say), which reports its own errors."""
    from swembed.runtime.hub import HubError, download_table, looks_like_repo_id
    from swembed.teachers.registry import TEACHERS

    if Path(spec).exists() or not looks_like_repo_id(spec) or any(t.hub_id == spec for t in TEACHERS.values()):
        return None
    try:
        return download_table(spec)
    except HubError:
        return None
