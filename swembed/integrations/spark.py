"""Encode and deduplicate Spark DataFrames with a swembed table (PySpark ``mapInPandas``, table broadcast).

The work that grows with the collection (reading, normalising, hashing, encoding, joining) runs on
the executors; near-duplicate search runs on the driver over the distinct texts' vectors with the same
code as ``swembed dedup`` (``swembed.dedup.job.cluster_distinct``), so both give the same clusters on the same
data. The driver must hold the distinct texts' float16 vectors (512 bytes each at d=256).

    from swembed.integrations.spark import encode, dedup
    spark = SparkSession.builder.master("local[*]").getOrCreate()
    df = spark.read.parquet("posts/")                      # needs a text column and a unique, ordered id
    encode(df, "models/minilm-256", text_col="text").write.parquet("vectors/")
    dedup(df, "models/minilm-256", id_col="id", threshold=0.9).write.parquet("dedup/")
"""
from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import numpy as np

from swembed.dedup.clusters import text_hashes
from swembed.dedup.job import DedupConfig, cluster_distinct

_MODELS: dict[str, object] = {}  # per Python worker: content digest -> loaded model


def broadcast_model(spark, model_path: str | Path) -> tuple[object, str]:
    """Broadcast a model folder's files (the table included) to the executors; returns it and its digest."""
    folder = Path(model_path)
    files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
    if "config.json" not in files:
        raise FileNotFoundError(f"{folder} is not a swembed model folder (no config.json)")
    digest = hashlib.sha256()
    for name, data in files.items():
        digest.update(name.encode() + hashlib.sha256(data).digest())
    return spark.sparkContext.broadcast(files), digest.hexdigest()


def _model(broadcast, digest: str):
    """The broadcast model, written to a local folder and loaded once per Python worker."""
    model = _MODELS.get(digest)
    if model is None:
        from swembed import load

        folder = Path(tempfile.mkdtemp(prefix="swembed-model-"))
        for name, data in broadcast.value.items():
            (folder / name).write_bytes(data)
        model = _MODELS[digest] = load(folder)
    return model


def encode(df, model_path: str | Path, text_col: str = "text", out_col: str = "embedding"):
    """``df`` with an ``out_col`` array<float> column of L2-normalised sentence vectors."""
    from pyspark.sql.types import ArrayType, FloatType, StructField, StructType

    _require(df, text_col)
    broadcast, digest = broadcast_model(df.sparkSession, model_path)
    schema = StructType([*df.schema.fields, StructField(out_col, ArrayType(FloatType()))])

    def add_vectors(frames):
        model = _model(broadcast, digest)
        for frame in frames:
            vectors = model.encode(frame[text_col].fillna("").astype(str).tolist())
            yield frame.assign(**{out_col: list(vectors)})

    return df.mapInPandas(add_vectors, schema)


def _require(df, *columns: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"DataFrame has no column {missing[0]!r}; columns are {df.columns}")


def dedup(df, model_path: str | Path, id_col: str, text_col: str = "text", config: DedupConfig | None = None):
    """Every row of ``df`` with ``representative`` (the kept row's id), ``similarity`` and ``reason``
    (kept / exact / near), as ``swembed dedup`` defines them; ``id_col`` orders the rows ("first" = smallest id)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    config = config or DedupConfig()
    config.validate()
    _require(df, id_col, text_col)
    spark = df.sparkSession
    keyed_schema = StructType([StructField("_id", LongType()), StructField("_hash", LongType()),
                               StructField("_length", LongType())])

    def add_keys(frames):
        for frame in frames:
            texts = frame[text_col].fillna("").astype(str).tolist()
            yield frame[[id_col]].rename(columns={id_col: "_id"}).assign(
                _hash=text_hashes(texts).view(np.int64), _length=[len(t) for t in texts])

    keys = df.select(id_col, text_col).mapInPandas(add_keys, keyed_schema)
    group = Window.partitionBy("_hash")
    longest = Window.partitionBy("_hash").orderBy(F.col("_length").desc(), F.col("_id"))
    keys = (keys.withColumn("_first", F.min("_id").over(group))
            .withColumn("_rank", F.row_number().over(longest)).cache())
    distinct = (keys.filter(F.col("_id") == F.col("_first")).select("_first")
                .join(keys.filter(F.col("_rank") == 1).select("_first", F.col("_id").alias("_longest"),
                                                               F.col("_length").alias("_longest_length")), "_first"))
    texts = df.select(F.col(id_col).alias("_first"), text_col).join(distinct, "_first")
    encoded = encode(texts, model_path, text_col, "_vector").select(
        "_first", "_longest", "_longest_length", "_vector").orderBy("_first")
    firsts, longests, lengths, vectors = [], [], [], []
    for row in encoded.toLocalIterator():
        firsts.append(row["_first"])
        longests.append(row["_longest"])
        lengths.append(row["_longest_length"])
        vectors.append(np.asarray(row["_vector"], dtype=np.float16))
    n_records = keys.count()
    dim = len(vectors[0]) if vectors else 0
    result = cluster_distinct(np.vstack(vectors) if vectors else np.zeros((0, dim), np.float16),
                              np.asarray(lengths, np.int64), n_records, config)
    chosen = np.asarray(firsts if config.keep == "first" else longests, dtype=np.int64)
    reps = spark.createDataFrame(
        [(int(f), int(chosen[r]), int(firsts[r]), float(s))
         for f, r, s in zip(firsts, result["rep_unique"].tolist(), result["similarity"].tolist())],
        "_first long, representative long, _rep_first long, similarity double")
    mapped = keys.select("_id", "_first").join(reps, "_first")
    reason = (F.when(F.col("_id") == F.col("representative"), "kept")
              .when(F.col("_first") == F.col("_rep_first"), "exact").otherwise("near"))
    mapped = mapped.select(F.col("_id").alias(id_col), "representative", "similarity", reason.alias("reason"))
    return df.join(mapped, id_col)
