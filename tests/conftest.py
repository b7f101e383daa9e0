"""Shared fixtures: tiny corpora written by the tests, small build configurations."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

NOUNS = ["cat", "dog", "bird", "teacher", "student", "river", "city", "garden", "doctor", "child", "car", "house",
         "ship", "song", "book", "market", "forest", "mountain", "engine", "letter"]
VERBS = ["sees", "likes", "finds", "paints", "visits", "follows", "builds", "reads", "carries", "remembers"]
ADJS = ["small", "happy", "green", "old", "quiet", "bright", "strange", "heavy", "famous", "gentle"]


def make_sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.sample(NOUNS, 2)
        sentence = f"The {rng.choice(ADJS)} {a} {rng.choice(VERBS)} the {rng.choice(ADJS)} {b}"
        if i % 3 == 0:
            sentence += f" near the {rng.choice(NOUNS)}"
        if i % 7 == 0:
            sentence += " with goodness"
        out.append(sentence + f" number {i}.")
    return out


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(make_sentences(400)) + "\n", encoding="utf-8")
    return path


def small_build_args(corpus: Path, out: Path) -> list[str]:
    """CLI flags for a build that takes seconds on CPU with the real MiniLM teacher."""
    return ["build", "--teacher", "minilm", "--corpus", str(corpus), "--out", str(out), "--dim", "32",
            "--pca-sentences", "300", "--distill-steps", "60", "--batch-tokens", "512", "--eval-every", "20",
            "--unit-sentences", "64", "--checkpoint-seconds", "0", "--no-teacher-words", "--quiet"]
