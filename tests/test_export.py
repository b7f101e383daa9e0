"""Every export format and dtype round-trips; st/model2vec folders load in the real libraries."""
import json

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

import swembed
from swembed.integrations.formats import export, quantize_int8
from swembed.runtime.folder import write_model_folder

TEXTS = ["The cat sat on the mat.", "A dog, a cat!", "goodness me", "", "?!", "CATS and dogs"]
# "cats" is one teacher token, so swembed skips it, while greedy WordPiece over our words reads cat + ##s:
# the one documented place where the st/model2vec exports differ from swembed.
BACKOFFS_DISAGREE = {"CATS and dogs"}


@pytest.fixture
def model_dir(tmp_path):
    words = ["the", "cat", "sat", "on", "mat", "a", "dog", "good", "me", "and", "dogs"]
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}, "##ness": 20, "##s": 21, "cats": 22}
    sub = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    sub.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    table = np.random.default_rng(0).normal(size=(len(words), 16)).astype(np.float32)
    config = {"teacher": {"name": "test", "hub_id": "test/teacher"}, "tokenization": {}}
    return write_model_folder(tmp_path / "model", table, words, config, sub.to_str())


def plain_numpy_encode(folder, texts):
    """The README's dozen lines: read the edge format with numpy alone (no swembed import)."""
    import re
    import unicodedata

    config = json.loads((folder / "config.json").read_text())
    table = np.load(folder / "embeddings.npy").astype(np.float32)
    if (folder / "scales.npy").exists():
        table *= np.load(folder / "scales.npy")[:, None]
    index = {w: i for i, w in enumerate((folder / "vocab.txt").read_text(encoding="utf-8").splitlines())}
    rules = config["tokenization"]
    out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
    for row, text in enumerate(texts):
        text = unicodedata.normalize(rules["unicode_normalization"], text).lower()
        ids = [index[w] for w in re.findall(rules["word_pattern"], text) if w in index]
        if ids:
            v = table[ids].mean(0)
            out[row] = v / np.linalg.norm(v)
    return out


@pytest.mark.parametrize("dtype,tolerance", [("float32", 1e-6), ("float16", 2e-3), ("int8", 2e-2)])
def test_npy_round_trip_and_plain_numpy_reader(model_dir, tmp_path, dtype, tolerance):
    out = export(model_dir, "npy", tmp_path / f"npy-{dtype}", dtype)
    original, exported = swembed.load(model_dir), swembed.load(out)
    assert np.load(out / "embeddings.npy").dtype == np.dtype(dtype)
    known = [t for t in TEXTS if "goodness" not in t and "CATS" not in t]  # OOV back-off is swembed's, not numpy's
    np.testing.assert_allclose(exported.encode(TEXTS), original.encode(TEXTS), atol=tolerance)
    np.testing.assert_allclose(plain_numpy_encode(out, known), exported.encode(known), atol=1e-6)


def test_int8_quantisation_error_is_bounded():
    table = np.random.default_rng(1).normal(size=(100, 32)).astype(np.float32)
    q, scales = quantize_int8(table)
    assert q.dtype == np.int8 and np.abs(q.astype(np.float32) * scales[:, None] - table).max() <= scales.max() / 2


def assert_same_where_backoffs_agree(theirs, model_dir):
    ours = swembed.load(model_dir).encode(TEXTS)
    agree = [i for i, t in enumerate(TEXTS) if t not in BACKOFFS_DISAGREE]
    np.testing.assert_allclose(theirs[agree], ours[agree], atol=1e-5)
    differ = [i for i, t in enumerate(TEXTS) if t in BACKOFFS_DISAGREE]
    assert np.abs(theirs[differ] - ours[differ]).max() > 1e-3


def test_sentence_transformers_export_matches(model_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    out = export(model_dir, "st", tmp_path / "st")
    assert_same_where_backoffs_agree(SentenceTransformer(str(out), device="cpu").encode(TEXTS), model_dir)


def test_model2vec_export_matches(model_dir, tmp_path):
    from model2vec import StaticModel

    out = export(model_dir, "model2vec", tmp_path / "m2v", "float32")
    assert_same_where_backoffs_agree(StaticModel.from_pretrained(str(out)).encode(TEXTS), model_dir)


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
