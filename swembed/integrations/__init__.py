"""Bridges to other tools (mteb, sentence-transformers, model2vec); each imports its tool lazily."""
