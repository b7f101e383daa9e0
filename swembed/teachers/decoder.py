"""Decoder LLM teachers (Mistral / LLaMA / Qwen style ``AutoModel``): mean or last-token pooling, optional
bidirectional attention, an instruction prefix and an appended EOS.

Every row is built as ``[BOS] instruction text [EOS]`` from token ids (so the instruction/text boundary is
exact, not subject to a tokenizer merging across it), padded on either side. Attention is given as an
explicit 4-D additive mask: padding-only when ``bidirectional`` (transformers uses a 4-D mask as is,
so no causal mask is re-imposed), causal + padding otherwise; position ids count real tokens only, so
left and right padding give the same numbers. Text tokens carry character offsets into the original text
(for extraction); BOS, instruction and EOS carry (-1, -1).

``DecoderTeacher`` is the base of the LENS, Causal2Vec and NV-Embed teachers, which change the pooled
vector (and, for LENS, the per-token vectors).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from swembed.teachers.base import (
    BatchedTeacher,
    Pinnable,
    TeacherError,
    TeacherOutput,
    pick_batch_tokens,
    pick_device,
    pick_dtype,
)

logger = logging.getLogger(__name__)
CONFIG_FILE = "swe_teacher.json"  # a teacher folder's own settings (kind, pooling, instruction, ...)


@dataclass
class DecoderSettings:
    kind: str = "decoder"  # decoder | lens | causal2vec | nvembed
    pooling: str = "mean"  # mean | last  (decoder only)
    bidirectional: bool = False
    instruction: str = ""  # token ids of this string precede the text (queries); never pooled
    add_bos: bool = True
    add_eos: bool = True
    padding_side: str = "right"
    max_length: int = 512
    trust_remote_code: bool = False
    precision: str = "auto"  # the weights' dtype (swembed.teachers.base.pick_dtype)

    @classmethod
    def read(cls, folder: Path, **overrides) -> DecoderSettings:
        path = Path(folder) / CONFIG_FILE
        data = json.loads(path.read_text()) if path.is_file() else {}
        data.update({k: v for k, v in overrides.items() if v is not None})
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


@dataclass
class Batch(Pinnable):
    """Padded inputs of one forward pass and where each row's parts sit (built on the CPU by ``prepare``,
    moved to the device by ``to``)."""

    ids: torch.Tensor  # (B, T)
    valid: torch.Tensor  # (B, T) bool, real tokens
    positions: torch.Tensor  # (B, T) position ids (0 at each row's first real token)
    text: torch.Tensor  # (B, T) bool, the text's own tokens
    eos: torch.Tensor  # (B,) index of each row's last real token
    offsets: list[np.ndarray]  # per row (T, 2) character spans into the text, -1 elsewhere
    texts: list[str]

    def to(self, device: torch.device) -> Batch:
        move = {name: getattr(self, name).to(device, non_blocking=True)
                for name in ("ids", "valid", "positions", "text", "eos")}
        return Batch(**move, offsets=self.offsets, texts=self.texts)


def attention_mask_4d(valid: torch.Tensor, bidirectional: bool, dtype: torch.dtype) -> torch.Tensor:
    """Additive (B, 1, T, T) mask: 0 where a query may attend to a key, the dtype's minimum elsewhere.
    Keys are real tokens (and, for causal attention, not later ones); a padding query sees itself only."""
    b, t = valid.shape
    allowed = valid[:, None, None, :].expand(b, 1, t, t)
    if not bidirectional:
        allowed = allowed & torch.ones(t, t, dtype=torch.bool, device=valid.device).tril()
    allowed = allowed | torch.eye(t, dtype=torch.bool, device=valid.device)
    mask = torch.zeros(b, 1, t, t, dtype=dtype, device=valid.device)
    return mask.masked_fill(~allowed, torch.finfo(dtype).min)


def free_memory(device: torch.device) -> int | None:
    """Free bytes on the GPU, or the machine's available memory (Linux), or None when unknown."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    meminfo = Path("/proc/meminfo")
    if not meminfo.is_file():
        return None
    return next((int(line.split()[1]) * 1024 for line in meminfo.read_text().splitlines()
                 if line.startswith("MemAvailable")), None)


def check_params_fit(params: float, device: torch.device, name: str, free: int | None = None) -> None:
    """Before any download: a clear error when ``params`` weights (bf16 on CUDA, float32 on CPU) cannot fit."""
    need = params * (2 if device.type == "cuda" else 4)
    free = free_memory(device) if free is None else free
    if free is not None and need > 0.9 * free:
        raise TeacherError(f"teacher {name} ({params / 1e9:.1f}B parameters) needs about {need / 2**30:.1f} GiB on "
                           f"{device.type} but this machine has {free / 2**30:.1f} GiB free; use a GPU with more "
                           "memory (--device cuda) or a smaller teacher")


def check_fits(folder: Path, device: torch.device, dtype: torch.dtype, free: int | None = None) -> None:
    """A clear error, before loading, when the weights cannot fit in this machine's free memory."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        stored = json.loads(index.read_text()).get("metadata", {}).get("total_size", 0)
    else:
        stored = sum(p.stat().st_size for p in folder.glob("*.safetensors")) or sum(
            p.stat().st_size for p in folder.glob("*.bin"))
    if not stored:
        return
    config = json.loads((folder / "config.json").read_text()) if (folder / "config.json").is_file() else {}
    stored_bytes = {"float32": 4, "bfloat16": 2, "float16": 2}.get(str(config.get("torch_dtype", "float32")), 4)
    need = stored / stored_bytes * torch.tensor([], dtype=dtype).element_size()
    free = free_memory(device) if free is None else free
    if free is not None and need > 0.9 * free:
        raise TeacherError(f"teacher {folder.name} needs about {need / 2**30:.1f} GiB in {dtype} but this machine has "
                           f"{free / 2**30:.1f} GiB free on {device.type}; use a GPU with more memory, a smaller "
                           "teacher, or --device cuda")


class DecoderTeacher(BatchedTeacher):
    """A decoder LLM as a teacher: per-token last-layer states with offsets, and a pooled sentence vector."""

    def __init__(self, folder: Path, spec, device: str = "auto", batch_tokens: int | None = None,
                 settings: DecoderSettings | None = None, model=None) -> None:
        self.folder = Path(folder)
        self.spec = spec
        self.settings = settings or DecoderSettings.read(self.folder)
        self.device = pick_device(device)
        self.dtype = pick_dtype(self.device, self.settings.precision)
        self.batch_tokens = pick_batch_tokens(self.device, batch_tokens, self.dtype)
        self.tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.model = model if model is not None else self._load_model()
        self.model.to(self.device).eval()
        config = self.model.config
        self.hidden_size = int(config.hidden_size)
        self.bos_id = getattr(config, "bos_token_id", None)
        self.eos_id = getattr(config, "eos_token_id", None)
        if isinstance(self.eos_id, list):
            self.eos_id = self.eos_id[0]
        self.pad_id = getattr(config, "pad_token_id", None) or 0
        self._instruction_ids = (self.tokenizer.encode(self.settings.instruction, add_special_tokens=False).ids
                                 if self.settings.instruction else [])
        self.dim = self.token_dim
        self.pooled_dim = self.token_dim

    def _load_model(self):
        from transformers import AutoModel

        check_fits(self.folder, self.device, self.dtype)
        kwargs = {"dtype": self.dtype, "trust_remote_code": self.settings.trust_remote_code}
        if self.device.type == "cuda":
            kwargs["device_map"] = {"": self.device.index or 0}
        try:
            return AutoModel.from_pretrained(str(self.folder), **kwargs)
        except Exception as exc:
            raise TeacherError(f"could not load decoder teacher from {self.folder}: {exc}") from exc

    @property
    def token_dim(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def prompt(self) -> str:
        return self.settings.instruction

    def describe(self) -> dict:
        return {"name": self.spec.name, "hub_id": self.spec.hub_id, "path": str(self.folder), "dim": self.dim,
                "pooled_dim": self.pooled_dim, "kind": self.settings.kind, "pooling": self.settings.pooling,
                "bidirectional": self.settings.bidirectional, "prompt": self.settings.instruction,
                "max_length": self.settings.max_length}

    def tokenizer_json(self) -> str:
        return self.tokenizer.to_str()

    # ------------------------------------------------------------------------------------------------ inputs
    def rows(self, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]], int]]:
        """Per text: its ids ([BOS] instruction text [EOS]), their spans, and where the text starts."""
        out = []
        budget = self.settings.max_length - len(self._instruction_ids) - 2
        for encoding in self.tokenizer.encode_batch(texts, add_special_tokens=False):
            ids, spans = list(encoding.ids[:budget]), list(encoding.offsets[:budget])
            head = ([self.bos_id] if self.settings.add_bos and self.bos_id is not None else []) + self._instruction_ids
            tail = [self.eos_id] if self.settings.add_eos and self.eos_id is not None else []
            out.append((head + ids + tail, [(-1, -1)] * len(head) + spans + [(-1, -1)] * len(tail), len(head)))
        return out

    def prepare(self, texts: list[str]) -> Batch:
        rows = self.rows(texts)
        width = max(len(ids) for ids, _, _ in rows)
        n = len(rows)
        ids = np.full((n, width), self.pad_id, dtype=np.int64)
        valid = np.zeros((n, width), dtype=bool)
        text = np.zeros((n, width), dtype=bool)
        offsets = []
        for row, (row_ids, spans, start) in enumerate(rows):
            pad = width - len(row_ids) if self.settings.padding_side == "left" else 0
            ids[row, pad : pad + len(row_ids)] = row_ids
            valid[row, pad : pad + len(row_ids)] = True
            n_text = sum(1 for s in spans[start:] if s[0] >= 0)
            text[row, pad + start : pad + start + n_text] = True
            full = np.full((width, 2), -1, dtype=np.int64)
            full[pad : pad + len(row_ids)] = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
            offsets.append(full)
        valid_t = torch.from_numpy(valid)
        positions = (valid_t.long().cumsum(1) - 1).clamp(min=0)
        eos = torch.from_numpy(width - 1 - np.argmax(valid[:, ::-1], axis=1))
        return Batch(torch.from_numpy(ids), valid_t, positions, torch.from_numpy(text), eos, offsets, list(texts))

    # ------------------------------------------------------------------------------------------------ forward
    @property
    def backbone(self):
        """The module that maps ids (or input embeddings) to last-layer states."""
        return self.model

    def hidden_states(self, batch: Batch, inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        mask = attention_mask_4d(batch.valid, self.settings.bidirectional, self.dtype)
        kwargs = {"inputs_embeds": inputs_embeds} if inputs_embeds is not None else {"input_ids": batch.ids}
        out = self.backbone(attention_mask=mask, position_ids=batch.positions, **kwargs)
        return out.last_hidden_state.float()

    def pool(self, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Mean over the text tokens and the EOS (never BOS or instruction), or the last real token."""
        if self.settings.pooling == "last":
            return hidden[torch.arange(len(hidden), device=hidden.device), batch.eos]
        weights = batch.text.clone()
        if self.settings.add_eos:
            weights[torch.arange(len(hidden), device=hidden.device), batch.eos] = True
        weights = weights.to(hidden.dtype)[..., None]
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)

    def token_vectors(self, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The per-token vectors extraction averages (the last-layer states here)."""
        return hidden

    @torch.inference_mode()
    def run(self, batch: Batch) -> TeacherOutput:
        batch = batch.to(self.device)
        hidden = self.hidden_states(batch)
        pooled = torch.nn.functional.normalize(self.pool(hidden, batch), dim=-1)
        return TeacherOutput(hidden=self.token_vectors(hidden, batch), offsets=batch.offsets, pooled=pooled)
