"""Public LLM-embedder checkpoint layouts (NV-Embed-v2, LENS-d8000, Causal2Vec) mapped onto our modules.

``data/llm_public_layouts.json`` holds the public parameter names and shapes (no weights; how they were obtained
is in its ``source`` fields and reports/llm.md). Full-size modules are built on the ``meta`` device from the
public configs, so names *and* shapes are checked at 7B size in milliseconds; tiny folders in the public layouts
then load through ``load_teacher`` end to end.
"""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from llm_fixtures import llm_folder

from swembed.teachers import TeacherError, load_teacher

LAYOUTS = json.loads((Path(__file__).parent / "data" / "llm_public_layouts.json").read_text())
TEXTS = ["The small cat sees the dog.", "A happy bird"]


def meta_tensors(names: dict[str, list[int]]) -> dict[str, torch.Tensor]:
    return {name: torch.empty(shape, device="meta") for name, shape in names.items()}


def shapes(module) -> dict[str, list[int]]:
    return {name: list(t.shape) for name, t in module.state_dict().items()}


def test_nvembed_v2_names_and_shapes_fit_our_modules():
    from swembed.teachers.nvembed import public_modules, split_public_state

    layout = LAYOUTS["nv-embed-v2"]
    decoder, latent = public_modules(layout["config"])
    parts = split_public_state(meta_tensors(layout["tensors"]))
    assert {k: list(v.shape) for k, v in parts["decoder"].items()} == shapes(decoder)
    assert {k: list(v.shape) for k, v in parts["latent"].items()} == shapes(latent)
    with pytest.raises(TeacherError, match="'lm_head.weight' is under neither"):
        split_public_state({"lm_head.weight": torch.empty(1, device="meta")})


def test_nvembed_public_layout_loads_without_remote_code(tmp_path):
    """A tiny folder laid out as nvidia/NV-Embed-v2 (sharded, prefixed names) loads and matches our own layout."""
    from safetensors.torch import save_file

    from swembed.teachers.nvembed import LATENT_FILE, LatentAttention

    ours = llm_folder(tmp_path / "ours", "mistral", {"kind": "nvembed", "latents": 8, "heads": 2, "dim_head": 32,
                                                     "mlp_mult": 4})
    torch.manual_seed(0)
    latent = LatentAttention(64, latents=8, heads=2, dim_head=32, mlp_mult=4)
    save_file({k: v.contiguous() for k, v in latent.state_dict().items()}, str(ours / LATENT_FILE))
    reference = load_teacher(str(ours), device="cpu")

    public = tmp_path / "public"
    public.mkdir()
    text_config = json.loads((ours / "config.json").read_text())
    config = {**{k: v for k, v in LAYOUTS["nv-embed-v2"]["config"].items() if k not in ("text_config",)},
              "text_config": {**text_config, "model_type": "bidir_mistral"},
              "latent_attention_config": {"num_latents_value": 8, "num_cross_heads": 2, "cross_dim_head": 32,
                                          "latent_dim": 64, "hidden_dim": 64}}
    (public / "config.json").write_text(json.dumps(config))
    (public / "tokenizer.json").write_text((ours / "tokenizer.json").read_text())
    tensors = {f"embedding_model.{k}": v.contiguous() for k, v in reference.model.state_dict().items()}
    tensors.update({f"latent_attention_model.{k}": v.contiguous() for k, v in latent.state_dict().items()})
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, str(public / shard))
    (public / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 0}, "weight_map": {k: s for s, keys in shards.items() for k in keys}}))
    teacher = load_teacher(str(public), device="cpu")
    assert teacher.settings.kind == "nvembed"
    np.testing.assert_allclose(teacher.forward(TEXTS).pooled, reference.forward(TEXTS).pooled, atol=1e-5)


def test_lens_d8000_names_and_public_head(tmp_path):
    """The LENS release's decoder names fit MistralForCausalLM at full size, and its lm_head.pth (a pickled
    nn.Linear) becomes the head of a LENS teacher found by the file alone."""
    from transformers import MistralConfig, MistralForCausalLM

    layout = LAYOUTS["lens-d8000"]
    with torch.device("meta"):
        model = MistralForCausalLM(MistralConfig(**{k: v for k, v in layout["config"].items()
                                                    if k not in ("architectures", "model_type")}))
    assert shapes(model) == layout["tensors"]
    assert layout["lm_head.pth"] == [8000, model.config.hidden_size]

    folder = llm_folder(tmp_path / "lens")  # no swe_teacher.json: the kind comes from lm_head.pth
    torch.manual_seed(0)
    head = torch.nn.Linear(64, 16, bias=False)
    torch.save(head, folder / "lm_head.pth")
    teacher = load_teacher(str(folder), device="cpu")
    assert teacher.settings.kind == "lens" and teacher.settings.bidirectional
    assert torch.equal(teacher.model.get_output_embeddings().weight, head.weight.detach())
    assert teacher.forward(TEXTS).pooled.shape == (2, 16)
    torch.save({"weight": head.weight.detach()}, folder / "lm_head.pth")  # a state dict works too
    assert torch.equal(load_teacher(str(folder), device="cpu").model.get_output_embeddings().weight,
                       head.weight.detach())
    torch.save(torch.nn.GELU(), folder / "lm_head.pth")  # anything else: one line, nothing unpickled runs
    with pytest.raises(TeacherError, match="not a LENS head"):
        load_teacher(str(folder), device="cpu")


def test_causal2vec_llava_projector_names():
    from swembed.teachers.causal2vec import Projector, projector_state

    names = LAYOUTS["causal2vec"]["tensors"]
    state = projector_state(meta_tensors(names))
    with torch.device("meta"):
        projector = Projector(768, 4096)
    assert {k: list(v.shape) for k, v in state.items()} == shapes(projector)
    projector.load_state_dict(state, strict=True, assign=True)
    with pytest.raises(TeacherError, match="fc2.bias"):
        projector_state({k: v for k, v in meta_tensors(names).items() if not k.endswith("2.bias")})
