"""Probe: the teacher at ``--teacher-dtype int8`` (ONNX Runtime's dynamic quantisation) against float32 on ONNX
Runtime: how close its sentence vectors stay (cosine per sentence) and both teachers' rates over the same
token-budget batches on this CPU. Where the CPU has AVX512-VNNI, int8 gains more than it would with AVX2 alone, so
the rate ratio is an upper bound for the AVX2 machine kind. It measures any teacher, also one the int8 load
refuses (its probe's bar is set aside here). Run: ``python -m lab.probe_int8_teacher --corpus FILE --sentences 3000``.
"""
from __future__ import annotations

import argparse
import json
import time
from itertools import islice

import numpy as np


def main() -> None:
    import torch

    from swembed.pipeline.sources import expand_sources, read_source
    from swembed.teachers import load_teacher, onnx_runtime
    from swembed.teachers.base import token_budget_batches

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", default="minilm")
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--sentences", type=int, default=3000)
    parser.add_argument("--batch-tokens", type=int, default=2048)
    args = parser.parse_args()
    onnx_runtime.INT8_MIN_COSINE = 0.0  # measure the int8 teacher however far it strays
    lines = (line.strip() for spec in expand_sources([args.corpus]) for line in read_source(spec))
    sentences = list(islice((s for s in lines if 3 <= len(s.split()) <= 40), args.sentences))
    teachers = {dtype: load_teacher(args.teacher, device="cpu", precision=dtype, runtime="onnx",
                                    batch_tokens=args.batch_tokens) for dtype in ("float32", "int8")}
    lengths = teachers["float32"].token_lengths(sentences) + 2
    batches = token_budget_batches(lengths, args.batch_tokens)

    def run(teacher) -> tuple[np.ndarray, float]:
        out = np.zeros((len(sentences), teacher.pooled_dim), dtype=np.float32)
        start = time.perf_counter()
        with torch.inference_mode():
            for rows in batches:
                out[rows] = teacher.forward([sentences[i] for i in rows]).pooled.float().numpy()
        return out, time.perf_counter() - start

    vectors, seconds = {}, {name: [] for name in teachers}
    for _ in range(2):  # interleaved rounds, so drifts in machine load hit both alike
        for name, teacher in teachers.items():
            vectors[name], took = run(teacher)
            seconds[name].append(took)
    a, b = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in (vectors["float32"], vectors["int8"]))
    cos = (a * b).sum(1)
    rates = {name: round(int(lengths.sum()) / min(s)) for name, s in seconds.items()}
    print(json.dumps({"sentences": len(sentences), "tokens": int(lengths.sum()), "tokens_per_s": rates,
                      "int8_vs_float32": round(rates["int8"] / rates["float32"], 2),
                      "cosine_mean": round(float(cos.mean()), 5),
                      "cosine_p01": round(float(np.quantile(cos, 0.01)), 5), "cosine_min": round(float(cos.min()), 5)}))


if __name__ == "__main__":
    main()
