"""Stage 6, distill: refine the PCA'd table with the one training loop (``swembed.pipeline.train``).

Objectives: knowledge distillation (paper eq. 2-3) on each language's encoded sentences, towards the teacher
vectors cached by the extract stage (the teacher never runs here); for a multilingual table also the
contrastive loss (eq. 4-5) on each language pair's parallel sentences, optionally filtered by the teacher's
own cosine (the ``pairs`` stages). Every text is encoded with exactly the inference tokeniser (pieces for unknown words).

Artifact: ``table.npy`` (rows, d) float32, the best table by held-out loss, and ``history.json``.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.compose import Layout
from swembed.pipeline.config import DistillConfig
from swembed.pipeline.coteacher import joint_targets
from swembed.pipeline.parallel import read_pairs
from swembed.pipeline.stage import PostTraining, Prepared, StageContext, StageResult, StageRun, Trained
from swembed.runtime.tokenizer import TokenIds, TokenizationRules, WordTokenizer


@dataclass
class DistillInputs:
    """What distillation reads: the PCA'd table, the composed layout, each language's extract (sentences and
    teacher targets) and tokenisation rules, the teacher's tokenizer, each language pair's ``pairs`` stage
    (``swembed.pipeline.parallel``), the stages the post-training hooks prepared (by section), and those hooks
    with their config sections, in registration order."""

    pca: StageResult
    compose: StageResult
    extracts: dict[str, StageResult]
    rules: dict[str, TokenizationRules]
    tokenizer_json: str
    pairs: dict[tuple[str, str], StageResult] = field(default_factory=dict)
    prepared: dict[str, Prepared] = field(default_factory=dict)
    post: list[tuple[PostTraining, object]] = field(default_factory=list)

    def co_teachers(self) -> tuple[dict[str, list[StageResult]], list[float]]:
        """Each language's ``coteacher`` stages, and each co-teacher's weight."""
        stages: dict[str, list[StageResult]] = {}
        for _, lang, stage in self.prepared.get("coteacher", []):
            stages.setdefault(lang, []).append(stage)
        weights = [weight for step, config in self.post if step.section == "coteacher" for _, weight in config.pairs()]
        return stages, weights

    def paragraphs(self) -> tuple[dict[str, tuple[StageResult, StageResult | None]], float, float]:
        """Each language's ``paragraphs`` stage and its ``queries`` stage (or None), the weight of the paragraphs'
        KD objective and that of the queries' KD against them."""
        sections = [config for step, config in self.post if step.section == "paragraphs"]
        found = {(stage.name, lang): stage for _, lang, stage in self.prepared.get("paragraphs", [])}
        stages = {lang: (stage, found.get(("queries", lang))) for (name, lang), stage in found.items()
                  if name == "paragraphs"}
        weight, query_weight = (sections[0].weight, sections[0].query_weight) if sections else (0.0, 0.0)
        return stages, weight, query_weight

    def retrieval(self) -> tuple[StageResult | None, object]:
        """The ``retrieval`` stage (or None) and its config section."""
        sections = [config for step, config in self.post if step.section == "retrieval"]
        stages = [stage for _, _, stage in self.prepared.get("retrieval", [])]
        return (stages[0] if stages else None), (sections[0] if sections else None)


def distill_identity(config: DistillConfig, inputs: DistillInputs, seed: int) -> dict:
    """The distill stage's identity: its section, the seed, and what each post-training hook adds. Options at
    their off value are left out, so caches from before an option existed stay valid."""
    identity = {**asdict(config), "seed": seed}
    for step, section in inputs.post:
        if step.identity:
            identity.update(step.identity(section))
    for option in ("center_targets", "rare_word_pieces", "random_batch_weight"):
        if not identity[option]:
            identity.pop(option)
    return identity


def run_distill(ctx: StageContext, config: DistillConfig, inputs: DistillInputs) -> StageResult:
    """Train the PCA'd table on the objectives, then let each post-training hook refine the best table."""
    pca, compose, extracts, rules = inputs.pca, inputs.compose, inputs.extracts, inputs.rules
    co_stages, co_weights = inputs.co_teachers()
    identity = distill_identity(config, inputs, ctx.seed)

    def compute(run: StageRun) -> dict:
        import torch
        from tokenizers import Tokenizer

        from swembed.pipeline.train import (LoopSettings, PackedRows, centred, contrastive_objective, kd_objective,
                                            query_kd_objective, random_batches, retrieval_accuracy, train)
        from swembed.teachers.base import pick_device

        dev = pick_device(ctx.device)
        seed = ctx.seed
        table = np.load(pca.path / files.TABLE)
        layout = Layout.read(compose.path)
        tokenizers = layout.tokenizers(rules, Tokenizer.from_str(inputs.tokenizer_json))
        contexts = np.load(compose.path / files.WORD_CONTEXTS)
        rng = np.random.default_rng(seed)
        objectives, stats = [], {}
        if config.kd_weight > 0:
            for lang, extract in extracts.items():
                sentences = files.read_lines(extract.path / files.TARGET_SENTENCES)
                targets = np.load(extract.path / files.TARGETS, mmap_mode="r" if lang in co_stages else None)
                if lang in co_stages:
                    targets = joint_targets(targets, [np.load(stage.path / files.TARGETS, mmap_mode="r")
                                                      for stage in co_stages[lang]], co_weights)
                targets = torch.as_tensor(targets, device=dev)
                if config.center_targets:
                    targets = centred(targets)
                ids = tokenizers[lang].encode_batch(sentences)
                texts = [(ids, targets, f"kd {lang}")]
                if config.rare_word_pieces:
                    texts.append(rare_words_as_pieces(tokenizers[lang], contexts, config.rare_word_pieces, ids,
                                                      sentences, targets, f"kd {lang} rare-word pieces"))
                    stats[f"rare-word sentences {lang}"] = len(texts[-1][0].lengths)
                for batch, goal, name in texts:
                    objectives.append(kd_objective(PackedRows(batch, dev), goal, config.tau, config.kd_weight, name,
                                                   config.val_sentences, config.batch_size, rng,
                                                   config.max_sentences, config.cell_size, seed))
                    if config.cell_size and config.random_batch_weight:
                        objectives.append(replace(objectives[-1], name=f"{name} random batches",
                                                  weight=config.kd_weight * config.random_batch_weight,
                                                  batches=random_batches))
            paragraph_stages, paragraph_weight, query_weight = inputs.paragraphs()
            for lang, (stage, query_stage) in paragraph_stages.items():
                paragraphs = files.read_lines(stage.path / files.TARGET_SENTENCES)
                packed = PackedRows(tokenizers[lang].encode_batch(paragraphs), dev)
                goal = torch.as_tensor(np.load(stage.path / files.TARGETS), device=dev)
                if paragraph_weight > 0:
                    objectives.append(replace(kd_objective(packed, goal, config.tau, config.kd_weight * paragraph_weight,
                                                           f"kd {lang} paragraphs", config.val_sentences,
                                                           config.batch_size, rng), selects=False))
                if query_stage is not None:
                    queries = files.read_lines(query_stage.path / files.TARGET_SENTENCES)
                    objectives.append(query_kd_objective(
                        PackedRows(tokenizers[lang].encode_batch(queries), dev), packed,
                        torch.as_tensor(np.load(query_stage.path / files.TARGETS), device=dev), goal, config.tau,
                        config.kd_weight * query_weight, f"query kd {lang}", config.val_sentences, config.batch_size,
                        rng))
                stats[f"paragraphs {lang}"] = len(paragraphs)
        retrieval_stage, retrieval = inputs.retrieval()
        if retrieval_stage is not None:
            objectives.append(retrieval_objective(retrieval_stage, retrieval, tokenizers[next(iter(extracts))], config,
                                                  rng, dev))
            stats["retrieval pairs"] = len(objectives[-1].train) + sum(map(len, objectives[-1].held_out))
        for (a, b), stage in inputs.pairs.items():
            pairs = read_pairs(stage, config.min_teacher_similarity)
            stats[f"pairs {a}-{b}"] = len(pairs)
            order = rng.permutation(len(pairs))[: config.max_pairs or None]
            left = PackedRows(tokenizers[a].encode_batch([pairs[i][0] for i in order]), dev)
            right = PackedRows(tokenizers[b].encode_batch([pairs[i][1] for i in order]), dev)
            objectives.append(contrastive_objective(left, right, config.tau, config.contrastive_weight,
                                                    f"contrastive {a}-{b}", config.held_out_pairs, config.batch_size))
        if not objectives:
            raise ValueError("distillation has no objective: kd_weight is 0 and there are no parallel pairs")
        settings = LoopSettings(config.batch_size, config.lr, config.max_steps, config.eval_every, config.patience,
                                seed)
        best, history = train(table, objectives, settings, dev, run.partial, ctx.checkpoint_seconds, run.unit_done,
                              run.quiet)
        trained = Trained(layout, tokenizers, contexts, inputs.prepared)
        for step, section in inputs.post:
            if step.refine:
                stats.update(step.refine(best, section, trained))
        np.save(run.out / files.TABLE, best.astype(np.float32))
        (run.out / files.HISTORY).write_text(json.dumps(history, indent=1))
        for objective in objectives:
            if objective.name.startswith("contrastive"):
                stats[f"held-out retrieval {objective.name.split()[1]}"] = round(retrieval_accuracy(
                    best, objective), 4)
        return {**stats, **{k: history[k] for k in ("initial_val_loss", "best_val_loss", "best_step", "steps",
                                                      "train_examples", "stopped_early", "device")}}

    prepared = [stage for items in inputs.prepared.values() for _, _, stage in items]
    return ctx.run("distill", identity, [pca, compose, *extracts.values(), *inputs.pairs.values(), *prepared],
                   compute)


def retrieval_objective(stage: StageResult, section, tokenizer: WordTokenizer, config: DistillConfig,
                        rng: np.random.Generator, dev):
    """The ``[retrieval]`` objective on a ``retrieval`` stage's pairs (``section.loss``: the teacher's query softmax
    distilled, or the contrastive loss with each pair's own document as the label); it never selects the table."""
    import torch

    from swembed.pipeline.retrieval import read_retrieval_pairs
    from swembed.pipeline.train import PackedRows, contrastive_objective, query_kd_objective

    queries, documents, query_targets, document_targets = read_retrieval_pairs(stage)
    order = rng.permutation(len(queries))[: section.max_pairs or None]
    left = PackedRows(tokenizer.encode_batch([queries[i] for i in order]), dev)
    right = PackedRows(tokenizer.encode_batch([documents[i] for i in order]), dev)
    if section.loss == "contrastive":
        return replace(contrastive_objective(left, right, config.tau, section.weight, "retrieval contrastive",
                                             config.val_sentences, config.batch_size), selects=False)
    return query_kd_objective(left, right, torch.as_tensor(query_targets[order], device=dev),
                              torch.as_tensor(document_targets[order], device=dev), config.tau, section.weight,
                              "retrieval kd", config.val_sentences, config.batch_size, rng)


def rare_words_as_pieces(tokenizer: WordTokenizer, contexts: np.ndarray, max_contexts: int, ids: TokenIds,
                         sentences: list[str], targets, name: str) -> tuple[TokenIds, object, str]:
    """The sentences (rows ``ids``) that hold a word seen in at most ``max_contexts`` contexts, re-encoded with
    those words unknown, so they back off to their pieces as unseen words do at inference; their targets."""
    import torch

    rare = np.zeros(max(len(contexts), int(ids.ids.max(initial=-1)) + 1), dtype=bool)  # word rows, then pieces
    rare[: len(contexts)] = contexts <= max_contexts
    text_of = np.repeat(np.arange(len(ids.lengths)), ids.lengths)
    chosen = np.flatnonzero(np.bincount(text_of[rare[ids.ids]], minlength=len(ids.lengths)))
    hidden = WordTokenizer({w: r for w, r in tokenizer.vocab.items() if not rare[r]}, tokenizer.rules,
                           tokenizer.pieces, tokenizer.piece_rows)
    return (hidden.encode_batch([sentences[i] for i in chosen]),
            targets[torch.as_tensor(chosen, device=targets.device)], name)
