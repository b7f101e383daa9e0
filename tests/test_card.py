"""The model card (issue 78): ``swembed card`` on a tiny table with real ``swembed eval --json`` results (STS and
MTEB suites), the YAML front matter as the Hub reads it (huggingface_hub's ``ModelCard``), and the cards that
``swembed export --format st|model2vec`` write in place of those libraries' boilerplate."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli, write_tiny_model
from test_checks import PAIRS, write_semeval, write_stsb

from swembed.runtime.folder import update_config
from swembed.runtime.hub import model_card

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
WIKITEXT = "hf://datasets/swembed/corpora/en/wikitext2.txt.gz"  # CC-BY-SA-3.0 in swembed's data catalog
SNIPPETS = ('swembed.load("', 'SentenceTransformer("', 'StaticModel.from_pretrained("', "loadModel('")


def built_table(folder: Path, sources: list[str], teacher: str = "minilm") -> Path:
    """A tiny table whose config.json records a teacher and a build, as ``swembed build`` writes them."""
    write_tiny_model(folder)
    hub_id = MINILM if teacher == "minilm" else teacher
    update_config(folder, {"teacher": {"name": teacher, "hub_id": hub_id}, "swembed_version": "0.1.0",
                           "build": {"config": {"name": "tiny", "teacher": teacher, "seed": 0,
                                                "corpus": {"sources": sources}, "pca": {"dim": 8, "drop": 1},
                                                "distill": {"max_steps": 60}}}})
    return folder


def write_sts(root: Path) -> Path:
    """STS12-16, STS-B test and SICK-R of ``PAIRS``: the seven sets of ``swembed eval``'s en suite."""
    for name in ("sts12", "sts13", "sts14", "sts15", "sts16"):
        write_semeval(root, name)
    write_stsb(root)
    (root / "sick").mkdir()
    for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        rows = "".join(f"{i}\t{a}\t{b}\t{g}\n" for i, (a, b, g) in enumerate(PAIRS))
        (root / "sick" / name).write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\n" + rows)
    return root


@pytest.fixture
def eval_files(tmp_path) -> tuple[Path, list[Path]]:
    """The table and its real ``swembed eval --json`` results: the en suite and one MTEB task."""
    from test_mteb_suite import write_classification

    table = built_table(tmp_path / "tiny", [WIKITEXT, "my_corpus.txt"])
    write_classification(tmp_path / "mteb", "AmazonCounterfactualClassification")
    sts, mteb = tmp_path / "sts.json", tmp_path / "mteb.json"
    for args in (["--data", write_sts(tmp_path / "eval"), "--json", sts],
                 ["--suite", "mteb", "--data", tmp_path / "mteb", "--tasks", "AmazonCounterfactualClassification",
                  "--json", mteb]):
        result = run_cli(["eval", table, *args], same_process=True)
        assert result.returncode == 0, result.stderr
    return table, [sts, mteb]


def test_card_holds_the_front_matter_scores_and_four_usages(tmp_path, eval_files):
    from huggingface_hub import ModelCard

    table, files = eval_files
    out = tmp_path / "README.md"
    result = run_cli(["card", table, "--eval", *files, "--repo", "me/tiny", "--out", out])
    assert result.returncode == 0, result.stderr
    card = ModelCard.load(out)
    data = card.data.to_dict()
    assert data["library_name"] == "swembed" and data["base_model"] == MINILM
    assert data["license"] == "other" and data["license_name"] == "apache-2.0-and-cc-by-sa-3.0-and-unknown"
    assert data["datasets"] == ["swembed/corpora"] and data["pipeline_tag"] == "sentence-similarity"
    assert {"swembed", "static-embeddings", "sentence-similarity", "feature-extraction"} <= set(data["tags"])
    scores = {name: value for f in files for name, value in json.loads(f.read_text())["scores"].items()}
    indexed = {r.dataset_name: r.metric_value for r in card.data.eval_results}
    assert indexed == {name: round(scores[name], 2) for name in (
        "STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R", "AmazonCF-en")}
    text = out.read_text()
    assert text.count("\n# tiny\n") == 1 and all(snippet in text for snippet in SNIPPETS)
    assert 'swembed.load("me/tiny")' in text and "https://huggingface.co/me/tiny/resolve/main/" in text
    assert "Static Word Embeddings for Sentence Semantic Representation" in text and "CC-BY-SA-3.0" in text
    assert f"| avg | {scores['avg']:.2f} |" in text.replace("| en (test) ", "")


def test_licence_is_the_teachers_when_the_data_agrees(tmp_path):
    from huggingface_hub import ModelCard

    alone = ModelCard(model_card(built_table(tmp_path / "a", []))).data
    assert alone.license == "apache-2.0" and alone.base_model == MINILM
    other = ModelCard(model_card(built_table(tmp_path / "b", [], teacher="org/own-teacher"))).data
    assert other.license == "other" and other.license_name == "unknown" and other.base_model == "org/own-teacher"


@pytest.mark.parametrize("fmt, library, title", [("st", "sentence-transformers", "tiny-st"),
                                                  ("model2vec", "model2vec", "tiny-m2v")])
def test_exports_carry_the_card(tmp_path, fmt, library, title):
    """The export's README is this card, its own library's usage first: the export's name as title (not a temp
    folder's), the teacher, swembed, the licence; none of the library's boilerplate."""
    from huggingface_hub import ModelCard

    from swembed.integrations.formats import export

    table = built_table(tmp_path / "tiny", [WIKITEXT])
    out = export(table, fmt, tmp_path / title)
    text = (out / "README.md").read_text()
    data = ModelCard(text).data
    assert data.library_name == library and data.base_model == MINILM and data.license == "other"
    assert text.split("\n# ", 1)[1].startswith(f"{title}\n") and ".swembed-" not in text
    assert "inf tokens" not in text and "license: mit" not in text and "swembed" in text and MINILM in text
    usages = [text.index(snippet) for snippet in SNIPPETS]
    assert min(usages) == usages[1 if fmt == "st" else 2]  # the format's own library first
