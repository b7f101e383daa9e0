"""What a build will do, said before it starts (sentences, teacher passes, estimated time and peak memory on
this device), and what the device did, recorded after it ends."""
from __future__ import annotations

import platform
import threading
import time

import numpy as np

from swembed.pipeline.config import BuildConfig
from swembed.pipeline.extract import Selection, teacher_vocab_size
from swembed.pipeline.stage import rss_bytes
from swembed.teachers.base import cpu_has_native_bf16, cpu_info, pinned

_PROBE_TOKENS = 2048  # padded tokens timed (on CPU) from each of a few of the extraction's own batches
# a selection of fewer padded tokens is not timed: the probe would cost a good part of its extraction (seconds)
UNTIMED_TOKENS = 20 * _PROBE_TOKENS


def _mib(n_bytes: float) -> int:
    return int(round(n_bytes / 2**20))


def spread(items: list) -> list:
    """Three of ``items``, which come sorted by length: at 20%, 50% and 80% (short, middle and long)."""
    return [items[int(q * (len(items) - 1))] for q in (0.2, 0.5, 0.8)]


def seconds_per_size(run, batches: list, sizes: list[int], repeats: int = 1) -> float:
    """``run``'s seconds per unit of size (padded token, character) over ``batches`` of ``sizes``, after a warm-up
    run of the first (the first forward pass allocates): the fastest of ``repeats`` timed passes, so a moment's
    load on a shared machine does not set it; ``run`` must wait for the device."""
    run(batches[0])
    fastest = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for batch in batches:
            run(batch)
        fastest = min(fastest, time.perf_counter() - start)
    return fastest / sum(sizes)


# the extract loop's time beyond the teacher's forward passes on a CPU (word and piece sums, tokenising the next
# batch in a thread, checkpoints); on CUDA the sums overlap the device
_CPU_LOOP_OVERHEAD = 1.1
_PROBE_QUANTILES = (0.1, 0.3, 0.5, 0.7, 0.9)  # five batches spread over the lengths, each standing for a fifth


def probe_seconds(teacher, selection: Selection) -> float:
    """The extract stage's time for all of ``selection``'s batches: the teacher's time per padded token on five of
    those batches spread over the lengths (on CPU a slice of each of at most ``_PROBE_TOKENS``; whole batches on an
    accelerator), each run once to warm its shape up (oneDNN compiles kernels per shape), then timed twice (the faster
    counts), each standing for the padded tokens of its fifth of the batches; on a CPU times the loop's overhead."""
    batches = selection.batches
    cuda = teacher.device.type == "cuda"
    at = [int(q * (len(batches) - 1)) for q in _PROBE_QUANTILES]
    picks = [batches[i] for i in at]
    if not cuda:
        picks = [rows[: max(1, _PROBE_TOKENS // int(selection.lengths[rows].max()))] for rows in picks]
    inputs = [pinned(teacher.prepare([selection.texts[i] for i in rows]), cuda) for rows in picks]  # as extraction
    sizes = selection.padded_sizes(picks).tolist()
    fifths = np.array_split(selection.padded_sizes(), len(picks))
    seconds = 0.0
    for batch, size, share in zip(inputs, sizes, fifths):
        per_token = seconds_per_size(lambda b: teacher.run(b).pooled.cpu(), [batch], [size], repeats=2)  # .cpu() waits
        seconds += float(share.sum()) * per_token
    return seconds * (1.0 if cuda else _CPU_LOOP_OVERHEAD)


def build_plan(config: BuildConfig, teacher, selections: dict[str, Selection | None], vocab_sizes: dict[str, int],
               later: tuple[str, ...] = ()) -> dict:
    """Sentences to encode (the selection extraction will run), teacher passes, and the estimated time and peak
    memory on this device, per language and in all; a language whose extract is cached costs nothing. ``later``:
    what the post-training stages will run through a teacher (their ``plan`` hooks)."""
    numbers: dict[str, object] = {}
    lines = [f"plan ({teacher.device.type}, teacher {config.teacher}, {teacher.dim}-d tokens):"]
    hidden, pooled, pieces = teacher.dim, teacher.pooled_dim, teacher_vocab_size(teacher)
    total_s = 0.0
    peak = 0.0
    for lang, selection in selections.items():
        vocab = vocab_sizes[lang]
        if selection is None:
            numbers[lang] = {"extract": "cached", "vocabulary": vocab}
            lines.append(f"  {lang}: extract cached, {vocab:,} words")
            continue
        encode = len(selection.texts)
        timed = selection.padded_tokens >= UNTIMED_TOKENS
        seconds = probe_seconds(teacher, selection) if timed else 0.0
        total_s += seconds
        accumulators = 4 * 2 * (vocab + pieces) * hidden  # running sums, then the means
        activations = 4 * 16 * teacher.batch_tokens * hidden
        train = 4 * encode * pooled + 8 * 20 * encode + 4 * 5 * vocab * config.pca.dim
        peak = max(peak, accumulators + activations + 4 * encode * pooled, train)
        numbers[lang] = {"corpus_sentences": selection.corpus_sentences, "sentences_to_encode": encode,
                         "mode": config.extract.sentences, "teacher_passes": encode, "vocabulary": vocab,
                         "padded_tokens": selection.padded_tokens,
                         "estimated_extract_s": round(seconds) if timed else None}
        cost = (f"{selection.padded_tokens / 1e6:,.2f}M padded tokens, ~{seconds / 60:.1f} min at the rate measured "
                "here" if timed else f"{selection.padded_tokens:,} padded tokens, too few to time")
        lines.append(f"  {lang}: {encode:,} of {selection.corpus_sentences:,} sentences through the teacher ({cost}), "
                     f"{vocab:,} words")
    lines += [f"  then {step}" for step in later]  # teacher passes of the post-training stages
    peak += rss_bytes()  # the teacher, the texts and the selection, loaded now
    numbers["estimated_extract_s"] = round(total_s)
    numbers["estimated_peak_mb"] = _mib(peak)
    lines.append(f"  estimated peak memory ~{_mib(peak):,} MB (loaded now, plus extract sums or distillation data)")
    return {"numbers": numbers, "text": "\n".join(lines)}


def cpu_name() -> str:
    """This CPU's model name (``/proc/cpuinfo``), or the platform's word for it where there is none."""
    for line in cpu_info().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def device_report(device) -> dict:
    """The device's name and, on CUDA, its memory high-water mark."""
    import torch

    if device.type != "cuda":
        return {"type": "cpu", "threads": torch.get_num_threads(), "name": cpu_name(),
                "native_bf16": cpu_has_native_bf16()}
    return {"type": "cuda", "name": torch.cuda.get_device_name(device),
            "peak_allocated_mb": _mib(torch.cuda.max_memory_allocated(device)),
            "total_mb": _mib(torch.cuda.get_device_properties(device).total_memory)}


class DeviceMonitor:
    """What the device did during a build: on CUDA, its utilisation (NVML through ``torch.cuda.utilization``,
    sampled every ``every`` seconds in a background thread, which ends with the ``with`` block) averaged over each
    named phase; on a CPU, or where NVML cannot be read, no utilisation."""

    def __init__(self, device, every: float = 0.1):
        self.device, self.every = device, every
        self.utilisation: dict[str, float] = {}
        self._samples: list[int] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True) if self._readable() else None
        if self._thread is not None:
            self._thread.start()

    def _readable(self) -> bool:
        if self.device.type != "cuda":
            return False
        import torch

        try:
            torch.cuda.utilization(self.device)
        except Exception:  # no NVML bindings (nvidia-ml-py) or no permission to read the counters
            return False
        return True

    def _poll(self) -> None:
        import torch

        while not self._stop.wait(self.every):
            value = torch.cuda.utilization(self.device)
            with self._lock:
                self._samples.append(value)

    def phase(self, name: str) -> None:
        """Close the phase that ran since the previous call (or the start) under ``name``."""
        with self._lock:
            samples, self._samples = self._samples, []
        if samples:  # none without a sampling thread
            self.utilisation[name] = round(sum(samples) / len(samples), 1)

    def __enter__(self) -> DeviceMonitor:
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def report(self) -> dict:
        """``device_report`` plus the mean utilisation (percent of time a kernel ran) of each phase."""
        out = device_report(self.device)
        if self.utilisation:
            out["utilisation_pct"] = dict(self.utilisation)
        return out
