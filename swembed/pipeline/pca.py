"""Stage 5, pca: sentence-level PCA with ABTT (paper 3.2), for one language or several (paper 3.3, appendix A).

M sentences per language (from those the teacher encoded) are represented by the mean of their rows with
the inference tokeniser; one PCA is fitted over all languages' sentences (the same number from each);
the first r = floor(H/100) components are dropped (ABTT: with several languages they carry language
identity) and the next d kept. The table is pre-transformed: E' = (E - mean) @ W. ``level = "word"`` fits
on the word rows instead (the paper's ablation); ``"none"`` keeps the composed table.

Artifact: ``table.npy`` (rows, d) float32; ``pca.npz`` (mean, every component sorted by variance,
explained variance ratio, r): the kept ones are ``components[r : r + d]``, so PCA without ABTT is a slice
of the same fit; with several languages, ``projection.npz`` (2-D views for the language plot) and the
language-cluster silhouettes in the stats (paper footnote 16).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.compose import Layout
from swembed.pipeline.config import BuildError, PCAConfig
from swembed.pipeline.corpus import rows_from_sources
from swembed.pipeline.stage import StageContext, StageResult, StageRun
from swembed.runtime import StaticEmbedder, WordTokenizer
from swembed.runtime.settings import stage_key
from swembed.runtime.tokenizer import TokenizationRules


def abtt_drop(teacher_dim: int, drop: int | None) -> int:
    """Components ABTT removes: the paper's r = floor(H / 100) unless set (0 disables ABTT)."""
    return teacher_dim // 100 if drop is None else drop


def check_dims(config: PCAConfig, teacher_dim: int) -> None:
    """Before any work: the kept dimensions must exist."""
    if config.level == "none":
        if config.dim != teacher_dim:
            raise BuildError(f"without PCA the table keeps the teacher's {teacher_dim} dimensions (--dim)")
        return
    drop = abtt_drop(teacher_dim, config.drop)
    if config.dim + drop > teacher_dim:
        raise BuildError(f"--dim {config.dim} is too large: the teacher has {teacher_dim} dimensions and ABTT drops "
                         f"{drop}, so at most {teacher_dim - drop} can be kept")


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
    """Each sentence as the (unnormalised) mean of its rows; sentences with no known word dropped."""
    batch = tokenizer.encode_batch(sentences)
    return StaticEmbedder(table, tokenizer).mean_rows(batch, normalize=False)[batch.lengths > 0]


def sample_sentences(sentences: list[str], n: int, seed: int) -> list[str]:
    """A seeded sample of ``n`` sentences, in their original order."""
    take = np.sort(np.random.default_rng(seed).permutation(len(sentences))[:n])
    return [sentences[i] for i in take]


def silhouette(x: np.ndarray, labels: np.ndarray, sample: int = 3000, seed: int = 0) -> float:
    """Mean silhouette coefficient (euclidean) of ``labels`` on a seeded sample of rows of ``x``."""
    rng = np.random.default_rng(seed)
    take = np.sort(rng.permutation(len(x))[:sample])
    x, labels = np.asarray(x[take], dtype=np.float64), labels[take]
    squared = (x * x).sum(1)
    dist = np.sqrt(np.maximum(squared[:, None] + squared[None, :] - 2 * x @ x.T, 0))
    classes = np.unique(labels)
    if len(classes) < 2:
        raise ValueError("silhouette needs at least two labels")
    mean_to = np.stack([dist[:, labels == c].sum(1) for c in classes], axis=1)
    sizes = np.array([(labels == c).sum() for c in classes])
    own = np.searchsorted(classes, labels)
    a = mean_to[np.arange(len(x)), own] / np.maximum(sizes[own] - 1, 1)
    others = mean_to / sizes
    others[np.arange(len(x)), own] = np.inf
    b = others.min(1)
    return float(np.mean((b - a) / np.maximum(np.maximum(a, b), 1e-12)))


def _plane(x: np.ndarray) -> np.ndarray:
    """The first two principal coordinates of ``x`` (for a 2-D picture)."""
    mean, components, _ = fit_pca(x)
    return (x - mean) @ components[:2].T


def language_views(data: np.ndarray, labels: np.ndarray, mean: np.ndarray, components: np.ndarray, drop: int,
                   dim: int, seed: int, out: Path) -> dict[str, float]:
    """Silhouettes of the language labels before PCA, after PCA without and with ABTT; 2-D views saved to ``out``."""
    centered = data - mean
    no_abtt = centered @ components[:dim].T
    with_abtt = centered @ components[drop : drop + dim].T
    sample = np.sort(np.random.default_rng(seed).permutation(len(data))[:3000])
    np.savez(out, labels=labels[sample], before=_plane(data[sample]), no_abtt=no_abtt[sample, :2],
             with_abtt=with_abtt[sample, :2])
    return {"before PCA": silhouette(data, labels), "PCA without ABTT": silhouette(no_abtt, labels),
            "PCA with ABTT": silhouette(with_abtt, labels)}


def fit_sentences(config: PCAConfig, extract: StageResult, corpus: StageResult) -> list[str]:
    """A language's sentences to fit on: those its teacher encoded (from ``[pca] sources`` only, when set)."""
    sentences = files.read_lines(extract.path / files.TARGET_SENTENCES)
    if not config.sources:
        return sentences
    return [sentences[i] for i in rows_from_sources(corpus, sentences, config.sources, "[pca] sources")]


def run_pca(ctx: StageContext, config: PCAConfig, compose: StageResult, extracts: dict[str, StageResult],
            rules: dict[str, TokenizationRules], tokenizer_json: str, corpora: dict[str, StageResult]) -> StageResult:
    """Stage 5 over the composed table, fitted on each language's encoded sentences (of its ``corpora``' chosen
    sources, with ``[pca] sources``)."""
    seed = ctx.seed
    identity = {**stage_key(config), "seed": seed}  # [pca] sources absent when unset (Key.UNLESS_DEFAULT)

    def compute(run: StageRun) -> dict:
        from tokenizers import Tokenizer

        table = np.load(compose.path / files.TABLE)
        check_dims(config, table.shape[1])
        if config.level == "none":
            np.save(run.out / files.TABLE, table.astype(np.float32))
            return {"level": "none", "dim": int(table.shape[1])}
        layout = Layout.read(compose.path)
        drop = abtt_drop(table.shape[1], config.drop)
        if config.level == "sentence":
            tokenizers = layout.tokenizers(rules, Tokenizer.from_str(tokenizer_json))
            blocks = [sentence_matrix(table, tokenizers[lang], sample_sentences(
                fit_sentences(config, extract, corpora[lang]), config.sentences, seed))
                for lang, extract in extracts.items()]
            n = min(len(b) for b in blocks)  # balanced: the same number of sentences per language
            data = np.concatenate([b[:n] for b in blocks])
            labels = np.repeat(np.arange(len(blocks)), n)
        else:
            data = table[: layout.pieces[0]]
            labels = None
        if len(data) <= config.dim:
            raise BuildError(f"PCA needs more than {config.dim} sentences, got {len(data)}")
        mean, components, ratio = fit_pca(data)
        kept = components[drop : drop + config.dim]
        np.save(run.out / files.TABLE, ((table - mean) @ kept.T).astype(np.float32))
        np.savez(run.out / files.PCA, mean=mean.astype(np.float32), components=components.astype(np.float32),
                 explained_variance_ratio=ratio, drop=drop, dim=config.dim)
        stats: dict[str, object] = {"fit_rows": int(len(data)), "drop": drop, "dim": config.dim,
                 "dropped_variance": round(float(ratio[:drop].sum()), 4),
                 "kept_variance": round(float(ratio[drop : drop + config.dim].sum()), 4)}
        if labels is not None and len(extracts) > 1:
            scores = language_views(data, labels, mean, components, drop, config.dim, seed,
                                    run.out / files.PROJECTION)
            stats["silhouette"] = {k: round(v, 4) for k, v in scores.items()}
        return stats

    return ctx.run("pca", identity, [compose, *extracts.values()], compute)


def kept_components(pca_file: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, kept components (d, H), dropped components (r, H)) of a pca artifact."""
    with np.load(pca_file) as pca:
        drop, dim = int(pca["drop"]), int(pca["dim"])
        return pca["mean"], pca["components"][drop : drop + dim], pca["components"][:drop]
