"""LENS (Lei et al. 2025): a bidirectional decoder whose LM head is replaced by k KMeans centroids of its rows.

Per position i the lexicon features are ``w_i = log(1 + ReLU(centroids @ h_i))`` (k non-negative dims, one per
token cluster). The logit shift makes ``w_{i-1}`` the feature of token i (the logit that predicts it), so a
token's vector for extraction is its left neighbour's ``w``, and the sentence vector is the max over the text
tokens of those shifted features (instruction, BOS and the EOS's own logit never count), L2-normalised.
A LENS teacher therefore yields *lexicon* word tables whose dimensions are interpretable clusters: build
with ``--pca-level none`` to keep them (``swembed.pipeline.lexicon.prune_top_k`` keeps each word's top k).

``cluster_rows`` is also what ``swembed lens-clusters`` (``swembed.teachers.lens_clusters``) runs on a model's LM head.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from swembed.teachers.base import TeacherError, TeacherOutput
from swembed.teachers.decoder import Batch, DecoderSettings, DecoderTeacher

HEAD_FILE = "lens_head.npy"  # (k, d) centroids, when a folder ships its clustered head
PUBLIC_HEAD_FILE = "lm_head.pth"  # yibinlei/LENS-d4000 / -d8000: the clustered head as a pickled nn.Linear


def read_public_head(path: Path) -> np.ndarray:
    """The (k, d) rows of a LENS release's ``lm_head.pth``: a whole ``nn.Linear`` (the public files, loaded as
    ``model.lm_head = torch.load('lm_head.pth')``), its state dict, or a bare tensor; no other pickled code runs."""
    try:
        with torch.serialization.safe_globals([torch.nn.Linear]):
            loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # an unpickling error names what the file would have run
        raise TeacherError(f"{path}: not a LENS head (nn.Linear, state dict or tensor): {exc}") from None
    weight = loaded.weight if isinstance(loaded, torch.nn.Linear) else (
        loaded.get("weight") if isinstance(loaded, dict) else loaded)
    if not isinstance(weight, torch.Tensor) or weight.ndim != 2:
        raise TeacherError(f"{path}: not a LENS head (expected a 2-D weight, got {type(loaded).__name__})")
    return weight.detach().float().numpy()


def cluster_rows(matrix: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(label of each row, (k, d) centroids): KMeans (Euclidean, raw rows), mini-batch above 20k rows."""
    from sklearn.cluster import KMeans, MiniBatchKMeans

    x = np.asarray(matrix, dtype=np.float32)
    if not 1 <= k <= len(x):
        raise ValueError(f"k must be between 1 and the {len(x)} rows, got {k}")
    if len(x) > 20_000:
        km = MiniBatchKMeans(n_clusters=k, random_state=seed, batch_size=max(4096, 3 * k), n_init=1,
                             max_iter=50, reassignment_ratio=0.001)
    else:
        km = KMeans(n_clusters=k, random_state=seed, n_init=1)
    labels = km.fit_predict(x)
    # exact centroids of the final assignment (mini-batch centres drift from the means)
    centroids = np.zeros((k, x.shape[1]), dtype=np.float64)
    np.add.at(centroids, labels, x)
    counts = np.bincount(labels, minlength=k)
    empty = counts == 0
    centroids[~empty] /= counts[~empty, None]
    centroids[empty] = km.cluster_centers_[empty]
    return labels, centroids.astype(np.float32)


class LensTeacher(DecoderTeacher):
    """Bidirectional decoder + clustered LM head; per-token and pooled vectors live in cluster space."""

    def __init__(self, folder: Path, spec, device: str = "auto", batch_tokens: int | None = None,
                 settings: DecoderSettings | None = None, model=None, k: int | None = None, seed: int = 0) -> None:
        settings = settings or DecoderSettings.read(folder, kind="lens", bidirectional=True)
        self._k, self._seed = k, seed
        super().__init__(folder, spec, device, batch_tokens, settings, model)

    def _load_model(self):
        from transformers import AutoModelForCausalLM

        from swembed.teachers.decoder import check_fits

        check_fits(self.folder, self.device, self.dtype)
        try:
            causal = AutoModelForCausalLM.from_pretrained(str(self.folder), dtype=self.dtype,
                                                          trust_remote_code=self.settings.trust_remote_code)
        except Exception as exc:
            raise TeacherError(f"could not load LENS backbone from {self.folder}: {exc}") from exc
        self.set_head(causal)
        return causal

    def set_head(self, causal) -> None:
        """Replace the LM head by its KMeans centroids (shipped in ``lens_head.npy`` or computed here)."""
        head_file = self.folder / HEAD_FILE
        if head_file.is_file():
            centroids = np.load(head_file)
        elif (self.folder / PUBLIC_HEAD_FILE).is_file():  # the public LENS release ships its clustered head
            centroids = read_public_head(self.folder / PUBLIC_HEAD_FILE)
        else:
            centroids = self.clustered_head(causal)
        head = torch.nn.Linear(centroids.shape[1], centroids.shape[0], bias=False)
        head.weight.data.copy_(torch.from_numpy(centroids))
        causal.set_output_embeddings(head.to(dtype=next(causal.parameters()).dtype))

    def clustered_head(self, causal) -> np.ndarray:
        """KMeans centroids of the LM head's rows for the teacher's k and seed, computed once and kept in the
        folder (``lens_head.k<k>.seed<seed>.npy``, the centroids ``swembed lens-clusters`` writes)."""
        if self._k is None:
            raise TeacherError(f"{self.folder} has no {HEAD_FILE}: give the number of clusters k")
        cached = self.folder / f"lens_head.k{self._k}.seed{self._seed}.npy"
        if cached.is_file():
            return np.load(cached)
        rows = causal.get_output_embeddings().weight.detach().float().cpu().numpy()
        _, centroids = cluster_rows(rows, self._k, self._seed)
        try:
            from swembed.runtime.folder import atomic_save_npy

            atomic_save_npy(cached, centroids)
        except OSError:  # a read-only folder: clustered again on the next load
            pass
        return centroids

    @property
    def token_dim(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])

    @property
    def backbone(self):
        return self.model.base_model  # the decoder under the (clustered) head

    def lexicon(self, hidden: torch.Tensor) -> torch.Tensor:
        """log(1 + ReLU(logits)) over the k clusters, at every position."""
        head = self.model.get_output_embeddings()
        return torch.log1p(torch.relu(head(hidden.to(head.weight.dtype)).float()))

    def token_vectors(self, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Token i gets the features of position i-1 (the logits that predict it); position 0 gets zeros."""
        features = self.lexicon(hidden)
        shifted = torch.zeros_like(features)
        shifted[:, 1:] = features[:, :-1]
        return shifted

    def pool(self, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        return _text_max(self.token_vectors(hidden, batch), batch)

    @torch.inference_mode()
    def run(self, batch: Batch) -> TeacherOutput:
        batch = batch.to(self.device)
        vectors = self.token_vectors(self.hidden_states(batch), batch)  # the head runs once for both outputs
        pooled = torch.nn.functional.normalize(_text_max(vectors, batch), dim=-1)
        return TeacherOutput(hidden=vectors, offsets=batch.offsets, pooled=pooled)


def _text_max(vectors: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Max over each row's text tokens (multiplying by the mask is safe: the features are >= 0)."""
    return (vectors * batch.text[..., None].to(vectors.dtype)).max(dim=1).values
