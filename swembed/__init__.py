"""swembed: static word embeddings distilled from sentence-embedding teachers.

``swembed.load(path).encode(texts)`` needs numpy and tokenizers only; building (``swembed.pipeline``)
needs the ``build`` extra (torch, transformers, blingfire).
"""
from swembed.runtime import StaticEmbedder, WordTokenizer, load

__version__ = "0.1.0"
__all__ = ["StaticEmbedder", "WordTokenizer", "__version__", "load"]
