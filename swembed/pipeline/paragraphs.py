"""Stage 5c, paragraphs: runs of consecutive corpus sentences read by the teacher as one text, so knowledge
distillation also sees long texts (a retrieval document is a paragraph, not a sentence). ``[paragraphs] count``
runs of ``sentences`` lines each, drawn (seeded) from the corpus stage's sentences, whose consecutive lines mostly
come from one document; the teacher truncates them as it truncates any text. The distill stage adds a KD
objective on them at ``weight`` (``PARAGRAPHS``, registered in ``swembed.pipeline.build``).
Artifact: ``target_sentences.txt`` (one paragraph a line) and ``targets.npy`` (N, H') in that order.
With ``[paragraphs] files`` the paragraphs are whole documents instead (one a line: abstracts, passages), ``count``
of them drawn (seeded) with evaluation text excluded: the document-level targets of tokenlearn, so the mean of a
document's rows approaches the teacher's vector of the document.

Stage 5d, queries (when ``query_weight`` > 0): for each paragraph the corpus line just before its run (after it,
for a run at the corpus start), read by the teacher; the distill stage adds the asymmetric KD of these short
texts against the long ones (a retrieval query against documents: the line is near the run, never in it).
Artifact: the same two files, row i the query of paragraph i.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.config import ParagraphsConfig
from swembed.pipeline.sources import (
    HELD_OUT_RULE,
    describe_source,
    expand_sources,
    held_out_keys,
    is_held_out,
    read_source,
)
from swembed.pipeline.stage import PostTraining, teacher_identity
from swembed.runtime.folder import atomic_save_npy
from swembed.runtime.settings import stage_key

if TYPE_CHECKING:  # annotations only
    from swembed.pipeline.stage import Prepared, PrepareSources, StageContext, StageResult, StageRun, TrainingContext
    from swembed.pipeline.train import Objective

logger = logging.getLogger(__name__)


def run_starts(n_sentences: int, count: int, per_paragraph: int, seed: int) -> np.ndarray:
    """The first line of ``count`` (at most all) non-overlapping runs of ``per_paragraph`` consecutive lines, drawn
    with ``seed``, in corpus order."""
    runs = n_sentences // per_paragraph
    return np.sort(np.random.default_rng(seed).permutation(runs)[:count]) * per_paragraph


def paragraphs_of(sentences: list[str], count: int, per_paragraph: int, seed: int) -> list[str]:
    """The runs of ``run_starts``, each joined with spaces."""
    return [" ".join(sentences[s : s + per_paragraph])
            for s in run_starts(len(sentences), count, per_paragraph, seed)]


def queries_of(sentences: list[str], count: int, per_paragraph: int, seed: int) -> list[str]:
    """The query of each run of ``paragraphs_of``: the line before it, or after it for a run at line 0."""
    return [sentences[s - 1 if s > 0 else s + per_paragraph]
            for s in run_starts(len(sentences), count, per_paragraph, seed)]


def _read_by_teacher(ctx: StageContext, stage: str, texts: Callable[[], list[str]], identity: dict,
                     inputs: list[StageResult], teacher) -> StageResult:
    """The ``stage`` whose artifact is the texts ``texts()`` gives and their vectors from ``teacher``; its identity
    is ``identity`` and the teacher's."""
    identity = {**identity, **teacher_identity(teacher)}

    def compute(run: StageRun) -> dict:
        chosen = texts()
        logger.info("%s: the teacher reads %d texts", stage, len(chosen))
        atomic_save_npy(run.out / files.TARGETS, teacher.encode(chosen).astype(np.float32))
        (run.out / files.TARGET_SENTENCES).write_text("".join(t + "\n" for t in chosen), encoding="utf-8")
        return {stage: len(chosen), "mean_words": round(float(np.mean([len(t.split()) for t in chosen])), 1)}

    return ctx.run(stage, identity, inputs, compute)


def _runs_identity(ctx: StageContext, config: ParagraphsConfig) -> dict:
    return {"count": config.count, "sentences": config.sentences, "seed": ctx.seed}


def run_paragraphs(ctx: StageContext, config: ParagraphsConfig, corpus: StageResult, teacher) -> StageResult:
    """Draw the paragraphs from the ``corpus`` stage and encode them with ``teacher``."""
    return _read_by_teacher(ctx, "paragraphs", lambda: paragraphs_of(
        files.read_lines(corpus.path / files.SENTENCES), config.count, config.sentences, ctx.seed),
        _runs_identity(ctx, config), [corpus], teacher)


def run_queries(ctx: StageContext, config: ParagraphsConfig, corpus: StageResult, teacher) -> StageResult:
    """The query line of each paragraph (``queries_of``), encoded with ``teacher``."""
    return _read_by_teacher(ctx, "queries", lambda: queries_of(
        files.read_lines(corpus.path / files.SENTENCES), config.count, config.sentences, ctx.seed),
        {**_runs_identity(ctx, config), "query": "line before"}, [corpus], teacher)


def documents_of(paths: list[str], exclude: list[str], count: int, seed: int) -> list[str]:
    """``count`` (at most all) documents drawn with ``seed`` from the lines of ``paths`` (blank lines and lines that
    repeat an ``exclude`` text skipped), in file order."""
    held_out = held_out_keys(exclude)
    documents = [" ".join(line.split()) for path in expand_sources(paths) for line in read_source(path)]
    documents = [d for d in documents if d and not is_held_out(d, held_out)]
    if not documents:
        raise ValueError(f"[paragraphs] files {paths}: no document")
    return [documents[i] for i in np.sort(np.random.default_rng(seed).permutation(len(documents))[:count])]


def run_documents(ctx: StageContext, config: ParagraphsConfig, exclude: list[str], teacher) -> StageResult:
    """The ``paragraphs`` stage of ``[paragraphs] files``: documents drawn from the files, encoded with ``teacher``."""
    identity = {"count": config.count, "seed": ctx.seed, "files": [describe_source(p) for p in config.files],
                "exclude": [describe_source(p) for p in expand_sources(exclude)], **HELD_OUT_RULE}
    return _read_by_teacher(ctx, "paragraphs", lambda: documents_of(config.files, exclude, config.count, ctx.seed),
                            identity, [], teacher)


def _prepare(ctx: StageContext, config: ParagraphsConfig, sources: PrepareSources) -> Prepared:
    if config.files:
        lang = next(iter(sources.extracts))
        return [(f"paragraphs ({lang})", lang, run_documents(ctx, config, sources.exclude, sources.teacher))]
    prepared: Prepared = []
    for lang, corpus in sources.corpora.items():
        prepared.append((f"paragraphs ({lang})", lang, run_paragraphs(ctx, config, corpus, sources.teacher)))
        if config.query_weight > 0:
            prepared.append((f"queries ({lang})", lang, run_queries(ctx, config, corpus, sources.teacher)))
    return prepared


def _objectives(config: ParagraphsConfig, prepared: Prepared, training: TrainingContext) -> list[Objective]:
    """With sentence KD on: for each language, KD on its paragraphs at ``weight`` and the queries' KD against them
    at ``query_weight`` (both times ``[distill] kd_weight``); neither selects the table."""
    import torch

    from swembed.pipeline.train import PackedRows, kd_objective, query_kd_objective

    distill, device = training.config, training.device
    if not distill.kd_weight > 0:
        return []
    settings: dict[str, Any] = {"tau": distill.tau, "n_held": distill.val_sentences, "batch_size": distill.batch_size,
                "rng": training.rng}
    found = {(stage.name, lang): stage for _, lang, stage in prepared}
    objectives = []
    for lang in [lang for name, lang in found if name == "paragraphs"]:
        stage, query_stage = found["paragraphs", lang], found.get(("queries", lang))
        tokenizer = training.tokenizers[lang]
        paragraphs = files.read_lines(stage.path / files.TARGET_SENTENCES)
        packed = PackedRows(tokenizer.encode_batch(paragraphs), device)
        goal = torch.as_tensor(np.load(stage.path / files.TARGETS), device=device)
        if config.weight > 0:
            objectives.append(replace(kd_objective(packed, goal, weight=distill.kd_weight * config.weight,
                                                   name=f"kd {lang} paragraphs", **settings), selects=False))
        if query_stage is not None:
            queries = files.read_lines(query_stage.path / files.TARGET_SENTENCES)
            objectives.append(query_kd_objective(
                PackedRows(tokenizer.encode_batch(queries), device), packed,
                torch.as_tensor(np.load(query_stage.path / files.TARGETS), device=device), goal,
                weight=distill.kd_weight * config.query_weight, name=f"query kd {lang}", **settings))
        training.stats[f"paragraphs {lang}"] = len(paragraphs)
    return objectives


def _plan(config: ParagraphsConfig, words: int) -> list[str]:
    if config.files:
        return [f"{config.count:,} documents of {len(config.files)} file(s) through the teacher ([paragraphs] files; "
                "cached after the first build)"]
    queries = " and the line before each" if config.query_weight > 0 else ""
    return [(f"{config.count:,} paragraphs of {config.sentences} corpus sentences{queries} through the teacher "
             "([paragraphs]; cached after the first build)")]


PARAGRAPHS = PostTraining("paragraphs", enabled=lambda config: config.count > 0, prepare=_prepare,
                          identity=lambda config: {**stage_key(config), "early_stopping": "sentence objectives",
                                                   **({"paragraph_files": len(config.files)} if config.files else {})},
                          plan=_plan, objectives=_objectives)
