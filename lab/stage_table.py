"""The paper's Table 6 on our build: the table after each stage (compose, PCA without ABTT, PCA with ABTT, distill),
read from the build's work directory (PCA without ABTT is a slice of the same fit: no refitting)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from swembed.pipeline import files
from swembed.runtime import load


def stage_dirs(model, work_dir: Path) -> dict[str, Path]:
    """Artifact folder of each stage of the build that produced ``model`` (from its config.json)."""
    return {name: Path(work_dir) / info["artifact"] for name, info in model.config["build"]["stages"].items()
            if "artifact" in info}


def stage_tables(model_dir: Path, work_dir: Path) -> dict[str, np.ndarray]:
    model = load(model_dir)
    stages = stage_dirs(model, work_dir)
    composed = np.load(stages["compose"] / files.TABLE)
    tables = {"after extract and compose (3.1)": composed}
    with np.load(stages["pca"] / files.PCA) as pca:
        mean, components, drop, dim = pca["mean"], pca["components"], int(pca["drop"]), int(pca["dim"])
    tables["after PCA without ABTT"] = ((composed - mean) @ components[:dim].T).astype(np.float32)
    tables["after PCA with ABTT (3.2)"] = ((composed - mean) @ components[drop : drop + dim].T).astype(np.float32)
    if "distill" in stages:
        tables["after distillation (3.3)"] = np.load(stages["distill"] / files.TABLE)
    return tables
