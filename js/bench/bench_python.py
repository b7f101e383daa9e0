"""The Python runtime's side of js/bench/bench.mjs: the same steps and JSON fields, timed in wall and CPU seconds.

    python js/bench/bench_python.py TABLE_DIR SENTENCES.txt [SECONDS]

Load = ``swembed.load(table, mmap=False)`` (the whole table read, as the JS runtime reads it); a pass =
``model.encode(sentences)`` (one call over the list, the runtime's natural use; 4096 texts a batch).
"""
import json
import platform
import sys
import time

import swembed


def timed(step):
    wall, cpu = time.perf_counter(), time.process_time()
    result = step()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    table, path = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
    sentences = [s for s in open(path, encoding="utf-8").read().split("\n") if s.strip()]
    loads = sorted((timed(lambda: swembed.load(table, mmap=False)) for _ in range(3)), key=lambda r: r[1])
    model, load_wall, load_cpu = loads[1]
    _, cold_wall, cold_cpu = timed(lambda: model.encode(sentences))
    encoded, wall, cpu = 0, 0.0, 0.0
    while wall < seconds:
        _, w, c = timed(lambda: model.encode(sentences))
        encoded, wall, cpu = encoded + len(sentences), wall + w, cpu + c
    print(json.dumps({"runtime": f"python {platform.python_version()} swembed {swembed.__version__}",
                      "rows": int(model.table.shape[0]), "dim": model.dim, "dtype": str(model.table.dtype),
                      "sentences": len(sentences), "loadMs": load_wall * 1000, "loadCpuMs": load_cpu * 1000,
                      "coldPerS": len(sentences) / cold_wall, "coldPerCpuS": len(sentences) / cold_cpu,
                      "warmPerS": encoded / wall, "warmPerCpuS": encoded / cpu}))


if __name__ == "__main__":
    main()
