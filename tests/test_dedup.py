"""`swembed dedup`: every record accounted for, clusters equal to a brute-force reference, hostile input."""
import json
from pathlib import Path

import numpy as np
import pytest

import swembed
from swembed.cli import main
from swembed.dedup import DedupConfig, dedup
from swembed.runtime.folder import write_model_folder

pytest.importorskip("faiss")
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "in", "park", "market", "prices", "rose", "fell",
         "today", "sharply", "rain", "will", "fall", "tomorrow", "hund", "katze"]


@pytest.fixture
def model_dir(tmp_path):
    table = np.random.default_rng(0).normal(size=(len(WORDS), 32)).astype(np.float32)
    return write_model_folder(tmp_path / "model", table, WORDS, {"tokenization": {}}, None)


def read_mapping(out: Path) -> list[dict]:
    lines = (out / "mapping.tsv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:]]


def stored(vectors: np.ndarray) -> np.ndarray:
    """Vectors as dedup keeps them (float32, as the table gives them)."""
    return np.asarray(vectors, dtype=np.float32)


def reference_clusters(vectors: np.ndarray, threshold: float) -> list[int]:
    """Smallest member of each connected component of the graph cosine >= threshold (brute force)."""
    n = len(vectors)
    sims = vectors @ vectors.T
    root = list(range(n))
    for i in range(n):
        stack, seen = [i], {i}
        while stack:
            j = stack.pop()
            for m in np.flatnonzero(sims[j] >= threshold):
                if m not in seen and m != j:
                    seen.add(int(m))
                    stack.append(int(m))
        root[i] = min(seen)
    return root


def reference_stars(vectors: np.ndarray, threshold: float, lengths: list[int] | None = None) -> list[int]:
    """Brute force of the default clusters: texts visited first-first (or longest-first); one with no kept
    partner (cosine >= threshold) is kept; every other joins its most similar kept partner (ties: kept first)."""
    n = len(vectors)
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    order = sorted(range(n), key=lambda i: (-lengths[i], i) if lengths else i)
    rank = {node: place for place, node in enumerate(order)}
    kept = set()
    for i in order:
        if not any(j in kept for j in np.flatnonzero(sims[i] >= threshold)):
            kept.add(i)
    return [i if i in kept else max((j for j in kept if sims[i, j] >= threshold), key=lambda j: (sims[i, j], -rank[j]))
            for i in range(n)]


def test_every_line_accounted_for_on_hostile_text(model_dir, tmp_path):
    lines = [b"The cat sat on the mat.", b"the  CAT sat on\tthe mat.", b"", b"A dog ran in the park.",
             b"The cat sat on a mat.", b"\xff\xfe not utf-8 \xc3", b"", b"Der Hund und die Katze.",
             b"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", ("market prices rose " * 60_000).encode(),
             b"Market prices rose sharply today.", b"Rain will fall tomorrow.", b"The cat sat on the mat today."]
    path = tmp_path / "in.txt"
    path.write_bytes(b"\n".join(lines) + b"\n")
    summary = dedup([path], model_dir, tmp_path / "out", DedupConfig(threshold=0.8, progress=False))
    rows = read_mapping(tmp_path / "out")
    assert [int(r["record"]) for r in rows] == list(range(len(lines)))
    assert [int(r["position"]) for r in rows] == list(range(1, len(lines) + 1))
    assert summary["records"] == len(lines) == summary["kept"] + summary["exact_duplicates"] + summary[
        "near_duplicates"]
    kept = [i for i, r in enumerate(rows) if r["reason"] == "kept"]
    assert (tmp_path / "out" / "kept" / "in.txt").read_bytes() == b"".join(lines[i] + b"\n" for i in kept)
    assert rows[1]["reason"] == "exact" and rows[1]["representative"] == "0"  # case and spaces only
    assert rows[6]["reason"] == "exact" and rows[6]["representative"] == "2"  # the second empty line
    for row in rows:  # every representative is a kept record
        assert rows[int(row["representative"])]["reason"] == "kept"
    # near duplicates are exactly those of a brute-force search over the distinct texts
    model = swembed.load(model_dir)
    texts = [line.decode("utf-8", "replace") for line in lines]
    distinct = [i for i, r in enumerate(rows) if r["reason"] != "exact"]
    stars = reference_stars(stored(model.encode([texts[i] for i in distinct])), 0.8)
    assert [int(rows[i]["representative"]) for i in distinct] == [distinct[r] for r in stars]
    assert any(r["reason"] == "near" for r in rows)
    assert all(float(r["similarity"]) >= 0.8 for r in rows if r["reason"] == "near")


@pytest.mark.parametrize("method", ["exact", "ann"])
def test_search_methods_agree_with_brute_force(model_dir, tmp_path, method):
    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(3, 8))) for _ in range(300)]
    texts += [t + " today" for t in texts[:100]]  # near duplicates
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    for clusters, reference in (("star", reference_stars), ("components", reference_clusters)):
        config = DedupConfig(threshold=0.8, method=method, k=400, nprobe=10_000, progress=False,  # ann: all lists
                             clusters=clusters)
        dedup([tmp_path / "in.txt"], model_dir, tmp_path / clusters, config)
        rows = read_mapping(tmp_path / clusters)
        distinct = [i for i, r in enumerate(rows) if r["reason"] != "exact"]
        roots = reference(stored(swembed.load(model_dir).encode([texts[i] for i in distinct])), 0.8)
        assert [int(rows[i]["representative"]) for i in distinct] == [distinct[r] for r in roots]
    assert read_mapping(tmp_path / "star") != read_mapping(tmp_path / "components")  # the data has chains


def test_default_clusters_never_chain(model_dir, tmp_path):
    """a ~ b and b ~ c but a !~ c: components put c under a (cosine below the threshold); stars keep c, and every
    removed record is a near duplicate of its keeper."""
    model = swembed.load(model_dir)
    rng = np.random.default_rng(2)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(3, 8))) for _ in range(400)]
    vectors = stored(model.encode(texts))
    sims = vectors @ vectors.T
    a, b, c = next((a, b, c) for a in range(len(texts)) for b in np.flatnonzero(sims[a] >= 0.8)
                   for c in np.flatnonzero(sims[b] >= 0.8) if a < b < c and sims[a, c] < 0.8)
    (tmp_path / "in.txt").write_text("\n".join([texts[a], texts[b], texts[c]]) + "\n", encoding="utf-8")
    for clusters, reps in (("components", ["0", "0", "0"]), ("star", ["0", "0", "2"])):
        dedup([tmp_path / "in.txt"], model_dir, tmp_path / clusters,
              DedupConfig(threshold=0.8, clusters=clusters, progress=False))
        rows = read_mapping(tmp_path / clusters)
        assert [r["representative"] for r in rows] == reps
    assert float(read_mapping(tmp_path / "components")[2]["similarity"]) < 0.8


@pytest.mark.parametrize("records", [1, 2, 4, 40])
def test_ann_search_on_tiny_inputs(model_dir, tmp_path, records):
    texts = ["the cat sat on the mat", "the cat sat on a mat", "a dog ran in the park", "market prices rose"] * 10
    (tmp_path / "in.txt").write_text("\n".join(f"{t} {i % 7}" for i, t in enumerate(texts[:records])) + "\n")
    exact = dedup([tmp_path / "in.txt"], model_dir, tmp_path / "exact", DedupConfig(method="exact", progress=False))
    ann = dedup([tmp_path / "in.txt"], model_dir, tmp_path / "ann", DedupConfig(method="ann", progress=False))
    assert ann["records"] == records and read_mapping(tmp_path / "ann") == read_mapping(tmp_path / "exact")
    assert exact["kept"] == ann["kept"]


def test_target_size_and_keep_longest(model_dir, tmp_path):
    texts = ["the cat sat", "the cat sat on the mat", "the cat sat on a mat", "a dog ran", "a dog ran in the park",
             "market prices rose", "rain will fall tomorrow", "the dog sat"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    summary = dedup([tmp_path / "in.txt"], model_dir, tmp_path / "out",
                    DedupConfig(target_size=5, keep="longest", threshold=-1.0, progress=False, clusters="components"))
    assert summary["kept"] == 5 and "transitive" in summary["guarantee"]
    rows = read_mapping(tmp_path / "out")
    for row in rows:  # each representative is the longest text of its cluster
        members = [int(r["record"]) for r in rows if r["representative"] == row["representative"]]
        assert len(texts[int(row["representative"])]) == max(len(texts[m]) for m in members)
    assert summary["lowest_similarity_to_keeper"] == pytest.approx(
        min(float(r["similarity"]) for r in rows if r["reason"] == "near"), abs=1e-4)
    for target in (dict(target_size=5), dict(target_fraction=0.5)):  # star: at most the target, never a chain
        star = dedup([tmp_path / "in.txt"], model_dir, tmp_path / "star", DedupConfig(
            **target, keep="longest", threshold=-1.0, progress=False), overwrite=True)
        assert 1 <= star["kept"] <= (5 if "target_size" in target else 4) and star["guarantee"].startswith("star")
        assert all(float(r["similarity"]) >= star["threshold"] - 1e-4
                   for r in read_mapping(tmp_path / "star") if r["reason"] == "near")


def test_jsonl_and_parquet_keep_their_format_and_fields(model_dir, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    records = [{"id": i, "body": t} for i, t in enumerate(["the cat sat", "The cat sat!", "a dog ran", "prices fell"])]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "b.parquet", row_group_size=3)
    summary = dedup([tmp_path / "a.jsonl", tmp_path / "b.parquet"], model_dir, tmp_path / "out",
                    DedupConfig(text_columns=("body",), progress=False))
    assert summary["records"] == 8 and summary["kept"] == 3  # b's rows duplicate a's exactly
    kept_jsonl = [json.loads(line) for line in (tmp_path / "out" / "kept" / "a.jsonl").read_text().splitlines()]
    assert [r["id"] for r in kept_jsonl] == [0, 2, 3]
    assert pq.read_table(tmp_path / "out" / "kept" / "b.parquet").num_rows == 0
    rows = read_mapping(tmp_path / "out")
    assert [(r["position"], r["representative"]) for r in rows[4:]] == [("0", "0"), ("1", "0"), ("2", "2"),
                                                                          ("3", "3")]


def test_bad_inputs_fail_clearly_and_write_nothing(model_dir, tmp_path, capsys):
    (tmp_path / "a.jsonl").write_text('{"text": "fine"}\n{"body": "no text field"}\n', encoding="utf-8")
    (tmp_path / "b.jsonl").write_text('{"text": "fine"}\nnot json\n', encoding="utf-8")
    (tmp_path / "c.csv").write_text("text\nx\n", encoding="utf-8")
    (tmp_path / "fine.txt").write_text("the cat\n", encoding="utf-8")
    good = str(tmp_path / "fine.txt")
    cases = [([str(tmp_path / "missing.txt")], "input not found"), ([str(tmp_path / "a.jsonl")], "a.jsonl:2: no 'text'"),
             ([str(tmp_path / "b.jsonl")], "b.jsonl:2: not a JSON object"), ([str(tmp_path / "c.csv")], "unknown input"),
             ([good, "--threshold", "1.5"], "--threshold must be between -1 and 1 (leave it out for 0.9, or 0.5 with "
                                             "a target), got 1.5"),
             ([good, "--target-fraction", "0"], "--target-fraction must be above 0 and at most 1 (leave it out for no "
                                                 "target), got 0.0")]
    for inputs, message in cases:
        assert main(["dedup", *inputs, "--model", str(model_dir), "--out", str(tmp_path / "out"), "--quiet"]) == 2
        assert message in capsys.readouterr().err
        assert not (tmp_path / "out").exists()
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "d.parquet")
    assert main(["dedup", str(tmp_path / "d.parquet"), "--model", str(model_dir), "--out", str(tmp_path / "out")]) == 2
    assert "no column 'text'" in capsys.readouterr().err


def random_model(folder: Path, words: list[str], dim: int = 64, seed: int = 0, lowercase: bool = True,
                 table: np.ndarray | None = None) -> Path:
    if table is None:
        table = np.random.default_rng(seed).normal(size=(len(words), dim)).astype(np.float32)
    return write_model_folder(folder, table, words, {"tokenization": {"lowercase": lowercase}}, None)


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_threshold_is_applied_in_float32(tmp_path):
    """Two texts at cosine 0.89995 (float32) that float16 storage would put at >= 0.9: not removed at 0.9."""
    rng = np.random.default_rng(0)
    for _ in range(1000):
        u, w = rng.normal(size=(2, 48))
        u /= np.linalg.norm(u)
        w -= (w @ u) * u
        w /= np.linalg.norm(w)
        b = 0.89995 * u + np.sqrt(1 - 0.89995**2) * w
        half = np.array([u, b]).astype(np.float16).astype(np.float64)
        half /= np.linalg.norm(half, axis=1, keepdims=True)
        if half[0] @ half[1] >= 0.9:  # float16 would call them duplicates
            break
    model = random_model(tmp_path / "model", ["alpha", "beta"], table=np.array([u, b], np.float32))
    vectors = swembed.load(model).encode(["alpha", "beta"])
    assert float(vectors[0] @ vectors[1]) == pytest.approx(0.89995, abs=2e-6) and half[0] @ half[1] >= 0.9
    (tmp_path / "in.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    kept = dedup([tmp_path / "in.txt"], model, tmp_path / "out", DedupConfig(threshold=0.9, progress=False))
    assert kept["kept"] == 2
    cut = dedup([tmp_path / "in.txt"], model, tmp_path / "cut", DedupConfig(threshold=0.8999, progress=False))
    assert cut["kept"] == 1


@pytest.mark.parametrize("lowercase", [False, True])
def test_exact_duplicates_follow_the_tables_case(tmp_path, lowercase):
    words = ["US", "us", "the", "news"] if not lowercase else ["us", "the", "news"]
    model = random_model(tmp_path / "model", words, lowercase=lowercase)
    (tmp_path / "in.txt").write_text("the US news\nthe us news\nthe  US news\n", encoding="utf-8")
    dedup([tmp_path / "in.txt"], model, tmp_path / "out", DedupConfig(threshold=0.999, progress=False))
    rows = read_mapping(tmp_path / "out")
    if lowercase:  # the table reads all three alike
        assert [(r["representative"], r["reason"]) for r in rows] == [("0", "kept"), ("0", "exact"), ("0", "exact")]
    else:  # "US" and "us" are different words to a case-sensitive table
        assert [(r["representative"], r["reason"]) for r in rows] == [("0", "kept"), ("1", "kept"), ("0", "exact")]


def test_file_names_line_endings_folders_and_binary_files(model_dir, tmp_path, capsys):
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"the cat sat\r\nthe cat sat\r\na dog ran\r\nno final newline")
    dedup([crlf], model_dir, tmp_path / "out", DedupConfig(progress=False))
    assert (tmp_path / "out" / "kept" / "crlf.txt").read_bytes() == b"the cat sat\r\na dog ran\r\nno final newline"
    binary = tmp_path / "image.txt"
    binary.write_bytes(bytes(range(256)) * 40)
    (tmp_path / "folder").mkdir()
    cases = []
    for name in ("tab\there.txt", "line\nbreak.txt"):
        (tmp_path / name).write_text("the cat\n", encoding="utf-8")
        cases.append((str(tmp_path / name), "a tab or line break in a file name"))
    cases += [(str(binary), "contains NUL bytes; not a text file"), (str(tmp_path / "folder"), "a folder, not a file")]
    for path, message in cases:
        assert main(["dedup", path, "--model", str(model_dir), "--out", str(tmp_path / "bad"), "--quiet"]) == 2
        assert message in one_line_error(capsys)
        assert not (tmp_path / "bad").exists()


def chained_texts(seed: int = 2, count: int = 400) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(3, 8))) for _ in range(count)]


def test_every_mode_states_and_keeps_its_promise(model_dir, tmp_path):
    """Reproduction of issue 58: --target-fraction chained (records far below the printed threshold removed);
    now target modes are stars, and components say they are transitive and give their lowest link."""
    (tmp_path / "in.txt").write_text("\n".join(chained_texts()) + "\n", encoding="utf-8")
    for name, config in (("fraction", DedupConfig(target_fraction=0.5)), ("size", DedupConfig(target_size=150)),
                         ("star", DedupConfig(threshold=0.8))):
        summary = dedup([tmp_path / "in.txt"], model_dir, tmp_path / name, replace_config(config))
        near = [float(r["similarity"]) for r in read_mapping(tmp_path / name) if r["reason"] == "near"]
        assert near and min(near) >= summary["threshold"] - 1e-4, name
        assert summary["guarantee"].startswith("star: every removed record has cosine >= ")
        assert summary["lowest_similarity_to_keeper"] >= summary["threshold"] - 1e-6
    assert dedup([tmp_path / "in.txt"], model_dir, tmp_path / "half", replace_config(DedupConfig(
        target_fraction=0.5)))["kept"] <= 200
    components = dedup([tmp_path / "in.txt"], model_dir, tmp_path / "components",
                       replace_config(DedupConfig(threshold=0.8, clusters="components")))
    near = [float(r["similarity"]) for r in read_mapping(tmp_path / "components") if r["reason"] == "near"]
    assert min(near) < 0.8  # chains: some removed records are far from their keeper, and the summary says so
    assert components["lowest_similarity_to_keeper"] == pytest.approx(min(near), abs=1e-4)
    assert "transitive" in components["guarantee"] and f"{min(near):.4f}" in components["guarantee"]


def replace_config(config: DedupConfig) -> DedupConfig:
    config.progress = False
    return config
