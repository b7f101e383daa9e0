"""swembed.integrations.spark on a local[2] session gives the same clusters as `swembed dedup` on the same data."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from swembed.dedup import DedupConfig, dedup

pytest.importorskip("faiss")
pyspark = pytest.importorskip("pyspark", reason="pyspark not installed (the spark extra)")


@pytest.fixture(scope="module")
def spark():
    if shutil.which("java") is None:
        pytest.skip("Spark's local mode needs Java: no `java` on PATH")
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers run this environment's Python, with swembed
    try:
        session = (SparkSession.builder.master("local[2]").appName("swembed-test")
                   .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4").getOrCreate())
    except Exception as exc:  # noqa: BLE001 - the engine cannot start here: say why and skip
        version = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[:1]
        pytest.skip(f"Spark local session could not start ({type(exc).__name__}: {exc}); java: {version}")
    yield session
    session.stop()


def test_spark_dedup_equals_single_machine(spark, tmp_path):
    from test_dedup import WORDS, read_mapping

    from swembed.integrations.spark import dedup as spark_dedup
    from swembed.integrations.spark import encode
    from swembed.runtime.folder import write_model_folder

    table = np.random.default_rng(0).normal(size=(len(WORDS), 32)).astype(np.float32)
    model = write_model_folder(tmp_path / "model", table, WORDS, {"tokenization": {}}, None)
    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(3, 8))) for _ in range(150)]
    texts += [t + " today" for t in texts[:40]] + [t.upper() for t in texts[:30]] + ["", "", "hund katze"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    for keep in ("first", "longest"):
        config = DedupConfig(threshold=0.8, keep=keep, progress=False)
        dedup([tmp_path / "in.txt"], model, tmp_path / f"out-{keep}", config)
        local = read_mapping(tmp_path / f"out-{keep}")
        df = spark.createDataFrame(list(enumerate(texts)), "id long, text string").repartition(3)
        rows = sorted(spark_dedup(df, model, "id", config=config).collect(), key=lambda r: r["id"])
        assert [r["id"] for r in rows] == list(range(len(texts)))
        assert [(r["representative"], r["reason"]) for r in rows] == [
            (int(m["representative"]), m["reason"]) for m in local]
        np.testing.assert_allclose([r["similarity"] for r in rows], [float(m["similarity"]) for m in local],
                                   atol=1e-4)
        assert sum(m["reason"] != "kept" for m in local) > 30  # the data has both kinds of duplicates
    vectors = encode(spark.createDataFrame([(0, "the cat sat")], "id long, text string"), model).collect()
    np.testing.assert_allclose(vectors[0]["embedding"], __import__("swembed").load(model).encode("the cat sat")[0],
                               rtol=1e-6)
