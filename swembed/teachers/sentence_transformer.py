"""A sentence-transformers model folder as a teacher, run with plain transformers + tokenizers.

We read the folder's own pooling config (``modules.json`` -> ``1_Pooling/config.json``) and its ``Dense`` modules
(EmbeddingGemma's two linear ones, LaBSE's tanh one) so the pooled vector is what ``SentenceTransformer.encode``
returns, and use the fast tokenizer directly for exact character offsets. Inputs are padded per batch, never to a
fixed length.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import overload

import numpy as np
import torch
from tokenizers import Tokenizer

from swembed.teachers.base import (
    BatchedTeacher,
    Pinnable,
    TeacherError,
    TeacherOutput,
    TeacherSpec,
    pick_batch_tokens,
    pick_device,
    pick_dtype,
    st_modules,
)
from swembed.teachers.onnx_runtime import OnnxEncoder, pick_runtime, takes_token_types

logger = logging.getLogger(__name__)


def read_pooling_mode(folder: Path) -> str:
    """The pooling mode declared by a sentence-transformers folder (mean when none is declared)."""
    for module in st_modules(folder, "Pooling")[:1]:
        config = json.loads((folder / module["path"] / "config.json").read_text())
        if config.get("pooling_mode_cls_token"):
            return "cls"
        if config.get("pooling_mode_max_tokens"):
            return "max"
        if config.get("pooling_mode_lasttoken"):
            return "lasttoken"
    return "mean"


ACTIVATIONS = {"Identity": lambda x: x, "Tanh": torch.tanh}


@dataclass
class DenseLayer:
    """One ``Dense`` module of a sentence-transformers folder: ``activation(x @ weight.T + bias)``."""

    weight: np.ndarray  # (out, in)
    bias: np.ndarray | None
    activation: str

    @property
    def linear(self) -> bool:
        return self.bias is None and self.activation == "Identity"


def read_dense_layers(folder: Path) -> list[DenseLayer]:
    """The folder's ``Dense`` modules after pooling, in order (EmbeddingGemma has two linear ones, LaBSE one with
    tanh)."""
    layers = []
    for module in st_modules(folder, "Dense"):
        where = folder / module["path"]
        config = json.loads((where / "config.json").read_text())
        activation = config.get("activation_function", "Identity").rsplit(".", 1)[-1]
        if activation not in ACTIVATIONS:
            raise TeacherError(f"{where}: Dense activation {activation} is not supported ({', '.join(ACTIVATIONS)})")
        if (where / "model.safetensors").is_file():
            from safetensors.numpy import load_file

            state = load_file(str(where / "model.safetensors"))
        else:
            state = {k: v.numpy() for k, v in torch.load(where / "pytorch_model.bin", map_location="cpu").items()}
        layers.append(DenseLayer(state["linear.weight"].astype(np.float32), state.get("linear.bias"), activation))
    return layers


def load_fast_tokenizer(folder: Path, max_length: int) -> Tokenizer:
    """The folder's fast tokenizer with padding off and truncation at ``max_length``."""
    path = folder / "tokenizer.json"
    if path.is_file():
        tokenizer = Tokenizer.from_file(str(path))
    else:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(folder), use_fast=True).backend_tokenizer
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def pool(hidden: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Pool (B, T, H) token vectors with a (B, T) attention mask the sentence-transformers way."""
    if mode == "cls":
        return hidden[:, 0]
    if mode == "max":
        return hidden.masked_fill(~mask.bool()[..., None], float("-inf")).max(dim=1).values
    if mode == "lasttoken":
        last = mask.sum(dim=1) - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    weights = mask.to(hidden.dtype)[..., None]
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)


@dataclass
class EncoderInputs(Pinnable):
    """A tokenised batch on the CPU."""

    ids: torch.Tensor  # (B, T)
    mask: torch.Tensor  # (B, T)
    offsets: list[np.ndarray]


class SentenceTransformerTeacher(BatchedTeacher):
    """Contextual token vectors with offsets, and pooled sentence vectors, from one forward pass."""

    def __init__(self, folder: Path, spec: TeacherSpec, device: str = "auto", batch_tokens: int | None = None,
                 precision: str = "auto", runtime: str = "auto") -> None:
        self.folder = Path(folder)
        self.spec = spec
        self.prompt = spec.prompt
        self.device = pick_device(device)
        st_config_path = self.folder / "sentence_bert_config.json"
        st_config = json.loads(st_config_path.read_text()) if st_config_path.is_file() else {}
        self.max_length = int(st_config.get("max_seq_length", 512))
        self.pooling = read_pooling_mode(self.folder)
        self.tokenizer = load_fast_tokenizer(self.folder, self.max_length)
        self.pad_id = self.tokenizer.token_to_id("[PAD]") or self.tokenizer.token_to_id("<pad>") or 0
        self.quantized = precision == "int8"  # float32 weights, run int8 by ONNX Runtime
        self.dtype = pick_dtype(self.device, "float32" if runtime == "onnx" and precision == "auto" else precision)
        config_path = self.folder / "config.json"
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        # Linear Dense modules commute with mean, CLS and last-token pooling, so their product maps every token and a
        # word's vector stays in the space of the sentence vectors; others (LaBSE's tanh) map the pooled vector only.
        dense = read_dense_layers(self.folder)
        self.token_map = None
        if dense and all(layer.linear for layer in dense) and self.pooling != "max":
            product = dense[0].weight
            for layer in dense[1:]:
                product = layer.weight @ product
            self.token_map, dense = self._tensor(product.T), []
        self.pooled_layers = [(self._tensor(layer.weight.T), self._tensor(layer.bias), ACTIVATIONS[layer.activation])
                              for layer in dense]
        architecture = config.get("model_type") or self.model.config.model_type
        self.runtime, self.onnx = self._start_runtime(runtime, str(architecture))
        # bfloat16 only runs on torch (ONNX Runtime runs float32 and int8)
        torch_dtype = self.dtype if self.runtime == "torch" else None
        self.batch_tokens = pick_batch_tokens(self.device, batch_tokens, torch_dtype)
        hidden_size = int(config.get("hidden_size") or self.model.config.hidden_size)
        self.dim = hidden_size if self.token_map is None else int(self.token_map.shape[1])
        self.pooled_dim = int(self.pooled_layers[-1][0].shape[1]) if self.pooled_layers else self.dim

    @cached_property
    def model(self):
        """The transformer in torch, loaded on first use: a CPU build whose ONNX export is cached never needs it."""
        from transformers import AutoModel

        try:
            model = AutoModel.from_pretrained(
                str(self.folder), trust_remote_code=self.spec.trust_remote_code, dtype=self.dtype
            )
        except Exception as exc:
            raise TeacherError(f"could not load teacher weights from {self.folder}: {exc}") from exc
        return model.to(self.device).eval()

    @cached_property
    def _takes_token_types(self) -> bool:
        return takes_token_types(self.model)

    def _start_runtime(self, runtime: str, architecture: str) -> tuple[str, OnnxEncoder | None]:
        """The runtime ``pick_runtime`` chooses, with its ONNX session; ``auto`` falls back to torch, in one logged
        line, where the model does not export. Torch loads its weights here, so a bad folder fails now."""
        chosen = pick_runtime(runtime, self.device, self.dtype, architecture, self.quantized)
        if chosen == "onnx":
            try:
                encoder = OnnxEncoder(lambda: self.model, self.folder, self.spec.name, torch.get_num_threads(),
                                      self.quantized)
                if self.quantized:
                    self._check_int8(encoder)
                return chosen, encoder
            except TeacherError as exc:
                if runtime == "onnx" or self.quantized:
                    raise
                logger.warning("%s; the teacher runs on torch", exc)
        self.model  # noqa: B018 (loaded now: a folder whose weights do not load is refused before any work)
        return "torch", None

    def _check_int8(self, encoder: OnnxEncoder) -> None:
        """Refuse, in one line, an int8 teacher whose sentence vectors stray from float32's (``INT8_MIN_COSINE``)."""
        from swembed.teachers import onnx_runtime

        @torch.inference_mode()
        def measure() -> dict:
            inputs = self.prepare(list(onnx_runtime.PROBE_SENTENCES))
            exact, int8 = (pool(self._last_hidden(inputs.ids, inputs.mask, onnx), inputs.mask, self.pooling)
                           for onnx in (None, encoder))
            cosine = torch.nn.functional.cosine_similarity(exact, int8)
            return {"cosine_mean": round(float(cosine.mean()), 5), "cosine_min": round(float(cosine.min()), 5),
                    "sentences": len(cosine)}

        fidelity = encoder.int8_fidelity(measure)
        if fidelity["cosine_mean"] < onnx_runtime.INT8_MIN_COSINE:
            raise TeacherError(
                f"teacher {self.spec.name} at int8 strays from float32: sentence cosine {fidelity['cosine_mean']:.3f} "
                f"on average over {fidelity['sentences']} probe sentences, under {onnx_runtime.INT8_MIN_COSINE}; "
                "use teacher_dtype = \"float32\" or \"bfloat16\"")

    @overload
    def _tensor(self, array: None) -> None: ...

    @overload
    def _tensor(self, array: np.ndarray) -> torch.Tensor: ...

    def _tensor(self, array: np.ndarray | None) -> torch.Tensor | None:
        return None if array is None else torch.as_tensor(array, dtype=torch.float32, device=self.device)

    @property
    def name(self) -> str:
        return self.spec.name

    def describe(self) -> dict:
        return {"name": self.spec.name, "hub_id": self.spec.hub_id, "path": str(self.folder), "dim": self.dim,
                "pooling": self.pooling, "prompt": self.prompt, "max_length": self.max_length}

    def tokenizer_json(self) -> str:
        """The sub-word tokenizer (padding/truncation off) to ship for OOV back-off."""
        clone = Tokenizer.from_str(self.tokenizer.to_str())
        clone.no_padding()
        clone.no_truncation()
        return clone.to_str()

    def prepare(self, texts: list[str]) -> EncoderInputs:
        """Tokenise and pad on the CPU; spans are shifted back over the prompt, special tokens get -1."""
        encodings = self.tokenizer.encode_batch([self.prompt + t for t in texts])
        lengths = [len(e.ids) for e in encodings]
        width = max(lengths)
        ids = np.full((len(encodings), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        offsets = []
        shift = len(self.prompt)
        for row, enc in enumerate(encodings):
            n = lengths[row]
            ids[row, :n] = enc.ids
            mask[row, :n] = 1
            spans = np.full((width, 2), -1, dtype=np.int64)
            spans[:n] = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2) - shift
            hidden_positions = np.zeros(width, dtype=bool)
            hidden_positions[:n] = np.asarray(enc.special_tokens_mask, dtype=bool)
            # a token that starts inside the prompt and ends in the text (Gemma's '▁A' holds the space before it)
            # is the text's; one that ends in the prompt is not
            spans[:, 0] = np.maximum(spans[:, 0], 0)
            spans[hidden_positions | (spans[:, 1] <= 0)] = -1
            offsets.append(spans)
        return EncoderInputs(torch.from_numpy(ids), torch.from_numpy(mask), offsets)

    def _last_hidden(self, ids: torch.Tensor, mask: torch.Tensor, onnx: OnnxEncoder | None) -> torch.Tensor:
        """The model's last-layer vectors (float32), from the ONNX session ``onnx`` when given, else from torch."""
        if onnx is not None:
            return onnx(ids, mask)
        kwargs = {"input_ids": ids, "attention_mask": mask}
        if self._takes_token_types:
            kwargs["token_type_ids"] = torch.zeros_like(ids)
        return self.model(**kwargs).last_hidden_state.float()

    @torch.inference_mode()
    def run(self, inputs: EncoderInputs) -> TeacherOutput:
        """One batch on the device: last-layer vectors and pooled normalised vectors (both stay there)."""
        ids = inputs.ids.to(self.device, non_blocking=True)
        mask = inputs.mask.to(self.device, non_blocking=True)
        hidden = self._last_hidden(ids, mask, self.onnx)
        if self.token_map is not None:
            hidden = hidden @ self.token_map
        pooled = pool(hidden, mask, self.pooling)
        for weight, bias, activation in self.pooled_layers:
            pooled = activation(pooled @ weight if bias is None else torch.addmm(bias, pooled, weight))
        pooled = torch.nn.functional.normalize(pooled, dim=-1)
        return TeacherOutput(hidden=hidden, offsets=inputs.offsets, pooled=pooled)
