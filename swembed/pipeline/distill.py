"""Stage 6, distill: refine the PCA'd table with the one training loop (``swembed.pipeline.train``).

Objectives: knowledge distillation (paper eq. 2-3) on each language's encoded sentences, towards the teacher
vectors cached by the extract stage (the teacher never runs here); for a multilingual table also the
contrastive loss (eq. 4-5) on each language pair's parallel sentences, optionally filtered by the teacher's
own cosine (the ``pairs`` stages). Every text is encoded with exactly the inference tokeniser (pieces for unknown words).

Artifact: ``table.npy`` (rows, d) float32, the best table by held-out loss, and ``history.json``.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.compose import Layout
from swembed.pipeline.config import DistillConfig
from swembed.pipeline.parallel import read_pairs
from swembed.pipeline.stage import StageResult, StageRun, run_stage
from swembed.runtime.tokenizer import TokenizationRules


def run_distill(config: DistillConfig, pca: StageResult, compose: StageResult, extracts: dict[str, StageResult],
                rules: dict[str, TokenizationRules], tokenizer_json: str, work_dir: Path,
                pair_stages: dict[tuple[str, str], StageResult] | None = None, seed: int = 0,
                device: str = "auto", checkpoint_seconds: float = 60.0, force: bool = False,
                quiet: bool = False) -> StageResult:
    """``pair_stages``: (language a, language b) -> its ``pairs`` stage (``swembed.pipeline.parallel``)."""
    pair_stages = pair_stages or {}
    identity = {**asdict(config), "seed": seed}
    if not config.center_targets:
        identity.pop("center_targets")  # caches from before the option stay valid

    def compute(run: StageRun) -> dict:
        import torch
        from tokenizers import Tokenizer

        from swembed.pipeline.train import (LoopSettings, PackedRows, centred, contrastive_objective, kd_objective,
                                            retrieval_accuracy, train)
        from swembed.teachers.base import pick_device

        dev = pick_device(device)
        table = np.load(pca.path / files.TABLE)
        tokenizers = Layout.read(compose.path).tokenizers(rules, Tokenizer.from_str(tokenizer_json))
        rng = np.random.default_rng(seed)
        objectives, stats = [], {}
        if config.kd_weight > 0:
            for lang, extract in extracts.items():
                sentences = files.read_lines(extract.path / files.TARGET_SENTENCES)
                targets = torch.as_tensor(np.load(extract.path / files.TARGETS), device=dev)
                if config.center_targets:
                    targets = centred(targets)
                packed = PackedRows(tokenizers[lang].encode_batch(sentences), dev)
                objectives.append(kd_objective(packed, targets, config.tau, config.kd_weight, f"kd {lang}",
                                               config.val_sentences, config.batch_size, rng, config.max_sentences,
                                               config.cell_size, seed))
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
        np.save(run.out / files.TABLE, best.astype(np.float32))
        (run.out / files.HISTORY).write_text(json.dumps(history, indent=1))
        for objective in objectives:
            if objective.name.startswith("contrastive"):
                stats[f"held-out retrieval {objective.name.split()[1]}"] = round(retrieval_accuracy(
                    best, objective), 4)
        return {**stats, **{k: history[k] for k in ("initial_val_loss", "best_val_loss", "best_step", "steps",
                                                      "train_examples", "stopped_early", "device")}}

    inputs = [pca, compose, *extracts.values(), *pair_stages.values()]
    return run_stage("distill", work_dir, identity, inputs, compute, force=force, quiet=quiet)
