"""What a build will do, said before it starts (sentences, teacher passes, estimated time and peak memory on
this device), and what the device did, recorded after it ends."""
from __future__ import annotations

import time


from swembed.pipeline import files
from swembed.pipeline.config import BuildConfig
from swembed.pipeline.stage import StageResult

_PROBE = 96  # sentences timed through the teacher to estimate its throughput


def _mib(n_bytes: float) -> int:
    return int(round(n_bytes / 2**20))


def build_plan(config: BuildConfig, teacher, corpora: dict[str, StageResult], vocabs: dict[str, StageResult]) -> dict:
    """Sentences to encode, teacher passes and estimated time and memory, per language and in all."""
    numbers, lines = {}, [f"plan ({teacher.device.type}, teacher {config.teacher}, {teacher.dim}-d tokens):"]
    hidden, pooled = teacher.dim, teacher.pooled_dim
    total_s = 0.0
    peak = 0.0
    for lang, corpus in corpora.items():
        kept = int(corpus.stats["kept"])
        vocab = int(vocabs[lang].stats["vocab_size"])
        encode = min(kept, config.extract.max_sentences or kept)
        with open(corpus.path / files.SENTENCES, encoding="utf-8") as handle:
            probe = [line.rstrip("\n") for _, line in zip(range(_PROBE * 20), handle)][::20]
        start = time.perf_counter()
        teacher.encode(probe)
        rate = len(probe) / max(time.perf_counter() - start, 1e-6)
        seconds = encode / rate
        total_s += seconds
        extract_bytes = 4 * (2 * vocab + 2 * 250_000) * hidden + 200 * encode  # sums and means, pieces, texts
        train_bytes = 4 * encode * pooled + 8 * 20 * encode + 4 * 5 * vocab * config.pca.dim
        peak = max(peak, extract_bytes, train_bytes)
        numbers[lang] = {"corpus_sentences": kept, "sentences_to_encode": encode, "mode": config.extract.sentences,
                         "teacher_passes": encode, "vocabulary": vocab, "probe_sent_per_s": round(rate, 1),
                         "estimated_extract_s": round(seconds)}
        upper = "at most " if config.extract.sentences == "quota" else ""
        lines.append(f"  {lang}: {upper}{encode:,} of {kept:,} sentences through the teacher (~{rate:,.0f} sent/s "
                     f"measured here: ~{seconds / 60:.1f} min), {vocab:,} words")
    numbers["estimated_extract_s"] = round(total_s)
    numbers["estimated_peak_mb"] = _mib(peak)
    lines.append(f"  estimated peak memory ~{_mib(peak):,} MB (extract sums, distillation targets and table)")
    return {"numbers": numbers, "text": "\n".join(lines)}


def device_report(device) -> dict:
    """The device's name and, on CUDA, its memory high-water mark."""
    import torch

    if device.type != "cuda":
        return {"type": "cpu", "threads": torch.get_num_threads()}
    return {"type": "cuda", "name": torch.cuda.get_device_name(device),
            "peak_allocated_mb": _mib(torch.cuda.max_memory_allocated(device)),
            "total_mb": _mib(torch.cuda.get_device_properties(device).total_memory)}


