import numpy as np
import pytest

import swembed
from swembed.cli import main
from swembed.integrations.ensemble import build_ensemble
from swembed.runtime.folder import write_model_folder


def _table(tmp_path, name, words, dim, seed):
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(len(words), dim)).astype(np.float32)
    return str(write_model_folder(tmp_path / name, table, words, {"tokenization": {}}, None))


TEXTS = ["the cat sat", "a dog ran far", "the dog", "cat cat far", "zebra", "ran the"]


@pytest.mark.parametrize("weights", [[1.0, 1.0], [2.0, 1.0]])
def test_ensemble_dot_is_weighted_mean_of_member_cosines(tmp_path, weights):
    a = _table(tmp_path, "a", ["the", "cat", "sat", "dog"], 6, 0)
    b = _table(tmp_path, "b", ["a", "dog", "ran", "far", "cat"], 4, 1)
    out = build_ensemble([a, b], tmp_path / "ens", weights)
    ensemble = swembed.load(out)
    assert ensemble.words[:4] == ["the", "cat", "sat", "dog"] and set(ensemble.words) == {
        "the", "cat", "sat", "dog", "a", "ran", "far"}
    assert ensemble.dim == 10
    e = ensemble.encode(TEXTS)
    ea, eb = swembed.load(a).encode(TEXTS), swembed.load(b).encode(TEXTS)
    expected = (weights[0] * ea @ ea.T + weights[1] * eb @ eb.T) / sum(weights)
    np.testing.assert_allclose(e @ e.T, expected, atol=1e-6)


def test_ensemble_rejects_bad_weights_and_export_formats(tmp_path, capsys):
    a = _table(tmp_path, "a", ["x", "y"], 3, 0)
    b = _table(tmp_path, "b", ["y", "z"], 3, 1)
    assert main(["ensemble", a, b, "--weights", "1,0", "--out", str(tmp_path / "e")]) == 2
    assert "weights must be between 1e-06 and 1e+06, got [1.0, 0.0]" in capsys.readouterr().err
    assert main(["ensemble", a, b, "--weights", "1", "--out", str(tmp_path / "e")]) == 2
    assert "1 weights for 2 members" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()
    assert main(["ensemble", a, b, "--out", str(tmp_path / "e")]) == 0
    assert main(["export", str(tmp_path / "e"), "--format", "model2vec", "--out", str(tmp_path / "m")]) == 2
    assert "export it as npy" in capsys.readouterr().err


def test_wordllama_member_rows_are_its_own_word_encodings(tmp_path):
    """WordLlama's shipped table as a member: its sub-space row for a word is WordLlama's encoding of it."""
    pytest.importorskip("wordllama")
    from pathlib import Path

    import wordllama
    from wordllama import WordLlama

    a = _table(tmp_path, "a", ["paris", "cat"], 4, 0)
    ensemble = swembed.load(build_ensemble([a, "wordllama"], tmp_path / "ens"))
    wl = WordLlama.load(disable_download=True, cache_dir=Path(wordllama.__file__).parent)
    rows = np.asarray(ensemble.table[[ensemble.tokenizer.vocab["paris"], ensemble.tokenizer.vocab["cat"]], 4:])
    np.testing.assert_allclose(rows, wl.embed(["Paris", "cat"]), rtol=1e-5, atol=1e-6)
    assert len(ensemble.words) > 10_000  # WordLlama's whole-word pieces join the vocabulary


def _piece_table(tmp_path, name, words, pieces, dim, seed, buckets=16):
    """A table with piece rows (its own WordPiece ids: the piece order differs per member) and ``buckets`` gram
    rows, backing off as a built table does."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, **{p: i + 1 for i, p in enumerate(pieces)}}
    sub = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    sub.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    labels = words + pieces + [f"<gram {i}>" for i in range(buckets)]
    table = np.random.default_rng(seed).normal(size=(len(labels), dim)).astype(np.float32)
    config = {"tokenization": {"oov_backoff": "pieces", "oov_weight": 2.0},
              "pieces": {"rows": [len(words), len(words) + len(pieces)]},
              "grams": {"rows": [len(words) + len(pieces), len(labels)]}}
    return str(write_model_folder(tmp_path / name, table, labels, config, sub.to_str()))


def test_ensemble_backs_off_through_each_members_own_piece_and_gram_rows(tmp_path):
    """Unknown words reach the same pieces and grams in every sub-space as in each member alone, so an ensemble
    of members that share a WordPiece vocabulary is exactly the weighted mean of their cosines, unknown words
    included (matched by piece text: the two tokenizers number the pieces differently)."""
    a = _piece_table(tmp_path, "a", ["the", "cat", "dog"], ["good", "##ness", "bad", "##ly"], 6, 0)
    b = _piece_table(tmp_path, "b", ["the", "cat", "dog"], ["bad", "##ly", "##ness", "good"], 4, 1)
    weights = [2.0, 1.0]
    ensemble = swembed.load(build_ensemble([a, b], tmp_path / "ens", weights))
    texts = ["the goodness", "badly the cat", "dog goodly", "cat"]
    e = ensemble.encode(texts)
    ea, eb = swembed.load(a).encode(texts), swembed.load(b).encode(texts)
    expected = (weights[0] * ea @ ea.T + weights[1] * eb @ eb.T) / sum(weights)
    np.testing.assert_allclose(e @ e.T, expected, atol=1e-6)
    assert ensemble.config["tokenization"]["oov_backoff"] == "pieces"


def test_ensemble_member_without_the_pieces_encodes_their_text(tmp_path):
    """A member without piece or gram rows (here a plain word table) gives a piece row its encoding of the
    piece's text and a gram row zero: the first member's sub-space backs off as it does alone."""
    a = _piece_table(tmp_path, "a", ["the", "cat"], ["good", "##ness"], 6, 0)
    b = _table(tmp_path, "b", ["the", "cat", "good", "ness"], 4, 1)
    ensemble = swembed.load(build_ensemble([a, b], tmp_path / "ens"))
    rows = ensemble.float_rows()
    start, end = ensemble.config["pieces"]["rows"]
    plain = swembed.load(b)
    np.testing.assert_allclose(rows[start:end, 6:], plain.encode(["good", "ness"], normalize=False), atol=1e-6)
    gram_start, gram_end = ensemble.config["grams"]["rows"]
    assert gram_end - gram_start == 16 and not rows[gram_start:gram_end, 6:].any()
    alone = swembed.load(a).encode(["the goodness"])
    np.testing.assert_allclose(ensemble.encode(["the goodness"])[:, :6] * np.sqrt(2), alone, atol=1e-6)


def test_an_int8_members_back_off_rows_are_its_dequantised_rows(tmp_path):
    """An int8 member (scales per row) brings its piece and gram rows de-quantised: its sub-space encodes unknown
    words as the member alone does."""
    from swembed.integrations.formats import export

    a = export(_piece_table(tmp_path, "a", ["the", "cat"], ["good", "##ness", "bad", "##ly"], 6, 0), "npy",
               tmp_path / "a8", "int8")
    b = _piece_table(tmp_path, "b", ["the", "dog"], ["good", "##ness", "bad", "##ly"], 4, 1)
    ensemble = swembed.load(build_ensemble([str(a), b], tmp_path / "ens"))
    texts = ["the goodness", "badly", "cat goodly"]
    np.testing.assert_allclose(ensemble.encode(texts)[:, :6] * np.sqrt(2), swembed.load(a).encode(texts), atol=1e-6)
