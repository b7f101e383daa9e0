"""Stage 4, pca: sentence-level PCA with ABTT (paper 3.2).

M sentences (from those the extract stage chose) are represented by the mean of their word vectors
with the inference tokeniser; PCA is fitted on them; the first r = floor(H/100) components are
dropped (ABTT) and the next d kept. The table is pre-transformed: E' = (E - mean) @ W.
``level="word"`` fits on the word table instead (the paper's ablation).

Artifact: ``table.npy`` (V, d) float32 and ``pca.npz`` (mean, components (d, H), explained variance).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from swembed.pipeline.extract import read_extract
from swembed.pipeline.stage import StageResult, StageRun, run_stage
from swembed.runtime import StaticEmbedder, WordTokenizer

TABLE_FILE = "table.npy"
PCA_FILE = "pca.npz"


def abtt_drop(teacher_dim: int, drop: int | None) -> int:
    """Components ABTT removes: the paper's r = floor(H / 100) unless set (0 disables ABTT)."""
    return teacher_dim // 100 if drop is None else drop


class PCAConfigError(ValueError):
    pass


@dataclass
class PCAConfig:
    dim: int = 256
    drop: int | None = None  # None: floor(H / 100), the paper's rule; 0 disables ABTT
    sentences: int = 100_000
    level: str = "sentence"  # "sentence", "word", or "none" (the extracted table as it is: an ablation)
    seed: int = 0

    def resolved_drop(self, teacher_dim: int) -> int:
        return abtt_drop(teacher_dim, self.drop)

    def validate(self, teacher_dim: int) -> None:
        if self.level not in ("sentence", "word", "none"):
            raise PCAConfigError(f"PCA level must be 'sentence', 'word' or 'none', got {self.level!r}")
        if self.level == "none":
            if self.dim != teacher_dim:
                raise PCAConfigError(f"without PCA the table keeps the teacher's {teacher_dim} dimensions (--dim)")
            return
        drop = self.resolved_drop(teacher_dim)
        if self.dim < 1 or self.dim + drop > teacher_dim:
            raise PCAConfigError(
                f"--dim {self.dim} is too large: the teacher has {teacher_dim} dimensions and ABTT drops {drop}, "
                f"so at most {teacher_dim - drop} can be kept"
            )


def fit_pca(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, components sorted by variance (H, H) as rows, explained variance ratio)."""
    x = np.asarray(matrix, dtype=np.float64)
    mean = x.mean(axis=0)
    cov = np.cov(x - mean, rowvar=False)
    values, vectors = np.linalg.eigh(cov)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    # Fix the sign of each component (largest-magnitude loading positive) so results are reproducible.
    signs = np.sign(vectors[np.abs(vectors).argmax(axis=0), np.arange(vectors.shape[1])])
    vectors = vectors * np.where(signs == 0, 1, signs)
    return mean, vectors.T, values / values.sum()


def sentence_matrix(table: np.ndarray, tokenizer: WordTokenizer, sentences: list[str]) -> np.ndarray:
    """Each sentence as the (unnormalised) mean of its word vectors; sentences with no known word dropped."""
    ids = [i for i in tokenizer.batch_ids(sentences) if i]
    return StaticEmbedder(table, tokenizer).encode_ids(ids, normalize=False)


def run_pca(config: PCAConfig, extract: StageResult, make_tokenizer, work_dir: Path,
            force: bool = False, quiet: bool = False) -> StageResult:
    def compute(run: StageRun) -> dict:
        table, sentences, _ = read_extract(extract.path)
        config.validate(table.shape[1])
        if config.level == "none":
            np.save(run.out / TABLE_FILE, table.astype(np.float32))
            return {"level": "none", "dim": int(table.shape[1])}
        drop = config.resolved_drop(table.shape[1])
        if config.level == "sentence":
            rng = np.random.default_rng(config.seed)
            take = rng.permutation(len(sentences))[: config.sentences]
            data = sentence_matrix(table, make_tokenizer(), [sentences[i] for i in np.sort(take)])
        else:
            data = table
        if len(data) <= config.dim:
            raise PCAConfigError(f"PCA needs more than {config.dim} sentences, got {len(data)}")
        mean, components, ratio = fit_pca(data)
        kept = components[drop : drop + config.dim]
        np.save(run.out / TABLE_FILE, ((table - mean) @ kept.T).astype(np.float32))
        np.savez(run.out / PCA_FILE, mean=mean.astype(np.float32), components=kept.astype(np.float32),
                 dropped=components[:drop].astype(np.float32), explained_variance_ratio=ratio)
        return {"fit_rows": int(len(data)), "drop": drop, "dim": config.dim,
                "dropped_variance": round(float(ratio[:drop].sum()), 4),
                "kept_variance": round(float(ratio[drop : drop + config.dim].sum()), 4)}

    return run_stage("pca", work_dir, asdict(config), [extract], compute, force=force, quiet=quiet)
