"""swembed: static word embeddings distilled from sentence-embedding teachers.

``swembed.load(path).encode(texts)`` needs numpy and tokenizers only; ``swembed.build(...)`` (and the
``swembed.pipeline`` it runs, imported on first call) needs the ``build`` extra (torch, transformers, blingfire).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from swembed._version import __version__
from swembed.runtime import Hit, SearchIndex, SearchIndexError, StaticEmbedder, WordTokenizer, load
from swembed.runtime import hub as _hub

if TYPE_CHECKING:  # the pipeline is imported on the first build, not with the package
    from swembed.pipeline.config import BuildConfig

__all__ = ["Hit", "SearchIndex", "SearchIndexError", "StaticEmbedder", "WordTokenizer", "__version__", "build",
           "load"]


def build(teacher: str | None = None, corpus: str | Path | list | dict | None = None, dim: int | None = None,
          out: str | Path | None = None, recipe: str | Path | BuildConfig | None = None, *, overwrite: bool = False,
          force: bool = False, quiet: bool = True, **overrides) -> StaticEmbedder:
    """Distil a static table from a teacher, as ``swembed build`` does, and return it.

    ``teacher`` (default minilm), ``corpus`` (files, folders, globs, ``hf:`` or ``builtin:wikitext2``, the
    default; or a dict of ``[corpus]`` settings) and ``dim`` (default 256) override the ``recipe`` (a TOML file,
    as ``--recipe``, or a ``BuildConfig``), as do ``overrides``: a section with a dict
    (``distill={"max_steps": 500}``), a top-level setting (``seed=1``) or a field only one section has
    (``max_steps=500``). ``out``: the model folder to write (an existing one only with ``overwrite``; its stage
    cache is ``<out>.work``); None builds in a temporary folder that is removed once the model is in memory
    (``save`` it to keep it). Bad settings raise ``ValueError`` before any work. See docs/api.md.
    """
    from swembed._extras import require

    require("build", "torch", "transformers", "blingfire", "tqdm")
    from swembed.pipeline.api import build as run

    return run(teacher, corpus, dim, out, recipe, overwrite=overwrite, force=force, quiet=quiet, **overrides)


def _model_card(table: Path, **settings) -> str:
    """The card maker of ``swembed.runtime.hub.model_card`` (which the runtime cannot import: a higher floor):
    ``swembed.integrations.card`` with the data sources' licences of ``swembed.pipeline.public_data``."""
    from swembed.integrations.card import model_card
    from swembed.pipeline.public_data import source_licences

    return model_card(table, licences=source_licences, **settings)


_hub.install_card_maker(_model_card)
