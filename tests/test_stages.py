"""Stage logic on real code paths: sentence choice, offset spans (real MiniLM), PCA/ABTT, the KD loss."""
import numpy as np
import pytest
import torch

from swembed.pipeline.distill import kd_loss
from swembed.pipeline.extract import ContextAccumulator, ExtractConfig, choose_sentences, occurrence_tokens, word_splitter
from swembed.pipeline.pca import PCAConfig, PCAConfigError, fit_pca

SPLITTER = word_splitter(ExtractConfig(), None)


@pytest.fixture(scope="module")
def teacher():
    from swembed.teachers import load_teacher

    return load_teacher("minilm", device="cpu")


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
    out = teacher.forward([text])
    ids, occ, tok = occurrence_tokens(text, {0}, {"good": 0}, out.offsets[0], SPLITTER)
    assert ids == [0] and occ == [0]
    start, end = out.offsets[0][tok[0]]
    assert text[start:end].lower() == "good" and start == text.index(" good ") + 1


def test_extracted_vector_is_mean_of_teacher_positions(teacher):
    texts = ["A penguin swims.", "The penguin sleeps near a penguin."]
    index = {"penguin": 0}
    acc = ContextAccumulator(1, teacher.dim, torch.device("cpu"))
    out = teacher.forward(texts)
    acc.add_batch(texts, [np.array([0]), np.array([0])], out, index, SPLITTER)
    expected = []
    for row, text in enumerate(texts):
        start = text.lower().index("penguin")
        spans = out.offsets[row]
        positions = [t for t, (s, e) in enumerate(spans) if s >= start and e <= start + 7 and s >= 0]
        expected.append(out.hidden[row, positions].mean(0).numpy())
    assert acc.counts[0] == 2
    np.testing.assert_allclose(acc.sums[0].numpy() / 2, np.mean(expected, axis=0), atol=1e-5)


def test_pca_abtt_drops_top_components_and_commutes_with_mean():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 6)) * np.array([10, 5, 3, 2, 1, 0.5])
    mean, comps, ratio = fit_pca(x)
    assert np.all(np.diff(ratio) <= 1e-12)
    kept = comps[1:4]
    transformed = (x - mean) @ kept.T
    # Pre-transforming words then averaging equals averaging then transforming (paper 3.2).
    np.testing.assert_allclose(transformed[:10].mean(0), (x[:10].mean(0) - mean) @ kept.T, atol=1e-10)
    assert abs(abs(comps[0] @ np.eye(6)[0]) - 1) < 0.01  # first PC is the high-variance axis
    with pytest.raises(PCAConfigError, match="too large"):
        PCAConfig(dim=384).validate(384)
    with pytest.raises(PCAConfigError, match="keeps the teacher's 384"):
        PCAConfig(level="none", dim=256).validate(384)
    PCAConfig(level="none", dim=384).validate(384)


def test_kd_loss_matches_hand_computation_and_is_minimal_at_teacher():
    torch.manual_seed(0)
    t = torch.nn.functional.normalize(torch.randn(5, 8), dim=-1)
    s = torch.nn.functional.normalize(torch.randn(5, 3), dim=-1)
    tau = 0.05
    expected = 0.0
    for i in range(5):
        others = [j for j in range(5) if j != i]
        pt = torch.softmax(torch.stack([t[i] @ t[j] / tau for j in others]), 0)
        ls = torch.log_softmax(torch.stack([s[i] @ s[j] / tau for j in others]), 0)
        expected += -(pt * ls).sum() / 5
    assert torch.isclose(kd_loss(s, t, tau), expected, atol=1e-5)
    student = t.clone().requires_grad_(True)
    kd_loss(student, t, tau).backward()
    # At the teacher itself the gradient has no component along the sphere's tangent directions.
    tangent = student.grad - (student.grad * t).sum(-1, keepdim=True) * t
    assert tangent.abs().max() < 1e-4
    assert kd_loss(s, t, tau) > kd_loss(t, t, tau)
