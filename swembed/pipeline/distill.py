"""Stage 6, distill: refine the PCA'd table with the one training loop (``swembed.pipeline.train``).

Objectives: knowledge distillation (paper eq. 2-3) on each language's encoded sentences, towards the teacher
vectors cached by the extract stage (the teacher never runs here); for a multilingual table also the
contrastive loss (eq. 4-5) on each language pair's parallel sentences, optionally filtered by the teacher's
own cosine (the ``pairs`` stages). Every text is encoded with exactly the inference tokeniser (pieces for unknown words).

Artifact: ``table.npy`` (rows, d) float32, the best table by held-out loss, and ``history.json``.
"""
from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.alone import shrink_to_alone
from swembed.pipeline.compose import Layout, shrink
from swembed.pipeline.config import DistillConfig
from swembed.pipeline.coteacher import joint_targets
from swembed.pipeline.parallel import read_pairs
from swembed.pipeline.stage import StageResult, StageRun, run_stage
from swembed.runtime.tokenizer import TokenIds, TokenizationRules, WordTokenizer


def run_distill(config: DistillConfig, pca: StageResult, compose: StageResult, extracts: dict[str, StageResult],
                rules: dict[str, TokenizationRules], tokenizer_json: str, work_dir: Path,
                pair_stages: dict[tuple[str, str], StageResult] | None = None, alone: StageResult | None = None,
                co_stages: dict[str, list[StageResult]] | None = None, seed: int = 0, device: str = "auto",
                checkpoint_seconds: float = 60.0, force: bool = False, quiet: bool = False) -> StageResult:
    """``pair_stages``: (language a, language b) -> its ``pairs`` stage (``swembed.pipeline.parallel``);
    ``alone``: the stage of words encoded alone, for ``alone_shrinkage``; ``co_stages``: language -> its
    ``coteacher`` stages, one per ``co_teacher``."""
    pair_stages, co_stages = pair_stages or {}, co_stages or {}
    identity = {**asdict(config), "seed": seed}
    identity.pop("gram_buckets")  # fitted after this stage, by the grams stage
    for option in ("center_targets", "rare_word_pieces", "random_batch_weight", "shrinkage", "alone_shrinkage",
                   "co_teacher"):
        if not identity[option]:
            identity.pop(option)  # caches from before the option stay valid
    if not config.co_teacher:
        identity.pop("co_teacher_weight")

    def compute(run: StageRun) -> dict:
        import torch
        from tokenizers import Tokenizer

        from swembed.pipeline.train import (LoopSettings, PackedRows, centred, contrastive_objective, kd_objective,
                                            random_batches, retrieval_accuracy, train)
        from swembed.teachers.base import pick_device

        dev = pick_device(device)
        table = np.load(pca.path / files.TABLE)
        layout = Layout.read(compose.path)
        tokenizers = layout.tokenizers(rules, Tokenizer.from_str(tokenizer_json))
        contexts = np.load(compose.path / files.WORD_CONTEXTS)
        rng = np.random.default_rng(seed)
        objectives, stats = [], {}
        if config.kd_weight > 0:
            for lang, extract in extracts.items():
                sentences = files.read_lines(extract.path / files.TARGET_SENTENCES)
                targets = np.load(extract.path / files.TARGETS, mmap_mode="r" if lang in co_stages else None)
                if lang in co_stages:
                    targets = joint_targets(targets, [np.load(stage.path / files.TARGETS, mmap_mode="r")
                                                      for stage in co_stages[lang]],
                                            [weight for _, weight in config.co_teachers()])
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
        for (a, b), stage in pair_stages.items():
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
        best, history = train(table, objectives, settings, dev, run.partial, checkpoint_seconds, run.unit_done,
                              run.quiet)
        if config.shrinkage:
            stats["shrunk words"] = shrink_to_backoff(best, layout, tokenizers, contexts, config.shrinkage)
        if config.alone_shrinkage:
            stats["words pulled to alone"] = shrink_to_alone(best, np.load(alone.path / files.ALONE), contexts,
                                                             config.alone_shrinkage)
        np.save(run.out / files.TABLE, best.astype(np.float32))
        (run.out / files.HISTORY).write_text(json.dumps(history, indent=1))
        for objective in objectives:
            if objective.name.startswith("contrastive"):
                stats[f"held-out retrieval {objective.name.split()[1]}"] = round(retrieval_accuracy(
                    best, objective), 4)
        return {**stats, **{k: history[k] for k in ("initial_val_loss", "best_val_loss", "best_step", "steps",
                                                      "train_examples", "stopped_early", "device")}}

    inputs = [pca, compose, *extracts.values(), *pair_stages.values(), *([alone] if alone else []),
              *(stage for stages in co_stages.values() for stage in stages)]
    return run_stage("distill", work_dir, identity, inputs, compute, force=force, quiet=quiet)


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


def shrink_to_backoff(table: np.ndarray, layout: Layout, tokenizers: dict[str, WordTokenizer], contexts: np.ndarray,
                      k: float) -> int:
    """After training, in place: each word row seen in n > 0 sentences becomes ``(n v + k u) / (n + k)``, ``u``
    being what the inference tokeniser gives that word were it unknown (its trained pieces, weighted as unknown
    words are), so a word known from one or two sentences leans on its composition. Returns the rows moved."""
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
    return shrink(words, composed, contexts, k, found)
