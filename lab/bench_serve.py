"""Throughput and latency of ``swembed serve`` on loopback, beside the in-process ``model.encode`` rate.

The server runs as its own process (``swembed serve MODEL --port 0``, on 127.0.0.1 only); client threads in this
process send ``POST /v1/embeddings`` over kept-alive ``http.client`` connections, at each number of concurrent
clients and texts per request, each cell bounded by a request count and a time. It reports texts/s, requests/s,
p50/p99 latency and the server's texts per CPU-second (its own user + system time, the figure that stays comparable
on a shared machine), then writes reports/serve.md. It stops by itself; the server is stopped with SIGTERM.

With ``--index DIR --queries FILE`` the server also gets the index (``swembed serve MODEL --index DIR``) and one
query per request is sent to ``POST /v1/search`` in each mode, at 1 and 8 clients: queries/s, latency and the
server's queries per CPU-second, in a section of its own. The million-passage index of ``lab.bench_million``:

    swembed index models/minilm-256-sci --corpus models/bench-million/corpus-1000000-0.txt \
        --out models/bench-million/index
    python -m lab.bench_serve models/minilm-256 --data ../shared/data/eval --search-model models/minilm-256-sci \
        --index models/bench-million/index --queries models/bench-million/queries.json
"""
from __future__ import annotations

import argparse
import http.client
import json
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

FALLBACK_TEXTS = [  # used without --data: short sentences of STS-B's kind
    "A man is playing a guitar.", "A woman is slicing an onion.", "Two dogs are running through a field.",
    "The stock market fell sharply on Monday.", "A child is riding a bike down the street.",
    "Scientists discovered a new species of frog in the rainforest.", "The cat sleeps on the warm windowsill.",
    "A group of people are dancing at a wedding.", "The president spoke about the economy.",
    "Heavy rain caused flooding in the northern towns.", "A plane is taking off from the runway.",
    "She is reading a book in the library.",
]


def server_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(model: str, batch_wait_ms: float, index: str | None = None) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen([sys.executable, "-m", "swembed.cli", "serve", model, "--port", "0", "--host",
                                "127.0.0.1", "--batch-wait-ms", str(batch_wait_ms),
                                *(["--index", index] if index else [])],
                               stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if not found:
        process.kill()
        raise SystemExit(f"the server did not start: {line.strip()} {process.stderr.read()[-500:]}")
    return process, int(found.group(1))


def drive(port: int, route: str, payloads: list[dict], answers: int, clients: int, max_requests: int,
          seconds: float) -> dict:
    """``clients`` threads, each sending ``payloads`` in turn (from its own offset) to ``route`` until
    ``max_requests`` are sent in all or ``seconds`` have passed; every answer is checked to be 200 with ``answers``
    items in its ``data``. Requests, wall seconds, requests/s and p50/p99 latency."""
    latencies: list[float] = []
    lock = threading.Lock()
    sent = [0]
    stop_at = time.monotonic() + seconds

    def client(k: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        i = k * 7919
        while time.monotonic() < stop_at:
            with lock:
                if sent[0] >= max_requests:
                    break
                sent[0] += 1
            body = json.dumps(payloads[i % len(payloads)]).encode()
            i += 1
            start = time.perf_counter()
            connection.request("POST", route, body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            data = response.read()
            elapsed = time.perf_counter() - start
            if response.status != 200 or len(json.loads(data)["data"]) != answers:
                raise SystemExit(f"request failed: {response.status} {data[:300]!r}")
            with lock:
                latencies.append(elapsed)
        connection.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    ms = np.array(latencies) * 1000
    return {"clients": clients, "requests": len(latencies), "wall_s": wall, "req_per_s": len(latencies) / wall,
            "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99))}


def run_cell(port: int, texts: list[str], clients: int, size: int, encoding: str, max_requests: int,
             seconds: float) -> dict:
    """``POST /v1/embeddings`` of ``size`` texts a request (consecutive texts, each request the next ones)."""
    payloads = [{"input": [texts[(i + j) % len(texts)] for j in range(size)], "encoding_format": encoding}
                for i in range(0, len(texts), size)]
    row = drive(port, "/v1/embeddings", payloads, size, clients, max_requests, seconds)
    return {**row, "size": size, "encoding": encoding, "texts_per_s": row["req_per_s"] * size}


def search_cells(port: int, pid: int, queries: list[str], clients: list[int], max_requests: int,
                 seconds: float) -> list[dict]:
    """``POST /v1/search``, one query a request (its 10 best passages), in each mode at each number of clients."""
    rows = []
    for mode in ("dense", "hybrid", "lexical"):
        payloads = [{"query": query, "top_k": 10, "mode": mode} for query in queries]
        for n in clients:
            cpu = server_cpu_s(pid)
            row = drive(port, "/v1/search", payloads, 1, n, max_requests, seconds)
            row.update(mode=mode, server_per_cpu_s=row["requests"] / max(server_cpu_s(pid) - cpu, 1e-9))
            rows.append(row)
            print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}))
    return rows


def render_search(rows: list[dict], args, n_queries: int, passages: int, command: str) -> str:
    cells = "\n".join(f"| {r['mode']} | {r['clients']} | {r['requests']:,} | {r['req_per_s']:,.1f} | "
                      f"{r['p50_ms']:,.1f} | {r['p99_ms']:,.1f} | {r['server_per_cpu_s']:,.1f} |" for r in rows)
    return f"""
## Search

`swembed serve {args.search_model} --index {args.index}` ({passages:,} passages), the same kind of clients sending
`POST /v1/search` with one query a request (`top_k` 10; {n_queries:,} held-out questions and summaries, each used in
turn), each cell stopping after {args.max_requests:,} requests or {args.seconds:g} s. The queries of concurrent
requests are joined into one search (a batcher thread of their own); the server's queries per CPU-second is the
figure to compare with `reports/million.md`'s one core in process.

<!-- generated: {command} -->

| mode | clients | requests | queries/s | p50 ms | p99 ms | server queries/CPU-s |
|---|---|---|---|---|---|---|
{cells}
"""


def encode_rates(model_path: str, texts: list[str], sizes: list[int], seconds: float) -> dict[int, float]:
    """In-process ``model.encode`` texts/s on the same texts, in calls of each request size (0: all at once)."""
    import swembed

    model = swembed.load(model_path)
    model.encode(texts[:64])
    rates = {}
    for size in [*sizes, 0]:
        step = size or len(texts)
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for i in range(0, len(texts), step):
                model.encode(texts[i : i + step])
            n += len(texts)
        rates[size] = n / (time.perf_counter() - start)
    return rates


def leading_variance(model_path: str, texts: list[str]) -> list[tuple[int, float, float]]:
    """For k = d/4, d/2, 3d/4: the share of the sentence vectors' variance in their first k dims, and the largest
    share any k dims hold (what ``dimensions`` keeps, against the best k)."""
    import swembed

    model = swembed.load(model_path)
    variance = model.encode(texts).var(axis=0)
    best = np.sort(variance)[::-1]
    d = len(variance)
    return [(k, float(variance[:k].sum() / variance.sum()), float(best[:k].sum() / best.sum()))
            for k in (d // 4, d // 2, 3 * d // 4)]


def cpu_model() -> str:
    return next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")), "unknown CPU")


def render(rows: list[dict], rates: dict[int, float], shares: list[tuple[int, float, float]], args,
           n_texts: int, source: str) -> str:
    command = "python -m lab.bench_serve " + " ".join(shlex.quote(a) for a in args.argv)
    cells = "\n".join(
        f"| {r['clients']} | {r['size']} | {r['encoding']} | {r['requests']:,} | {r['texts_per_s']:,.0f} | "
        f"{r['req_per_s']:,.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['server_texts_per_cpu_s']:,.0f} |"
        for r in rows)
    encode = "\n".join(f"| {'all ' + format(n_texts, ',') + ' at once' if size == 0 else size} | {rate:,.0f} |"
                       for size, rate in rates.items())
    dims = "\n".join(f"| {k} | {100 * got:.1f}% | {100 * best:.1f}% |" for k, got, best in shares)
    return f"""# swembed serve: throughput and latency on loopback

`swembed serve {args.model}` as its own process on 127.0.0.1, `--batch-wait-ms {args.batch_wait_ms:g}`, the other
limits at their defaults; client threads in one Python process (`http.client`, one kept-alive connection each)
send `POST /v1/embeddings` with {source} ({n_texts:,} texts). Each cell stops after {args.max_requests:,} requests
or {args.seconds:g} s. Measured {time.strftime('%Y-%m-%d')} on {cpu_model()}, 2 cores **shared with other
engineers' builds and tests**, so wall rates are rough; the server's texts per CPU-second (its user + system
time over the cell) is the steadier figure. The clients run on the same two cores as the server: at 64 clients
they take a good part of them.

<!-- generated: {command} -->

| clients | texts per request | encoding | requests | texts/s | requests/s | p50 ms | p99 ms | server texts/CPU-s |
|---|---|---|---|---|---|---|---|---|
{cells}

In-process `model.encode` on the same texts, one thread, the calls as large as the requests:

<!-- generated: {command} -->

| texts per call | texts/s |
|---|---|
{encode}

What `dimensions` keeps: the share of the variance of these texts' vectors that their first k dims hold, against
the largest share any k dims hold (the table's dims are PCA-ordered when built; distillation trains them after):

<!-- generated: {command} -->

| k | first k dims | best k dims |
|---|---|---|
{dims}
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.bench_serve", description=__doc__.split("\n")[0])
    p.add_argument("model", help="a swembed model folder")
    p.add_argument("--data", help="eval folder: the STS-B test sentences (default: a built-in fallback of 12)")
    p.add_argument("--clients", default="1,8,64", help="concurrent clients, comma-separated")
    p.add_argument("--sizes", default="1,32", help="texts per request, comma-separated")
    p.add_argument("--encodings", default="base64,float", help="encoding_format of the requests")
    p.add_argument("--max-requests", type=int, default=4000, help="requests per cell at most")
    p.add_argument("--seconds", type=float, default=6.0, help="seconds per cell at most")
    p.add_argument("--batch-wait-ms", type=float, default=0.0, help="the server's --batch-wait-ms")
    p.add_argument("--search-model", help="the table of --index (default: the model)")
    p.add_argument("--index", help="a search index folder made with --search-model: bench POST /v1/search too")
    p.add_argument("--queries", help="a JSON list of [query, passage row] (lab.bench_million's queries.json)")
    p.add_argument("--out", default="reports/serve.md", help="the report to write")
    args = p.parse_args(argv)
    args.search_model = args.search_model or args.model
    if bool(args.index) != bool(args.queries):
        p.error("--index and --queries go together")
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.data:
        from lab.bench import stsb_texts

        texts, source = stsb_texts(args.data), "the STS-B test sentences"
    else:
        texts, source = FALLBACK_TEXTS, "the built-in fallback sentences"
    sizes = [int(s) for s in args.sizes.split(",")]
    process, port = start_server(args.model, args.batch_wait_ms)
    rows = []
    try:
        for encoding in args.encodings.split(","):
            for size in sizes:
                for clients in (int(c) for c in args.clients.split(",")):
                    cpu = server_cpu_s(process.pid)
                    row = run_cell(port, texts, clients, size, encoding, args.max_requests, args.seconds)
                    row["server_texts_per_cpu_s"] = row["requests"] * size / max(server_cpu_s(process.pid) - cpu,
                                                                                  1e-9)
                    rows.append(row)
                    print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    rates = encode_rates(args.model, texts, sizes, min(args.seconds, 3.0))
    print("encode texts/s by call size:", {k: round(v) for k, v in rates.items()})
    report = render(rows, rates, leading_variance(args.model, texts), args, len(texts), source)
    if args.index:
        queries = [query for query, _ in json.loads(Path(args.queries).read_text(encoding="utf-8"))]
        passages = json.loads((Path(args.index) / "index.json").read_text(encoding="utf-8"))["passages"]
        process, port = start_server(args.search_model, args.batch_wait_ms, args.index)
        try:
            found = search_cells(port, process.pid, queries, [1, 8], args.max_requests, args.seconds)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
        command = "python -m lab.bench_serve " + " ".join(shlex.quote(a) for a in args.argv)
        report += render_search(found, args, len(queries), passages, command)
    Path(args.out).write_text(report, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
