"""Stage 5a, alone: the teacher's own vector of every word row's word encoded on its own (a one-word sentence,
pooled and L2-normalised as the teacher pools any sentence), and the prior it gives a rarely seen word.

A word's corpus mean is noisy when it is seen in one or two sentences; the teacher reading the word alone
knows it from pre-training. After distillation a ridge map from these vectors to the trained rows of frequent
words carries every word's alone vector into the table, and a word seen in n sentences becomes
``(n v + k a) / (n + k)`` (``[alone] k``; ``ALONE``, registered in ``swembed.pipeline.build``).
Artifact: ``alone.npy`` (word rows, H').
"""
from __future__ import annotations

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.compose import blend_by_contexts
from swembed.pipeline.config import AloneConfig
from swembed.pipeline.stage import (
    PostTraining,
    Prepared,
    PrepareSources,
    StageContext,
    StageResult,
    StageRun,
    Trained,
    teacher_identity,
)
from swembed.runtime.settings import stage_key

FIT_CONTEXTS = 20  # the map is fitted on the words seen in at least this many sentences
RIDGE = 1.0


def run_alone(ctx: StageContext, compose: StageResult, teacher) -> StageResult:
    """Encode each word row of the ``compose`` artifact alone with ``teacher``."""
    identity = teacher_identity(teacher)

    def compute(run: StageRun) -> dict:
        words = files.read_lines(compose.path / files.ROWS)[: len(np.load(compose.path / files.WORD_CONTEXTS))]
        np.save(run.out / files.ALONE, teacher.encode(words).astype(np.float32))
        return {"words": len(words)}

    return ctx.run("alone", identity, [compose], compute)


def alone_map(alone: np.ndarray, words: np.ndarray, contexts: np.ndarray):
    """The ridge map (with a bias) from alone vectors into the table, fitted on the rows ``words`` of the words seen
    in >= FIT_CONTEXTS sentences (the most frequent words if none is): a function of any words' alone vectors."""
    fit = np.flatnonzero(contexts >= min(FIT_CONTEXTS, contexts.max(initial=0)))
    x = np.c_[alone[fit], np.ones(len(fit))].astype(np.float64)
    beta = np.linalg.solve(x.T @ x + RIDGE * np.eye(x.shape[1]), x.T @ words[fit].astype(np.float64))
    return lambda vectors: np.c_[vectors, np.ones(len(vectors))].astype(np.float64) @ beta


def shrink_to_alone(table: np.ndarray, alone: np.ndarray, contexts: np.ndarray, k: float) -> int:
    """In place: word row i (of ``len(contexts)``) becomes ``(n v + k a) / (n + k)``, n its contexts and ``a`` its
    alone vector mapped into the table (``alone_map``); a word with no context takes ``a``. Returns the rows
    moved."""
    words = table[: len(contexts)]
    mapped = alone_map(alone, words, contexts)(alone)
    moved = blend_by_contexts(words, mapped, contexts, k, np.ones(len(contexts), dtype=bool))
    alone_only = contexts == 0
    words[alone_only] = mapped[alone_only]
    return moved + int(alone_only.sum())


def _prepare(ctx: StageContext, config: AloneConfig, sources: PrepareSources) -> Prepared:
    return [("alone", None, run_alone(ctx, sources.compose, sources.teacher))]


def _refine(table: np.ndarray, config: AloneConfig, trained: Trained) -> dict:
    (_, _, stage), = trained.prepared["alone"]
    return {"words pulled to alone": shrink_to_alone(table, np.load(stage.path / files.ALONE), trained.contexts,
                                                     config.k)}


def _plan(config: AloneConfig, words: int) -> list[str]:
    return [f"every word row read alone through the teacher ([alone] k; one word per sentence, {words:,} short "
            "sentences; cached after the first build)"]


ALONE = PostTraining("alone", enabled=lambda config: bool(config.k), prepare=_prepare,
                     identity=stage_key,  # {"alone_shrinkage": k}: its [distill] key before the section
                     refine=_refine, plan=_plan)
