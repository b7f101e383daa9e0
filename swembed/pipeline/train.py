"""The one training loop: a static table refined by one or more objectives, each a loss over batches of texts
encoded exactly as the inference tokeniser encodes them (weighted mean of rows, then L2 norm).

* ``kd``: knowledge distillation of sentence similarities (paper eq. 2-3): the cross-entropy of the teacher's
  in-batch similarity softmax (diagonal excluded, temperature tau) to the student's.
* ``contrastive``: the symmetric in-batch InfoNCE on translation pairs (paper eq. 4-5).

Each step adds every objective's weighted loss on its own batch; sparse Adam moves only the rows in the
batches. Early stopping on the weighted held-out loss (patience in rounds of ``eval_every`` steps); the best
table is kept. Batches are drawn per round from seeded generators and the state is checkpointed (at most
every ``checkpoint_seconds``), so a killed run resumes to the identical table. Runs on the CPU or CUDA.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from swembed.runtime.tokenizer import TokenIds

logger = logging.getLogger(__name__)
_STATE = "train_state.pt"


def kd_loss(student: torch.Tensor, teacher: torch.Tensor, tau: float) -> torch.Tensor:
    """Eq. 2-3: cross-entropy of the teacher's in-batch similarity softmax to the student's, j != i.

    Both inputs are (K, d) L2-normalised rows; dimensions may differ between them.
    """
    k = student.shape[0]
    off = ~torch.eye(k, dtype=torch.bool, device=student.device)
    s = (student @ student.T / tau)[off].view(k, k - 1)
    t = (teacher @ teacher.T / tau)[off].view(k, k - 1)
    return -(t.softmax(dim=-1) * s.log_softmax(dim=-1)).sum(dim=-1).mean()


def contrastive_loss(a: torch.Tensor, b: torch.Tensor, tau: float) -> torch.Tensor:
    """Symmetric in-batch InfoNCE over L2-normalised rows (paper eq. 4-5): row i of ``a`` and of ``b``
    are a translation pair; every other row of the batch is a negative, in both directions."""
    logits = F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T / tau
    target = torch.arange(len(a), device=a.device)
    return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2


class PackedRows:
    """The table rows (and weights) of many texts, packed flat on the training device."""

    def __init__(self, batch: TokenIds, device: torch.device) -> None:
        self.lengths = torch.as_tensor(batch.lengths, dtype=torch.long, device=device)
        self.starts = torch.cumsum(self.lengths, 0) - self.lengths
        self.ids = torch.as_tensor(batch.ids, dtype=torch.long, device=device)
        weights = batch.weights if batch.weights is not None else np.ones(len(batch.ids), dtype=np.float32)
        self.weights = torch.as_tensor(weights, dtype=torch.float32, device=device)

    def __len__(self) -> int:
        return len(self.lengths)

    def nonempty(self) -> np.ndarray:
        return np.flatnonzero(self.lengths.cpu().numpy() > 0)

    def gather(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ids, offsets, per-row weights) of texts ``rows``, for ``embedding_bag``."""
        lengths = self.lengths[rows]
        offsets = torch.cumsum(lengths, 0) - lengths
        index = torch.repeat_interleave(self.starts[rows] - offsets, lengths) + torch.arange(
            int(lengths.sum()), device=lengths.device)
        return self.ids[index], offsets, self.weights[index]


@dataclass
class Objective:
    """One loss: ``loss(encode, rows)`` on a batch of example indices; training examples ``train`` (numpy
    indices) and fixed held-out batches ``held_out``."""

    name: str
    weight: float
    train: np.ndarray
    held_out: list[np.ndarray]
    loss: Callable[[Callable, torch.Tensor], torch.Tensor]
    pairs: tuple[PackedRows, PackedRows] | None = None  # a contrastive objective's two sides


def kd_objective(packed: PackedRows, targets: torch.Tensor, tau: float, weight: float, name: str, n_held: int,
                 batch_size: int, rng: np.random.Generator, max_train: int | None = None) -> Objective:
    """Distillation on the texts of ``packed`` towards their teacher vectors ``targets`` (same order)."""
    rows = packed.nonempty()
    rows = rows[rng.permutation(len(rows))]
    n_held = min(n_held, len(rows) // 10)
    if len(rows) - n_held < batch_size or n_held < 2:
        raise ValueError(f"{name}: distillation needs at least {batch_size + 2} sentences with known words, "
                         f"got {len(rows)}")
    held, train = np.sort(rows[:n_held]), rows[n_held:][:max_train]

    def loss(encode, batch: torch.Tensor) -> torch.Tensor:
        return kd_loss(encode(packed, batch), targets[batch], tau)

    return Objective(name, weight, train, np.array_split(held, max(1, n_held // batch_size)), loss)


def contrastive_objective(left: PackedRows, right: PackedRows, tau: float, weight: float, name: str, n_held: int,
                          batch_size: int) -> Objective:
    """The contrastive loss on pairs (row i of ``left`` translates row i of ``right``); pairs already shuffled."""
    usable = np.intersect1d(left.nonempty(), right.nonempty())
    n_held = min(n_held, len(usable) // 5)
    if len(usable) - n_held < batch_size:
        raise ValueError(f"only {len(usable)} usable {name} parallel pairs; contrastive training needs more than "
                         f"{batch_size + n_held}")
    held, train = usable[len(usable) - n_held:], usable[: len(usable) - n_held]

    def loss(encode, batch: torch.Tensor) -> torch.Tensor:
        return contrastive_loss(encode(left, batch), encode(right, batch), tau)

    whole = [held[i : i + batch_size] for i in range(0, n_held - batch_size + 1, batch_size)]
    return Objective(name, weight, train, whole or [held], loss, (left, right))


@torch.no_grad()
def retrieval_accuracy(table: np.ndarray, objective: Objective) -> float:
    """Share of held-out pairs whose left text's nearest neighbour among all held-out right texts is its own
    translation (a Tatoeba-like check that never sees a test set)."""
    left, right = objective.pairs
    rows = torch.as_tensor(np.concatenate(objective.held_out), dtype=torch.long, device=left.ids.device)
    weight = torch.as_tensor(table, device=left.ids.device)

    def encode(packed: PackedRows) -> torch.Tensor:
        ids, offsets, weights = packed.gather(rows)
        return F.normalize(F.embedding_bag(ids, weight, offsets, mode="sum", per_sample_weights=weights), dim=-1)

    nearest = (encode(left) @ encode(right).T).argmax(dim=1)
    return float((nearest == torch.arange(len(rows), device=nearest.device)).float().mean())


def _round_batches(rng: np.random.Generator, n_train: int, steps: int, batch: int) -> np.ndarray:
    need = steps * batch
    order = np.concatenate([rng.permutation(n_train) for _ in range(-(-need // n_train))])[:need]
    return order.reshape(steps, batch)


def _save_state(path: Path, state: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


@dataclass
class LoopSettings:
    batch_size: int
    lr: float
    max_steps: int
    eval_every: int
    patience: int
    seed: int


def train(table: np.ndarray, objectives: list[Objective], settings: LoopSettings, device: torch.device,
          partial: Path, checkpoint_seconds: float, on_checkpoint: Callable[[int], None] = lambda n: None,
          quiet: bool = False) -> tuple[np.ndarray, dict]:
    """Refine ``table``; returns the best table (by weighted held-out loss) and the training history."""
    from tqdm.auto import tqdm

    embedding = torch.nn.Embedding.from_pretrained(torch.from_numpy(np.array(table, dtype=np.float32)),
                                                   freeze=False, sparse=True).to(device)
    optimizer = torch.optim.SparseAdam(embedding.parameters(), lr=settings.lr)

    def encode(packed: PackedRows, rows: torch.Tensor) -> torch.Tensor:
        ids, offsets, weights = packed.gather(rows)
        bag = F.embedding_bag(ids, embedding.weight, offsets, mode="sum", per_sample_weights=weights, sparse=True)
        return F.normalize(bag, dim=-1)

    def as_rows(rows: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(rows, dtype=torch.long, device=device)

    @torch.no_grad()
    def held_out_loss() -> tuple[float, dict]:
        parts = {o.name: float(np.mean([o.loss(encode, as_rows(rows)).item() for rows in o.held_out]))
                 for o in objectives}
        return sum(o.weight * parts[o.name] for o in objectives), parts

    state_path = partial / _STATE
    if state_path.is_file():
        state = torch.load(state_path, weights_only=False, map_location=device)
        embedding.weight.data.copy_(state["weight"])
        optimizer.load_state_dict(state["optimizer"])
        best, history = state["best"], state["history"]
        logger.info("train: resuming after round %d", len(history["rounds"]))
    else:
        loss, parts = held_out_loss()
        best = {"loss": loss, "step": 0, "weight": embedding.weight.detach().clone()}
        history = {"initial_val_loss": loss, "initial_parts": parts, "rounds": [], "bad_rounds": 0}
    max_rounds = -(-settings.max_steps // settings.eval_every)
    bar = tqdm(total=max_rounds * settings.eval_every, initial=len(history["rounds"]) * settings.eval_every,
               unit="step", desc="train", disable=quiet)
    t0 = last_save = time.time()
    for r in range(len(history["rounds"]), max_rounds):
        if history["bad_rounds"] >= settings.patience:
            break
        steps = min(settings.eval_every, settings.max_steps - r * settings.eval_every)
        plans = [o.train[_round_batches(np.random.default_rng([settings.seed, r, k]), len(o.train), steps,
                                        settings.batch_size)] for k, o in enumerate(objectives)]
        train_losses = []
        for step in range(steps):
            loss = sum(o.weight * o.loss(encode, as_rows(plan[step])) for o, plan in zip(objectives, plans))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            train_losses.append(loss.detach())
        bar.update(steps)
        val, parts = held_out_loss()
        step = r * settings.eval_every + steps
        history["rounds"].append({"step": step, "train_loss": float(torch.stack(train_losses).mean()),
                                  "val_loss": val, "val_parts": parts})
        if val < best["loss"]:
            best = {"loss": val, "step": step, "weight": embedding.weight.detach().clone()}
            history["bad_rounds"] = 0
        else:
            history["bad_rounds"] += 1
        bar.set_postfix(val=f"{val:.4f}", best=f"{best['loss']:.4f}")
        if time.time() - last_save >= checkpoint_seconds:
            _save_state(state_path, {"weight": embedding.weight.detach().clone(), "optimizer": optimizer.state_dict(),
                                     "best": best, "history": history})
            last_save = time.time()
            on_checkpoint(r + 1)
    bar.close()
    steps_run = history["rounds"][-1]["step"] if history["rounds"] else 0
    history.update({"best_step": best["step"], "best_val_loss": best["loss"], "steps": steps_run,
                    "train_examples": {o.name: int(len(o.train)) for o in objectives},
                    "stopped_early": history["bad_rounds"] >= settings.patience,
                    "seconds_this_run": round(time.time() - t0, 2), "device": str(device)})
    return best["weight"].cpu().numpy(), history
