"""lab/ood_agreement.py: which package descriptions it takes, and how it pairs them (no teacher needed)."""
import numpy as np

from lab import ood_agreement as ood

DUMP = """Package: a
Section: science
Description: Bayesian inference of phylogeny from sequence data

Package: a-doc
Section: doc
Description: Bayesian inference of phylogeny from sequence data (documentation)

Package: b
Section: gnu-r
Description: GNU R package for BAYESIAN INFERENCE of phylogeny from sequence data

Package: c
Section: utils
Tag: field::medicine, role::program
Description: DICOM viewer for medical images - documentation

Package: d
Section: games
Description: Real-time strategy game of ancient warfare

Package: e
Section: science
Description: too short
"""


def test_descriptions_keep_specialised_sections_and_fields_without_packaging_notes():
    texts = ood.descriptions(DUMP)
    assert texts == ["Bayesian inference of phylogeny from sequence data", "DICOM viewer for medical images",
                     "GNU R package for BAYESIAN INFERENCE of phylogeny from sequence data"]


def test_pairs_hold_each_nearest_neighbour_with_the_teacher_cosine_as_gold():
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(40, 8))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chosen, gold = ood.pairs([str(i) for i in range(40)], vectors)
    assert len(set(chosen)) == len(chosen) and all(i < j for i, j in chosen)
    np.testing.assert_allclose(gold, [vectors[i] @ vectors[j] for i, j in chosen])
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -1)
    for i in range(40):
        j = int(similarity[i].argmax())
        assert (min(i, j), max(i, j)) in chosen
