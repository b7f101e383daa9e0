"""Extraction throughput: the extract stage's loop vs a bare teacher pass over the same batches.

Both runs see the same sentences in the same token-budget batches on the same device. The bare pass
tokenises and runs each batch (what encoding sentences with the teacher costs); the extract pass is the
stage's own loop (``swembed.pipeline.extract.extraction_loop``: tokenising and indexing in forked workers
on CUDA or a background thread on a CPU, word and piece sums on the device). The ratio of their rates is
what extraction costs beyond the teacher.
Run: ``python -m lab.bench_extract --teacher minilm --corpus FILES --sentences 4000``.
"""
from __future__ import annotations

import json
import sys
import time

from swembed.pipeline.extract import Accumulator, extraction_loop, teacher_vocab_size
from swembed.runtime.tokenizer import TokenizationRules, word_splitter
from swembed.teachers.base import token_budget_batches


def bench_extract(teacher, sentences: list[str], batch_tokens: int, repeats: int = 2) -> dict:
    import torch

    splitter = word_splitter(TokenizationRules(), None)
    words = sorted({w for s in sentences for w, _, _ in splitter.spans(s)})
    index = {w: i for i, w in enumerate(words)}
    lengths = teacher.token_lengths(sentences) + 2
    batches = token_budget_batches(lengths, batch_tokens)
    n_pieces = teacher_vocab_size(teacher)
    teacher.forward(sentences[:8])  # warm-up

    def sync() -> None:
        if teacher.device.type == "cuda":
            torch.cuda.synchronize(teacher.device)

    def bare() -> None:
        with torch.inference_mode():
            for rows in batches:
                teacher.forward([sentences[i] for i in rows]).pooled.float()
        sync()

    def extract() -> None:
        acc = Accumulator(len(words), n_pieces, teacher.dim, teacher.device)
        extraction_loop(teacher, sentences, batches, index=index, splitter=splitter, acc=acc)
        sync()

    timings: dict[str, list[float]] = {"bare": [], "extract": []}
    for _ in range(repeats):  # interleaved, so drifts in machine load hit both alike
        for name, fn in (("bare", bare), ("extract", extract)):
            start = time.perf_counter()
            fn()
            timings[name].append(time.perf_counter() - start)
    bare_rate = len(sentences) / min(timings["bare"])
    extract_rate = len(sentences) / min(timings["extract"])
    return {"device": str(teacher.device), "sentences": len(sentences), "batches": len(batches),
            "batch_tokens": batch_tokens, "tokens": int(lengths.sum()), "bare_sent_per_s": round(bare_rate, 1),
            "bare_tokens_per_s": round(bare_rate * lengths.sum() / len(sentences)),
            "extract_sent_per_s": round(extract_rate, 1), "ratio": round(extract_rate / bare_rate, 3)}


def bench_extract_corpus(teacher_name: str, corpus: list[str], n: int, batch_tokens: int | None = None,
                         device: str = "auto", repeats: int = 2, precision: str = "auto",
                         runtime: str = "auto") -> dict:
    """``bench_extract`` on the first ``n`` non-empty lines of ``corpus`` (files, folders, globs), in batches of
    ``batch_tokens`` (unset: the teacher's default on this device, as a build's)."""
    from itertools import islice

    from swembed.pipeline.sources import expand_sources, read_source
    from swembed.teachers import load_teacher

    teacher = load_teacher(teacher_name, device=device, batch_tokens=batch_tokens, precision=precision,
                           runtime=runtime)
    lines = (line.strip() for spec in expand_sources(corpus) for line in read_source(spec))
    sentences = list(islice((line for line in lines if line), n))
    result = bench_extract(teacher, sentences, teacher.batch_tokens, repeats)
    return {"teacher": teacher_name, "teacher_dtype": teacher.dtype_name,
            "teacher_runtime": teacher.runtime, **result}


def main(argv: list[str] | None = None) -> int:
    import argparse

    from swembed.teachers.base import TEACHER_DTYPES, TEACHER_RUNTIMES

    p = argparse.ArgumentParser(prog="python -m lab.bench_extract", description=__doc__.split("\n")[0])
    p.add_argument("--teacher", default="minilm")
    p.add_argument("--corpus", nargs="+", required=True)
    p.add_argument("--sentences", type=int, default=4000)
    p.add_argument("--batch-tokens", type=int, help="default: a build's (1024 on a CPU, 8192 on a GPU)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--device", default="auto")
    p.add_argument("--teacher-dtype", default="auto", choices=TEACHER_DTYPES)
    p.add_argument("--teacher-runtime", default="auto", choices=TEACHER_RUNTIMES)
    args = p.parse_args(argv)
    print(json.dumps(bench_extract_corpus(args.teacher, args.corpus, args.sentences, args.batch_tokens, args.device,
                                          args.repeats, args.teacher_dtype, args.teacher_runtime)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
