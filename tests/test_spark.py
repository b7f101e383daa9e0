"""swembed.dedup.spark on a local[2] session: the clusters and mapping of `swembed dedup` and of a
brute-force reference, every record of .txt/.jsonl/.parquet inputs mapped, bad input reported in one line."""
import glob
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import swembed
from swembed.cli import main
from swembed.dedup import DedupConfig, dedup
from swembed.runtime.folder import write_model_folder
from swembed.runtime.outputs import check_writable

pytest.importorskip("faiss")
pyspark = pytest.importorskip("pyspark", reason="pyspark not installed (the spark extra)")
pytestmark = pytest.mark.spark
from conftest import snapshot  # noqa: E402
from test_dedup import WORDS, read_mapping, reference_clusters, reference_stars, stored  # noqa: E402

from swembed.dedup.spark.search import blocks_per_cell, task_keys  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    if shutil.which("java") is None:
        pytest.skip("Spark's local mode needs Java: no `java` on PATH")
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers run this environment's Python, with swembed
    try:  # tuned for seconds of tiny jobs: a shuffle partition per core; the JVM compiles with C1 only (its C2
        # compiler threads would take half the CPU of these tests) and collects garbage on one thread
        session = (SparkSession.builder.master("local[2]").appName("swembed-test")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.shuffle.partitions", "2").config("spark.sql.adaptive.enabled", "false")
                   .config("spark.sql.codegen.wholeStage", "false")
                   .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
                   .getOrCreate())
    except Exception as exc:  # noqa: BLE001 - the engine cannot start here: say why and skip
        version = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[:1]
        pytest.skip(f"Spark local session could not start ({type(exc).__name__}: {exc}); java: {version}")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    table = np.random.default_rng(0).normal(size=(len(WORDS), 32)).astype(np.float32)
    return write_model_folder(tmp_path_factory.mktemp("spark") / "model", table, WORDS, {"tokenization": {}}, None)


def test_split_cells_put_every_pair_in_a_task_of_bounded_size():
    assert blocks_per_cell(np.array([10.0, 100.0, 100.5, 1000.0]), 100).tolist() == [1, 1, 3, 20]
    rng = np.random.default_rng(0)
    ids, cells = rng.choice(10**12, size=600, replace=False), rng.integers(0, 5, 600)
    blocks = np.array([1, 3, 4, 1, 7])
    row, cell, low, high = task_keys(ids, cells, blocks)
    members: dict[tuple, set] = {}
    for r, task in zip(row.tolist(), zip(cell.tolist(), low.tolist(), high.tolist())):
        members.setdefault(task, set()).add(r)
    for c in range(5):
        rows = np.flatnonzero(cells == c)
        tasks = [m for (t, _, _), m in members.items() if t == c]
        assert len(tasks) == (1 if blocks[c] == 1 else blocks[c] * (blocks[c] - 1) // 2)
        for i in rows.tolist():  # every pair of the cell meets in a task
            together = set().union(*(m for m in tasks if i in m))
            assert together >= set(rows.tolist())
        if blocks[c] > 1:  # a task holds two of the cell's blocks, about 2 / blocks of it
            assert max(len(m) for m in tasks) < 2.6 * len(rows) / blocks[c]


def _texts(seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(3, 8))) for _ in range(150)]
    return texts + [t + " today" for t in texts[:40]] + [t.upper() for t in texts[:30]] + ["", "", "hund katze"]


def test_spark_dedup_equals_single_machine_and_brute_force(spark, model, tmp_path):
    from swembed.dedup.spark import CellSearch, encode
    from swembed.dedup.spark import dedup as spark_dedup

    texts = _texts(3)
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    df = spark.createDataFrame(list(enumerate(texts)), "id long, text string").repartition(3)
    # two cells, each searched for every text and split into three blocks: every pair meets in a task, so the
    # clusters are those of exact search with unbounded k (swembed dedup --search exact --k 400), and of brute force
    search = CellSearch(cells=2, cells_per_text=2, max_task_rows=130, max_sample=40)  # cells from 40 of ~190
    assert CellSearch().sample_size(10**9) == 65_536
    mappings = {}
    for clusters, keep in (("star", "longest"), ("components", "longest")):  # keep first: the test below
        config = DedupConfig(threshold=0.8, keep=keep, k=400, method="exact", progress=False, clusters=clusters)
        summary = dedup([tmp_path / "in.txt"], model, tmp_path / f"{clusters}-{keep}", config)
        local = mappings[clusters, keep] = read_mapping(tmp_path / f"{clusters}-{keep}")
        assert blocks_per_cell(np.array([summary["distinct_texts"]]), 130)[0] == 3  # each cell holds them all: split
        assert search.sample_size(summary["distinct_texts"]) == 40
        rows = sorted(spark_dedup(df, model, "id", config=config, search=search).collect(), key=lambda r: r["id"])
        assert [(r["id"], r["text"]) for r in rows] == list(enumerate(texts))
        assert [(r["representative"], r["reason"]) for r in rows] == [(int(m["representative"]), m["reason"])
                                                                      for m in local]
        np.testing.assert_allclose([r["similarity"] for r in rows], [float(m["similarity"]) for m in local],
                                   atol=1e-4)
        assert {m["reason"] for m in local} == {"kept", "exact", "near"}
        distinct = [i for i, m in enumerate(local) if m["reason"] != "exact"]
        vectors = stored(swembed.load(model).encode([texts[i] for i in distinct]))
        if clusters == "star":  # the brute-force stars, and no removed record below the threshold to its keeper
            reference = reference_stars(vectors, 0.8, [len(texts[i]) for i in distinct] if keep == "longest" else None)
            assert [int(local[i]["representative"]) for i in distinct] == [
                int(local[distinct[r]]["representative"]) for r in reference]
            assert min(r["similarity"] for r in rows if r["reason"] == "near") >= 0.8
            continue
        roots = reference_clusters(vectors, 0.8)
        groups = {}
        for i, root in zip(distinct, roots):
            groups.setdefault(rows[i]["representative"], set()).add(distinct[root])
        assert all(len(members) == 1 for members in groups.values())  # one brute-force component per cluster
        assert len(groups) == len(set(roots))
    with pytest.raises(ValueError, match="id column 'id' is not unique: 7 occurs 2 times"):
        spark_dedup(df.union(df.filter("id = 7")), model, "id", config=config)
    vectors = encode(spark.createDataFrame([(0, "the cat sat")], "id long, text string"), model).collect()
    np.testing.assert_allclose(vectors[0]["embedding"], swembed.load(model).encode("the cat sat")[0], rtol=1e-6)


def test_engine_spark_writes_what_swembed_dedup_writes(spark, model, tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    texts = _texts(5)
    lines = [t.encode() for t in texts[:120]] + [b"\xff\xfe not utf-8 \xc3", b"", b"the cat sat\r", b"",
                                                 b"The  CAT sat", b"tab\there \xe6\x97\xa5"]
    (tmp_path / "a.txt").write_bytes(b"\n".join(lines) + b"\n")
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"n": i, "body": t}) + "\n" for i, t in
                                              enumerate(texts[100:180])), encoding="utf-8")
    records = [{"n": i, "body": t if i % 9 else None} for i, t in enumerate(texts[150:])]
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "c.parquet", row_group_size=16)
    inputs = [str(tmp_path / name) for name in ("a.txt", "b.jsonl", "c.parquet")]
    common = ["--model", str(model), "--threshold", "0.8", "--text-column", "body", "--quiet", "--errors", "replace"]
    assert main(["dedup", *inputs, *common, "--out", str(tmp_path / "local")]) == 0
    # --overwrite replaces a folder swembed wrote (a copy of swembed dedup's), as with swembed dedup
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    assert main(["dedup", *inputs, *common, "--out", str(tmp_path / "spark"), "--engine", "spark", "--overwrite"]) == 0
    assert not (tmp_path / "spark" / "mapping.tsv").exists()
    summaries = [json.loads((tmp_path / run / "summary.json").read_text()) for run in ("local", "spark")]
    assert summaries[0]["undecodable_lines"] == summaries[1]["undecodable_lines"] == {inputs[0]: 1}
    local = read_mapping(tmp_path / "local")
    mapped = pq.read_table(tmp_path / "spark" / "mapping").to_pylist()
    assert [(r["record"], r["file"], r["position"], r["representative"], r["reason"]) for r in mapped] == [
        (int(m["record"]), m["file"], int(m["position"]), int(m["representative"]), m["reason"]) for m in local]
    np.testing.assert_allclose([r["similarity"] for r in mapped], [float(m["similarity"]) for m in local], atol=1e-4)
    for name in ("a.txt", "b.jsonl"):
        parts = sorted(glob.glob(str(tmp_path / "spark" / "kept" / name / "part-*")))
        assert b"".join(open(p, "rb").read() for p in parts) == (tmp_path / "local" / "kept" / name).read_bytes()
    assert pq.read_table(tmp_path / "spark" / "kept" / "c.parquet").equals(
        pq.read_table(tmp_path / "local" / "kept" / "c.parquet"))
    summaries = [json.loads((tmp_path / out / "summary.json").read_text()) for out in ("local", "spark")]
    for key in ("records", "kept", "exact_duplicates", "near_duplicates", "distinct_texts"):
        assert summaries[0][key] == summaries[1][key]
    assert {m["reason"] for m in local} == {"kept", "exact", "near"}
    capsys.readouterr()
    # bad input: one line naming the problem, nothing written
    (tmp_path / "bad.jsonl").write_text('{"body": "fine"}\nnot json\n', encoding="utf-8")
    cases = [([*inputs, *common, "--out", str(tmp_path / "spark")],
              f"{tmp_path / 'spark'} already exists; pass --overwrite to replace it"),
             ([str(tmp_path / "bad.jsonl"), *common, "--out", str(tmp_path / "bad")], "bad.jsonl:2: not a JSON object"),
             ([*inputs, *common, "--target-size", "5", "--out", str(tmp_path / "bad")], "--target-size"),
             ([*inputs, *common, "--model", str(tmp_path / "nowhere"), "--out", str(tmp_path / "bad")],
              f"model folder not found: {tmp_path / 'nowhere'}")]
    before = snapshot(tmp_path / "spark")
    for arguments, message in cases:
        assert main(["dedup", *arguments, "--engine", "spark"]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "bad").exists()
    assert snapshot(tmp_path / "spark") == before and not list(tmp_path.glob(".spark*"))
    # and --overwrite would replace what the Spark engine wrote: its marker lists every file of it
    check_writable(tmp_path / "spark", True, [*inputs, str(model)])


def test_engine_spark_against_references_gives_the_same_mapping(spark, tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from lab.dedup_bench import planted_leak

    model, train, test, planted = planted_leak(tmp_path, others=600, copies=40)
    lines = train.read_text(encoding="utf-8").splitlines()
    half = len(lines) // 2  # the training set as a .txt with CRLF endings and a two-column parquet
    (tmp_path / "a.txt").write_bytes(b"".join(line.encode() + b"\r\n" for line in lines[:half]))
    words = [line.split(" ") for line in lines[half:]]
    pq.write_table(pa.Table.from_pylist([{"n": i, "head": " ".join(w[:8]), "tail": " ".join(w[8:])}
                                         for i, w in enumerate(words)]), tmp_path / "b.parquet", row_group_size=64)
    inputs = [str(tmp_path / "a.txt"), str(tmp_path / "b.parquet")]
    common = ["--model", str(model), "--threshold", "0.85", "--against", str(test), "--text-column", "head",
              "--text-column", "tail", "--quiet"]
    assert main(["dedup", *inputs, *common, "--out", str(tmp_path / "local")]) == 0
    assert main(["dedup", *inputs, *common, "--out", str(tmp_path / "spark"), "--engine", "spark"]) == 0
    local = read_mapping(tmp_path / "local")
    mapped = pq.read_table(tmp_path / "spark" / "mapping").to_pylist()
    assert [(r["record"], r["file"], r["position"], r["representative"], r["reason"]) for r in mapped] == [
        (int(m["record"]), m["file"], int(m["position"]), int(m["representative"]), m["reason"]) for m in local]
    np.testing.assert_allclose([r["similarity"] for r in mapped], [float(m["similarity"]) for m in local], atol=1e-4)
    removed = {i for i, m in enumerate(local) if m["reason"] == "reference"}
    assert len(removed & planted) >= 0.98 * len(planted) and len(removed - planted) <= 1
    parts = sorted(glob.glob(str(tmp_path / "spark" / "kept" / "a.txt" / "part-*")))
    kept = b"".join(open(p, "rb").read() for p in parts)
    assert kept == (tmp_path / "local" / "kept" / "a.txt").read_bytes() and kept.count(b"\r\n") == kept.count(b"\n")
    summaries = [json.loads((tmp_path / out / "summary.json").read_text()) for out in ("local", "spark")]
    for key in ("records", "kept", "reference_duplicates", "references", "guarantee"):
        assert summaries[0][key] == summaries[1][key], key


def test_spark_refuses_what_one_machine_refuses(spark, tiny_model, tmp_path, capsys):
    """A probe's cases: a too-deep JSON line and a Latin-1 file get swembed dedup's one line; two text columns stay
    two texts ("what is" + "love" is not "what" + "is love")."""
    import pyarrow.parquet as pq

    (tmp_path / "deep.jsonl").write_text('{"text": "b", "x": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    (tmp_path / "names.txt").write_bytes("Herr Müller\nHerr Möller\n".encode("latin-1"))
    common = ["--model", str(tiny_model), "--quiet", "--engine", "spark"]
    for name, message in [("deep.jsonl", "deep.jsonl:1: not a JSON object swembed can read (nested too deeply)"),
                          ("names.txt", "names.txt:1: not valid UTF-8 (invalid start byte at byte 6)")]:
        capsys.readouterr()
        assert main(["dedup", str(tmp_path / name), *common, "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err, err
        assert not (tmp_path / "out").exists()
    records = [{"q": "what is", "a": "love"}, {"q": "what", "a": "is love"}]
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["dedup", str(tmp_path / "qa.jsonl"), *common, "--out", str(tmp_path / "qa"), "--text-column", "q",
                 "--text-column", "a", "--threshold", "1"]) == 0
    assert pq.read_table(tmp_path / "qa" / "mapping").column("reason").to_pylist() == ["kept", "kept"]


def test_a_local_master_shuffles_into_one_partition_per_thread_and_a_cluster_keeps_its_own():
    from swembed.dedup.spark.files import local_shuffle_partitions

    assert [local_shuffle_partitions(m) for m in ("local", "local[1]", "local[3]", "local[2,4]", " local[*] ")] == [
        1, 1, 3, 2, os.cpu_count()]
    assert [local_shuffle_partitions(m) for m in ("spark://head:7077", "yarn", "local-cluster[2,1,1024]")] == [None] * 3
