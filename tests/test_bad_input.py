"""Issue 17: what swembed does with bad input. Each test is one row of docs/what-happens-when.md (its
``@promise``): the exact one-line message (exit code 2 on the command line, the same text in the library's
exception) and that nothing was written or lost. ``test_the_doc_is_the_promises`` keeps the page equal to the
rows here and in the other ``PROMISE_MODULES``; ``python tests/test_bad_input.py`` rewrites the page's table from
them."""
from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import tomllib
from conftest import TINY_WORDS, run_cli, small_build_args, snapshot, write_tiny_model

import swembed
from swembed.pipeline.config import BuildError, load_recipe
from swembed.runtime.folder import ModelFolderError, write_model_folder

DOC = Path(__file__).resolve().parents[1] / "docs" / "what-happens-when.md"
BEGIN, END = "<!-- rows: generated from tests/test_bad_input.py -->", "<!-- end of rows -->"
HEADER = ("| input | what swembed does | the line on stderr (an error: after `swembed <command>: error: `) | test |"
          "\n|---|---|---|---|")
# every module whose tests carry a row, in page order
PROMISE_MODULES = ("test_bad_input", "test_checks", "test_fuzz", "test_hub_inputs", "test_untrusted_tables",
                   "test_kind_inputs")


@dataclass(frozen=True)
class Promise:
    input: str
    before: str  # what an earlier version did (kept with the test, not in the table of promises)
    now: str
    messages: tuple[str, ...] = ()  # shapes; <...> stands for any text
    test: str = ""  # tests/<module>.py::<test>

    def fits(self, message: str) -> bool:
        return any(re.fullmatch("".join(".+" if part.startswith("<") else re.escape(part)
                                        for part in re.split(r"(<[^<>]+>)", shape)), message)
                   for shape in self.messages)

    def row(self) -> str:
        cells = [self.input, self.now, "<br>".join(f"`{m}`" for m in self.messages) or "—",
                 f"`{self.test}`"]
        assert not any("|" in cell for cell in cells), cells
        return "| " + " | ".join(cells) + " |"


PROMISES: dict[str, Promise] = {}


def promise(input: str, before: str, now: str, *messages: str):
    def register(test):
        module = Path(sys.modules[test.__module__].__file__).stem  # its file's name, also when run as a script
        where = f"tests/{module}.py::{test.__name__}"
        assert PROMISES.get(test.__name__, Promise("", "", "", (), where)).test == where, f"two tests {test.__name__}"
        PROMISES[test.__name__] = Promise(input, before, now, messages, where)
        return test
    return register


@pytest.fixture
def promised(request) -> Promise:
    return PROMISES[request.function.__name__]


def error_line(result, command: str, promised: Promise, only_line: bool = True) -> str:
    """The message of a refused command: exit 2, no traceback, the last stderr line (and the only one, unless a
    teacher was loaded first) is ``swembed <command>: error: <message>`` with a message of the promised shape."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 or not only_line, result.stderr
    prefix = f"swembed {command}: error: "
    assert lines[-1].startswith(prefix), result.stderr
    message = lines[-1][len(prefix):]
    assert promised.fits(message), (message, promised.messages)
    return message


def summary_line(result, promised: Promise) -> str:
    assert result.returncode == 0, result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert promised.fits(result.stderr.strip()), (result.stderr, promised.messages)
    return result.stderr.strip()


def refused_load(folder: Path, promised: Promise, mmap: bool = True) -> str:
    before = snapshot(folder)
    with pytest.raises(ModelFolderError) as caught:
        swembed.load(folder, mmap=mmap)
    assert promised.fits(str(caught.value)), (str(caught.value), promised.messages)
    assert snapshot(folder) == before
    return str(caught.value)


def refused_encode(tmp_path: Path, folder: Path, promised: Promise) -> str:
    """``swembed encode`` on a bad model folder: the message; no output written, the folder not modified."""
    (tmp_path / "in.txt").write_text("the cat sat\n")
    before = snapshot(folder)
    result = run_cli(["encode", folder, "--input", tmp_path / "in.txt", "--output", tmp_path / "out.npy"])
    message = error_line(result, "encode", promised)
    assert not (tmp_path / "out.npy").exists() and snapshot(folder) == before
    return message


def refused_build(tmp_path: Path, args: list, promised: Promise, only_line: bool = True) -> str:
    """``swembed build`` refused before any work: the message; no model folder, no work folder."""
    out = tmp_path / "model"
    message = error_line(run_cli(args), "build", promised, only_line)
    assert not out.exists() and not Path(f"{out}.work").exists()
    return message


# --- model folders ------------------------------------------------------------------------------------------


@promise("truncated `embeddings.npy`", "raw `ValueError: mmap length is greater than file size`",
         "refused on load (`ModelFolderError`); the folder is not modified, no output written",
         "<folder>/embeddings.npy: unreadable or truncated .npy file (<numpy's reason>)")
def test_truncated_table(tmp_path, tiny_model, promised):
    table = tiny_model / "embeddings.npy"
    table.write_bytes(table.read_bytes()[:200])
    assert refused_encode(tmp_path, tiny_model, promised) == \
        f"{table}: unreadable or truncated .npy file (mmap length is greater than file size)"
    assert refused_load(tiny_model, promised, mmap=False).startswith(f"{table}: unreadable or truncated .npy file (")
    table.write_bytes(b"")
    assert refused_load(tiny_model, promised) == f"{table}: unreadable or truncated .npy file (No data left in file)"


@promise("garbled `config.json` (not JSON)", "raw `JSONDecodeError` traceback",
         "refused on load (`ModelFolderError`); the folder is not modified, no output written",
         "<folder>/config.json: not valid JSON (<json's reason>)")
def test_garbled_config(tmp_path, tiny_model, promised):
    config = tiny_model / "config.json"
    garbled = config.read_text()[:40]
    config.write_text(garbled)
    with pytest.raises(json.JSONDecodeError) as reason:
        json.loads(garbled)
    expected = f"{config}: not valid JSON ({reason.value})"
    assert refused_encode(tmp_path, tiny_model, promised) == expected
    assert refused_load(tiny_model, promised) == expected


@promise("`config.json` that is JSON but of wrong types (`\"pieces\": 5`)",
         "`AttributeError` traceback, or a message without the file (new in this review)",
         "refused on load (`ModelFolderError`) naming the key; the folder is not modified",
         "<folder>/config.json: <key> must be <type>, got <value>",
         "<folder>/config.json: <where>tokenization <key> must be one of <values>, got <value>")
@pytest.mark.parametrize("patch,expected", [
    ({"pieces": 5}, 'pieces must be an object with "rows": [start, end], got 5'),
    ({"format_version": "1"}, 'format_version must be an integer, got "1"'),
    ({"tokenization": "pieces"}, 'tokenization must be an object, got "pieces"'),
    ({"tokenization": {"oov_backoff": "all"}},
     "tokenization oov_backoff must be one of ('pieces', 'teacher_prefix', 'none'), got 'all'"),
    ({"languages": {"en": None}}, 'language en must be an object with "rows": [start, end], got null'),
], ids=["pieces", "format_version", "tokenization", "oov_backoff", "languages"])
def test_config_of_wrong_types(tmp_path, tiny_model, promised, patch, expected):
    config = tiny_model / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), **patch}))
    assert refused_load(tiny_model, promised) == f"{config}: {expected}"
    if "pieces" in patch:  # and as a user meets it
        assert refused_encode(tmp_path, tiny_model, promised) == f"{config}: {expected}"


@promise("`vocab.txt` that is not UTF-8", "`UnicodeDecodeError` without the file name (new in this review)",
         "refused on load (`ModelFolderError`); the folder is not modified, no output written",
         "<folder>/vocab.txt: not UTF-8 (<reason> at byte <offset>)")
def test_vocab_not_utf8(tmp_path, tiny_model, promised):
    vocab = tiny_model / "vocab.txt"
    vocab.write_bytes(vocab.read_bytes().replace(b"cat", b"c\xe4t"))
    assert refused_encode(tmp_path, tiny_model, promised) == f"{vocab}: not UTF-8 (invalid continuation byte at byte 5)"


@promise("`tokenizer.json` deleted", "loads silently; the sub-word back-off is gone without a word",
         "refused on load unless `config.json` declares `\"tokenizer\": null` (a table without back-off, which "
         "loads and skips unknown words)",
         "<folder>: tokenizer.json is missing; the table's tokenisation needs it for the sub-word back-off (restore "
         "it, or declare \"tokenizer\": null in config.json)")
def test_tokenizer_deleted(tmp_path, tiny_model, promised):
    backoff = swembed.load(tiny_model)
    assert np.allclose(backoff.encode("goodness"), backoff.encode("good"))  # goodness -> good + ##ness -> good
    (tiny_model / "tokenizer.json").unlink()
    expected = (f"{tiny_model}: tokenizer.json is missing; the table's tokenisation needs it for the sub-word "
                "back-off (restore it, or declare \"tokenizer\": null in config.json)")
    assert refused_encode(tmp_path, tiny_model, promised) == expected
    assert refused_load(tiny_model, promised) == expected
    declared = swembed.load(write_tiny_model(tmp_path / "declared", tokenizer=False))
    assert not declared.encode("goodness").any() and declared.encode("good").any()


@promise("`vocab.txt` and `embeddings.npy` row counts differ", "a clear error: keep",
         "refused on load (`ModelFolderError`); the folder is not modified, no output written",
         "<folder>: <n> words in vocab.txt but <m> table rows")
def test_vocab_and_table_rows_differ(tmp_path, tiny_model, promised):
    with open(tiny_model / "vocab.txt", "a", encoding="utf-8") as vocab:
        vocab.write("extra\n")
    expected = f"{tiny_model}: {len(TINY_WORDS) + 1} words in vocab.txt but {len(TINY_WORDS)} table rows"
    assert refused_encode(tmp_path, tiny_model, promised) == expected


@promise("a model folder that does not exist", "a clear error: keep", "refused; no output written",
         "model folder not found: <folder>")
def test_missing_model_folder(tmp_path, promised):
    (tmp_path / "nowhere").mkdir()
    missing = tmp_path / "nowhere" / "model"
    assert refused_encode(tmp_path, missing, promised) == f"model folder not found: {missing}"
    assert not missing.exists()


# --- swembed encode ------------------------------------------------------------------------------------------

LINES = [b"the cat sat", b"a \xff\xfe dog", "the good mat\u00e9".encode(), b"\xc3", b"on the mat\r"]
GOOD = {1: "the cat sat", 3: "the good mat\u00e9", 5: "on the mat"}  # line number -> text


@promise("non-UTF-8 bytes in `swembed encode --input`", "the whole run aborts on the first bad byte",
         "`--errors replace` (default): bad lines decoded with U+FFFD and counted, one row per line; `skip`: left "
         "out and counted; `strict`: stops at the first, naming it, and writes nothing",
         "<n> texts -> <output> (<n>, <dim>); <k> lines not UTF-8 (decoded with U+FFFD)",
         "<n> texts -> <output> (<n>, <dim>); <k> lines not UTF-8 (skipped)",
         "<input>:<line>: not valid UTF-8 (<reason> at byte <offset>); give its encoding with --encoding NAME "
         "(e.g. latin-1, cp1251) or use --errors replace")
@pytest.mark.parametrize("errors", ["replace", "skip", "strict"])
def test_encode_input_not_utf8(tmp_path, tiny_model, promised, errors):
    source, out = tmp_path / "in.txt", tmp_path / "out.npy"
    source.write_bytes(b"\n".join(LINES) + b"\n")
    model = swembed.load(tiny_model)
    if errors == "strict":
        out.write_bytes(b"an earlier result")
        result = run_cli(["encode", tiny_model, "--input", source, "--output", out, "--errors", "strict",
                          "--overwrite"])
        assert error_line(result, "encode", promised) == (
            f"{source}:2: not valid UTF-8 (invalid start byte at byte 2); give its encoding with --encoding NAME "
            "(e.g. latin-1, cp1251) or use --errors replace")
        assert out.read_bytes() == b"an earlier result"
        return
    result = run_cli(["encode", tiny_model, "--input", source, "--output", out, "--errors", errors])
    rows = len(LINES) if errors == "replace" else len(GOOD)
    note = "decoded with U+FFFD" if errors == "replace" else "skipped"
    assert summary_line(result, promised) == f"{rows} texts -> {out} ({rows}, 8); 2 lines not UTF-8 ({note})"
    vectors = np.load(out)
    kept = [number - 1 for number in GOOD] if errors == "replace" else range(len(GOOD))
    np.testing.assert_allclose(vectors[list(kept)], model.encode(list(GOOD.values())), atol=1e-6)
    if errors == "replace":  # the bad lines keep their words: "a \ufffd\ufffd dog"
        np.testing.assert_allclose(vectors[1], model.encode(["a dog"])[0], atol=1e-6)


@promise("`swembed dedup --out` an existing result folder (also `encode --output`)", "overwritten silently",
         "refused before any work unless `--overwrite`; the existing output is left byte for byte",
         "<out> already exists; pass --overwrite to replace it")
def test_output_exists(tmp_path, tiny_model, promised):
    records = tmp_path / "records.txt"
    records.write_text("the cat sat\nthe cat sat\na dog\n")
    out = tmp_path / "result"
    args = ["dedup", records, "--model", tiny_model, "--out", out, "--quiet"]
    assert run_cli(args).returncode == 0
    (out / "mapping.tsv").write_text("edited by hand\n")  # an earlier result the user cares about
    before = snapshot(out)
    assert error_line(run_cli(args), "dedup", promised) == f"{out} already exists; pass --overwrite to replace it"
    assert snapshot(out) == before and not list(tmp_path.glob(".result*"))
    vectors = tmp_path / "vectors.npy"
    vectors.write_bytes(b"an earlier result")
    result = run_cli(["encode", tiny_model, "--input", records, "--output", vectors])
    assert error_line(result, "encode", promised) == f"{vectors} already exists; pass --overwrite to replace it"
    assert vectors.read_bytes() == b"an earlier result"
    assert run_cli(args + ["--overwrite"]).returncode == 0 and snapshot(out) != before


# --- swembed build ------------------------------------------------------------------------------------------


@promise("`swembed build --dim 0`", "\"--dim 0 is too large\"", "refused before any work; nothing written",
         "--dim must be at least 1, got 0")
def test_build_dim_zero(tmp_path, tiny_corpus, promised):
    args = small_build_args(tiny_corpus, tmp_path / "model") + ["--dim", "0"]
    assert refused_build(tmp_path, args, promised) == "--dim must be at least 1, got 0"


@promise("a binary file as `--corpus` (an executable, random bytes, a binary `.zip` member)",
         "accepted: sentences are cut from the bytes and a model is built",
         "refused before the teacher is loaded; nothing written",
         "<file>: contains NUL bytes; not a text file",
         "<file>: only <n>% of its first characters are printable text; not a text file")
@pytest.mark.parametrize("kind", ["executable", "random bytes", "zip member"])
def test_binary_corpus(tmp_path, promised, kind):
    corpus = Path(os.path.realpath(sys.executable))
    if kind == "random bytes":
        corpus = tmp_path / "data.txt"
        corpus.write_bytes(random.Random(0).randbytes(4096).replace(b"\0", b"\1"))
    elif kind == "zip member":
        corpus = tmp_path / "texts.zip"
        with zipfile.ZipFile(corpus, "w") as archive:
            archive.writestr("a.txt", "The cat sat on the mat.\n")
            archive.write(os.path.realpath(sys.executable), "tools/python")
    message = refused_build(tmp_path, small_build_args(corpus, tmp_path / "model"), promised)
    expected = {"executable": f"{corpus}: contains NUL bytes; not a text file",
                "random bytes": f"{corpus}: only <n>% of its first characters are printable text; not a text file",
                "zip member": f"{corpus}:tools/python: contains NUL bytes; not a text file"}[kind]
    assert re.fullmatch(re.escape(expected).replace("<n>", "[0-8]?[0-9]"), message), message


@promise("an invalid recipe TOML", "\"Invalid value (at end of document)\", no file name",
         "refused before any work; nothing written", "<recipe>: not a valid TOML recipe (<tomllib's reason>)")
def test_recipe_not_toml(tmp_path, promised):
    recipe = tmp_path / "mine.toml"
    recipe.write_text('teacher = "minilm"\n[pca]\ndim =')
    with pytest.raises(tomllib.TOMLDecodeError) as reason:
        tomllib.loads(recipe.read_text())
    args = ["build", "--recipe", recipe, "--out", tmp_path / "model"]
    assert refused_build(tmp_path, args, promised) == f"{recipe}: not a valid TOML recipe ({reason.value})"


@promise("a recipe value of the wrong type (`dim = \"x\"`, `teacher = 5`)",
         "`TypeError` traceback from a later stage (new in this review)", "refused before any work; nothing written",
         "<recipe>: <[section] key> must be <type>, got <value>")
def test_recipe_value_of_wrong_type(tmp_path, promised):
    recipe = tmp_path / "mine.toml"
    recipe.write_text('teacher = "minilm"\n[pca]\ndim = "x"\n')
    args = ["build", "--recipe", recipe, "--out", tmp_path / "model"]
    assert refused_build(tmp_path, args, promised) == f"{recipe}: [pca] dim must be int, got 'x'"
    recipe.write_text("teacher = 5\n")
    with pytest.raises(BuildError) as caught:
        load_recipe(recipe)
    assert str(caught.value) == f"{recipe}: teacher must be str, got 5" and promised.fits(str(caught.value))
    recipe.write_text('teacher = "minilm"\n[distill]\ntau = 1\n')  # an int where a float goes is fine
    assert load_recipe(recipe).distill.tau == 1


@promise("a recipe whose `base` is missing or leads back to itself", "(no `base` key before this review)",
         "refused before any work; nothing written", "<recipe>: base <name> leads back to this recipe",
         "<recipe>: base recipe not found: <path> (a path from the recipe's folder)")
def test_recipe_base_missing_or_circular(tmp_path, promised):
    (tmp_path / "a.toml").write_text('base = "b.toml"\nteacher = "minilm"\n')
    (tmp_path / "b.toml").write_text('base = "a.toml"\n')
    args = ["build", "--recipe", tmp_path / "a.toml", "--out", tmp_path / "model"]
    message = refused_build(tmp_path, args, promised)
    assert message == f"{tmp_path / 'b.toml'}: base 'a.toml' leads back to this recipe"
    (tmp_path / "b.toml").write_text('base = "nowhere/c.toml"\n')
    message = refused_build(tmp_path, args, promised)
    missing = tmp_path / "nowhere" / "c.toml"
    assert message == f"{tmp_path / 'b.toml'}: base recipe not found: {missing} (a path from the recipe's folder)"


@promise("torch not installed, `swembed build`", "traceback (`ModuleNotFoundError`)",
         "one line naming the extra; nothing written; `swembed encode` works without torch",
         "this needs torch, which is not installed: pip install 'swembed[build]' (from a checkout: pip install -e "
         "\".[build]\")")
def test_torch_not_installed(tmp_path, tiny_corpus, tiny_model, promised):
    def without_torch(args):
        code = f"import sys; sys.modules['torch'] = None\nfrom swembed.cli import main; sys.exit(main({args!r}))"
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    out = tmp_path / "out"
    result = without_torch(["build", "--corpus", str(tiny_corpus), "--out", str(out)])
    assert error_line(result, "build", promised) == ("this needs torch, which is not installed: pip install "
                                                     "'swembed[build]' (from a checkout: pip install -e \".[build]\")")
    assert not out.exists() and not Path(f"{out}.work").exists()
    (tmp_path / "in.txt").write_text("the cat\n")
    result = without_torch(["encode", str(tiny_model), "--input", "in.txt", "--output", "v.npy"])
    assert result.returncode == 0 and np.load(tmp_path / "v.npy").shape == (1, 8)


@promise("an empty corpus (no usable sentence)", "a clear error: keep",
         "refused after the corpus stage; no model folder, no stage cached as done",
         "the corpus gave no usable sentence (<n> sentences read; <k> shorter than <min> words, <l> longer than <max>)")
@pytest.mark.teacher
def test_empty_corpus(tmp_path, promised):
    corpus = tmp_path / "empty.txt"
    corpus.write_text("\n\nToo short.\n")
    out = tmp_path / "model"
    result = run_cli(small_build_args(corpus, out))
    assert error_line(result, "build", promised, only_line=False) == \
        "the corpus gave no usable sentence (1 sentences read; 1 shorter than 3 words, 0 longer than 40)"
    assert not out.exists() and not list(Path(f"{out}.work").rglob("manifest.json"))


@promise("a corpus path that does not exist (also `--exclude`, `--word-lists`)", "a clear error: keep",
         "refused before the teacher is loaded; nothing written", "corpus path not found: <path>",
         "word list not found: <path> (--word-lists / [vocab] word_lists)")
def test_missing_corpus(tmp_path, promised):
    missing = tmp_path / "missing.txt"
    message = refused_build(tmp_path, small_build_args(missing, tmp_path / "model"), promised)
    assert message == f"corpus path not found: {missing}"
    corpus = tmp_path / "c.txt"  # a held-out (--exclude) path is checked the same way, before the teacher loads
    corpus.write_text("One two three four.\n")
    args = small_build_args(corpus, tmp_path / "model") + ["--exclude", str(missing)]
    assert refused_build(tmp_path, args, promised) == f"corpus path not found: {missing}"
    args = small_build_args(corpus, tmp_path / "model") + ["--word-lists", str(missing)]
    assert refused_build(tmp_path, args, promised) == \
        f"word list not found: {missing} (--word-lists / [vocab] word_lists)"


@promise("an unknown `--teacher` (or `[coteacher] teachers`)", "a clear error: keep",
         "refused before any work; nothing written",
         "unknown teacher '<name>': not a folder, not a short name (<names>), not a hub id")
def test_unknown_teacher(tmp_path, tiny_corpus, promised):
    args = small_build_args(tiny_corpus, tmp_path / "model") + ["--teacher", "no-such-teacher"]
    assert refused_build(tmp_path, args, promised).startswith("unknown teacher 'no-such-teacher': not a folder")
    recipe = tmp_path / "co.toml"  # a co-teacher is found before extraction, not after it
    recipe.write_text("[coteacher]\nteachers = 'no-such-teacher'\n")
    args = ["build", "--recipe", str(recipe), *small_build_args(tiny_corpus, tmp_path / "model")[1:]]
    assert refused_build(tmp_path, args, promised).startswith("unknown teacher 'no-such-teacher': not a folder")


@promise("NUL bytes in a corpus file, or in a text to encode", "a clear error / a vector: keep",
         "a corpus: refused before the teacher is loaded; a text: NUL separates words like any non-word character",
         "<file>: contains NUL bytes; not a text file")
def test_nul_bytes(tmp_path, tiny_model, promised):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"The cat sat on the mat.\n" * 50 + b"The dog\x00sat.\n")
    message = refused_build(tmp_path, small_build_args(corpus, tmp_path / "model"), promised)
    assert message == f"{corpus}: contains NUL bytes; not a text file"
    model = swembed.load(tiny_model)
    np.testing.assert_array_equal(model.encode(["the cat\x00sat", "\x00"]), model.encode(["the cat sat", ""]))


# --- encoding any text ----------------------------------------------------------------------------------------


@promise("a text with no known word (unknown words, empty, punctuation only)", "the zero vector: keep",
         "the zero vector, never NaN")
def test_text_without_known_words(tiny_model, promised):
    vectors = swembed.load(tiny_model).encode(["zebra quokka", "", "?! -- ...", "   ", "the cat"])
    assert vectors.shape == (5, 8) and np.isfinite(vectors).all()
    assert not vectors[:4].any() and np.isclose(np.linalg.norm(vectors[4]), 1)


def fuzz_strings(n: int, seed: int = 0) -> list[str]:
    """Random Unicode without surrogates: astral characters, combining marks, controls, RTL text and marks,
    odd spaces, and vocabulary words so that some texts have known words."""
    rng = random.Random(seed)
    pools = [
        lambda: rng.choice(TINY_WORDS) + " ",
        lambda: chr(rng.randint(0x10000, 0x10FFFF)),  # astral, incl. unassigned and private use
        lambda: chr(rng.randint(0x1D400, 0x1D7FF)),  # mathematical letters: NFKC makes them ASCII
        lambda: chr(rng.randint(0x300, 0x36F)),  # combining marks
        lambda: chr(rng.choice([*range(0x20), *range(0x7F, 0xA0)])),  # C0 and C1 controls, NUL included
        lambda: chr(rng.randint(0x590, 0x6FF)),  # Hebrew, Arabic
        lambda: rng.choice(["\u200f", "\u202e", "\u2067", "\u200d", "\ufeff", "\u2028", "\u3000", "\ufffd"]),
        lambda: chr(rng.choice([rng.randint(0, 0xD7FF), rng.randint(0xE000, 0x10FFFF)])),  # anything
    ]
    return ["".join(rng.choice(pools)() for _ in range(rng.randint(0, 40))) for _ in range(n)]


@promise("1,000 seeded random Unicode strings (astral, combining marks, controls, RTL)", "no crash: keep",
         "finite vectors of norm 1 (some word known) or 0 (none); batch equals one text at a time")
def test_fuzzed_unicode(tiny_model, promised):
    texts = fuzz_strings(1000)
    assert not any(0xD800 <= ord(ch) <= 0xDFFF for text in texts for ch in text)
    model = swembed.load(tiny_model)
    vectors = model.encode(texts)
    assert vectors.shape == (1000, 8) and vectors.dtype == np.float32 and np.isfinite(vectors).all()
    norms = np.linalg.norm(vectors, axis=1)
    assert np.all(np.isclose(norms, 1, atol=1e-5) | (norms == 0))
    assert 100 < (norms > 0).sum() < 1000  # both kinds occur
    np.testing.assert_allclose(np.concatenate([model.encode([t]) for t in texts]), vectors, atol=1e-6)


# --- issue 58: absurd but well-formed inputs ---------------------------------------------------------------


def _patched(folder: Path, **patch) -> Path:
    config = folder / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), **patch}))
    return config


@promise("`config.json` fields well-formed but inconsistent: `\"grams\": {\"rows\": [8, 8]}` (no rows), a word "
         "pattern with capturing groups (or matching the empty text), languages whose rows overlap or run into "
         "the back-off rows, `\"dim\": true` or a dim that is not the table's, NaN or Infinity, 100,000 levels "
         "of nesting",
         "(issue 58) `ZeroDivisionError`, `TypeError` or `RecursionError` tracebacks at load or encode, or loaded "
         "and encoded wrongly (words of no language, a NaN weight)",
         "refused on load (`ModelFolderError`) naming the file and the field; `swembed encode` the same in one "
         "line, nothing written",
         "<folder>/config.json: <field> rows [<start>, <end>] hold no rows; leave <field> out of config.json "
         "for a table without them",
         "<folder>/config.json: tokenization word_pattern must match words: no capturing group (write (?:...)) "
         "and not the empty text, got <pattern>",
         "<folder>/config.json: language <a> rows [<range>] and language <b> rows [<range>] overlap; each range "
         "of rows is one language's words or one back-off block",
         "<folder>/config.json: language <a> rows [<range>] run into the back-off rows from <row>",
         "<folder>/config.json: dim must be an integer >= 1, got <value>",
         "<folder>: embeddings.npy has <n> columns and config.json says dim <value>; a table needs dim >= 1 "
         "columns, as declared",
         "<folder>/config.json: not valid JSON (<NaN or Infinity> is not a JSON value)",
         "<folder>/config.json: nested too deeply to read (a config.json is a few levels deep)")
@pytest.mark.parametrize("patch,expected", [
    ({"grams": {"rows": [8, 8]}}, "grams rows [8, 8] hold no rows; leave grams out of config.json for a table "
                                  "without them"),
    ({"tokenization": {"word_pattern": r"(\w)(\w*)"}},
     r"tokenization word_pattern must match words: no capturing group (write (?:...)) and not the empty text, got "
     r"'(\\w)(\\w*)'"),
    ({"tokenization": {"word_pattern": r"\w*"}}, "tokenization word_pattern must match words: no capturing group "
                                                 r"(write (?:...)) and not the empty text, got '\\w*'"),
    ({"languages": {"en": {"rows": [0, 5]}, "de": {"rows": [3, 8]}}},
     "language en rows [0, 5] and language de rows [3, 8] overlap; each range of rows is one language's words or "
     "one back-off block"),
    ({"languages": {"en": {"rows": [0, 8]}}, "pieces": {"rows": [6, 8]}},
     "language en rows [0, 8] run into the back-off rows from 6"),
    ({"dim": True}, "dim must be an integer >= 1, got true"),
    ({"dim": 5}, None),
    ({"oov_weight": float("nan")}, "not valid JSON (NaN is not a JSON value)"),
    ({"nested": "deep"}, "nested too deeply to read (a config.json is a few levels deep)"),
], ids=["grams without rows", "two groups", "empty match", "languages overlap", "language into pieces", "dim true",
        "dim not the table's", "NaN", "deep nesting"])
def test_inconsistent_config_fields(tmp_path, tiny_model, promised, patch, expected):
    config = _patched(tiny_model, **patch)
    if "nested" in patch:
        config.write_text(config.read_text()[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    if expected is None:
        assert refused_load(tiny_model, promised) == (f"{tiny_model}: embeddings.npy has 8 columns and config.json "
                                                      "says dim 5; a table needs dim >= 1 columns, as declared")
        return
    assert refused_load(tiny_model, promised) == f"{config}: {expected}"
    assert refused_encode(tmp_path, tiny_model, promised) == f"{config}: {expected}"


@promise("`\"ensemble\": null` in `config.json`", "(issue 58) `AttributeError` traceback at encode",
         "read as no ensemble (as an absent key): the same vectors")
def test_null_ensemble_is_no_ensemble(tiny_model, promised):
    before = swembed.load(tiny_model).encode(["the cat sat", "a good dog"])
    _patched(tiny_model, ensemble=None)
    np.testing.assert_array_equal(swembed.load(tiny_model).encode(["the cat sat", "a good dog"]), before)


@promise("a table whose values are finite but absurd (all x1e-25 or x1e25, zero columns) or a vocabulary line with "
         "upper-case letters in a lower-casing table",
         "(issue 58) loaded: every vector 0 (underflow or overflow in the norm), or the word silently never matched",
         "refused on load naming the first such row or line; a table with such rows is never written",
         "<folder>/embeddings.npy: row <n> ('<word>') holds values of magnitude <m>, outside 1e-15 to 1e+15 (its "
         "vectors would underflow or overflow float32) (the first such row); the table is damaged: rebuild or "
         "re-export the model",
         "table row <n> ('<word>') holds values of magnitude <m>, outside 1e-15 to 1e+15 (its vectors would "
         "underflow or overflow float32); <out> not written",
         "<folder>/config.json: dim must be an integer >= 1, got 0",
         "<folder>/vocab.txt:<line>: '<word>' has upper-case letters, but the table's tokenization lower-cases "
         "text, so it would never match")
@pytest.mark.parametrize("scale", [1e-25, 1e25])
def test_absurd_table_values(tmp_path, promised, scale):
    table = np.random.default_rng(0).normal(size=(len(TINY_WORDS), 8)).astype(np.float32)
    with pytest.raises(ModelFolderError) as caught:
        write_model_folder(tmp_path / "never", table * scale, TINY_WORDS, {}, None)
    assert promised.fits(str(caught.value)) and not (tmp_path / "never").exists()
    folder = write_tiny_model(tmp_path / "model")
    np.save(folder / "embeddings.npy", np.load(folder / "embeddings.npy") * np.float32(scale))
    message = refused_encode(tmp_path, folder, promised)
    assert message.startswith(f"{folder}/embeddings.npy: row 0 ('the') holds values of magnitude ")
    assert refused_load(folder, promised) == message
    zero_width = write_tiny_model(tmp_path / "zero")
    np.save(zero_width / "embeddings.npy", np.zeros((len(TINY_WORDS), 0), np.float32))
    _patched(zero_width, dim=0)
    assert refused_load(zero_width, promised) == f"{zero_width}/config.json: dim must be an integer >= 1, got 0"
    cased = write_tiny_model(tmp_path / "cased")
    (cased / "vocab.txt").write_text("".join(w + "\n" for w in TINY_WORDS).replace("cat", "Cat"))
    assert refused_load(cased, promised) == (f"{cased}/vocab.txt:2: 'Cat' has upper-case letters, but the table's "
                                             "tokenization lower-cases text, so it would never match")
    _patched(cased, tokenization={"oov_backoff": "teacher_prefix", "lowercase": False})  # a cased table keeps it
    assert swembed.load(cased).encode("Cat").any() and not swembed.load(cased).encode("cat").any()


@promise("`encode(np.array(\"x\"))` (a 0-d array) and texts with lone surrogates (`\"\\ud800\"`, from "
         "`surrogateescape` decoding or JSON escapes)",
         "(issue 58) `TypeError: iteration over a 0-d array`; `UnicodeEncodeError` traceback",
         "a 0-d array is its one text; a lone surrogate is read as U+FFFD, a non-word character", )
def test_numpy_scalar_and_lone_surrogates(tiny_model, promised):
    model = swembed.load(tiny_model)
    np.testing.assert_array_equal(model.encode(np.array("the cat")), model.encode("the cat"))
    np.testing.assert_array_equal(model.encode(["the\ud800cat", "\udcff"]), model.encode(["the\ufffdcat", ""]))
    assert model.encode("the\ud800cat").any()


@promise("a recipe nested 100,000 levels deep, a recipe path that is a folder, `build --recipe \"\"` (also "
         "`shrink`), `build --corpus \"\"`, `--work-dir` inside `--out`",
         "(issue 58) `RecursionError` or `IsADirectoryError` tracebacks; `--recipe \"\"` ignored (a default build "
         "of WikiText-2 started, new in this review); `--corpus \"\"` read the current folder; the work folder "
         "inside `--out` was refused only after the whole build",
         "refused before any work (the teacher not loaded); nothing written",
         "<recipe>: nested too deeply to read (a recipe is a few levels deep)",
         "<recipe>: not readable as a recipe (<reason>)",
         "--recipe: an empty path; give a recipe file (see pipelines/)",
         "--corpus: an empty path would read the current folder; give a file or folder",
         "--work-dir <work> is inside --out <out>, which the finished model replaces; give a work folder outside it")
def test_recipe_and_build_paths(tmp_path, tiny_corpus, promised):
    recipe = tmp_path / "deep.toml"
    recipe.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(BuildError) as caught:
        load_recipe(recipe)
    assert str(caught.value) == f"{recipe}: nested too deeply to read (a recipe is a few levels deep)"
    assert promised.fits(str(caught.value))
    (tmp_path / "folder.toml").mkdir()
    with pytest.raises(BuildError) as caught:
        load_recipe(tmp_path / "folder.toml")
    assert str(caught.value) == f"{tmp_path / 'folder.toml'}: not readable as a recipe (Is a directory)"
    out = tmp_path / "model"
    base = ["build", "--teacher", "minilm", "--out", out, "--dim", "8"]
    missing = tmp_path / "missing.txt"  # were the empty recipe ignored, the build would stop here, not run
    for args in (["build", "--recipe", "", "--corpus", missing, "--out", out],
                 ["shrink", "--recipe", "", "--out", out]):
        assert error_line(run_cli(args), args[0], promised) == \
            "--recipe: an empty path; give a recipe file (see pipelines/)"
    assert refused_build(tmp_path, [*base, "--corpus", ""], promised) == \
        "--corpus: an empty path would read the current folder; give a file or folder"
    for work in (out / "work", out):
        assert refused_build(tmp_path, [*base, "--corpus", tiny_corpus, "--work-dir", work], promised) == \
            f"--work-dir {work} is inside --out {out}, which the finished model replaces; give a work folder outside it"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["deep.toml", "folder.toml", tiny_corpus.name])


@promise("a `.parquet` text column of numbers, lists or bytes, a `.jsonl` text field that is not a string, a "
         "damaged `.parquet` file (as `--corpus`)",
         "(issue 58) numbers read as text (`str(5)`), a damaged file an `ArrowInvalid` traceback",
         "the corpus is refused naming the file (and the line) and the column's type; a null is no text",
         "<file>: column '<column>' holds <type>, not text",
         "<file>:<line>: field '<column>' holds <type>, not text",
         "<file>: not a readable parquet file (<reason>)")
def test_corpus_columns_that_are_not_text(tmp_path, promised):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from swembed.pipeline.sources import CorpusError, read_source

    cases = {"ints.parquet": "column 'text' holds int64, not text",
             "lists.parquet": "column 'text' holds list<element: string>, not text",
             "bytes.parquet": "column 'text' holds binary, not text"}
    pq.write_table(pa.table({"text": [1, 2]}), tmp_path / "ints.parquet")
    pq.write_table(pa.table({"text": [["a cat"], ["a dog"]]}), tmp_path / "lists.parquet")
    pq.write_table(pa.table({"text": [b"a cat", b"a dog"]}), tmp_path / "bytes.parquet")
    (tmp_path / "numbers.jsonl").write_text('{"text": "the cat sat"}\n{"text": null}\n{"text": 5}\n')
    (tmp_path / "damaged.parquet").write_bytes(b"PAR1 not really")
    for name, expected in cases.items():
        with pytest.raises(CorpusError) as caught:
            list(read_source(str(tmp_path / name)))
        assert str(caught.value) == f"{tmp_path / name}: {expected}" and promised.fits(str(caught.value))
    with pytest.raises(CorpusError) as caught:
        list(read_source(str(tmp_path / "numbers.jsonl")))
    assert str(caught.value) == f"{tmp_path / 'numbers.jsonl'}:3: field 'text' holds int, not text"
    with pytest.raises(CorpusError) as caught:
        list(read_source(str(tmp_path / "damaged.parquet")))
    assert str(caught.value).startswith(f"{tmp_path / 'damaged.parquet'}: not a readable parquet file (")
    pq.write_table(pa.table({"text": ["the cat sat", None]}), tmp_path / "nulls.parquet")
    assert list(read_source(str(tmp_path / "nulls.parquet"))) == ["the cat sat"]


@promise("`swembed ensemble --weights \"1,\"` (an empty or non-numeric weight)",
         "(issue 58) \"could not convert string to float: ''\"",
         "refused before any member is read, naming the flag and the part; nothing written",
         "--weights <weights>: <part> is not a number; give one positive number per member, comma-separated "
         "(e.g. 1,2)")
def test_ensemble_weights_not_numbers(tmp_path, tiny_model, promised):
    for weights, part in (("1,", ""), ("", ""), ("1,x", "x")):
        result = run_cli(["ensemble", tiny_model, tiny_model, "--weights", weights, "--out", tmp_path / "ens"])
        assert error_line(result, "ensemble", promised) == (
            f"--weights {weights!r}: {part!r} is not a number; give one positive number per member, comma-separated "
            "(e.g. 1,2)")
        assert not (tmp_path / "ens").exists()


@promise("one very long text (a 50 MB line) through `encode` / `swembed encode`",
         "(issue 58) the whole text's rows gathered at once: 4.2 GB peak for a 45 MB line on a 32-d table with "
         "weighted back-off rows",
         "`mean_rows` sums at most 2,048 rows at a time whatever the text's length: the same vector (float64 "
         "sums), memory of the gather independent of the length (1.1 GB peak for that line, the rest tokenisation)")
def test_a_long_text_is_summed_in_bounded_memory(tiny_model, promised):
    import tracemalloc

    from swembed.runtime.tokenizer import TokenIds

    model = swembed.load(tiny_model)
    rows = 400_000
    ids = np.random.default_rng(0).integers(0, len(TINY_WORDS), rows)
    weights = np.ones(rows, dtype=np.float32)
    weights[::7] = 0.5  # back-off rows weigh less: the weighted path
    batch = TokenIds(np.concatenate([ids, [0, 1, 2]]), np.array([rows, 3]),
                     np.concatenate([weights, np.ones(3, np.float32)]))  # a long text, then a short one
    tracemalloc.start()
    try:
        vectors = model.mean_rows(batch, normalize=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, peak  # one whole gather would be 400,000 x 8 x 4 bytes = 12.8 MB, and copies of it
    table = np.asarray(model.table, dtype=np.float64)
    expected = (table[ids] * weights[:, None]).sum(axis=0) / weights.astype(np.float64).sum()
    np.testing.assert_allclose(vectors[0], expected, rtol=1e-6)
    np.testing.assert_allclose(vectors[1], table[[0, 1, 2]].mean(axis=0), rtol=1e-6)


@promise("a full disk (or a file-size limit) while writing an output: `swembed encode`, `swembed dedup`",
         "(issue 58) \"96000 requested and 4968 written\" or \"[Errno 27] File too large\": no file named",
         "one line naming the output; the temp removed, an existing output left as it was",
         "<output>: not written (<reason>; is the disk full?); nothing was replaced")
def test_a_full_disk_names_the_output(tmp_path, tiny_model, promised):
    import resource
    import signal

    def small_files() -> None:  # a file-size limit fails a write as a full disk does (EFBIG for ENOSPC)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))

    (tmp_path / "in.txt").write_text("the cat sat\n" * 300)
    for command, out in (("encode", tmp_path / "v.npy"), ("dedup", tmp_path / "dq")):
        flag = "--output" if command == "encode" else "--out"
        args = [command, tiny_model, "--input", tmp_path / "in.txt"] if command == "encode" else \
            [command, tmp_path / "in.txt", "--model", tiny_model, "--quiet"]
        result = subprocess.run([sys.executable, "-m", "swembed.cli", *map(str, args), flag, str(out)],
                                capture_output=True, text=True, preexec_fn=small_files)
        assert error_line(result, command, promised).startswith(f"{out}: not written (")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "tiny-model"]


@promise("`swembed dedup --k 100000000000` (also `dedup-select --k`)",
         "(issue 58) arrays of k neighbours per text allocated: memory exhausted",
         "refused before any work: at most 1,000 neighbours per text; nothing written",
         "--k must be between 1 and 1000, got <k>", "--k must be at most 1000 (neighbours per text), got <k>")
def test_dedup_k_beyond_memory(tmp_path, tiny_model, promised):
    (tmp_path / "in.txt").write_text("the cat sat\na good dog\n")
    args = ["dedup", tmp_path / "in.txt", "--model", tiny_model, "--quiet", "--k", "100000000000"]
    result = run_cli([*args, "--out", tmp_path / "dq"])
    assert error_line(result, "dedup", promised) == "--k must be between 1 and 1000, got 100000000000"
    assert run_cli([*args[:-2], "--out", tmp_path / "run"]).returncode == 0
    result = run_cli(["dedup-select", tmp_path / "run", "--out", tmp_path / "sel", "--outliers", "1", "--k", 10**11])
    assert error_line(result, "dedup-select", promised) == \
        "--k must be at most 1000 (neighbours per text), got 100000000000"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "run", "tiny-model"]


# --- the page ----------------------------------------------------------------------------------------------


def all_promises() -> dict[str, Promise]:
    """Every module's rows, in ``PROMISE_MODULES`` order (importing a module registers its rows)."""
    import importlib

    for name in PROMISE_MODULES:
        importlib.import_module(name)
    order = {name: i for i, name in enumerate(PROMISE_MODULES)}
    return dict(sorted(PROMISES.items(), key=lambda item: order[item[1].test.split("/")[1].split(".py")[0]]))


def doc_table() -> str:
    return "\n".join([HEADER, *(p.row() for p in all_promises().values())])


def test_the_doc_is_the_promises():
    import importlib

    tests = [name for module in PROMISE_MODULES for name in vars(importlib.import_module(module))
             if name.startswith("test_") and name != "test_the_doc_is_the_promises"]
    assert sorted(tests) == sorted(all_promises()), "every bad-input test carries its row (@promise)"
    text = DOC.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert text.split(BEGIN)[1].split(END)[0].strip() == doc_table(), \
        "docs/what-happens-when.md differs from the tests' rows: python tests/test_bad_input.py rewrites it"


if __name__ == "__main__":
    sys.modules["test_bad_input"] = sys.modules["__main__"]  # the other modules register their rows here
    sys.path.insert(0, str(Path(__file__).parent))
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN)
    DOC.write_text(f"{head}{BEGIN}\n{doc_table()}\n{END}{rest.split(END)[1]}", encoding="utf-8")
    print(f"{DOC}: {len(PROMISES)} rows")
