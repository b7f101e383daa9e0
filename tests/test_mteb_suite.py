"""`swembed eval --suite mteb`: the real mteb scores local copies of five English tasks.

Hand-made files check the readers, the dev split and the scores on the real mteb code path; where the shared
data is present (``$SWEMBED_DATA/eval-mteb`` or ``../shared/data/eval-mteb``), the MiniLM teacher must reproduce
its published MTEB scores to 0.1: AmazonCF and Emotion (the two smallest, ~1.5k and ~3k texts through the teacher) in
every run, Banking77, TweetSentiment and SciFact under ``-m slow`` (SciFact: 5k abstracts, minutes on 2 cores).
"""
from __future__ import annotations

import csv
import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

from swembed.eval.sts import EvalDataError
from swembed.runtime import StaticEmbedder, WordTokenizer

if importlib.util.find_spec("mteb") is None:  # found, not imported: mteb (3 s) loads in the tests that run it
    pytest.skip("mteb is not installed (the mteb extra)", allow_module_level=True)
from swembed.eval.mteb_tasks import (  # noqa: E402
    DEV_EVERY,
    SHORT_NAMES,
    evaluate_mteb,
    local_classification_task,
    read_labelled,
)

WORDS = ["alpha", "beta", "gamma", "delta", "one", "two", "three", "four", "five", "six"]


def topic_model() -> StaticEmbedder:
    """Each word its own axis: texts sharing a word are similar, texts sharing none orthogonal."""
    return StaticEmbedder(np.eye(len(WORDS), dtype=np.float32), WordTokenizer({w: i for i, w in enumerate(WORDS)}))


def write_classification(root: Path, name: str, rows_per_label: int = 40) -> None:
    """Two labels told apart by one word each ("alpha" vs "beta"), plus a shared noise word."""
    rng = np.random.default_rng(0)
    folder = root / name
    folder.mkdir(parents=True)
    for split, n in (("train", rows_per_label), ("test", rows_per_label // 2)):
        lines = []
        for i in range(n):
            for label, word in (("counterfactual", "alpha"), ("not-counterfactual", "beta")):
                lines.append(f"{label}\t{word} {rng.choice(WORDS[4:])} {i}")
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_retrieval(root: Path) -> None:
    """Four documents, each named by one word; each query shares exactly its document's word."""
    folder = root / "SciFact"
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": w, "text": f"{w} {w}", "metadata": {}} for i, w in enumerate(WORDS[:4])]
    queries = [{"_id": f"q{i}", "text": f"about {w}", "metadata": {}} for i, w in enumerate(WORDS[:4])]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" +
                                               "".join(f"q{i}\td{i}\t1\n" for i in range(4)))


def test_separable_classes_and_matching_documents_score_100_through_mteb(tmp_path):
    write_classification(tmp_path, "AmazonCounterfactualClassification")
    write_retrieval(tmp_path)
    model = topic_model()
    scores = evaluate_mteb(model.encode, tmp_path, ["AmazonCounterfactualClassification", "SciFact"])
    assert scores == {"AmazonCF-en": pytest.approx(100.0), "SciFact": pytest.approx(100.0),
                      "mean": pytest.approx(100.0)}


def test_a_model_that_cannot_tell_the_classes_apart_scores_chance(tmp_path):
    write_classification(tmp_path, "AmazonCounterfactualClassification")
    scores = evaluate_mteb(lambda texts: np.ones((len(texts), 4), dtype=np.float32), tmp_path,
                           ["AmazonCounterfactualClassification"])
    assert scores["AmazonCF-en"] == pytest.approx(50.0)


def test_dev_split_holds_out_every_fifth_train_row_and_reads_no_test_file(tmp_path):
    write_classification(tmp_path, "AmazonCounterfactualClassification")
    folder = tmp_path / "AmazonCounterfactualClassification"
    (folder / "test.tsv").unlink()  # dev must not need it
    task = local_classification_task("AmazonCounterfactualClassification", tmp_path, split="dev")
    splits = task.dataset["en"]
    _, texts = read_labelled(folder / "train.tsv")
    assert splits["test"]["text"] == texts[DEV_EVERY - 1 :: DEV_EVERY]
    assert len(splits["train"]) + len(splits["test"]) == len(texts)
    assert not set(splits["train"]["text"]) & set(splits["test"]["text"])


def test_labelled_files_split_on_the_first_tab_and_keep_spaces(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text("neutral\t leading space\tand a tab\nneutral\t\n", encoding="utf-8")
    assert read_labelled(path) == (["neutral", "neutral"], [" leading space\tand a tab", ""])


@pytest.mark.parametrize("content, problem", [("no tab here\n", "x.tsv:1: expected 'label<TAB>text'"),
                                              ("", "x.tsv: no rows")])
def test_bad_labelled_file_is_one_line_naming_file_and_row(tmp_path, content, problem):
    path = tmp_path / "x.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(EvalDataError, match=problem):
        read_labelled(path)


def test_unknown_test_label_and_missing_folder_are_named(tmp_path):
    write_classification(tmp_path, "AmazonCounterfactualClassification")
    test_file = tmp_path / "AmazonCounterfactualClassification" / "test.tsv"
    test_file.write_text("maybe\talpha\n", encoding="utf-8")
    with pytest.raises(EvalDataError, match="test.tsv: unknown label 'maybe'"):
        local_classification_task("AmazonCounterfactualClassification", tmp_path)
    with pytest.raises(EvalDataError, match="not found"):
        evaluate_mteb(topic_model().encode, tmp_path / "nowhere", ["SciFact"])


def test_cli_mteb_suite_prints_and_writes_the_scores(tmp_path):
    from conftest import run_cli

    from swembed.runtime.folder import write_model_folder

    write_classification(tmp_path / "data", "AmazonCounterfactualClassification")  # the scores go beside, not inside
    model_dir = write_model_folder(tmp_path / "model", np.eye(len(WORDS), dtype=np.float32), WORDS, {}, None)
    out = tmp_path / "scores.json"
    result = run_cli(["eval", model_dir, "--suite", "mteb", "--data", tmp_path / "data", "--tasks",
                      "AmazonCounterfactualClassification", "--json", out], same_process=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["scores"]["AmazonCF-en"] == pytest.approx(100.0)


# --- the self-check on the real data -------------------------------------------------------------------------

def shared_mteb_data() -> Path | None:
    root = Path(os.environ["SWEMBED_DATA"]) if os.environ.get("SWEMBED_DATA") else \
        Path(__file__).resolve().parent.parent.parent / "shared" / "data"
    folder = root / "eval-mteb"
    return folder if (folder / "published_scores.tsv").is_file() else None


def published(model: str) -> dict[str, float]:
    with open(shared_mteb_data() / "published_scores.tsv", encoding="utf-8") as handle:
        return {SHORT_NAMES[r["task"]]: float(r["main_score_x100"]) for r in csv.DictReader(handle, delimiter="\t")
                if r["model"] == model and r["main_score_x100"] != "NA"}


needs_data = pytest.mark.skipif(shared_mteb_data() is None, reason="no eval-mteb data (../shared/data/eval-mteb)")
CLASSIFIERS = ["Banking77Classification", "AmazonCounterfactualClassification", "EmotionClassification",
               "TweetSentimentExtractionClassification"]
FAST = ("AmazonCounterfactualClassification",)  # the others: -m slow


@pytest.fixture(scope="module")
def teacher_encode():
    from swembed.teachers import load_teacher

    return load_teacher("minilm", device="cpu").encode


@needs_data
@pytest.mark.teacher
@pytest.mark.parametrize("task", [pytest.param(t, marks=[] if t in FAST else [pytest.mark.slow])
                                  for t in CLASSIFIERS + ["SciFact"]])
def test_teacher_reproduces_its_published_mteb_scores(task, teacher_encode):
    expected = published("sentence-transformers/all-MiniLM-L6-v2")[SHORT_NAMES[task]]
    scores = evaluate_mteb(teacher_encode, shared_mteb_data(), [task])
    assert scores[SHORT_NAMES[task]] == pytest.approx(expected, abs=0.1)
