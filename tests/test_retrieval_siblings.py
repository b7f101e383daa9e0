"""Sibling pairs for the contrastive retrieval objective: pairs that share a sentence are one group."""
import numpy as np

from swembed.pipeline.retrieval import SIBLING_PAIRS, SIBLING_WORDS, sibling_groups

S1 = "Naloxone reverses the antihypertensive effect of clonidine in rats."
S2 = "The hypotensive effect of methyldopa was also partially reversed."
S3 = "Naloxone alone did not affect either blood pressure or heart rate."
BOILER = "This article is protected by copyright and all rights are reserved."


def test_pseudo_queries_of_one_abstract_and_its_summary_are_siblings_boilerplate_is_not():
    queries = [S1, S3, "A short summary of the finding.", "Another question entirely?",
               *[f"Question number {i}?" for i in range(SIBLING_PAIRS + 1)],
               "Only five words shared here. First.", "only five words  shared here. Second."]
    documents = [f"{S2} {S3}", f"{S1}  {S2.upper()}", f"{S1} {S2} {S3}", "An unrelated passage about weather.",
                 *[f"Passage {i} about topic {i} alone. {BOILER}" for i in range(SIBLING_PAIRS + 1)],
                 "Passage x.", "Passage y."]
    groups = sibling_groups(queries, documents)
    assert len(groups) == len(queries) and groups.dtype == np.int64
    assert groups[0] == groups[1] == groups[2] == 0  # shared sentences, case and spacing aside; query in a passage
    rest = groups[3:]
    np.testing.assert_array_equal(rest, np.arange(3, len(queries)))  # boilerplate and short sentences link nothing
    assert len("Only five words shared here.".split()) < SIBLING_WORDS
    held = sibling_groups(queries[4:4 + SIBLING_PAIRS], documents[4:4 + SIBLING_PAIRS])
    np.testing.assert_array_equal(held, np.zeros(SIBLING_PAIRS))  # held by SIBLING_PAIRS pairs: still a link


def test_one_text_in_two_pairs_links_them_however_short_and_however_often():
    queries = ["What causes gout?", "what causes  GOUT?", "Gout, briefly?", "Is it gout?",
               *["Define it."] * (SIBLING_PAIRS + 2)]
    documents = ["Uric acid crystals.", "Purines in food.", "What causes gout?", "A form of arthritis.",
                 *[f"Answer {i}." for i in range(SIBLING_PAIRS + 2)]]  # pair 2's passage: pair 0's query
    groups = sibling_groups(queries, documents)
    np.testing.assert_array_equal(groups[:4], [0, 0, 0, 3])
    np.testing.assert_array_equal(groups[4:], 4)  # one question with many answers: no boilerplate cap


def test_groups_are_linked_through_chains_and_named_by_their_lowest_pair():
    chain = [f"Sentence {w} links this pair to the next one here." for w in "abcd"]
    queries = ["q one", "q two", "q three", "q four"]
    documents = [f"Alpha passage. {chain[1]}", f"Unrelated beginning words. {chain[2]}",
                 f"{chain[2]} and more", f"{chain[1]} Then {chain[3]}"]
    np.testing.assert_array_equal(sibling_groups(queries, documents), [0, 1, 1, 0])
    documents[2] = f"{chain[1]} {chain[2]}"
    np.testing.assert_array_equal(sibling_groups(queries, documents), [0, 0, 0, 0])
