"""Stage 5e, retrieval: query-document pairs (``query<TAB>document`` files, ``[retrieval] files``) with the
evaluation text excluded, each side read by the teacher for the kd loss. The distill stage adds an objective on them at
``weight``: the teacher's softmax of each query over the batch's documents distilled (``loss = "kd"``), or the
pair's own document as the label (``"contrastive"``), so the table learns what a short text that should find a
long one looks like, from real pairs rather than the corpus's neighbouring lines (``[paragraphs]``).
Artifact: ``pairs.tsv`` (the pairs kept) and, for ``kd`` only (the contrastive loss needs no teacher, so its pairs
cost no teacher time), ``query_targets.npy`` and ``document_targets.npy`` (N, H') in order.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from swembed.pipeline.config import RetrievalConfig
from swembed.pipeline.parallel import read_pairs, read_parallel, write_pairs
from swembed.pipeline.sources import HELD_OUT_RULE, describe_source, expand_sources, held_out_keys
from swembed.pipeline.stage import PostTraining, teacher_identity
from swembed.runtime.folder import atomic_save_npy
from swembed.runtime.settings import stage_key
from swembed.runtime.windows import GAMMA, word_windows

if TYPE_CHECKING:  # annotations only
    from swembed.pipeline.stage import Prepared, PrepareSources, StageContext, StageResult, StageRun, TrainingContext
    from swembed.pipeline.train import Objective

logger = logging.getLogger(__name__)
QUERY_TARGETS, DOCUMENT_TARGETS = "query_targets.npy", "document_targets.npy"
SIBLING_WORDS = 6  # a shared sentence this long links two pairs (``sibling_groups``)
SIBLING_PAIRS = 4  # a sentence more pairs hold is boilerplate: it links none


def run_retrieval_pairs(ctx: StageContext, config: RetrievalConfig, exclude: list[str], teacher) -> StageResult:
    """Read the pairs (exact repeats and pairs repeating an ``exclude`` text dropped) and, for ``loss = "kd"``,
    encode both sides."""
    with_targets = config.needs_teacher()
    identity = {"files": [describe_source(p) for p in config.files],
                "exclude": [describe_source(p) for p in expand_sources(exclude)], **HELD_OUT_RULE,
                **(teacher_identity(teacher) if with_targets
                   else {"targets": False})}

    def compute(run: StageRun) -> dict:
        pairs = read_parallel(config.files, held_out_keys(exclude))
        if not pairs:
            raise ValueError(f"[retrieval] files {config.files}: no query<TAB>document pair")
        if with_targets:
            logger.info("retrieval: the teacher reads %d queries and their documents", len(pairs))
            atomic_save_npy(run.out / QUERY_TARGETS, teacher.encode([q for q, _ in pairs]).astype(np.float32))
            atomic_save_npy(run.out / DOCUMENT_TARGETS, teacher.encode([d for _, d in pairs]).astype(np.float32))
        write_pairs(run.out, pairs)
        words = np.mean([len(d.split()) for _, d in pairs])
        return {"pairs": len(pairs), "document_mean_words": round(float(words), 1)}

    return ctx.run("retrieval", identity, [], compute)


def read_retrieval_pairs(stage: StageResult) -> tuple[list[str], list[str], np.ndarray | None, np.ndarray | None]:
    """Queries, documents and their teacher vectors (None where the stage encoded none: ``contrastive``), from a
    ``retrieval`` stage's artifact."""
    pairs = read_pairs(stage)
    targets = [np.load(stage.path / name) if (stage.path / name).is_file() else None
               for name in (QUERY_TARGETS, DOCUMENT_TARGETS)]
    return [q for q, _ in pairs], [d for _, d in pairs], targets[0], targets[1]


def sibling_groups(queries: list[str], documents: list[str], min_words: int = SIBLING_WORDS,
                   max_pairs: int = SIBLING_PAIRS) -> np.ndarray:
    """One id a pair (the lowest index among its siblings): two pairs are siblings when their texts (query or
    document) are one text, or share a sentence (``splits.sentences_of``) of at least ``min_words`` words, case and
    spacing aside, or are linked through others that are: one question with two answers, the pseudo-queries of one
    abstract and its summary's pair (their passages the same abstract but a sentence), a query that is a sentence
    of another pair's passage. A sentence held by more than ``max_pairs`` pairs is boilerplate and links none."""
    from swembed.pipeline.splits import sentences_of

    def normal(text: str) -> str:
        return " ".join(text.lower().split())

    wholes: dict[str, list[int]] = {}
    shared: dict[str, list[int]] = {}
    for i, pair in enumerate(zip(queries, documents)):
        for text in dict.fromkeys(map(normal, pair)):
            wholes.setdefault(text, []).append(i)
        for key in {sentence for text in pair for sentence in map(normal, sentences_of(text))
                    if sentence.count(" ") + 1 >= min_words}:
            shared.setdefault(key, []).append(i)
    parent = list(range(len(queries)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    links = [*wholes.values(), *(pairs for pairs in shared.values() if len(pairs) <= max_pairs)]
    for pairs in links:
        for other in pairs[1:]:
            a, b = root(pairs[0]), root(other)
            parent[max(a, b)] = min(a, b)
    return np.array([root(i) for i in range(len(queries))], dtype=np.int64)


def passage_windows(documents: list[str], width: int) -> tuple[list[str], np.ndarray]:
    """Every document's windows of ``width`` words as the search reads them (``windows.word_windows``; a document
    too short for windows is its own one), and offsets (documents + 1,): document i's are ``[offsets[i]:
    offsets[i + 1]]``."""
    per_document = [word_windows(document, width) or [document] for document in documents]
    offsets = np.zeros(len(documents) + 1, dtype=np.int64)
    np.cumsum([len(w) for w in per_document], out=offsets[1:])
    return [w for windows in per_document for w in windows], offsets


def _prepare(ctx: StageContext, config: RetrievalConfig, sources: PrepareSources) -> Prepared:
    lang = next(iter(sources.extracts))
    return [("retrieval pairs", lang, run_retrieval_pairs(ctx, config, sources.exclude, sources.teacher))]


def _objectives(config: RetrievalConfig, prepared: Prepared, training: TrainingContext) -> list[Objective]:
    """The objective on the pairs (``loss``: the teacher's query softmax distilled, or the contrastive loss with each
    pair's own document as the label), at ``weight``; it never selects the table."""
    import torch

    from swembed.pipeline.train import (
        HardNegatives,
        PackedRows,
        cell_batches,
        contrastive_objective,
        lexical_sketches,
        mined_hard_negatives,
        query_kd_objective,
        windowed_contrastive_objective,
    )

    (_, lang, stage), = prepared
    distill, tokenizer, device = training.config, training.tokenizers[lang], training.device
    queries, documents, query_targets, document_targets = read_retrieval_pairs(stage)
    order = training.rng.permutation(len(queries))[: config.max_pairs or None]
    queries, documents = [queries[i] for i in order], [documents[i] for i in order]  # in training's order
    left = PackedRows(tokenizer.encode_batch(queries), device)
    right = PackedRows(tokenizer.encode_batch(documents), device)
    settings: dict[str, Any] = {"tau": config.tau or distill.tau, "weight": config.weight,
                                "n_held": distill.val_sentences, "batch_size": config.batch_size or distill.batch_size}
    if config.loss == "contrastive":
        settings["directions"] = config.directions
        groups = sibling_groups(queries, documents) if config.mask_siblings or config.hard_negatives else np.empty(0)
        if config.mask_siblings:
            settings["groups"] = groups
            training.stats["retrieval sibling groups"] = len(np.unique(groups))
        if config.hard_negatives:
            def mined(train: np.ndarray) -> HardNegatives:
                hard = mined_hard_negatives(training.start, left, right, groups, config.hard_negatives, training.seed,
                                            train)
                training.stats["retrieval hard negatives"] = {
                    "a pair": hard.candidates.shape[1], "distinct passages": int(np.unique(hard.candidates).size)}
                return hard

            settings["negatives"] = mined
        if config.windows:
            windows, offsets = passage_windows(documents, config.windows)
            objective = windowed_contrastive_objective(
                left, right, PackedRows(tokenizer.encode_batch(windows), device), offsets, gamma=GAMMA,
                name="retrieval contrastive", **settings)
        else:
            objective = contrastive_objective(left, right, name="retrieval contrastive", **settings)
        objective = replace(objective, selects=False)
        if config.cell_size:  # whichever score the pairs train on
            sketches = lexical_sketches([left, right], objective.train, training.seed)
            objective = replace(objective, batches=cell_batches(sketches, config.cell_size, training.seed,
                                                                distill.cell_draws))
    else:
        assert query_targets is not None and document_targets is not None  # a kd stage encodes both sides
        objective = query_kd_objective(left, right, torch.as_tensor(query_targets[order], device=device),
                                       torch.as_tensor(document_targets[order], device=device),
                                       name="retrieval kd", rng=training.rng, **settings)
    training.stats["retrieval pairs"] = len(objective.train) + sum(map(len, objective.held_out))
    return [objective]


def _plan(config: RetrievalConfig, words: int) -> list[str]:
    if not config.needs_teacher():
        return [f"the query-document pairs of {len(config.files)} file(s) ([retrieval], contrastive: no teacher time)"]
    return [f"the query-document pairs of {len(config.files)} file(s) through the teacher ([retrieval]; cached after "
            "the first build)"]


RETRIEVAL = PostTraining("retrieval", enabled=lambda config: bool(config.files), prepare=_prepare,
                         identity=stage_key,  # the files are keyed by the prepared stage
                         plan=_plan, objectives=_objectives)
