"""Compact table storage beside the dense float32 / float16 / int8 tables: int4 rows and shared rows.

``config.json`` names the storage (absent: ``dense``, the table as ``embeddings.npy`` says):

* ``{"kind": "int4"}``: ``embeddings.npy`` is (V, ceil(d/2)) uint8, two columns a byte: column 2j in the low
  nibble, column 2j+1 in the high nibble, each nibble q + 8 for a value q in [-7, 7] (an odd d pads a last
  nibble 8); ``scales.npy`` (V,) float32; row i = q_i * scales[i]. ``dim`` in config.json is d.
* ``{"kind": "codebook", "centroids": K}``: ``embeddings.npy`` is (K, d) float16 or float32 shared rows (k-means
  centroids), ``codes.npy`` (V,) uint16 (int32 past 65,536 centroids) the centroid of each row, ``scales.npy``
  (V,) float32; row i = embeddings[codes[i]] * scales[i].

``vocab.txt`` has V lines either way. numpy only.
"""
from __future__ import annotations

import numpy as np

STORAGE_KINDS = ("dense", "int4", "codebook")
CODES_FILE = "codes.npy"
INT4_MAX = 7


def storage_kind(config: dict) -> str:
    """The storage a config.json declares (``dense`` when it declares none)."""
    storage = config.get("storage") or {}
    return storage.get("kind", "dense") if isinstance(storage, dict) else str(storage)


def quantize_int4(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int4, packed two to a byte: (packed (V, ceil(d/2)) uint8, scales (V,) float32),
    ``row ~= q * scale`` with ``scale = max|row| / 7``."""
    table = np.asarray(table, dtype=np.float32)
    scales = np.abs(table).max(axis=1) / INT4_MAX
    scales[scales == 0] = 1.0
    nibbles = (np.clip(np.round(table / scales[:, None]), -INT4_MAX, INT4_MAX) + 8).astype(np.uint8)
    if nibbles.shape[1] % 2:
        nibbles = np.hstack([nibbles, np.full((len(nibbles), 1), 8, dtype=np.uint8)])
    return nibbles[:, 0::2] | (nibbles[:, 1::2] << 4), scales.astype(np.float32)


def unpack_int4(packed: np.ndarray, dim: int) -> np.ndarray:
    """(V, dim) int8 values of an int4 table (``quantize_int4``'s packing); they take the int8 path's scales."""
    packed = np.asarray(packed, dtype=np.uint8)
    out = np.empty((packed.shape[0], packed.shape[1] * 2), dtype=np.int8)
    out[:, 0::2] = (packed & 0x0F).astype(np.int8) - 8
    out[:, 1::2] = (packed >> 4).astype(np.int8) - 8
    return out[:, :dim]

