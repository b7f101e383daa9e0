"""Extraction throughput: the extract stage's per-batch work vs a bare teacher forward pass.

Both runs see the same sentences, in the same length-sorted batches of the same size, on the same
machine; the ratio (extract sentences/s over bare sentences/s) is what the stage costs beyond the
teacher itself. Run: ``swembed bench-extract --teacher minilm --corpus FILES --sentences 4000``.
"""
from __future__ import annotations

import time

import numpy as np

from swembed.pipeline.extract import ContextAccumulator, ExtractConfig, choose_sentences, word_splitter


def bench_extract(teacher, sentences: list[str], batch_size: int, per_word: int = 30, repeats: int = 2) -> dict:
    splitter = word_splitter(ExtractConfig(), None)
    words = sorted({w for s in sentences for w, _, _ in splitter.spans(s)})
    index = {w: i for i, w in enumerate(words)}
    chosen, credits = choose_sentences(sentences, index, [1] * len(words), per_word, splitter, 0)
    order = np.argsort([len(sentences[i]) for i in chosen], kind="stable")
    texts = [sentences[chosen[i]] for i in order]
    credits = [credits[i] for i in order]
    batches = [(texts[i : i + batch_size], credits[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
    teacher.forward(batches[0][0])  # warm-up

    def bare() -> None:
        for batch, _ in batches:
            teacher.forward(batch)

    def extract() -> None:
        acc = ContextAccumulator(len(words), teacher.dim, teacher.device)
        for batch, credit in batches:
            acc.add_batch(batch, credit, teacher.forward(batch), index, splitter)

    timings = {"bare": [], "extract": []}
    for _ in range(repeats):  # interleaved, so drifts in machine load hit both alike
        for name, fn in (("bare", bare), ("extract", extract)):
            start = time.perf_counter()
            fn()
            timings[name].append(time.perf_counter() - start)
    bare_rate = len(texts) / min(timings["bare"])
    extract_rate = len(texts) / min(timings["extract"])
    return {"sentences": len(texts), "batch_size": batch_size, "bare_sent_per_s": round(bare_rate, 1),
            "extract_sent_per_s": round(extract_rate, 1), "ratio": round(extract_rate / bare_rate, 3)}
