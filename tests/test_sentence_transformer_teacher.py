"""The sentence-transformers teacher gives what ``SentenceTransformer.encode`` gives: pooling, prompt and linear Dense
modules read from the folder itself."""
import importlib
import json
from pathlib import Path

import numpy as np
import pytest

from swembed.teachers import load_teacher
from swembed.teachers.base import TeacherSpec
from swembed.teachers.sentence_transformer import SentenceTransformerTeacher

TEXTS = ["A man is playing a guitar.", "The quick brown fox jumps over the lazy dog!", "Stonehenge gets soaking",
         "North Korea's nuclear test sparks worry in Seoul and Tokyo, officials said on Tuesday."]


@pytest.mark.teacher
def test_minilm_sentence_vectors_equal_sentence_transformers_encode():
    from sentence_transformers import SentenceTransformer

    ours = load_teacher("minilm", device="cpu")
    reference = SentenceTransformer(str(ours.folder), device="cpu").encode(TEXTS, normalize_embeddings=True)
    np.testing.assert_allclose(ours.encode(TEXTS), reference, atol=1e-5)


def dense_folder(tmp_path: Path, bias: bool = False, activation=None, safetensors: bool = True) -> Path:
    """A tiny random BERT (MiniLM's tokenizer) with mean pooling, two Dense modules (linear unless ``bias`` and
    ``activation`` say otherwise) and Normalize; weights saved as safetensors or, as older folders hold them, .bin."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, BertConfig, BertModel

    from swembed.teachers import TEACHERS

    # MiniLM's tokenizer files from its offline package, without loading (or resolving) the teacher itself
    minilm = Path(importlib.import_module(TEACHERS["minilm"].offline_package).get_model_path())
    torch.manual_seed(0)
    base = tmp_path / "base"
    BertModel(BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32)).save_pretrained(base)
    AutoTokenizer.from_pretrained(str(minilm)).save_pretrained(base)
    transformer = models.Transformer(str(base))
    identity, last = torch.nn.Identity(), activation or torch.nn.Identity()
    modules = [transformer, models.Pooling(16, "mean"), models.Dense(16, 48, bias=bias, activation_function=identity),
               models.Dense(48, 12 if activation else 16, bias=bias, activation_function=last), models.Normalize()]
    folder = tmp_path / "st"
    SentenceTransformer(modules=modules, device="cpu").save(str(folder), safe_serialization=safetensors)
    return folder


def test_linear_dense_modules_and_a_prompt_give_sentence_transformers_vectors(tmp_path):
    from sentence_transformers import SentenceTransformer

    folder = dense_folder(tmp_path)
    prompt = "task: sentence similarity | query: "
    ours = SentenceTransformerTeacher(folder, TeacherSpec("tiny", str(folder), prompt=prompt), device="cpu")
    reference = SentenceTransformer(str(folder), device="cpu").encode(TEXTS, prompt=prompt, normalize_embeddings=True)
    np.testing.assert_allclose(ours.encode(TEXTS), reference, atol=1e-5)
    # token vectors pass through the same map, so the pooled vector is still their mean's direction
    out = ours.forward(TEXTS[:1])
    mean = out.hidden[0].mean(dim=0).numpy()
    np.testing.assert_allclose(mean / np.linalg.norm(mean), out.pooled[0].numpy(), atol=1e-5)
    # the prompt's tokens are no text: the first text token starts at character 0
    spans = out.offsets[0][out.offsets[0][:, 0] >= 0]
    assert spans[0, 0] == 0 and (spans[:, 1] <= len(TEXTS[0])).all()


def test_a_dense_module_with_bias_and_tanh_maps_the_pooled_vector_only(tmp_path):
    """LaBSE's kind of Dense: it does not commute with pooling, so token vectors keep the transformer's width and
    only the sentence vector goes through it, as in sentence-transformers."""
    import torch
    from sentence_transformers import SentenceTransformer

    folder = dense_folder(tmp_path, bias=True, activation=torch.nn.Tanh(), safetensors=False)
    assert (folder / "3_Dense" / "pytorch_model.bin").is_file()
    ours = SentenceTransformerTeacher(folder, TeacherSpec("tiny", str(folder)), device="cpu")
    reference = SentenceTransformer(str(folder), device="cpu").encode(TEXTS, normalize_embeddings=True)
    np.testing.assert_allclose(ours.encode(TEXTS), reference, atol=1e-5)
    assert ours.forward(TEXTS[:1]).hidden.shape[-1] == 16 and ours.pooled_dim == 12


CACHE = Path.home() / ".cache" / "swembed" / "teachers"
GEMMA = CACHE / "embeddinggemma"


@pytest.mark.skipif(not (CACHE / "mpnet" / "config.json").is_file(),
                    reason="mpnet's offline copy is 440 MB from PyPI; `swembed build --teacher mpnet` fetches it once")
@pytest.mark.teacher
def test_mpnet_offline_copy_equals_sentence_transformers_encode():
    from sentence_transformers import SentenceTransformer

    ours = load_teacher("mpnet", device="cpu")
    reference = SentenceTransformer(str(ours.folder), device="cpu").encode(TEXTS, normalize_embeddings=True)
    np.testing.assert_allclose(ours.encode(TEXTS), reference, atol=1e-5)


@pytest.mark.skipif(not (GEMMA / "config.json").is_file(),
                    reason="EmbeddingGemma's offline copy is 1.15 GB from PyPI; run `swembed build --teacher "
                           "embeddinggemma` (or resolve it) once to fetch it")
@pytest.mark.teacher
def test_embeddinggemma_offline_copy_equals_sentence_transformers_encode():
    from sentence_transformers import SentenceTransformer

    ours = load_teacher("embeddinggemma", device="cpu")
    assert json.loads((GEMMA / "modules.json").read_text())[-1]["path"] == "4_Normalize"
    reference = SentenceTransformer(str(GEMMA), device="cpu").encode(TEXTS, prompt=ours.prompt,
                                                                     normalize_embeddings=True)
    np.testing.assert_allclose(ours.encode(TEXTS), reference, atol=1e-5)
    spans = ours.forward(TEXTS[:1]).offsets[0]
    assert spans[spans[:, 0] >= 0][0, 0] == 0  # Gemma's first text token holds the prompt's last space


def test_a_token_holding_the_prompts_last_space_is_the_texts_first_token():
    """XLM-R (multilingual-e5) and Gemma tokens carry the space before them: after the prompt ``query: `` the text's
    first token '▁A' spans the prompt's last character and the text's first. It belongs to the text (its first word
    gets its context); prompt tokens do not."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["<pad>", "query:", "▁A", "▁man", "▁is", "▁here"])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tokenizer.normalizer = normalizers.Replace(" ", "▁")
    # '▁A' is (6, 8) in the prompted text
    tokenizer.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    teacher = SentenceTransformerTeacher.__new__(SentenceTransformerTeacher)  # prepare needs no weights
    teacher.tokenizer, teacher.prompt, teacher.pad_id = tokenizer, "query: ", 0
    spans = teacher.prepare(["A man is here", "A man"]).offsets
    assert spans[0].tolist() == [[-1, -1], [0, 1], [1, 5], [5, 8], [8, 13]]
    assert spans[1].tolist() == [[-1, -1], [0, 1], [1, 5], [-1, -1], [-1, -1]]  # padding
