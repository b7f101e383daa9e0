import zipfile

import numpy as np

from lab.analysis import brown_pos, coarse, norm_frequency_spearman, norms_by_pos, pc_extremes


def test_coarse_tags():
    assert coarse("nns") == "noun" and coarse("np-tl") == "proper noun" and coarse("vbd") == "verb"
    assert coarse("at") == "determiner" and coarse("in-tl") == "preposition" and coarse(",") is None


def test_brown_pos_majority_tag(tmp_path):
    path = tmp_path / "brown.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("brown/ca01", "The/at run/nn was/bedz long/jj ./. They/pps run/vb ./. We/ppss run/vb")
        zf.writestr("brown/README", "not/nn tagged/vbn")
    pos = brown_pos(path)
    assert pos["run"] == "verb" and pos["the"] == "determiner" and "not" not in pos


def test_norms_frequency_and_extremes():
    table = np.array([[1.0, 0], [2.0, 0], [3.0, 0], [0, 4.0]])
    words = ["the", "cat", "dog", "ran"]
    pos = {"the": "determiner", "cat": "noun", "dog": "noun", "ran": "verb"}
    rel = norms_by_pos(table, words, pos, min_words=1)
    assert rel["determiner"] < rel["noun"] < rel["verb"]
    counts = np.array([100, 50, 10, 5])
    assert norm_frequency_spearman(table, counts) == 1.0  # rarer -> larger norm, perfectly
    hi, lo = pc_extremes(table, words, np.zeros(2), np.array([1.0, 0.0]), counts, k=1, min_count=1)
    assert hi == ["dog"] and lo == ["ran"]
