"""Stage 5, distill: knowledge distillation of sentence similarities (paper eq. 2-3).

For a batch of K sentences, the student's in-batch cosine similarities (diagonal excluded,
temperature tau) are trained towards the teacher's with cross-entropy (= KL up to a constant).
The student encodes with exactly the inference tokeniser (mean of word vectors, then L2 norm).
Teacher targets are the pooled embeddings cached by the extract stage: the teacher never runs here.
Sparse-aware Adam (only rows in the batch move), early stopping on a held-out validation loss,
checkpoints that resume to the same result.

Artifact: ``table.npy`` (V, d) float32, the best table by validation loss, and ``history.json``.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from swembed.pipeline.extract import read_extract
from swembed.pipeline.stage import StageResult, StageRun, run_stage

logger = logging.getLogger(__name__)
TABLE_FILE = "table.npy"
HISTORY_FILE = "history.json"
_STATE = "state.pt"


@dataclass
class DistillConfig:
    batch_size: int = 128
    tau: float = 0.05
    lr: float = 1e-3
    max_steps: int = 100_000
    eval_every: int = 250
    patience: int = 10  # rounds; sparse updates make the validation loss noisy, 5 stopped too early
    val_sentences: int = 5_000
    seed: int = 0
    optimizer: str = "sparse_adam"  # "sparse_adam": only the rows in a batch move (lazy Adam); "adam": dense, fused

    def validate(self) -> None:
        if self.optimizer not in ("sparse_adam", "adam"):
            raise ValueError(f"distill optimizer must be 'sparse_adam' or 'adam', got {self.optimizer!r}")


def kd_loss(student: torch.Tensor, teacher: torch.Tensor, tau: float) -> torch.Tensor:
    """Eq. 2-3: cross-entropy of the teacher's in-batch similarity softmax to the student's, j != i.

    Both inputs are (K, d) L2-normalised rows; dimensions may differ between them.
    """
    k = student.shape[0]
    off = ~torch.eye(k, dtype=torch.bool, device=student.device)
    s = (student @ student.T / tau)[off].view(k, k - 1)
    t = (teacher @ teacher.T / tau)[off].view(k, k - 1)
    return -(t.softmax(dim=-1) * s.log_softmax(dim=-1)).sum(dim=-1).mean()


class PackedIds:
    """Token id lists packed flat, for fast EmbeddingBag batches."""

    def __init__(self, id_lists: list[list[int]]) -> None:
        self.lengths = np.fromiter((len(x) for x in id_lists), dtype=np.int64, count=len(id_lists))
        self.starts = np.concatenate(([0], np.cumsum(self.lengths)[:-1]))
        self.flat = np.fromiter((i for x in id_lists for i in x), dtype=np.int64, count=int(self.lengths.sum()))

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = self.lengths[rows]
        ids = np.concatenate([self.flat[s : s + n] for s, n in zip(self.starts[rows], lengths)])
        offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        return torch.from_numpy(ids), torch.from_numpy(offsets)


def _round_batches(rng: np.random.Generator, n_train: int, steps: int, batch: int) -> np.ndarray:
    need = steps * batch
    order = np.concatenate([rng.permutation(n_train) for _ in range(-(-need // n_train))])[:need]
    return order.reshape(steps, batch)


def _save_state(path: Path, state: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def train_distill(config: DistillConfig, table: np.ndarray, ids: PackedIds, targets: np.ndarray,
                  partial: Path, checkpoint_seconds: float, on_unit, quiet: bool) -> tuple[np.ndarray, dict]:
    """Train the table; returns the best table and the training history."""
    from tqdm.auto import tqdm

    keep = np.nonzero(ids.lengths > 0)[0]
    rng = np.random.default_rng(config.seed)
    keep = keep[rng.permutation(len(keep))]
    n_val = min(config.val_sentences, len(keep) // 10)
    if len(keep) - n_val < config.batch_size or n_val < 2:
        raise ValueError(f"distillation needs at least {config.batch_size + 2} sentences with known words, "
                         f"got {len(keep)}")
    val_rows, train_rows = np.sort(keep[:n_val]), keep[n_val:]
    config.validate()
    sparse = config.optimizer == "sparse_adam"
    bag = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(np.array(table, dtype=np.float32)),
                                                freeze=False, mode="mean", sparse=sparse)
    optimizer = (torch.optim.SparseAdam(bag.parameters(), lr=config.lr) if sparse
                 else torch.optim.Adam(bag.parameters(), lr=config.lr, fused=True))
    targets_t = torch.from_numpy(np.array(targets, dtype=np.float32))

    def student(rows: np.ndarray) -> torch.Tensor:
        return torch.nn.functional.normalize(bag(*ids.batch(rows)), dim=-1)

    @torch.no_grad()
    def validation_loss() -> float:
        losses = [kd_loss(student(chunk), targets_t[chunk], config.tau).item()
                  for chunk in np.array_split(val_rows, max(1, len(val_rows) // config.batch_size))]
        return float(np.mean(losses))

    state_path = partial / _STATE
    if state_path.is_file():
        state = torch.load(state_path, weights_only=False)
        bag.weight.data.copy_(state["weight"])
        optimizer.load_state_dict(state["optimizer"])
        best, history = state["best"], state["history"]
        logger.info("distill: resuming after round %d", len(history["rounds"]))
    else:
        best = {"loss": validation_loss(), "step": 0, "weight": bag.weight.detach().clone()}
        history = {"initial_val_loss": best["loss"], "rounds": [], "bad_rounds": 0}
    max_rounds = -(-config.max_steps // config.eval_every)
    last_save = time.time()
    bar = tqdm(total=max_rounds * config.eval_every, initial=len(history["rounds"]) * config.eval_every,
               unit="step", desc="distill", disable=quiet)
    t0 = time.time()
    for r in range(len(history["rounds"]), max_rounds):
        if history["bad_rounds"] >= config.patience:
            break
        steps = min(config.eval_every, config.max_steps - r * config.eval_every)
        batches = _round_batches(np.random.default_rng([config.seed, r]), len(train_rows), steps, config.batch_size)
        train_losses = []
        for rows in batches:
            rows = train_rows[rows]
            loss = kd_loss(student(rows), targets_t[rows], config.tau)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            train_losses.append(loss.item())
        bar.update(steps)
        val = validation_loss()
        step = r * config.eval_every + steps
        history["rounds"].append({"step": step, "train_loss": float(np.mean(train_losses)), "val_loss": val})
        if val < best["loss"]:
            best = {"loss": val, "step": step, "weight": bag.weight.detach().clone()}
            history["bad_rounds"] = 0
        else:
            history["bad_rounds"] += 1
        bar.set_postfix(val=f"{val:.4f}", best=f"{best['loss']:.4f}")
        if time.time() - last_save >= checkpoint_seconds:
            _save_state(state_path, {"weight": bag.weight.detach().clone(), "optimizer": optimizer.state_dict(),
                                     "best": best, "history": history})
            last_save = time.time()
            on_unit(r + 1)
    bar.close()
    steps_run = len(history["rounds"]) and history["rounds"][-1]["step"]
    history.update({"best_step": best["step"], "best_val_loss": best["loss"], "steps": steps_run,
                    "train_rows": int(len(train_rows)), "val_rows": int(len(val_rows)),
                    "stopped_early": history["bad_rounds"] >= config.patience,
                    "seconds_this_run": round(time.time() - t0, 2)})
    return best["weight"].numpy(), history


def run_distill(config: DistillConfig, extract: StageResult, pca: StageResult, make_tokenizer, work_dir: Path,
                checkpoint_seconds: float = 60.0, force: bool = False, quiet: bool = False) -> StageResult:
    def compute(run: StageRun) -> dict:
        table = np.load(pca.path / TABLE_FILE)
        _, sentences, targets = read_extract(extract.path)
        ids = PackedIds(make_tokenizer().batch_ids(sentences))
        best, history = train_distill(config, table, ids, targets, run.partial, checkpoint_seconds,
                                      run.unit_done, run.quiet)
        np.save(run.out / TABLE_FILE, best.astype(np.float32))
        (run.out / HISTORY_FILE).write_text(json.dumps(history, indent=1))
        return {k: history[k] for k in ("initial_val_loss", "best_val_loss", "best_step", "steps", "train_rows",
                                        "val_rows", "stopped_early")}

    return run_stage("distill", work_dir, asdict(config), [extract, pca], compute, force=force, quiet=quiet)
