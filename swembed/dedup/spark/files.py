"""`swembed dedup --engine spark`: the command's inputs and outputs, with the work on a Spark cluster.

Inputs are read by Spark (.txt and .jsonl split on ``\\n`` only, as ``swembed dedup`` does, a trailing ``\\r``
dropped from the text but kept in the kept output; .parquet with all columns; several text columns joined by a
newline, their values kept apart for the exact key). Records are numbered in input order without gathering them: each
file's partitions are counted and a record's number is the count before its partition plus its place in it. Texts
are taken from lines with ``swembed dedup``'s own rules (``decoding.decode_line`` in the file's encoding, strict;
``records.jsonl_values``); UTF-16/32 files, whose lines are not split on the byte ``\\n``, are refused.

The output folder holds the same things as the single-machine command, written by the executors as folders
of part files (in record order): ``mapping/`` (parquet: record, file, position, representative, similarity,
reason), ``kept/<input>/`` (text part files of the kept lines, original bytes, or parquet with all columns),
``pairs/`` (the near-duplicate pairs found: first records of both texts and their cosine) and ``summary.json``.
It is written to a temporary folder beside ``--out`` and renamed when complete (on a cluster ``--out`` must be on
storage the driver and executors share); an existing ``--out`` is refused unless ``--overwrite``, as by
``swembed dedup``.
"""
from __future__ import annotations

import json
import os
import re
import resource
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from swembed.dedup.job import DedupConfig, guarantee
from swembed.dedup.records import RecordError, check_inputs, input_format, jsonl_values, kept_names
from swembed.dedup.spark.job import REASONS, run, threshold_of
from swembed.dedup.spark.search import CellSearch
from swembed.runtime.decoding import Decoded, decode_line, display_path, file_encoding, label, splits_on_newline_byte
from swembed.runtime.folder import atomic_directory, read_model_folder
from swembed.runtime.outputs import check_writable
from swembed.runtime.records import joined_text

_RECORD_ERROR = re.compile(r"RecordError: (.+)")


_LOCAL_MASTER = re.compile(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?$")


def local_shuffle_partitions(master: str) -> int | None:
    """The shuffle partitions of a ``local`` master: its thread count (``local[*]``: this machine's cores), where
    Spark's default of 200 makes a small job start 200 Python tasks per shuffle (a two-record dedup took 100 s on
    ``local[1]``, 40 s with 2); None for a cluster's master, whose own default stands."""
    match = _LOCAL_MASTER.fullmatch(master.strip())
    if match is None:
        return None
    threads = match.group(1)
    if threads == "*":
        return os.cpu_count() or 1
    return 1 if threads is None else max(1, int(threads))


def spark_session(master: str, conf: dict[str, str], progress: bool):
    """The active session, or a new one on ``master`` (workers run this Python) that the caller must stop. On a
    local master, ``spark.sql.shuffle.partitions`` defaults to its threads (``local_shuffle_partitions``) unless
    ``conf`` sets it."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName("swembed-dedup").config(
        "spark.ui.showConsoleProgress", str(progress).lower())
    partitions = local_shuffle_partitions(master)
    if partitions is not None:
        conf = {"spark.sql.shuffle.partitions": str(partitions), **conf}
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True


def numbered(frame):
    """``frame`` with ``_position``: each row's 0-based place in the file, from per-partition counts (the
    driver gets one row per partition)."""
    from pyspark.sql import functions as F

    spark = frame.sparkSession
    marked = frame.withColumn("_mid", F.monotonically_increasing_id()).withColumn(
        "_part", F.shiftright("_mid", 33))
    counts = sorted((r["_part"], r["count"]) for r in marked.groupBy("_part").count().collect())
    offsets, total = [], 0
    for part, count in counts:
        offsets.append((part, total))
        total += count
    starts = spark.createDataFrame(offsets or [(0, 0)], "_part long, _offset long")
    placed = marked.join(F.broadcast(starts), "_part").withColumn(
        "_position", F.col("_offset") + F.col("_mid") - F.shiftleft("_part", 33))
    return placed.drop("_mid", "_part", "_offset"), total


def read_input(spark, path: Path, text_columns: tuple[str, ...]):
    """One input as (frame with _position and _line or the parquet columns, record count, text function). With
    several text columns a parquet record's text is the JSON list of its values (``record_texts`` splits it)."""
    from pyspark.sql import functions as F

    if input_format(path) == "parquet":
        frame, total = numbered(spark.read.parquet(str(path)))
        values = [F.coalesce(F.col(f"`{c}`").cast("string"), F.lit("")) for c in text_columns]
        return frame, total, F.to_json(F.array(*values)) if len(values) > 1 else values[0]
    lines = spark.read.option("lineSep", "\n").text(str(path)).select(F.col("value").cast("binary").alias("_line"))
    frame, total = numbered(lines)
    return frame, total, None


def line_encoding(path: Path, encoding: str | None) -> tuple[str, int]:
    """The encoding of a .txt/.jsonl input and the bytes of its mark, as ``swembed dedup`` reads it; a file whose
    encoding does not write a line break as the byte ``\\n`` (UTF-16/32) is refused."""
    with open(path, "rb") as handle:
        name, skip = file_encoding(handle.read(4), encoding)
    if not splits_on_newline_byte(name):
        raise RecordError(f"{display_path(path)}: {label(name)} text; --engine spark splits lines on the byte \\n, so "
                          "convert it to UTF-8 first (iconv -f UTF-16 -t UTF-8) or run without --engine spark")
    return name, skip


def line_texts(frame, path: Path, text_columns: tuple[str, ...], encoding: str | None = None,
               errors: str = "strict", counting: bool = False):
    """(_position, _text) of a .txt or .jsonl input, decoded by ``swembed dedup``'s rules (with several text
    columns a JSON record's text is the JSON list of its values, as ``read_input`` gives a parquet record's, and a
    line's text is a JSON string). ``counting``: instead, each chunk's count of lines that did not decode."""
    is_jsonl, several = input_format(path) == "jsonl", len(text_columns) > 1
    name, skip = line_encoding(path, encoding)

    def text_of(raw: bytes, position: int, decoded: Decoded) -> str:
        try:
            line = decode_line(raw[skip:] if position == 0 else raw, path, position + 1, decoded, errors)
        except ValueError as exc:  # reported from the executor as a RecordError line (dedup_files)
            raise RecordError(str(exc)) from None
        if not is_jsonl:
            return json.dumps(line) if several else line
        values = jsonl_values(line, path, position + 1, text_columns)
        return json.dumps(values) if several else joined_text(values)

    def texts(frames):
        import pandas as pd

        for chunk in frames:
            raw = [bytes(r)[:-1] if bytes(r).endswith(b"\r") else bytes(r) for r in chunk["_line"].tolist()]
            decoded = Decoded(name)
            text = [text_of(r, p, decoded) for r, p in zip(raw, chunk["_position"].tolist())]
            if counting:  # --errors replace: how many lines did not decode, one row a chunk
                yield pd.DataFrame({"_bad": [len(decoded.bad_lines)]})
            else:
                yield pd.DataFrame({"_position": chunk["_position"], "_text": text})

    if counting:
        return frame.select("_position", "_line").mapInPandas(texts, "_bad long")
    return frame.select("_position", "_line").mapInPandas(texts, "_position long, _text string")


def undecodable_lines(frames: list, files: list[Path], text_columns: tuple[str, ...], encoding: str | None,
                      errors: str) -> dict[str, int]:
    """With ``--errors replace``: per text input, how many of its lines did not decode (read with U+FFFD), as
    ``swembed dedup``'s summary counts them (a pass over the lines that decodes them again)."""
    from pyspark.sql import functions as F

    if errors != "replace":
        return {}
    found = {}
    for frame, path in zip(frames, files):
        if input_format(path) != "parquet":
            bad = line_texts(frame, path, text_columns, encoding, errors, counting=True).agg(F.sum("_bad")).first()[0]
            if bad:
                found[str(path)] = int(bad)
    return found


def read_inputs(spark, files: list[Path], text_columns: tuple[str, ...], first_record: int = 0,
                encoding: str | None = None, errors: str = "strict") -> tuple[list, object, object, list[int]]:
    """Per input its numbered frame; all records as (_id, _text), numbered from ``first_record``; (record, file,
    position) of each; and each input's record count."""
    from pyspark.sql import functions as F

    texts: Any = None  # pyspark DataFrames: the inputs' texts and where each record is, unioned
    index: Any = None
    frames, counts = [], []
    for path in files:
        frame, total, text = read_input(spark, path, text_columns)
        frame = frame.withColumn("_record", F.col("_position") + F.lit(first_record))
        base = 0 if input_format(path) == "parquet" else 1  # lines are numbered from 1, rows from 0
        mine = (frame.select("_position", text.alias("_text")) if text is not None
                else line_texts(frame, path, text_columns, encoding, errors))
        mine = mine.select((F.col("_position") + F.lit(first_record)).alias("_id"), "_text")
        where = frame.select(F.col("_record").alias("record"), F.lit(str(path)).alias("file"),
                             (F.col("_position") + F.lit(base)).alias("position"))
        texts, index = (mine, where) if texts is None else (texts.unionByName(mine), index.unionByName(where))
        frames.append(frame)
        counts.append(total)
        first_record += total
    return frames, texts, index, counts


def write_kept(frames: list, files: list[Path], kept_ids, folder: Path) -> None:
    """Each input's kept records, in input order, in its own format."""
    from pyspark.sql import functions as F

    for frame, path, name in zip(frames, files, kept_names(files)):
        kept = frame.join(kept_ids, "_record", "left_semi").orderBy("_position")
        target = str(folder / name)
        if input_format(path) == "parquet":
            kept.drop("_position", "_record").write.parquet(target)
        else:
            kept.select(F.col("_line").cast("string").alias("value")).write.text(target)


def read_references(spark, reference_files: list[Path], text_columns: tuple[str, ...], first_record: int,
                    encoding: str | None = None, errors: str = "strict") -> tuple[object, list[dict], dict]:
    """The reference records as (_id, _text), numbered from ``first_record`` (None without references), and per
    reference file its first record and record count, for the summary; the lines that did not decode, by file."""
    if not reference_files:
        return None, [], {}
    frames, references, _, counts = read_inputs(spark, reference_files, text_columns, first_record, encoding, errors)
    bad = undecodable_lines(frames, reference_files, text_columns, encoding, errors)
    start_of = first_record + np.r_[0, np.cumsum(counts)[:-1]].astype(int)
    return references, [{"file": str(p), "first_record": int(s), "records": int(c)}
                        for p, s, c in zip(reference_files, start_of, counts)], bad


def write_results(folder: Path, frames: list, files: list[Path], index, mapping, pairs) -> None:
    """``mapping/`` (each record's file, position, representative, similarity and reason), ``pairs/`` and
    ``kept/`` into ``folder``, each in record order."""
    from pyspark.sql import functions as F

    index.join(mapping, "record").select("record", "file", "position", "representative", "similarity",
                                         "reason").orderBy("record").write.parquet(str(folder / "mapping"))
    pairs.orderBy("a", "b").write.parquet(str(folder / "pairs"))
    write_kept(frames, files, mapping.filter(F.col("reason") == REASONS[0]).select(F.col("record").alias("_record")),
               folder / "kept")


def dedup_files(inputs: list[str | Path], model_path: str | Path, out: str | Path, config: DedupConfig | None = None,
                search: CellSearch | None = None, master: str = "local[*]", conf: dict[str, str] | None = None,
                overwrite: bool = False, against: list[str | Path] | None = None) -> dict:
    """``swembed dedup`` on Spark: read ``inputs``, write ``out/`` atomically (an existing ``out`` only when
    ``overwrite``); returns the summary. Settings, ``out``, inputs and model are checked before Spark starts.
    ``against``: reference files, as ``swembed dedup --against``."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    config, search = config or DedupConfig(), search or CellSearch()
    config.validate()
    search.validate()
    threshold_of(config)  # --target-* is refused before any work
    out = Path(out)
    against = list(against or [])
    read = [*map(str, inputs), *map(str, against), str(model_path)]
    check_writable(out, overwrite, read)
    files = check_inputs(inputs, config.text_columns, config.encoding)
    reference_files = check_inputs(against, config.text_columns, config.encoding) if against else []
    for path in [*files, *reference_files]:
        if input_format(path) != "parquet":
            line_encoding(path, config.encoding)  # UTF-16/32 refused before Spark starts
    read_model_folder(Path(model_path))  # a bad model folder fails here in one line, not on an executor
    spark, owned = spark_session(master, conf or {}, config.progress)
    try:
        with atomic_directory(out, overwrite, "dedup-spark", read) as tmp:
            start = time.perf_counter()
            frames, texts, index, counts_per_input = read_inputs(spark, files, config.text_columns, 0, config.encoding,
                                                                 config.errors)
            references, references_summary, bad = read_references(spark, reference_files, config.text_columns,
                                                                  sum(counts_per_input), config.encoding, config.errors)
            bad.update(undecodable_lines(frames, files, config.text_columns, config.encoding, config.errors))
            result = run(texts, model_path, config, search, references)
            mapping = result.mapping.withColumnRenamed("_id", "record").persist(StorageLevel.DISK_ONLY)
            counts = dict(mapping.groupBy("reason").count().collect())
            searched = time.perf_counter() - start
            write_results(tmp, frames, files, index, mapping, result.pairs)
            lowest = mapping.filter(F.col("reason").isin(*REASONS[2:])).agg(F.min("similarity")).first()[0]
            summary = {
                "engine": "spark", "master": spark.sparkContext.master, "inputs": [str(p) for p in files],
                "records_per_input": counts_per_input, "against": [str(p) for p in reference_files],
                "references": references_summary, "undecodable_lines": bad,
                "model": str(model_path), "records": sum(counts.values()), "kept": counts.get("kept", 0),
                "exact_duplicates": counts.get("exact", 0), "near_duplicates": counts.get("near", 0),
                "reference_duplicates": counts.get("reference", 0),
                **result.stats, "pairs_found": result.pairs.count(), "target": None,
                "lowest_similarity_to_keeper": lowest,
                "guarantee": guarantee(result.stats["threshold"], lowest, config.clusters, bool(reference_files)),
                "seconds": {"hash_encode_search_cluster": round(searched, 2),
                            "write": round(time.perf_counter() - start - searched, 2)},
                "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                "config": asdict(config), "search": asdict(search)}
            (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
            mapping.unpersist()
    except Exception as exc:  # a bad record fails a task on an executor: report its one line, not the trace
        found = _RECORD_ERROR.search(str(exc))
        if found is None:
            raise
        raise RecordError(found.group(1).strip()) from None
    finally:
        if owned:
            spark.stop()
    return summary
