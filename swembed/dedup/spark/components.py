"""Connected components of a pair graph on Spark: min-label propagation with pointer jumping.

Every node starts with the smallest id among itself and its neighbours. Each round a node takes the smallest
label among its neighbours' labels, then its label's label (pointer jumping, which shortens long chains).
Labels only fall and always name a node of the same component, so when a round changes nothing each node is
labelled with its component's smallest id: the root ``swembed.dedup.clusters.connected_roots`` gives. Each round
is checkpointed, so plans and lineage stay short; the driver only counts the labels that changed.
"""
from __future__ import annotations

MAX_ROUNDS = 200


def connected_roots(pairs, a: str = "a", b: str = "b") -> tuple[object, int]:
    """(node, root) for every node of the undirected graph ``pairs`` (a, b): root is the smallest node of
    its component. Nodes without an edge are absent. Returns the frame and the rounds it took."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    edges = pairs.select(F.col(a).alias("src"), F.col(b).alias("dst")).union(
        pairs.select(F.col(b).alias("src"), F.col(a).alias("dst"))).persist(StorageLevel.DISK_ONLY)
    labels = edges.groupBy("src").agg(F.least(F.col("src"), F.min("dst")).alias("label")).withColumnRenamed(
        "src", "node")
    for rounds in range(1, MAX_ROUNDS + 1):
        neighbours = (edges.join(labels.select(F.col("node").alias("dst"), F.col("label").alias("seen")), "dst")
                      .groupBy("src").agg(F.min("seen").alias("seen")))
        step = (labels.join(neighbours, labels["node"] == neighbours["src"])
                .select("node", F.least("label", "seen").alias("label"), F.col("label").alias("before")))
        parents = step.select(F.col("node").alias("label"), F.col("label").alias("grand"))
        jumped = (step.join(parents, "label", "left")
                  .select("node", F.least("label", F.coalesce("grand", "label")).alias("label"), "before")
                  .localCheckpoint())
        labels = jumped.select("node", "label")
        if jumped.filter(F.col("label") < F.col("before")).isEmpty():
            edges.unpersist()
            return labels.withColumnRenamed("label", "root"), rounds
    raise RuntimeError(f"connected components did not converge in {MAX_ROUNDS} rounds")
