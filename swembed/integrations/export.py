"""`swembed export`: a model as the edge format (npy, any dtype) or as folders that sentence-transformers
and model2vec load unchanged.

* ``npy``: the swembed model folder itself (``swembed.runtime.folder``), float32, float16 or int8 with one
  symmetric scale per row; readable with plain numpy (see README).
* ``st`` / ``model2vec``: a WordPiece tokenizer over our vocabulary stands in for our word tokeniser.
  Our words keep their rows; the teacher's ``##`` continuation pieces and ``[UNK]`` get zero rows, so
  an unknown word reduces to its longest vocabulary prefix (greedy, where ours follows the teacher's
  sub-word boundaries) and punctuation adds nothing. Zero rows change a mean's length, not its
  direction, and both libraries L2-normalise, so the vectors match ours wherever the two back-offs agree.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from swembed.runtime import StaticEmbedder
from swembed.runtime.folder import atomic_directory, write_model_folder

FORMATS = ("npy", "st", "model2vec")
DTYPES = ("float32", "float16", "int8")


def quantize_int8(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8: ``row ~= q * scale`` with ``scale = max|row| / 127``."""
    table = np.asarray(table, dtype=np.float32)
    scales = np.abs(table).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    return np.round(table / scales[:, None]).astype(np.int8), scales.astype(np.float32)


def float_table(model: StaticEmbedder) -> np.ndarray:
    table = np.asarray(model.table, dtype=np.float32)
    return table * model.scales[:, None] if model.scales is not None else table


def export_npy(model: StaticEmbedder, out: Path, dtype: str) -> Path:
    table, extra = float_table(model), {}
    if dtype == "int8":
        table, extra["scales"] = quantize_int8(table)
    else:
        table = table.astype(dtype)
    config = {k: v for k, v in model.config.items() if k not in ("format", "format_version", "dtype")}
    config["dtype"] = dtype
    config["tokenization"] = model.tokenizer.rules.to_dict()
    tokenizer_json = model.tokenizer.subword_tokenizer.to_str() if model.tokenizer.subword_tokenizer else None
    return write_model_folder(out, table, model.words, config, tokenizer_json, extra)


def wordpiece_tokenizer(model: StaticEmbedder):
    """(tokenizers.Tokenizer over our words + the teacher's ## pieces + [UNK], number of zero rows)."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece

    vocab = dict(model.tokenizer.vocab)
    if model.tokenizer.subword_tokenizer is not None:
        pieces = model.tokenizer.subword_tokenizer.get_vocab(with_added_tokens=False)
        for piece in sorted(p for p in pieces if p.startswith("##")):
            vocab.setdefault(piece, len(vocab))
    vocab.setdefault("[UNK]", len(vocab))
    tokenizer = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    steps = []
    rules = model.tokenizer.rules
    if rules.unicode_normalization:
        steps.append(getattr(normalizers, rules.unicode_normalization)())
    if rules.lowercase:
        steps.append(normalizers.Lowercase())
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(rules.word_pattern), behavior="isolated")])
    return tokenizer, len(vocab) - len(model.tokenizer.vocab)


def _padded_table(model: StaticEmbedder, extra_rows: int, dtype: str) -> np.ndarray:
    table = float_table(model)
    table = np.vstack([table, np.zeros((extra_rows, table.shape[1]), dtype=np.float32)])
    return table.astype(dtype)


def export_sentence_transformers(model: StaticEmbedder, out: Path, dtype: str) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, StaticEmbedding

    tokenizer, extra = wordpiece_tokenizer(model)
    weights = torch.from_numpy(_padded_table(model, extra, "float32"))
    static = StaticEmbedding(tokenizer, embedding_weights=weights.to(getattr(torch, dtype)))
    with atomic_directory(out) as tmp:
        SentenceTransformer(modules=[static, Normalize()], device="cpu").save(str(tmp))
    return out


def export_model2vec(model: StaticEmbedder, out: Path, dtype: str) -> Path:
    from model2vec import StaticModel

    tokenizer, extra = wordpiece_tokenizer(model)
    teacher = model.config.get("teacher", {}).get("hub_id")
    with atomic_directory(out) as tmp:
        StaticModel(_padded_table(model, extra, dtype), tokenizer, normalize=True,
                    base_model_name=teacher).save_pretrained(str(tmp))
    return out


def export(model_path: str | Path, fmt: str, out: str | Path, dtype: str = "float32") -> Path:
    from swembed import load

    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {FORMATS}, got {fmt!r}")
    if dtype not in DTYPES:
        raise ValueError(f"--dtype must be one of {DTYPES}, got {dtype!r}")
    if fmt != "npy" and dtype == "int8":
        raise ValueError("int8 is an npy-format option; st and model2vec take float32 or float16")
    model = load(model_path)
    if fmt != "npy" and "ensemble" in model.config:
        raise ValueError("an ensemble normalises each member's sub-space, which st and model2vec cannot express; "
                         "export it as npy")
    writer = {"npy": export_npy, "st": export_sentence_transformers, "model2vec": export_model2vec}[fmt]
    return writer(model, Path(out), dtype)
