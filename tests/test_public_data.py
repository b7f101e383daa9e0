"""Recipes on public data: ``hf://datasets/`` sources resolved through a mirror folder or the Hub's cache, checked
against the catalog, the menu's recipes free of local paths, ``[splits]`` made before a build, and a build that
fails at once, in one line, when its data cannot be had."""
from __future__ import annotations

import gzip
import json
import os
import re
import socket
from pathlib import Path

import pytest
from conftest import make_sentences, run_cli, small_build_args, snapshot

from lab import publish_datasets
from swembed.pipeline import public_data
from swembed.pipeline.config import SplitsConfig, load_recipe, read_recipe_toml
from swembed.pipeline.sources import CorpusError, expand_sources
from swembed.pipeline.splits import MANIFEST, SplitsError, make_splits

ROOT = Path(__file__).resolve().parents[1]


def _gz(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in lines)
    return path


@pytest.fixture
def mirror(tmp_path, monkeypatch) -> Path:
    """A mirror of both catalogued datasets with small files, and the catalog ``lab.publish_datasets`` writes for
    it standing in for the shipped one."""
    folder = tmp_path / "mirror"
    _gz(folder / "corpora" / "en" / "wikitext2.txt.gz", make_sentences(50))
    _gz(folder / "corpora" / "en" / "sotu.txt.gz", make_sentences(50, seed=1))
    _gz(folder / "corpora" / "docs" / "scitldr.docs.jsonl.gz",
        [json.dumps({"id": f"d{i}", "title": f"Paper {i}", "text": f"Method {i} works. It is fast {i} times. "
                     f"Tests {i} pass here. Results {i} hold up well."}) for i in range(80)])
    _gz(folder / "corpora" / "pairs" / "medquad.pairs.tsv.gz",
        [f"what treats illness {i}?\tdrug {i} treats illness {i} in adults." for i in range(80)])
    (folder / "eval" / "stsb").mkdir(parents=True)
    (folder / "eval" / "stsb" / "sts-test.csv").write_text("a cat sat\ta dog ran\n", encoding="utf-8")
    catalog = tmp_path / "public_datasets.toml"
    catalog.write_text(publish_datasets.catalog_toml(folder), encoding="utf-8")
    monkeypatch.setattr(public_data, "CATALOG_PATH", catalog)
    public_data.catalog.cache_clear()
    monkeypatch.setenv(public_data.MIRROR_ENV, str(folder))
    yield folder
    public_data.catalog.cache_clear()


def test_no_recipe_on_the_menu_names_a_local_data_path_and_every_public_source_is_catalogued():
    for recipe in sorted((ROOT / "pipelines").glob("*.toml")):
        assert "../shared" not in recipe.read_text(encoding="utf-8"), recipe.name
        if "source" in read_recipe_toml(recipe):  # a shrink recipe (edge-*): reads a built table, no text
            continue
        for where, specs in load_recipe(recipe).data_sources().items():
            for spec in filter(public_data.is_public, specs):
                named = public_data.source_licences([spec])  # expands over the catalog: no download, no mirror
                assert named and all(entry["licence"] != "unknown" and entry["upstream"] for entry in named), \
                    (recipe.name, where, spec)
    for dataset in public_data.catalog().values():
        for entry in dataset.files.values():
            assert re.fullmatch(r"[0-9a-f]{64}", entry.sha256) and entry.bytes > 0 and entry.licence


def test_the_catalog_matches_the_shared_data_where_it_is_beside_the_checkout():
    shared = ROOT.parent / "shared" / "data"
    if not (shared / "corpora").is_dir():
        pytest.skip("no ../shared/data beside this checkout")
    assert publish_datasets.catalog_toml(shared) == public_data.CATALOG_PATH.read_text(encoding="utf-8")


def test_a_mirror_serves_catalogued_files_in_folder_order_and_refuses_changed_or_foreign_ones(mirror):
    files = expand_sources(["hf://datasets/swembed/corpora/en/*.txt.gz"])
    assert files == [str(mirror / "corpora" / "en" / name) for name in ("sotu.txt.gz", "wikitext2.txt.gz")]
    assert expand_sources(["hf://datasets/swembed/eval"]) == expand_sources([str(mirror / "eval")])
    assert public_data.source_licences(["hf://datasets/swembed/corpora/en/sotu.txt.gz"])[0]["licence"] == \
        "public domain"
    (mirror / "corpora" / "en" / "extra.txt.gz").write_bytes(b"")
    with pytest.raises(CorpusError, match=r"extra\.txt\.gz: not a file of the dataset swembed/corpora"):
        expand_sources(["hf://datasets/swembed/corpora/en/*.txt.gz"])
    _gz(mirror / "corpora" / "en" / "sotu.txt.gz", make_sentences(50, seed=2))
    with pytest.raises(CorpusError, match=r"sotu\.txt\.gz: not the catalogued .*SHA-256"):
        expand_sources(["hf://datasets/swembed/corpora/en/sotu.txt.gz"])
    with pytest.raises(CorpusError, match="not in the data mirror"):
        expand_sources(["hf://datasets/swembed/corpora/en/missing.txt.gz"])
    with pytest.raises(CorpusError, match=r"hf://datasets/<org>/<name>"):
        expand_sources(["hf://datasets/nothing"])


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_recipe_whose_data_cannot_be_had_fails_before_any_work_in_one_line(tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text('teacher = "minilm"\n[corpus]\nsources = ["hf://datasets/swembed/corpora/en/*.txt.gz"]\n',
                      encoding="utf-8")
    out = tmp_path / "m"
    env = {public_data.MIRROR_ENV: "", "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}",
           "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"}
    result = run_cli(["build", "--recipe", recipe, "--out", out], env)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "hf://datasets/swembed/corpora/en/" in lines[0] and "--data-mirror" in lines[0]
    assert not out.exists() and not Path(f"{out}.work").exists()
    offline = run_cli(["build", "--recipe", recipe, "--out", out], {**env, "HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 2 and "HF_HUB_OFFLINE" in offline.stderr and "--data-mirror" in offline.stderr
    missing = run_cli(["build", "--recipe", recipe, "--out", out, "--data-mirror", tmp_path / "nowhere"], env)
    assert missing.returncode == 2 and "not a folder" in missing.stderr


@pytest.mark.teacher
def test_a_build_from_a_public_source_in_a_mirror_makes_the_table_of_the_same_local_file(tmp_path, monkeypatch):
    corpus = _gz(tmp_path / "mirror" / "tiny" / "corpus.txt.gz", make_sentences(400))
    tables = {}
    for name, source in (("local", str(corpus)), ("public", "hf://datasets/someone/tiny/corpus.txt.gz")):
        args = small_build_args(tmp_path / "unused", tmp_path / name)
        args[args.index("--corpus") + 1] = source
        result = run_cli([*args, "--data-mirror", tmp_path / "mirror"], same_process=True)
        assert result.returncode == 0, result.stderr
        tables[name] = snapshot(tmp_path / name / "embeddings.npy")
    monkeypatch.delenv(public_data.MIRROR_ENV)
    assert tables["public"] == tables["local"]


def test_splits_are_made_once_and_never_over_files_swembed_did_not_write(mirror, tmp_path):
    config = SplitsConfig(documents=["hf://datasets/swembed/corpora/docs/*.docs.jsonl.gz"],
                          pairs=["hf://datasets/swembed/corpora/pairs/*.pairs.tsv.gz"], out=str(tmp_path / "splits"))
    lines = make_splits(config)
    assert lines["pairs.tsv.gz"] > 0 and lines["dev.tsv.gz"] > 0 and lines["pseudo.tsv.gz"] > 0
    made = snapshot(tmp_path / "splits")
    assert make_splits(config) == lines and snapshot(tmp_path / "splits") == made  # current: nothing rewritten

    adopted = tmp_path / "adopted"  # an earlier copy of the same files, without the manifest: kept
    adopted.mkdir()
    for name, data in made.items():
        if name != MANIFEST:
            (adopted / name).write_bytes(data)
    make_splits(SplitsConfig(**{**config.__dict__, "out": str(adopted)}))
    assert (adopted / MANIFEST).is_file()

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "pairs.tsv.gz").write_bytes(b"mine")
    with pytest.raises(SplitsError, match=r"pairs\.tsv\.gz: a file swembed did not write"):
        make_splits(SplitsConfig(**{**config.__dict__, "out": str(foreign)}))
    assert (foreign / "pairs.tsv.gz").read_bytes() == b"mine"


def test_swembed_data_lists_a_recipes_sources_with_licences_and_makes_its_splits(mirror, tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'''exclude = ["hf://datasets/swembed/eval", "{tmp_path / 's' / 'dev_sentences.txt.gz'}"]
[corpus]
sources = ["hf://datasets/swembed/corpora/en/*.txt.gz"]
[splits]
documents = ["hf://datasets/swembed/corpora/docs/*.docs.jsonl.gz"]
pairs = ["hf://datasets/swembed/corpora/pairs/*.pairs.tsv.gz"]
out = "{tmp_path / 's'}"
''', encoding="utf-8")
    listed = run_cli(["data", "sources", "--recipe", recipe], same_process=True)  # the fixture's catalog
    assert listed.returncode == 0, listed.stderr
    assert "hf://datasets/swembed/corpora/en/*.txt.gz -> 2 files (CC-BY-SA-3.0; public domain)" in listed.stdout
    assert "dev_sentences.txt.gz (made by [splits])" in listed.stdout
    made = run_cli(["data", "splits", "--recipe", recipe], same_process=True)
    assert made.returncode == 0 and (tmp_path / "s" / "dev_sentences.txt.gz").is_file(), made.stderr


def test_an_hf_dataset_id_reads_its_files_from_the_mirror_through_the_datasets_loader(tmp_path, monkeypatch):
    pytest.importorskip("datasets")
    from swembed.pipeline.sources import read_source

    folder = tmp_path / "mirror" / "tiny-news" / "data"
    folder.mkdir(parents=True)
    rows = [{"text": sentence, "label": i % 2} for i, sentence in enumerate(make_sentences(20))]
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    monkeypatch.setenv(public_data.MIRROR_ENV, str(tmp_path / "mirror"))
    assert list(read_source("hf:someone/tiny-news")) == [row["text"] for row in rows]
    with pytest.raises(CorpusError, match="not in the data mirror"):
        list(read_source("hf:someone/other"))


RESOLVE = """import sys
from pathlib import Path
from swembed.pipeline import public_data
from swembed.pipeline.sources import CorpusError, expand_sources
public_data.CATALOG_PATH = Path(sys.argv[1])
try:
    print("\\n".join(expand_sources(sys.argv[2:])))
except CorpusError as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
"""


def test_public_sources_download_through_the_hub_cache_and_are_checked_against_the_catalog(mirror, tmp_path):
    import subprocess
    import sys

    from hub_standin import HubStandin

    catalog = str(public_data.CATALOG_PATH)
    files = {p.relative_to(mirror / "corpora").as_posix(): p.read_bytes()
             for p in (mirror / "corpora").rglob("*") if p.is_file()}

    def resolve(hub, home, *specs, **env):
        environment = {**hub.env(home), public_data.MIRROR_ENV: "", **env}
        return subprocess.run([sys.executable, "-c", RESOLVE, catalog, *specs], capture_output=True, text=True,
                              env={**os.environ, **environment})

    with HubStandin(tmp_path / "hub") as hub:
        hub.add_files("dataset", "swembed/corpora", files)
        got = resolve(hub, tmp_path / "home", "hf://datasets/swembed/corpora/en/*.txt.gz")
        assert got.returncode == 0, got.stderr
        paths = got.stdout.split()
        assert [Path(p).name for p in paths] == ["sotu.txt.gz", "wikitext2.txt.gz"]
        assert all(str(tmp_path / "home") in p for p in paths)  # huggingface_hub's cache under HF_HOME
        assert [Path(p).read_bytes() for p in paths] == [files["en/sotu.txt.gz"], files["en/wikitext2.txt.gz"]]
        seen = len(hub.requests)
        offline = resolve(hub, tmp_path / "home", "hf://datasets/swembed/corpora/en/*.txt.gz", HF_HUB_OFFLINE="1")
        assert offline.returncode == 0 and offline.stdout.split() == paths and len(hub.requests) == seen

        hub.add_files("dataset", "swembed/corpora", {"en/sotu.txt.gz": b"changed upstream\n"})
        changed = resolve(hub, tmp_path / "fresh", "hf://datasets/swembed/corpora/en/sotu.txt.gz")
        assert changed.returncode == 2 and "not the catalogued hf://datasets/swembed/corpora/en/sotu.txt.gz" in \
            changed.stderr
        unknown = resolve(hub, tmp_path / "fresh", "hf://datasets/nobody/none/a.txt")
        assert unknown.returncode == 2 and "hf://datasets/nobody/none" in unknown.stderr \
            and "--data-mirror" in unknown.stderr


def test_more_middle_sentences_add_training_pseudo_queries_and_leave_dev_and_the_first_pairs_as_they_were():
    from swembed.pipeline.splits import sentences_of, split_lines

    documents = [(f"docs.jsonl:{i}", " ".join(f"Sentence {j} of paper {i} says things." for j in range(8)))
                 for i in range(64)]
    pairs = [("agnews", f"what is news {i}?", f"story {i} is news today.") for i in range(32)]
    one = split_lines(documents, pairs, 200, {})
    three = split_lines(documents, pairs, 200, {}, pseudo_middles=3)
    sampled = ("pseudo.tsv.gz", "retrieval.tsv.gz")  # the sample draws among more pseudo-queries
    assert {n: v for n, v in three.items() if n not in sampled} == {n: v for n, v in one.items() if n not in sampled}
    first, more = one["pseudo.tsv.gz"], three["pseudo.tsv.gz"]
    assert more[: len(first)] == first and len(more) == 2 * len(first)  # two more middles a training document
    texts = {text for _, text in documents}
    for line in more[len(first):]:
        query, passage = line.split("\t")
        sentences = [s for text in texts if query in sentences_of(text) for s in sentences_of(text)]
        assert query not in (sentences[0], sentences[-1])  # a middle sentence
        assert passage == " ".join(s for s in sentences if s != query)  # -> the document without it
    assert len(set(more)) == len(more)  # no middle drawn twice
