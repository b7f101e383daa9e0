"""Causal2Vec (Lin et al. 2025): a light bidirectional encoder's mean-pooled vector, projected by an MLP into
one Contextual token placed after the instruction; the causal LLM (mask unchanged) reads
``[BOS] instruction C text EOS`` and the embedding is the L2-normalised concatenation of the last hidden
states at C and at EOS (dimension 2d).

Folder layout (ours; the paper names no checkpoint): the LLM as a transformers folder with its
``tokenizer.json``; ``encoder/`` a BERT-style folder with its own ``tokenizer.json``; ``projector.safetensors``
with ``w1`` (d x k), ``b1`` (d), ``w2`` (d x d), ``b2`` (d) (LLaVA-1.5 projector: Linear, GELU, Linear);
``swe_teacher.json`` with ``"kind": "causal2vec"``. BOS precedes the instruction (Eq. 2 has no BOS slot; LLaMA and
Mistral expect one). The encoder sees the raw text only, mean-pooled over all its real tokens.
"""
from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer

from swembed.teachers.base import TeacherError, TeacherOutput
from swembed.teachers.decoder import Batch, DecoderSettings, DecoderTeacher

PROJECTOR_FILE = "projector.safetensors"


class Projector(torch.nn.Module):
    """C = W2 GELU(W1 h + b1) + b2: the encoder's k dims to the LLM's d."""

    def __init__(self, k: int, d: int) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(k, d)
        self.fc2 = torch.nn.Linear(d, d)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.nn.functional.gelu(self.fc1(h)))


class Causal2VecTeacher(DecoderTeacher):
    def __init__(self, folder: Path, spec, device: str = "auto", batch_tokens: int | None = None,
                 settings: DecoderSettings | None = None, model=None, encoder=None, projector=None) -> None:
        settings = settings or DecoderSettings.read(folder, kind="causal2vec")
        if settings.bidirectional:
            raise TeacherError("Causal2Vec keeps the LLM's causal mask; bidirectional must be false")
        super().__init__(folder, spec, device, batch_tokens, settings, model)
        encoder_dir = self.folder / "encoder"
        self.encoder_tokenizer = Tokenizer.from_file(str(encoder_dir / "tokenizer.json"))
        self.encoder_tokenizer.no_padding()
        self.encoder_tokenizer.enable_truncation(512)
        if encoder is None:
            from transformers import AutoModel

            encoder = AutoModel.from_pretrained(str(encoder_dir), dtype=self.dtype)
        self.encoder = encoder.to(self.device).eval()
        if projector is None:
            from safetensors.torch import load_file

            state = projector_state(load_file(str(self.folder / PROJECTOR_FILE)))
            projector = Projector(state["fc1.weight"].shape[1], state["fc1.weight"].shape[0])
            projector.load_state_dict(state)
        self.projector = projector.to(self.device, self.dtype).eval()
        self.pooled_dim = 2 * self.hidden_size

    def rows(self, texts: list[str]):
        """[BOS] instruction <C> text EOS, the C slot a placeholder id whose embedding is replaced."""
        out = []
        for ids, spans, start in super().rows(texts):
            out.append((ids[:start] + [self.pad_id] + ids[start:], spans[:start] + [(-1, -1)] + spans[start:],
                        start + 1))
        return out

    def contextual_vectors(self, texts: list[str]) -> torch.Tensor:
        """The projected, mean-pooled encoder vector of each text: (B, d)."""
        encodings = self.encoder_tokenizer.encode_batch(texts)
        width = max(len(e.ids) for e in encodings)
        ids = torch.zeros(len(texts), width, dtype=torch.long)
        mask = torch.zeros(len(texts), width, dtype=torch.long)
        for row, e in enumerate(encodings):
            ids[row, : len(e.ids)] = torch.tensor(e.ids)
            mask[row, : len(e.ids)] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        hidden = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        weights = mask[..., None].to(hidden.dtype)
        return self.projector((hidden * weights).sum(1) / weights.sum(1))

    def context_slot(self, batch: Batch) -> torch.Tensor:
        """Index of the C slot in each row: the position just before the first text token (or the EOS)."""
        first_text = torch.where(batch.text.any(1), batch.text.float().argmax(1), batch.eos)
        return first_text - 1

    def states_with(self, batch: Batch, contextual: torch.Tensor) -> torch.Tensor:
        embeds = self.model.get_input_embeddings()(batch.ids).clone()
        rows = torch.arange(len(embeds), device=embeds.device)
        embeds[rows, self.context_slot(batch)] = contextual.to(embeds.dtype)
        return self.hidden_states(batch, inputs_embeds=embeds)

    def pool(self, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        rows = torch.arange(len(hidden), device=hidden.device)
        return torch.cat([hidden[rows, self.context_slot(batch)], hidden[rows, batch.eos]], dim=-1)

    @torch.inference_mode()
    def run(self, batch: Batch) -> TeacherOutput:
        batch = batch.to(self.device)
        hidden = self.states_with(batch, self.contextual_vectors(batch.texts))
        pooled = torch.nn.functional.normalize(self.pool(hidden, batch), dim=-1)  # the whole concatenation
        return TeacherOutput(hidden=hidden, offsets=batch.offsets, pooled=pooled)


PROJECTOR_NAMES = {  # ours, and LLaVA-1.5's mm_projector (Sequential Linear, GELU, Linear) that Causal2Vec names
    "fc1.weight": ("w1", "mm_projector.0.weight"), "fc1.bias": ("b1", "mm_projector.0.bias"),
    "fc2.weight": ("w2", "mm_projector.2.weight"), "fc2.bias": ("b2", "mm_projector.2.bias"),
}


def projector_state(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``Projector`` parameters from our names (w1, b1, w2, b2) or LLaVA's (``[model.]mm_projector.{0,2}.*``)."""
    state = {}
    for ours, names in PROJECTOR_NAMES.items():
        found = [k for k in weights if k in names or k.endswith("." + names[1])]
        if len(found) != 1:
            raise TeacherError(f"{PROJECTOR_FILE}: expected one of {names} for {ours}, found {found or 'none'}")
        state[ours] = weights[found[0]]
    return state


def save_projector(projector: Projector, folder: Path) -> None:
    from safetensors.torch import save_file

    save_file({"w1": projector.fc1.weight.detach().contiguous(), "b1": projector.fc1.bias.detach().contiguous(),
               "w2": projector.fc2.weight.detach().contiguous(), "b2": projector.fc2.bias.detach().contiguous()},
              str(Path(folder) / PROJECTOR_FILE))

