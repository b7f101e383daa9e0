"""Post-training stage, shrinkage: after training, each word row seen in n sentences becomes ``(n v + k u) /
(n + k)``, ``u`` being what the inference tokeniser gives that word were it unknown (its trained pieces, weighted
as unknown words are), so a word known from one or two sentences leans on its composition (``[shrinkage] k``).
Runs inside the distill stage, on its best table (``SHRINKAGE``, registered in ``swembed.pipeline.build``)."""
from __future__ import annotations

import numpy as np

from swembed.pipeline.compose import Layout, blend_by_contexts
from swembed.pipeline.config import ShrinkageConfig
from swembed.pipeline.stage import PostTraining, Trained
from swembed.runtime.settings import stage_key
from swembed.runtime.tokenizer import WordTokenizer


def shrink_to_backoff(table: np.ndarray, layout: Layout, tokenizers: dict[str, WordTokenizer], contexts: np.ndarray,
                      k: float) -> int:
    """In place: each word row seen in n > 0 sentences becomes ``(n v + k u) / (n + k)``, ``u`` its back-off
    composition. Returns the rows moved."""
    words = table[: len(contexts)]
    composed = np.zeros_like(words)
    found = np.zeros(len(contexts), dtype=bool)
    spans = {tuple(span): lang for lang, span in layout.languages.items()}  # merged languages share one span
    for (start, end), lang in spans.items():
        for row in range(start, end):
            rows, weights = tokenizers[lang].backoff(layout.labels[row])
            if rows:
                composed[row] = np.asarray(weights, dtype=table.dtype) @ table[rows]
                found[row] = True
    return blend_by_contexts(words, composed, contexts, k, found)


def _refine(table: np.ndarray, config: ShrinkageConfig, trained: Trained) -> dict:
    return {"shrunk words": shrink_to_backoff(table, trained.layout, trained.tokenizers, trained.contexts, config.k)}


SHRINKAGE = PostTraining("shrinkage", enabled=lambda config: bool(config.k),
                         identity=stage_key,  # {"shrinkage": k}: its [distill] key before the section
                         refine=_refine)
