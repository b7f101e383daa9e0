"""`swembed dedup`: exact then near-duplicate mining over text files, accounting for every input record.

Pass 1 streams the inputs once: hashes of each text's key (``clusters.ExactKey``: the text as the table reads it)
find exact duplicates, and only the first occurrence of each text is encoded (float32 vectors on disk, so the
threshold is applied to the numbers the table gives). Pass 2 searches near-duplicate pairs among those vectors
(exact blockwise below ``EXACT_SEARCH_BELOW`` texts, ``clusters.cell_neighbours`` above) down to ``pairs_floor`` and
groups those at or above the threshold: by default stars that cannot chain (``clusters.star_representatives``: every
removed text has cosine >= threshold to the text that keeps it), also with ``--target-*`` (the highest threshold
whose stars keep at most the target), or connected components (``--clusters components``: transitive groups, whose
summary states the lowest cosine of a removed record to its keeper). With ``--against REF...`` an input record is
removed when a reference record is at cosine >= threshold (or is the same text), and nothing else is. Pass 3 streams
the inputs again and writes the kept records (in each input's own format, bytes as they were) and ``mapping.tsv``:
every record, its representative, their cosine and why it was kept or dropped. ``state/`` keeps what a re-cut
(``swembed.dedup.state``), an explanation and a selection need. Memory grows with the number of distinct texts (hash
table, vectors, each text's neighbours), not with the input's size.
"""
from __future__ import annotations

import json
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from swembed.dedup.clusters import (
    MAX_NEIGHBOURS,
    ExactKey,
    clustering,
    connected_roots,
    merge_to_target,
    near_pairs,
    nearest_in,
    preference_rank,
    representatives,
    star_representatives,
    star_to_target,
)
from swembed.dedup.records import KeptWriter, Reading, RecordError, check_inputs, read_batches
from swembed.runtime.decoding import display_path
from swembed.runtime.folder import atomic_directory
from swembed.runtime.ranges import Range, check_ranges
from swembed.runtime.testpoints import reached

MAPPING_HEADER = "record\tfile\tposition\trepresentative\tsimilarity\treason\n"
REASONS = ("kept", "exact", "near", "reference")
VECTORS_FILE = "vectors.f32"  # under state/: the distinct texts' float32 vectors, in first-occurrence order
ARRAYS_FILE = "arrays.npz"  # under state/: per record and distinct text, the pairs searched, the result
# The default threshold, decided here once (DedupConfig.threshold_value; the CLI's help and the Spark engine read
# it): the near-duplicate cosine, or with a target the lowest cosine searched
THRESHOLD, TARGET_FLOOR = 0.9, 0.5
KEEPS = ("first", "longest")  # which record a cluster keeps
SEARCHES = ("auto", "exact", "ann")  # auto: exact below EXACT_SEARCH_BELOW distinct texts, else ann


@dataclass
class DedupConfig:
    threshold: float | None = None  # cosine; default THRESHOLD, or the search floor TARGET_FLOOR with a target
    text_columns: tuple[str, ...] = ("text",)  # of .jsonl/.parquet records; several are joined by a newline
    keep: str = "first"  # or "longest"
    target_size: int | None = None
    target_fraction: float | None = None
    k: int = 16  # neighbours searched per text
    method: str = "auto"  # auto | exact | ann
    nprobe: int = 24  # ann search: the cells each distinct text is scored against
    batch_size: int = 8192
    progress: bool = True
    clusters: str = "star"  # star: each removed text is a near duplicate of its keeper; components: transitive
    pairs_floor: float | None = None  # lowest cosine of the pairs stored for a re-cut; default threshold - 0.1
    encoding: str | None = None  # of .txt/.jsonl inputs; None: a byte-order mark's, else UTF-8
    errors: str = "strict"  # a line that does not decode: refused (strict) or decoded with U+FFFD and counted

    def validate(self) -> None:
        if self.keep not in KEEPS:
            raise ValueError(f"--keep must be one of {', '.join(KEEPS)}, got {self.keep!r}")
        if self.method not in SEARCHES:
            raise ValueError(f"--search must be one of {', '.join(SEARCHES)}, got {self.method!r}")
        if self.target_size is not None and self.target_fraction is not None:
            raise ValueError("give --target-size or --target-fraction, not both")
        check_ranges(DEDUP_RANGES, self, lambda name: "--" + name.replace("_", "-"))
        clustering(self.clusters)  # an unknown mode is refused, never run as another
        columns = [self.text_columns] if isinstance(self.text_columns, str) else list(self.text_columns)
        if not columns or not all(isinstance(c, str) and c for c in columns) or len(set(columns)) < len(columns):
            raise ValueError(f"--text-column takes distinct non-empty column names, got {columns}")
        self.text_columns = tuple(columns)
        self.encoding = self.reading().encoding  # an unknown encoding or policy fails here
        if self.pairs_floor is not None and self.pairs_floor > self.threshold_value():
            raise ValueError(f"--pairs-floor ({self.pairs_floor:g}) must be at most the threshold "
                             f"({self.threshold_value():g})")

    def reading(self, digests: bool = False) -> Reading:
        """How the inputs' lines are decoded (``records.Reading``); ``digests``: their SHA-256 hashed on the way."""
        return Reading(self.encoding, self.errors, digests)

    def has_target(self) -> bool:
        return self.target_size is not None or self.target_fraction is not None

    def threshold_value(self) -> float:
        """The threshold (with a target: the lowest cosine searched)."""
        return self.threshold if self.threshold is not None else (TARGET_FLOOR if self.has_target() else THRESHOLD)

    def floor(self) -> float:
        """The lowest cosine of the pairs searched and stored."""
        if self.pairs_floor is not None:
            return self.pairs_floor
        return self.threshold_value() if self.has_target() else max(-1.0, self.threshold_value() - 0.1)

    def target(self, n_records: int) -> int | None:
        if self.target_fraction is not None:
            return max(1, round(self.target_fraction * n_records))
        return self.target_size


# DedupConfig's numeric settings, named by their flags (--target-size)
DEDUP_RANGES = {
    "target_size": Range(1, unset="no target"),
    "target_fraction": Range(0, 1, above=True, unset="no target"),
    "threshold": Range(-1, 1, unset=f"{THRESHOLD}, or {TARGET_FLOOR} with a target"),  # a cosine
    "pairs_floor": Range(-1, 1, unset="the threshold - 0.1"),
    "k": Range(1, MAX_NEIGHBOURS),
    "batch_size": Range(1),
}


@dataclass
class FirstPass:
    """What pass 1 learns: per record its distinct text; per distinct text its first and longest record, its
    key's hash and its vector."""

    unique_of_record: np.ndarray
    first_record: np.ndarray
    longest_record: np.ndarray
    longest_length: np.ndarray
    vectors: np.ndarray
    hashes: np.ndarray
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def _bar(total: int, enabled: bool, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc=desc, disable=not enabled, file=sys.stderr)


def first_pass(files: list[Path], model, config: DedupConfig, vectors_path: Path, key: ExactKey) -> FirstPass:
    start = time.perf_counter()
    seen: dict[int, int] = {}
    unique_of_record: list[np.ndarray] = []
    first_record: list[int] = []
    longest_record: list[int] = []
    longest_length: list[int] = []
    record, per_file = 0, [0] * len(files)
    bar = _bar(sum(p.stat().st_size for p in files), config.progress, "dedup pass 1 (hash, encode)")
    reading = config.reading(digests=True)
    with open(vectors_path, "wb") as vector_file:
        for batch in read_batches(files, config.text_columns, config.batch_size, reading=reading):
            hashes = key.hashes(batch.values or batch.texts).tolist()
            uniques = np.empty(len(hashes), dtype=np.int64)
            new_texts = []
            for offset, (digest, text) in enumerate(zip(hashes, batch.texts)):
                unique = seen.get(digest)
                if unique is None:
                    unique = seen[digest] = len(first_record)
                    first_record.append(record + offset)
                    longest_record.append(record + offset)
                    longest_length.append(len(text))
                    new_texts.append(text)
                elif len(text) > longest_length[unique]:
                    longest_record[unique], longest_length[unique] = record + offset, len(text)
                uniques[offset] = unique
            if new_texts:
                vector_file.write(np.ascontiguousarray(model.encode(new_texts), dtype=np.float32).tobytes())
            unique_of_record.append(uniques)
            record += len(hashes)
            per_file[batch.file] += len(hashes)
            bar.update(batch.progress_bytes)
            bar.set_postfix(records=f"{record:,}", distinct=f"{len(first_record):,}", refresh=False)
    bar.close()
    n_unique = len(first_record)
    vectors = (np.fromfile(vectors_path, dtype=np.float32).reshape(n_unique, model.dim) if n_unique
               else np.zeros((0, model.dim), np.float32))
    return FirstPass(np.concatenate(unique_of_record) if unique_of_record else np.zeros(0, np.int64),
                     np.asarray(first_record, np.int64), np.asarray(longest_record, np.int64),
                     np.asarray(longest_length, np.int64), vectors, np.fromiter(seen, np.uint64, len(seen)),
                     time.perf_counter() - start, {"records_per_file": per_file, **read_summary(files, reading)})


def read_summary(files: list[Path], reading: Reading) -> dict:
    """What reading the files found: each one's SHA-256 (a re-cut checks the inputs by it), the encoding of each
    text file, and the lines that did not decode (``--errors replace``) by file."""
    return {"sha256": [reading.sha256.get(i) for i in range(len(files))],
            "encodings": [reading.decoded[i].encoding if i in reading.decoded else None for i in range(len(files))],
            "undecodable_lines": {str(files[i]): len(d.bad_lines or []) for i, d in reading.decoded.items()
                                  if d.bad_lines}}


def cosine_to(vectors: np.ndarray, rep: np.ndarray) -> np.ndarray:
    """Each row's float32 cosine to row ``rep[i]`` (clipped to [-1, 1]; 1 for its own representative)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    similarity = np.concatenate([np.einsum("ij,ij->i", vectors[i : i + 65_536], vectors[rep[i : i + 65_536]])
                                 for i in range(0, len(rep), 65_536)] or [np.zeros(0, np.float32)])
    np.clip(similarity, -1.0, 1.0, out=similarity)
    similarity[rep == np.arange(len(rep))] = 1.0
    return similarity


def group(vectors: np.ndarray, lengths: np.ndarray, pairs: tuple, n_records: int, threshold: float,
          config: DedupConfig) -> dict:
    """Clusters of the distinct texts from the pairs searched (a, b, cosine; any floor <= ``threshold``): each
    text's representative and cosine to it, the threshold applied (with a target: the one chosen) and what the
    clustering guarantees. A fresh search at ``threshold`` gives the same pairs at or above it."""
    n_unique = len(vectors)
    a, b, sims = pairs
    keep = sims >= threshold
    a, b, sims = a[keep], b[keep], sims[keep]
    target = config.target(n_records)
    grouping = time.process_time()
    if clustering(config.clusters).transitive:
        if target is not None:  # single linkage down to the target: transitive like components
            roots, threshold = merge_to_target(n_unique, a, b, sims, target)
        else:
            roots = connected_roots(n_unique, a, b)
        rep = representatives(roots, lengths, config.keep)
    else:
        rank = preference_rank(np.arange(n_unique), lengths, config.keep)
        if target is not None:
            rep, threshold = star_to_target(n_unique, a, b, sims, rank, target, threshold)
        else:
            rep = star_representatives(n_unique, a, b, sims, rank)
    grouping = time.process_time() - grouping
    return {"rep_unique": rep, "similarity": cosine_to(vectors, rep), "pairs": int(len(a)),
            "threshold": float(threshold), "target": target, "grouping_cpu_s": grouping}


def cluster_distinct(vectors: np.ndarray, lengths: np.ndarray, n_records: int, config: DedupConfig) -> dict:
    """Near-duplicate clusters over the distinct texts (rows of ``vectors``, in first-occurrence order), as
    ``group`` gives them, and the pairs searched (``pairs``: a, b, cosine >= ``config.floor()``)."""
    found = near_pairs(np.asarray(vectors, dtype=np.float32), config.floor(), config.k, config.method, config.nprobe)
    return {**group(vectors, lengths, found, n_records, config.threshold_value(), config), "searched": found}


def against_references(first: FirstPass, references: FirstPass, first_reference_record: int, threshold: float,
                       config: DedupConfig) -> dict:
    """Each distinct input text's most similar reference (the same text when its key matches: cosine 1), as
    a record number counting on after the inputs, and whether it is removed (cosine >= threshold)."""
    best, sims = nearest_in(first.vectors, references.vectors, config.method, config.nprobe)
    same = {int(h): i for i, h in enumerate(references.hashes.tolist())}
    for row, digest in enumerate(first.hashes.tolist()):
        match = same.get(int(digest))
        if match is not None:
            best[row], sims[row] = match, 1.0
    return {"best_reference": best, "reference_similarity": sims,
            "reference_record": first_reference_record + references.first_record}


def cut_against(match: dict, threshold: float, n_unique: int) -> dict:
    """The clusters of an ``--against`` run at ``threshold``: a removed text's representative is its reference
    (a record number past the inputs), marked by ``removed``."""
    removed = match["reference_similarity"] >= threshold
    rep = np.arange(n_unique)
    similarity = np.ones(n_unique, np.float32)
    similarity[removed] = np.minimum(match["reference_similarity"][removed], 1.0)
    records = match["reference_record"]
    reference_of = records[np.maximum(match["best_reference"], 0)] if len(records) else np.full(n_unique, -1)
    return {"rep_unique": rep, "removed": removed, "reference_of": reference_of, "similarity": similarity,
            "pairs": int(removed.sum()), "threshold": float(threshold), "target": None, "grouping_cpu_s": 0.0}


def per_record(first: FirstPass, result: dict, keep: str) -> dict:
    """The representative record, cosine and reason (0 kept, 1 exact, 2 near, 3 reference) of every record."""
    n_records = len(first.unique_of_record)
    chosen = first.first_record if keep == "first" else first.longest_record
    record_unique = first.unique_of_record
    record_rep_unique = result["rep_unique"][record_unique]
    rep_record = chosen[record_rep_unique]
    reason = np.where(rep_record == np.arange(n_records), 0, np.where(record_unique == record_rep_unique, 1, 2))
    if "removed" in result:  # --against: every copy of a removed text goes, to its reference
        gone = result["removed"][record_unique]
        rep_record = np.where(gone, result["reference_of"][record_unique], np.where(reason == 0, rep_record,
                                                                                    np.arange(n_records)))
        reason = np.where(gone, 3, 0)
    return {**result, "rep_record": rep_record, "similarity": result["similarity"][record_unique], "reason": reason}


def write_outputs(files: list[Path], config: DedupConfig, result: dict, tmp: Path,
                  sha256: list | None = None) -> float:
    """Pass 3: the kept records and ``mapping.tsv`` into ``tmp`` (a file name that is not UTF-8 as its bytes);
    returns its seconds. ``sha256``: what each input's bytes hashed to when the run read them (a re-cut); an input
    whose bytes now differ is refused once read (the temp folder then removed, nothing written)."""
    start = time.perf_counter()
    rep, sim, reason = result["rep_record"], result["similarity"], result["reason"]
    writer = KeptWriter(files, tmp)
    record = 0
    reading = config.reading(digests=sha256 is not None)
    bar = _bar(sum(p.stat().st_size for p in files), config.progress, "dedup pass 3 (write)")
    with open(tmp / "mapping.tsv", "w", encoding="utf-8", errors="surrogateescape") as mapping:
        mapping.write(MAPPING_HEADER)
        for batch in read_batches(files, config.text_columns, config.batch_size, full_rows=True, reading=reading):
            ids = range(record, record + len(batch.texts))
            writer.write(batch, [reason[i] == 0 for i in ids])
            source = str(files[batch.file])
            mapping.write("".join(f"{i}\t{source}\t{pos}\t{rep[i]}\t{sim[i]:.4f}\t{REASONS[reason[i]]}\n"
                                  for i, pos in zip(ids, batch.positions)))
            record += len(batch.texts)
            bar.update(batch.progress_bytes)
    bar.close()
    writer.close()
    for index, expected in enumerate(sha256 or []):
        if expected is not None and reading.sha256.get(index) != expected:
            raise RecordError(f"{display_path(files[index])}: its content changed since the run (SHA-256 differs, "
                              "though size and time may not); run swembed dedup again")
    return time.perf_counter() - start


def lowest_similarity(reason: np.ndarray, similarity: np.ndarray) -> float | None:
    """The lowest cosine of a near-removed record (near or reference) to its keeper (None: none removed so)."""
    removed = reason >= 2
    return float(similarity[removed].min()) if removed.any() else None


def guarantee(threshold: float, lowest: float | None, clusters: str, against: bool) -> str:
    """What the run promises, in words (components: with the lowest cosine of a removed record to its keeper)."""
    if against:
        text = f"every removed record has cosine >= {threshold:.4f} to a reference record (or is the same text)"
    elif clustering(clusters).transitive:
        weakest = "none removed" if lowest is None else f"{lowest:.4f}"
        text = (f"components are transitive: a removed record is joined to its keeper by a chain of pairs with cosine "
                f">= {threshold:.4f}, not always directly; the lowest cosine of a removed record to its keeper: "
                f"{weakest}")
    else:
        text = f"star: every removed record has cosine >= {threshold:.4f} to the record that keeps it"
    return text


def file_stats(files: list[Path]) -> list[list[int]]:
    """Size and modification time of each file (a re-cut refuses inputs that changed since)."""
    return [[p.stat().st_size, p.stat().st_mtime_ns] for p in files]


def dedup(inputs: list[str | Path], model_path: str | Path, out: str | Path, config: DedupConfig | None = None,
          overwrite: bool = False, against: list[str | Path] | None = None) -> dict:
    """Run the three passes and write ``out/`` atomically (an existing ``out`` only when ``overwrite``); returns
    the summary (also ``out/summary.json``). ``against``: reference files; input records near one are removed."""
    from swembed._extras import require
    from swembed.runtime.embedder import load
    from swembed.runtime.outputs import check_writable

    config = config or DedupConfig()
    config.validate()
    against = list(against or [])
    if against and config.has_target():
        raise ValueError("--against removes what is near the references; it takes no --target-size/--target-fraction")
    require("dedup", "scipy", *(["faiss"] if config.method == "ann" else []))
    read = [*map(str, inputs), *map(str, against), str(model_path)]
    check_writable(Path(out), overwrite, read)
    files = check_inputs(inputs, config.text_columns, config.encoding)
    reference_files = check_inputs(against, config.text_columns, config.encoding) if against else []
    model = load(model_path)
    key = ExactKey.of_model(model)
    with atomic_directory(Path(out), overwrite, "dedup", read) as tmp:
        (tmp / "state").mkdir()
        first = first_pass(files, model, config, tmp / "state" / VECTORS_FILE, key)
        reached("dedup: records encoded")
        start = time.perf_counter()
        n_records = len(first.unique_of_record)
        match = None
        if against:
            refs = first_pass(reference_files, model, config, tmp / "state" / ".references.f32", key)
            match = against_references(first, refs, n_records, config.threshold_value(), config)
            (tmp / "state" / ".references.f32").unlink()
            result = cut_against(match, config.threshold_value(), len(first.first_record))
            found = None
        else:
            result = cluster_distinct(first.vectors, first.longest_length, n_records, config)
            found = result.pop("searched")
        result = per_record(first, result, config.keep)
        reached("dedup: clusters found")
        cluster_seconds = time.perf_counter() - start
        write_seconds = write_outputs(files, config, result, tmp)
        summary = run_summary(files, reference_files, model_path, model.dim, config, first, result, {
            "pass1_hash_encode": round(first.seconds, 2), "pass2_search_cluster": round(cluster_seconds, 2),
            "pass3_write": round(write_seconds, 2), "grouping_cpu": round(result["grouping_cpu_s"], 3)})
        if match is not None:
            summary["references"] = reference_summary(reference_files, refs, n_records)
            summary["against_sha256"] = refs.extra["sha256"]
            summary["undecodable_lines"].update(refs.extra["undecodable_lines"])
        save_state(tmp / "state", first, result, found, match)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def save_state(folder: Path, first: FirstPass, result: dict, pairs: tuple | None, match: dict | None) -> None:
    """Write ``state/arrays.npz``: what ``swembed.dedup.state`` reads back to re-cut, explain and select."""
    arrays = {"unique_of_record": first.unique_of_record, "first_record": first.first_record,
              "longest_record": first.longest_record, "longest_length": first.longest_length,
              "rep_record": result["rep_record"], "similarity": result["similarity"],
              "reason": result["reason"].astype(np.int8)}
    if pairs is not None:
        arrays.update(pairs_a=pairs[0], pairs_b=pairs[1], pairs_similarity=pairs[2])
    if match is not None:
        arrays.update(match)
    np.savez(folder / ARRAYS_FILE, **arrays)


def reference_summary(files: list[Path], refs: FirstPass, first_record: int) -> list[dict]:
    """Where each reference file's records are numbered (record numbers go on after the inputs')."""
    out, start = [], first_record
    for path, records in zip(files, refs.extra.get("records_per_file", [])):
        out.append({"file": str(path), "first_record": start, "records": records})
        start += records
    return out


def run_summary(files: list[Path], reference_files: list[Path], model_path, dim: int, config: DedupConfig,
                first: FirstPass, result: dict, seconds: dict) -> dict:
    counts = np.bincount(result["reason"], minlength=4)
    lowest = lowest_similarity(result["reason"], result["similarity"])
    promise = guarantee(result["threshold"], lowest, config.clusters, bool(reference_files))
    return {
        "inputs": [str(p) for p in files], "input_stats": file_stats(files),
        "input_sha256": first.extra.get("sha256", []), "input_encodings": first.extra.get("encodings", []),
        "undecodable_lines": first.extra.get("undecodable_lines", {}),
        "records_per_input": first.extra.get("records_per_file", []),
        "against": [str(p) for p in reference_files], "against_stats": file_stats(reference_files),
        "model": str(model_path), "dim": dim, "records": int(len(result["reason"])),
        "kept": int(counts[0]), "exact_duplicates": int(counts[1]), "near_duplicates": int(counts[2]),
        "reference_duplicates": int(counts[3]), "distinct_texts": int(len(first.first_record)),
        "pairs_found": int(result["pairs"]), "threshold": float(result["threshold"]), "target": result["target"],
        "pairs_floor": config.floor(), "guarantee": promise, "lowest_similarity_to_keeper": lowest,
        "seconds": seconds, "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "config": asdict(config),
    }
