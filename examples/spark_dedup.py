"""Near-duplicate mining on Spark with a swembed table.

    pip install -e ".[spark,dedup]"
    python examples/spark_dedup.py posts.parquet --model models/minilm-256 --out dedup.parquet [--master local[*]]

The input needs a text column and a unique, ordered id column (ids decide which record is "first");
without one, an id is made from the file order with zipWithIndex.
"""
import argparse
import os
import sys

from pyspark.sql import SparkSession

from swembed.dedup import DedupConfig
from swembed.dedup.spark import dedup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help=".parquet, .jsonl or .txt")
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--text-column", default="text")
    parser.add_argument("--id-column")
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.master(args.master).appName("swembed-dedup").getOrCreate()
    reader = {"parquet": spark.read.parquet, "jsonl": spark.read.json, "txt": spark.read.text}
    df = reader[args.input.rsplit(".", 1)[-1]](args.input)
    if args.input.endswith(".txt"):
        df = df.withColumnRenamed("value", args.text_column)
    id_column = args.id_column
    if id_column is None:
        id_column = "_line"
        df = df.rdd.zipWithIndex().map(lambda pair: (*pair[0], pair[1])).toDF([*df.columns, id_column])
    result = dedup(df, args.model, id_column, args.text_column, DedupConfig(threshold=args.threshold))
    result.write.mode("overwrite").parquet(args.out)
    counts = {row["reason"]: row["count"] for row in result.groupBy("reason").count().collect()}
    print(f"{sum(counts.values()):,} records: {counts} -> {args.out}")
    spark.stop()


if __name__ == "__main__":
    main()
