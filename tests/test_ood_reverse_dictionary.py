"""lab/ood_reverse_dictionary.py: which WordNet synsets it keeps, and how it scores a ranking."""
import numpy as np
import pytest

from lab import ood_reverse_dictionary as revdict

DATA_NOUN = """  1 This software and database is being provided to you, the LICENSEE, by
  2 Princeton University under the following license.
00000001 03 n 01 rotavirus 0 000 | the reovirus causing infant enteritis
00000002 03 n 02 elf_cup 0 cup_fungus 0 000 | apothecium of a fungus of the family Pezizaceae
00000003 03 n 01 Paris 0 000 | the capital and largest city of France
00000004 03 n 01 dog 0 000 | a member of the genus Canis
00000005 03 n 01 dog 0 000 | a dull unattractive unpleasant girl or woman
00000006 03 n 01 songbird 0 000 | any songbird; a bird that sings
00000007 03 n 01 bootee 0 000 | a slipper that is soft and wool (for babies); "she knitted bootees"
00000008 03 n 01 3-D 0 000 | a three-dimensional picture
"""


def test_nouns_keep_lowercase_unambiguous_lemmas_that_their_gloss_does_not_name(tmp_path):
    (tmp_path / "data.noun").write_text(DATA_NOUN)
    assert revdict.wordnet_nouns(tmp_path) == [
        ("rotavirus", "the reovirus causing infant enteritis"),
        ("elf cup", "apothecium of a fungus of the family Pezizaceae"),
        ("bootee", "a slipper that is soft and wool (for babies)")]


def test_reverse_dictionary_ranks_each_gloss_against_every_lemma():
    vectors = {"g0": [1, 0, 0], "g1": [0, 1, 0], "g2": [0, 1, 0.1],
               "l0": [1, 0, 0], "l1": [0, 0.9, 0.5], "l2": [0, 1, 0]}  # g1 prefers l2, g2 finds l2 first

    def encode(texts):
        return np.array([vectors[t] for t in texts], dtype=float)

    mrr, accuracy = revdict.reverse_dictionary(encode, ["g0", "g1", "g2"], ["l0", "l1", "l2"])
    assert mrr == pytest.approx(100 * (1 + 1 / 2 + 1) / 3)
    assert accuracy == pytest.approx(100 * 2 / 3)
