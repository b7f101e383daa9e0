"""`swembed dedup` as a Spark job: the same keys, clusters, representatives and mapping, with nothing that
grows with the collection gathered on the driver.

1. Executors hash each text's key (``clusters.ExactKey``, the table's own case and normalisation); one shuffle by
   hash gives each record its text's first record (the distinct text's id) and longest record; only first records
   are encoded (float32, stored on the executors' disks).
2. ``search.candidate_pairs``: near-duplicate pairs among the distinct texts (cells of a coarse quantiser).
3. ``components.connected_roots``: the pairs' connected components. By default each component's pairs go to
   one task that makes stars that cannot chain (``clusters.star_representatives``, as ``swembed dedup``);
   with ``clusters="components"`` the representative is the component's first distinct text
   (``keep="first"``) or its longest (ties: the first), as ``clusters.representatives``.
4. Each record: its representative's record, the cosine of their texts and the reason (kept, exact, near).

With references (``swembed dedup --against``) steps 2-3 are replaced: the references' distinct texts and vectors
are gathered and broadcast (a reference set must fit in memory), each distinct input text finds its nearest
reference with ``swembed dedup``'s own ``clusters.nearest_in`` (the same text: cosine 1), and a record is removed
(reason ``reference``, its reference's record as representative) at cosine >= threshold.

The driver holds the k-means sample, one number per cell and a few counts.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from swembed.dedup.clusters import ExactKey, clustering, nearest_in, preference_rank
from swembed.dedup.clusters import star_representatives as stars
from swembed.dedup.job import REASONS, DedupConfig
from swembed.dedup.spark.components import connected_roots
from swembed.dedup.spark.model import (
    broadcast_model,
    require_columns,
    vectors_from_bytes,
    vectors_to_bytes,
    worker_model,
)
from swembed.dedup.spark.search import CellSearch, candidate_pairs
from swembed.runtime.records import joined_text


@dataclass
class SparkDedup:
    """A run: ``mapping`` (_id, representative, similarity, reason) for every record, ``pairs`` (a, b,
    similarity: the distinct texts' first records), both lazy over persisted stages, and what the search did."""

    mapping: Any  # pyspark DataFrames (pyspark: imported when a run starts)
    pairs: Any
    stats: dict = field(default_factory=dict)


def threshold_of(config: DedupConfig) -> float:
    if config.has_target():
        raise ValueError("--target-size/--target-fraction need the single-machine engine (--engine local)")
    return config.threshold_value()


def check_ids(df, id_col: str) -> None:
    """The id column names and orders the records: an integer type, never null, unique."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegralType

    kind = df.schema[id_col].dataType
    if not isinstance(kind, IntegralType):
        raise ValueError(f"id column {id_col!r} is {kind.simpleString()}, not an integer type")
    bad = df.groupBy(id_col).count().filter(F.col(id_col).isNull() | (F.col("count") > 1)).limit(1).collect()
    if bad and bad[0][id_col] is None:
        raise ValueError(f"id column {id_col!r} has null values")
    if bad:
        raise ValueError(f"id column {id_col!r} is not unique: {bad[0][id_col]} occurs {bad[0]['count']} times")


def _record(value: str | list) -> str | tuple[str, ...]:
    """A record as ``ExactKey.hashes`` takes it: a .txt line's text, or the values of several text columns."""
    return value if isinstance(value, str) else tuple(value)


def distinct_texts(texts, model_path, spark, key: ExactKey, several: bool = False):
    """Per record (_id, _first, _longest, _longest_length, _hash, _vector): its text's first and longest record
    (ties: the first), its key's hash and, on first records only, the text's float32 vector. Persisted on disk.
    ``several``: each _text is JSON: the list of a record's text columns (hashed apart, encoded joined), or a
    .txt line's text."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    broadcast, digest = broadcast_model(spark, model_path)

    def add_keys(frames):
        import pandas as pd

        for frame in frames:
            text = frame["_text"].fillna("").astype(str).tolist()
            records = [_record(json.loads(t)) for t in text] if several else text
            text = [r if isinstance(r, str) else joined_text(r) for r in records] if several else text
            yield pd.DataFrame({"_id": frame["_id"].astype(np.int64), "_hash": key.hashes(records).view(np.int64),
                                "_length": [len(t) for t in text], "_text": text})

    def encode_firsts(frames):
        import pandas as pd

        model = worker_model(broadcast, digest)
        for frame in frames:
            first = (frame["_id"] == frame["_first"]).to_numpy()
            vectors = np.full(len(frame), None, dtype=object)
            if first.any():
                vectors[first] = vectors_to_bytes(model.encode(frame["_text"][first].tolist()))
            yield pd.DataFrame({"_id": frame["_id"], "_first": frame["_first"], "_longest": frame["_longest"],
                                "_longest_length": -frame["_negative_length"], "_hash": frame["_hash"],
                                "_vector": vectors})

    keyed = texts.mapInPandas(add_keys, "_id long, _hash long, _length long, _text string")
    same_text = Window.partitionBy("_hash")
    longest = F.min(F.struct((-F.col("_length")).alias("negative_length"), F.col("_id").alias("id")))
    grouped = keyed.select("_id", "_text", "_hash", F.min("_id").over(same_text).alias("_first"),
                           longest.over(same_text).alias("_best"))
    grouped = grouped.select("_id", "_text", "_hash", "_first", F.col("_best.id").alias("_longest"),
                             F.col("_best.negative_length").alias("_negative_length"))
    table = grouped.mapInPandas(
        encode_firsts, "_id long, _first long, _longest long, _longest_length long, _hash long, _vector binary")
    return table.persist(StorageLevel.DISK_ONLY)


def cosine_to_representative(members, vectors, dim: int):
    """(_first, similarity) for members (_first, _rep_first) that are not their own representative: the
    float32 cosine of the stored vectors, clipped to [-1, 1] as ``swembed dedup`` does."""
    from pyspark.sql import functions as F

    def cosines(frames):
        import pandas as pd

        for frame in frames:
            x = vectors_from_bytes(frame["_vector"].to_numpy(), dim)
            y = vectors_from_bytes(frame["_rep_vector"].to_numpy(), dim)
            yield pd.DataFrame({"_first": frame["_first"],
                                "similarity": np.clip(np.einsum("ij,ij->i", x, y), -1.0, 1.0)})

    mine = vectors.select("_first", "_vector")
    theirs = vectors.select(F.col("_first").alias("_rep_first"), F.col("_vector").alias("_rep_vector"))
    pairs = members.filter(F.col("_first") != F.col("_rep_first")).join(mine, "_first").join(theirs, "_rep_first")
    return pairs.select("_first", "_vector", "_rep_vector").mapInPandas(cosines, "_first long, similarity float")


def representatives(vectors, roots, keep: str):
    """(_first, _rep_first, representative) for every distinct text: the kept distinct text of its component
    and the record that stands for it (its first record, or with ``keep="longest"`` its longest)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    light = vectors.select("_first", "_longest", "_longest_length")
    members = light.join(roots.withColumnRenamed("node", "_first"), "_first", "left").withColumn(
        "root", F.coalesce("root", "_first"))
    if keep == "first":
        return members.select("_first", F.col("root").alias("_rep_first"), F.col("root").alias("representative"))
    best = F.min(F.struct((-F.col("_longest_length")).alias("negative_length"), F.col("_first").alias("first"),
                          F.col("_longest").alias("record"))).over(Window.partitionBy("root"))
    chosen = members.select("_first", best.alias("_best"))
    return chosen.select("_first", F.col("_best.first").alias("_rep_first"),
                         F.col("_best.record").alias("representative"))


def star_representatives(vectors, pairs, roots, keep: str):
    """(_first, _rep_first, representative) as ``representatives``, with clusters that cannot chain: each
    connected component's pairs go to one task, which runs ``swembed dedup``'s own
    ``clusters.star_representatives`` on them (the rule only looks along pairs, so per component it gives what
    it gives on the whole collection)."""
    from pyspark.sql import functions as F

    def assign(frame):
        import pandas as pd

        ends = np.r_[frame["a"].to_numpy(np.int64), frame["b"].to_numpy(np.int64)]
        nodes, inverse = np.unique(ends, return_inverse=True)
        lengths = np.zeros(len(nodes), np.int64)
        lengths[inverse] = np.r_[frame["length_a"].to_numpy(np.int64), frame["length_b"].to_numpy(np.int64)]
        ia, ib = inverse[: len(frame)], inverse[len(frame):]
        rep = stars(len(nodes), ia, ib, frame["similarity"].to_numpy(np.float32),
                    preference_rank(nodes, lengths, keep))
        return pd.DataFrame({"_first": nodes, "_rep_first": nodes[rep]})

    light = vectors.select("_first", "_longest", "_longest_length")
    length_of = {end: light.select(F.col("_first").alias(end), F.col("_longest_length").alias(f"length_{end}"))
                 for end in ("a", "b")}
    edges = (pairs.join(roots.withColumnRenamed("node", "a"), "a")
             .join(length_of["a"], "a").join(length_of["b"], "b"))
    assigned = edges.groupBy("root").applyInPandas(assign, "_first long, _rep_first long")
    members = light.join(assigned, "_first", "left").withColumn("_rep_first", F.coalesce("_rep_first", "_first"))
    if keep == "first":
        return members.select("_first", "_rep_first", F.col("_rep_first").alias("representative"))
    chosen = light.select(F.col("_first").alias("_rep_first"), F.col("_longest").alias("representative"))
    return members.select("_first", "_rep_first").join(chosen, "_rep_first")


def against_references(table, references, model_path, dim: int, key: ExactKey, threshold: float,
                       config: DedupConfig):
    """The mapping of an ``--against`` run: every record of ``table`` (``distinct_texts``) kept, or removed for
    its nearest reference record (distinct texts of ``references``, gathered and broadcast) at cosine >=
    ``threshold``, as ``swembed.dedup.job.against_references`` decides it."""
    from pyspark.sql import functions as F

    spark = table.sparkSession
    refs = distinct_texts(references, model_path, spark, key, len(config.text_columns) > 1)
    refs = refs.filter(F.col("_vector").isNotNull())
    rows = refs.select("_first", "_hash", "_vector").orderBy("_first").collect()  # the reference set fits
    ref_first = np.array([r["_first"] for r in rows], np.int64)
    ref_hash = {int(r["_hash"]): i for i, r in enumerate(rows)}
    ref_vectors = (vectors_from_bytes([r["_vector"] for r in rows], dim) if rows
                   else np.zeros((0, dim), np.float32))
    shared = spark.sparkContext.broadcast((ref_vectors, ref_first, ref_hash))
    method, nprobe = config.method, config.nprobe

    def nearest(frames):
        import pandas as pd

        vectors, firsts, hashes = shared.value
        for frame in frames:
            best, sims = nearest_in(vectors_from_bytes(frame["_vector"].tolist(), dim), vectors, method, nprobe)
            for row, digest in enumerate(frame["_hash"].tolist()):
                if digest in hashes:
                    best[row], sims[row] = hashes[digest], 1.0
            gone = sims >= threshold
            yield pd.DataFrame({"_first": frame["_first"], "_gone": gone,
                                "_reference": firsts[np.maximum(best, 0)] if len(firsts) else best,
                                "_sim": np.minimum(sims, 1.0).astype(np.float32)})

    firsts = table.filter(F.col("_vector").isNotNull()).select("_first", "_hash", "_vector")
    matched = firsts.mapInPandas(nearest, "_first long, _gone boolean, _reference long, _sim float")
    return table.select("_id", "_first").join(matched, "_first").select(
        "_id", F.when(F.col("_gone"), F.col("_reference")).otherwise(F.col("_id")).alias("representative"),
        F.when(F.col("_gone"), F.col("_sim")).otherwise(F.lit(1.0)).cast("float").alias("similarity"),
        F.when(F.col("_gone"), REASONS[3]).otherwise(REASONS[0]).alias("reason"))


def run(texts, model_path, config: DedupConfig | None = None, search: CellSearch | None = None,
        references=None) -> SparkDedup:
    """Dedup ``texts`` (columns _id: unique integer, ordering the records; _text: string); with ``references``
    (the same columns, ids past the texts') remove only what is near a reference."""
    from pyspark.sql import functions as F

    from swembed.runtime.embedder import load

    config, search = config or DedupConfig(), search or CellSearch()
    config.validate()
    search.validate()
    threshold = threshold_of(config)
    spark = texts.sparkSession
    model = load(model_path)
    dim, key = model.dim, ExactKey.of_model(model)
    table = distinct_texts(texts, model_path, spark, key, len(config.text_columns) > 1)
    if references is not None:
        mapping = against_references(table, references, model_path, dim, key, threshold, config)
        pairs = spark.createDataFrame([], "a long, b long, similarity float")
        n_distinct = table.filter(F.col("_vector").isNotNull()).count()
        return SparkDedup(mapping, pairs, {"distinct_texts": n_distinct, "threshold": threshold})
    vectors = table.filter(F.col("_vector").isNotNull()).select(
        "_first", "_longest", "_longest_length", "_vector")
    n_distinct = vectors.count()
    pairs, links, stats = candidate_pairs(vectors.select(F.col("_first").alias("_id"), "_vector"), n_distinct,
                                          dim, threshold, config, search)
    roots, rounds = connected_roots(links)
    chosen = (representatives(vectors, roots, config.keep) if clustering(config.clusters).transitive
              else star_representatives(vectors, pairs, roots, config.keep))
    scored = cosine_to_representative(chosen, vectors, dim)
    distinct_map = chosen.join(scored, "_first", "left").fillna(1.0, ["similarity"])
    reason = (F.when(F.col("_id") == F.col("representative"), REASONS[0])
              .when(F.col("_first") == F.col("_rep_first"), REASONS[1]).otherwise(REASONS[2]))
    mapping = table.select("_id", "_first").join(distinct_map, "_first").select(
        "_id", "representative", "similarity", reason.alias("reason"))
    stats = {"distinct_texts": n_distinct, "threshold": threshold, "component_rounds": rounds, **stats}
    return SparkDedup(mapping, pairs, stats)


def dedup(df, model_path, id_col: str, text_col: str = "text", config: DedupConfig | None = None,
          search: CellSearch | None = None):
    """Every row of ``df`` with ``representative`` (the kept row's id), ``similarity`` and ``reason``
    (kept / exact / near), as ``swembed dedup`` defines them; ``id_col`` orders the rows ("first" = smallest id)."""
    from pyspark.sql import functions as F

    require_columns(df, id_col, text_col)
    check_ids(df, id_col)
    texts = df.select(F.col(id_col).alias("_id"), F.col(text_col).cast("string").alias("_text"))
    mapping = run(texts, model_path, config, search).mapping.withColumnRenamed("_id", id_col)
    return df.join(mapping, id_col)
