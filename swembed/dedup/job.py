"""`swembed dedup`: exact then near-duplicate mining over text files, accounting for every input record.

Pass 1 streams the inputs once: normalised-text hashes find exact duplicates, and only the first
occurrence of each text is encoded (vectors go to a float16 file on disk). Pass 2 searches
near-duplicate pairs among those vectors (exact blockwise below ``EXACT_SEARCH_BELOW`` texts, faiss
IVF above) and groups them: by default stars that cannot chain (``clusters.star_representatives``: every
removed text has cosine >= threshold to the text that keeps it), or connected components (``--clusters
components``, transitive groups; ``--target-*`` always merges so). Pass 3 streams the inputs again and writes the kept records
(in each input's own format) and ``mapping.tsv``: every record, its cluster representative, their
cosine and why it was kept or dropped. Memory grows with the number of distinct texts (hash table,
vectors, index), not with the input's size.
"""
from __future__ import annotations

import json
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from swembed.dedup.clusters import (CLUSTERINGS, connected_roots, merge_to_target, near_pairs, preference_rank,
                                    representatives, star_representatives, text_hashes)
from swembed.dedup.records import KeptWriter, check_inputs, read_batches
from swembed.runtime.folder import atomic_directory
from swembed.runtime.ranges import Range, check_ranges

MAPPING_HEADER = "record\tfile\tposition\trepresentative\tsimilarity\treason\n"


@dataclass
class DedupConfig:
    threshold: float | None = None  # cosine; default 0.9, or the search floor 0.5 with a target
    text_column: str = "text"
    keep: str = "first"  # or "longest"
    target_size: int | None = None
    target_fraction: float | None = None
    k: int = 16  # neighbours searched per text
    method: str = "auto"  # auto | exact | ann
    nprobe: int = 16
    batch_size: int = 8192
    progress: bool = True
    clusters: str = "star"  # star: each removed text is a near duplicate of its keeper; components: transitive

    def validate(self) -> None:
        if self.keep not in ("first", "longest"):
            raise ValueError(f"--keep must be first or longest, got {self.keep!r}")
        if self.target_size is not None and self.target_fraction is not None:
            raise ValueError("give --target-size or --target-fraction, not both")
        check_ranges(DEDUP_RANGES, self, lambda name: "--" + name.replace("_", "-"))
        if self.clusters not in CLUSTERINGS:
            raise ValueError(f"--clusters must be one of {', '.join(CLUSTERINGS)}, got {self.clusters!r}")


# DedupConfig's numeric settings, named by their flags (--target-size)
DEDUP_RANGES = {
    "target_size": Range(1, unset="no target"),
    "target_fraction": Range(0, 1, above=True, unset="no target"),
    "threshold": Range(-1, 1, unset="0.9, or 0.5 with a target"),  # a cosine
    "k": Range(1),
    "batch_size": Range(1),
}


@dataclass
class FirstPass:
    """What pass 1 learns: per record its distinct text; per distinct text its first and longest record."""

    unique_of_record: np.ndarray
    first_record: np.ndarray
    longest_record: np.ndarray
    longest_length: np.ndarray
    vectors: np.ndarray
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def _bar(total: int, enabled: bool, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc=desc, disable=not enabled, file=sys.stderr)


def first_pass(files: list[Path], model, config: DedupConfig, vectors_path: Path) -> FirstPass:
    start = time.perf_counter()
    seen: dict[int, int] = {}
    unique_of_record: list[np.ndarray] = []
    first_record, longest_record, longest_length = [], [], []
    record = 0
    bar = _bar(sum(p.stat().st_size for p in files), config.progress, "dedup pass 1 (hash, encode)")
    with open(vectors_path, "wb") as vector_file:
        for batch in read_batches(files, config.text_column, config.batch_size):
            hashes = text_hashes(batch.texts).tolist()
            uniques = np.empty(len(hashes), dtype=np.int64)
            new_texts = []
            for offset, (key, text) in enumerate(zip(hashes, batch.texts)):
                unique = seen.get(key)
                if unique is None:
                    unique = seen[key] = len(first_record)
                    first_record.append(record + offset)
                    longest_record.append(record + offset)
                    longest_length.append(len(text))
                    new_texts.append(text)
                elif len(text) > longest_length[unique]:
                    longest_record[unique], longest_length[unique] = record + offset, len(text)
                uniques[offset] = unique
            if new_texts:
                vector_file.write(model.encode(new_texts).astype(np.float16).tobytes())
            unique_of_record.append(uniques)
            record += len(hashes)
            bar.update(batch.progress_bytes)
            bar.set_postfix(records=f"{record:,}", distinct=f"{len(first_record):,}", refresh=False)
    bar.close()
    n_unique = len(first_record)
    vectors = (np.fromfile(vectors_path, dtype=np.float16).reshape(n_unique, model.dim) if n_unique
               else np.zeros((0, model.dim), np.float16))
    return FirstPass(np.concatenate(unique_of_record) if unique_of_record else np.zeros(0, np.int64),
                     np.asarray(first_record, np.int64), np.asarray(longest_record, np.int64),
                     np.asarray(longest_length, np.int64), vectors, time.perf_counter() - start)


def cluster_distinct(vectors: np.ndarray, lengths: np.ndarray, n_records: int, config: DedupConfig) -> dict:
    """Near-duplicate clusters over the distinct texts (rows of ``vectors``, in first-occurrence order):
    each one's representative row and its cosine to it. Shared with ``swembed.integrations.spark``."""
    n_unique = len(vectors)
    target = config.target_size
    if config.target_fraction is not None:
        target = max(1, round(config.target_fraction * n_records))
    threshold = config.threshold if config.threshold is not None else (0.5 if target else 0.9)
    vectors = np.asarray(vectors, dtype=np.float32)
    a, b, sims = near_pairs(vectors, threshold, config.k, config.method, config.nprobe)
    grouping = time.process_time()
    if target is not None:  # merging down to a size is single linkage: its groups are transitive
        roots, threshold = merge_to_target(n_unique, a, b, sims, target)
        rep = representatives(roots, lengths, config.keep)
    elif config.clusters == "components":
        rep = representatives(connected_roots(n_unique, a, b), lengths, config.keep)
    else:
        rep = star_representatives(n_unique, a, b, sims, preference_rank(np.arange(n_unique), lengths, config.keep))
    grouping = time.process_time() - grouping
    similarity = np.concatenate([np.einsum("ij,ij->i", vectors[i : i + 65_536], vectors[rep[i : i + 65_536]])
                                 for i in range(0, n_unique, 65_536)] or [np.zeros(0, np.float32)])
    np.clip(similarity, -1.0, 1.0, out=similarity)  # float16 storage can overshoot 1 by 1e-4
    similarity[rep == np.arange(n_unique)] = 1.0
    return {"rep_unique": rep, "similarity": similarity, "pairs": len(a), "threshold": threshold, "target": target,
            "grouping_cpu_s": grouping}


def cluster(first: FirstPass, config: DedupConfig) -> dict:
    """The representative record, cosine and reason (0 kept, 1 exact, 2 near duplicate) of every record."""
    start = time.perf_counter()
    n_records = len(first.unique_of_record)
    result = cluster_distinct(first.vectors, first.longest_length, n_records, config)
    chosen = first.first_record if config.keep == "first" else first.longest_record
    record_unique = first.unique_of_record
    record_rep_unique = result["rep_unique"][record_unique]
    rep_record = chosen[record_rep_unique]
    reason = np.where(rep_record == np.arange(n_records), 0, np.where(record_unique == record_rep_unique, 1, 2))
    return {**result, "rep_record": rep_record, "similarity": result["similarity"][record_unique],
            "reason": reason, "seconds": time.perf_counter() - start}


def write_outputs(files: list[Path], config: DedupConfig, result: dict, tmp: Path) -> float:
    start = time.perf_counter()
    rep, sim, reason = result["rep_record"], result["similarity"], result["reason"]
    names = ("kept", "exact", "near")
    writer = KeptWriter(files, tmp)
    record = 0
    bar = _bar(sum(p.stat().st_size for p in files), config.progress, "dedup pass 3 (write)")
    with open(tmp / "mapping.tsv", "w", encoding="utf-8") as mapping:
        mapping.write(MAPPING_HEADER)
        for batch in read_batches(files, config.text_column, config.batch_size, full_rows=True):
            ids = range(record, record + len(batch.texts))
            writer.write(batch, [reason[i] == 0 for i in ids])
            source = str(files[batch.file])
            mapping.write("".join(f"{i}\t{source}\t{pos}\t{rep[i]}\t{sim[i]:.4f}\t{names[reason[i]]}\n"
                                  for i, pos in zip(ids, batch.positions)))
            record += len(batch.texts)
            bar.update(batch.progress_bytes)
    bar.close()
    writer.close()
    return time.perf_counter() - start


def dedup(inputs: list[str | Path], model_path: str | Path, out: str | Path,
          config: DedupConfig | None = None, overwrite: bool = False) -> dict:
    """Run the three passes and write ``out/`` atomically (an existing ``out`` only when ``overwrite``); returns
    the summary (also ``out/summary.json``)."""
    from swembed import load
    from swembed.runtime.folder import check_writable

    from swembed._extras import require

    config = config or DedupConfig()
    config.validate()
    require("dedup", "scipy", *(["faiss"] if config.method == "ann" else []))
    read = [*map(str, inputs), str(model_path)]
    check_writable(Path(out), overwrite, read)
    files = check_inputs(inputs, config.text_column)
    model = load(model_path)
    with atomic_directory(Path(out), overwrite, "dedup", read) as tmp:
        first = first_pass(files, model, config, tmp / ".vectors.f16")
        result = cluster(first, config)
        write_seconds = write_outputs(files, config, result, tmp)
        (tmp / ".vectors.f16").unlink()
        counts = np.bincount(result["reason"], minlength=3)
        summary = {
            "inputs": [str(p) for p in files], "model": str(model_path), "records": int(len(result["reason"])),
            "kept": int(counts[0]), "exact_duplicates": int(counts[1]), "near_duplicates": int(counts[2]),
            "distinct_texts": int(len(first.first_record)), "pairs_found": int(result["pairs"]),
            "threshold": float(result["threshold"]), "target": result["target"],
            "seconds": {"pass1_hash_encode": round(first.seconds, 2), "pass2_search_cluster":
                        round(result["seconds"], 2), "pass3_write": round(write_seconds, 2),
                        "grouping_cpu": round(result["grouping_cpu_s"], 3)},
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "config": asdict(config),
        }
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary
