"""MTEB tasks read from local files, scored by the real ``mteb`` package (no hub access).

mteb skips its download when ``task.dataset`` is set and ``task.data_loaded`` is True, so each task here is
``mteb.get_task(name)`` with its dataset filled from the folder ``../shared/data/eval-mteb`` describes (its
README gives the formats): ``<Task>/{train,validation,test}.tsv`` (``label<TAB>text``) for classification, BEIR
files for SciFact. ``evaluate_mteb`` scores an encoder on them through ``swembed.integrations.mteb``.

Splits: ``test`` is MTEB's main score (for reports); ``dev`` is for choosing settings and never reads a test
file: every fifth train row (rows 4, 9, 14, ...) is held out as the evaluation split and MTEB's undersampling
draws from the other rows, with the task's own samples per label and classifier.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from swembed.eval.sts import EvalDataError
from swembed.integrations.mteb import mteb_encoder, require_mteb

CLASSIFICATION = ("Banking77Classification", "AmazonCounterfactualClassification", "EmotionClassification",
                  "TweetSentimentExtractionClassification")
RETRIEVAL = ("SciFact",)
TASKS = CLASSIFICATION + RETRIEVAL
SHORT_NAMES = {"Banking77Classification": "Banking77", "AmazonCounterfactualClassification": "AmazonCF-en",
               "EmotionClassification": "Emotion", "TweetSentimentExtractionClassification": "TweetSentiment",
               "SciFact": "SciFact"}
SUBSET = {"AmazonCounterfactualClassification": "en"}  # the subset of a multilingual task we score
# Label ids as in MTEB's hub copies (other tasks: sorted names); only the positive class of AmazonCF's average
# precision depends on them, never the main score.
LABEL_ORDER = {"AmazonCounterfactualClassification": ("not-counterfactual", "counterfactual"),
               "EmotionClassification": ("sadness", "joy", "love", "anger", "fear", "surprise")}
DEV_EVERY = 5  # dev split: every fifth train row is held out for scoring


def local_sts_task(name: str, data_dir: str | Path):
    """The mteb STS task ``name`` (STS12..16, STSBenchmark, SICK-R) with its test split read from local files."""
    mteb = require_mteb()
    from datasets import Dataset

    from swembed.eval.sts import load_pair_set

    pairs = load_pair_set(data_dir, name)
    task = mteb.get_task(name)
    task.dataset = {"test": Dataset.from_dict({"sentence1": pairs.s1, "sentence2": pairs.s2,
                                               "score": pairs.gold.tolist()})}
    task.data_loaded = True
    return task


def read_labelled(path: Path) -> tuple[list[str], list[str]]:
    """(labels, texts) of a ``label<TAB>text`` file: split on the first TAB only, nothing stripped but the newline."""
    if not path.is_file():
        raise EvalDataError(f"{path}: file not found")
    labels, texts = [], []
    with path.open(encoding="utf-8", newline="\n") as handle:
        for number, line in enumerate(handle, 1):
            line = line[:-1] if line.endswith("\n") else line
            label, tab, text = line.partition("\t")
            if not tab or not label:
                raise EvalDataError(f"{path}:{number}: expected 'label<TAB>text'")
            labels.append(label)
            texts.append(text)
    if not texts:
        raise EvalDataError(f"{path}: no rows")
    return labels, texts


def _list_columns_dataset(columns: dict[str, list]):
    """A ``datasets.Dataset`` whose ``dataset[column]`` is a plain list.

    datasets 5 returns a lazy ``Column`` there, whose item access costs 0.1-7 ms, and mteb's undersampling reads
    the label column item by item, 10 times over the train rows (Banking77: minutes instead of a second). The
    data and mteb's code are unchanged; ``select_columns`` (which mteb calls) keeps the class.
    """
    from datasets import Dataset

    class ListColumns(Dataset):
        def __getitem__(self, key):
            if isinstance(key, str) and self._indices is None:
                return self.data.column(key).to_pylist()
            return super().__getitem__(key)

    return ListColumns(Dataset.from_dict(columns).data)


def local_classification_task(name: str, data_dir: str | Path, split: str = "test"):
    """The mteb classification task ``name`` on local files; ``split`` ``test`` (MTEB's score) or ``dev`` (train
    rows only: see the module docstring)."""
    mteb = require_mteb()
    from datasets import DatasetDict

    if split not in ("test", "dev"):
        raise ValueError(f"split must be 'test' or 'dev', got {split!r}")
    folder = Path(data_dir) / name
    names, texts = read_labelled(folder / "train.tsv")
    order = LABEL_ORDER.get(name) or sorted(set(names))
    ids = {label: i for i, label in enumerate(order)}

    def label_ids(path: Path, found: list[str]) -> list[int]:
        unknown = sorted(set(found) - set(ids))
        if unknown:
            raise EvalDataError(f"{path}: unknown label {unknown[0]!r} (expected one of {', '.join(order)})")
        return [ids[label] for label in found]

    labels = label_ids(folder / "train.tsv", names)
    if split == "test":
        train: dict[str, list] = {"text": texts, "label": labels}
        test_names, test_texts = read_labelled(folder / "test.tsv")
        test_labels = label_ids(folder / "test.tsv", test_names)
        held_out: dict[str, list] = {"text": test_texts, "label": test_labels}
    else:
        keep = [i for i in range(len(texts)) if i % DEV_EVERY != DEV_EVERY - 1]
        out = [i for i in range(len(texts)) if i % DEV_EVERY == DEV_EVERY - 1]
        train = {"text": [texts[i] for i in keep], "label": [labels[i] for i in keep]}
        held_out = {"text": [texts[i] for i in out], "label": [labels[i] for i in out]}
    subset = SUBSET.get(name)
    task = mteb.get_task(name, hf_subsets=[subset] if subset else None)
    splits = DatasetDict({"train": _list_columns_dataset(train), "test": _list_columns_dataset(held_out)})
    task.dataset = {subset: splits} if subset else splits
    task.metadata.eval_splits = ["test"]
    task.data_loaded = True
    return task


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise EvalDataError(f"{path}: file not found")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise EvalDataError(f"{path}:{number}: not JSON ({exc.msg})") from None
    return rows


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """query id -> {document id: relevance} from a BEIR ``query-id<TAB>corpus-id<TAB>score`` file with header."""
    if not path.is_file():
        raise EvalDataError(f"{path}: file not found")
    qrels: dict[str, dict[str, int]] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines[1:], 2):
        parts = line.split("\t")
        if len(parts) != 3 or not parts[2].strip().lstrip("-").isdigit():
            raise EvalDataError(f"{path}:{number}: expected 'query-id<TAB>corpus-id<TAB>score'")
        qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return qrels


def local_retrieval_task(name: str, data_dir: str | Path):
    """The mteb retrieval task ``name`` (BEIR layout: corpus.jsonl, queries.jsonl, qrels/test.tsv), test split."""
    mteb = require_mteb()
    from datasets import Dataset

    folder = Path(data_dir) / name
    docs = _read_jsonl(folder / "corpus.jsonl")
    queries = _read_jsonl(folder / "queries.jsonl")
    try:
        corpus = Dataset.from_dict({"id": [str(d["_id"]) for d in docs], "title": [d.get("title", "") for d in docs],
                                    "text": [d["text"] for d in docs]})
        query_set = Dataset.from_dict({"id": [str(q["_id"]) for q in queries], "text": [q["text"] for q in queries]})
    except KeyError as exc:
        raise EvalDataError(f"{folder}: a corpus or query record has no {exc.args[0]!r} field") from None
    qrels = read_qrels(folder / "qrels" / "test.tsv")
    task = mteb.get_task(name)
    task.dataset = {"default": {"test": {"corpus": corpus, "queries": query_set, "relevant_docs": qrels,
                                         "top_ranked": None}}}
    task.data_loaded = True
    return task


def local_task(name: str, data_dir: str | Path, split: str = "test"):
    """One of ``TASKS`` on local files (retrieval has no dev split here: lab/mteb_levers.py makes one from the
    corpora)."""
    if name in CLASSIFICATION:
        return local_classification_task(name, data_dir, split)
    if name in RETRIEVAL:
        if split != "test":
            raise ValueError(f"{name} has only its test split here")
        return local_retrieval_task(name, data_dir)
    raise ValueError(f"unknown task {name!r}: one of {', '.join(TASKS)}")


def evaluate_mteb(encode: Callable[[list[str]], np.ndarray], data_dir: str | Path,
                  tasks: Sequence[str] = TASKS, split: str = "test", dim: int | None = None,
                  timings: dict[str, float] | None = None, search: str | None = None, alpha: float | None = None,
                  searcher=None, windows: int | None = None) -> dict[str, float]:
    """Main score x 100 of each task (short names, see ``SHORT_NAMES``) and their mean, by the real mteb.

    ``timings``, when given, receives each task's seconds. ``search`` (with ``searcher``, the swembed model that
    ``encode`` encodes with) ranks retrieval tasks by ``SearchIndex.search`` in that mode (``mteb_encoder``; with
    ``windows``, each document's windows of that many words beside it)."""
    mteb = require_mteb()

    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise EvalDataError(f"MTEB data folder not found: {data_dir}")
    model = (mteb_encoder(SimpleNamespace(encode=encode, dim=dim)) if search is None
             else mteb_encoder(searcher, search=search, alpha=alpha, windows=windows))
    scores: dict[str, float] = {}
    for name in tasks:
        start = time.perf_counter()
        task = local_task(name, data_dir, split)
        result = mteb.evaluate(model, task, cache=None, show_progress_bar=False)
        subset = SUBSET.get(name, "default")
        entry = next(s for s in result.task_results[0].scores["test"] if s["hf_subset"] == subset)
        scores[SHORT_NAMES[name]] = 100 * float(entry["main_score"])
        if timings is not None:
            timings[SHORT_NAMES[name]] = time.perf_counter() - start
    if len(tasks) > 1:
        scores["mean"] = float(np.mean([scores[SHORT_NAMES[name]] for name in tasks]))
    return scores
