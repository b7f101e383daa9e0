"""NV-Embed (Lee et al. 2025): a bidirectional Mistral whose last hidden states go through a latent-attention
layer (the tokens are the queries; a trainable array of r latents is keys and values), an MLP, and a mean
over the non-instruction tokens (BOS and instruction masked out; the appended EOS pooled), L2-normalised.

The module mirrors the public checkpoint's layout (``latents``, ``cross_attend_blocks.0.{norm, norm_context,
fn.to_q, fn.to_kv, fn.to_out}``, ``cross_attend_blocks.1.{norm, fn.net.0, fn.net.2}``; bias-free linears,
GEGLU feed-forward, residuals), so ``nvidia/NV-Embed-v2``'s ``latent_attention_model`` weights load into it.
We mask BOS and *all* instruction tokens (the public code leaves the last instruction token in the pool; see
``../shared/notes/teacher-specs.md`` 3.2). Per-token vectors for extraction are the latent layer's outputs,
the space the sentence vector is pooled in.

Local folder layout: the decoder as a transformers folder with ``tokenizer.json``, ``latent_attention.safetensors``
and ``swe_teacher.json`` (``"kind": "nvembed"``, ``"latents"``, ``"heads"``, ``"dim_head"``, ``"mlp_mult"``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from swembed.teachers.base import TeacherError, TeacherOutput
from swembed.teachers.decoder import Batch, DecoderSettings, DecoderTeacher

LATENT_FILE = "latent_attention.safetensors"


class _PreNorm(nn.Module):
    def __init__(self, dim: int, fn: nn.Module, context_dim: int | None = None) -> None:
        super().__init__()
        self.fn = fn
        self.norm = nn.LayerNorm(dim)
        self.norm_context = nn.LayerNorm(context_dim) if context_dim is not None else None

    def forward(self, x, context=None):
        x = self.norm(x)
        if self.norm_context is not None:
            return self.fn(x, self.norm_context(context))
        return self.fn(x)


class _CrossAttention(nn.Module):
    def __init__(self, dim: int, heads: int, dim_head: int) -> None:
        super().__init__()
        self.heads, self.dim_head = heads, dim_head
        self.to_q = nn.Linear(dim, heads * dim_head, bias=False)
        self.to_kv = nn.Linear(dim, 2 * heads * dim_head, bias=False)
        self.to_out = nn.Linear(heads * dim_head, dim, bias=False)

    def forward(self, x, context):
        b, n, _ = x.shape
        q = self.to_q(x).view(b, n, self.heads, self.dim_head).transpose(1, 2)
        k, v = self.to_kv(context).chunk(2, dim=-1)
        k = k.view(b, -1, self.heads, self.dim_head).transpose(1, 2)
        v = v.view(b, -1, self.heads, self.dim_head).transpose(1, 2)
        out = nn.functional.scaled_dot_product_attention(q, k, v)  # keys are latents: no mask
        return self.to_out(out.transpose(1, 2).reshape(b, n, self.heads * self.dim_head))


class _GEGLU(nn.Module):
    def forward(self, x):
        x, gate = x.chunk(2, dim=-1)
        return x * nn.functional.gelu(gate)


class _FeedForward(nn.Module):
    def __init__(self, dim: int, mult: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, 2 * dim * mult), _GEGLU(), nn.Linear(dim * mult, dim))

    def forward(self, x):
        return self.net(x)


class LatentAttention(nn.Module):
    """Tokens (B, T, d) -> (B, T, d): cross-attention to r latents, residual, GEGLU MLP, residual."""

    def __init__(self, dim: int, latents: int = 512, heads: int = 8, dim_head: int = 4096, mlp_mult: int = 4) -> None:
        super().__init__()
        self.latents = nn.Parameter(torch.randn(latents, dim))
        self.cross_attend_blocks = nn.ModuleList([
            _PreNorm(dim, _CrossAttention(dim, heads, dim_head), context_dim=dim),
            _PreNorm(dim, _FeedForward(dim, mlp_mult)),
        ])

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        context = self.latents[None].expand(hidden.shape[0], -1, -1)
        attend, feed = self.cross_attend_blocks
        hidden = attend(hidden, context=context) + hidden
        return feed(hidden) + hidden


class NVEmbedTeacher(DecoderTeacher):
    def __init__(self, folder: Path, spec, device: str = "auto", batch_tokens: int | None = None,
                 settings: DecoderSettings | None = None, model=None, latent: LatentAttention | None = None) -> None:
        settings = settings or DecoderSettings.read(folder, kind="nvembed", bidirectional=True)
        self._public_latent: LatentAttention | None = None
        super().__init__(folder, spec, device, batch_tokens, settings, model)
        latent = latent or self._public_latent
        if latent is None:
            from safetensors.torch import load_file

            shape = json.loads((self.folder / "swe_teacher.json").read_text())
            latent = LatentAttention(self.hidden_size, shape.get("latents", 512), shape.get("heads", 8),
                                     shape.get("dim_head", 4096), shape.get("mlp_mult", 4))
            latent.load_state_dict(load_file(str(self.folder / LATENT_FILE)))
        self.latent = latent.to(self.device, self.dtype).eval()

    def _load_model(self):
        """Our folder layout (a plain decoder folder), or the public checkpoint's (``text_config`` and
        ``latent_attention_config`` in config.json, tensors under ``embedding_model.`` and
        ``latent_attention_model.``), read without its remote code."""
        config = json.loads((self.folder / "config.json").read_text())
        if "latent_attention_config" not in config:
            return super()._load_model()
        from swembed.teachers.decoder import check_fits

        check_fits(self.folder, self.device, self.dtype)
        backbone, self._public_latent = public_nvembed(self.folder, config, self.dtype)
        return backbone

    def pool_mask(self, batch: Batch) -> torch.Tensor:
        """Text tokens and the EOS: never BOS, instruction or padding."""
        mask = batch.text.clone()
        mask[torch.arange(len(mask), device=mask.device), batch.eos] = True
        return mask

    def pool(self, outputs: torch.Tensor, batch: Batch) -> torch.Tensor:
        weights = self.pool_mask(batch).to(outputs.dtype)[..., None]
        return (outputs * weights).sum(1) / weights.sum(1).clamp(min=1)

    @torch.inference_mode()
    def run(self, batch: Batch) -> TeacherOutput:
        batch = batch.to(self.device)
        outputs = self.latent(self.hidden_states(batch).to(self.dtype)).float()
        pooled = torch.nn.functional.normalize(self.pool(outputs, batch), dim=-1)
        return TeacherOutput(hidden=outputs, offsets=batch.offsets, pooled=pooled)


PUBLIC_PREFIXES = {"embedding_model.": "decoder", "latent_attention_model.": "latent"}


def split_public_state(state: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    """The public checkpoint's tensors by module (``decoder``: a ``MistralModel``, ``latent``: ``LatentAttention``),
    prefixes removed; a name under neither prefix is an error naming it."""
    parts: dict[str, dict[str, torch.Tensor]] = {"decoder": {}, "latent": {}}
    for name, tensor in state.items():
        prefix = next((p for p in PUBLIC_PREFIXES if name.startswith(p)), None)
        if prefix is None:
            raise TeacherError(f"NV-Embed checkpoint tensor {name!r} is under neither {' nor '.join(PUBLIC_PREFIXES)}")
        parts[PUBLIC_PREFIXES[prefix]][name[len(prefix):]] = tensor
    return parts


def public_modules(config: dict, device: str = "meta") -> tuple[nn.Module, LatentAttention]:
    """Empty (``meta``) modules shaped by the public config.json: the bidirectional Mistral and the latent layer."""
    from transformers import MistralConfig, MistralModel

    text = {k: v for k, v in config["text_config"].items() if k not in ("model_type", "architectures", "auto_map")}
    latent = config["latent_attention_config"]
    with torch.device(device):
        decoder = MistralModel(MistralConfig(**text))
        layer = LatentAttention(latent.get("hidden_dim", decoder.config.hidden_size), latent["num_latents_value"],
                                latent["num_cross_heads"], latent["cross_dim_head"], latent.get("mlp_mult", 4))
    return decoder, layer


def public_nvembed(folder: Path, config: dict, dtype: torch.dtype) -> tuple[nn.Module, LatentAttention]:
    """``nvidia/NV-Embed-v2`` from its safetensors shards into our modules (strict: a missing or extra name fails)."""
    from safetensors.torch import load_file

    index = folder / "model.safetensors.index.json"
    shards = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.is_file() else [
        "model.safetensors"]
    state: dict[str, torch.Tensor] = {}
    for shard in shards:
        state.update(load_file(str(folder / shard)))
    parts = split_public_state(state)
    decoder, layer = public_modules(config)
    try:
        decoder.load_state_dict(parts["decoder"], strict=True, assign=True)
        layer.load_state_dict(parts["latent"], strict=True, assign=True)
    except RuntimeError as exc:
        raise TeacherError(f"{folder}: the checkpoint does not fit the NV-Embed modules: {exc}") from None
    rotary_class: Any = type(decoder.rotary_emb)  # a rotary embedding module (torch's stubs say Tensor | Module)
    decoder.rotary_emb = rotary_class(config=decoder.config)  # buffers are not in the checkpoint
    return decoder.to(dtype), layer.to(dtype)
