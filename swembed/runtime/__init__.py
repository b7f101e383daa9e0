"""The torch-free runtime: word tokeniser with OOV back-off, the model folder format, StaticEmbedder, search."""
from swembed.runtime.embedder import StaticEmbedder, load
from swembed.runtime.index import SearchIndex, SearchIndexError
from swembed.runtime.search import Hit
from swembed.runtime.tokenizer import WordTokenizer

__all__ = ["Hit", "SearchIndex", "SearchIndexError", "StaticEmbedder", "WordTokenizer", "load"]
