"""Does a recipe give the same table again? Its later stages re-run from a finished build's earlier ones, once as
they ran and once with the AVX2 kernels a CPU without AVX-512 runs (``MKL_CBWR=AVX2 ATEN_CPU_CAPABILITY=avx2``:
MKL's and ATen's AVX2 code paths on this CPU), each table compared with the build's own, row by row (words,
pieces, grams). The inputs of the re-run stages are byte-identical, so what moves is the rounding alone.

The teacher's own kernels (ONNX Runtime's AVX2 against its AVX-512 ones) change its vectors in their last bits,
which this CPU cannot run; ``--variants noise`` stands in for them: the teacher's stages (extract, alone) copied
with every vector entry multiplied by 1 + ``--noise`` x N(0, 1) (seeded), and every stage after them re-run.

    python -m lab.same_table --recipe pipelines/default.toml --work models/minilm-256.work \\
        --table models/minilm-256 --into /tmp/same
    python -m lab.same_table --recipe pipelines/minilm-256-sci.toml --work models/minilm-sci-quiet.work \\
        --table models/minilm-256-sci-quiet --into /tmp/same-sci --data-mirror ../shared/data

Each variant's work folder hard-links the build's stage folders but those of ``--rerun`` (default: distill and
grams); nothing of the build is written. Prints one line a variant and row block: the largest and mean absolute
difference and the lowest cosine of a non-zero row.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

VARIANTS = {"again": {}, "avx2": {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}, "noise": {}}
TEACHER_STAGES = ("extract", "alone")  # what the teacher wrote: the noise variant perturbs them
AFTER_TEACHER = ("compose", "pca")  # what reads them before distillation: re-run in the noise variant


def linked_work(work: Path, into: Path, rerun: tuple[str, ...]) -> Path:
    """A work folder hard-linking ``work``'s finished stage folders but those named in ``rerun``."""
    into.mkdir(parents=True)
    for stage in sorted(work.iterdir()):
        if stage.is_dir() and not stage.name.endswith(".partial") and not stage.name.startswith(rerun):
            subprocess.run(["cp", "-al", str(stage), str(into / stage.name)], check=True)
    return into


def perturbed_copy(stage: Path, into: Path, relative: float, seed: int) -> None:
    """``stage`` copied into ``into`` with every float array's entries multiplied by 1 + ``relative`` x N(0, 1)."""
    into.mkdir()
    rng = np.random.default_rng(seed)
    for path in sorted(stage.iterdir()):
        array = np.load(path, mmap_mode="r") if path.suffix == ".npy" else None
        if array is not None and array.dtype.kind == "f":
            noise = rng.standard_normal(array.shape, dtype=np.float32)
            np.save(into / path.name, (array * (1 + relative * noise)).astype(array.dtype))
        else:
            shutil.copy2(path, into / path.name)


def row_blocks(table: Path) -> dict[str, tuple[int, int]]:
    """The table's rows by kind, from its config.json (pieces and grams where it has them)."""
    config = json.loads((table / "config.json").read_text())
    n = int(config["vocab_size"])
    blocks = {kind: tuple(config[kind]["rows"]) for kind in ("pieces", "grams") if kind in config}
    first = min([start for start, _ in blocks.values()], default=n)
    return {"words": (0, first), **blocks}


def compare(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Largest and mean absolute difference, lowest cosine of a row non-zero in both."""
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    live = (na > 0) & (nb > 0)
    cosine = (a[live] * b[live]).sum(1) / (na[live] * nb[live])
    diff = np.abs(a - b)
    return float(diff.max()), float(diff.mean()), float(cosine.min()) if live.any() else 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--work", required=True, type=Path, help="the finished build's work folder")
    parser.add_argument("--table", required=True, type=Path, help="the finished build's model folder")
    parser.add_argument("--into", required=True, type=Path, help="a new folder for the variants")
    parser.add_argument("--rerun", nargs="+", default=["distill", "grams"], help="stages to run again")
    parser.add_argument("--data-mirror", default=None)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["again", "avx2"],
                        help="which re-runs (each one distillation's time)")
    parser.add_argument("--noise", type=float, default=1e-6, help="the noise variant's relative size")
    args = parser.parse_args(argv)
    if args.into.exists():
        parser.error(f"--into {args.into} already exists")
    reference = np.load(args.table / "embeddings.npy")
    blocks = row_blocks(args.table)
    for name in args.variants:
        env = VARIANTS[name]
        rerun = tuple(args.rerun) + (TEACHER_STAGES + AFTER_TEACHER if name == "noise" else ())
        work = linked_work(args.work, args.into / f"{name}.work", rerun)
        if name == "noise":
            teacher_stages = [stage for stage in sorted(args.work.iterdir()) if stage.is_dir()
                              and stage.name.startswith(TEACHER_STAGES) and not stage.name.endswith(".partial")]
            for seed, stage in enumerate(teacher_stages):
                perturbed_copy(stage, work / stage.name, args.noise, seed)
        out = args.into / name
        command = [sys.executable, "-m", "swembed.cli", "build", "--recipe", args.recipe, "--work-dir", str(work),
                   "--out", str(out), "--quiet"] + (["--data-mirror", args.data_mirror] if args.data_mirror else [])
        subprocess.run(command, check=True, env={**os.environ, **env}, stdout=subprocess.DEVNULL)
        table = np.load(out / "embeddings.npy")
        for kind, (start, end) in blocks.items():
            largest, mean, lowest = compare(reference[start:end], table[start:end])
            print(f"{name:6s} {kind:7s} max |d| {largest:.3g}  mean |d| {mean:.3g}  min cosine {lowest:.6f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
