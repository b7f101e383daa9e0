"""The stages that fit one weight per row of a written model folder on the recipe's query -> passage pairs (query
weights, ``swembed.pipeline.query_weights``; lexical weights, ``swembed.pipeline.lexical_weights``): read the pairs
(those repeating a held-out text dropped), fit, cache the weights as the stage's artifact, then write them into the
folder under ``KIND_WEIGHT_FILES[kind]`` and name them in config.json's ``kind_weights``."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from swembed.pipeline.parallel import read_parallel
from swembed.pipeline.sources import HELD_OUT_RULE, describe_source, expand_sources, held_out_keys
from swembed.runtime.embedder import StaticEmbedder
from swembed.runtime.folder import KIND_WEIGHT_FILES, KIND_WEIGHTS, atomic_save_npy, read_config, update_config
from swembed.runtime.settings import stage_key

if TYPE_CHECKING:  # annotations only
    from swembed.pipeline.stage import StageContext, StageResult, StageRun

# (model, pairs, the section's settings, seed) -> (weights, one per row, float32; statistics)
Fit = Callable[[StaticEmbedder, list[tuple[str, str]], Any, int], tuple[np.ndarray, dict]]


def run_row_weights(ctx: StageContext, section: str, kind: str, config: Any, folder: Path,
                    tables: list[StageResult], exclude: list[str], fit: Fit) -> StageResult:
    """Fit ``kind``'s row weights of the model folder ``folder`` (made from the stages ``tables``) on the pairs of
    ``config.files`` (the settings of recipe section ``section``), cached; ``add_row_weights`` puts them in the
    folder."""
    identity = {**stage_key(config), "files": [describe_source(p) for p in config.files],
                "exclude": [describe_source(p) for p in expand_sources(exclude)], **HELD_OUT_RULE, "seed": ctx.seed}

    def compute(run: StageRun) -> dict:
        pairs = read_parallel(config.files, held_out_keys(exclude))
        if not pairs:
            raise ValueError(f"[{section}] files {config.files}: no query<TAB>passage pair")
        weights, stats = fit(StaticEmbedder.load(folder), pairs, config, ctx.seed)
        atomic_save_npy(run.out / KIND_WEIGHT_FILES[kind], weights)
        return stats

    return ctx.run(section, identity, tables, compute)


def add_row_weights(folder: Path, kind: str, stage: StageResult) -> None:
    """Write the stage's row weights of ``kind`` into the model folder and name them in its config.json."""
    write_row_weights(folder, kind, np.load(stage.path / KIND_WEIGHT_FILES[kind]))


def write_row_weights(folder: Path, kind: str, weights: np.ndarray) -> None:
    """``weights`` as ``kind``'s row weights of the model folder ``folder`` (the file, then config.json names it
    beside the kinds it names already)."""
    atomic_save_npy(Path(folder) / KIND_WEIGHT_FILES[kind], np.asarray(weights, dtype=np.float32))
    named = read_config(Path(folder)).get(KIND_WEIGHTS) or {}
    update_config(Path(folder), {KIND_WEIGHTS: {**named, kind: KIND_WEIGHT_FILES[kind]}})
