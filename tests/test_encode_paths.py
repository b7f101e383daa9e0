"""encode's fast paths (issue 80): the batch tokeniser and the length-grouped mean give every text the vector it gets
alone, bit for bit, whichever path its batch takes it through."""
import random

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from swembed.runtime import StaticEmbedder, WordTokenizer
from swembed.runtime.tokenizer import TokenIds, TokenizationRules

WORDS = ["the", "cat", "sat", "on", "mat", "good", "dog", "a", "café", "fine", "straße"]
PIECES = ["good", "##ness", "un", "##known", "##s", "caf", "##é", "x", "##y", "##z"]
UNKNOWN = ["goodness", "unknown", "xyz", "cafés", "Unknowns", "zzz"]  # backed off to pieces (zzz: to none)


def piece_tokenizer(rules: TokenizationRules) -> WordTokenizer:
    """WORDS, with the pieces of PIECES standing in for unknown words (rows after the words')."""
    sub = Tokenizer(models.WordPiece({"[UNK]": 0, **{p: i + 1 for i, p in enumerate(PIECES)}}, unk_token="[UNK]"))
    sub.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    piece_rows = {sub.token_to_id(p): len(WORDS) + i for i, p in enumerate(PIECES)}
    return WordTokenizer({w: i for i, w in enumerate(WORDS)}, rules, sub, piece_rows)


def random_texts(n: int, seed: int) -> list[str]:
    """Texts of 0 to 90 words (so some lengths have many texts and some few; some above 64 rows), some with unknown
    words, odd characters, punctuation, a newline, text that NFKC changes."""
    rng = random.Random(seed)
    extras = ["—", "’", "½", "Ⅻ", "\n", ",", "ＣＡＴ", "ﬁne", "\u00a0", "C\u0327a"]
    texts = []
    for _ in range(n):
        length = rng.choice([rng.randint(0, 8), rng.randint(0, 8), rng.randint(9, 90)])
        pool = WORDS + UNKNOWN * (rng.random() < 0.3) + extras * (rng.random() < 0.2)
        texts.append(" ".join(rng.choice(pool) for _ in range(length)))
    return texts


def scaled(kind: str, table: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    if kind == "float16":
        return table.astype(np.float16), None
    if kind == "int8":
        scales = (np.abs(table).max(axis=1) / 127).astype(np.float32)
        return np.round(table / scales[:, None]).astype(np.int8), scales
    return table, None


@pytest.mark.parametrize("kind", ["float32", "float16", "int8"])
@pytest.mark.parametrize("oov_weight", [1.0, 3.0])
def test_each_text_gets_the_vector_it_gets_alone(kind, oov_weight):
    """Encoded in batches of every size (a length shared by many texts is summed a column at a time, by few texts
    as one gather, a weighted text on its own), each vector equals that text's vector encoded alone, bit for bit."""
    rng = np.random.default_rng(0)
    table, scales = scaled(kind, rng.normal(size=(len(WORDS) + len(PIECES), 16)).astype(np.float32))
    model = StaticEmbedder(table, piece_tokenizer(TokenizationRules(oov_backoff="pieces", oov_weight=oov_weight)),
                           scales=scales)
    texts = random_texts(3000, seed=1)
    alone = np.stack([model.encode(t)[0] for t in texts])
    assert (np.abs(alone).sum(axis=1) > 0).sum() > 2500  # texts with rows: most
    for batch_size in (4096, 700, 37):
        together = model.encode(texts, batch_size=batch_size)
        assert np.array_equal(together.view(np.uint32), alone.view(np.uint32))
    raw = model.encode(texts, normalize=False)
    assert np.array_equal(raw.view(np.uint32), np.stack([model.encode(t, normalize=False)[0] for t in texts])
                          .view(np.uint32))


def test_batch_rows_equal_the_rows_of_each_text():
    """The batch tokeniser (NFKC of the texts that need it only, a few or many odd characters replaced, each distinct
    unknown word backed off once) gives the rows ``rows`` gives text by text."""
    tok = piece_tokenizer(TokenizationRules(oov_backoff="pieces", oov_weight=2.0))
    for seed in range(4):
        texts = random_texts(400, seed)
        batch = tok.encode_batch(texts)
        expected = TokenIds.from_lists([tok.rows(t.replace("\n", " ")) for t in texts])
        assert batch.ids.tolist() == expected.ids.tolist()
        assert batch.lengths.tolist() == expected.lengths.tolist()
        assert batch.weights is not None and expected.weights is not None
        assert batch.weights.tolist() == expected.weights.tolist()
    many_odd = "".join(chr(c) for c in range(0x2190, 0x21b0))  # 32 arrows: not word characters
    texts = [f"cat{many_odd}dog", "Ｃａｔ ﬁne", "café\ngoodness", "", "zzz", "—sat—"]
    batch = tok.encode_batch(texts)
    expected = TokenIds.from_lists([tok.rows(t.replace("\n", " ")) for t in texts])
    assert batch.ids.tolist() == expected.ids.tolist() and batch.lengths.tolist() == [2, 2, 3, 0, 0, 1]


def test_mean_rows_writes_into_the_array_it_is_given():
    """``mean_rows(batch, out=...)`` fills the given rows (a text without rows gets zeros, whatever was there) and
    returns them: the same as a new array."""
    table = np.random.default_rng(0).normal(size=(len(WORDS), 8)).astype(np.float32)
    model = StaticEmbedder(table, WordTokenizer({w: i for i, w in enumerate(WORDS)}))
    batch = model.tokenizer.encode_batch(["the cat", "", "dog on a mat", "?"])
    target = np.full((6, 8), np.nan, dtype=np.float32)
    written = model.mean_rows(batch, out=target[1:5])
    assert written is not None and np.array_equal(target[1:5], model.mean_rows(batch))
    assert np.isnan(target[[0, 5]]).all() and not target[[2, 4]].any()


def test_encode_steps_bound_texts_and_characters(monkeypatch):
    """``encode`` takes at most ``batch_size`` texts and about ``_STEP_CHARACTERS`` characters a step (a longer text
    alone), every text once, in order; the vectors are those of one step."""
    import swembed.runtime.embedder as embedder

    texts = random_texts(500, seed=5)
    monkeypatch.setattr(embedder, "_STEP_CHARACTERS", 300)
    steps = list(embedder._steps(texts, 40))
    assert [s for s, _ in steps] == [0] + [e for _, e in steps[:-1]] and steps[-1][1] == len(texts)
    for start, end in steps:
        assert end - start <= 40
        assert end - start == 1 or sum(map(len, texts[start:end])) <= 300
    assert any(end - start == 1 and len(texts[start]) > 300 for start, end in steps)
    table = np.random.default_rng(0).normal(size=(len(WORDS) + len(PIECES), 8)).astype(np.float32)
    model = StaticEmbedder(table, piece_tokenizer(TokenizationRules(oov_backoff="pieces")))
    stepped = model.encode(texts, batch_size=40)
    monkeypatch.setattr(embedder, "_STEP_CHARACTERS", 1 << 30)
    assert np.array_equal(stepped, model.encode(texts, batch_size=len(texts)))
