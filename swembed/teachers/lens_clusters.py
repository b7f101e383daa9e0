"""`swembed lens-clusters`: KMeans over a model's LM head (or, for an encoder, its token embeddings) into k
token clusters, the head of a LENS teacher (``swembed.teachers.lens``); the clusters are written as JSON for
inspection, the centroids beside them.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from swembed.teachers.lens import cluster_rows


def token_matrix(model: str | Path) -> tuple[np.ndarray, list[str], str]:
    """(rows, token of each row, which matrix): a causal LM's output head (what LENS clusters), else the
    model's input token embeddings (encoders such as MiniLM or mpnet have no LM head)."""
    from swembed.teachers.registry import resolve_teacher

    folder, _ = resolve_teacher(str(model))
    config = json.loads((folder / "config.json").read_text())
    architectures = config.get("architectures") or []
    from tokenizers import Tokenizer

    tokens_by_id = {i: t for t, i in Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab().items()}
    if any(a.endswith("ForCausalLM") for a in architectures):
        from transformers import AutoModelForCausalLM

        net = AutoModelForCausalLM.from_pretrained(str(folder))
        matrix, which = net.get_output_embeddings().weight, "lm_head"
    else:
        from transformers import AutoModel

        net = AutoModel.from_pretrained(str(folder))
        matrix, which = net.get_input_embeddings().weight, "input_embeddings"
    rows = matrix.detach().float().numpy()
    return rows, [tokens_by_id.get(i, f"<id {i}>") for i in range(len(rows))], which


def vocab_clusters(model: str, k: int, out: Path, seed: int = 0, overwrite: bool = False) -> dict:
    """Cluster a model's token matrix into k clusters; write ``out`` (JSON: cluster -> tokens) and the centroids
    beside it (``<out stem>.centroids.npy``, float32: a LENS head for that model). Both are checked as every
    output is (``check_writable``) before the clustering starts."""
    from swembed.runtime.outputs import atomic_file, check_writable

    out = Path(out)
    centroid_path = out.with_name(out.stem + ".centroids.npy")
    read = [str(model)]  # a teacher folder; a short name or hub id names no local path
    for path in (out, centroid_path):
        check_writable(path, overwrite, read, folder=False)
    rows, tokens, which = token_matrix(model)
    labels, centroids = cluster_rows(rows, k, seed)
    clusters: list[list[str]] = [[] for _ in range(k)]
    for token, label in zip(tokens, labels.tolist()):
        clusters[label].append(token)
    summary = {"model": str(model), "matrix": which, "rows": int(len(rows)), "k": k, "seed": seed,
               "centroids": centroid_path.name, "clusters": {str(i): c for i, c in enumerate(clusters)}}
    with atomic_file(centroid_path, overwrite, read) as tmp, open(tmp, "wb") as handle:
        np.save(handle, centroids)
    with atomic_file(out, overwrite, read) as tmp:
        tmp.write_text(json.dumps(summary, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    return summary


def example_clusters(summary: dict, probes: tuple[str, ...] = ("quickly", "review", "education", "king", "running"),
                     limit: int = 12) -> list[list[str]]:
    """The clusters holding some probe words (the paper shows {quickly, rapid, rapidly, swift}), each once; a probe
    also matches its word-initial token (byte-level BPE ``Ġword``, SentencePiece ``▁word``)."""
    found: dict[str, list[str]] = {}
    for probe in probes:
        forms = {probe, "Ġ" + probe, "▁" + probe}
        for cluster, members in summary["clusters"].items():
            if forms & set(members) and cluster not in found:
                found[cluster] = members[:limit]
    return list(found.values())
