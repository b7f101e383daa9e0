"""lab.sci_splits (the search recipes' training and dev splits) and lab.heldout_retrieval (their per-source
scoring), on a small shared-data folder written here."""
from __future__ import annotations

import gzip
import json
import zlib

import numpy as np
import pytest

from lab import heldout_retrieval, sci_splits
from swembed.pipeline.splits import sentences_of


def _write_gz(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in lines)


@pytest.fixture()
def shared(tmp_path):
    """A shared-data folder: 200 documents and 200 pairs in each of two sources."""
    data = tmp_path / "data"
    docs = [json.dumps({"id": f"d{i}", "title": f"Study {i} of enzyme {i % 7}",
                        "text": f"Enzyme {i % 7} binds site {i}. Its rate rose {i} fold. "
                                f"Cells {i} were counted twice. Mice {i} lived longer."}) for i in range(200)]
    _write_gz(data / "corpora" / "docs" / "toy.docs.jsonl.gz", docs)
    for source in ("alpha", "beta"):
        _write_gz(data / "corpora" / "pairs" / f"{source}.pairs.tsv.gz",
                  [f"what does {source} item {i} do?\t{source} item {i} turns protein {i} into sugar."
                   for i in range(200)])
    return data


def test_dev_by_source_partitions_the_dev_pairs_and_reruns_write_the_same_bytes(shared, tmp_path):
    out = tmp_path / "out"
    assert sci_splits.main(["--data", str(shared), "--out", str(out)]) == 0
    first = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix == ".gz"}
    assert sci_splits.main(["--data", str(shared), "--out", str(out)]) == 0
    again = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix == ".gz"}
    assert again == first  # caches keyed on these bytes stay valid
    assert all(raw[3:8] == bytes(5) for raw in first.values())  # no name, no time in a gzip header

    def lines(name):
        return gzip.decompress(first[name]).decode("utf-8").splitlines()

    by_source = {name: lines(name) for name in first if name.startswith("dev-")}
    assert set(by_source) == {"dev-alpha.tsv.gz", "dev-beta.tsv.gz", "dev-pseudo.tsv.gz"}
    assert sorted(line for group in by_source.values() for line in group) == sorted(lines("dev.tsv.gz"))
    assert all(line.startswith("what does alpha") for line in by_source["dev-alpha.tsv.gz"])
    assert by_source["dev-alpha.tsv.gz"] and by_source["dev-pseudo.tsv.gz"]
    training = set(lines("pairs.tsv.gz"))
    assert not training & set(lines("dev.tsv.gz"))


def test_a_table_is_scored_per_source_against_the_first_one(shared, tmp_path, monkeypatch):
    out = tmp_path / "out"
    sci_splits.main(["--data", str(shared), "--out", str(out)])
    sets = {source: heldout_retrieval.pairs_dev(out / f"dev-{source}.tsv.gz") for source in ("alpha", "pseudo")}

    def exact(texts):  # hashed bag of words: finds the passage that shares the query's numbers
        out = np.zeros((len(texts), 4096), dtype=np.float32)
        for i, text in enumerate(texts):
            words = text.lower().replace("?", " ").replace(".", " ").split()
            out[i, [zlib.crc32(w.encode()) % 4096 for w in words]] = 1
        return out

    good = {name: heldout_retrieval.ndcg_per_query(exact, *dev_set) for name, dev_set in sets.items()}
    rng = np.random.default_rng(0)
    noise = {name: heldout_retrieval.ndcg_per_query(lambda t: rng.normal(size=(len(t), 8)), *dev_set)
             for name, dev_set in sets.items()}
    assert good["alpha"].mean() > 0.9 > noise["alpha"].mean()
    low, high = heldout_retrieval.interval(noise["alpha"], good["alpha"])
    assert low <= high < 0  # noise is worse than the bag of words, and the interval says so
    lines = heldout_retrieval.table({"bag": good, "noise": noise})
    assert lines[0].startswith("| model | alpha (") and "`noise`" in lines[3] and "[" in lines[3]


def test_wiki_pairs_leave_out_every_block_of_the_wikipedia_dev_set(tmp_path):
    from lab import mteb_levers, wiki_pairs

    data = tmp_path / "data"
    for name, n in (("wikitext2", 27000), ("gensim_enwiki", 9900)):  # 4,100 blocks of 9 lines; the dev set takes 4,000
        _write_gz(data / "corpora" / "en" / f"{name}.txt.gz",
                  [f"In {name} article {i // 9} line {i} the river town number {i} grew." for i in range(n)])
    out = tmp_path / "wiki.tsv.gz"
    assert wiki_pairs.main(["--data", str(data), "--out", str(out)]) == 0
    pairs = [line.split("\t") for line in gzip.decompress(out.read_bytes()).decode("utf-8").splitlines()]
    queries, docs, _ = mteb_levers.retrieval_dev(data)
    dev_lines = {s for doc in docs for s in sentences_of(doc)} | set(queries)
    trained = {s for q, d in pairs for s in (q, *sentences_of(d))}
    assert pairs and not trained & dev_lines
    assert len(trained) == 100 * 9  # each of the 100 other blocks gives its two pairs, every line of it in them
    assert wiki_pairs.main(["--data", str(tmp_path / "nowhere"), "--out", str(out)]) == 2
