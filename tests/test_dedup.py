"""`swembed dedup`: every record accounted for, clusters equal to a brute-force reference, hostile input."""
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    summary = dedup([path], model_dir, tmp_path / "out", DedupConfig(threshold=0.8, progress=False,
                                                                    errors="replace"))  # line 6 is not UTF-8
    assert summary["undecodable_lines"] == {str(path): 1}
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
    cases = [([str(tmp_path / "missing.txt")], "input not found"),
             ([str(tmp_path / "a.jsonl")], "a.jsonl:2: no 'text'"),
             ([str(tmp_path / "b.jsonl")], "b.jsonl:2: not a JSON object"),
             ([str(tmp_path / "c.csv")], "unknown input"),
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


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 30), dim=st.integers(2, 6),
       threshold=st.floats(0.0, 0.98), mode=st.sampled_from(["star", "components", "size", "fraction"]))
def test_dedup_modes_keep_their_promise(seed, n, dim, threshold, mode):
    """Property over random small vector sets (with planted near copies): star and target modes never remove a
    text below the applied threshold to its keeper, keepers are kept and not near each other; components equal
    the brute-force components and report their lowest link."""
    from swembed.dedup.job import cluster_distinct

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim))
    x[n // 2 :] = x[: n - n // 2] + rng.normal(scale=0.2, size=(n - n // 2, dim))  # near copies
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    lengths = rng.integers(1, 50, n)
    targets = {"size": {"target_size": max(1, n // 3)}, "fraction": {"target_fraction": 0.5}}
    config = DedupConfig(threshold=threshold, k=max(n, 1), method="exact", progress=False,
                         clusters="components" if mode == "components" else "star", **targets.get(mode, {}))
    config.validate()
    result = cluster_distinct(x, lengths, n, config)
    rep, sim, applied = result["rep_unique"], result["similarity"], result["threshold"]
    exact = np.clip(x @ x.T, -1, 1)
    removed = rep != np.arange(n)
    assert (rep[rep] == rep).all()  # every representative is kept
    np.testing.assert_allclose(sim[removed], exact[removed.nonzero()[0], rep[removed]], atol=1e-5)
    if mode == "components":
        assert applied == pytest.approx(threshold)
        roots = reference_clusters(x, threshold)
        assert all((np.array(roots)[rep == r] == roots[r]).all() for r in set(rep.tolist()))
        assert len(set(rep.tolist())) == len(set(roots))
        return
    assert (sim[removed] >= applied - 1e-6).all()
    assert applied >= threshold - 1e-6
    kept = np.flatnonzero(~removed)
    between = exact[np.ix_(kept, kept)] - 2 * np.eye(len(kept))
    assert (between < applied + 1e-6).all() or len(kept) < 2  # keepers are not duplicates of each other
    if mode in targets:
        target = config.target(n)
        assert len(kept) <= target or applied == pytest.approx(threshold)


def test_against_removes_planted_leaks_and_nothing_else(tmp_path):
    from conftest import snapshot

    from lab.dedup_bench import planted_leak

    model, train, test, planted = planted_leak(tmp_path, others=5000, copies=200)
    before = snapshot(test)
    assert main(["dedup", str(train), "--against", str(test), "--model", str(model), "--threshold", "0.85",
                 "--out", str(tmp_path / "out"), "--quiet"]) == 0
    rows = read_mapping(tmp_path / "out")
    removed = {i for i, r in enumerate(rows) if r["reason"] == "reference"}
    assert {r["reason"] for r in rows} <= {"kept", "reference"}
    assert len(removed & planted) >= 0.98 * len(planted) and len(removed - planted) < 0.001 * 5000
    test_lines = test.read_text(encoding="utf-8").splitlines()
    train_lines = train.read_text(encoding="utf-8").splitlines()
    for i in removed:  # the representative is the reference record, numbered after the inputs
        reference = int(rows[i]["representative"]) - len(train_lines)
        assert 0 <= reference < len(test_lines) and float(rows[i]["similarity"]) >= 0.85
        if float(rows[i]["similarity"]) == 1.0:
            assert train_lines[i] == test_lines[reference]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["references"] == [{"file": str(test), "first_record": len(train_lines), "records": len(test_lines)}]
    assert snapshot(test) == before
    (tmp_path / "empty.txt").write_bytes(b"")  # an empty reference set removes nothing
    assert dedup([train], model, tmp_path / "none", DedupConfig(progress=False), against=[tmp_path / "empty.txt"])[
        "kept"] == len(train_lines)


def test_rethreshold_equals_a_fresh_run_without_the_model(model_dir, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("\n".join(chained_texts(5)) + "\n", encoding="utf-8")
    for clusters in ("star", "components"):
        config = DedupConfig(threshold=0.8, clusters=clusters, progress=False)
        dedup([tmp_path / "in.txt"], model_dir, tmp_path / f"run-{clusters}", config)
        dedup([tmp_path / "in.txt"], model_dir, tmp_path / f"fresh-{clusters}",
              DedupConfig(threshold=0.85, clusters=clusters, progress=False))
    model_dir.rename(tmp_path / "elsewhere")  # a re-cut neither encodes nor searches
    for clusters in ("star", "components"):
        assert main(["dedup-rethreshold", str(tmp_path / f"run-{clusters}"), "--threshold", "0.85", "--out",
                     str(tmp_path / f"re-{clusters}"), "--quiet"]) == 0
        for name in ("mapping.tsv", "kept/in.txt"):
            assert (tmp_path / f"re-{clusters}" / name).read_bytes() == (tmp_path / f"fresh-{clusters}" / name
                                                                         ).read_bytes()
    assert main(["dedup-rethreshold", str(tmp_path / "re-star"), "--threshold", "0.9", "--out",
                 str(tmp_path / "again"), "--quiet"]) == 0  # a re-cut is itself a run
    capsys.readouterr()
    cases = [(["--threshold", "0.6"], "stored the pairs down to cosine 0.7000"),
             (["--threshold", "1.5"], "--threshold must be between -1 and 1")]
    for extra, message in cases:
        assert main(["dedup-rethreshold", str(tmp_path / "run-star"), *extra, "--out", str(tmp_path / "bad")]) == 2
        assert message in one_line_error(capsys) and not (tmp_path / "bad").exists()
    assert main(["dedup-rethreshold", str(tmp_path), "--threshold", "0.9", "--out", str(tmp_path / "bad")]) == 2
    assert "not a swembed dedup run folder" in one_line_error(capsys)
    with open(tmp_path / "in.txt", "a", encoding="utf-8") as handle:
        handle.write("one more line\n")
    assert main(["dedup-rethreshold", str(tmp_path / "run-star"), "--threshold", "0.9", "--out",
                 str(tmp_path / "bad")]) == 2
    assert "changed or gone since the run" in one_line_error(capsys) and not (tmp_path / "bad").exists()


def test_explain_lists_the_weakest_removals_and_a_sweep_equal_to_fresh_runs(model_dir, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("\n".join(chained_texts(6)) + "\n", encoding="utf-8")
    run = dedup([tmp_path / "in.txt"], model_dir, tmp_path / "run", DedupConfig(threshold=0.8, progress=False))
    assert main(["dedup-explain", str(tmp_path / "run"), "--out", str(tmp_path / "why"), "--pairs", "5"]) == 0
    printed = capsys.readouterr().out
    least = [line.split("\t") for line in (tmp_path / "why" / "least-similar.tsv").read_text().splitlines()[1:]]
    near = sorted(float(r["similarity"]) for r in read_mapping(tmp_path / "run") if r["reason"] == "near")
    assert [float(row[1]) for row in least] == pytest.approx(near[:5], abs=1e-4)
    texts = chained_texts(6)
    assert all(row[5] == texts[int(row[2])] and row[9] == texts[int(row[6])] for row in least)
    assert least[0][5][:30] in printed
    sweep = {row[0]: int(row[2]) for row in (line.split("\t") for line in
                                            (tmp_path / "why" / "sweep.tsv").read_text().splitlines()[1:])}
    assert sweep["0.80"] == run["records"] - run["kept"]
    fresh = dedup([tmp_path / "in.txt"], model_dir, tmp_path / "fresh", DedupConfig(threshold=0.74, progress=False))
    assert sweep["0.74"] == fresh["records"] - fresh["kept"] and min(sweep) == "0.70"
    assert (tmp_path / "why" / "similarities.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["dedup-explain", str(tmp_path / "run"), "--out", str(tmp_path / "bad"), "--pairs", "0"]) == 2
    assert "--pairs must be at least 1" in one_line_error(capsys) and not (tmp_path / "bad").exists()


def test_outliers_and_representatives_on_planted_clusters(tmp_path, capsys):
    rng = np.random.default_rng(3)
    words = [f"c{i}" for i in range(200)] + [f"x{i}" for i in range(200)]
    model = random_model(tmp_path / "model", words, dim=48, seed=3)
    clusters = [[f"c{i}" for i in range(40 * c, 40 * c + 10)] for c in range(5)]
    lines, cluster_of = [], []
    for c, core in enumerate(clusters):  # five dense groups of 20 lines: their core words plus two of their own
        for _ in range(20):
            lines.append(" ".join(core + list(rng.choice(words[40 * c + 10 : 40 * c + 40], 2, replace=False))))
            cluster_of.append(c)
    outliers = [" ".join(rng.choice(words[200:], 12, replace=False)) for _ in range(4)]
    for text in outliers:  # four lines like nothing else, spread among the groups
        at = int(rng.integers(0, len(lines)))
        lines.insert(at, text)
        cluster_of.insert(at, -1)
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    dedup([tmp_path / "in.txt"], model, tmp_path / "run", DedupConfig(threshold=0.999, progress=False))
    assert main(["dedup-select", str(tmp_path / "run"), "--out", str(tmp_path / "sel"), "--outliers", "4",
                 "--representatives", "5", "--k", "8"]) == 0
    read = lambda name: [row.split("\t") for row in (tmp_path / "sel" / name).read_text().splitlines()[1:]]  # noqa
    assert {int(row[2]) for row in read("outliers.tsv")} == {i for i, c in enumerate(cluster_of) if c < 0}
    assert sorted(cluster_of[int(row[2])] for row in read("representatives.tsv")) == [0, 1, 2, 3, 4]
    assert all(row[5] == lines[int(row[2])] for row in read("representatives.tsv"))
    capsys.readouterr()
    for extra, message in ((["--outliers", "-1"], "--outliers must be an integer of at least 0"),
                           ([], "give --outliers N and/or --representatives N")):
        assert main(["dedup-select", str(tmp_path / "run"), "--out", str(tmp_path / "bad"), *extra]) == 2
        assert message in one_line_error(capsys) and not (tmp_path / "bad").exists()


def test_several_text_columns_keep_every_column(model_dir, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    records = [{"id": i, "title": t, "body": b} for i, (t, b) in enumerate(
        [("the cat", "sat on the mat"), ("the cat", "ran in the park"), ("The cat", "sat on the mat"),
         ("a dog", "sat on the mat"), ("market prices", "rose sharply today")])]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "b.parquet")
    joined = [{"text": r["title"] + "\n" + r["body"]} for r in records]
    (tmp_path / "joined.jsonl").write_text("".join(json.dumps(r) + "\n" for r in joined), encoding="utf-8")
    assert main(["dedup", str(tmp_path / "a.jsonl"), str(tmp_path / "b.parquet"), "--model", str(model_dir),
                 "--text-column", "title", "--text-column", "body", "--out", str(tmp_path / "two"), "--quiet"]) == 0
    (tmp_path / "joined-again.jsonl").write_bytes((tmp_path / "joined.jsonl").read_bytes())  # one file twice: refused
    assert main(["dedup", str(tmp_path / "joined.jsonl"), str(tmp_path / "joined-again.jsonl"), "--model",
                 str(model_dir), "--out", str(tmp_path / "one"), "--quiet"]) == 0
    two, one = read_mapping(tmp_path / "two"), read_mapping(tmp_path / "one")
    assert [(r["representative"], r["reason"]) for r in two] == [(r["representative"], r["reason"]) for r in one]
    assert [r["reason"] for r in two[:5]] == ["kept", "kept", "exact", "kept", "kept"]  # title and body both count
    kept = [json.loads(line) for line in (tmp_path / "two" / "kept" / "a.jsonl").read_text().splitlines()]
    assert kept == [records[i] for i in (0, 1, 3, 4)]
    assert pq.read_table(tmp_path / "two" / "kept" / "b.parquet").column_names == ["id", "title", "body"]


def test_new_flags_refuse_bad_input_in_one_line(model_dir, tmp_path, capsys):
    from conftest import snapshot

    (tmp_path / "in.txt").write_text("the cat\na dog\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("the cat\n", encoding="utf-8")
    (tmp_path / "a.jsonl").write_text('{"title": "x", "body": 3}\n', encoding="utf-8")
    dedup([tmp_path / "in.txt"], model_dir, tmp_path / "existing", DedupConfig(progress=False))
    before = snapshot(tmp_path / "existing")
    common = ["--model", str(model_dir), "--quiet"]
    cases = [
        ([str(tmp_path / "in.txt"), "--against", str(tmp_path / "missing.txt")], "input not found"),
        ([str(tmp_path / "in.txt"), "--against", str(tmp_path / "ref.txt"), "--target-size", "1"],
         "--against removes what is near the references; it takes no --target-size"),
        ([str(tmp_path / "in.txt"), "--pairs-floor", "0.95"], "--pairs-floor (0.95) must be at most the threshold"),
        ([str(tmp_path / "in.txt"), "--pairs-floor", "-2"], "--pairs-floor must be between -1 and 1"),
        ([str(tmp_path / "a.jsonl"), "--text-column", "title", "--text-column", "title"],
         "--text-column takes distinct non-empty column names"),
        ([str(tmp_path / "a.jsonl"), "--text-column", "title", "--text-column", "body"], "'body' is int, not a string"),
    ]
    for arguments, message in cases:
        for out in ("bad", "existing"):
            extra = ["--overwrite"] if out == "existing" else []
            assert main(["dedup", *arguments, *common, *extra, "--out", str(tmp_path / out)]) == 2
            assert message in one_line_error(capsys)
    assert not (tmp_path / "bad").exists() and snapshot(tmp_path / "existing") == before
    assert snapshot(tmp_path / "ref.txt") == {"": b"the cat\n"}


def test_the_default_threshold_and_choices_are_decided_once():
    """DedupConfig decides the default threshold (and the target's search floor); the CLI's help, choices and
    defaults read the same constants and fields."""
    from swembed.cli import subcommands
    from swembed.dedup.job import KEEPS, SEARCHES, TARGET_FLOOR, THRESHOLD

    assert DedupConfig().threshold_value() == THRESHOLD
    assert DedupConfig(target_size=5).threshold_value() == TARGET_FLOOR
    parser = subcommands()["dedup"]
    assert f"default {THRESHOLD};" in parser.format_help() and f"default {TARGET_FLOOR})" in parser.format_help()
    actions = {action.dest: action for action in parser._actions}
    assert (tuple(actions["keep"].choices), tuple(actions["search"].choices)) == (KEEPS, SEARCHES)
    assert (actions["k"].default, actions["batch_size"].default) == (DedupConfig().k, DedupConfig().batch_size)
    with pytest.raises(ValueError, match="--search must be one of auto, exact, ann, got 'fast'"):
        DedupConfig(method="fast").validate()


def planted_vectors(n: int, copies: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    """``n`` random unit vectors, the last ``copies`` of them noisy copies of earlier ones (cosine ~0.95)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim)).astype(np.float32)
    x[n - copies :] = x[:copies] + 0.33 * rng.normal(size=(copies, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_cell_search_finds_the_near_pairs_exact_search_finds():
    """The ann search (k-means cells scored by matrix products) on planted pairs: nearly every pair exact search
    finds at 0.9, nothing below the threshold, and every cell probed gives exact search's pairs."""
    from swembed.dedup.clusters import cell_count, near_pairs

    x = planted_vectors(6000, 1500)
    exact = set(zip(*[a.tolist() for a in near_pairs(x, 0.9, 16, "exact")[:2]]))
    a, b, sims = near_pairs(x, 0.9, 16, "ann")
    assert len(exact) >= 1400 and sims.min() >= 0.9 and np.all(a < b)
    assert len(set(zip(a.tolist(), b.tolist())) & exact) >= 0.98 * len(exact)
    every_cell = near_pairs(x, 0.9, 16, "ann", nprobe=cell_count(len(x)))
    assert set(zip(every_cell[0].tolist(), every_cell[1].tolist())) == exact


def test_cell_search_neighbours_and_nearest_reference():
    """Each row's k nearest by the cell search with every cell probed equal exact search's (ids and float32
    scores, self left out); nearest_in over cells finds the planted reference of nearly every copy."""
    from swembed.dedup.clusters import cell_count, cell_neighbours, exact_neighbours, nearest_in

    x = planted_vectors(3000, 600, seed=1)
    (_, ids, sims), = cell_neighbours(x, x, 5, nprobe=cell_count(len(x)), skip_self=True)
    (_, exact_ids, exact_sims), = exact_neighbours(x, x, 5, skip_self_from=0)
    order, exact_order = np.argsort(-sims, axis=1), np.argsort(-exact_sims, axis=1)
    assert np.array_equal(np.take_along_axis(ids, order, 1), np.take_along_axis(exact_ids, exact_order, 1))
    assert np.allclose(np.take_along_axis(sims, order, 1), np.take_along_axis(exact_sims, exact_order, 1), atol=1e-6)
    best, score = nearest_in(x[-600:], x[:2400], method="ann")
    exact_best, exact_score = nearest_in(x[-600:], x[:2400], method="exact")
    found = best == exact_best
    assert found.mean() >= 0.98 and (exact_best == np.arange(600)).all()
    assert np.allclose(score[found], exact_score[found], atol=1e-6) and np.all(score[~found] < exact_score[~found])


def test_bench_speed_section_is_replaced_in_place(tmp_path):
    """lab.dedup_bench versus --out: its section of the report is replaced (or appended), the rest kept byte for
    byte; planted copies removed counts only the later line of each planted pair."""
    from lab.dedup_bench import SPEED_HEADING, copies_removed, write_section

    report = tmp_path / "dedup.md"
    report.write_text(f"# Dedup\n\ntable\n\n{SPEED_HEADING}\n\nold runs\n\n## Later\n\nkept\n", encoding="utf-8")
    write_section(report, SPEED_HEADING, f"{SPEED_HEADING}\n\nnew runs\n")
    expected = f"# Dedup\n\ntable\n\n{SPEED_HEADING}\n\nnew runs\n\n## Later\n\nkept\n"
    assert report.read_text(encoding="utf-8") == expected
    (tmp_path / "none.md").write_text("# Dedup\n", encoding="utf-8")
    write_section(tmp_path / "none.md", SPEED_HEADING, f"{SPEED_HEADING}\n")
    assert (tmp_path / "none.md").read_text(encoding="utf-8") == f"# Dedup\n\n{SPEED_HEADING}\n"
    (tmp_path / "in.txt.planted.json").write_text(json.dumps([[0, 3], [1, 4], [0, 5]]))
    assert copies_removed(tmp_path / "in.txt", np.array([3, 5, 6])) == (2 / 3, 1)


def test_every_engine_refuses_a_clustering_mode_it_does_not_register():
    """The clustering modes are one registry: an unknown mode is refused in one line by the config both engines
    read (never run as star or components), and each registered mode says whether it is transitive."""
    from swembed.dedup.clusters import CLUSTERINGS, clustering
    from swembed.dedup.job import DedupConfig

    assert {name: mode.transitive for name, mode in CLUSTERINGS.items()} == {"star": False, "components": True}
    with pytest.raises(ValueError, match=r"--clusters must be one of star, components, got 'single'"):
        DedupConfig(clusters="single").validate()
    with pytest.raises(ValueError, match="got 'single'"):
        clustering("single")
