"""The torch-free runtime: word tokeniser with OOV back-off, the model folder format, StaticEmbedder."""
from swembed.runtime.embedder import StaticEmbedder, load
from swembed.runtime.tokenizer import WordTokenizer

__all__ = ["StaticEmbedder", "WordTokenizer", "load"]
