"""Stage 5d, paragraphs: runs of consecutive corpus sentences read by the teacher as one text, so knowledge
distillation also sees long texts (a retrieval document is a paragraph, not a sentence). ``[paragraphs] count``
runs of ``sentences`` lines each, drawn (seeded) from the corpus stage's sentences, whose consecutive lines mostly
come from one document; the teacher truncates them as it truncates any text. The distill stage adds a KD
objective on them at ``weight`` (``PARAGRAPHS``, registered in ``swembed.pipeline.build``).
Artifact: ``target_sentences.txt`` (one paragraph a line) and ``targets.npy`` (N, H') in that order.
"""
from __future__ import annotations

import logging

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.config import ParagraphsConfig
from swembed.pipeline.stage import PostTraining, Prepared, PrepareSources, StageContext, StageResult, StageRun
from swembed.runtime.folder import atomic_save_npy

logger = logging.getLogger(__name__)


def paragraphs_of(sentences: list[str], count: int, per_paragraph: int, seed: int) -> list[str]:
    """``count`` (at most all) non-overlapping runs of ``per_paragraph`` consecutive sentences, each joined with
    spaces, drawn with ``seed`` and kept in corpus order."""
    runs = len(sentences) // per_paragraph
    starts = np.sort(np.random.default_rng(seed).permutation(runs)[:count]) * per_paragraph
    return [" ".join(sentences[s : s + per_paragraph]) for s in starts]


def run_paragraphs(ctx: StageContext, config: ParagraphsConfig, corpus: StageResult, teacher) -> StageResult:
    """Draw the paragraphs from the ``corpus`` stage and encode them with ``teacher``."""
    identity = {"count": config.count, "sentences": config.sentences, "seed": ctx.seed,
                "teacher": {k: v for k, v in teacher.describe().items() if k != "path"}}

    def compute(run: StageRun) -> dict:
        texts = paragraphs_of(files.read_lines(corpus.path / files.SENTENCES), config.count, config.sentences,
                              ctx.seed)
        logger.info("paragraphs: the teacher reads %d paragraphs of %d sentences", len(texts), config.sentences)
        atomic_save_npy(run.out / files.TARGETS, teacher.encode(texts).astype(np.float32))
        (run.out / files.TARGET_SENTENCES).write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        return {"paragraphs": len(texts), "mean_words": round(float(np.mean([len(t.split()) for t in texts])), 1)}

    return ctx.run("paragraphs", identity, [corpus], compute)


def _prepare(ctx: StageContext, config: ParagraphsConfig, sources: PrepareSources) -> Prepared:
    return [(f"paragraphs ({lang})", lang, run_paragraphs(ctx, config, corpus, sources.teacher))
            for lang, corpus in sources.corpora.items()]


def _plan(config: ParagraphsConfig, words: int) -> list[str]:
    return [(f"{config.count:,} paragraphs of {config.sentences} corpus sentences through the teacher ([paragraphs]; "
             "cached after the first build)")]


PARAGRAPHS = PostTraining("paragraphs", enabled=lambda config: config.count > 0, prepare=_prepare,
                          identity=lambda config: {"paragraphs": config.count,
                                                   "paragraph_sentences": config.sentences,
                                                   "paragraph_weight": config.weight},
                          plan=_plan)
