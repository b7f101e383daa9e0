"""Every export format and dtype round-trips; st/model2vec folders load in the real libraries and encode as swembed
does (exactly where the formats can say it, else at the agreement the export measured and recorded); the numpy
reader of docs/export.md reads a real table."""
import json
import os
import re
import stat
from pathlib import Path

import numpy as np
import pytest
from conftest import make_sentences, run_cli, small_build_args
from tokenizers import Tokenizer, models, pre_tokenizers

import swembed
from swembed.integrations.agreement import AGREEMENT_FILE, agreement, read_agreement
from swembed.integrations.formats import export, quantize_int8
from swembed.integrations.probe_texts import PROBE_TEXTS
from swembed.runtime.folder import write_model_folder
from swembed.runtime.outputs import atomic_file

TEXTS = ["The cat sat on the mat.", "A dog, a cat!", "goodness me", "", "?!", "CATS and dogs"]
DOCS = Path(__file__).resolve().parents[1] / "docs" / "export.md"


@pytest.fixture
def model_dir(tmp_path):
    words = ["the", "cat", "sat", "on", "mat", "a", "dog", "good", "me", "and", "dogs"]
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}, "##ness": 20, "##s": 21, "cats": 22}
    sub = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    sub.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    table = np.random.default_rng(0).normal(size=(len(words), 16)).astype(np.float32)
    config = {"teacher": {"name": "test", "hub_id": "test/teacher"}, "tokenization": {}}
    return write_model_folder(tmp_path / "model", table, words, config, sub.to_str())


def docs_numpy_reader(folder: Path):
    """The numpy reader of docs/export.md (its Python block, as written there) on ``folder``: its ``encode``."""
    block = next(b for b in re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
                 if "def encode(text)" in b)
    assignment = re.search(r"^folder = .*$", block, re.M)
    assert assignment, "the reader names its folder in one line"
    namespace: dict = {}
    exec(block.replace(assignment.group(0), f"folder = {str(folder)!r}"), namespace)  # noqa: S102 - our own docs
    return lambda texts: np.array([namespace["encode"](text) for text in texts], dtype=np.float32)


@pytest.mark.parametrize("dtype,tolerance", [("float32", 1e-6), ("float16", 2e-3), ("int8", 2e-2)])
def test_npy_round_trip_and_plain_numpy_reader(model_dir, tmp_path, dtype, tolerance):
    out = export(model_dir, "npy", tmp_path / f"npy-{dtype}", dtype)
    original, exported = swembed.load(model_dir), swembed.load(out)
    assert np.load(out / "embeddings.npy").dtype == np.dtype(dtype)
    known = [t for t in TEXTS if "goodness" not in t and "CATS" not in t]  # OOV back-off is swembed's, not numpy's
    np.testing.assert_allclose(exported.encode(TEXTS), original.encode(TEXTS), atol=tolerance)
    np.testing.assert_allclose(docs_numpy_reader(out)(known), exported.encode(known), atol=1e-6)


def test_int8_quantisation_error_is_bounded():
    table = np.random.default_rng(1).normal(size=(100, 32)).astype(np.float32)
    q, scales = quantize_int8(table)
    assert q.dtype == np.int8 and np.abs(q.astype(np.float32) * scales[:, None] - table).max() <= scales.max() / 2


def assert_same(theirs, model_dir):
    """The library's vectors equal swembed's on every text: words, an unknown word the teacher splits in two whose
    known prefix stands in for it (``teacher_prefix``), an unknown word that is one teacher token (skipped)."""
    np.testing.assert_allclose(theirs, swembed.load(model_dir).encode(TEXTS), atol=1e-5)


def test_sentence_transformers_export_matches(model_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    out = export(model_dir, "st", tmp_path / "st")
    assert_same(SentenceTransformer(str(out), device="cpu").encode(TEXTS), model_dir)


def test_model2vec_export_matches(model_dir, tmp_path):
    from model2vec import StaticModel

    out = export(model_dir, "model2vec", tmp_path / "m2v", "float32")
    assert_same(StaticModel.from_pretrained(str(out)).encode(TEXTS), model_dir)


def test_export_rejects_bad_options(model_dir, tmp_path):
    with pytest.raises(ValueError, match="--format"):
        export(model_dir, "onnx", tmp_path / "x")
    with pytest.raises(ValueError, match="int8"):
        export(model_dir, "st", tmp_path / "x", "int8")
    assert not (tmp_path / "x").exists()


def test_exports_of_a_table_with_piece_rows_shadowed_by_words(tmp_path):
    """Piece rows whose text is also a word (a word-initial piece) are unreachable in a WordPiece vocabulary: the
    exports leave them out, so tokens and vectors stay one-to-one, and known words keep their own rows."""
    from model2vec import StaticModel

    words = ["the", "cat", "good", "dog"]
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}, "##ness": 10, "##s": 11}
    sub = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    sub.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    labels = words + ["good", "##ness", "##s"]  # piece rows; the piece "good" is also the word "good"
    table = np.random.default_rng(2).normal(size=(len(labels), 8)).astype(np.float32)
    config = {"teacher": {"name": "test"}, "tokenization": {"oov_backoff": "pieces"},
              "pieces": {"rows": [len(words), len(labels)]}}
    folder = write_model_folder(tmp_path / "model", table, labels, config, sub.to_str())
    ours = swembed.load(folder)
    assert ours.tokenizer.rows("goodness")[0] == [4, 5]  # our back-off uses the piece rows
    out = export(folder, "model2vec", tmp_path / "m2v", "float32")
    theirs = StaticModel.from_pretrained(str(out))
    assert len(theirs.tokens) == theirs.embedding.shape[0]
    texts = ["The cat.", "good dog", "the good cat"]
    np.testing.assert_allclose(theirs.encode(texts), ours.encode(texts), atol=1e-5)


def test_exports_of_a_bilingual_table_merge_its_languages(tmp_path):
    """st/model2vec cannot be told a text's language: a bilingual table exports one vocabulary, where a surface
    form both languages have keeps the row of the language that saw it more often at build time."""
    from model2vec import StaticModel

    en, de = ["the", "cat", "die"], ["der", "hund", "die"]
    sub = Tokenizer(models.WordPiece({"[UNK]": 0, "x": 1}, unk_token="[UNK]"))
    sub.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    table = np.random.default_rng(3).normal(size=(6, 8)).astype(np.float32)
    config = {"teacher": {"name": "test"}, "tokenization": {},
              "languages": {"en": {"rows": [0, 3], "tokenization": {}}, "de": {"rows": [3, 6], "tokenization": {}}}}
    contexts = np.array([50, 9, 2, 40, 7, 30])  # "die": 2 English sentences, 30 German ones
    folder = write_model_folder(tmp_path / "model", table, en + de, config, sub.to_str(),
                                {"word_contexts": contexts})
    ours = swembed.load(folder)
    theirs = StaticModel.from_pretrained(str(export(folder, "model2vec", tmp_path / "m2v", "float32")))
    texts = ["The cat", "der Hund", "die"]
    np.testing.assert_allclose(theirs.encode(texts), ours.encode(texts), atol=1e-5)
    np.testing.assert_allclose(theirs.encode(["die"]), ours.encode(["die"], lang="de"), atol=1e-5)
    assert not np.allclose(ours.encode(["die"], lang="de"), ours.encode(["die"], lang="en"))


def test_exports_spell_sentencepiece_pieces_as_wordpiece(tmp_path):
    """A sentencepiece teacher (e5/XLM-R) marks word starts with '▁'; the export spells its piece rows the
    WordPiece way ('##' for a continuation), so an unknown word still reaches its pieces' rows."""
    from model2vec import StaticModel

    unigram = Tokenizer(models.Unigram([("<unk>", 0.0), ("▁cat", -1.0), ("s", -2.0), ("▁", -3.0), ("c", -5.0),
                                        ("a", -5.0), ("t", -5.0), ("▁!", -1.0)], unk_id=0))
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    words, pieces = ["the", "dog"], ["▁cat", "s", "▁!"]  # a punctuation piece: no word ever reaches its row
    table = np.random.default_rng(4).normal(size=(5, 8)).astype(np.float32)
    config = {"teacher": {"name": "test"}, "tokenization": {"oov_backoff": "pieces"}, "pieces": {"rows": [2, 5]}}
    folder = write_model_folder(tmp_path / "model", table, words + pieces, config, unigram.to_str())
    ours = swembed.load(folder)
    assert ours.tokenizer.rows("cats")[0] == [2, 3]
    theirs = StaticModel.from_pretrained(str(export(folder, "model2vec", tmp_path / "m2v", "float32")))
    texts = ["cats", "the dog", "the dog!"]  # an unknown word alone: its pieces' mean both sides; "!" none
    np.testing.assert_allclose(theirs.encode(texts), ours.encode(texts), atol=1e-5)


def test_exports_read_a_language_without_spaces_by_longest_match(tmp_path):
    """A ja table's words are the teacher's tokens; in the merged export vocabulary they are also continuations,
    so a run of Japanese with no spaces is read as the same words the runtime finds."""
    from model2vec import StaticModel

    unigram = Tokenizer(models.Unigram([("<unk>", 0.0), ("▁", -2.0), ("東京", -3.0), ("の", -2.0), ("天気", -3.0),
                                        ("▁the", -1.0), ("▁cat", -1.0), ("天", -6.0), ("気", -6.0)], unk_id=0))
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    en, ja = ["the", "cat"], ["東京", "の", "天気"]
    table = np.random.default_rng(5).normal(size=(5, 8)).astype(np.float32)
    rules = {"oov_backoff": "pieces"}
    config = {"teacher": {"name": "test"}, "tokenization": rules,
              "languages": {"en": {"rows": [0, 2], "tokenization": rules},
                            "ja": {"rows": [2, 5], "tokenization": {"oov_backoff": "none", "words": "teacher"}}}}
    folder = write_model_folder(tmp_path / "model", table, en + ja, config, unigram.to_str())
    ours = swembed.load(folder)
    assert ours.tokenizers["ja"].words("東京の天気") == ja
    theirs = StaticModel.from_pretrained(str(export(folder, "model2vec", tmp_path / "m2v", "float32")))
    texts = ["東京の天気", "the cat", "天気の東京"]
    np.testing.assert_allclose(theirs.encode(texts), ours.encode(texts), atol=1e-5)


# --- a real table: word, piece and gram rows (the MiniLM teacher) -----------------------------------------------


@pytest.fixture(scope="module")
def real_table(tmp_path_factory):
    """A small build with the real MiniLM: word rows, the teacher's piece rows (many spelled like words: "the" is
    both), 64 gram rows, and an unknown word weighing 2."""
    root = tmp_path_factory.mktemp("real-table")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(make_sentences(400)) + "\n", encoding="utf-8")
    recipe = root / "recipe.toml"
    recipe.write_text("[tokenization]\noov_weight = 2.0\n\n[grams]\nbuckets = 64\n", encoding="utf-8")
    out = root / "model"
    result = run_cli(["build", "--recipe", recipe, *small_build_args(corpus, out)[1:], "--work-dir", root / "work"],
                     same_process=True)
    assert result.returncode == 0, result.stderr
    return out


def block_labels(folder: Path) -> dict[str, set[str]]:
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    labels = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    (start, end), grams = config["pieces"]["rows"], config["grams"]["rows"][0]
    return {"words": set(labels[:start]), "pieces": set(labels[start:end]), "grams": set(labels[grams:])}


@pytest.mark.teacher
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_docs_numpy_reader_reads_a_real_table(real_table, tmp_path, dtype):
    """The reader of docs/export.md, run as written there, gives swembed's vectors on a real table whose piece
    rows share spellings with its words (the reader once let a piece row overwrite the word's row)."""
    out = export(real_table, "npy", tmp_path / dtype, dtype)
    blocks = block_labels(out)
    shared = sorted(blocks["words"] & blocks["pieces"])
    assert len(shared) > 10 and blocks["grams"]
    texts = [" ".join(shared[i::4]).upper() for i in range(4)] + [s.rstrip(".") for s in make_sentences(20, seed=3)]
    ours = swembed.load(out).encode(texts)
    assert (np.linalg.norm(ours, axis=1) > 0).all()
    np.testing.assert_allclose(docs_numpy_reader(out)(texts), ours, atol=1e-5)


def library_encoder(fmt: str, folder: Path):
    if fmt == "st":
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(folder), device="cpu").encode
    from model2vec import StaticModel

    return StaticModel.from_pretrained(str(folder)).encode


@pytest.mark.teacher
@pytest.mark.parametrize("fmt", ["st", "model2vec"])
def test_exports_of_a_real_table_agree_with_swembed(real_table, tmp_path, fmt):
    """Loaded by the real library, an export encodes the probe texts at the agreement it recorded (and `swembed
    export` printed); exactly as swembed on texts of known words and of unknown words that are one teacher token
    (their whole back-off: pieces, grams and weight), however long: nothing is cut at 512 tokens."""
    out = export(real_table, fmt, tmp_path / fmt)
    encode, ours = library_encoder(fmt, out), swembed.load(real_table)
    recorded = read_agreement(out)
    measured = agreement(ours.encode(list(PROBE_TEXTS)), encode(list(PROBE_TEXTS)))
    assert recorded is not None and recorded.texts == len(PROBE_TEXTS) > 150
    assert measured.min == pytest.approx(recorded.min, abs=1e-6) and measured.below == recorded.below
    single = [w for w in ("cats", "birds", "running", "quickly", "xyz") if len(ours.tokenizer.word_pieces(w)) == 1
              and w not in ours.tokenizer.vocab]
    assert single and all(ours.tokenizer.backoff(w)[0] for w in single)
    long_text = " ".join(make_sentences(200)) + " " + " ".join(single * 20)  # over 2,000 words, the unknown last
    texts = make_sentences(10, seed=5) + [f"The {w} and the dog." for w in single] + [long_text]
    assert len(long_text.split()) > 2000
    np.testing.assert_allclose(encode(texts), ours.encode(texts), atol=1e-5)


def test_export_prints_and_records_its_agreement(tiny_model, tmp_path):
    """`swembed export --format st|model2vec` prints the agreement it measured on the probe texts in one line and
    records it in the folder; npy (swembed's own format) has none."""
    for fmt in ("st", "model2vec", "npy"):
        out = tmp_path / fmt
        result = run_cli(["export", tiny_model, "--format", fmt, "--out", out])
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        if fmt == "npy":
            assert len(lines) == 1 and not (out / AGREEMENT_FILE).exists()
            continue
        recorded = read_agreement(out)
        assert recorded is not None and lines[1] == recorded.line(f"{out} ({fmt})")
        assert re.fullmatch(rf"{re.escape(str(out))} \({fmt}\) agrees with swembed on \d+ probe texts: min cosine "
                            r"\d\.\d{4}, mean \d\.\d{4}, \d+ below 0\.99", lines[1])
        record = json.loads((out / AGREEMENT_FILE).read_text())
        assert record["format"] == fmt and record["texts"] == len(PROBE_TEXTS)


def test_export_folders_get_the_mode_of_a_plain_write(tiny_model, tmp_path):
    """Every file an export writes has the mode ``open`` gives (0o666 less the umask), model.safetensors too
    (safetensors writes it through mkstemp: 0o600); so does a file written private into an atomic file."""
    old = os.umask(0o022)
    try:
        for fmt in ("st", "model2vec", "npy"):
            out = export(tiny_model, fmt, tmp_path / fmt)
            files = [p for p in out.rglob("*") if p.is_file()]
            assert any(p.name == "model.safetensors" for p in files) or fmt == "npy"
            assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {"0o644"}, fmt
        os.umask(0o027)
        with atomic_file(tmp_path / "private.bin") as tmp:
            os.close(os.open(tmp, os.O_CREAT | os.O_WRONLY, 0o600))
        assert stat.S_IMODE((tmp_path / "private.bin").stat().st_mode) == 0o640
    finally:
        os.umask(old)


def test_export_formats_are_one_registry_that_the_cli_reads(tiny_model, tmp_path):
    from swembed.cli import subcommands
    from swembed.integrations.formats import FORMATS, export_format

    choices = next(a for a in subcommands()["export"]._actions if a.dest == "format").choices
    assert list(choices) == list(FORMATS) and all(f.writer and f.dtypes for f in FORMATS.values())
    with pytest.raises(ValueError, match=r"--format must be one of npy, st, model2vec, got 'onnx'"):
        export_format("onnx")
    result = run_cli(["export", tiny_model, "--format", "st", "--dtype", "int8", "--out", tmp_path / "x"])
    assert result.returncode == 2 and "int8 is not an option of the st format, which takes float32 or float16" \
        in result.stderr and not (tmp_path / "x").exists()
