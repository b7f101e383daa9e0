import numpy as np
import pytest

from swe.eval.sts import evaluate_sts, paired_cosine, spearman_x100


def test_perfect_and_reversed_rankings():
    gold = np.array([0.0, 1.0, 2.5, 4.0, 5.0])
    assert spearman_x100(gold, gold * 3 + 1) == pytest.approx(100.0)
    assert spearman_x100(gold, -gold) == pytest.approx(-100.0)


def test_paired_cosine_matches_mteb_convention():
    a = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    b = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    # cosine for real vectors; MTEB (sklearn) gives 0.5 for zero-vs-unit and 1.0 for zero-vs-zero
    np.testing.assert_allclose(paired_cosine(a, b), [2**-0.5, 0.5, 1.0])


def test_stsb_loader_and_scores_on_hand_made_data(tmp_path):
    (tmp_path / "stsb").mkdir()
    rows = [("a b", "a b", 5.0), ("a b", "a c", 3.0), ("a", "c", 0.0)]
    (tmp_path / "stsb" / "sts-test.csv").write_text(
        "\n".join(f"g\tf\t2012\t{i}\t{g}\t{x}\t{y}" for i, (x, y, g) in enumerate(rows)))
    vectors = {"a b": [1.0, 1.0], "a c": [1.0, 0.2], "a": [1.0, 0.0], "c": [0.0, 1.0]}
    scores = evaluate_sts(lambda texts: np.array([vectors[t] for t in texts]), tmp_path, ("STSBenchmark",))
    assert scores["STSBenchmark"] == pytest.approx(100.0) and scores["avg"] == pytest.approx(100.0)


def test_bitext_mining_accuracy_and_weighted_f1():
    from swe.eval.xling import bitext_mining, weighted_prf

    queries = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1]])
    corpus = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    result = bitext_mining(queries, corpus)  # third query wrongly finds item 0
    assert result["accuracy"] == pytest.approx(200 / 3)
    # labels 0,1,2; predictions 0,1,0 -> per-class F1 2/3, 1, 0; weighted by support 1/3 each
    assert result["f1"] == pytest.approx((2 / 3 + 1 + 0) / 3 * 100)
    assert weighted_prf(np.arange(4), np.arange(4)) == (1.0, 1.0, 1.0)
