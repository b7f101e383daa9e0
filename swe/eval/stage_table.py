"""The paper's Table 6 on our build: STS after each stage (extract, PCA without ABTT, PCA with ABTT, distill).

Reads the stage artifacts of a build's work directory; the PCA-without-ABTT row is refitted here on
the same sentences with the same seed (r = 0), everything else is read as built.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from swe.eval.sts import EN_SETS, evaluate_sts
from swe.runtime import StaticEmbedder, load


def stage_tables(model_dir: Path, work_dir: Path) -> dict[str, np.ndarray]:
    from swe.pipeline.extract import read_extract
    from swe.pipeline.pca import fit_pca, sentence_matrix

    model = load(model_dir)
    stages = {name: work_dir / info["artifact"] for name, info in model.config["build"]["stages"].items()
              if "artifact" in info}
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


def write_stage_report(model_dir: Path, work_dir: Path, data_dir: Path, out: Path, command: str) -> dict:
    model = load(model_dir)
    names = (*EN_SETS, "STSBenchmark-dev")
    rows = {}
    for label, table in stage_tables(model_dir, work_dir).items():
        encoder = StaticEmbedder(table, model.tokenizer)
        rows[label] = evaluate_sts(encoder.encode, data_dir, names)
        rows[label]["avg"] = round(float(np.mean([rows[label][n] for n in EN_SETS])), 2)
    header = ["stage", *EN_SETS, "avg (7)", "STS-B dev"]
    lines = [f"# Stage table (paper Table 6) for `{model_dir}`", "",
             f"Spearman x100 of cosine; avg over the 7 English test sets. Generated {time.strftime('%Y-%m-%d')} by",
             f"`{command}`.", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, scores in rows.items():
        cells = [label, *(f"{scores[n]:.2f}" for n in EN_SETS), f"**{scores['avg']:.2f}**",
                 f"{scores['STSBenchmark-dev']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows
