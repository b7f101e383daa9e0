"""Stages of a bilingual / multilingual build (paper 3.3, 4.4, appendix A).

* ``crosspca``: one sentence-level PCA over the concatenated sentence vectors of all languages (the same
  number of sentences from each), ABTT dropping the first r = floor(H/100) components, which carry
  language identity; every language's table is pre-transformed with it. Silhouette scores of the
  language clusters are recorded before PCA, after PCA without ABTT and with ABTT (paper footnote 16).
* ``contrastive``: the joint table refined on parallel pairs with the symmetric in-batch contrastive
  loss (eq. 4-5, tau 0.05, batch 128), early-stopped on held-out pairs.

Artifacts: ``crosspca``: ``table.npy`` (all languages' rows, in language order), ``pca.npz`` and
``projection.npz`` (2-D views for the language plot); ``contrastive``: ``table.npy``, ``history.json``.
"""
from __future__ import annotations

import gzip
import json
import logging
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from swembed.pipeline.pca import abtt_drop, fit_pca, sentence_matrix
from swembed.pipeline.stage import StageResult, StageRun, run_stage

logger = logging.getLogger(__name__)
TABLE_FILE = "table.npy"


@dataclass
class CrossPCAConfig:
    dim: int = 256
    drop: int | None = None  # None: floor(H / 100)
    sentences_per_language: int = 30_000
    seed: int = 0


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


def run_crosspca(config: CrossPCAConfig, extracts: dict[str, StageResult], make_tokenizers, work_dir: Path,
                 force: bool = False, quiet: bool = False) -> StageResult:
    """``make_tokenizers()`` -> {lang: WordTokenizer over that language's rows (0-based within its table)}."""
    from swembed.pipeline.extract import read_extract

    def compute(run: StageRun) -> dict:
        tokenizers = make_tokenizers()
        rng = np.random.default_rng(config.seed)
        tables, blocks, labels = {}, [], []
        for number, (lang, extract) in enumerate(extracts.items()):
            table, sentences, _ = read_extract(extract.path)
            tables[lang] = table
            take = np.sort(rng.permutation(len(sentences))[: config.sentences_per_language])
            matrix = sentence_matrix(table, tokenizers[lang], [sentences[i] for i in take])
            blocks.append(matrix)
            labels.append(np.full(len(matrix), number))
        n = min(len(b) for b in blocks)  # balanced: the same number of sentences per language
        blocks = [b[:n] for b in blocks]
        data, labels = np.concatenate(blocks), np.concatenate([lab[:n] for lab in labels])
        hidden = data.shape[1]
        drop = abtt_drop(hidden, config.drop)
        if config.dim + drop > hidden:
            raise ValueError(f"--dim {config.dim} is too large: {hidden} dims, ABTT drops {drop}")
        mean, components, ratio = fit_pca(data)
        centered = data - mean
        no_abtt = centered @ components[: config.dim].T
        with_abtt = centered @ components[drop : drop + config.dim].T
        scores = {"before PCA": silhouette(data, labels), "PCA without ABTT": silhouette(no_abtt, labels),
                  "PCA with ABTT": silhouette(with_abtt, labels)}
        kept = components[drop : drop + config.dim]
        joint = np.concatenate([(tables[lang] - mean) @ kept.T for lang in extracts]).astype(np.float32)
        np.save(run.out / TABLE_FILE, joint)
        np.savez(run.out / "pca.npz", mean=mean.astype(np.float32), components=kept.astype(np.float32),
                 dropped=components[:drop].astype(np.float32), explained_variance_ratio=ratio)
        sample = np.sort(rng.permutation(len(data))[:3000])
        np.savez(run.out / "projection.npz", labels=labels[sample], before=_plane(data[sample]),
                 no_abtt=no_abtt[sample, :2], with_abtt=with_abtt[sample, :2])
        return {"languages": list(extracts), "sentences_per_language": int(n), "drop": drop, "dim": config.dim,
                "dropped_variance": round(float(ratio[:drop].sum()), 4),
                "silhouette": {k: round(v, 4) for k, v in scores.items()},
                "rows": {lang: int(len(tables[lang])) for lang in extracts}}

    return run_stage("crosspca", work_dir, asdict(config), list(extracts.values()), compute, force=force,
                     quiet=quiet)


def _plane(x: np.ndarray) -> np.ndarray:
    """The first two principal coordinates of ``x`` (for a 2-D picture)."""
    mean, components, _ = fit_pca(x)
    return (x - mean) @ components[:2].T


# ----------------------------------------------------------------------------------------------- contrastive


@dataclass
class ContrastiveConfig:
    tau: float = 0.05
    batch_size: int = 128
    lr: float = 1e-3
    max_steps: int = 20_000
    eval_every: int = 250
    patience: int = 8
    held_out: int = 2000
    min_teacher_similarity: float | None = None  # filter pairs by the teacher's cosine (None: no filter)
    max_pairs: int | None = None
    seed: int = 0


def contrastive_loss(a, b, tau: float):
    """Symmetric in-batch InfoNCE over L2-normalised rows (paper eq. 4-5): row i of ``a`` and of ``b``
    are a translation pair; every other row of the batch is a negative, in both directions."""
    import torch
    import torch.nn.functional as F

    logits = F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T / tau
    target = torch.arange(len(a), device=a.device)
    return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2


_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef\u3000-\u303f"
_CJK_GAP = re.compile(f"(?<=[{_CJK}]) +(?=[{_CJK}])")


def _lines(path: str) -> list[str]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        return [line.rstrip("\n") for line in handle]


_NOT_WORD = re.compile(r"[\W_]+")


def loose_key(text: str) -> str:
    """Case-folded text without spaces or punctuation: what evaluation-set exclusion compares, so tokenised or
    re-punctuated copies of a test sentence (e.g. Tanaka's lower-cased English) are caught too."""
    return _NOT_WORD.sub("", text.casefold())


def read_parallel(paths: list[str], exclude: set[str] = frozenset()) -> list[tuple[str, str]]:
    """Translation pairs from ``english<TAB>other`` files (plain or .gz) or from ``EN_FILE::OTHER_FILE``
    line-aligned file pairs. Spaces between CJK characters are removed (segmented corpora such as Tanaka);
    pairs whose either side's ``loose_key`` is in ``exclude`` (the evaluation sentences) are dropped, as
    are exact repeats."""
    pairs, seen = [], set()
    for path in paths:
        if "::" in path:
            left, right = path.split("::", 1)
            a_lines, b_lines = _lines(left), _lines(right)
            if len(a_lines) != len(b_lines):
                raise ValueError(f"{left} has {len(a_lines)} lines but {right} has {len(b_lines)}")
            rows = zip(a_lines, b_lines)
        else:
            rows = (line.split("\t")[:2] for line in _lines(path) if line.count("\t") >= 1)
        for a, b in rows:
            a, b = a.strip(), _CJK_GAP.sub("", b.strip())
            if not a or not b or (a, b) in seen or loose_key(a) in exclude or loose_key(b) in exclude:
                continue
            seen.add((a, b))
            pairs.append((a, b))
    return pairs


@dataclass
class _PairSet:
    """One language pair's tokenised pairs, split into training and held-out rows."""

    left: object
    right: object
    n_train: int
    n_held: int


def run_contrastive(config: ContrastiveConfig, crosspca: StageResult,
                    pair_sets: dict[tuple[str, str], list[tuple[str, str]]], make_tokenizers, teacher, work_dir: Path,
                    force: bool = False, quiet: bool = False) -> StageResult:
    """Refine the joint table on translation pairs: ``pair_sets`` maps (language a, language b) to pairs of
    (a text, b text); ``make_tokenizers()`` maps each language to a WordTokenizer over its rows of the joint
    table. With several language pairs the steps go round-robin over them (joint multilingual training),
    and the held-out loss is their mean."""
    from swembed.pipeline.stage import text_digest

    digests = {f"{a}-{b}": text_digest("\n".join(f"{x}\t{y}" for x, y in pairs)) for (a, b), pairs in pair_sets.items()}
    if len(pair_sets) == 1:
        (langs, _), = pair_sets.items()
        identity = {**asdict(config), "langs": list(langs), "pairs": next(iter(digests.values()))}
    else:
        identity = {**asdict(config), "pair_sets": digests}

    def compute(run: StageRun) -> dict:
        import torch

        from swembed.pipeline.distill import PackedIds

        table = np.load(crosspca.path / TABLE_FILE)
        tokenizers = make_tokenizers()
        rng = np.random.default_rng(config.seed)
        stats: dict = {}
        sets: list[_PairSet] = []
        for (a, b), pairs in pair_sets.items():
            kept = list(pairs)
            stats[f"pairs_read {a}-{b}"] = len(kept)
            if config.min_teacher_similarity is not None:
                sims = _teacher_similarity(teacher, kept)
                kept = [p for p, s in zip(kept, sims) if s >= config.min_teacher_similarity]
                stats[f"pairs_after_teacher_filter {a}-{b}"] = len(kept)
            order = rng.permutation(len(kept))[: config.max_pairs or None]
            left = [tokenizers[a].ids(kept[i][0]) for i in order]
            right = [tokenizers[b].ids(kept[i][1]) for i in order]
            usable = [k for k in range(len(order)) if left[k] and right[k]]
            n = len(usable)
            held = min(config.held_out, n // 5)
            if n - held < config.batch_size:
                raise ValueError(f"only {n} usable {a}-{b} parallel pairs; contrastive training needs more than "
                                 f"{config.batch_size + held}")
            sets.append(_PairSet(PackedIds([left[k] for k in usable]), PackedIds([right[k] for k in usable]),
                                 n - held, held))
            stats[f"pairs_used {a}-{b}"], stats[f"held_out {a}-{b}"] = n - held, held
        weights = torch.nn.Embedding.from_pretrained(torch.from_numpy(table.copy()), freeze=False, sparse=True)
        optimizer = torch.optim.SparseAdam(weights.parameters(), lr=config.lr)
        bag = torch.nn.functional.embedding_bag

        def encode(packed, rows: np.ndarray) -> torch.Tensor:
            flat, offsets = packed.batch(rows)
            return bag(flat, weights.weight, offsets, mode="mean", sparse=True)

        def validation() -> float:
            losses = []
            with torch.no_grad():
                for pair_set in sets:
                    rows = np.arange(pair_set.n_train, pair_set.n_train + pair_set.n_held)
                    losses += [contrastive_loss(encode(pair_set.left, rows[i : i + config.batch_size]),
                                                encode(pair_set.right, rows[i : i + config.batch_size]),
                                                config.tau).item()
                               for i in range(0, pair_set.n_held - config.batch_size + 1, config.batch_size)]
            return float(np.mean(losses)) if losses else float("nan")

        history = {"steps": [0], "val_loss": [validation()]}
        best, best_table, bad, step, start = history["val_loss"][0], weights.weight.detach().clone(), 0, 0, time.time()
        epochs: list[list[np.ndarray]] = [[] for _ in sets]
        while step < config.max_steps and bad < config.patience:
            for _ in range(config.eval_every):
                which = step % len(sets)
                pair_set, epoch = sets[which], epochs[which]
                if not epoch:  # a fresh shuffle of this set's training pairs, cut into batches
                    order = rng.permutation(pair_set.n_train)
                    epoch += [order[i : i + config.batch_size]
                              for i in range(0, len(order) - config.batch_size + 1, config.batch_size)][::-1]
                rows = epoch.pop()
                loss = contrastive_loss(encode(pair_set.left, rows), encode(pair_set.right, rows), config.tau)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step += 1
            value = validation()
            history["steps"].append(step)
            history["val_loss"].append(value)
            if value < best - 1e-4:
                best, best_table, bad = value, weights.weight.detach().clone(), 0
            else:
                bad += 1
            if not quiet:
                logger.info("contrastive step %d: held-out loss %.4f (best %.4f)", step, value, best)
        np.save(run.out / TABLE_FILE, best_table.numpy().astype(np.float32))
        (run.out / "history.json").write_text(json.dumps(history))
        best_step = history["steps"][int(np.argmin(history["val_loss"]))]
        return {**stats, "steps": step, "best_step": best_step, "val_loss_start": round(history["val_loss"][0], 4),
                "val_loss_best": round(best, 4), "train_s": round(time.time() - start, 1)}

    return run_stage("contrastive", work_dir, identity, [crosspca], compute, force=force, quiet=quiet)


def _teacher_similarity(teacher, pairs: list[tuple[str, str]], batch: int = 256) -> np.ndarray:
    sims = []
    for i in range(0, len(pairs), batch):
        chunk = pairs[i : i + batch]
        a = teacher.encode([p[0] for p in chunk])
        b = teacher.encode([p[1] for p in chunk])
        sims.append(np.sum(a * b, axis=1))  # teachers return L2-normalised vectors
    return np.concatenate(sims) if sims else np.zeros(0)
