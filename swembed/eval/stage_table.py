"""The paper's Table 6 on our build: STS after each stage (extract, PCA without ABTT, PCA with ABTT, distill).

Reads the stage artifacts of a build's work directory; the PCA-without-ABTT row is refitted here on
the same sentences with the same seed (r = 0), everything else is read as built.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from swembed.runtime import load


def stage_dirs(model, work_dir: Path) -> dict[str, Path]:
    """Artifact folder of each stage of the build that produced ``model`` (from its config.json)."""
    return {name: Path(work_dir) / info["artifact"] for name, info in model.config["build"]["stages"].items()
            if "artifact" in info}


def stage_tables(model_dir: Path, work_dir: Path) -> dict[str, np.ndarray]:
    from swembed.pipeline.extract import read_extract
    from swembed.pipeline.pca import fit_pca, sentence_matrix

    model = load(model_dir)
    stages = stage_dirs(model, work_dir)
    vectors, sentences, _ = read_extract(stages["extract"])
    pca_config = json.loads((stages["pca"] / "manifest.json").read_text())["config"]
    rng = np.random.default_rng(pca_config["seed"])
    take = np.sort(rng.permutation(len(sentences))[: pca_config["sentences"]])
    data = sentence_matrix(vectors, model.tokenizer, [sentences[i] for i in take])
    mean, components, _ = fit_pca(data)
    no_abtt = ((vectors - mean) @ components[: pca_config["dim"]].T).astype(np.float32)
    tables = {"after extract (3.1)": vectors, "after PCA without ABTT": no_abtt,
              "after PCA with ABTT (3.2)": np.load(stages["pca"] / "table.npy")}
    if "distill" in stages:
        tables["after distillation (3.3)"] = np.load(stages["distill"] / "table.npy")
    return tables
