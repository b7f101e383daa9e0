"""Stage 6, distill: refine the PCA'd table with the one training loop (``swembed.pipeline.train``).

Objectives: knowledge distillation (paper eq. 2-3) on each language's encoded sentences, towards the teacher
vectors cached by the extract stage (the teacher never runs here; a post-training stage's ``targets`` hook may
change them: co-teachers); then the objectives of each post-training stage's ``objectives`` hook (paragraphs,
retrieval pairs); for a multilingual table also the contrastive loss (eq. 4-5) on each language pair's parallel
sentences, optionally filtered by the teacher's own cosine (the ``pairs`` stages). Every text is encoded with
exactly the inference tokeniser (pieces for unknown words).

Artifact: ``table.npy`` (rows, d) float32, the best table by held-out loss, and ``history.json``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, cast

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.compose import Layout
from swembed.pipeline.config import BuildError, DistillConfig
from swembed.pipeline.corpus import rows_from_sources
from swembed.pipeline.parallel import read_pairs
from swembed.pipeline.stage import PostTraining, Prepared, StageContext, StageResult, StageRun, Trained, TrainingContext
from swembed.runtime.settings import stage_key
from swembed.runtime.tokenizer import TokenIds, TokenizationRules, WordTokenizer

if TYPE_CHECKING:  # torch: imported when the stage runs
    from collections.abc import Callable

    import torch

    from swembed.pipeline.train import Objective


@dataclass
class DistillInputs:
    """What distillation reads: the PCA'd table, the composed layout, each language's extract (sentences and
    teacher targets) and tokenisation rules, the teacher's tokenizer, each language pair's ``pairs`` stage
    (``swembed.pipeline.parallel``), the stages the post-training hooks prepared (by section), those hooks
    with their config sections, in registration order, and each language's corpus (for ``[distill] sources``)."""

    pca: StageResult
    compose: StageResult
    extracts: dict[str, StageResult]
    rules: dict[str, TokenizationRules]
    tokenizer_json: str
    pairs: dict[tuple[str, str], StageResult] = field(default_factory=dict)
    prepared: dict[str, Prepared] = field(default_factory=dict)
    post: list[tuple[PostTraining, object]] = field(default_factory=list)
    corpora: dict[str, StageResult] = field(default_factory=dict)

    def prepared_by(self, step: PostTraining, lang: str | None = None) -> Prepared:
        """The stages ``step``'s ``prepare`` made (only those of ``lang``, when given)."""
        return [item for item in self.prepared.get(step.section, []) if lang is None or item[1] == lang]


def distill_identity(config: DistillConfig, inputs: DistillInputs, seed: int) -> dict:
    """The distill stage's identity: its section's settings as they declare it (``stage_key``: those declared
    ``Key.UNLESS_DEFAULT`` are left out at their default, so caches from before they existed stay valid), the seed,
    and what each post-training hook adds."""
    identity = {**stage_key(config), "seed": seed}
    for step, section in inputs.post:
        if step.identity:
            identity.update(step.identity(section))
    uses_cells = config.cell_size or any(getattr(section, "cell_size", 0) for _, section in inputs.post)
    if uses_cells and config.cell_draws != "sampled":
        identity["cell_draws"] = config.cell_draws
    return identity


def run_distill(ctx: StageContext, config: DistillConfig, inputs: DistillInputs) -> StageResult:
    """Train the PCA'd table on the objectives, then let each post-training hook refine the best table."""
    prepared = [stage for items in inputs.prepared.values() for _, _, stage in items]
    return ctx.run("distill", distill_identity(config, inputs, ctx.seed),
                   [inputs.pca, inputs.compose, *inputs.extracts.values(), *inputs.pairs.values(), *prepared],
                   partial(_distill, ctx, config, inputs))


def _distill(ctx: StageContext, config: DistillConfig, inputs: DistillInputs, run: StageRun) -> dict:
    """The distill stage's work: objectives, the training loop, the refine hooks; writes the table and history."""
    from tokenizers import Tokenizer

    from swembed.pipeline.train import LoopSettings, retrieval_accuracy, train
    from swembed.teachers.base import pick_device

    layout = Layout.read(inputs.compose.path)
    tokenizers = layout.tokenizers(inputs.rules, Tokenizer.from_str(inputs.tokenizer_json))
    contexts = np.load(inputs.compose.path / files.WORD_CONTEXTS)
    start = np.load(inputs.pca.path / files.TABLE)
    training = TrainingContext(config, tokenizers, pick_device(ctx.device), ctx.seed, np.random.default_rng(ctx.seed),
                               start)
    objectives = plan_objectives(inputs, training, contexts)
    settings = LoopSettings(config.batch_size, config.lr, config.max_steps, config.eval_every, config.patience,
                            ctx.seed, config.lr_decay)
    best, history = train(start, objectives, settings, training.device, run.partial,
                          ctx.checkpoint_seconds, run.unit_done, run.quiet)
    stats = training.stats
    trained = Trained(layout, tokenizers, contexts, inputs.prepared)
    for step, section in inputs.post:
        if step.refine:
            stats.update(step.refine(best, section, trained))
    np.save(run.out / files.TABLE, best.astype(np.float32))
    (run.out / files.HISTORY).write_text(json.dumps(history, indent=1))
    for objective in objectives:
        if objective.name.startswith("contrastive"):
            stats[f"held-out retrieval {objective.name.split()[1]}"] = round(retrieval_accuracy(best, objective), 4)
    return {**stats, **{k: history[k] for k in ("initial_val_loss", "best_val_loss", "best_step", "steps",
                                                  "train_examples", "stopped_early", "device")}}


def plan_objectives(inputs: DistillInputs, training: TrainingContext, contexts: np.ndarray) -> list[Objective]:
    """Every objective, in the order they draw from ``training.rng``: each language's sentence KD, then each
    post-training hook's objectives in registration order, then each language pair's contrastive objective."""
    objectives = []
    if training.config.kd_weight > 0:
        for lang in inputs.extracts:
            objectives += sentence_objectives(inputs, lang, training, contexts)
    for step, section in inputs.post:
        if step.objectives:
            objectives += step.objectives(section, inputs.prepared_by(step), training)
    for (a, b), stage in inputs.pairs.items():
        objectives.append(pair_objective(stage, a, b, training))
    if not objectives:
        raise ValueError("distillation has no objective: kd_weight is 0 and there are no parallel pairs")
    return objectives


def sentence_objectives(inputs: DistillInputs, lang: str, training: TrainingContext,
                        contexts: np.ndarray) -> list[Objective]:
    """KD on a language's encoded sentences towards its targets (as the ``targets`` hooks leave them), and on
    those holding rare words written through their pieces (``rare_word_pieces``); each with its random-batch
    companion (``random_batch_weight``)."""
    import torch

    from swembed.pipeline.train import PackedRows, centred, kd_objective, random_batches

    config, tokenizer, device = training.config, training.tokenizers[lang], training.device
    sentences = files.read_lines(inputs.extracts[lang].path / files.TARGET_SENTENCES)
    goals = teacher_targets(inputs, lang)
    if config.sources:
        keep = rows_from_sources(inputs.corpora[lang], sentences, config.sources, "[distill] sources")
        sentences, goals = [sentences[i] for i in keep], goals[keep]
        training.stats[f"kd sentences {lang}"] = len(keep)
        if len(keep) < 2 * config.batch_size:
            raise BuildError(f"[distill] sources: only {len(keep)} of the {lang} sentences the teacher encoded come "
                             f"from them; KD needs at least {2 * config.batch_size} (two batches)")
    targets = torch.as_tensor(goals, device=device)
    if config.center_targets:
        targets = centred(targets)
    ids = tokenizer.encode_batch(sentences)
    texts = [(ids, targets, f"kd {lang}")]
    if config.rare_word_pieces:
        texts.append(rare_words_as_pieces(tokenizer, contexts, config.rare_word_pieces, ids, sentences, targets,
                                          f"kd {lang} rare-word pieces"))
        training.stats[f"rare-word sentences {lang}"] = len(texts[-1][0].lengths)
    objectives = []
    for batch, goal, name in texts:
        objectives.append(kd_objective(PackedRows(batch, device), goal, tau=config.tau, weight=config.kd_weight,
                                       name=name, n_held=config.val_sentences, batch_size=config.batch_size,
                                       rng=training.rng, max_train=config.max_sentences, cell_size=config.cell_size,
                                       seed=training.seed, cell_draws=config.cell_draws))
        if config.cell_size and config.random_batch_weight:
            objectives.append(replace(objectives[-1], name=f"{name} random batches",
                                      weight=config.kd_weight * config.random_batch_weight, batches=random_batches))
    return objectives


def teacher_targets(inputs: DistillInputs, lang: str) -> np.ndarray:
    """A language's KD targets: the teacher's vectors of its encoded sentences, changed by each ``targets`` hook
    that prepared a stage of the language (a co-teacher), in registration order."""
    hooks = [(step, section, inputs.prepared_by(step, lang)) for step, section in inputs.post if step.targets]
    hooks = [(step, section, prepared) for step, section, prepared in hooks if prepared]
    targets = np.load(inputs.extracts[lang].path / files.TARGETS, mmap_mode="r" if hooks else None)
    for step, section, prepared in hooks:
        targets = cast("Callable[..., np.ndarray]", step.targets)(section, prepared, targets)  # hooks: steps with one
    return targets


def pair_objective(stage: StageResult, a: str, b: str, training: TrainingContext) -> Objective:
    """The contrastive objective on a language pair's parallel sentences (those the teacher scores at least
    ``min_teacher_similarity``; at most ``max_pairs``, drawn)."""
    from swembed.pipeline.train import PackedRows, contrastive_objective

    config, device = training.config, training.device
    pairs = read_pairs(stage, config.min_teacher_similarity)
    training.stats[f"pairs {a}-{b}"] = len(pairs)
    order = training.rng.permutation(len(pairs))[: config.max_pairs or None]
    left = PackedRows(training.tokenizers[a].encode_batch([pairs[i][0] for i in order]), device)
    right = PackedRows(training.tokenizers[b].encode_batch([pairs[i][1] for i in order]), device)
    return contrastive_objective(left, right, tau=config.tau, weight=config.contrastive_weight,
                                 name=f"contrastive {a}-{b}", n_held=config.held_out_pairs,
                                 batch_size=config.batch_size)


def rare_words_as_pieces(tokenizer: WordTokenizer, contexts: np.ndarray, max_contexts: int, ids: TokenIds,
                         sentences: list[str], targets: torch.Tensor, name: str) -> tuple[TokenIds, torch.Tensor, str]:
    """The sentences (rows ``ids``) that hold a word seen in at most ``max_contexts`` contexts, re-encoded with
    those words unknown, so they back off to their pieces as unseen words do at inference; their targets."""
    import torch

    rare = np.zeros(max(len(contexts), int(ids.ids.max(initial=-1)) + 1), dtype=bool)  # word rows, then pieces
    rare[: len(contexts)] = contexts <= max_contexts
    text_of = np.repeat(np.arange(len(ids.lengths)), ids.lengths)
    chosen = np.flatnonzero(np.bincount(text_of[rare[ids.ids]], minlength=len(ids.lengths)))
    hidden = WordTokenizer({w: r for w, r in tokenizer.vocab.items() if not rare[r]}, tokenizer.rules,
                           tokenizer.teacher_tokenizer, tokenizer.piece_rows)
    return (hidden.encode_batch([sentences[i] for i in chosen]),
            targets[torch.as_tensor(chosen, device=targets.device)], name)
