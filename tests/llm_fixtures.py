"""Tiny random decoder LLMs (and a tiny BERT) saved as local teacher folders, with a word-level tokenizer."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from conftest import ADJS, NOUNS, VERBS
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>", "[CLS]", "[SEP]"]
WORDS = sorted(set(["the", "a", "near", "with", "goodness", "number", "instruct", "query", "retrieve", "similar",
                    "text", ":", ".", ",", "!", "?"] + NOUNS + VERBS + ADJS + [str(i) for i in range(400)]))


def word_tokenizer() -> Tokenizer:
    vocab = {t: i for i, t in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    return tok


def llm_folder(path: Path, arch: str = "mistral", settings: dict | None = None, seed: int = 0) -> Path:
    from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig, Qwen2Config

    torch.manual_seed(seed)
    tok = word_tokenizer()
    config_class = {"mistral": MistralConfig, "llama": LlamaConfig, "qwen2": Qwen2Config}[arch]
    config = config_class(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                          bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(path)
    tok.save(str(path / "tokenizer.json"))
    if settings is not None:
        (path / "swe_teacher.json").write_text(json.dumps(settings))
    return path


def bert_folder(path: Path, seed: int = 0) -> Path:
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    tok = word_tokenizer()
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(path)
    tok.save(str(path / "tokenizer.json"))
    return path
