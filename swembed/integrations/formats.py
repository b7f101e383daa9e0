"""`swembed export`: a model as the edge format (npy, any dtype) or as folders that sentence-transformers
and model2vec load unchanged.

* ``npy``: the swembed model folder itself (``swembed.runtime.folder``), float32, float16 or int8 with one
  symmetric scale per row; readable with plain numpy (see README).
* ``st`` / ``model2vec``: a WordPiece tokenizer over our vocabulary stands in for our word tokeniser.
  Our words keep their rows, and so do the table's piece rows (``##`` continuations, and word-initial
  pieces that are not also words); other ``##`` pieces and ``[UNK]`` get zero rows. An unknown word is
  split greedily over that vocabulary (ours follows the teacher's own split and weights each piece w/p,
  ``oov_weight`` w, which these libraries have no place for),
  and punctuation adds nothing (pieces that are not word characters are left out). Zero rows change a mean's
  length, not its direction, and both libraries L2-normalise, so the vectors match ours on every text whose
  words are all known. A multilingual table's
  languages share one vocabulary there, zh/ja words read by greedy longest match (``export_vocab``).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np

from swembed.runtime import StaticEmbedder
from swembed.runtime.folder import atomic_directory, read_model_folder, write_model_folder
from swembed.runtime.outputs import check_writable

FORMATS = ("npy", "st", "model2vec")
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
    read_model_folder(Path(model_path), scan_values=True)
    return StaticEmbedder.load(model_path)


def float_table(model: StaticEmbedder) -> np.ndarray:
    return model.float_rows()


def export_npy(model: StaticEmbedder, out: Path, dtype: str, overwrite: bool = False,
               inputs: Iterable[str | Path] = ()) -> Path:
    table, extra = float_table(model), {}
    if dtype == "int8":
        table, extra["scales"] = quantize_int8(table)
    else:
        table = table.astype(dtype)
    config = {k: v for k, v in model.config.items() if k not in ("format", "format_version", "dtype")}
    config["dtype"] = dtype
    config["tokenization"] = model.tokenizer.rules.to_dict()
    teacher_tokenizer = model.tokenizer.teacher_tokenizer
    tokenizer_json = teacher_tokenizer.to_str() if teacher_tokenizer is not None else None
    return write_model_folder(out, table, model.labels, config, tokenizer_json, extra, overwrite=overwrite,
                              inputs=inputs)


def export_vocab(model: StaticEmbedder) -> dict[str, int]:
    """Each token's row in the WordPiece vocabulary that st and model2vec read. A multilingual table's languages
    merge into one vocabulary, since those libraries cannot be told a text's language: a surface form that several
    languages have keeps the row of the language that saw it in the most sentences at build time
    (``word_contexts.npy``; else the first language). A language without spaces (zh/ja: teacher tokens or a
    segmenter's words) has its words as continuations too (``##w``), so WordPiece's greedy longest match reads a
    run of them as those words."""
    if not model.tokenizers:
        return dict(model.tokenizer.vocab)
    splitting = {replace(tokenizer.rules, words="pattern", oov_backoff="none")
                 for tokenizer in model.tokenizers.values()}
    if len(splitting) > 1:
        raise ValueError(f"the languages {model.languages} of this table normalise or split text differently, which "
                         "one st/model2vec tokenizer cannot express; export it as npy")
    counts = model.word_contexts
    rows: dict[str, int] = {}
    for tokenizer in model.tokenizers.values():
        spaced = tokenizer.rules.words == "pattern"
        for word, row in tokenizer.vocab.items():
            for token in (word,) if spaced else (word, "##" + word):
                kept = rows.get(token)
                if kept is None or (counts is not None and counts[row] > counts[kept]):
                    rows[token] = row
    return rows


def wordpiece_spelling(pieces, lowercase: bool) -> Callable[[str], str]:
    """How the teacher's pieces are spelled in a WordPiece vocabulary. WordPiece pieces are as they are;
    sentencepiece (Unigram, e5/XLM-R) marks a word start with '▁' where WordPiece marks a continuation with '##',
    and its pieces are cased where our words may be lowercased (then the first spelling wins)."""
    if pieces is None or json.loads(pieces.to_str())["model"]["type"] != "Unigram":
        return lambda piece: piece
    case = str.lower if lowercase else str
    return lambda piece: case(piece[1:]) or piece if piece.startswith("▁") else "##" + case(piece)


def wordpiece_export(model: StaticEmbedder, dtype: str):
    """(tokenizers.Tokenizer over our words (``export_vocab``), the piece rows, the teacher's other ## pieces and
    [UNK]; the table with one row per token). A piece row whose text is also a word is shadowed by the word and
    left out; the other ## pieces and [UNK] get zero rows."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece

    vocab = export_vocab(model)
    labels = model.labels
    rules = model.tokenizer.rules
    as_wordpiece = wordpiece_spelling(model.tokenizer.teacher_tokenizer, rules.lowercase)
    word = re.compile(rules.word_pattern)
    for row in sorted(model.tokenizer.piece_rows.values()):
        spelled = as_wordpiece(labels[row])
        if word.fullmatch(spelled.removeprefix("##")):  # punctuation pieces: our tokeniser never reaches them
            vocab.setdefault(spelled, row)
    tokens = sorted(vocab, key=lambda token: (vocab[token], token))  # in table order
    source_rows = np.array([vocab[token] for token in tokens], dtype=np.int64)  # a zh/ja word twice: w and ##w
    vocab = {token: i for i, token in enumerate(tokens)}
    rows = len(tokens)
    if model.tokenizer.teacher_tokenizer is not None:
        pieces = model.tokenizer.teacher_tokenizer.get_vocab(with_added_tokens=False)
        for piece in sorted(p for p in pieces if p.startswith("##") and p not in vocab):
            vocab[piece] = rows
            rows += 1
    vocab.setdefault("[UNK]", rows)
    tokenizer = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=400))
    steps = []
    if rules.unicode_normalization:
        steps.append(getattr(normalizers, rules.unicode_normalization)())
    if rules.lowercase:
        steps.append(normalizers.Lowercase())
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(rules.word_pattern), behavior="isolated")])
    table = float_table(model)[source_rows]
    table = np.vstack([table, np.zeros((len(vocab) - len(tokens), table.shape[1]), dtype=np.float32)])
    return tokenizer, table.astype(dtype)


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
    return out


def export_model2vec(model: StaticEmbedder, out: Path, dtype: str, overwrite: bool = False,
                     inputs: Iterable[str | Path] = ()) -> Path:
    from model2vec import StaticModel

    tokenizer, table = wordpiece_export(model, dtype)
    teacher = model.config.get("teacher", {}).get("hub_id")
    with atomic_directory(out, overwrite, "export-model2vec", inputs) as tmp:
        StaticModel(table, tokenizer, normalize=True,
                    base_model_name=teacher).save_pretrained(str(tmp))
    return out


def export(model_path: str | Path, fmt: str, out: str | Path, dtype: str = "float32", overwrite: bool = False) -> Path:
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {FORMATS}, got {fmt!r}")
    if dtype not in DTYPES:
        raise ValueError(f"--dtype must be one of {DTYPES}, got {dtype!r}")
    if fmt != "npy" and dtype == "int8":
        raise ValueError("int8 is an npy-format option; st and model2vec take float32 or float16")
    read = [str(model_path)]
    check_writable(Path(out), overwrite, read)  # before loading: never the model or inside it, nor a folder
    model = load_for_export(model_path)         # swembed did not write
    if fmt != "npy" and "ensemble" in model.config:
        raise ValueError("an ensemble normalises each member's sub-space, which st and model2vec cannot express; "
                         "export it as npy")
    writer = {"npy": export_npy, "st": export_sentence_transformers, "model2vec": export_model2vec}[fmt]
    return writer(model, Path(out), dtype, overwrite, read)
