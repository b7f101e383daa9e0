import numpy as np
import pytest

from swembed.eval.sts import evaluate_sts, paired_cosine, spearman_x100


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
    from swembed.eval.xling import bitext_mining, weighted_prf

    queries = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1]])
    corpus = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    result = bitext_mining(queries, corpus)  # third query wrongly finds item 0
    assert result["accuracy"] == pytest.approx(200 / 3)
    # labels 0,1,2; predictions 0,1,0 -> per-class F1 2/3, 1, 0; weighted by support 1/3 each
    assert result["f1"] == pytest.approx((2 / 3 + 1 + 0) / 3 * 100)
    assert weighted_prf(np.arange(4), np.arange(4)) == (1.0, 1.0, 1.0)


def _write_bucc(folder, lang, xx, en, gold):
    folder.mkdir(exist_ok=True)
    (folder / f"{lang}-en.test.{lang}").write_text("".join(f"{lang}-{i:05d}\t{s}\n" for i, s in enumerate(xx)))
    (folder / f"{lang}-en.test.en").write_text("".join(f"en-{i:05d}\t{s}\n" for i, s in enumerate(en)))
    (folder / f"{lang}-en.test.gold").write_text("".join(f"{lang}-{a:05d}\ten-{b:05d}\n" for a, b in gold))


def test_bucc_mining_f1_on_hand_made_files(tmp_path):
    """Three true translations hidden among distractors: margin mining finds exactly the gold pairs."""
    from swembed.eval.xling import bucc, load_bucc

    xx = ["ein hund", "eine katze", "ein haus", "zufall eins"]
    en = ["noise one", "a house", "a dog", "noise two", "a cat"]
    _write_bucc(tmp_path, "de", xx, en, [(0, 2), (1, 4), (2, 1)])
    vectors = {"ein hund": [1, 0, 0, 0.1], "a dog": [1, 0, 0, 0], "eine katze": [0, 1, 0, 0.1],
               "a cat": [0, 1, 0, 0], "ein haus": [0, 0, 1, 0.1], "a house": [0, 0, 1, 0],
               "zufall eins": [0.5, 0.5, 0.5, 0.5], "noise one": [0, 0, 0, 1], "noise two": [-1, 0, 0, 1]}
    encode = lambda texts, lang: np.array([vectors[t] for t in texts], dtype=float)  # noqa: E731
    assert len(load_bucc(tmp_path, "de")[4]) == 3
    result = bucc(encode, tmp_path, "de")
    assert result["mining f1"] == pytest.approx(100.0)
    assert result["mining precision"] == pytest.approx(100.0)
    assert result["gold-pairs f1"] == pytest.approx(100.0)


def test_bucc_f1_counts_misses_and_false_positives():
    from swembed.eval.xling import best_threshold_f1

    gold = {("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")}
    candidates = [("a", "1"), ("b", "9"), ("c", "3"), ("d", "8")]
    # best cut keeps a, c (precision 1, recall 1/2): F1 2/3, better than keeping a, b, c (2/3 and 1/2 -> 0.571)
    result = best_threshold_f1(candidates, np.array([0.9, 0.5, 0.8, 0.1]), gold)
    assert result["f1"] == pytest.approx(200 / 3)
    assert result["threshold"] == pytest.approx(0.8)


def test_bucc_missing_file_names_it(tmp_path):
    from swembed.eval.xling import load_bucc

    _write_bucc(tmp_path, "zh", ["x"], ["y"], [(0, 0)])
    (tmp_path / "zh-en.test.gold").unlink()
    with pytest.raises(FileNotFoundError, match="zh-en.test.gold"):
        load_bucc(tmp_path, "zh")


def test_hidden_words_refit_the_gram_rows_on_the_visible_words_only():
    from swembed.eval.robust import with_hidden_words
    from swembed.pipeline.grams import fit_grams, gram_matrix
    from swembed.runtime import StaticEmbedder, WordTokenizer
    from swembed.runtime.tokenizer import TokenizationRules

    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa"]
    table = np.random.default_rng(0).normal(size=(len(words) + 16, 8)).astype(np.float32)
    rules = TokenizationRules(oov_backoff="pieces")
    model = StaticEmbedder(table, WordTokenizer({w: i for i, w in enumerate(words)}, rules, gram_rows=(8, 24)))
    hidden = with_hidden_words(model, 0.5)
    assert set(hidden.tokenizer.vocab) == set(words[:4]) and hidden.tokenizer.gram_rows == (8, 24)
    np.testing.assert_array_equal(hidden.table[:8], table[:8])
    np.testing.assert_allclose(hidden.table[8:], fit_grams(gram_matrix(words[:4], 16), table[:4]), atol=1e-6)
    rows, weights = hidden.tokenizer.rows("kappa")  # hidden: its grams only (no sub-word tokenizer here)
    assert all(8 <= r < 24 for r in rows) and sum(weights) == pytest.approx(1.0)
    assert with_hidden_words(model, 0.0).table is table  # nothing hidden, nothing refitted


def test_each_stsb_split_reads_its_own_file(tmp_path):
    """STSBenchmark (test), -dev and -train (the second dev signal, lab.sts_dev_signal) each read their own file of
    ``stsb/``; a missing one is named."""
    from swembed.eval import sts

    pairs = [("a cat", "a dog", 1.0), ("the sun", "a star", 2.0), ("red", "blue", 3.0)]
    (tmp_path / "stsb").mkdir()
    for name, rows in (("sts-test.csv", pairs), ("sts-dev.csv", pairs[:2]), ("sts-train.csv", pairs[1:])):
        (tmp_path / "stsb" / name).write_text("".join(f"g\tf\t2012\t{i}\t{g}\t{a}\t{b}\n"
                                                      for i, (a, b, g) in enumerate(rows)))
    sets = {name: sts.load_pair_set(tmp_path, name) for name in ("STSBenchmark", sts.DEV, sts.TRAIN)}
    assert [s.s1 for s in sets.values()] == [[a for a, _, _ in rows] for rows in (pairs, pairs[:2], pairs[1:])]
    (tmp_path / "stsb" / "sts-train.csv").unlink()
    with pytest.raises(sts.EvalDataError, match="sts-train.csv"):
        sts.load_pair_set(tmp_path, sts.TRAIN)
