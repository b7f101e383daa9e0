"""Issue 49 (b): a model folder is checked at load, and so are encode's and eval's inputs. Each test is a row of
docs/what-happens-when.md (``@promise``, as in test_bad_input.py): the exact one-line message and that nothing
was written or changed."""
from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_WORDS, run_cli, snapshot
from test_bad_input import error_line, promise, promised, refused_encode, refused_load  # noqa: F401 - promised: a fixture

import swembed
from swembed.eval import sts
from swembed.runtime.folder import TABLE_CHECK, ModelFolderError, read_model_folder, write_model_folder


def patch_config(folder: Path, patch: dict) -> Path:
    config = folder / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), **patch}))
    return config


# --- the table's values ---------------------------------------------------------------------------------------


@promise("NaN or infinite values in `embeddings.npy` (or in an int8 table's `scales.npy`)",
         "(issue 49) loaded without a word: `encode` gave NaN vectors, `dedup` missed duplicates, `eval` printed "
         "nan, `export` copied them",
         "refused on load naming the first bad row; scanned at every load unless the folder marker's `table_check` "
         "(written by swembed after its own scan) matches the file's size and time; `encode` never returns NaN "
         "even then; a table with such rows is never written",
         "<folder>/embeddings.npy: row <n> ('<word>') holds NaN or infinite values (the first such row); the table "
         "is damaged: rebuild or re-export the model",
         "table row <n> ('<word>') holds NaN or infinite values; <out> not written")
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_table(tmp_path, tiny_model, promised, bad):
    table_file = tiny_model / "embeddings.npy"
    table = np.load(table_file)
    assert json.loads((tiny_model / ".swembed-output.json").read_text())[TABLE_CHECK]["finite"] is True
    table[3, 5], table[6, 0] = bad, bad
    np.save(table_file, table)  # written since the check: scanned again
    expected = (f"{table_file}: row 3 ('{TINY_WORDS[3]}') holds NaN or infinite values (the first such row); the "
                "table is damaged: rebuild or re-export the model")
    assert refused_load(tiny_model, promised) == expected
    assert refused_encode(tmp_path, tiny_model, promised) == expected
    records = tmp_path / "records.txt"
    records.write_text("the cat sat\non the mat\n")
    for command, args in (("dedup", ["dedup", records, "--model", tiny_model, "--out", tmp_path / "d"]),
                          ("export", ["export", tiny_model, "--out", tmp_path / "e"])):
        assert error_line(run_cli(args), command, promised) == expected
        assert not (tmp_path / args[-1]).exists()
    with pytest.raises(ModelFolderError) as caught:
        write_model_folder(tmp_path / "w", table, TINY_WORDS, {}, None)
    assert str(caught.value) == f"table row 3 ('{TINY_WORDS[3]}') holds NaN or infinite values; {tmp_path / 'w'} " \
                                "not written"
    assert promised.fits(str(caught.value)) and not (tmp_path / "w").exists()


@promise("a table damaged behind its check (its size and time restored after the edit)",
         "(issue 49) NaN vectors",
         "the load skips the scan, but `encode` checks its output: a text that reads a bad row is refused naming "
         "the row, other texts encode as before",
         "<folder>/embeddings.npy: row <n> ('<word>') holds NaN or infinite values (the first such row); the table "
         "is damaged: rebuild or re-export the model")
def test_table_damaged_behind_its_check(tiny_model, promised):
    table_file = tiny_model / "embeddings.npy"
    clean = swembed.load(tiny_model).encode(["the mat", "good dog"])
    stat = table_file.stat()
    table = np.load(table_file)
    table[TINY_WORDS.index("cat")] = np.nan
    np.save(table_file, table)
    os.utime(table_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    model = swembed.load(tiny_model)  # the record matches: not scanned
    np.testing.assert_array_equal(model.encode(["the mat", "good dog"]), clean)
    with pytest.raises(ModelFolderError) as caught:
        model.encode(["the mat", "a cat sat"])
    assert str(caught.value) == (f"{table_file}: row 1 ('cat') holds NaN or infinite values (the first such row); the "
                                 "table is damaged: rebuild or re-export the model")
    assert promised.fits(str(caught.value))
    with pytest.raises(ModelFolderError, match="row 1 \\('cat'\\)"):
        read_model_folder(tiny_model, scan_values=True)  # a forced scan finds it at load


# --- vocab.txt ------------------------------------------------------------------------------------------------


@promise("`vocab.txt` with a byte-order mark, a word twice, an empty line or a word with surrounding spaces "
         "(CRLF line ends are read as line ends)",
         "(issue 49) accepted: the affected words silently never matched and fell back to pieces",
         "refused on load, naming the line",
         "<folder>/vocab.txt: starts with a byte-order mark (U+FEFF); save it as UTF-8 without one",
         "<folder>/vocab.txt:<line>: <word> repeats line <n>; each word must be on one line only",
         "<folder>/vocab.txt:<line>: <word> is empty or has surrounding whitespace; words are matched exactly")
@pytest.mark.parametrize("edit,expected", [
    (lambda w: ["\ufeff" + w[0], *w[1:]], "starts with a byte-order mark (U+FEFF); save it as UTF-8 without one"),
    (lambda w: [*w[:4], "cat", *w[5:]], ":5: 'cat' repeats line 2; each word must be on one line only"),
    (lambda w: [*w[:2], "sat ", *w[3:]],
     ":3: 'sat ' is empty or has surrounding whitespace; words are matched exactly"),
    (lambda w: [*w[:6], "", w[7]], ":7: '' is empty or has surrounding whitespace; words are matched exactly"),
    (lambda w: [*w[:1], "\u00a0cat", *w[2:]], ":2: '\\xa0cat' is empty or has surrounding whitespace; words are "
                                           "matched exactly"),
], ids=["bom", "duplicate", "trailing space", "empty", "no-break space"])
def test_vocab_lines(tmp_path, tiny_model, promised, edit, expected):
    vocab = tiny_model / "vocab.txt"
    vocab.write_text("".join(w + "\n" for w in edit(TINY_WORDS)), encoding="utf-8", newline="")
    expected = f"{vocab}{'' if expected.startswith(':') else ': '}{expected}"
    assert refused_load(tiny_model, promised) == expected
    assert refused_encode(tmp_path, tiny_model, promised) == expected


# --- config.json ----------------------------------------------------------------------------------------------


@promise("`config.json` values a reader would ignore or trip on: an unknown `tokenization` key, `lowercase: \"yes\"`, "
         "`format_version: -1`, `\"tokenizer\": \"other.json\"`, `word_pattern: \"[unclosed\"`, "
         "`unicode_normalization: \"BOGUS\"`, an ensemble weight 0 or `\"ensemble\": \"x\"`",
         "(issue 49) accepted and ignored, or a traceback (`ZeroDivisionError`, `AttributeError`, `re.error`) at "
         "encode, or an error without the file on non-ASCII text only",
         "refused on load (`ModelFolderError`) naming the key; `encode`, `dedup` and `export` the same, before any "
         "output",
         "<folder>/config.json: tokenization <problem>",
         "<folder>/config.json: format_version must be 0 to 1, got <n>",
         "<folder>/config.json: <key> must be <type>, got <value>",
         "<folder>/config.json: the ensemble subspaces' dims add up to <n>, but the table has <m> columns")
@pytest.mark.parametrize("patch,expected", [
    ({"tokenization": {"oov_backoff": "teacher_prefix", "lower_case": False}},
     "tokenization has unknown key 'lower_case' (known: word_pattern, lowercase, unicode_normalization, oov_backoff, "
     "words, oov_weight)"),
    ({"tokenization": {"lowercase": "yes"}}, "tokenization lowercase must be true or false, got 'yes'"),
    ({"format_version": -1}, "format_version must be 0 to 1, got -1"),
    ({"tokenizer": "other.json"}, 'tokenizer must be "tokenizer.json" or null (no sub-word tokenizer), got '
                                  '"other.json"'),
    ({"tokenization": {"word_pattern": "[unclosed"}},
     "tokenization word_pattern is not a regular expression (unterminated character set at position 0): "
     "'[unclosed'"),
    ({"tokenization": {"unicode_normalization": "BOGUS"}},
     "tokenization unicode_normalization must be one of ('NFKC', 'NFC', 'NFKD', 'NFD', ''), got 'BOGUS'"),
    ({"tokenization": {"oov_weight": 0}}, "tokenization oov_weight must be between 1e-06 and 1e+06, got 0"),
    ({"ensemble": {"subspaces": [{"dim": 4, "weight": 1}, {"dim": 4, "weight": 0}]}},
     'ensemble subspaces must be a list of {"dim": an integer >= 1, "weight": a number above 0}, got '
     '[{"dim": 4, "weight": 1}, {"dim": 4, "weight": 0}]'),
    ({"ensemble": "x"}, 'ensemble must be an object, got "x"'),
    ({"ensemble": {"subspaces": [{"dim": 4, "weight": 1}, {"dim": 3, "weight": 1}]}},
     "the ensemble subspaces' dims add up to 7, but the table has 8 columns"),
], ids=["unknown key", "lowercase", "format_version", "tokenizer", "word_pattern", "normalization", "oov_weight",
        "weight 0", "ensemble x", "ensemble dims"])
def test_config_values(tmp_path, tiny_model, promised, patch, expected):
    config = patch_config(tiny_model, patch)
    assert refused_load(tiny_model, promised) == f"{config}: {expected}"
    assert refused_encode(tmp_path, tiny_model, promised) == f"{config}: {expected}"
    if "ensemble" in patch or "word_pattern" in str(patch):  # where the tracebacks were
        records = tmp_path / "records.txt"
        records.write_text("the cat\nthe cat\n")
        for command, args in (("dedup", ["dedup", records, "--model", tiny_model, "--out", tmp_path / "d"]),
                              ("export", ["export", tiny_model, "--out", tmp_path / "e"])):
            assert error_line(run_cli(args), command, promised) == f"{config}: {expected}"
            assert not Path(args[-1]).exists()


@promise("a model2vec (or sentence-transformers) folder where a swembed folder goes",
         "(issue 49) \"format is None, expected 'swe-static'\"; (issue 78) an st export was called a model2vec folder",
         "refused, naming what the folder is and how to load it",
         "<folder> is a model2vec folder, not a swembed model folder: load it with "
         "model2vec.StaticModel.from_pretrained('<folder>'), or give it as model2vec:<folder> to swembed eval, bench "
         "or ensemble",
         "<folder> is a sentence-transformers folder, not a swembed model folder: load it with "
         "sentence_transformers.SentenceTransformer('<folder>')")
def test_foreign_model_folder(tmp_path, tiny_model, promised):
    pytest.importorskip("model2vec")
    pytest.importorskip("sentence_transformers")
    expected = {"model2vec": "{folder} is a model2vec folder, not a swembed model folder: load it with "
                             "model2vec.StaticModel.from_pretrained('{folder}'), or give it as model2vec:{folder} to "
                             "swembed eval, bench or ensemble",
                "st": "{folder} is a sentence-transformers folder, not a swembed model folder: load it with "
                      "sentence_transformers.SentenceTransformer('{folder}')"}
    for fmt, message in expected.items():
        folder = tmp_path / fmt
        assert run_cli(["export", tiny_model, "--format", fmt, "--out", folder]).returncode == 0
        assert refused_encode(tmp_path, folder, promised) == message.format(folder=folder)
        assert refused_load(folder, promised) == message.format(folder=folder)


# --- encode's inputs ------------------------------------------------------------------------------------------


@promise("`encode(texts, batch_size=0 or -1)`; `None`, bytes or a list holding a non-string as texts",
         "(issue 49) `batch_size=-1` returned shape (0, d): every row lost; raw `TypeError`s",
         "`ValueError` for the batch size, `TypeError` naming the type (and the text's index); any iterable of "
         "strings (a generator, a tuple, a numpy array) encodes as the same list would",
         "batch_size must be an integer of at least 1, got <n>",
         "encode takes a str or an iterable of str, got <type><hint>",
         "encode takes texts of type str; text <i> is <type>: <value>")
def test_encode_arguments(tiny_model, promised):
    model = swembed.load(tiny_model)
    texts = ["the cat sat", "a good dog", "zebra"]
    expected = model.encode(texts)
    for batch_size in (0, -1, 1.5, True):
        with pytest.raises(ValueError) as caught:
            model.encode(texts, batch_size=batch_size)
        assert str(caught.value) == f"batch_size must be an integer of at least 1, got {batch_size!r}"
    for bad, message in ((None, "encode takes a str or an iterable of str, got NoneType"),
                         (b"the cat", "encode takes a str or an iterable of str, got bytes: decode them first, "
                                      "e.g. data.decode('utf-8')"),
                         (5, "encode takes a str or an iterable of str, got int"),
                         (["the cat", None], "encode takes texts of type str; text 1 is NoneType: None"),
                         (["the cat", b"dog"], "encode takes texts of type str; text 1 is bytes: b'dog'")):
        with pytest.raises(TypeError) as caught:
            model.encode(bad)
        assert str(caught.value) == message and promised.fits(message)
    for same in ((t for t in texts), tuple(texts), np.array(texts)):  # a dict: refused (test_untrusted_tables)
        np.testing.assert_array_equal(model.encode(same), expected)
    np.testing.assert_array_equal(model.encode(texts, batch_size=1), expected)


@promise("a compressed (`.gz`, `.bz2`, `.xz`) or binary file as `swembed encode --input`",
         "(issue 49) the compressed bytes encoded as one garbage line, rc 0; binary input accepted",
         "compressed files are read as the text inside (by their suffix, as corpora are); a binary file, or a "
         "damaged compressed one, is refused before the model loads; nothing written",
         "<file>: contains NUL bytes; not a text file",
         "<file>: only <n>% of its first characters are printable text; not a text file",
         "<file>: not a readable <suffix> file (<reason>)")
def test_encode_compressed_or_binary_input(tmp_path, tiny_model, promised):
    lines = ["the cat sat", "on the mat", "a good dog"]
    plain = tmp_path / "in.txt"
    plain.write_text("\n".join(lines) + "\n")
    (tmp_path / "in.txt.gz").write_bytes(gzip.compress(plain.read_bytes()))
    for source in (plain, tmp_path / "in.txt.gz"):
        out = tmp_path / f"{source.name}.npy"
        assert run_cli(["encode", tiny_model, "--input", source, "--output", out]).returncode == 0
    np.testing.assert_array_equal(np.load(tmp_path / "in.txt.gz.npy"), np.load(tmp_path / "in.txt.npy"))
    binary = Path(os.path.realpath(sys.executable))
    (tmp_path / "noise.txt").write_bytes(bytes(range(1, 32)) * 40)
    (tmp_path / "bad.gz").write_bytes(b"not gzip at all")
    for source, expected in (
            (binary, f"{binary}: contains NUL bytes; not a text file"),
            (tmp_path / "in.txt.gz", None),
            (tmp_path / "noise.txt", f"{tmp_path / 'noise.txt'}: only 29% of its first characters are printable "
                                     "text; not a text file"),
            (tmp_path / "bad.gz", f"{tmp_path / 'bad.gz'}: not a readable .gz file (Not a gzipped file (b'no'))")):
        if expected is None:  # the .gz renamed: its bytes are not text
            source = tmp_path / "packed.txt"
            source.write_bytes((tmp_path / "in.txt.gz").read_bytes())
        out = tmp_path / "out.npy"
        message = error_line(run_cli(["encode", tiny_model, "--input", source, "--output", out]), "encode", promised)
        assert expected is None or message == expected
        assert not out.exists()


# --- eval's inputs --------------------------------------------------------------------------------------------

PAIRS = [("the cat sat", "a cat sat", 4.0), ("the dog", "on the mat", 1.0), ("a good dog", "the good dog", 4.5),
         ("the mat", "a cat", 0.5)]


def write_semeval(root: Path, name: str = "sts12") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "STS.input.news.txt").write_text("".join(f"{a}\t{b}\n" for a, b, _ in PAIRS))
    (folder / "STS.gs.news.txt").write_text("".join(f"{g}\n" for *_, g in PAIRS))
    return folder


def write_stsb(root: Path) -> Path:
    (root / "stsb").mkdir(parents=True)
    path = root / "stsb" / "sts-test.csv"
    path.write_text("".join(f"g\tf\t2012\t{i}\t{g}\t{a}\t{b}\n" for i, (a, b, g) in enumerate(PAIRS)))
    return path


@promise("`swembed eval` data whose files do not line up: a gold file a line short, a pair with one column, a score "
         "that is not a number",
         "(issue 49) scored anyway (pairs dropped or misaligned), or an `IndexError` traceback",
         "refused, naming the file and the line; nothing written",
         "<gold file>: <n> lines, but <input file> has <m>; the gold scores must line up with the pairs, one line "
         "each",
         "<file>:<line>: <n> column(s), expected <m> (<columns>)",
         "<file>:<line>: gold score '<value>' is not a number")
def test_eval_files_that_do_not_line_up(tmp_path, tiny_model, promised):
    folder = write_semeval(tmp_path / "eval")
    gold = folder / "STS.gs.news.txt"
    gold.write_text("".join(f"{g}\n" for *_, g in PAIRS[:-1]))
    scores = tmp_path / "scores.json"
    result = run_cli(["eval", tiny_model, "--data", tmp_path / "eval", "--json", scores])
    assert error_line(result, "eval", promised) == \
        f"{gold}: 3 lines, but STS.input.news.txt has 4; the gold scores must line up with the pairs, one line each"
    assert not scores.exists()
    gold.write_text("".join(f"{g}\n" for *_, g in PAIRS))
    inputs = folder / "STS.input.news.txt"
    inputs.write_text(inputs.read_text().replace("the dog\ton the mat", "the dog on the mat"))
    result = run_cli(["eval", tiny_model, "--data", tmp_path / "eval"])
    assert error_line(result, "eval", promised) == \
        f"{inputs}:2: 1 column(s), expected 2 (sentence1, sentence2)"
    path = write_stsb(tmp_path / "b")
    path.write_text(path.read_text().replace("\t4.5\t", "\tfour\t"))
    with pytest.raises(sts.EvalDataError) as caught:
        sts.load_pair_set(tmp_path / "b", "STSBenchmark")
    assert str(caught.value) == f"{path}:3: gold score 'four' is not a number" and promised.fits(str(caught.value))
    path.write_text("g\tf\t2012\t0\t4.0\tthe cat sat\n")
    with pytest.raises(sts.EvalDataError) as caught:
        sts.load_pair_set(tmp_path / "b", "STSBenchmark")
    assert str(caught.value) == (f"{path}:1: 6 column(s), expected 7 "
                                 "(genre, file, year, id, score, sentence1, sentence2)")


@promise("a standard STS file cut short (`sts-test.csv` missing its last rows)",
         "(issue 49) scored as complete (STS-B 75.20 -> 86.20)",
         "refused: a set that starts as the standard one does (its first pair's fingerprint) must have the standard "
         "number of pairs; a set of one's own is scored as it is",
         "<file>: <n> scored pairs, but <set> has <m> (the file starts as the standard set does: truncated?); "
         "restore the whole set")
def test_eval_truncated_standard_set(tmp_path, monkeypatch, promised):
    path = write_stsb(tmp_path)
    whole = sts.load_pair_set(tmp_path, "STSBenchmark")
    assert len(whole.gold) == len(PAIRS)  # not the standard set: scored as it is
    monkeypatch.setitem(sts.STANDARD_SETS, "STSBenchmark", (len(PAIRS), sts.fingerprint(whole)))  # now it is
    assert len(sts.load_pair_set(tmp_path, "STSBenchmark").gold) == len(PAIRS)
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:2]))
    with pytest.raises(sts.EvalDataError) as caught:
        sts.load_pair_set(tmp_path, "STSBenchmark")
    assert str(caught.value) == (f"{path}: 2 scored pairs, but STSBenchmark has 4 (the file starts as the standard "
                                 "set does: truncated?); restore the whole set")
    assert promised.fits(str(caught.value))


@promise("an output named `.` or `..` (`--out .`, `--output ..`)",
         "(issue 49) failed after the work: \"PosixPath('.') has an empty name\"",
         "refused before any work; nothing written",
         "<out>: an output needs a name of its own (not . or ..); give a folder or file name")
def test_output_without_a_name(tmp_path, tiny_model, promised):
    records = tmp_path / "records.txt"
    records.write_text("the cat\nthe cat\n")
    before = snapshot(tmp_path)
    for command, args in (("dedup", ["dedup", records, "--model", tiny_model, "--out", ".", "--overwrite"]),
                          ("export", ["export", tiny_model, "--out", "..", "--overwrite"]),
                          ("encode", ["encode", tiny_model, "--input", records, "--output", ".", "--overwrite"])):
        out = args[args.index("--overwrite") - 1]
        message = error_line(run_cli(args, cwd=tmp_path), command, promised)
        assert message == f"{out}: an output needs a name of its own (not . or ..); give a folder or file name"
    assert snapshot(tmp_path) == before
