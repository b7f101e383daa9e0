"""Encode and deduplicate Spark DataFrames with a swembed table; ``swembed dedup --engine spark`` runs on it.

Everything that grows with the collection runs on the executors: hashing, encoding, the near-duplicate
search (cells of a coarse quantiser, ``search``), connected components (``components``) and the mapping
(``job``); the driver holds a bounded k-means sample and a few counts. Same keys, clusters rule,
representatives and mapping schema as ``swembed dedup``.

    from swembed.dedup.spark import encode, dedup
    spark = SparkSession.builder.master("local[*]").getOrCreate()
    df = spark.read.parquet("posts/")                      # needs a text column and a unique integer id
    encode(df, "models/minilm-256", text_col="text").write.parquet("vectors/")
    dedup(df, "models/minilm-256", id_col="id", config=DedupConfig(threshold=0.9)).write.parquet("dedup/")
"""
from swembed.dedup.spark.job import dedup
from swembed.dedup.spark.model import encode
from swembed.dedup.spark.search import CellSearch

__all__ = ["CellSearch", "dedup", "encode"]
