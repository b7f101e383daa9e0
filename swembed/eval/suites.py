"""`swembed eval`: the evaluation suites over anything ``swembed.eval.models.load_encoder`` loads.

* ``en``: STS12-16, STS-B test, SICK-R and their mean, and STS-B dev (for choosing settings);
* ``xling``: STS17 en-de, STS-B en vs de/zh/ja, Tatoeba (and BUCC with files), only the languages a table has;
* ``robust``: hidden-vocabulary and context-count scores (``swembed.eval.robust``), swembed folders only;
* ``mteb``: five English MTEB tasks (Banking77, AmazonCF-en, Emotion, TweetSentiment, SciFact) scored by the real
  mteb package on local files (``swembed.eval.mteb_tasks``; data: ``$SWEMBED_DATA/eval-mteb``), and their mean.

Texts are encoded as users encode them: ``encode(texts)``, no language named (``give_lang`` passes the
language instead, for comparison).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from swembed.eval.models import load_encoder
from swembed.eval.sts import DEV, EN_SETS, EvalDataError, evaluate_sts
from swembed.runtime.windows import check_width

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy as np

SUITES = ("en", "xling", "robust", "mteb", "all")  # all = en + xling + robust (mteb reads other data)
DATA_ENV = "SWEMBED_DATA"


def data_dir(given: str | None, sub: str = "eval") -> Path:
    """The evaluation data: the given folder, else ``$SWEMBED_DATA/<sub>``; a clear error when neither exists."""
    if given:
        path = Path(given)
    elif os.environ.get(DATA_ENV):
        path = Path(os.environ[DATA_ENV]) / sub
    else:
        raise EvalDataError(f"no evaluation data: give --data FOLDER or set {DATA_ENV} to the shared data folder")
    if not path.is_dir():
        raise EvalDataError(f"evaluation data folder not found: {path}")
    return path


def suite_data(suite: str) -> str:
    """The sub-folder of ``$SWEMBED_DATA`` a suite reads."""
    return "eval-mteb" if suite == "mteb" else "eval"


def _check_search(suite: str, search: str | None, alpha: float | None, windows: int | None = None) -> None:
    """``--search``, ``--alpha`` and ``--windows`` apply to the mteb suite, ``--alpha`` to ``--search hybrid`` and
    ``--windows`` to a ``--search``."""
    if (search is not None or alpha is not None or windows is not None) and suite != "mteb":
        raise ValueError("--search, --alpha and --windows rank retrieval tasks: they apply to --suite mteb only")
    if alpha is not None and search != "hybrid":
        raise ValueError("--alpha weighs the hybrid search: give --search hybrid with it")
    if windows is not None and search is None:
        raise ValueError("--windows reads documents into windows for swembed's own search: give --search with it")
    check_width(windows)


def _mteb_scores(encode, data: Path, tasks: Sequence[str], split: str, search: str | None, alpha: float | None,
                 searcher, windows: int | None = None) -> dict[str, float]:
    """mteb's scores; with a lexical or hybrid search, each retrieval task's score by swembed's dense search beside,
    as "<task> (dense)" (the dense-only score is always reported beside the lexical channel's)."""
    from swembed.eval.mteb_tasks import RETRIEVAL, SHORT_NAMES, evaluate_mteb

    scores = evaluate_mteb(encode, data, tasks, split, search=search, alpha=alpha, searcher=searcher, windows=windows)
    retrieval = [task for task in tasks if task in RETRIEVAL]
    if search in ("lexical", "hybrid") and retrieval:
        dense = evaluate_mteb(encode, data, retrieval, split, search="dense", searcher=searcher, windows=windows)
        scores.update({f"{SHORT_NAMES[task]} (dense)": dense[SHORT_NAMES[task]] for task in retrieval})
    return scores


def evaluate(spec: str, suite: str, data: Path, *, device: str = "auto", bucc: Path | None = None,
             give_lang: bool = False, tasks: list[str] | None = None,
             split: str = "test", search: str | None = None,
             alpha: float | None = None, windows: int | None = None) -> tuple[str, dict[str, float]]:
    """(kind of model, scores) for one suite; ``tasks``, ``split`` (test or dev), ``search``, ``alpha`` and
    ``windows`` (how retrieval tasks rank: ``swembed.integrations.mteb.mteb_encoder``) apply to ``mteb``."""
    from swembed._extras import require
    from swembed.eval.xling import evaluate_xling

    require("eval", "scipy")
    if suite not in SUITES:
        raise ValueError(f"--suite must be one of {SUITES}, got {suite!r}")
    _check_search(suite, search, alpha, windows)
    kind, encode, languages = load_encoder(spec, device=device)
    scores: dict[str, float] = {}
    if suite == "mteb":
        require("mteb", "mteb", "datasets")
        from swembed.eval.mteb_tasks import TASKS

        if search is not None and kind != "swembed":
            raise ValueError(f"--search ranks with a swembed table's own search; {spec} is a {kind} model")
        searcher = getattr(encode, "__self__", None) if search is not None else None  # the table of table.encode
        return kind, _mteb_scores(encode, data, tasks or TASKS, split, search, alpha, searcher, windows)
    lang_encode: Callable[..., np.ndarray] = encode  # a multilingual swembed table's encode also takes lang=
    if suite in ("en", "all"):
        english = (lambda texts: lang_encode(texts, lang="en")) if give_lang and languages else encode
        scores.update(evaluate_sts(english, data, EN_SETS))
        if (data / "stsb" / "sts-dev.csv").is_file():  # where settings are chosen (never on the sets above)
            scores["STS-B dev"] = evaluate_sts(english, data, (DEV,))[DEV]
    if suite in ("xling", "all"):
        if give_lang and languages:
            by_lang = lambda texts, lang: lang_encode(texts, lang=lang)  # noqa: E731
        else:
            by_lang = lambda texts, lang: encode(texts)  # noqa: E731
        scores.update(evaluate_xling(by_lang, data, bucc, languages or None))
    if suite in ("robust", "all") and kind == "swembed":
        from swembed.eval.robust import robust_scores

        scores.update(robust_scores(spec, data))
    return kind, scores
