"""The compose stage on hand-made extract artifacts: piece rows, the vocabulary cut, shrinkage, merged languages."""
import json

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from swembed.pipeline import files
from swembed.pipeline.compose import Layout, run_compose
from swembed.pipeline.config import ComposeConfig
from swembed.pipeline.stage import StageContext, StageResult
from swembed.runtime.tokenizer import TokenizationRules

PIECES = ["[UNK]", "[CLS]", "good", "##ness", "cat", "hund", "##e", "the"]


def teacher_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.WordPiece({p: i for i, p in enumerate(PIECES)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.add_special_tokens(["[CLS]"])
    return tok


def artifact(tmp_path, name, words, counts, vectors, contexts, piece_vectors, piece_contexts):
    vocab = tmp_path / f"vocab-{name}"
    extract = tmp_path / f"extract-{name}"
    vocab.mkdir()
    extract.mkdir()
    files.write_lines(vocab / files.VOCAB, (f"{w}\t{c}" for w, c in zip(words, counts)))
    np.save(extract / files.WORD_VECTORS, np.asarray(vectors, dtype=np.float32))
    np.save(extract / files.WORD_CONTEXTS, np.asarray(contexts))
    np.save(extract / files.PIECE_VECTORS, np.asarray(piece_vectors, dtype=np.float32))
    np.save(extract / files.PIECE_CONTEXTS, np.asarray(piece_contexts))
    return StageResult("vocab", f"v{name}", vocab), StageResult("extract", f"e{name}", extract)


def compose(tmp_path, config, languages):
    result = run_compose(StageContext(tmp_path / "work", quiet=True), config, languages, teacher_tokenizer().to_str())
    return np.load(result.path / files.TABLE), Layout.read(result.path), result


@pytest.fixture
def english(tmp_path):
    piece_vectors = np.eye(len(PIECES), 4, k=0) * 2  # piece i: 2 * e_i (for i < 4)
    piece_contexts = [0, 0, 5, 3, 1, 0, 0, 9]  # [CLS] (special) and unseen pieces get no row
    words = ["the", "goodness", "cat"]
    vectors = [[1, 1, 1, 1], [0, 0, 0, 4], [4, 0, 0, 0]]
    return artifact(tmp_path, "en", words, [9, 1, 1], vectors, [9, 1, 2], piece_vectors, piece_contexts)


def test_piece_rows_cut_and_piece_prior(tmp_path, english):
    rules = TokenizationRules(oov_backoff="pieces")
    config = ComposeConfig(min_contexts=2, piece_prior=3.0)
    table, layout, result = compose(tmp_path, config, {"en": (rules, *english)})
    assert layout.labels == ["the", "cat", "good", "##ness", "cat", "the"]  # "goodness" (1 context) cut
    assert layout.languages == {"en": [0, 2]} and layout.pieces == [2, 6]
    assert [PIECES[i] for i in layout.piece_ids] == ["good", "##ness", "cat", "the"]
    # cat: 2 contexts, its one piece "cat" = 2 e_4 -> (2 v + 3 v_pieces) / 5; piece vectors keep their means
    np.testing.assert_allclose(table[1], (2 * np.array([4, 0, 0, 0]) + 3 * np.eye(8, 4, k=0)[4] * 2) / 5)
    np.testing.assert_allclose(table[2], [0, 0, 2, 0])
    assert result.stats["languages_stats"]["en"] == {"word_rows": 2, "cut_words": 1, "shrunk_words": 2}
    tokenizers = layout.tokenizers({"en": rules}, teacher_tokenizer())
    assert tokenizers["en"].rows("goodness cat") == ([2, 3, 1], [0.5, 0.5, 1.0])
    contexts = np.load(result.path / files.WORD_CONTEXTS)
    assert contexts.tolist() == [9, 2]
    identity = json.loads((result.path / "manifest.json").read_text())["config"]
    assert identity["shrinkage"] == 3.0 and "piece_prior" not in identity  # the stage cache keeps its key


def test_merged_languages_share_one_row_per_surface_form(tmp_path, english):
    german = artifact(tmp_path, "de", ["hunde", "the"], [3, 1], [[0, 2, 0, 0], [3, 3, 3, 3]], [3, 1],
                      np.zeros((len(PIECES), 4)), np.zeros(len(PIECES), dtype=int))
    rules = TokenizationRules(oov_backoff="pieces")
    config = ComposeConfig(merge_languages=True)
    table, layout, _ = compose(tmp_path, config, {"en": (rules, *english), "de": (rules, *german)})
    assert layout.languages == {"en": [0, 4], "de": [0, 4]}
    assert layout.labels[:4] == ["the", "goodness", "cat", "hunde"]
    np.testing.assert_allclose(table[0], (9 * np.ones(4) + 1 * 3 * np.ones(4)) / 10)  # context-weighted mean
    separate, layout, _ = compose(tmp_path, ComposeConfig(), {"en": (rules, *english), "de": (rules, *german)})
    assert layout.languages == {"en": [0, 3], "de": [3, 5]}
    assert json.dumps(layout.languages)


def test_shrinkage_after_training_pulls_rare_words_towards_their_trained_pieces(tmp_path, english):
    """``[shrinkage] k``: a word row seen in n sentences becomes (n v + k u) / (n + k), u what the inference
    tokeniser gives the word were it unknown (its piece rows, weighted as unknown words are); piece rows and words
    without contexts keep their rows."""
    from swembed.pipeline.shrinkage import shrink_to_backoff

    vocab, extract = english
    contexts = np.array([0, 1, 2])  # "the": a teacher word encoded alone, then "goodness" 1 and "cat" 2 sentences
    np.save(extract.path / files.WORD_CONTEXTS, contexts)
    rules = TokenizationRules(oov_backoff="pieces", oov_weight=2.0)
    _, layout, result = compose(tmp_path, ComposeConfig(), {"en": (rules, vocab, extract)})
    trained = np.random.default_rng(0).normal(size=(layout.pieces[1], 4)).astype(np.float32)
    table = trained.copy()
    tokenizers = layout.tokenizers({"en": rules}, teacher_tokenizer())
    row = {label: i for i, label in enumerate(layout.labels)}
    good, ness, cat_piece = row["good"], row["##ness"], layout.pieces[0] + 2
    assert shrink_to_backoff(table, layout, tokenizers, np.load(result.path / files.WORD_CONTEXTS), 3.0) == 2
    np.testing.assert_allclose(table[1], (trained[1] + 3 * (trained[good] + trained[ness])) / 4, rtol=1e-6)
    np.testing.assert_allclose(table[2], (2 * trained[2] + 3 * 2 * trained[cat_piece]) / 5, rtol=1e-6)
    np.testing.assert_array_equal(table[0], trained[0])
    np.testing.assert_array_equal(table[layout.pieces[0]:], trained[layout.pieces[0]:])


def test_shrinkage_to_alone_pulls_rare_words_towards_their_mapped_alone_vectors():
    """``[distill] alone_shrinkage``: a linear map fitted on the frequent words carries each word's alone vector
    into the table; a word seen in n sentences becomes (n v + k a) / (n + k), a word with no context takes a, and
    piece rows keep theirs."""
    from swembed.pipeline.alone import FIT_CONTEXTS, shrink_to_alone

    rng = np.random.default_rng(0)
    alone = rng.normal(size=(300, 6)) * 10
    true_map, bias = rng.normal(size=(6, 4)), rng.normal(size=4)
    contexts = np.r_[np.full(200, FIT_CONTEXTS), np.ones(90, dtype=int), np.zeros(10, dtype=int)]
    trained = np.r_[alone[:200] @ true_map + bias, rng.normal(size=(100, 4)), rng.normal(size=(7, 4))]
    table = trained.astype(np.float32)
    assert shrink_to_alone(table, alone, contexts, 3.0) == 300
    mapped = alone @ true_map + bias  # what the fit recovers (ridge 1 against 200 rows of scale 10)
    np.testing.assert_allclose(table[:200], trained[:200], atol=1e-2)
    np.testing.assert_allclose(table[200:290], (trained[200:290] + 3 * mapped[200:290]) / 4, atol=0.05)
    np.testing.assert_allclose(table[290:300], mapped[290:300], atol=0.05)
    np.testing.assert_array_equal(table[300:], trained[300:].astype(np.float32))
