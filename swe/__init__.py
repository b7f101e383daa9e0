"""swe: static word embeddings distilled from sentence-embedding teachers.

``swe.load(path).encode(texts)`` needs numpy and tokenizers only; building (``swe.pipeline``)
needs the ``build`` extra (torch, transformers, blingfire).
"""
from swe.runtime import StaticEmbedder, WordTokenizer, load

__version__ = "0.1.0"
__all__ = ["StaticEmbedder", "WordTokenizer", "__version__", "load"]
