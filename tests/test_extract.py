"""The extract stage on real code paths with the real MiniLM: sentence choice, offset spans, word and piece
means, and the pipelined loop against a sentence-by-sentence reference."""
import numpy as np
import pytest
import torch

from swembed.pipeline.extract import Accumulator, batch_index, choose_sentences, extraction_loop
from swembed.runtime.tokenizer import TokenizationRules, word_splitter
from swembed.teachers.base import token_budget_batches

SPLITTER = word_splitter(TokenizationRules(), None)
pytestmark = pytest.mark.teacher


@pytest.fixture(scope="module")
def teacher():
    from swembed.teachers import load_teacher

    return load_teacher("minilm", device="cpu", precision="float32")


def test_choose_sentences_caps_contexts_and_serves_rare_words():
    sentences = ["common word a", "common word b", "common rare", "common word c", "word only"]
    words = ["common", "word", "rare", "a", "b", "c", "only"]
    counts = [4, 4, 1, 1, 1, 1, 1]
    chosen, credits = choose_sentences(sentences, {w: i for i, w in enumerate(words)}, counts, 2, SPLITTER, 0)
    credited = np.bincount(np.concatenate(credits), minlength=len(words))
    assert credited.max() <= 2
    assert credited[2] == 1 and 2 in chosen  # the rare word's only sentence is chosen
    assert all(credited[3:] == 1)  # every singleton gets its context


def test_offsets_never_credit_a_word_inside_a_longer_word(teacher):
    text = "Goodness, the good dog was good."
    inputs = teacher.prepare([text])
    where = batch_index([text], inputs, {"good": 0}, SPLITTER, None)
    assert where.occurrence_words.tolist() == [0]  # one context per sentence: the first " good "
    start, end = inputs.offsets[0][where.word_pos[0]]
    assert text[start:end].lower() == "good" and start == text.index(" good ") + 1


def test_word_and_piece_vectors_are_means_of_teacher_positions(teacher):
    texts = ["A penguin swims.", "The penguin sleeps near a penguin.", "Penguins swim."]
    inputs = teacher.prepare(texts)
    acc = Accumulator(1, 30522, teacher.dim, torch.device("cpu"))
    out = teacher.run(inputs)
    acc.add(out.hidden, batch_index(texts, inputs, {"penguin": 0}, SPLITTER, None))
    expected, pieces = [], {}
    for row, text in enumerate(texts):
        spans = inputs.offsets[row]
        for t, (s, _) in enumerate(spans):
            if s >= 0:
                pieces.setdefault(int(inputs.ids[row, t]), []).append(out.hidden[row, t].numpy())
        start = text.lower().find("penguin ")
        if start < 0 or "penguins" in text.lower():
            continue
        positions = [t for t, (s, e) in enumerate(spans) if s >= start and e <= start + 7 and s >= 0]
        expected.append(out.hidden[row, positions].mean(0).numpy())
    assert acc.word_counts[0] == 2  # "Penguins" is another word, not a context of "penguin"
    np.testing.assert_allclose(acc.word_sums[0].numpy() / 2, np.mean(expected, axis=0), atol=1e-5)
    for token, vectors in pieces.items():
        assert acc.piece_counts[token] == len(vectors)
        np.testing.assert_allclose(acc.piece_sums[token].numpy(), np.sum(vectors, axis=0), atol=1e-4)


def test_pipelined_loop_equals_a_sentence_by_sentence_reference(teacher):
    from conftest import make_sentences

    texts = make_sentences(120, seed=3)
    words = sorted({w for t in texts for w, _, _ in SPLITTER.spans(t)})
    index = {w: i for i, w in enumerate(words)}
    acc = Accumulator(len(words), 30522, teacher.dim, torch.device("cpu"))
    batches = token_budget_batches(teacher.token_lengths(texts) + 2, 300)
    assert len(batches) > 3
    pooled = {}
    extraction_loop(teacher, texts, batches, index=index, splitter=SPLITTER, acc=acc,
                    batch_done=lambda b, p: pooled.update(zip(batches[b].tolist(), p.numpy())))
    sums, counts = np.zeros((len(words), teacher.dim)), np.zeros(len(words))
    for i, text in enumerate(texts):
        out = teacher.forward([text])
        np.testing.assert_allclose(pooled[i], out.pooled[0].numpy(), atol=1e-5)
        seen = set()
        for word, start, end in SPLITTER.spans(text):
            if word in seen:
                continue
            seen.add(word)
            positions = [t for t, (s, e) in enumerate(out.offsets[0]) if s >= 0 and s < end and e > start]
            sums[index[word]] += out.hidden[0, positions].mean(0).numpy()
            counts[index[word]] += 1
    np.testing.assert_array_equal(acc.word_counts.numpy(), counts)
    np.testing.assert_allclose(acc.word_sums.numpy(), sums, atol=2e-4)


def test_bfloat16_teacher_extracts_the_float32_word_vectors_within_tolerance(teacher):
    from conftest import make_sentences

    from swembed.teachers import load_teacher

    half = load_teacher("minilm", device="cpu", precision="bfloat16")
    assert half.model.dtype == half.dtype == torch.bfloat16 and teacher.model.dtype == teacher.dtype == torch.float32
    texts = make_sentences(60, seed=5)
    words = sorted({w for t in texts for w, _, _ in SPLITTER.spans(t)})
    index = {w: i for i, w in enumerate(words)}
    sums = []
    for model in (teacher, half):
        acc = Accumulator(len(words), 30522, model.dim, torch.device("cpu"))
        extraction_loop(model, texts, token_budget_batches(model.token_lengths(texts) + 2, 400), index=index,
                        splitter=SPLITTER, acc=acc)
        assert acc.word_sums.dtype == torch.float32
        sums.append(acc.word_sums)
    cosine = torch.nn.functional.cosine_similarity(*sums, dim=1)
    assert cosine.min() > 0.999
    assert not torch.equal(*sums)  # the weights really were bfloat16


def test_forked_workers_prepare_exactly_what_the_background_thread_does(teacher):
    from conftest import make_sentences

    texts = make_sentences(150, seed=7)
    words = sorted({w for t in texts for w, _, _ in SPLITTER.spans(t)})
    index = {w: i for i, w in enumerate(words)}
    batches = token_budget_batches(teacher.token_lengths(texts) + 2, 300)
    runs = []
    for workers in (0, 2):  # beside a CUDA device the stage forks workers; here both paths run on the CPU
        acc, order = Accumulator(len(words), 30522, teacher.dim, torch.device("cpu")), []
        timing = extraction_loop(teacher, texts, batches, index=index, splitter=SPLITTER, acc=acc, first_batch=1,
                                 batch_done=lambda b, p, order=order: order.append(b), workers=workers)
        assert timing["workers"] == workers
        runs.append((acc.state(), order))
    (thread, thread_order), (forked, forked_order) = runs
    assert thread_order == forked_order == list(range(1, len(batches)))
    for name in thread:
        np.testing.assert_array_equal(thread[name], forked[name])
    assert thread["word_counts"].sum() > 0


def test_an_unset_batch_size_follows_the_device_and_the_extract_records_the_one_that_ran(teacher):
    from swembed.pipeline.config import ExtractConfig
    from swembed.pipeline.extract import extract_identity
    from swembed.teachers import load_teacher
    from swembed.teachers.base import pick_batch_tokens

    assert teacher.batch_tokens == 1024  # a CPU: small batches stay in cache
    assert pick_batch_tokens(torch.device("cuda")) == 8192 and pick_batch_tokens(torch.device("cuda"), 300) == 300
    # bfloat16 kernels (AMX, AVX512-BF16) gain from larger matrices; float32 and int8 stay in cache
    cpu = torch.device("cpu")
    assert pick_batch_tokens(cpu, None, torch.bfloat16) == 4096 and pick_batch_tokens(cpu, None, torch.float32) == 1024
    assert pick_batch_tokens(cpu, 300, torch.bfloat16) == 300
    pinned = load_teacher("minilm", device="cpu", precision="float32", batch_tokens=300)
    assert pinned.batch_tokens == 300
    rules = TokenizationRules()
    assert extract_identity(ExtractConfig(), rules, teacher, 0)["batch_tokens"] == 1024
    # a recipe that names the size records that size, as before (its cached extracts stay valid)
    assert extract_identity(ExtractConfig(batch_tokens=300), rules, pinned, 0)["batch_tokens"] == 300


def test_an_extract_checkpoint_holds_the_touched_rows_and_refuses_another_vocabulary(tmp_path):
    """The extract's checkpoint keeps the rows with sums or counts (not the whole piece vocabulary); loaded, it gives
    back every sum and count, as does a checkpoint of every row (what extracts wrote before); one of other shapes,
    or a truncated one, is refused before anything is copied (``load_checkpoint`` then removes it so the work is
    done again)."""
    from swembed.pipeline.stage import load_checkpoint

    cpu = torch.device("cpu")
    acc = Accumulator(50, 30_000, 8, cpu)
    rng = np.random.default_rng(0)
    acc.word_sums[[3, 7]] = torch.from_numpy(rng.normal(size=(2, 8)).astype(np.float32))
    acc.word_counts[[3, 9]] = torch.tensor([2.0, 1.0])  # a counted word whose vectors summed to zero
    acc.piece_sums[[0, 29_999]] = 1.5
    acc.piece_counts[[0, 29_999]] = 3.0
    path = tmp_path / "state.npz"
    acc.save(path, units_done=4)
    assert path.stat().st_size < 20_000  # the dense piece sums alone are 960,000 bytes
    again = Accumulator(50, 30_000, 8, cpu)
    assert again.load(path) == 4
    for name in ("word_sums", "word_counts", "piece_sums", "piece_counts"):
        torch.testing.assert_close(getattr(again, name), getattr(acc, name), rtol=0, atol=0)
    dense = tmp_path / "dense.npz"  # a checkpoint of every row, as extracts wrote them before: still resumed from
    np.savez(dense, units_done=2, **{name: getattr(acc, name).numpy() for name in
                                     ("word_sums", "word_counts", "piece_sums", "piece_counts")})
    from_dense = Accumulator(50, 30_000, 8, cpu)
    assert from_dense.load(dense) == 2
    for name in ("word_sums", "word_counts", "piece_sums", "piece_counts"):
        torch.testing.assert_close(getattr(from_dense, name), getattr(acc, name), rtol=0, atol=0)
    other = Accumulator(51, 30_000, 8, cpu)
    other.word_sums += 1.0
    with pytest.raises(ValueError, match="not of this vocabulary's shapes"):
        other.load(path)
    assert (other.word_sums == 1.0).all()  # left as it was
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert load_checkpoint(path, again.load, "extract") is None and not path.exists()
