"""Issue 81 ("Nothing lost, third layer"): a table folder is untrusted input, every table folder swembed writes
loads, and ``encode`` takes what numpy and pandas users pass. Each test is a row of docs/what-happens-when.md
(``@promise``, as in test_bad_input.py), with a property test (hypothesis) per class."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_WORDS, run_cli, write_tiny_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_bad_input import error_line, promise, promised, refused_encode, refused_load  # noqa: F401 - a fixture

import swembed
from swembed.runtime.folder import ModelFolderError, write_model_folder
from swembed.runtime.storage import quantize_int4
from swembed.runtime.tokenizer import TokenizationRules

PROPERTY = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TEXTS = ["the cat sat on the mat", "a good dog", "goodness", "", "zebra"]


def patch_config(folder: Path, patch: dict, tokenization: dict | None = None) -> Path:
    path = folder / "config.json"
    config = {**json.loads(path.read_text()), **patch}
    if tokenization:
        config["tokenization"] = {**config.get("tokenization", {}), **tokenization}
    path.write_text(json.dumps(config))
    return path


def copy_of(source: Path, folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(source, folder)
    return folder


def compact_table(folder: Path, storage: str, words: list[str] = TINY_WORDS, dim: int = 8, grams: int = 0,
                  seed: int = 0) -> Path:
    """A table of ``words`` (plus ``grams`` gram rows) in int4, codebook or a dense dtype, written by
    ``write_model_folder`` as ``swembed shrink`` writes it."""
    labels = list(words) + [f"<gram {i}>" for i in range(grams)]
    dense = np.random.default_rng(seed).normal(size=(len(labels), dim)).astype(np.float32)
    config: dict = {"tokenization": {"oov_backoff": "pieces" if grams else "none"}}
    if grams:
        config["grams"] = {"rows": [len(words), len(labels)]}
    arrays: dict = {}
    if storage == "int4":
        table, arrays["scales"] = quantize_int4(dense)
        config.update(storage={"kind": "int4"}, dim=dim)
    elif storage == "codebook":
        shared = dense[: max(2, len(labels) // 3)]
        arrays["codes"] = (np.arange(len(labels)) % len(shared)).astype(np.uint16)
        arrays["scales"] = np.linspace(0.5, 2, len(labels)).astype(np.float32)
        table = shared.astype(np.float16)
        config.update(storage={"kind": "codebook", "centroids": len(shared)})
    elif storage == "int8":
        from swembed.integrations.formats import quantize_int8

        table, arrays["scales"] = quantize_int8(dense)
    else:
        table = dense.astype(storage)
    return write_model_folder(folder, table, labels, config, None, arrays)


# --- 1. every table folder swembed writes loads ---------------------------------------------------------------


@promise("`swembed export --format npy` of an int4 or codebook table (`swembed shrink --storage int4`), any "
         "`--dtype`; any table folder whose files would not load together",
         "(issue 81) exit 0, but the export did not load: its `config.json` still declared the int4 (codebook) "
         "storage over a dense `embeddings.npy`",
         "the export is a dense table of the rows (its `config.json` says so) and loads; every table folder swembed "
         "writes (build, shrink, export, ensemble, `model.save`) is read back through the loader before it replaces "
         "anything, and is not written when it would not load",
         "<out> not written: the table folder would not load (<the loader's reason>)")
def test_every_table_folder_written_loads(tmp_path, tiny_model, promised):
    for storage in ("int4", "codebook"):
        args = ["shrink", tiny_model, "--storage", storage, "--out", tmp_path / storage]
        assert run_cli(args + (["--centroids", "4"] if storage == "codebook" else [])).returncode == 0
        source = swembed.load(tmp_path / storage)
        for dtype in ("float32", "float16", "int8"):
            out = tmp_path / f"{storage}-{dtype}"
            result = run_cli(["export", tmp_path / storage, "--format", "npy", "--dtype", dtype, "--out", out])
            assert result.returncode == 0, result.stderr
            exported = swembed.load(out)
            assert "storage" not in exported.config and exported.config["dtype"] == dtype
            assert np.allclose(exported.encode(TEXTS), source.encode(TEXTS), atol=0.02)
    table = np.random.default_rng(0).normal(size=(len(TINY_WORDS), 8)).astype(np.float32)
    for config in ({"storage": {"kind": "int4"}}, {"grams": {"rows": [4, 30]}}):
        with pytest.raises(ModelFolderError) as caught:
            write_model_folder(tmp_path / "never", table, TINY_WORDS, config, None)
        assert promised.fits(str(caught.value)) and str(tmp_path / "never") in str(caught.value)
        assert not (tmp_path / "never").exists() and not list(tmp_path.glob(".never*"))


@promise("random tables of every storage (hypothesis: float32, float16, int8, int4, codebook; with gram rows or "
         "not) exported as npy in every dtype",
         "(issue 81) an int4 or codebook source gave an export that did not load",
         "each export loads and encodes as its source does (to the dtype's precision)")
@settings(PROPERTY, max_examples=20)
@given(storage=st.sampled_from(["float32", "float16", "int8", "int4", "codebook"]),
       dtype=st.sampled_from(["float32", "float16", "int8"]), grams=st.sampled_from([0, 16]),
       dim=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_exports_of_every_storage_load(tmp_path, storage, dtype, grams, dim, seed):
    with tempfile.TemporaryDirectory(dir=tmp_path) as root:
        source = compact_table(Path(root) / "source", storage, dim=dim, grams=grams, seed=seed)
        out = Path(root) / "out"
        assert run_cli(["export", source, "--format", "npy", "--dtype", dtype, "--out", out],
                       same_process=True).returncode == 0
        texts = [*TEXTS, "unknownish wordsz"]  # means, not normalised: a mean near 0 may change sign in int8
        got = swembed.load(out).encode(texts, normalize=False)
        want = swembed.load(source).encode(texts, normalize=False)
        assert np.allclose(got, want, atol=0.05), (got, want)


# --- 2. a table folder is untrusted input ---------------------------------------------------------------------


@promise("a `config.json` `tokenization.word_pattern` that backtracks catastrophically (`(?:a+)+b`), or any pattern "
         "that is not runs of one character class",
         "(issue 81) loaded; every encode (and dedup) of a line of 40 `a` then hung",
         "refused on load (`ModelFolderError`) naming the file and the key; a recipe's `[tokenization] word_pattern` "
         "the same, before any work; the patterns swembed writes (`[^\\W_]+`) load as before",
         "<folder>/config.json: tokenization word_pattern must be runs of one character class, [...]+ or \\w+ "
         "(several joined by <the rest>")
@pytest.mark.parametrize("pattern", [r"(?:a+)+b", r"(?:a|a)*c", r"\w+\d+", r"[a-z]+(?=x)", r"(?i)[a-z]+", "a+"])
def test_a_word_pattern_that_can_backtrack_is_refused(tmp_path, tiny_model, promised, pattern):
    config = patch_config(tiny_model, {}, {"word_pattern": pattern})
    message = (f"{config}: tokenization word_pattern must be runs of one character class, [...]+ or \\w+ (several "
               f"joined by |), which match in linear time; got {pattern!r}")
    assert refused_load(tiny_model, promised) == message
    assert refused_encode(tmp_path, tiny_model, promised) == message
    recipe = tmp_path / "r.toml"
    recipe.write_text(f"[tokenization]\nword_pattern = '{pattern}'\n")
    result = run_cli(["build", "--recipe", recipe, "--corpus", recipe, "--out", tmp_path / "model"])
    assert result.returncode == 2 and "word_pattern must be runs of one character class" in result.stderr
    for safe in (r"[^\W_]+", r"\w+", r"[a-z]+|\d+"):
        patch_config(tiny_model, {}, {"word_pattern": safe})
        assert swembed.load(tiny_model).encode(["a" * 40 + " the cat"]).shape == (1, 8)


REGEX_PIECES = st.sampled_from(["a", "b", "[ab]", "[^\\W_]", "\\w", "\\d", ".", "(?:a+)", "(?:a|b)", "(?:a|a)",
                                "(a)", "[a-z]", "x"])
REGEX_QUANTIFIERS = st.sampled_from(["", "+", "*", "?", "{2,}", "+?", "{1,3}"])
REGEX = st.lists(st.tuples(REGEX_PIECES, REGEX_QUANTIFIERS), min_size=1, max_size=4).map(
    lambda parts: "".join(p + q for p, q in parts)) | st.lists(
    st.tuples(REGEX_PIECES, REGEX_QUANTIFIERS).map("".join), min_size=2, max_size=3).map("|".join)


def _linear(tree) -> bool:
    """Whether a parsed regex is alternatives of one single-character item repeated (``X+``), which the engine
    matches without backtracking: nothing follows the repeat in its branch, nothing is nested."""
    import re._constants as c  # the parser's own tree, so the test does not trust the grammar it checks

    items = list(tree)
    if len(items) == 1 and items[0][0] is c.BRANCH:
        return all(_linear(branch) for branch in items[0][1][1])
    if len(items) != 1 or items[0][0] is not c.MAX_REPEAT:
        return False
    low, high, body = items[0][1]
    return low == 1 and high == c.MAXREPEAT and len(body) == 1 and body[0][0] in (c.IN, c.LITERAL, c.ANY,
                                                                                  c.CATEGORY, c.NOT_LITERAL)


@promise("random word patterns (hypothesis: literals, classes, groups, nested and lazy quantifiers, alternations)",
         "(issue 81) any pattern that compiled was accepted, catastrophic ones included",
         "each: refused in one line naming the key, or (parsed by Python's own regex parser) alternatives of one "
         "character class repeated, with nothing after the repeat: matching is linear in the text")
@settings(PROPERTY, max_examples=80)
@given(pattern=REGEX)
def test_accepted_word_patterns_match_in_linear_time(pattern):
    import re._parser as parser

    try:
        TokenizationRules(word_pattern=pattern)
    except ValueError as exc:
        assert str(exc).startswith("tokenization word_pattern ") and "\n" not in str(exc)
        return
    assert _linear(parser.parse(pattern)), pattern


@promise("a FIFO (or a folder) named `extra.npy`, `embeddings.npy`, `config.json`, `vocab.txt` or "
         "`tokenizer.json` in a table folder",
         "(issue 81) `swembed encode` hung reading the FIFO (every `*.npy` was opened without a regular-file check)",
         "refused on load in one line naming the file, which is never opened",
         "<folder>/<file>: not a regular file (<what it is>); a table folder holds plain files")
@pytest.mark.parametrize("name", ["extra.npy", "embeddings.npy", "config.json", "vocab.txt", "tokenizer.json"])
def test_special_files_and_oversized_files_are_refused(tmp_path, tiny_model, promised, name):
    path = tiny_model / name
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    # in a child process: a reader that opens the FIFO waits for a writer that never comes (the guard: 10 minutes)
    code = f"import swembed; swembed.load({str(tiny_model)!r})"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert result.returncode == 1 and result.stderr.splitlines()[-1] == (
        f"swembed.runtime.folder.ModelFolderError: {path}: not a regular file (a FIFO (named pipe)); a table folder "
        "holds plain files"), result.stderr
    assert refused_encode(tmp_path, tiny_model, promised).endswith("not a regular file (a FIFO (named pipe)); a table "
                                                                   "folder holds plain files")
    path.unlink()
    path.mkdir()
    assert refused_load(tiny_model, promised) == f"{path}: not a regular file (a folder); a table folder holds " \
                                                 "plain files"


@promise("a `config.json` of 17 MB, a `vocab.txt` far larger than its rows can be, a `.npy` with bytes beyond what "
         "its header declares; a link to a regular file",
         "(issue 81) read whole, whatever their size",
         "refused on load in one line naming the file, before it is read (a `config.json` up to 16 MiB, a "
         "`tokenizer.json` up to 256 MiB, a `vocab.txt` up to 1 KiB a row); a link to a regular file (as in the "
         "Hugging Face cache) loads",
         "<folder>/<file>: <n> bytes, more than the <limit> such a file may hold; not a table's file",
         "<folder>/<file>.npy: <n> bytes, but its header declares <m>; a damaged .npy file")
def test_oversized_files_are_refused_unread(tmp_path, tiny_model, promised):
    fresh = copy_of(tiny_model, tmp_path / "fresh")
    with open(fresh / "config.json", "r+b") as handle:  # sparse: 17 MB of nothing after the JSON
        handle.truncate(17 << 20)
    assert refused_load(fresh, promised) == f"{fresh / 'config.json'}: {17 << 20:,} bytes, more than the " \
                                            f"{16 << 20:,} such a file may hold; not a table's file"
    fresh = copy_of(tiny_model, tmp_path / "fresh")
    with open(fresh / "vocab.txt", "r+b") as handle:
        handle.truncate(2 << 20)
    assert "vocab.txt: 2,097,152 bytes, more than the" in refused_load(fresh, promised)
    fresh = copy_of(tiny_model, tmp_path / "fresh")
    with open(fresh / "embeddings.npy", "ab") as handle:
        handle.write(b"\0" * 100)
    size = (fresh / "embeddings.npy").stat().st_size
    assert refused_load(fresh, promised) == f"{fresh / 'embeddings.npy'}: {size:,} bytes, but its header declares " \
                                            f"{size - 100:,}; a damaged .npy file"
    fresh = copy_of(tiny_model, tmp_path / "fresh")
    (tmp_path / "elsewhere.npy").write_bytes((fresh / "embeddings.npy").read_bytes())
    (fresh / "embeddings.npy").unlink()
    (fresh / "embeddings.npy").symlink_to(tmp_path / "elsewhere.npy")  # as in the Hugging Face cache: loads
    assert swembed.load(fresh).encode(["the cat"]).shape == (1, 8)


@promise("`oov_weight = 1e300` (or 1e-300, 0) in `config.json`, an ensemble weight of 1e308 or 1e-300",
         "(issue 81) loaded; `encode` then refused blaming \"the table's values\" (1e300 rounds to infinity in "
         "float32); 1e-300 gave NaN",
         "refused on load naming the key: every weight of the mean lies between 1e-06 and 1e+06 (no float32 sum "
         "overflows, no share underflows); a recipe's or `swembed shrink --oov-weight` the same before any work",
         "<folder>/config.json: tokenization oov_weight must be between 1e-06 and 1e+06, got <value>",
         "<folder>/config.json: ensemble subspace <i> weight must be between 1e-06 and 1e+06 (weights are relative: "
         "scale them all), got <value>")
@pytest.mark.parametrize("weight", [1e300, 1e-300, 1e7, 0])
def test_weights_that_can_overflow_an_encode_are_refused(tmp_path, tiny_model, promised, weight):
    config = patch_config(tiny_model, {}, {"oov_weight": weight})
    expected = f"{config}: tokenization oov_weight must be between 1e-06 and 1e+06, got {weight!r}"
    assert refused_load(tiny_model, promised) == expected
    assert refused_encode(tmp_path, tiny_model, promised) == expected
    patch_config(tiny_model, {"ensemble": {"subspaces": [{"dim": 4, "weight": 1.0}, {"dim": 4, "weight": weight}]}},
                 {"oov_weight": 1.0})
    if weight:
        assert refused_load(tiny_model, promised) == (
            f"{config}: ensemble subspace 1 weight must be between 1e-06 and 1e+06 (weights are relative: scale them "
            f"all), got {json.dumps(weight)}")
    result = run_cli(["shrink", tiny_model, "--oov-weight", str(weight or 1e9), "--out",
                      tmp_path / "s"])
    assert result.returncode == 2 and "oov_weight must be between 1e-06 and 1e+06" in result.stderr


@promise("random numeric fields of `config.json` (hypothesis: `oov_weight` and ensemble weights of any float, "
         "texts of unknown words)",
         "(issue 81) weights that loaded but overflowed (or underflowed to NaN) at encode",
         "each: refused on load in one `ModelFolderError` line naming the key, or every encode gives finite vectors "
         "of norm 0 or 1")
@settings(PROPERTY, max_examples=40)
@given(oov=st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1e-6, 1e6, 5e-7, 2e6]),
       weights=st.lists(st.floats(min_value=1e-320, allow_infinity=False, allow_nan=False), min_size=2, max_size=2))
def test_accepted_weights_never_overflow_an_encode(tmp_path, oov, weights):
    with tempfile.TemporaryDirectory(dir=tmp_path) as root:
        folder = compact_table(Path(root) / "t", "float32", grams=16)
        patch_config(folder, {"ensemble": {"subspaces": [{"dim": 4, "weight": w} for w in weights]}},
                     {"oov_weight": oov})
        try:
            model = swembed.load(folder)
        except ModelFolderError as exc:
            assert re.search(r"config.json: (tokenization oov_weight|ensemble subspace)", str(exc)), exc
            return
        vectors = model.encode([*TEXTS, "qqqq zzzz the", "x" * 5000])
        norms = np.linalg.norm(vectors, axis=1)
        assert np.isfinite(vectors).all() and np.all(np.isclose(norms, 1, atol=1e-5) | (norms == 0)), norms


@promise("an `embeddings.npy` (or `scales.npy`, `codes.npy`, any `*.npy`) that is a text file, a pickle or random "
         "bytes",
         "(issue 81) \"This file contains pickled (object) data. If you trust the file you can load it unsafely using "
         "the `allow_pickle=` keyword argument\": advice to run what the file holds",
         "refused on load naming the file; `.npy` files are read with `allow_pickle=False` and never unpickled; the "
         "message gives no such advice",
         "<folder>/<file>.npy: not a .npy array file (it does not start with NumPy's magic bytes \\x93NUMPY)",
         "<folder>/<file>.npy: unreadable or truncated .npy file (<numpy's reason>)")
def test_a_npy_file_that_is_not_an_array_is_refused_honestly(tmp_path, tiny_model, promised):
    import pickle

    table = tiny_model / "embeddings.npy"
    table.write_text("hello, not an array\n")
    assert refused_load(tiny_model, promised) == (f"{table}: not a .npy array file (it does not start with NumPy's "
                                                  "magic bytes \\x93NUMPY)")
    table.write_bytes(pickle.dumps(["never", "run"]))
    assert "allow_pickle" not in refused_load(tiny_model, promised)
    np.save(table, np.array([object(), None], dtype=object), allow_pickle=True)
    message = refused_load(tiny_model, promised)
    assert message.startswith(f"{table}: unreadable or truncated .npy file (") and "allow_pickle" not in message


@promise("random bytes as any `.npy` file of a table folder (hypothesis: cut, overwritten, a pickle, text)",
         "(issue 81) some messages advised `allow_pickle`",
         "each: refused in one `ModelFolderError` line naming the file, never advising to unpickle, or the table "
         "loads and encodes finite vectors")
@settings(PROPERTY, max_examples=40)
@given(name=st.sampled_from(["embeddings.npy", "extra.npy"]), keep=st.integers(0, 400), noise=st.binary(max_size=64))
def test_random_bytes_in_a_npy_file(tmp_path, name, keep, noise):
    with tempfile.TemporaryDirectory(dir=tmp_path) as root:
        folder = write_tiny_model(Path(root) / "t")
        path = folder / name
        original = (folder / "embeddings.npy").read_bytes()
        path.write_bytes(original[:keep] + noise)
        try:
            vectors = swembed.load(folder).encode(TEXTS)
        except ModelFolderError as exc:
            assert str(exc).startswith(f"{path}: ") and "allow_pickle" not in str(exc) and "\n" not in str(exc)
            return
        assert np.isfinite(vectors).all()


@promise("`swembed.load(<a file>)` (say `m/config.json`), `swembed.load('')`, `swembed encode ''`",
         "(issue 81) a file: \"model folder not found\"; an empty path read the current folder",
         "refused in one line: a file is said to be a file, not a table folder; an empty path is refused before "
         "anything is read",
         "<path>: a file, not a table folder; give the folder that holds config.json, vocab.txt and embeddings.npy",
         "'': an empty path names no table (it would read the current folder); give a table folder or a Hub repo "
         "id (org/name)")
def test_a_file_or_an_empty_path_is_not_a_table_folder(tmp_path, tiny_model, promised, monkeypatch):
    monkeypatch.chdir(tiny_model)  # an empty path would read this table
    for path in (tiny_model / "config.json", str(tiny_model / "vocab.txt")):
        assert refused_load(Path(path), promised) == (f"{path}: a file, not a table folder; give the folder that holds "
                                                      "config.json, vocab.txt and embeddings.npy")
    assert refused_load("", promised) == ("'': an empty path names no table (it would read the current folder); give "
                                          "a table folder or a Hub repo id (org/name)")
    (tmp_path / "in.txt").write_text("the cat\n")
    result = run_cli(["encode", "", "--input", tmp_path / "in.txt", "--output", tmp_path / "out.npy"])
    assert error_line(result, "encode", promised).startswith("'': an empty path names no table")
    assert not (tmp_path / "out.npy").exists()


# --- 4. what encode takes -------------------------------------------------------------------------------------


@promise("`model.encode(pandas.DataFrame(...))`, a dict, a set, a 2-D array; a pandas Series, a numpy array of "
         "str, a tuple, a generator",
         "(issue 81) a DataFrame encoded its column names (one vector), a dict its keys",
         "a DataFrame, a dict, a set (no order) and a 2-D array are refused in one line saying what to pass; a "
         "Series, an array of str, a tuple or a generator encode as the same list does; a non-string item is named "
         "by its index and type",
         "encode takes a str or an iterable of str, not a <type> (<why>): pass <what to pass>",
         "encode takes a str or an iterable of str, not a <n>-D array of shape <shape>: pass a 1-D array of texts, "
         "e.g. a.ravel()",
         "encode takes texts of type str; text <i> is <type>: <value>")
def test_encode_takes_what_numpy_and_pandas_users_pass(tiny_model, promised):
    pandas = pytest.importorskip("pandas")
    model = swembed.load(tiny_model)
    expected = model.encode(TEXTS)
    frame = pandas.DataFrame({"text": TEXTS, "id": range(len(TEXTS))})
    for bad, start in ((frame, "encode takes a str or an iterable of str, not a DataFrame (it would encode its column "
                                "names): pass one column, e.g. df['text']"),
                       (dict.fromkeys(TEXTS), "encode takes a str or an iterable of str, not a dict (it would encode "
                                              "its keys)"),
                       (set(TEXTS), "encode takes a str or an iterable of str, not a set (its order is arbitrary"),
                       (np.array([TEXTS]), "encode takes a str or an iterable of str, not a 2-D array of shape (1, 5)"),
                       (pandas.Series(["the cat", float("nan")]), "encode takes texts of type str; text 1 is float: "
                                                                  "nan")):
        with pytest.raises(TypeError) as caught:
            model.encode(bad)
        assert str(caught.value).startswith(start) and promised.fits(str(caught.value)), str(caught.value)
    for same in (frame["text"], pandas.Series(TEXTS, index=[9, 7, 5, 3, 1]), np.array(TEXTS), tuple(TEXTS),
                 (t for t in TEXTS), frame["text"].to_numpy(), pandas.array(TEXTS, dtype="string")):
        np.testing.assert_array_equal(model.encode(same), expected)


ITEMS = st.sampled_from(TEXTS) | st.text(max_size=12)
NOT_TEXTS = st.sampled_from([None, 3, 2.5, b"x", float("nan"), ["a"], ("a",)])


@promise("random containers of texts (hypothesis: list, tuple, generator, numpy array, pandas Series, DataFrame, "
         "dict; with a non-string item at a random place)",
         "(issue 81) a DataFrame or a dict of texts gave the vectors of its column names or keys",
         "each: the vectors of the same list; a `TypeError` naming the first non-string item's index and type; a "
         "DataFrame or dict refused in one line")
@settings(PROPERTY, max_examples=40)
@given(texts=st.lists(ITEMS, min_size=1, max_size=6),
       kind=st.sampled_from(["tuple", "gen", "numpy", "series", "frame", "dict"]),
       bad=st.none() | st.tuples(st.integers(0, 5), NOT_TEXTS))
def test_containers_of_texts_encode_as_lists(template_model, texts, kind, bad):
    pandas = pytest.importorskip("pandas")
    items: list = list(texts)
    if bad is not None:
        items.insert(min(bad[0], len(items)), bad[1])
    wrap = {"tuple": tuple, "gen": lambda x: (t for t in x), "series": lambda x: pandas.Series(x, dtype=object),
            "numpy": lambda x: np.array(x, dtype=object), "frame": lambda x: pandas.DataFrame({"text": x}),
            "dict": lambda x: {i: t for i, t in enumerate(x)}}[kind]
    if kind in ("frame", "dict"):  # its iteration gives column names or keys, not its texts
        with pytest.raises(TypeError, match="^encode takes a str or an iterable of str, not a (DataFrame|dict) "):
            template_model.encode(wrap(items))
        return
    if bad is None:
        np.testing.assert_array_equal(template_model.encode(wrap(items)), template_model.encode(items))
        return
    index = min(bad[0], len(texts))
    with pytest.raises(TypeError) as caught:
        template_model.encode(wrap(items))
    assert str(caught.value).startswith(f"encode takes texts of type str; text {index} is "), str(caught.value)


@pytest.fixture(scope="module")
def template_model(tmp_path_factory):
    return swembed.load(write_tiny_model(tmp_path_factory.mktemp("containers") / "m"))
