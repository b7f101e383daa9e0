"""`swembed export`: a model as the edge format (npy, any dtype) or as folders that sentence-transformers
and model2vec load unchanged.

* ``npy``: the swembed model folder itself (``swembed.runtime.folder``), float32, float16 or int8 with one
  symmetric scale per row; readable with plain numpy (see README).
* ``st`` / ``model2vec``: a tokenizers pipeline with swembed's normalisation, word split, words and the teacher's
  piece split (``swembed.integrations.wordpiece``), which encodes as swembed does except where those formats
  cannot say it (unknown words of several pieces, gram rows); the agreement measured on built-in probe texts
  (``swembed.integrations.agreement``) is recorded in the folder and printed by ``swembed export``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swembed.integrations.agreement import probe_agreement, record_agreement
from swembed.integrations.wordpiece import wordpiece_export
from swembed.runtime import StaticEmbedder
from swembed.runtime.folder import KIND_WEIGHT_FILES, atomic_directory, read_model_folder, write_model_folder
from swembed.runtime.hub import CARD_FILE, local_or_hub, model_card
from swembed.runtime.outputs import check_writable

DTYPES = ("float32", "float16", "int8")


def quantize_int8(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8: ``row ~= q * scale`` with ``scale = max|row| / 127``."""
    table = np.asarray(table, dtype=np.float32)
    scales = np.abs(table).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    return np.round(table / scales[:, None]).astype(np.int8), scales.astype(np.float32)


def load_for_export(model_path: str | Path) -> StaticEmbedder:
    """The load check of every export format: the folder read with its values scanned for NaN and infinities
    whatever its marker records (a file changed in place may keep its size and modification time), so ``st`` and
    ``model2vec`` refuse a damaged table exactly as ``npy`` does."""
    path = local_or_hub(model_path)  # a folder, or a Hub repo id's download
    read_model_folder(path, scan_values=True)
    return StaticEmbedder.load(path)


def float_table(model: StaticEmbedder) -> np.ndarray:
    return model.float_rows()


def export_npy(model: StaticEmbedder, out: Path, dtype: str, overwrite: bool = False,
               inputs: Iterable[str | Path] = ()) -> Path:
    table, extra = float_table(model), {}
    if dtype == "int8":
        table, extra["scales"] = quantize_int8(table)
    else:
        table = table.astype(dtype)
    config = {k: v for k, v in model.config.items() if k not in ("format", "format_version", "dtype", "storage")}
    config["dtype"] = dtype
    config["tokenization"] = model.tokenizer.rules.to_dict()
    extra.update({KIND_WEIGHT_FILES[kind].removesuffix(".npy"): w for kind, w in model.kind_weights.items()})
    teacher_tokenizer = model.tokenizer.teacher_tokenizer
    tokenizer_json = teacher_tokenizer.to_str() if teacher_tokenizer is not None else None
    return write_model_folder(out, table, model.labels, config, tokenizer_json, extra, overwrite=overwrite,
                              inputs=inputs)


def export_sentence_transformers(model: StaticEmbedder, out: Path, dtype: str, overwrite: bool = False,
                                 inputs: Iterable[str | Path] = ()) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, StaticEmbedding

    tokenizer, table = wordpiece_export(model, "float32")
    weights = torch.from_numpy(table)
    static = StaticEmbedding(tokenizer, embedding_weights=weights.to(getattr(torch, dtype)))
    with atomic_directory(out, overwrite, "export-st", inputs) as tmp:
        SentenceTransformer(modules=[static, Normalize()], device="cpu").save(str(tmp))
        loaded = SentenceTransformer(str(tmp), device="cpu")
        record_agreement(tmp, "st", probe_agreement(model, lambda texts: loaded.encode(list(texts))))
        (tmp / CARD_FILE).write_text(model_card(model.path, files=tmp, name=out.name, fmt="st"), encoding="utf-8")
    return out


def export_model2vec(model: StaticEmbedder, out: Path, dtype: str, overwrite: bool = False,
                     inputs: Iterable[str | Path] = ()) -> Path:
    from model2vec import StaticModel

    tokenizer, table = wordpiece_export(model, dtype)
    teacher = model.config.get("teacher", {}).get("hub_id")
    with atomic_directory(out, overwrite, "export-model2vec", inputs) as tmp:
        StaticModel(table, tokenizer, normalize=True, base_model_name=teacher,
                    max_length=None).save_pretrained(str(tmp))  # None: texts are never cut
        loaded = StaticModel.from_pretrained(str(tmp))
        record_agreement(tmp, "model2vec", probe_agreement(model, lambda texts: loaded.encode(list(texts))))
        (tmp / CARD_FILE).write_text(model_card(model.path, files=tmp, name=out.name, fmt="model2vec"),
                                     encoding="utf-8")
    return out


@dataclass(frozen=True)
class ExportFormat:
    """One ``swembed export --format``: what it writes (for the CLI's help), the dtypes it takes, whether it can hold
    an ensemble's per-member normalisation, and its writer."""

    name: str
    description: str
    dtypes: tuple[str, ...]
    ensembles: bool
    writer: Callable[..., Path]


# The export formats: the CLI's choices and help, the docs and `export` all read this one registry.
FORMATS = {format_.name: format_ for format_ in (
    ExportFormat("npy", "the swembed folder itself (edge; int8 with a scale per row)", DTYPES, True, export_npy),
    ExportFormat("st", "a sentence-transformers folder (StaticEmbedding)", ("float32", "float16"), False,
                 export_sentence_transformers),
    ExportFormat("model2vec", "a model2vec folder (StaticModel)", ("float32", "float16"), False, export_model2vec),
)}


def export_format(name: str) -> ExportFormat:
    """The registered format ``name``; any other is refused in one line."""
    if name not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {name!r}")
    return FORMATS[name]


def kinds_left_out(model_path: str | Path, fmt: str) -> str | None:
    """What an ``st`` or ``model2vec`` export of a table with query, document or lexical weights says: those formats
    have no kinds and no lexical channel, so the export encodes every text with no kind (the document side of a table
    with query weights only); npy keeps the weights. None when nothing is left out."""
    from swembed.runtime.folder import KIND_WEIGHTS, read_config

    kinds = sorted(read_config(Path(local_or_hub(model_path))).get(KIND_WEIGHTS) or {})
    if fmt == "npy" or not kinds:
        return None
    return (f"note: {fmt} has no query/document kinds: the export encodes every text as swembed does with no kind "
            f"(the document side); the table's {' and '.join(kinds)} weights are left out (npy keeps them)")


def export(model_path: str | Path, fmt: str, out: str | Path, dtype: str = "float32", overwrite: bool = False) -> Path:
    format_ = export_format(fmt)
    if dtype not in DTYPES:
        raise ValueError(f"--dtype must be one of {DTYPES}, got {dtype!r}")
    if dtype not in format_.dtypes:
        raise ValueError(f"{dtype} is not an option of the {fmt} format, which takes {' or '.join(format_.dtypes)}")
    read = [str(model_path)]
    check_writable(Path(out), overwrite, read)  # before loading: never the model or inside it, nor a folder
    model = load_for_export(model_path)         # swembed did not write
    if not format_.ensembles and "ensemble" in model.config:
        raise ValueError(f"an ensemble normalises each member's sub-space, which {fmt} cannot express; "
                         "export it as npy")
    return format_.writer(model, Path(out), dtype, overwrite, read)
