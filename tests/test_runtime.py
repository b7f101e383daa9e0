import json
import subprocess
import sys

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

import swembed
from swembed.runtime import StaticEmbedder, WordTokenizer
from swembed.runtime.folder import ModelFolderError, write_model_folder
from swembed.runtime.tokenizer import TokenIds, TokenizationRules


def wordpiece(vocab_words):
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(vocab_words)}}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def test_words_drop_punctuation_and_lowercase():
    tok = WordTokenizer({})
    assert tok.words("Hello, World! It's 2024_x -- ok?") == ["hello", "world", "it", "s", "2024", "x", "ok"]


def test_oov_backoff_drops_trailing_subwords_until_known():
    sub = wordpiece(["good", "##ness", "##ful", "un", "##known"])
    tok = WordTokenizer({"good": 0, "cat": 1}, TokenizationRules(oov_backoff="teacher_prefix"), sub)
    assert tok.ids("goodness cat") == [0, 1]
    assert tok.ids("unknown") == []  # no known prefix: skipped
    no_backoff = WordTokenizer({"good": 0}, TokenizationRules(oov_backoff="none"), sub)
    assert no_backoff.ids("goodness") == []


def test_piece_backoff_is_the_mean_of_the_words_pieces():
    sub = wordpiece(["good", "##ness", "##ful", "un", "##known"])
    token = sub.token_to_id
    piece_rows = {token("good"): 2, token("##ness"): 3, token("un"): 4, token("##known"): 5}
    tok = WordTokenizer({"good": 0, "cat": 1}, TokenizationRules(oov_backoff="pieces"), sub, piece_rows)
    assert tok.rows("goodness cat") == ([2, 3, 1], [0.5, 0.5, 1.0])  # the word's own pieces, not the word "good"
    assert tok.rows("unknown") == ([4, 5], [0.5, 0.5])
    table = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    model = StaticEmbedder(table, tok)
    expected = (table[2:4].mean(0) + table[1]) / 2  # the OOV word counts once in the sentence mean
    np.testing.assert_allclose(model.encode(["goodness cat"], normalize=False)[0], expected, rtol=1e-6)
    np.testing.assert_allclose(model.encode(["goodness cat"])[0], expected / np.linalg.norm(expected), rtol=1e-6)
    # oov_weight 3: the unknown word counts three times as much as a known word, in both batch paths
    heavy = StaticEmbedder(table, WordTokenizer(tok.vocab, TokenizationRules(oov_backoff="pieces", oov_weight=3.0),
                                                sub, piece_rows))
    assert heavy.tokenizer.rows("goodness cat") == ([2, 3, 1], [1.5, 1.5, 1.0])
    expected = 3 * table[2:4].mean(0) + table[1]
    for texts in (["goodness cat"], ["goodness cat", "cat\ncat"]):
        np.testing.assert_allclose(heavy.encode(texts)[0], expected / np.linalg.norm(expected), rtol=1e-5)
    with pytest.raises(ValueError, match="oov_weight must be between 1e-06 and 1e"):
        TokenizationRules(oov_weight=0.0)


def test_gram_backoff_averages_the_pieces_half_and_the_grams_half(tmp_path):
    from swembed.runtime.tokenizer import char_gram_buckets

    sub = wordpiece(["good", "##ness", "un", "##known"])
    token = sub.token_to_id
    piece_rows = {token("good"): 2, token("##ness"): 3}
    rules = TokenizationRules(oov_backoff="pieces", oov_weight=2.0)
    tok = WordTokenizer({"good": 0, "cat": 1}, rules, sub, piece_rows, gram_rows=(4, 20))
    grams = char_gram_buckets("goodness", 16)
    assert len(grams) == 8 + 7 + 6 and all(0 <= b < 16 for b in grams)  # 3-, 4- and 5-grams of "<goodness>"
    assert tok.rows("goodness cat") == ([2, 3, *(4 + b for b in grams), 1], [0.5, 0.5, *[1 / 21] * 21, 1.0])
    only_grams = tok.rows("unknown")  # no piece row: the grams carry the whole weight
    assert only_grams == ([4 + b for b in char_gram_buckets("unknown", 16)], [2 / 18] * 18)
    table = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)
    model = StaticEmbedder(table, tok)
    expected = table[2:4].mean(0) + table[[4 + b for b in grams]].mean(0) + table[1]
    np.testing.assert_allclose(model.encode(["goodness cat", "x"])[0], expected / np.linalg.norm(expected), atol=1e-5)
    # the same buckets in another process (CRC-32, not Python's salted hash), and from a saved folder
    script = "from swembed.runtime.tokenizer import char_gram_buckets as c; print(c('goodness', 16))"
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "7", "PATH": ""})
    assert other.stdout.strip() == str(grams)
    labels = ["good", "cat", "good", "##ness", *(f"<gram {i}>" for i in range(16))]
    config = {"tokenization": rules.to_dict(), "pieces": {"rows": [2, 4]}, "grams": {"rows": [4, 20]}}
    write_model_folder(tmp_path / "m", table, labels, config, sub.to_str())
    np.testing.assert_allclose(swembed.load(tmp_path / "m").encode(["goodness cat"]), model.encode(["goodness cat"]),
                               rtol=1e-6)
    with pytest.raises(ModelFolderError, match="grams rows"):  # what would not load is not written
        write_model_folder(tmp_path / "bad", table, labels, {**config, "grams": {"rows": [4, 30]}}, sub.to_str())
    assert not (tmp_path / "bad").exists()


def test_encode_is_normalised_mean_and_zero_for_unknown():
    table = np.array([[3.0, 0.0], [0.0, 4.0]], dtype=np.float32)
    model = StaticEmbedder(table, WordTokenizer({"a": 0, "b": 1}))
    out = model.encode(["a b", "a", "zzz", ""])
    assert out.dtype == np.float32 and out.shape == (4, 2)
    np.testing.assert_allclose(out[0], np.array([1.5, 2.0]) / 2.5, rtol=1e-6)
    np.testing.assert_allclose(out[1], [1.0, 0.0])
    assert not np.isnan(out).any() and (out[2:] == 0).all()


def test_an_assigned_table_is_what_encode_and_save_use(tmp_path):
    """``model.table = ...`` (a transform of every row) changes what encode returns and what save writes; an array
    the tokenizer's rows or the int8 scales do not fit is refused in one line."""
    model = StaticEmbedder(np.array([[3.0, 0.0], [0.0, 4.0]], dtype=np.float32), WordTokenizer({"a": 0, "b": 1}))
    before = model.encode(["a b"])
    model.table = model.table[:, ::-1].copy()
    np.testing.assert_allclose(model.encode(["a b"]), before[:, ::-1], rtol=1e-6)
    model.save(tmp_path / "turned")
    np.testing.assert_allclose(swembed.load(tmp_path / "turned").encode(["a b"]), before[:, ::-1], rtol=1e-6)
    for wrong in (np.zeros((3, 2), np.float32), np.zeros((2, 2), np.int8)):
        with pytest.raises(ValueError, match=r"must keep the old one's shape \(2, 2\) and kind"):
            model.table = wrong
    np.testing.assert_allclose(model.encode(["a b"]), before[:, ::-1], rtol=1e-6)


def test_folder_round_trip_and_errors(tmp_path):
    table = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    out = write_model_folder(tmp_path / "m", table, ["x", "y", "z"], {"tokenization": {}}, None)
    model = swembed.load(out)
    np.testing.assert_array_equal(np.asarray(model.table), table)
    assert model.words == ["x", "y", "z"]
    with pytest.raises(ModelFolderError):
        write_model_folder(tmp_path / "bad", table, ["x", "y"], {}, None)
    assert not (tmp_path / "bad").exists()
    with pytest.raises(ModelFolderError):
        swembed.load(tmp_path / "missing")
    (tmp_path / "m" / "config.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ModelFolderError):
        swembed.load(out)


def test_runtime_does_not_import_torch(tmp_path):
    table = np.eye(2, dtype=np.float32)
    out = write_model_folder(tmp_path / "m", table, ["a", "b"], {}, None)
    code = f"import sys, swembed; swembed.load({str(out)!r}).encode(['a b']); print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_batch_path_equals_text_by_text_on_hostile_input():
    sub = wordpiece(["good", "##ness", "caf", "##é"])
    vocab = {w: i for i, w in enumerate(["good", "cat", "café", "σοφος", "naïve", "x"])}
    piece_rows = {sub.token_to_id("caf"): 6, sub.token_to_id("##é"): 7, sub.token_to_id("##ness"): 8,
                  sub.token_to_id("good"): 9}
    tok = WordTokenizer(vocab, TokenizationRules(oov_backoff="pieces"), sub, piece_rows)
    texts = ["Goodness, CAT!", "", "line\nbreak cat", "ＣＡＴ　café", "ΣΟΦΟΣ naïve", "\n\n", "x" * 5 + " x",
             "goodness goodness", "???", "cat\u2028cat", "cafés", "cafe"]
    batch = tok.encode_batch(texts)
    per_text = [tok.rows(t) for t in texts]
    assert batch.lengths.tolist() == [len(ids) for ids, _ in per_text]
    assert batch.ids.tolist() == [i for ids, _ in per_text for i in ids]
    assert batch.weights.tolist() == [w for _, ws in per_text for w in ws]
    table = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32)
    model = StaticEmbedder(table, tok)
    expected = np.array([table[ids].T @ np.array(ws) / max(sum(ws), 1) if ids else np.zeros(4) for ids, ws in per_text])
    norms = np.linalg.norm(expected, axis=1, keepdims=True)
    unit = np.divide(expected, norms, out=np.zeros_like(expected), where=norms > 0)
    np.testing.assert_allclose(model.encode(texts), unit, atol=1e-6)


def test_byte_split_equals_the_word_regex_on_fuzzed_text():
    """The default pattern's fast path (bytes translate + split) finds exactly what ``re.findall`` finds, and the
    batch rows equal the text-by-text rows, on random strings of control, space, mark, symbol and CJK characters."""
    import random
    import re

    from swembed.runtime.tokenizer import WORD_PATTERN, _split_bytes

    alphabet = "aZ09_ -—’éßİı\u00a0\u2003\t\x01\x00\x1f日本ﬁ①Ⅻ½٣.,!?'\"ǅ\u0301\U0001F600"
    rng = random.Random(0)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25))) for _ in range(2000)]
    pattern = re.compile(WORD_PATTERN)
    joined = "\n".join(t.replace("\n", " ") for t in texts)
    expected = [w.encode() if w != "\n" else b"\x01" for w in re.findall(f"(?:{WORD_PATTERN})|\n", joined)]
    assert _split_bytes(joined, pattern) == expected
    vocab = {w: i for i, w in enumerate(sorted({w for t in texts[:500] for w in pattern.findall(t.lower())}))}
    tok = WordTokenizer(vocab, TokenizationRules(oov_backoff="none"))
    batch = tok.encode_batch(texts)
    per_text = [tok.rows(t)[0] for t in texts]
    assert batch.lengths.tolist() == [len(ids) for ids in per_text]
    assert batch.ids.tolist() == [i for ids in per_text for i in ids]


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
def test_grouped_mean_equals_float64_per_text_mean(dtype, monkeypatch):
    """The length-grouped gather agrees with a plain per-text weighted mean, also when a group is split in steps."""
    import swembed.runtime.embedder as embedder

    rng = np.random.default_rng(0)
    table = rng.normal(size=(50, 8)).astype(np.float32)
    scales = None
    if dtype == "int8":
        scales = (np.abs(table).max(axis=1) / 127).astype(np.float32)
        table = np.round(table / scales[:, None]).astype(np.int8)
    elif dtype == "float16":
        table = table.astype(np.float16)
    model = StaticEmbedder(table, WordTokenizer({f"w{i}": i for i in range(50)}), scales=scales)
    lengths = np.array([3, 0, 1, 3, 700, 1, 3, 2, 0])
    flat = rng.integers(0, 50, size=lengths.sum())
    monkeypatch.setattr(embedder, "_GATHER_ROWS", 5)  # groups of 3-word texts are taken one text per step
    weights = rng.choice([1.0, 0.5, 0.25], size=lengths.sum()).astype(np.float32)
    weights[: lengths[0]] = 1.0
    out = model.mean_rows(TokenIds(flat, lengths, weights), normalize=False)
    rows = table.astype(np.float64) * (scales[:, None] if scales is not None else 1.0)
    starts = np.cumsum(lengths) - lengths
    for i, (start, n) in enumerate(zip(starts, lengths)):
        w = weights[start:start + n].astype(np.float64)
        expected = (rows[flat[start:start + n]] * w[:, None]).sum(axis=0) / w.sum() if n else np.zeros(8)
        np.testing.assert_allclose(out[i], expected, rtol=1e-6, atol=1e-6)


def test_language_identification_by_script_then_word_frequencies():
    from swembed.runtime.langid import LanguageIdentifier

    counts = {"en": {"the": 50, "dog": 5, "and": 40, "cat": 5, "die": 1},
              "de": {"der": 50, "hund": 5, "und": 40, "katze": 5, "die": 45}}
    ident = LanguageIdentifier(["en", "de", "zh", "ja"], counts)
    texts = ["これはペンです。", "我喜欢苹果。", "Der Hund und die Katze schlafen.", "The dog and the cat sleep.",
             "die Katze", "12345", "Cat!"]
    assert ident.predict(texts) == ["ja", "zh", "de", "en", "de", "en", "en"]
    assert LanguageIdentifier(["en", "ja"], {}).predict(["我喜欢苹果。"]) == ["ja"]  # Han without a zh table


@pytest.mark.parametrize("segmenter,text,expected", [
    ("jieba", "我喜欢吃苹果。", ["我", "喜欢", "吃", "苹果"]),
    ("fugashi", "今日はとても暑い。", ["今日", "は", "とても", "暑い"]),
])
def test_segmenter_words_and_spans(segmenter, text, expected):
    pytest.importorskip(segmenter)
    tok = WordTokenizer({w: i for i, w in enumerate(expected)}, TokenizationRules(lowercase=False, words=segmenter,
                                                                                    oov_backoff="none"))
    spans = tok.spans(text)
    assert [w for w, _, _ in spans] == expected  # punctuation dropped
    assert all(text[a:b] == w for w, a, b in spans)
    assert tok.ids(text) == list(range(len(expected)))
