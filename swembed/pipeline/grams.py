"""Stage 7, grams: fastText-style character n-gram rows for unknown words, fitted to the finished table.

Each word is the mean of its n-gram buckets (``swembed.runtime.tokenizer.char_gram_buckets``); the buckets'
rows G solve the ridge problem min ||A G - W||^2 + lambda ||G||^2 over every word row W of the table (A: words x
buckets, 1/g for each of a word's g n-grams), by conjugate gradients, one column per dimension, 32 at a time (in torch).
At inference an unknown word is the mean of its pieces' half and its grams' half (``WordTokenizer.backoff``).
Artifact: ``grams.npy`` (buckets, d) float32; ``GRAM_ROWS`` (registered in ``swembed.pipeline.build``) appends them to
the table as its ``grams`` rows.
"""
from __future__ import annotations

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.compose import Layout
from swembed.pipeline.config import GramsConfig
from swembed.pipeline.stage import PostTraining, StageContext, StageResult, StageRun
from swembed.runtime.settings import stage_key
from swembed.runtime.tokenizer import GRAM_SIZES, char_gram_buckets

RIDGE = 0.01  # STS-B dev, rarest 75% of words hidden, 2^18 buckets: 84.71 / 84.94 / 84.84 at ridge 1 / 0.01 / 0.001
ITERATIONS = 100


def gram_matrix(words: list[str], buckets: int):
    """(words, buckets) sparse: row i holds 1/g at each of word i's g n-gram buckets (repeats summed)."""
    from swembed._extras import require

    require("build", "scipy")
    import scipy.sparse as sp

    cols = [char_gram_buckets(word, buckets) for word in words]
    lengths = np.fromiter(map(len, cols), dtype=np.int64, count=len(cols))
    rows = np.repeat(np.arange(len(words)), lengths)
    values = np.repeat(1.0 / np.maximum(lengths, 1), lengths).astype(np.float32)
    flat = np.fromiter((c for word_cols in cols for c in word_cols), dtype=np.int64, count=int(lengths.sum()))
    return sp.csr_matrix((values, (rows, flat)), shape=(len(words), buckets), dtype=np.float32)


COLUMN_BLOCK = 32  # columns solved together: their slice of the iterate (buckets x 32 float32, 8 MB) stays in cache


def fit_grams(a, targets: np.ndarray, ridge: float = RIDGE, iterations: int = ITERATIONS) -> np.ndarray:
    """The gram rows G (buckets, d) of ``min ||a G - targets||^2 + ridge ||G||^2``, ``a`` a ``gram_matrix``
    (conjugate gradients on the normal equations, each column its own). The columns are independent, so they are
    solved ``COLUMN_BLOCK`` at a time, in torch: the products gather rows of the iterate at random bucket ids,
    which is memory-bound over all 256 columns and 2x faster over 32."""
    from swembed._extras import require

    require("build", "torch")  # robust eval and shrink fit gram rows too: a missing torch is one line, not a traceback
    import torch

    targets = np.asarray(targets, dtype=np.float32)
    a_rows, a_columns = _sparse_product(a), _sparse_product(a.T.tocsr())
    # copies: a block may be all of a read-only (memory-mapped) array, which torch must not share
    columns = [torch.tensor(targets[:, i : i + COLUMN_BLOCK]) for i in range(0, targets.shape[1], COLUMN_BLOCK)]
    blocks = [_conjugate_gradients(a_rows, a_columns, block, ridge, iterations) for block in columns]
    return np.concatenate(blocks, axis=1) if blocks else np.zeros((a.shape[1], 0), dtype=np.float32)


def _sparse_product(matrix):
    """``matrix @ x`` for a scipy CSR ``matrix`` and a dense torch ``x``, as an ``embedding_bag`` sum (each row of
    the matrix a bag of x's rows, weighted by its values): about 3-5x torch's sparse CSR product on an AVX2-only
    AMD EPYC for the grams' shapes (reports/build-levers.md)."""
    import torch
    import torch.nn.functional as F

    ids = torch.from_numpy(matrix.indices.astype(np.int64))
    offsets = torch.from_numpy(matrix.indptr[:-1].astype(np.int64))
    values = torch.from_numpy(np.asarray(matrix.data, dtype=np.float32))
    return lambda x: F.embedding_bag(ids, x, offsets, mode="sum", per_sample_weights=values)


def _conjugate_gradients(a, a_t, targets, ridge: float, iterations: int) -> np.ndarray:
    """CG on ``(a^T a + ridge) G = a^T targets``, every column its own step sizes (``a``, ``a_t``: the products)."""
    import torch

    residual = a_t(targets)
    grams = torch.zeros((len(residual), targets.shape[1]), dtype=torch.float32)
    direction = residual.clone()
    norm = (residual * residual).sum(0)
    for _ in range(iterations):
        product = a_t(a(direction)).add_(direction, alpha=ridge)
        step = norm / (direction * product).sum(0).clamp_min(1e-30)
        grams.addcmul_(direction, step)
        residual.sub_(product * step)
        new_norm = (residual * residual).sum(0)
        direction = residual + direction * (new_norm / norm.clamp_min(1e-30))
        norm = new_norm
    return grams.numpy()


def run_grams(ctx: StageContext, config: GramsConfig, table: StageResult, compose: StageResult) -> StageResult:
    """Fit ``config.buckets`` gram rows to the word rows of ``table`` (the distill or pca artifact)."""
    buckets = config.buckets
    identity = {**stage_key(config), "sizes": list(GRAM_SIZES), "ridge": RIDGE, "iterations": ITERATIONS}

    def compute(run: StageRun) -> dict:
        layout = Layout.read(compose.path)
        rows = sorted({row for start, end in layout.languages.values() for row in range(start, end)})
        words = np.asarray(np.load(table.path / files.TABLE, mmap_mode="r")[rows], dtype=np.float32)
        a = gram_matrix([layout.labels[row] for row in rows], buckets)
        grams = fit_grams(a, words)
        np.save(run.out / files.GRAMS, grams)
        residual = np.linalg.norm(a @ grams - words) / np.linalg.norm(words)
        return {"words": len(rows), "relative residual": round(float(residual), 4)}

    return ctx.run("grams", identity, [table, compose], compute)


def _rows(ctx: StageContext, config: GramsConfig, table: StageResult,
          compose: StageResult) -> tuple[StageResult, np.ndarray, list[str]]:
    stage = run_grams(ctx, config, table, compose)
    return stage, np.load(stage.path / files.GRAMS), [f"<gram {i}>" for i in range(config.buckets)]


GRAM_ROWS = PostTraining("grams", enabled=lambda config: bool(config.buckets), rows=_rows)
