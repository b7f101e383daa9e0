"""Shared fixtures: tiny corpora and model folders written by the tests, small build configurations, the CLI."""
from __future__ import annotations

import contextlib
import io
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

GUARD = Path(__file__).resolve().parent / "teacher_guard"
_UNGUARDED = {"PYTHONPATH": os.environ.get("PYTHONPATH")}
WORKERS = 2  # processes for a run of the whole suite (or a tier of it: -m "not teacher")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# The teacher in float32 on every CPU (teacher_dtype "auto" would pick bfloat16 on CPUs with AVX512-BF16), so the
# suite computes the same on either CPU kind; tests/test_teacher_dtype.py checks the choice itself. "auto" runs a
# float32 MiniLM on ONNX Runtime where it is installed (the test extra brings it: tests/test_teacher_runtime.py).
os.environ["SWEMBED_NATIVE_BF16"] = "0"

try:  # property tests: the same examples every run and no time limit per example (the machine may be loaded)
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("swembed", deadline=None, derandomize=True, database=None)
    _hypothesis_settings.load_profile("swembed")
except ImportError:  # the test extra brings hypothesis; without it only the property tests fail to import
    pass


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """A run that names no test file (``pytest``, ``pytest -m "not teacher"``, ``pytest tests``) runs in ``WORKERS``
    processes (pytest-xdist, a test dependency), a file each at a time so that a module's fixtures (Spark's session)
    start once, with the machine's threads shared among them: each worker and the commands its tests start get
    OMP_NUM_THREADS (or the CPU count) divided by the workers, so that two workers' numeric threads do not wait on
    each other. A run that names test files or tests, ``-n`` given (``-n 0``: one process), ``--pdb`` or
    ``--collect-only`` is left alone; so is a machine with one CPU or without pytest-xdist."""
    if "PYTEST_XDIST_WORKER" in os.environ:  # a worker (its -n is reset to None): never start workers of its own
        return
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    named = config.args_source == pytest.Config.ArgsSource.ARGS and not all(Path(a).is_dir() for a in config.args)
    if (named or not config.pluginmanager.hasplugin("xdist") or config.option.numprocesses is not None or cpus < 2
            or config.getoption("usepdb") or config.getoption("collectonly")):
        return
    config.option.numprocesses = min(WORKERS, cpus)
    if config.option.dist == "no":
        config.option.dist = "loadfile"
        # files in collection order: Spark's first (pytest_collection_modifyitems)
        config.option.loadscopereorder = False
    given = os.environ.get("OMP_NUM_THREADS", "")
    threads = str(max(1, (int(given) if given.isdigit() else cpus) // config.option.numprocesses))
    os.environ.update({name: threads for name in THREAD_VARIABLES})


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A test that loads a teacher carries the ``teacher`` marker: without it, resolving one by name fails, from
    its fixtures on (module-scoped ones included), in this process and in every Python subprocess it starts
    (tests/teacher_guard/sitecustomize.py)."""
    from teacher_guard.sitecustomize import ENV, forbidding

    import swembed.teachers
    import swembed.teachers.registry as registry

    resolve = _UNGUARDED.setdefault("resolve", registry.resolve_teacher)
    if item.get_closest_marker("teacher"):
        registry.resolve_teacher = swembed.teachers.resolve_teacher = resolve
        os.environ.pop(ENV, None)
        paths = [_UNGUARDED["PYTHONPATH"]]
    else:
        registry.resolve_teacher = swembed.teachers.resolve_teacher = forbidding(resolve, registry)
        os.environ[ENV] = "1"
        paths = [str(GUARD), _UNGUARDED["PYTHONPATH"]]
    if any(paths):
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    else:
        os.environ.pop("PYTHONPATH", None)


NOUNS = ["cat", "dog", "bird", "teacher", "student", "river", "city", "garden", "doctor", "child", "car", "house",
         "ship", "song", "book", "market", "forest", "mountain", "engine", "letter"]
VERBS = ["sees", "likes", "finds", "paints", "visits", "follows", "builds", "reads", "carries", "remembers"]
ADJS = ["small", "happy", "green", "old", "quiet", "bright", "strange", "heavy", "famous", "gentle"]


def make_sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.sample(NOUNS, 2)
        sentence = f"The {rng.choice(ADJS)} {a} {rng.choice(VERBS)} the {rng.choice(ADJS)} {b}"
        if i % 3 == 0:
            sentence += f" near the {rng.choice(NOUNS)}"
        if i % 7 == 0:
            sentence += " with goodness"
        out.append(sentence + f" number {i}.")
    return out


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(make_sentences(400)) + "\n", encoding="utf-8")
    return path


def small_build_args(corpus: Path, out: Path) -> list[str]:
    """CLI flags for a build that takes seconds on CPU with the real MiniLM teacher."""
    return ["build", "--teacher", "minilm", "--corpus", str(corpus), "--out", str(out), "--dim", "32",
            "--pca-sentences", "300", "--distill-steps", "60", "--batch-tokens", "512", "--eval-every", "20",
            "--unit-sentences", "64", "--checkpoint-seconds", "0", "--no-teacher-words", "--quiet"]


def run_cli(args, env_extra=None, cwd=None, *, same_process=False) -> subprocess.CompletedProcess:
    """``python -m swembed.cli ARGS`` in a subprocess, as a user runs it. ``same_process``: ``swembed.cli.main``
    in this process, its stdout and stderr captured, for builds whose subprocess would spend most of its time
    importing torch and transformers again. Not seen then: what is printed at import (e.g. a warning), and log
    records, which go to pytest's log capture instead of the returned stderr."""
    args = [str(arg) for arg in args]
    if not same_process:
        env = {**os.environ, **(env_extra or {})}
        return subprocess.run([sys.executable, "-m", "swembed.cli", *args], capture_output=True, text=True, env=env,
                              cwd=cwd)
    assert env_extra is None and cwd is None, "a different environment or folder needs a subprocess"
    from swembed.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


TINY_WORDS = ["the", "cat", "sat", "on", "mat", "good", "dog", "a"]


def write_tiny_model(folder: Path, tokenizer: bool = True, dim: int = 8) -> Path:
    """A model folder of ``TINY_WORDS`` whose WordPiece sub-word tokenizer splits goodness into good + ##ness
    (so the back-off reads it as "good"); ``tokenizer=False`` declares a table without one."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from swembed.runtime.folder import write_model_folder

    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(TINY_WORDS)}, "##ness": len(TINY_WORDS) + 1}
    sub = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    sub.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    table = np.random.default_rng(0).normal(size=(len(TINY_WORDS), dim)).astype(np.float32)
    return write_model_folder(folder, table, TINY_WORDS, {"tokenization": {"oov_backoff": "teacher_prefix"}},
                              sub.to_str() if tokenizer else None)


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    return write_tiny_model(tmp_path / "tiny-model")


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (or the file itself), by relative name: to check that nothing changed."""
    path = Path(path)
    if path.is_file():
        return {"": path.read_bytes()}
    return {str(f.relative_to(path)): f.read_bytes() for f in sorted(path.rglob("*")) if f.is_file()}


def pytest_collection_modifyitems(config, items):
    """The Spark tests run first (with ``-n``, the longest file starts at once instead of ending the run alone).
    Tests marked ``slow`` run only when asked for by a marker expression naming them (``-m slow``)."""
    items.sort(key=lambda item: item.get_closest_marker("spark") is None)  # stable: otherwise in collection order
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
