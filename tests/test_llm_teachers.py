"""LLM teachers on tiny random backbones: decoder, LENS, Causal2Vec, NV-Embed (see ../shared/notes/teacher-specs.md)."""

import numpy as np
import pytest
import torch
from llm_fixtures import bert_folder, llm_folder

from swembed.teachers import load_teacher

TEXTS = ["The small cat sees the dog.", "A happy bird", "The old teacher reads the famous book near the river ."]
INSTRUCTION = "Instruct: retrieve similar text. Query:"


def one_by_one(teacher, texts):
    return np.concatenate([teacher.forward([t]).pooled for t in texts])


@pytest.mark.parametrize("arch", ["mistral", "llama", "qwen2"])
@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_decoder_shapes_padding_and_offsets(tmp_path, arch, pooling):
    for side in ("right", "left"):
        folder = llm_folder(tmp_path / f"{arch}-{side}", arch, {"kind": "decoder", "pooling": pooling,
                                                                "padding_side": side, "instruction": INSTRUCTION})
        teacher = load_teacher(str(folder), device="cpu")
        out = teacher.forward(TEXTS)
        assert out.pooled.shape == (3, 64) and np.allclose(np.linalg.norm(out.pooled, axis=1), 1, atol=1e-5)
        np.testing.assert_allclose(out.pooled, one_by_one(teacher, TEXTS), atol=2e-5)  # padding changes nothing
        for row, text in enumerate(TEXTS):  # offsets land on words; BOS, instruction and EOS carry -1
            spans = [tuple(s) for s in out.offsets[row] if s[0] >= 0]
            assert [text[a:b].lower() for a, b in spans] == teacher.tokenizer.encode(text.lower()).tokens
    assert teacher.describe()["pooled_dim"] == 64


def test_bidirectional_attention_is_real(tmp_path):
    causal = load_teacher(str(llm_folder(tmp_path / "c", settings={"kind": "decoder"})), device="cpu")
    bidir = load_teacher(str(llm_folder(tmp_path / "b", settings={"kind": "decoder", "bidirectional": True})),
                         device="cpu")
    for teacher, expect_change in ((causal, False), (bidir, True)):
        a = teacher.forward(["the cat sees the dog"]).hidden[0, 1]
        b = teacher.forward(["the cat sees the bird"]).hidden[0, 1]  # only the last word differs
        assert (not torch.allclose(a, b, atol=1e-6)) == expect_change


def test_mean_pool_excludes_instruction_and_bos(tmp_path):
    teacher = load_teacher(str(llm_folder(tmp_path / "m", settings={"kind": "decoder", "instruction": INSTRUCTION})),
                           device="cpu")
    batch = teacher.prepare(["the cat sees the dog"])
    hidden = teacher.hidden_states(batch)
    n_head = 1 + len(teacher.tokenizer.encode(INSTRUCTION, add_special_tokens=False).ids)
    expected = hidden[0, n_head:].mean(0)  # 5 text tokens and the EOS
    np.testing.assert_allclose(teacher.pool(hidden, batch)[0].detach(), expected.detach(), rtol=1e-5, atol=1e-6)


def test_lens_head_features_and_pooling(tmp_path):
    from swembed.teachers.lens import LensTeacher, cluster_rows

    folder = llm_folder(tmp_path / "lens",
                        settings={"kind": "lens", "instruction": INSTRUCTION, "padding_side": "left"})
    teacher = LensTeacher(folder, load_teacher.__globals__["resolve_teacher"](str(folder))[1], device="cpu", k=16)
    from transformers import AutoModelForCausalLM

    original = AutoModelForCausalLM.from_pretrained(str(folder))
    rows = original.get_output_embeddings().weight.detach().numpy()
    labels, centroids = cluster_rows(rows, 16)
    head = teacher.model.get_output_embeddings().weight.detach().numpy()
    assert head.shape == (16, 64)
    np.testing.assert_allclose(head, centroids, atol=1e-5)
    for c in range(16):  # each centroid is the mean of its rows
        np.testing.assert_allclose(head[c], rows[labels == c].mean(0), atol=1e-5)
    assert torch.equal(teacher.model.get_input_embeddings().weight, original.get_input_embeddings().weight)
    out = teacher.forward(TEXTS)
    assert out.pooled.shape == (3, 16) and (out.pooled >= 0).all()
    np.testing.assert_allclose(np.linalg.norm(out.pooled, axis=1), 1, atol=1e-5)
    np.testing.assert_allclose(out.pooled, one_by_one(teacher, TEXTS), atol=2e-5)
    # hand-computed: max over text tokens i of log1p(relu(logits at i-1)); instruction logits never matter
    batch = teacher.prepare([TEXTS[0]])
    features = teacher.lexicon(teacher.hidden_states(batch))[0]
    text_positions = torch.nonzero(batch.text[0]).flatten()
    manual = features[text_positions - 1].max(0).values
    np.testing.assert_allclose(out.pooled[0], (manual / manual.norm()).detach().numpy(), atol=1e-5)
    instruction_positions = torch.arange(1, int(text_positions[0]) - 1)
    zeroed = features.clone()
    zeroed[instruction_positions] = 0
    assert torch.allclose(zeroed[text_positions - 1].max(0).values, manual)
    a = teacher.forward(["the cat sees the dog"]).hidden[0, 2]
    b = teacher.forward(["the cat sees the bird"]).hidden[0, 2]
    assert not torch.allclose(a, b)  # bidirectional


def test_causal2vec_contextual_token(tmp_path):
    from swembed.teachers.causal2vec import Projector, save_projector

    folder = llm_folder(tmp_path / "c2v", "llama", {"kind": "causal2vec", "instruction": INSTRUCTION})
    bert_folder(folder / "encoder")
    torch.manual_seed(0)
    save_projector(Projector(32, 64), folder)
    teacher = load_teacher(str(folder), device="cpu")
    out = teacher.forward(TEXTS)
    assert out.pooled.shape == (3, 128) and np.allclose(np.linalg.norm(out.pooled, axis=1), 1, atol=1e-5)
    np.testing.assert_allclose(out.pooled, one_by_one(teacher, TEXTS), atol=2e-5)
    # C sees only [BOS, instruction, C]: with the encoder vector held fixed, changing the text moves EOS, not C
    fixed = teacher.contextual_vectors(["the cat sees the dog"]).detach()
    states = []
    for text in ("the cat sees the dog", "a famous ship builds 7 letters"):
        batch = teacher.prepare([text])
        states.append((teacher.states_with(batch, fixed)[0], teacher.context_slot(batch)[0], batch.eos[0]))
    (h1, c1, e1), (h2, c2, e2) = states
    assert c1 == c2 == 1 + len(teacher.tokenizer.encode(INSTRUCTION, add_special_tokens=False).ids)
    assert torch.allclose(h1[c1], h2[c2], atol=1e-6) and not torch.allclose(h1[e1], h2[e2], atol=1e-4)


def test_nvembed_latent_attention(tmp_path):
    from safetensors.torch import save_file

    from swembed.teachers.nvembed import LATENT_FILE, LatentAttention

    folder = llm_folder(tmp_path / "nv", settings={"kind": "nvembed", "instruction": INSTRUCTION, "latents": 16,
                                                   "heads": 2, "dim_head": 64, "mlp_mult": 2})
    torch.manual_seed(0)
    latent = LatentAttention(64, latents=16, heads=2, dim_head=64, mlp_mult=2)
    assert {"latents", "cross_attend_blocks.0.norm.weight", "cross_attend_blocks.0.norm_context.weight",
            "cross_attend_blocks.0.fn.to_q.weight", "cross_attend_blocks.0.fn.to_kv.weight",
            "cross_attend_blocks.0.fn.to_out.weight", "cross_attend_blocks.1.norm.weight",
            "cross_attend_blocks.1.fn.net.0.weight", "cross_attend_blocks.1.fn.net.2.weight",
            } <= set(latent.state_dict())
    save_file({k: v.contiguous() for k, v in latent.state_dict().items()}, str(folder / LATENT_FILE))
    teacher = load_teacher(str(folder), device="cpu")
    assert latent(torch.zeros(2, 5, 64)).shape == (2, 5, 64)
    out = teacher.forward(TEXTS)
    assert out.pooled.shape == (3, 64) and np.allclose(np.linalg.norm(out.pooled, axis=1), 1, atol=1e-5)
    np.testing.assert_allclose(out.pooled, one_by_one(teacher, TEXTS), atol=2e-5)
    batch = teacher.prepare(["the cat sees the dog"])
    mask = teacher.pool_mask(batch)[0]
    n_head = 1 + len(teacher.tokenizer.encode(INSTRUCTION, add_special_tokens=False).ids)
    assert not mask[:n_head].any() and mask[n_head:].all()  # BOS and instruction out; text and EOS in
    a = teacher.forward(["the cat sees the dog"]).hidden[0, n_head]
    b = teacher.forward(["the cat sees the bird"]).hidden[0, n_head]
    assert not torch.allclose(a, b)  # bidirectional


def test_too_large_teacher_fails_clearly(tmp_path):
    from swembed.teachers import TeacherError
    from swembed.teachers.decoder import check_fits, check_params_fit

    with pytest.raises(TeacherError, match="7.1B parameters.*26.5 GiB on cpu"):
        check_params_fit(7.11e9, torch.device("cpu"), "e5-mistral", free=24 * 2**30)
    check_params_fit(7.11e9, torch.device("cuda"), "e5-mistral", free=80 * 2**30)  # bf16 on an 80 GB GPU fits
    with pytest.raises(TeacherError):  # on this kind of machine: too large, refused before any download
        load_teacher("e5-mistral", device="cpu")

    folder = llm_folder(tmp_path / "big", settings={"kind": "decoder"})
    stored = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    check_fits(folder, torch.device("cpu"), torch.float32, free=10 * stored)
    with pytest.raises(TeacherError, match="GiB free"):
        check_fits(folder, torch.device("cpu"), torch.float32, free=stored // 2)


@pytest.mark.parametrize("kind", ["decoder", "lens", "causal2vec", "nvembed"])
def test_swe_build_runs_end_to_end_on_each_llm_teacher(tmp_path, tiny_corpus, kind):
    """`swembed build --teacher <tiny local LLM folder>` through extract, PCA and distillation, on CPU."""
    from conftest import small_build_args

    import swembed
    from swembed.cli import main

    folder = llm_folder(tmp_path / kind, "mistral", {"kind": kind, "bidirectional": kind != "causal2vec",
                                                     "latents": 8, "heads": 2, "dim_head": 32, "mlp_mult": 2})
    dim = "32"
    extra = []
    if kind == "lens":
        from transformers import AutoModelForCausalLM

        from swembed.teachers.lens import HEAD_FILE, cluster_rows

        rows = AutoModelForCausalLM.from_pretrained(str(folder)).get_output_embeddings().weight.detach().numpy()
        np.save(folder / HEAD_FILE, cluster_rows(rows, 24)[1])
        dim, extra = "24", ["--pca-level", "none", "--lexicon-top-k", "4"]  # a lexicon table over 24 clusters
    if kind == "causal2vec":
        from swembed.teachers.causal2vec import Projector, save_projector

        bert_folder(folder / "encoder")
        save_projector(Projector(32, 64), folder)
    if kind == "nvembed":
        from safetensors.torch import save_file

        from swembed.teachers.nvembed import LATENT_FILE, LatentAttention

        latent = LatentAttention(64, latents=8, heads=2, dim_head=32, mlp_mult=2)
        save_file({k: v.contiguous() for k, v in latent.state_dict().items()}, str(folder / LATENT_FILE))
    args = small_build_args(tiny_corpus, tmp_path / "model")
    args[args.index("minilm")] = str(folder)
    args[args.index("--dim") + 1] = dim
    assert main(args + extra) == 0
    model = swembed.load(tmp_path / "model")
    assert model.dim == int(dim) and model.config["teacher"]["kind"] == kind
    vectors = model.encode(["the small cat sees the dog", "a happy bird"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    if kind == "lens":  # each word keeps its 4 strongest clusters
        assert ((np.asarray(model.table) != 0).sum(axis=1) <= 4).all()


def test_llm_teacher_kinds_are_one_registry_and_an_unknown_kind_is_refused(tmp_path):
    import importlib

    from swembed.teachers.base import TeacherError
    from swembed.teachers.registry import LLM_KINDS, load_teacher

    for kind in LLM_KINDS.values():  # every registered kind names a class that exists
        assert isinstance(getattr(importlib.import_module(kind.module), kind.cls), type), kind
    folder = tmp_path / "teacher"
    folder.mkdir()
    (folder / "swe_teacher.json").write_text('{"kind": "mamba"}', encoding="utf-8")
    (folder / "config.json").write_text('{"architectures": ["MambaForCausalLM"]}', encoding="utf-8")
    with pytest.raises(TeacherError, match="unknown teacher kind 'mamba'; known: sentence-transformer, decoder, "
                                           "lens, causal2vec, nvembed"):
        load_teacher(str(folder))
