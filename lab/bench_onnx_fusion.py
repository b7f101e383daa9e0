"""The float32 teacher on ONNX Runtime as swembed runs it against a fully fused BERT graph (issue 80, cheaper
tokens): the same MiniLM exported with eager attention and passed through ``onnxruntime.transformers.optimizer``
(Attention, SkipLayerNormalization, BiasGelu, EmbedLayerNormalization), both in the teacher's own session settings
(``swembed.teachers.onnx_runtime.cpu_session``), over the same sentences in 1,024-token batches.
Prints each graph's operator counts, the largest difference of their token vectors and tokens/s per round.

Run: ``python -m lab.bench_onnx_fusion --corpus ../shared/data/corpora/sci/sumpubmed_abstracts.txt.gz
--sentences 3000 --rounds 3 --work /tmp/onnx-fusion``.
"""
from __future__ import annotations

import argparse
import collections
import gzip
import json
import time
from pathlib import Path

import numpy as np

from swembed.teachers.base import token_budget_batches
from swembed.teachers.onnx_runtime import cpu_session, export_onnx, takes_token_types
from swembed.teachers.registry import load_teacher


def op_counts(path: Path) -> dict:
    import onnx

    return dict(collections.Counter(node.op_type for node in onnx.load(str(path)).graph.node).most_common(8))


def main(argv: list[str] | None = None) -> int:
    import torch
    from onnxruntime.transformers.optimizer import optimize_model
    from transformers import AutoModel

    parser = argparse.ArgumentParser(prog="python -m lab.bench_onnx_fusion", description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", required=True, help="a .txt.gz file, one sentence per line")
    parser.add_argument("--sentences", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/onnx-fusion"))
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    teacher = load_teacher("minilm", device="cpu", precision="float32", runtime="onnx")
    texts = [line.strip() for line in gzip.open(args.corpus, "rt", encoding="utf-8") if line.strip()]
    texts = texts[: args.sentences]
    batches = token_budget_batches(teacher.token_lengths(texts) + 2, 1024)
    inputs = [teacher.prepare([texts[i] for i in rows]) for rows in batches]
    feeds = [{"input_ids": b.ids.numpy(), "attention_mask": b.mask.numpy()} for b in inputs]
    tokens = sum(f["input_ids"].size for f in feeds)

    plain = teacher.onnx.path  # swembed's own export (the cached file the build reads)
    folder = teacher.folder
    eager = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    exported = args.work / "eager.onnx"
    export_onnx(eager, takes_token_types(eager), exported)
    fused = args.work / "fused.onnx"
    optimize_model(str(exported), model_type="bert", num_heads=eager.config.num_attention_heads,
                   hidden_size=eager.config.hidden_size, opt_level=0).save_model_to_file(str(fused))
    sessions = {"swembed": cpu_session(plain, args.threads), "fused": cpu_session(fused, args.threads)}

    def run(s) -> list[np.ndarray]:
        names = {node.name for node in s.get_inputs()}
        extra = lambda f: {"token_type_ids": np.zeros_like(f["input_ids"])} if "token_type_ids" in names else {}  # noqa: E731
        return [s.run(None, {**f, **extra(f)})[0] for f in feeds]

    outs = {name: run(s) for name, s in sessions.items()}
    diff = max(float(np.abs(a - b)[f["attention_mask"].astype(bool)].max())
               for a, b, f in zip(outs["swembed"], outs["fused"], feeds))
    rates: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(args.rounds):  # interleaved, so drifts in machine load hit both alike
        for name, s in sessions.items():
            start = time.perf_counter()
            run(s)
            rates[name].append(round(tokens / (time.perf_counter() - start)))
    print(json.dumps({"padded_tokens": tokens, "max_abs_diff": diff, "tokens_per_s": rates,
                      "ops": {"swembed": op_counts(plain), "fused": op_counts(fused)},
                      "torch_threads": torch.get_num_threads()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
