"""A post-training stage brings its own training objective: registered beside ``POST_TRAINING`` in a few lines,
without a change to the distill stage or the build driver (on a tiny random teacher: no real one is loaded)."""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import torch
from conftest import make_sentences
from llm_fixtures import llm_folder

PULLED = "cat"


@dataclass
class PullConfig:
    weight: float = 2.0


def pull_objectives(section: PullConfig, prepared, training) -> list:
    """One objective: the word ``PULLED`` alone, pulled towards the all-ones direction."""
    from swembed.pipeline.train import Objective, PackedRows

    texts = PackedRows(training.tokenizers["en"].encode_batch([PULLED] * 40), training.device)

    def loss(vectors: list[torch.Tensor], rows: torch.Tensor) -> torch.Tensor:
        direction = torch.nn.functional.normalize(torch.ones_like(vectors[0][0]), dim=0)
        return (1 - vectors[0] @ direction).mean()

    training.stats["pulled texts"] = len(texts)
    return [Objective("pull", section.weight, np.arange(30), [np.arange(30, 40)], (texts,), loss, selects=False)]


def test_a_new_post_training_stage_trains_its_own_objective(tmp_path):
    from swembed.pipeline.api import make_config
    from swembed.pipeline.build import POST_TRAINING, build
    from swembed.pipeline.stage import PostTraining

    pull = PostTraining("pull", enabled=lambda section: section.weight > 0, section_of=lambda config: PullConfig(),
                        identity=lambda section: {"pull_weight": section.weight}, objectives=pull_objectives)
    teacher = llm_folder(tmp_path / "teacher", "mistral", {"kind": "decoder", "bidirectional": True})
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(make_sentences(400)) + "\n", encoding="utf-8")

    def table_of(name: str, stages) -> tuple[np.ndarray, dict]:
        config = make_config(str(teacher), str(corpus), 32, tmp_path / name, work_dir=str(tmp_path / "work"),
                             checkpoint_seconds=0, pca={"sentences": 300}, distill={"max_steps": 60, "eval_every": 20},
                             extract={"batch_tokens": 512, "unit_sentences": 64}, vocab={"teacher_words": False})
        report = build(config, quiet=True, post_training_stages=stages)
        distill = tmp_path / "work" / report["build"]["stages"]["distill"]["artifact"]
        return np.load(tmp_path / name / "embeddings.npy"), {
            "history": json.loads((distill / "history.json").read_text()),
            "stats": report["build"]["stages"]["distill"]["stats"], "folder": distill}

    plain, before = table_of("plain", POST_TRAINING)
    pulled, after = table_of("pulled", (*POST_TRAINING, pull))
    assert after["folder"] != before["folder"]  # its identity gives the distill stage another cache key
    assert set(before["history"]["initial_parts"]) == {"kd en"}
    assert set(after["history"]["initial_parts"]) == {"kd en", "pull"}
    assert after["history"]["train_examples"]["pull"] == 30 and after["stats"]["pulled texts"] == 40
    assert after["history"]["initial_val_loss"] == before["history"]["initial_val_loss"]  # it does not select
    rounds = after["history"]["rounds"]
    assert rounds[-1]["val_parts"]["pull"] < after["history"]["initial_parts"]["pull"]
    words = (tmp_path / "plain" / "vocab.txt").read_text(encoding="utf-8").split("\n")
    row = words.index(PULLED)
    direction = np.ones(plain.shape[1]) / np.sqrt(plain.shape[1])

    def cosine(table: np.ndarray) -> float:
        return float(table[row] @ direction / np.linalg.norm(table[row]))

    assert cosine(pulled) > cosine(plain) + 0.02  # Adam at lr 1e-3 for 60 steps: about 0.05 here
