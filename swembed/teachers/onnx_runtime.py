"""A sentence-transformers teacher's transformer run by ONNX Runtime on a CPU: the same float32 token vectors
(within 2e-4 of torch), the extract loop 1.35x as fast on 2 cores (reports/build-times.md), for CPUs where
``auto`` runs the teacher in float32 (no native bfloat16). The model is exported once, by torch's own exporter,
into swembed's cache and read from there afterwards."""
from __future__ import annotations

import hashlib
import inspect
import json
import logging
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from swembed.teachers.base import TEACHER_RUNTIMES, TeacherError, onnx_runtime_available
from swembed.teachers.offline import teacher_cache

logger = logging.getLogger(__name__)

OPSET = 17
MAX_EXPORT_BYTES = 1_900_000_000  # one ONNX protobuf holds at most 2 GB; larger models stay on torch
# what ``auto`` runs on ONNX Runtime: the encoders whose export is checked against torch (test_teacher_runtime.py);
# another architecture runs there only when asked (its traced graph may hold shape checks fixed at export)
CHECKED_ARCHITECTURES = ("bert",)  # MiniLM, the e5 family, LaBSE


def pick_runtime(runtime: str, device, dtype, architecture: str = "bert", quantized: bool = False) -> str:
    """``torch`` or ``onnx`` for a teacher of ``architecture`` (its config's model_type) on ``device`` with weights
    of ``dtype`` (``pick_dtype``'s): ``auto`` -> ONNX Runtime for a float32 encoder of ``CHECKED_ARCHITECTURES`` on a
    CPU when it is installed, torch otherwise (CUDA, bfloat16, other models); ``onnx`` asked where it cannot run is
    refused in one line. ``quantized`` (teacher dtype int8) runs only on ONNX Runtime on a CPU, under ``auto`` or
    ``onnx``."""
    if runtime not in TEACHER_RUNTIMES:
        raise TeacherError(f"teacher runtime must be one of {', '.join(TEACHER_RUNTIMES)}, got {runtime!r}")
    if quantized and (runtime == "torch" or device.type != "cpu"):
        raise TeacherError(f"teacher dtype int8 runs on ONNX Runtime on the CPU, not on {runtime} / {device.type} "
                           "(set teacher_runtime = \"auto\" and device = \"cpu\")")
    fits = device.type == "cpu" and dtype == torch.float32
    if runtime == "onnx" and not fits:
        raise TeacherError(f"teacher runtime onnx runs a float32 teacher on the CPU, not {str(dtype)[6:]} on "
                           f"{device.type} (set teacher_dtype = \"float32\" and device = \"cpu\")")
    asked = "teacher dtype int8" if quantized else "teacher runtime onnx" if runtime == "onnx" else None
    if asked and not onnx_runtime_available():
        raise TeacherError(f"{asked} needs onnxruntime and onnx: pip install 'swembed[build]'")
    if quantized:
        return "onnx"
    if runtime == "auto":
        return "onnx" if fits and architecture in CHECKED_ARCHITECTURES and onnx_runtime_available() else "torch"
    return runtime


class LastHidden(torch.nn.Module):
    """The model's forward with positional inputs, returning only its last hidden state (what is exported)."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, *token_types):
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_types:
            kwargs["token_type_ids"] = token_types[0]
        return self.model(**kwargs).last_hidden_state


def export_key(folder: Path) -> str:
    """What the exported file depends on: the bytes of the folder's config and weights, the torch version and the
    opset (where the folder lies does not matter; a changed copy is exported again)."""
    digest = hashlib.sha256(json.dumps([torch.__version__, OPSET]).encode())
    for path in sorted([*folder.glob("*.safetensors"), *folder.glob("*.bin"), folder / "config.json"]):
        digest.update(path.name.encode())
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def takes_token_types(model) -> bool:
    """Whether the torch model's forward takes ``token_type_ids`` (BERT's family does)."""
    return "token_type_ids" in inspect.signature(model.forward).parameters


def export_onnx(model, takes_token_types: bool, path: Path) -> None:
    """Export ``model`` (float32, CPU) to ``path`` with dynamic batch and length axes, atomically."""
    from swembed.runtime.outputs import atomic_file

    ids = torch.tensor([[1, 2, 3, 4], [1, 2, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])  # a padded row, so the trace keeps the attention mask
    inputs = (ids, mask, torch.zeros_like(ids)) if takes_token_types else (ids, mask)
    names = ["input_ids", "attention_mask", "token_type_ids"][: len(inputs)]
    axes = {name: {0: "batch", 1: "length"} for name in [*names, "hidden"]}
    with atomic_file(path, checked=False) as tmp, warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the tracer's notes on constant-folded shape checks
        torch.onnx.export(LastHidden(model).eval(), inputs, str(tmp), input_names=names,
                          output_names=["hidden"], dynamic_axes=axes, opset_version=OPSET, dynamo=False)


def quantize_int8(path: Path) -> Path:
    """The int8 copy of an export (ONNX Runtime's dynamic quantisation: int8 weights per output channel, activations
    quantised per batch), written once beside it, atomically."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from swembed.runtime.outputs import atomic_file

    out = path.with_name(f"{path.stem}-int8.onnx")
    if not out.is_file():
        logger.info("quantising %s to int8 (once): %s", path.name, out)
        with atomic_file(out, checked=False) as tmp, warnings.catch_warnings(), _quiet_root_logging():
            warnings.simplefilter("ignore")
            quantize_dynamic(str(path), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
    return out


@contextmanager
def _quiet_root_logging() -> Iterator[None]:
    """Mute warnings and below while ONNX Runtime's quantiser runs: it logs dozens of lines on the root logger
    (tensors it leaves in float32, a pre-processing hint), none of which a build's user can act on."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


# int8 must keep a teacher's sentence vectors this close to float32's (mean cosine over PROBE_SENTENCES): MiniLM keeps
# 0.99 and is 2.2x as fast; mpnet falls to 0.89, and a table distilled from that would be a different teacher's
INT8_MIN_COSINE = 0.98
PROBE_SENTENCES = (
    "A man is playing a guitar on the street.", "The stock market fell sharply after the announcement.",
    "Protein kinase C phosphorylates the receptor in vitro.", "How do I reset my password?",
    "She did not like the movie at all.", "The committee approved the budget for next year.",
    "Two dogs are running through a snowy field.", "Mutations in BRCA1 increase the risk of breast cancer.",
    "We propose a new method for training neural networks on small datasets.", "It rained all weekend in Paris.",
    "The patient was treated with antibiotics for ten days.", "Is this laptop worth the price?",
    "Children are playing football in the park.", "The court rejected the appeal on Monday.",
    "Add the flour and stir until smooth.", "Our results show a significant reduction in mortality.",
)


@contextmanager
def _refused(folder: Path, step: str, instead: str) -> Iterator[None]:
    """Any failure of ``step`` as one TeacherError line naming the folder and the setting to use instead."""
    try:
        yield
    except Exception as exc:
        raise TeacherError(f"{folder}: could not {step} ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''}); use {instead}") from exc


def cpu_session(path: Path, threads: int):
    """An ONNX Runtime session of the file ``path`` on the CPU, set as the teacher runs: ``threads`` for each
    operator, every graph optimisation, and no busy-waiting between runs (the extract loop's tokenising thread needs
    those cores: 1.1x its speed on 2)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxEncoder:
    """The transformer of a sentence-transformers teacher in an ONNX Runtime session: (ids, mask) -> hidden."""

    def __init__(self, load_model: Callable[[], torch.nn.Module], folder: Path, name: str, threads: int,
                 quantized: bool = False) -> None:
        """``load_model`` gives the torch model, called only when the folder has no export in the cache yet."""
        label = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        path = teacher_cache().parent / "onnx" / f"{label}-{export_key(Path(folder))}.onnx"
        if not path.is_file():
            model = load_model()
            size = sum(p.numel() * p.element_size() for p in model.parameters())
            if size > MAX_EXPORT_BYTES:
                raise TeacherError(f"{folder}: {size / 1e9:.1f} GB of weights is past what one ONNX file holds; "
                                   "use teacher_runtime = \"torch\"")
            with _refused(folder, "export the teacher to ONNX", 'teacher_runtime = "torch"'):
                logger.info("exporting %s to ONNX (once): %s", folder, path)
                export_onnx(model, takes_token_types(model), path)
        if quantized:
            with _refused(folder, "quantise the teacher to int8", 'teacher_dtype = "float32"'):
                path = quantize_int8(path)
        self.session = cpu_session(path, threads)
        self.takes_token_types = "token_type_ids" in {node.name for node in self.session.get_inputs()}
        self.path = path

    def int8_fidelity(self, measure: Callable[[], dict]) -> dict:
        """This int8 session's closeness to float32 (``measure``'s record: cosine mean and min over
        ``PROBE_SENTENCES``), measured once per int8 file and kept beside it."""
        from swembed.runtime.outputs import atomic_file

        record = self.path.with_suffix(".fidelity.json")
        if record.is_file():
            return json.loads(record.read_text())
        fidelity = measure()
        with atomic_file(record, checked=False) as tmp:
            Path(tmp).write_text(json.dumps(fidelity))
        return fidelity

    def __call__(self, ids, mask):
        """(B, T) int64 torch tensors -> (B, T, H) float32 torch tensor."""
        feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
        if self.takes_token_types:
            feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
        return torch.from_numpy(self.session.run(None, feeds)[0])
