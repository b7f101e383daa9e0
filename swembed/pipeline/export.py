"""Stage 6, export: the model folder (``swembed.runtime.folder``) from the final table."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from swembed.runtime.folder import write_model_folder

DTYPES = ("float32", "float16")


def export_model(out: Path, table: np.ndarray, words: list[str], tokenizer_json: str, config: dict,
                 pca_file: Path | None, dtype: str = "float32") -> Path:
    if dtype not in DTYPES:
        raise ValueError(f"--dtype must be one of {DTYPES}, got {dtype!r}")
    extra = {}
    if pca_file is not None and pca_file.is_file():
        with np.load(pca_file) as pca:
            extra = {"pca_mean": pca["mean"], "pca_components": pca["components"]}
    config = {**config, "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    return write_model_folder(Path(out), table.astype(dtype), words, config, tokenizer_json, extra)
