"""Issue 81, "nothing lost" (third layer): text is never silently changed by its decoding, records keep their shape,
a run folder records what the run did and what it read, bad input ends in one line (not a traceback), and temps of
killed runs are swept wherever swembed writes. Each test is a reproduction of the probe's case (it failed before
the fix) or a property over its class; rows in docs/what-happens-when.md name them."""
from __future__ import annotations

import codecs
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_outputs import HANG_S, leftovers, running, stopped_at

from swembed.dedup.clusters import ExactKey, star_representatives, star_to_target
from swembed.runtime.decoding import LineReader
from swembed.runtime.outputs import temp_name
from swembed.runtime.testpoints import POINTS_ENV, WAIT_AT_ENV

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
LATIN_1 = "Herr Müller\nHerr Möller\n".encode("latin-1")
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def one_error(result, command: str, only_line: bool = True) -> str:
    """The message of a refused command: exit 2, one line (the last, after Spark's log, unless ``only_line``)."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 or not only_line, result.stderr
    prefix = f"swembed {command}: error: "
    assert lines[-1].startswith(prefix) and not lines[-1].startswith(f"{prefix}internal"), result.stderr
    return lines[-1][len(prefix):]


def dedup(tmp_path: Path, model: Path, *inputs, out: str = "out", extra=()) -> tuple:
    result = run_cli(["dedup", *inputs, "--model", model, "--out", tmp_path / out, "--quiet", *extra], cwd=tmp_path)
    return result, tmp_path / out


def mapping(out: Path) -> list[list[str]]:
    return [line.split("\t") for line in (out / "mapping.tsv").read_bytes().decode("utf-8", "surrogateescape")
            .splitlines()[1:]]


# 1. Encodings and odd files


def test_a_latin1_file_is_refused_naming_its_line_or_read_in_its_encoding(tmp_path, tiny_model):
    """Before: both umlauts became U+FFFD and "Herr Müller" / "Herr Möller" were exact duplicates, uncounted."""
    (tmp_path / "names.txt").write_bytes(LATIN_1)
    result, out = dedup(tmp_path, tiny_model, "names.txt")
    assert one_error(result, "dedup").startswith("names.txt:1: not valid UTF-8 (invalid start byte at byte 6); give "
                                                 "its encoding with --encoding NAME")
    assert not out.exists()
    result, out = dedup(tmp_path, tiny_model, "names.txt", extra=["--encoding", "latin-1"])
    assert result.returncode == 0, result.stderr
    assert [row[5] for row in mapping(out)] == ["kept", "kept"]
    assert (out / "kept" / "names.txt").read_bytes() == LATIN_1
    result, out = dedup(tmp_path, tiny_model, "names.txt", out="replaced", extra=["--errors", "replace"])
    assert result.returncode == 0 and "2 lines did not decode" in result.stderr
    assert json.loads((out / "summary.json").read_text())["undecodable_lines"] == {"names.txt": 2}
    assert (out / "kept" / "names.txt").read_bytes() == LATIN_1.split(b"\n")[0] + b"\n"  # bytes as they were


def test_cp1251_and_utf16_files_are_text(tmp_path, tiny_model):
    """Before: a cp1251 file was "not a text file", a UTF-16 file with a byte-order mark "contains NUL bytes"."""
    cyrillic = "Привет мир\nПривет всем\n"
    (tmp_path / "ru.txt").write_bytes(cyrillic.encode("cp1251"))
    assert "not valid UTF-8" in one_error(dedup(tmp_path, tiny_model, "ru.txt")[0], "dedup")
    result, out = dedup(tmp_path, tiny_model, "ru.txt", extra=["--encoding", "cp1251"])
    assert result.returncode == 0 and len(mapping(out)) == 2, result.stderr
    for name, encoding in (("u16.txt", "utf-16"), ("u16be.txt", "utf-16-be"), ("u32.txt", "utf-32"),
                           ("sig.txt", "utf-8-sig")):
        data = "the cat sat\r\nthe cat sat\na dog\n".encode(encoding)
        if encoding == "utf-16-be":
            data = codecs.BOM_UTF16_BE + data
        (tmp_path / name).write_bytes(data)
        result, out = dedup(tmp_path, tiny_model, name, out=name + ".out")
        assert result.returncode == 0, result.stderr
        assert [row[5] for row in mapping(out)] == ["kept", "exact", "kept"]  # the \r is not part of the text
        plain = {"utf-16": "utf-16-le", "utf-32": "utf-32-le", "utf-8-sig": "utf-8"}.get(encoding, encoding)
        mark = data[: len(data) - len("the cat sat\r\nthe cat sat\na dog\n".encode(plain))]
        expected = mark + "the cat sat\r\n".encode(plain) + "a dog\n".encode(plain)  # bytes as they were
        assert (out / "kept" / name).read_bytes() == expected
        encoded = run_cli(["encode", tiny_model, "--input", tmp_path / name, "--output", tmp_path / f"{name}.npy"])
        assert encoded.returncode == 0 and np.load(tmp_path / f"{name}.npy").shape == (3, 8), encoded.stderr


@SETTINGS
@given(lines=st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=12),
                      max_size=6),
       encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32", "latin-1", "cp1251"]),
       ending=st.sampled_from(["\n", "\r\n"]), last=st.booleans())
def test_decoding_gives_the_text_or_refuses_and_keeps_the_bytes(lines, encoding, ending, last):
    """Property: a file in any encoding, read with its mark or its --encoding, gives back exactly its lines, and its
    raw lines are its bytes; text the encoding cannot hold is not written; strict UTF-8 refuses or is exact."""
    text = ending.join(lines) + (ending if last and lines else "")
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:
        return
    given_encoding = None if encoding.startswith(("utf-8", "utf-16", "utf-32")) and encoding not in (
        "utf-16-le",) else encoding
    reader = LineReader(io.BytesIO(data), "f.txt", given_encoding)
    rows = list(reader)
    assert b"".join(raw for _, raw, _ in rows) == data
    assert [t for _, _, t in rows] == (text.split(ending)[:-1] if text.endswith(ending) else text.split(ending)) \
        if text else [t for _, _, t in rows] == []
    try:
        utf8 = [t for _, _, t in LineReader(io.BytesIO(data), "f.txt")]
    except ValueError as exc:
        assert str(exc).startswith("f.txt:") and "not valid" in str(exc)
    else:
        assert "\ufffd" not in "".join(utf8) or "\ufffd" in text


def test_a_file_name_that_is_not_utf8_is_read_and_mapped_by_its_bytes(tmp_path, tiny_model):
    """Before: the run failed after all passes, naming no file (UnicodeEncodeError writing mapping.tsv)."""
    name = os.fsdecode(b"caf\xe9.txt")
    (tmp_path / name).write_text("the cat sat\nthe cat sat\n")
    result, out = dedup(tmp_path, tiny_model, name)
    assert result.returncode == 0, result.stderr
    assert [row[1] for row in mapping(out)] == [name, name]
    assert (out / "kept" / name).read_text() == "the cat sat\n"
    (tmp_path / name).write_bytes(LATIN_1)
    assert one_error(dedup(tmp_path, tiny_model, name, out="again")[0], "dedup").startswith("caf\\xe9.txt:1: not valid")


def test_a_damaged_parquet_file_is_named_and_a_categorical_column_is_text(tmp_path, tiny_model):
    """Before: a parquet file damaged inside was reported as a disk error of the output; a Categorical refused."""
    table = pa.table({"text": [f"the cat sat {i % 7}" for i in range(200)]})
    pq.write_table(table, tmp_path / "good.parquet", compression="NONE")
    data = bytearray((tmp_path / "good.parquet").read_bytes())
    data[20:400] = b"\xff" * 380
    (tmp_path / "bad.parquet").write_bytes(bytes(data))
    line = one_error(dedup(tmp_path, tiny_model, "bad.parquet")[0], "dedup")
    assert line.startswith("bad.parquet: not a readable parquet file (")
    categorical = pa.table({"text": pa.array(["the cat", "a dog", "the cat", None]).dictionary_encode()})
    pq.write_table(categorical, tmp_path / "cat.parquet")
    result, out = dedup(tmp_path, tiny_model, "cat.parquet", out="cat")
    assert result.returncode == 0, result.stderr
    assert [row[5] for row in mapping(out)] == ["kept", "kept", "exact", "kept"]
    assert pq.read_table(out / "kept" / "cat.parquet").column("text").to_pylist() == ["the cat", "a dog", None]


# 2. Records that keep their shape


def test_column_boundaries_are_part_of_the_exact_key(tmp_path, tiny_model):
    """Before: (q='what is', a='love') and (q='what', a='is love') were exact duplicates."""
    records = [{"q": "what is", "a": "love"}, {"q": "what", "a": "is love"}, {"q": "what is", "a": "love"}]
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    pq.write_table(pa.table({"q": [r["q"] for r in records], "a": [r["a"] for r in records]}), tmp_path / "qa.parquet")
    for name in ("qa.jsonl", "qa.parquet"):
        result, out = dedup(tmp_path, tiny_model, name, out=name + ".out",
                            extra=["--text-column", "q", "--text-column", "a", "--threshold", "1"])
        assert result.returncode == 0, result.stderr
        reasons = [row[5] for row in mapping(out)]
        assert reasons[:2] == ["kept", "kept"] and reasons[2] == "exact", reasons


@SETTINGS
@given(st.lists(st.tuples(st.text(max_size=6), st.text(max_size=6)), min_size=2, max_size=6))
def test_records_share_a_key_only_when_every_column_does(records):
    """Property: two records' keys (several columns) are equal exactly when each column's key is."""
    key = ExactKey("NFKC", True)
    hashes = key.hashes(records).tolist()
    for i, a in enumerate(records):
        for j, b in enumerate(records):
            same = all(key.key(x) == key.key(y) for x, y in zip(a, b))
            assert (hashes[i] == hashes[j]) == same


def test_nulls_empty_inputs_and_a_file_given_twice(tmp_path, tiny_model):
    """Before: an empty .txt or a 0-row parquet input had no kept file; `a.txt ./a.txt` was mapped twice under one
    name. A JSON null and a parquet null are both the empty text."""
    (tmp_path / "empty.txt").write_bytes(b"")
    schema = pa.schema([("text", pa.string()), ("id", pa.int64())])
    pq.write_table(schema.empty_table(), tmp_path / "none.parquet")
    result, out = dedup(tmp_path, tiny_model, "empty.txt", "none.parquet")
    assert result.returncode == 0, result.stderr
    assert (out / "kept" / "empty.txt").read_bytes() == b""
    assert pq.read_schema(out / "kept" / "none.parquet").equals(schema)
    (tmp_path / "a.txt").write_text("the cat\n")
    assert one_error(dedup(tmp_path, tiny_model, "a.txt", "./a.txt", out="twice")[0], "dedup") == \
        "./a.txt: given twice (also as a.txt); give each input once"
    (tmp_path / "n.jsonl").write_text('{"text": null}\n{"text": ""}\n')
    pq.write_table(pa.table({"text": pa.array([None, ""], pa.string())}), tmp_path / "n.parquet")
    result, out = dedup(tmp_path, tiny_model, "n.jsonl", "n.parquet", out="nulls")
    assert result.returncode == 0, result.stderr
    assert [row[5] for row in mapping(out)] == ["kept", "exact", "exact", "exact"]


# 3. Run folders that tell what the run did


def test_a_target_above_the_set_records_the_threshold_it_applied(tmp_path, tiny_model, tiny_corpus):
    """Before: summary.json recorded 0.5 (and "cosine >= 0.5000") for a run that kept everything, and a re-cut at
    0.5 gave another result."""
    result, out = dedup(tmp_path, tiny_model, tiny_corpus, extra=["--target-size", "100000"])
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["threshold"] == 1.0 and ">= 1.0000" in summary["guarantee"]
    recut = run_cli(["dedup-rethreshold", out, "--threshold", summary["threshold"], "--out", tmp_path / "re",
                     "--quiet"])
    assert recut.returncode == 0, recut.stderr
    assert (tmp_path / "re" / "mapping.tsv").read_bytes() == (out / "mapping.tsv").read_bytes()


@SETTINGS
@given(seed=st.integers(0, 2**16), n=st.integers(2, 30), target=st.integers(1, 40))
def test_a_targets_threshold_recuts_to_the_same_stars(seed, n, target):
    """Property: the stars a target chose are the stars at the threshold it records."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    a, b = np.triu_indices(n, 1)
    sims = np.einsum("ij,ij->i", vectors[a], vectors[b])
    floor = float(rng.uniform(-1, 0.5))
    keep = sims >= floor
    a, b, sims = a[keep], b[keep], sims[keep]
    rank = np.arange(n)
    stars, threshold = star_to_target(n, a, b, sims, rank, target, floor)
    at = sims >= threshold
    assert np.array_equal(stars, star_representatives(n, a[at], b[at], sims[at], rank))


def test_an_input_edited_in_place_with_size_and_time_kept_is_refused(tmp_path, tiny_model):
    """Before: change detection was size and modification time, so the re-cut wrote the edited text."""
    source = tmp_path / "lines.txt"
    source.write_text("the cat sat\nthe cat sat\na dog\n")
    result, out = dedup(tmp_path, tiny_model, source)
    assert result.returncode == 0, result.stderr
    stat = source.stat()
    source.write_text("the dog sat\nthe cat sat\na dog\n")  # same size
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    line = one_error(run_cli(["dedup-rethreshold", out, "--threshold", "0.95", "--out", tmp_path / "re", "--quiet"]),
                     "dedup-rethreshold")
    assert line == (f"{source}: its content changed since the run (SHA-256 differs, though size and time may not); "
                    "run swembed dedup again")
    assert not (tmp_path / "re").exists() and not leftovers(tmp_path)


@pytest.mark.parametrize("damage", ["index", "nested summary", "length"])
def test_a_damaged_state_is_refused_in_one_line(tmp_path, tiny_model, tiny_corpus, damage):
    """Before: an out-of-range index in state/arrays.npz or a deeply nested summary.json was an internal error."""
    result, out = dedup(tmp_path, tiny_model, tiny_corpus)
    assert result.returncode == 0, result.stderr
    arrays = dict(np.load(out / "state" / "arrays.npz"))
    if damage == "index":
        arrays["rep_record"][0] = 10**9
    elif damage == "length":
        arrays["pairs_a"] = arrays["pairs_a"][:-1] if len(arrays["pairs_a"]) else np.zeros(1, np.int64)
    if damage == "nested summary":
        (out / "summary.json").write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    else:
        np.savez(out / "state" / "arrays.npz", **arrays)
    for command in (["dedup-rethreshold", out, "--threshold", "0.95", "--quiet"], ["dedup-explain", out],
                    ["dedup-select", out, "--outliers", "2"]):
        line = one_error(run_cli([*command, "--out", tmp_path / "re"]), command[0])
        assert "damaged" in line and not (tmp_path / "re").exists(), line


# 4. One line, never a traceback


def test_json_past_pythons_limits_is_refused_naming_its_line(tmp_path, tiny_model):
    """Before: a 200,000-deep array was a RecursionError (an internal error), also through --against; a 5,000-digit
    integer gave Python's int-conversion message without the file or line."""
    (tmp_path / "deep.jsonl").write_text('{"text": "a"}\n{"text": "b", "x": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    (tmp_path / "big.jsonl").write_text('{"text": "a", "n": ' + "9" * 5000 + "}\n")
    (tmp_path / "lines.txt").write_text("the cat\n")
    assert one_error(dedup(tmp_path, tiny_model, "deep.jsonl")[0], "dedup") == \
        "deep.jsonl:2: not a JSON object swembed can read (nested too deeply)"
    assert one_error(dedup(tmp_path, tiny_model, "lines.txt", extra=["--against", "deep.jsonl"])[0], "dedup") == \
        "deep.jsonl:2: not a JSON object swembed can read (nested too deeply)"
    assert one_error(dedup(tmp_path, tiny_model, "big.jsonl")[0], "dedup").startswith(
        "big.jsonl:1: not a JSON object swembed can read (Exceeds the limit (4300 digits)")
    result = run_cli(["encode", tiny_model, "--input", tmp_path / "deep.jsonl", "--output", tmp_path / "v.npy"])
    assert one_error(result, "encode") == f"{tmp_path / 'deep.jsonl'}:2: not a JSON object swembed can read (nested " \
        "too deeply)"


@pytest.mark.parametrize(("arguments", "message"), [
    ({"corpus": 123}, "swembed.build(): corpus takes str or a path or list or tuple or dict, got int 123"),
    ({"recipe": 5}, "swembed.build(): recipe takes str or a path or a BuildConfig, got int 5"),
    ({"device": "tpu"}, "device must be one of auto, cpu, cuda or cuda:N, got 'tpu'"),
])
def test_the_build_api_refuses_wrong_arguments_as_swembed_errors(tmp_path, arguments, message):
    """Before: TypeError, RuntimeError (torch's device parser, after loading the teacher), FileExistsError."""
    import swembed
    from swembed.pipeline.config import BuildError

    with pytest.raises(BuildError) as refused:
        swembed.build(**{"corpus": str(tmp_path), **arguments}, out=tmp_path / "m")
    assert str(refused.value) == message


def test_a_work_dir_that_is_a_file_is_refused_by_the_api_and_the_cli(tmp_path, tiny_corpus):
    import swembed
    from swembed.pipeline.config import BuildError

    (tmp_path / "afile").write_text("mine")
    message = f"--work-dir {tmp_path / 'afile'}: a file, not a folder; the stage cache is a folder (give another path)"
    with pytest.raises(BuildError, match="a file, not a folder"):
        swembed.build(corpus=str(tiny_corpus), out=tmp_path / "m", work_dir=str(tmp_path / "afile"))
    result = run_cli(["build", "--corpus", tiny_corpus, "--out", tmp_path / "m", "--work-dir", tmp_path / "afile"])
    assert one_error(result, "build") == message and (tmp_path / "afile").read_text() == "mine"


def test_encode_output_dash_writes_the_npy_to_stdout(tmp_path, tiny_model, tiny_corpus):
    """Before: `--output -` wrote a file named '-'."""
    result = subprocess.run([sys.executable, "-m", "swembed.cli", "encode", str(tiny_model), "--input",
                             str(tiny_corpus), "--output", "-"], capture_output=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    vectors = np.load(io.BytesIO(result.stdout))
    expected = run_cli(["encode", tiny_model, "--input", tiny_corpus, "--output", tmp_path / "v.npy"])
    assert expected.returncode == 0 and np.array_equal(vectors, np.load(tmp_path / "v.npy"))
    assert not (tmp_path / "-").exists()


# 5. Leftovers


def killed_at(args: list, env: dict, point: str, log: Path) -> None:
    """Run ``args`` until it waits at its first point named ``point`` (``testpoints``), then SIGKILL it."""
    recording = {**env, POINTS_ENV: str(log)}
    assert subprocess.run(args, capture_output=True, env=recording).returncode == 0
    passed = log.read_text(encoding="utf-8").splitlines()
    n = next(i for i, name in enumerate(passed, 1) if name == point)
    log.unlink()
    with running(args, env={**recording, WAIT_AT_ENV: str(n)}) as proc:
        assert stopped_at(proc, log, n) == point
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=HANG_S)


def test_a_killed_dedups_temp_is_swept_by_the_next_run_of_another_command(tmp_path, tiny_model, tiny_corpus):
    """Before: only a later run with the same --out swept it."""
    out, tmp = tmp_path / "work" / "out", tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    args = [sys.executable, "-m", "swembed.cli", "dedup", str(tiny_corpus), "--model", str(tiny_model), "--out",
            str(out), "--quiet", "--overwrite"]
    killed_at(args, env, "dedup: records encoded", tmp_path / "points.txt")
    assert leftovers(tmp_path / "work")
    mine = temp_name(tmp_path / "work" / "users")  # a live process's temp (this test's) stays
    mine.mkdir()
    (mine / "data").write_text("live")
    result = subprocess.run([sys.executable, "-m", "swembed.cli", "encode", str(tiny_model), "--input",
                             str(tiny_corpus), "--output", str(tmp_path / "work" / "v.npy")], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert leftovers(tmp_path / "work") == [mine.name]


BUILD_KILLED = """
import sys, swembed
swembed.build(corpus=sys.argv[1], teacher="minilm", dim=8)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_python_build_removes_its_temp_folder_on_sigterm_and_the_next_run_sweeps_a_killed_ones(tmp_path, tiny_model,
                                                                                                tiny_corpus, sig):
    """Before: `swembed.build(out=None)` killed by SIGTERM left swembed-build-* (400 MB) in the system temp folder;
    nothing swept one a SIGKILL left. The build stops at its first point, before any teacher loads."""
    tmp, log = tmp_path / "tmp", tmp_path / "points.txt"
    tmp.mkdir()
    (tmp / "users-file").write_text("not swembed's")
    foreign = tmp / ".swembed-build.swembed-other-1-abc"
    foreign.mkdir()  # a look-alike without the marker: never touched
    env = {**os.environ, "TMPDIR": str(tmp), POINTS_ENV: str(log), WAIT_AT_ENV: "1"}
    with running([sys.executable, "-c", BUILD_KILLED, str(tiny_corpus)], env=env) as proc:
        assert stopped_at(proc, log, 1) == "build: scratch folder made"
        assert any(p.name.startswith(".swembed-build.swembed-") and p != foreign for p in tmp.iterdir())
        proc.send_signal(sig)
        proc.wait(timeout=HANG_S)
    assert proc.returncode == (128 + signal.SIGTERM if sig == signal.SIGTERM else -signal.SIGKILL)
    if sig == signal.SIGKILL:  # the next run of any command sweeps it
        result = subprocess.run([sys.executable, "-m", "swembed.cli", "encode", str(tiny_model), "--input",
                                 str(tiny_corpus), "--output", str(tmp_path / "v.npy")],
                                env={**os.environ, "TMPDIR": str(tmp)}, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp.iterdir()) == sorted([foreign.name, "users-file"])


def test_an_output_name_that_is_not_utf8_leaves_no_temp(tmp_path, tiny_model, tiny_corpus):
    """Before: the temp marker could not be written, and the empty temp folder was never swept."""
    out = tmp_path / os.fsdecode(b"out\xff")
    result = run_cli(["dedup", tiny_corpus, "--model", tiny_model, "--out", out, "--quiet"])
    assert result.returncode == 0, result.stderr
    assert (out / "mapping.tsv").exists() and not leftovers(tmp_path)
    before = snapshot(out)
    again = run_cli(["dedup", tiny_corpus, "--model", tiny_model, "--out", out, "--quiet", "--overwrite"])
    assert again.returncode == 0, again.stderr
    assert snapshot(out).keys() == before.keys() and not leftovers(tmp_path)


def test_bytes_of_a_corpus_file_that_do_not_decode_are_counted_in_one_warning(tmp_path, caplog):
    from swembed.pipeline.sources import read_source

    path = tmp_path / "latin1.txt"
    path.write_bytes("Herr M\u00fcller kam.\nHerr M\u00f6ller ging.\nplain line\n".encode("latin-1"))
    with caplog.at_level("WARNING", logger="swembed.pipeline.sources"):
        lines = list(read_source(str(path)))
    assert lines == ["Herr M\ufffdller kam.", "Herr M\ufffdller ging.", "plain line"]  # what a build read before
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and str(path) in warnings[0] and "2 runs of bytes" in warnings[0]
    caplog.clear()
    (tmp_path / "ok.txt").write_text("Herr M\u00fcller kam.\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="swembed.pipeline.sources"):
        assert list(read_source(str(tmp_path / "ok.txt"))) == ["Herr M\u00fcller kam."]
    assert not caplog.records
