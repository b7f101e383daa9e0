"""What a build will do, said before it starts (sentences, teacher passes, estimated time and peak memory on
this device), and what the device did, recorded after it ends."""
from __future__ import annotations

import time

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.config import BuildConfig
from swembed.pipeline.extract import select_sentences
from swembed.pipeline.stage import StageResult
from swembed.pipeline.vocab import read_vocab
from swembed.runtime.tokenizer import TokenizationRules, word_splitter

_PROBE = 96  # sentences timed through the teacher to estimate its throughput


def _mib(n_bytes: float) -> int:
    return int(round(n_bytes / 2**20))


def build_plan(config: BuildConfig, teacher, corpora: dict[str, StageResult], vocabs: dict[str, StageResult],
               rules: dict[str, TokenizationRules]) -> dict:
    """Sentences to encode (the quota's exact choice), teacher passes and estimated time and memory, per
    language and in all. The teacher's rate is timed, after a warm-up, on an even sample of those sentences."""
    numbers, lines = {}, [f"plan ({teacher.device.type}, teacher {config.teacher}, {teacher.dim}-d tokens):"]
    hidden, pooled = teacher.dim, teacher.pooled_dim
    total_s = 0.0
    peak = 0.0
    for lang, corpus in corpora.items():
        sentences = files.read_lines(corpus.path / files.SENTENCES)
        words, counts = read_vocab(vocabs[lang])
        vocab = len(words)
        chosen, _ = select_sentences(config.extract, sentences, {w: i for i, w in enumerate(words)}, counts,
                                     word_splitter(rules[lang], teacher.tokenizer_json()), config.seed)
        encode = len(chosen)
        probe = [sentences[chosen[i]] for i in np.linspace(0, encode - 1, min(_PROBE, encode)).astype(int)]
        teacher.encode(probe[:8])  # warm-up: the first forward pass allocates
        start = time.perf_counter()
        teacher.encode(probe)
        rate = len(probe) / max(time.perf_counter() - start, 1e-6)
        seconds = encode / rate
        total_s += seconds
        extract_bytes = 4 * (2 * vocab + 2 * 250_000) * hidden + 200 * encode  # sums and means, pieces, texts
        train_bytes = 4 * encode * pooled + 8 * 20 * encode + 4 * 5 * vocab * config.pca.dim
        peak = max(peak, extract_bytes, train_bytes)
        numbers[lang] = {"corpus_sentences": len(sentences), "sentences_to_encode": encode,
                         "mode": config.extract.sentences, "teacher_passes": encode, "vocabulary": vocab,
                         "probe_sent_per_s": round(rate, 1), "estimated_extract_s": round(seconds)}
        lines.append(f"  {lang}: {encode:,} of {len(sentences):,} sentences through the teacher (~{rate:,.0f} sent/s "
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


