"""The torch-free runtime: word tokeniser with OOV back-off, the model folder format, StaticEmbedder."""
from swe.runtime.embedder import StaticEmbedder, load
from swe.runtime.tokenizer import WordTokenizer

__all__ = ["StaticEmbedder", "WordTokenizer", "load"]
