"""Encode speed against model2vec (issue 80): swembed's ``encode`` and model2vec's ``StaticModel.encode`` of the same
teacher, timed in one process on the same texts.

    python -m lab.bench_encode models/minilm-256 --data ../shared/data/eval --out reports/encode-speed.md

Texts: every sentence of STS-B train (both columns, ``swembed.eval.sts``), the list repeated four times. The model2vec
table is model2vec's ``distill`` of the table's teacher at the table's dimension (``--model2vec``, default
``models/baselines/model2vec-TEACHER-DIM``, where ``lab.report`` looks for it); when absent it is made there, offline
(the teacher from its PyPI wheel, padding per batch as ``lab.baselines`` does; needs ``model2vec[distill]``'s
``skeletoken``, in the ``peers`` extra). Each run warms both up, then times them alternately, swembed first, three
times each, and keeps each one's best (``--runs`` runs, each its own row). Both encode as a user calls them
(swembed's ``encode(texts)``, model2vec's ``encode(texts, use_multiprocessing=False)``: their own default batch
sizes) on one thread: ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``RAYON_NUM_THREADS``
(the Rust tokenizers' pool) at 1 and ``TOKENIZERS_PARALLELISM=false``; the command starts itself again where they are
not. Rates are sentences per wall second and per CPU second of the process (the figure a busy machine disturbs
least); the load average before each run says how busy it was. The report keeps one section per CPU (its name,
``swembed.pipeline.plan.cpu_name``): ``--out`` replaces this CPU's section and keeps the others'.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

GENERATED = "<!-- generated: {command} -->"
TITLE = "# Encode speed: swembed against model2vec of the same teacher"
SECTION = "<!-- lab.bench_encode section: {cpu} -->"
SECTION_END = "<!-- lab.bench_encode section end -->"
ONE_THREAD = {**{name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                         "RAYON_NUM_THREADS")}, "TOKENIZERS_PARALLELISM": "false"}
REPEATS = 4  # STS-B train's sentences, this many times over
TIMINGS = 3  # timings of each model per run; the best is kept


def stsb_train_texts(data: Path) -> list[str]:
    """Both columns of STS-B train, in file order, the whole list ``REPEATS`` times."""
    from swembed.eval.sts import load_pair_set

    pairs = load_pair_set(data, "STSBenchmark-train")
    return (pairs.s1 + pairs.s2) * REPEATS


def ensure_model2vec(table: Path, folder: Path | None) -> Path:
    """The model2vec folder to time: ``folder``, or ``models/baselines/model2vec-TEACHER-DIM`` for the table's teacher
    and dimension, made there by model2vec's ``distill`` when absent."""
    import json

    config = json.loads((table / "config.json").read_text(encoding="utf-8"))
    teacher, dim = config["teacher"]["name"], int(config["dim"])
    folder = folder or Path("models/baselines") / f"model2vec-{teacher}-{dim}"
    if (folder / "model.safetensors").is_file():
        return folder
    from swembed._extras import require
    from swembed.runtime.outputs import atomic_directory

    require("peers", "model2vec", "skeletoken")
    from lab.baselines import build_model2vec, local_teacher_copy

    print(f"making {folder}: model2vec distill of {teacher} at d={dim}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="swembed-teacher-") as scratch, \
            atomic_directory(folder, kind="model2vec baseline") as tmp:
        teacher_dir = local_teacher_copy(teacher, Path(scratch) / teacher)
        build_model2vec(teacher_dir, tmp, dim)
    return folder


def timed(encode, texts: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one ``encode(texts)`` call."""
    start, cpu_start = time.perf_counter(), time.process_time()
    encode(texts)
    return time.perf_counter() - start, time.process_time() - cpu_start


def one_run(swembed_encode, m2v_encode, texts: list[str]) -> dict:
    """Both encoders timed alternately, ``TIMINGS`` times each: each one's best wall and CPU seconds, as rates."""
    load = os.getloadavg()[0]
    best = {"swembed": [float("inf")] * 2, "model2vec": [float("inf")] * 2}
    for _ in range(TIMINGS):
        for name, encode in (("swembed", swembed_encode), ("model2vec", m2v_encode)):
            wall, cpu = timed(encode, texts)
            best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
    row = {"load": load, "load_after": os.getloadavg()[0]}
    for name, (wall, cpu) in best.items():
        row[name] = len(texts) / wall
        row[f"{name}_cpu"] = len(texts) / cpu
    row["ratio"] = row["swembed"] / row["model2vec"]
    row["ratio_cpu"] = row["swembed_cpu"] / row["model2vec_cpu"]
    return row


def section(rows: list[dict], command: str, table: str, m2v: str, texts: int, cpu: str) -> str:
    """This CPU's section of the report: how it was measured, and a row per run."""
    header = ["run", "load average (1 min) before / after", "swembed sentences/s", "model2vec sentences/s",
              "ratio", "swembed sentences/CPU-s", "model2vec sentences/CPU-s", "ratio (CPU)"]
    lines = [f"| {' | '.join(header)} |", "|" + "---|" * len(header)]
    for number, r in enumerate(rows, 1):
        lines.append(f"| {number} | {r['load']:.2f} / {r['load_after']:.2f} | {r['swembed']:,.0f} | "
                     f"{r['model2vec']:,.0f} | **{r['ratio']:.2f}x** | {r['swembed_cpu']:,.0f} | "
                     f"{r['model2vec_cpu']:,.0f} | {r['ratio_cpu']:.2f}x |")
    import numpy as np

    return "\n".join([
        SECTION.format(cpu=cpu), f"## {cpu}", "", GENERATED.format(command=command), "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `{command}` (`lab/bench_encode.py`) on "
        f"{cpu}, {os.cpu_count()} cores shared with other work ({platform.python_implementation()} "
        f"{platform.python_version()}, numpy {np.__version__}).", "",
        f"{texts:,} texts: STS-B train's sentences (both columns) x{REPEATS}. swembed `{table}` "
        f"(`swembed.load(table).encode(texts)`) against model2vec `{m2v}` (model2vec's `distill` of the same teacher "
        "at the same dimension; `StaticModel.from_pretrained(folder).encode(texts, use_multiprocessing=False)`), in "
        f"one process, one thread (OMP/MKL/OpenBLAS/Rayon threads 1, `TOKENIZERS_PARALLELISM=false`). In each run both "
        f"are warmed up, then timed alternately {TIMINGS} times each; each keeps its best wall time and its best CPU "
        "time (the process's, all threads). Wall rates move with the machine's load; the CPU rates less.", "",
        *lines, SECTION_END])


def merged(previous: str | None, new: str, cpu: str) -> str:
    """The report with ``new`` as ``cpu``'s section: in its place where the report had one, else after the others."""
    marker = SECTION.format(cpu=cpu)
    sections = [] if previous is None else [
        part.split(SECTION_END)[0].strip() for part in previous.split("<!-- lab.bench_encode section: ")[1:]]
    sections = ["<!-- lab.bench_encode section: " + part for part in sections]
    kept = [new if part.startswith(marker) else part for part in sections]
    if new not in kept:
        kept.append(new)
    return "\n\n".join([TITLE, *kept]) + "\n"


def main(argv: list[str] | None = None) -> int:
    if argv is None and any(os.environ.get(name) != value for name, value in ONE_THREAD.items()):
        again = [sys.executable, "-m", "lab.bench_encode", *sys.argv[1:]]
        os.execve(sys.executable, again, {**os.environ, **ONE_THREAD})  # thread pools start with their imports
    parser = argparse.ArgumentParser(prog="python -m lab.bench_encode", description=__doc__.splitlines()[0])
    parser.add_argument("table", type=Path, help="a swembed table folder (its teacher's model2vec table is timed)")
    parser.add_argument("--data", type=Path, required=True, help="the eval folder holding stsb/sts-train.csv")
    parser.add_argument("--model2vec", type=Path, help="model2vec folder (default models/baselines/model2vec-T-D)")
    parser.add_argument("--runs", type=int, default=3, help="runs, each a row of the report (default 3)")
    parser.add_argument("--out", type=Path, help="write the report here (e.g. reports/encode-speed.md)")
    args = parser.parse_args(argv)
    from swembed._extras import require

    require("peers", "model2vec")
    from model2vec import StaticModel

    import swembed

    texts = stsb_train_texts(args.data)
    m2v_folder = ensure_model2vec(args.table, args.model2vec)
    model, m2v = swembed.load(args.table), StaticModel.from_pretrained(str(m2v_folder))
    swembed_encode = model.encode
    m2v_encode = lambda batch: m2v.encode(batch, use_multiprocessing=False)  # noqa: E731
    swembed_encode(texts[:1000])
    m2v_encode(texts[:1000])
    rows = []
    for number in range(1, args.runs + 1):
        rows.append(one_run(swembed_encode, m2v_encode, texts))
        r = rows[-1]
        print(f"run {number} (load {r['load']:.2f}): swembed {r['swembed']:,.0f} sentences/s, model2vec "
              f"{r['model2vec']:,.0f}: {r['ratio']:.2f}x (per CPU second {r['swembed_cpu']:,.0f} and "
              f"{r['model2vec_cpu']:,.0f}: {r['ratio_cpu']:.2f}x)")
    if args.out:
        from swembed.pipeline.plan import cpu_name
        from swembed.runtime.outputs import atomic_file

        command = "python -m lab.bench_encode " + " ".join(argv if argv is not None else sys.argv[1:])
        cpu = cpu_name()
        new = section(rows, command, str(args.table), str(m2v_folder), len(texts), cpu)
        previous = args.out.read_text(encoding="utf-8") if args.out.is_file() else None
        with atomic_file(args.out, overwrite=True) as tmp:
            tmp.write_text(merged(previous, new, cpu), encoding="utf-8")
        print(f"wrote {args.out} ({cpu}'s section)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
