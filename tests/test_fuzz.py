"""Issue 49 (b): fuzz and property tests (hypothesis). Random model-folder corruptions, random flag values and
random Unicode text; the property is always the same: a clean one-line refusal or a correct result, and no file
outside the output touched. Each test is a row of docs/what-happens-when.md. Small ``max_examples`` and the tiny
model of conftest.py keep the whole module to seconds; hypothesis' database is off, so runs are reproducible
(``derandomize``)."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_WORDS, run_cli, snapshot, write_tiny_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_bad_input import PROMISES, promise

import swembed
from swembed.runtime.folder import ModelFolderError

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
TEXTS = ["the cat sat on the mat", "a good dog", "goodness", "", "zebra"]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("fuzz") / "model")


def check_refusal(stderr: str, command: str, test: str) -> None:
    """A clean refusal: no traceback; one line ``swembed <command>: error: ...`` (argparse's own refusal of a flag
    value prints its usage first)."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert lines and lines[-1].startswith(f"swembed {command}: error: "), stderr
    assert len(lines) == 1 or lines[0].startswith("usage: "), stderr
    assert PROMISES[test].fits(lines[-1].split(": error: ", 1)[1]), (lines[-1], PROMISES[test].messages)


def check_vectors(vectors: np.ndarray, rows: int, dim: int = 8) -> None:
    """A correct result: float32, finite, each row of norm 1 (a known word) or 0 (none)."""
    assert vectors.shape == (rows, dim) and vectors.dtype == np.float32 and np.isfinite(vectors).all()
    norms = np.linalg.norm(vectors, axis=1)
    assert np.all(np.isclose(norms, 1, atol=1e-5) | (norms == 0)), norms


# --- random model-folder corruptions ---------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)
CONFIG_KEYS = ["format", "format_version", "tokenizer", "tokenization", "pieces", "grams", "languages", "ensemble",
               "table_check", "dim"]
RULE_KEYS = ["word_pattern", "lowercase", "unicode_normalization", "oov_backoff", "words", "oov_weight", "other"]
FILES = ["config.json", "vocab.txt", "embeddings.npy", "tokenizer.json"]


def _patch_config(folder: Path, key: str, value: object, rule: str | None) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    if rule is None:
        config[key] = value
    else:
        config["tokenization"] = {**config["tokenization"], rule: value}
    path.write_text(json.dumps(config))


def _edit_vocab(folder: Path, line: int, text: str, how: str) -> None:
    path = folder / "vocab.txt"
    words = path.read_text(encoding="utf-8").split("\n")[:-1]
    line %= len(words)
    if how == "replace":
        words[line] = text
    elif how == "insert":
        words.insert(line, text)
    elif how == "delete":
        del words[line]
    else:  # a copy of another word
        words[line] = words[(line + 1) % len(words)]
    path.write_text("".join(w + "\n" for w in words), encoding="utf-8")


def _edit_table(folder: Path, row: int, col: int, value: float, dtype: str) -> None:
    path = folder / "embeddings.npy"
    table = np.load(path).astype(dtype)
    with np.errstate(over="ignore"):  # a float32 value beyond float16's range becomes inf, as wanted
        table[row % len(table), col % table.shape[1]] = value if dtype.startswith("float") else 3
    np.save(path, table)


def _bytes(folder: Path, name: str, offset: int, data: bytes, truncate: bool) -> None:
    path = folder / name
    raw = path.read_bytes()
    offset %= len(raw) + 1
    path.write_bytes(raw[:offset] if truncate else raw[:offset] + data + raw[offset + len(data):])


CORRUPTIONS = st.one_of(
    st.tuples(st.just(_patch_config), st.sampled_from(CONFIG_KEYS), JSON_VALUES, st.none()),
    st.tuples(st.just(_patch_config), st.just(""), JSON_VALUES, st.sampled_from(RULE_KEYS)),
    st.tuples(st.just(_edit_vocab), st.integers(0, 20), st.text(max_size=6),
              st.sampled_from(["replace", "insert", "delete", "repeat"])),
    st.tuples(st.just(_edit_table), st.integers(0, 20), st.integers(0, 20),
              st.floats(allow_nan=True, allow_infinity=True, width=32),
              st.sampled_from(["float32", "float16", "float64", "int32", "int8"])),
    st.tuples(st.just(_bytes), st.sampled_from(FILES), st.integers(0, 4000), st.binary(min_size=1, max_size=8),
              st.booleans()),
    st.tuples(st.just(lambda folder, name: (folder / name).unlink()), st.sampled_from(FILES)),
)


@promise("random corruptions of a model folder (hypothesis: a config key or tokenization rule set to random JSON, a "
         "vocab line replaced, inserted, deleted or repeated, a table cell set to any float or the table re-saved "
         "in another dtype, bytes overwritten or cut, a file deleted)",
         "(issue 49) 40+ hand-made cases refused; the rest not tried",
         "each: `swembed.load` refuses with one `ModelFolderError` line, or the model loads and `encode` (the API and "
         "`swembed encode`) gives finite vectors of norm 0 or 1; `swembed encode` refuses in one line, rc 2; the "
         "folder and everything beside it unchanged",
         "<folder or a file in it><: the problem>")
@settings(FUZZ, max_examples=100)
@given(corruption=CORRUPTIONS)
def test_fuzzed_model_folder(template, corruption):
    apply, *args = corruption
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "model"
        shutil.copytree(template, folder)
        apply(folder, *args)
        (Path(root) / "in.txt").write_text("\n".join(TEXTS) + "\n")
        before = snapshot(Path(root))
        try:
            model = swembed.load(folder)
        except ModelFolderError as exc:
            message = str(exc)
            assert "\n" not in message and str(folder) in message, message
        else:
            check_vectors(model.encode(TEXTS), len(TEXTS))
        out = Path(root) / "out.npy"
        result = run_cli(["encode", folder, "--input", Path(root) / "in.txt", "--output", out], same_process=True)
        if result.returncode == 0:
            check_vectors(np.load(out), len(TEXTS))
            out.unlink()
        else:
            assert result.returncode == 2 and not out.exists(), result
            check_refusal(result.stderr, "encode", "test_fuzzed_model_folder")
        assert snapshot(Path(root)) == before


# --- random flag values --------------------------------------------------------------------------------------

EDGES = ["nan", "inf", "-inf", "1e309", "1e308", "5e-324", "-0", "0", "1", "0x10", "", "abc", " 2", "1_000"]
NUMBERS = st.one_of(st.sampled_from(EDGES), st.integers(-3, 50).map(str),
                    st.floats(allow_nan=True, allow_infinity=True).map(repr))
DEDUP_FLAGS = st.dictionaries(st.sampled_from(["--threshold", "--k", "--batch-size", "--target-size",
                                               "--target-fraction"]), NUMBERS, min_size=1, max_size=2)
RECORDS = ["the cat sat", "the cat sat", "a good dog", "the good dog", "on the mat", "zebra"]


@promise("random values of `swembed dedup`'s numeric flags (`--threshold`, `--k`, `--batch-size`, `--target-size`, "
         "`--target-fraction`: integers, floats, nan, inf, 1e309, text) and of `swembed ensemble --weights`",
         "(issue 49) not tried",
         "each: refused in one line (rc 2, argparse's usage line before it for a value of the wrong type), or a "
         "result that maps every record (dedup) or loads and encodes (ensemble); nothing outside the output touched",
         "<flag> <problem>", "argument <flag>: invalid <type> value: <value>",
         "weights must be between 1e-06 and 1e+06, got <list>",
         "<n> weights for <m> members")
@settings(FUZZ, max_examples=60)
@given(flags=DEDUP_FLAGS, weights=st.lists(NUMBERS, min_size=1, max_size=3))
def test_fuzzed_flag_values(template, flags, weights):
    with tempfile.TemporaryDirectory() as root:
        root = Path(root)
        (root / "records.txt").write_text("\n".join(RECORDS) + "\n")
        before = snapshot(root)
        args = ["dedup", root / "records.txt", "--model", template, "--out", root / "out", "--quiet"]
        result = run_cli(args + [item for flag, value in flags.items() for item in (f"{flag}={value}",)],
                         same_process=True)
        if result.returncode == 0:
            mapping = (root / "out" / "mapping.tsv").read_text().splitlines()
            assert len(mapping) == 1 + len(RECORDS), mapping
            shutil.rmtree(root / "out")
        else:
            assert result.returncode == 2 and not (root / "out").exists(), result
            check_refusal(result.stderr, "dedup", "test_fuzzed_flag_values")
        assert snapshot(root) == before
        result = run_cli(["ensemble", template, template, "--weights", ",".join(weights), "--out", root / "ens"],
                         same_process=True)
        if result.returncode == 0:
            check_vectors(swembed.load(root / "ens").encode(TEXTS), len(TEXTS), dim=16)
            shutil.rmtree(root / "ens")
        else:
            assert result.returncode == 2 and not (root / "ens").exists(), result
            check_refusal(result.stderr, "ensemble", "test_fuzzed_flag_values")
        assert snapshot(root) == before


# --- random config.json fields and recipe values (issue 58) -----------------------------------------------------

ROW_SPECS = st.fixed_dictionaries({"rows": st.lists(st.integers(-2, 12), min_size=0, max_size=3)})
CONFIG_FIELDS = {
    "grams": ROW_SPECS | JSON_VALUES,
    "pieces": ROW_SPECS | JSON_VALUES,
    "languages": st.dictionaries(st.sampled_from(["en", "de", "zh"]), ROW_SPECS | JSON_VALUES, max_size=3),
    "ensemble": st.none() | st.fixed_dictionaries({"subspaces": st.lists(st.fixed_dictionaries(
        {"dim": st.integers(-1, 9) | JSON_VALUES, "weight": st.floats() | JSON_VALUES}), max_size=3)}),
    "vocab_size": st.integers(-1, 10) | JSON_VALUES,
    "dim": st.integers(-1, 10) | JSON_VALUES,
    "tokenization": st.fixed_dictionaries({}, optional={
        "word_pattern": st.sampled_from([r"[^\W_]+", r"(\w+)", r"(\w)(\w*)", r"\w*", "", "(?:a|b)+", "[", "x{2,1}"]),
        "lowercase": st.booleans() | JSON_VALUES, "oov_weight": st.floats() | JSON_VALUES}),
}
RAW_JSON = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-0.0", "[" * 100_000 + "]" * 100_000,
                            '{"a": ' * 50_000 + "1" + "}" * 50_000])


@promise("random `config.json` fields (hypothesis: row ranges of any integers, empty, reversed or overlapping, "
         "languages, ensembles, dims, word patterns with groups or matching nothing, NaN/Infinity/1e999 and "
         "deep nesting written raw)",
         "(issue 58) tracebacks: `ZeroDivisionError`, `TypeError`, `RecursionError`",
         "each: the folder loads and encodes finite vectors of norm 0 or 1, or is refused in one `ModelFolderError` "
         "line naming it; never another exception; the folder unchanged",
         "<folder or a file in it><: the problem>")
@settings(FUZZ, max_examples=80)
@given(fields=st.dictionaries(st.sampled_from(sorted(CONFIG_FIELDS)), st.none(), min_size=1, max_size=3).flatmap(
    lambda keys: st.fixed_dictionaries({key: CONFIG_FIELDS[key] for key in keys})),
    raw=st.none() | st.tuples(st.sampled_from(["dim", "grams", "oov_weight", "ensemble"]), RAW_JSON))
def test_fuzzed_config_fields(template, fields, raw):
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "model"
        shutil.copytree(template, folder)
        config = {**json.loads((folder / "config.json").read_text()), **fields}
        text = json.dumps(config)
        if raw is not None:
            text = text[:-1] + f', "{raw[0]}": {raw[1]}' + "}"
        (folder / "config.json").write_text(text)
        before = snapshot(Path(root))
        try:
            model = swembed.load(folder)
        except ModelFolderError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(str(folder)), str(exc)
        else:
            check_vectors(model.encode(TEXTS + ["goodness zebra"]), len(TEXTS) + 1)
        assert snapshot(Path(root)) == before


def _toml(value: object) -> str:
    """``value`` as a TOML value (inline tables and arrays; strings as JSON writes them, which TOML reads)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(value), repr(value))
    if isinstance(value, (int, str)):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(_toml, value)) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"


def _recipe_keys() -> list[tuple[str, str]]:
    from dataclasses import fields as dataclass_fields

    from swembed.pipeline.config import SECTIONS, BuildConfig

    top = [("", f.name) for f in dataclass_fields(BuildConfig) if f.name not in SECTIONS]
    inner = [(section, f.name) for section, kind in SECTIONS.items()
             for f in dataclass_fields(getattr(BuildConfig(), section))]
    return top + inner + [("", "unknown"), ("extract", "unknown"), ("nowhere", "dim")]


TOML_VALUES = st.recursive(
    st.booleans() | st.integers(-3, 10**6) | st.floats() | st.text(max_size=8) | st.sampled_from(["", " ", "."]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(min_size=1, max_size=6), inner, max_size=3),
    max_leaves=6)


@promise("random recipe values (hypothesis: any TOML value, nested arrays and tables, nan/inf, empty strings, at any "
         "known or unknown key of any section, and 100,000 levels of nesting)",
         "(issue 58) a `RecursionError` traceback for deep nesting; the rest not tried",
         "each: the recipe loads and validates, or is refused in one line (`BuildError`, or a range refusal naming "
         "the setting, both `ValueError`s); never another exception",
         "<recipe><: the problem>", "<flag or key> <problem>")
@settings(FUZZ, max_examples=150)
@given(values=st.lists(st.tuples(st.sampled_from(_recipe_keys()), TOML_VALUES), min_size=1, max_size=4),
       deep=st.booleans())
def test_fuzzed_recipe_values(tmp_path_factory, values, deep):
    from swembed.pipeline.config import BuildError, load_recipe

    root = tmp_path_factory.mktemp("recipe")
    sections: dict[str, dict[str, object]] = {}
    for (section, key), value in values:
        sections.setdefault(section, {})[key] = value
    lines = [f"{json.dumps(k)} = {_toml(v)}" for k, v in sections.pop("", {}).items()]
    if deep:
        lines.append("deep = " + "[" * 100_000 + "]" * 100_000)
    for section, table in sections.items():
        lines += [f"[{section}]", *(f"{json.dumps(k)} = {_toml(v)}" for k, v in table.items())]
    recipe = root / "recipe.toml"
    recipe.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(root)  # the recipe's relative paths (corpus, out) name files under root
    try:
        load_recipe(recipe).check_before_work()  # settings, teacher name, output, corpus files: before any work
    except BuildError as exc:
        assert "\n" not in str(exc), str(exc)
    except ValueError as exc:  # a range refusal (OptionError) names the setting
        assert "\n" not in str(exc) and not isinstance(exc, UnicodeError), repr(exc)
    finally:
        os.chdir(cwd)


# --- random Unicode ------------------------------------------------------------------------------------------


@promise("random Unicode texts (hypothesis: any code point but surrogates, any length), through `encode` and through "
         "`swembed encode --input`",
         "(issue 17: 1,000 seeded strings) no crash",
         "finite vectors of norm 0 or 1; a batch equals the texts one at a time; the file gives the same rows as its "
         "lines, or (NUL bytes, mostly unprintable text) a one-line refusal and no output",
         "<file>: contains NUL bytes; not a text file",
         "<file>: only <n>% of its first characters are printable text; not a text file")
@FUZZ
@given(texts=st.lists(st.text(), max_size=12))
def test_hypothesis_unicode(template, texts):
    model = swembed.load(template)
    vectors = model.encode(texts)
    check_vectors(vectors, len(texts))
    if texts:
        np.testing.assert_allclose(np.concatenate([model.encode([t]) for t in texts]), vectors, atol=1e-6)
    lines = [t for text in texts for t in text.replace("\r", "\n").split("\n")]
    with tempfile.TemporaryDirectory() as root:
        source, out = Path(root) / "in.txt", Path(root) / "out.npy"
        source.write_text("".join(line + "\n" for line in lines), encoding="utf-8", newline="")
        result = run_cli(["encode", template, "--input", source, "--output", out], same_process=True)
        if result.returncode == 0:
            np.testing.assert_allclose(np.load(out), model.encode(lines).reshape(len(lines), 8), atol=1e-6)
        else:
            assert result.returncode == 2 and not out.exists(), result
            check_refusal(result.stderr, "encode", "test_hypothesis_unicode")


assert set(TINY_WORDS) >= {"the", "cat", "good", "dog"}  # TEXTS and RECORDS have known words
