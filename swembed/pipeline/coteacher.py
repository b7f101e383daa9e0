"""Stage 5c, co-teacher: a second teacher's pooled, L2-normalised vectors of the sentences the extract stage
encoded, in their order. Knowledge distillation then aims at both teachers' similarities, the co-teacher's at
weight w in standard units (``[distill] co_teacher``, ``co_teacher_weight`` = w; ``joint_targets``).
Artifact: ``targets.npy`` (N, H''); checkpointed every ``UNIT`` sentences, so a killed build resumes after its
last finished unit.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.stage import StageResult, StageRun, run_stage
from swembed.runtime.folder import atomic_save_npy

UNIT = 20_000


def run_coteacher(extract: StageResult, teacher, work_dir: Path, force: bool = False,
                  quiet: bool = False) -> StageResult:
    """Encode the ``extract`` artifact's target sentences with ``teacher``."""
    identity = {"teacher": {k: v for k, v in teacher.describe().items() if k != "path"}}

    def compute(run: StageRun) -> dict:
        from tqdm import tqdm

        sentences = files.read_lines(extract.path / files.TARGET_SENTENCES)
        targets = np.lib.format.open_memmap(run.out / files.TARGETS, mode="w+", dtype=np.float32,
                                            shape=(len(sentences), teacher.pooled_dim))
        for unit, start in enumerate(tqdm(range(0, len(sentences), UNIT), desc="co-teacher", disable=quiet)):
            part = run.partial / f"unit-{unit:05d}.npy"
            if part.is_file():  # finished before the build was killed
                vectors = np.load(part)
            else:
                vectors = teacher.encode(sentences[start : start + UNIT]).astype(np.float32)
                atomic_save_npy(part, vectors)
                run.unit_done(unit + 1)
            targets[start : start + UNIT] = vectors
        targets.flush()
        return {"sentences": len(sentences)}

    return run_stage("coteacher", work_dir, identity, [extract], compute, force=force, quiet=quiet)


def joint_targets(own: np.ndarray, co: np.ndarray, weight: float, pairs: int = 20_000) -> np.ndarray:
    """Both teachers' unit vectors side by side, scaled so that a target similarity is (1 - w) cos_own +
    w (s_own / s_co) cos_co, s a teacher's standard deviation of the cosine over random pairs of rows: the co-teacher
    weighs w in standard units, and the in-batch softmax stays as sharp as the teacher's own (e5's cosines span a
    third of mpnet's; unscaled they flatten the softmax and KD pulls the table apart)."""
    i, j = np.random.default_rng(0).integers(len(own), size=(2, pairs))
    spread = [np.einsum("nd,nd->n", vectors[i], vectors[j]).std() for vectors in (own, co)]
    out = np.empty((len(own), own.shape[1] + co.shape[1]), dtype=np.float32)
    # scaled straight into out: no temporary copy of either
    np.multiply(own, np.sqrt(1 - weight), out=out[:, : own.shape[1]], casting="same_kind")
    np.multiply(co, np.sqrt(weight * spread[0] / spread[1]), out=out[:, own.shape[1] :], casting="same_kind")
    return out
