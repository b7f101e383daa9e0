"""Stage 5b, co-teacher: another teacher's pooled, L2-normalised vectors of the sentences the extract stage
encoded, in their order (one stage per co-teacher). Knowledge distillation then aims at all teachers' similarities,
each co-teacher's at its weight in standard units (``[coteacher] teachers``, ``weights``; ``joint_targets``, the
``targets`` hook of ``COTEACHER``, registered in ``swembed.pipeline.build``).
Artifact: ``targets.npy`` (N, H''); checkpointed every ``UNIT`` sentences, so a killed build resumes after its
last finished unit.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.config import BuildError, CoTeacherConfig
from swembed.pipeline.plan import seconds_per_size, spread
from swembed.pipeline.stage import PostTraining, load_checkpoint, teacher_identity
from swembed.runtime.folder import atomic_save_npy
from swembed.runtime.settings import stage_key

if TYPE_CHECKING:  # annotations only
    from swembed.pipeline.stage import Prepared, PrepareSources, StageContext, StageResult, StageRun

logger = logging.getLogger(__name__)
UNIT = 20_000
# sentences timed from each of three units left to encode, for the stage's estimate; it errs high (MiniLM on 12k
# WikiText-2 sentences in units of 2k: estimated at 65-71 s over four tries, took 53-54 s)
PROBE = 128


def run_coteacher(ctx: StageContext, extract: StageResult, teacher, unit: int = UNIT) -> StageResult:
    """Encode the ``extract`` artifact's target sentences with ``teacher``, checkpointing every ``unit``."""
    identity = teacher_identity(teacher)

    def compute(run: StageRun) -> dict:
        from tqdm import tqdm

        sentences = files.read_lines(extract.path / files.TARGET_SENTENCES)
        targets = np.lib.format.open_memmap(run.out / files.TARGETS, mode="w+", dtype=np.float32,
                                            shape=(len(sentences), teacher.pooled_dim))
        # progress in characters, not units: the sentences come sorted by length, so the last unit costs several
        # times the first and a count of units would promise too early an end
        starts = range(0, len(sentences), unit)
        parts = [run.partial / f"unit-{index:05d}.npy" for index in range(len(starts))]
        chars = [sum(map(len, sentences[start : start + unit])) for start in starts]
        done = [part.is_file() for part in parts]  # units finished before the build was killed
        left = [start for start, d in zip(starts, done) if not d]
        left_chars = sum(c for c, d in zip(chars, done) if not d)
        estimate = 0.0
        if left:  # timed on the first sentences of a short, a middle and a long unit left
            probes = [sentences[start : start + min(unit, PROBE)] for start in spread(left)]
            estimate = left_chars * seconds_per_size(teacher.encode, probes, [sum(map(len, p)) for p in probes])
        logger.info("coteacher: %s encodes %d of %d units (%s characters), ~%.0f min at the rate measured here",
                    teacher.describe()["name"], len(left), len(parts), f"{left_chars:,}", estimate / 60)
        progress = tqdm(total=sum(chars), initial=sum(chars) - left_chars, desc="co-teacher", unit="char",
                        unit_scale=True, disable=run.quiet)
        for index, start in enumerate(starts):
            batch = sentences[start : start + unit]
            vectors = load_checkpoint(parts[index], np.load, "coteacher") if done[index] else None
            if vectors is not None and len(vectors) != len(batch):
                raise BuildError(f"{parts[index]}: {len(vectors)} rows where the unit holds {len(batch)} "
                                 f"sentences (left by a build with another unit size); delete {run.partial}")
            if vectors is None:
                vectors = teacher.encode(batch).astype(np.float32)
                atomic_save_npy(parts[index], vectors)
                run.unit_done(index + 1)
                progress.update(chars[index])
            targets[start : start + len(batch)] = vectors
        progress.close()
        targets.flush()
        return {"sentences": len(sentences), "resumed_units": sum(done), "estimated_s": float(f"{estimate:.3g}")}

    return ctx.run("coteacher", identity, [extract], compute)


def _prepare(ctx: StageContext, config: CoTeacherConfig, sources: PrepareSources) -> Prepared:
    """One stage per co-teacher and language, one co-teacher in memory at a time; listed language by language."""
    made = []
    for name, _ in config.pairs():
        teacher = sources.load_teacher(name)
        made += [(f"coteacher {name} ({lang})", lang, run_coteacher(ctx, extract, teacher))
                 for lang, extract in sources.extracts.items()]
        del teacher
    return [item for lang in sources.extracts for item in made if item[1] == lang]


def _plan(config: CoTeacherConfig, words: int) -> list[str]:
    return [f"every encoded sentence through the co-teacher {name} ([coteacher] teachers; timed when it is loaded, "
            "cached after the first build)" for name, _ in config.pairs()]


def _targets(config: CoTeacherConfig, prepared: Prepared, own: np.ndarray) -> np.ndarray:
    """A language's KD targets joined with its co-teachers' vectors (``prepared``: its stages, in co-teacher order)."""
    co = [np.load(stage.path / files.TARGETS, mmap_mode="r") for _, _, stage in prepared]
    return joint_targets(own, co, [weight for _, weight in config.pairs()])


COTEACHER = PostTraining("coteacher", enabled=lambda config: bool(config.pairs()), prepare=_prepare,
                         # its [distill] keys before the section
                         identity=stage_key,  # co_teacher, co_teacher_weight: its [distill] keys before the section
                         plan=_plan, targets=_targets)


def joint_targets(own: np.ndarray, co: list[np.ndarray], weights: list[float], pairs: int = 20_000) -> np.ndarray:
    """The teachers' unit vectors side by side, scaled so that a target similarity is (1 - sum w) cos_own +
    sum_k w_k (s_own / s_k) cos_k, s a teacher's standard deviation of the cosine over random pairs of rows: each
    co-teacher weighs w_k in standard units, and the in-batch softmax stays as sharp as the teacher's own (e5's cosines
    span a third of mpnet's; unscaled they flatten the softmax and KD pulls the table apart)."""
    i, j = np.random.default_rng(0).integers(len(own), size=(2, pairs))
    spread = [np.einsum("nd,nd->n", vectors[i], vectors[j]).std() for vectors in (own, *co)]
    out = np.empty((len(own), own.shape[1] + sum(c.shape[1] for c in co)), dtype=np.float32)
    # scaled straight into out: no temporary copy of any
    np.multiply(own, np.sqrt(1 - sum(weights)), out=out[:, : own.shape[1]], casting="same_kind")
    start = own.shape[1]
    for vectors, weight, s in zip(co, weights, spread[1:]):
        np.multiply(vectors, np.sqrt(weight * spread[0] / s), out=out[:, start : start + vectors.shape[1]],
                    casting="same_kind")
        start += vectors.shape[1]
    return out
