"""The one training loop: its three losses, resume to the identical table for both objectives, CUDA when present."""
from dataclasses import replace

import numpy as np
import pytest
import torch

from swembed.pipeline.train import (
    CellBatches,
    HardNegatives,
    LoopSettings,
    PackedRows,
    RowAdam,
    centred,
    contrastive_loss,
    contrastive_objective,
    encoded,
    kd_loss,
    kd_objective,
    lexical_sketches,
    mine_negatives,
    mined_hard_negatives,
    nearest_centroids,
    query_kd_loss,
    query_kd_objective,
    sibling_mask,
    spherical_kmeans,
    train,
    windowed_contrastive_loss,
    windowed_contrastive_objective,
)
from swembed.runtime.tokenizer import TokenIds


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


def test_contrastive_loss_matches_the_formula_and_rewards_alignment():
    rng = np.random.default_rng(0)
    a = torch.tensor(rng.normal(size=(6, 8)), dtype=torch.float32)
    b = torch.tensor(rng.normal(size=(6, 8)), dtype=torch.float32)
    tau = 0.05
    an = a.numpy() / np.linalg.norm(a.numpy(), axis=1, keepdims=True)
    bn = b.numpy() / np.linalg.norm(b.numpy(), axis=1, keepdims=True)
    logits = an @ bn.T / tau

    def xent(m):
        m = m - m.max(1, keepdims=True)
        return float(np.mean(np.log(np.exp(m).sum(1)) - np.diag(m)))

    assert contrastive_loss(a, b, tau).item() == pytest.approx((xent(logits) + xent(logits.T)) / 2, rel=1e-5)
    assert contrastive_loss(a, b, tau, "query").item() == pytest.approx(xent(logits), rel=1e-5)  # a's rows pick b's
    assert contrastive_loss(b, a, tau, "query").item() == pytest.approx(xent(logits.T), rel=1e-5)
    eye = torch.eye(6, 8)
    assert contrastive_loss(eye, eye * 3, tau).item() < 1e-6  # aligned, orthogonal pairs: no loss
    assert contrastive_loss(eye, eye.roll(1, 0), tau).item() > 10  # every pair mismatched


def test_siblings_are_left_out_of_each_other_s_negatives_in_both_directions():
    """A masked cell's softmax weight is exactly 0: the loss is InfoNCE over the other cells alone; an objective
    with groups masks each batch by its rows' groups."""
    rng = np.random.default_rng(1)
    a = torch.tensor(rng.normal(size=(5, 8)), dtype=torch.float32)
    b = torch.tensor(rng.normal(size=(5, 8)), dtype=torch.float32)
    groups = np.array([7, 3, 7, 4, 3])
    excluded = sibling_mask(groups, torch.device("cpu"))
    assert excluded.tolist() == [[groups[i] == groups[j] and i != j for j in range(5)] for i in range(5)]
    logits = (torch.nn.functional.normalize(a, dim=-1) @ torch.nn.functional.normalize(b, dim=-1).T / 0.05).numpy()

    def xent(m, keep):
        return float(np.mean([np.log(np.exp(m[i, keep[i]]).sum()) - m[i, i] for i in range(len(m))]))

    keep = ~excluded.numpy()
    assert contrastive_loss(a, b, 0.05, "query", excluded).item() == pytest.approx(xent(logits, keep), rel=1e-5)
    assert contrastive_loss(a, b, 0.05, "both", excluded).item() == pytest.approx(
        (xent(logits, keep) + xent(logits.T, keep.T)) / 2, rel=1e-5)
    assert contrastive_loss(a, b, 0.05, "both", sibling_mask(np.arange(5), torch.device("cpu"))).item() == (
        pytest.approx(contrastive_loss(a, b, 0.05).item(), rel=1e-6))  # no siblings: the plain loss
    device = torch.device("cpu")
    left = random_texts(rng, 200, 30)
    pairs = (PackedRows(left, device), PackedRows(TokenIds(left.ids + 30, left.lengths), device))
    ids = rng.integers(0, 40, size=200)
    objective = contrastive_objective(*pairs, tau=0.05, weight=1.0, name="c", n_held=32, batch_size=16, groups=ids)
    table = torch.tensor(rng.normal(size=(60, 8)), dtype=torch.float32)
    batch = np.flatnonzero(np.isin(ids, ids[:3]))[:12]
    encoded = [torch.stack([table[torch.as_tensor(side_ids)].mean(0) for side_ids in np.split(
        texts.ids, np.cumsum(texts.lengths)[:-1])])[batch] for texts in (left, TokenIds(left.ids + 30, left.lengths))]
    got = objective.loss(encoded, torch.as_tensor(batch))
    assert got.item() == pytest.approx(contrastive_loss(*encoded, 0.05, "both",
                                                        sibling_mask(ids[batch], device)).item(), rel=1e-6)
    assert got.item() != pytest.approx(contrastive_loss(*encoded, 0.05).item(), rel=1e-3)


def test_hard_negatives_are_the_nearest_passages_of_the_pool_never_a_sibling_s():
    """Mined by cosine, best first, from the passages ``among`` allows; the query's own passage and its group's
    are left out (last when nothing else is left); the starting table's encoding is the weighted mean."""
    rng = np.random.default_rng(3)
    queries = torch.nn.functional.normalize(torch.tensor(rng.normal(size=(30, 6)), dtype=torch.float32), dim=-1)
    passages = torch.nn.functional.normalize(torch.tensor(rng.normal(size=(30, 6)), dtype=torch.float32), dim=-1)
    groups = np.arange(30) // 3  # three pairs a group
    among = np.arange(0, 30, 2)
    mined = mine_negatives(queries.numpy(), passages.numpy(), np.arange(30), 4, among=among, groups=groups)
    scores = (queries @ passages.T).numpy()
    for query in range(30):
        allowed = [p for p in among if groups[p] != groups[query]]
        assert mined[query].tolist() == sorted(allowed, key=lambda p: -scores[query, p])[:4]
    tiny = mine_negatives(queries.numpy()[:3], passages.numpy(), np.arange(3), 2, among=np.arange(3),
                          groups=np.zeros(30, dtype=np.int64))
    assert tiny.shape == (3, 2)  # every pool passage a sibling: the left-out ones fill the columns
    device = torch.device("cpu")
    left, right = random_texts(rng, 30, 20, weighted=True), random_texts(rng, 30, 20)
    table = rng.normal(size=(20, 6)).astype(np.float32)
    got = encoded(table, PackedRows(left, device), np.array([4, 7]))
    for position, text in enumerate((4, 7)):
        start = int(left.lengths[:text].sum())
        ids, weights = left.ids[start : start + left.lengths[text]], left.weights[start : start + left.lengths[text]]
        mean = (table[ids] * weights[:, None]).sum(0)
        np.testing.assert_allclose(got[position].numpy(), mean / np.linalg.norm(mean), atol=1e-6)
    hard = mined_hard_negatives(table, PackedRows(left, device), PackedRows(right, device), groups, 3, 0, among)
    expected = mine_negatives(encoded(table, PackedRows(left, device), np.arange(30)).numpy(),
                              encoded(table, PackedRows(right, device), np.arange(30)).numpy(), np.arange(30), 3,
                              among=among, groups=groups)
    np.testing.assert_array_equal(hard.candidates, expected)


def test_a_hard_negative_is_one_more_column_for_its_query_drawn_by_the_batch():
    """Each batch row's query scores the batch's passages and one passage drawn from its mined ones, the same for
    the same batch; a drawn passage that is another row's own pair or sibling is no negative of that row; the
    passage -> query direction reads the batch's square alone."""
    rng = np.random.default_rng(5)
    groups = np.arange(200) // 2
    candidates = rng.integers(0, 200, size=(200, 4))
    hard = HardNegatives(candidates, groups)
    rows = np.array([3, 10, 11, 50, 77])
    drawn = hard.drawn(rows)
    assert all(d in candidates[r] for r, d in zip(rows, drawn))
    np.testing.assert_array_equal(hard.drawn(rows), drawn)
    assert len({tuple(hard.drawn(rng.choice(200, 5, replace=False))) for _ in range(20)}) > 1
    device = torch.device("cpu")
    left = random_texts(rng, 200, 30)
    pairs = (PackedRows(left, device), PackedRows(TokenIds(left.ids + 30, left.lengths), device))
    candidates[11] = 10  # row 11's negative is row 10's own passage: masked for row 10, and 11's sibling
    objective = contrastive_objective(*pairs, tau=0.05, weight=1.0, name="c", n_held=32, batch_size=5,
                                      negatives=lambda train: HardNegatives(candidates, groups))
    sides = objective.sides(rows)
    np.testing.assert_array_equal(sides[0], rows)
    np.testing.assert_array_equal(sides[1], np.concatenate([rows, hard.drawn(rows)]))
    table = torch.tensor(rng.normal(size=(60, 8)), dtype=torch.float32)
    every = [torch.nn.functional.normalize(torch.stack([table[torch.as_tensor(ids)].mean(0) for ids in np.split(
        texts.ids, np.cumsum(texts.lengths)[:-1])]), dim=-1) for texts in (left, TokenIds(left.ids + 30, left.lengths))]
    queries, passages = every[0][sides[0]], every[1][sides[1]]
    logits = (queries @ passages.T / 0.05).numpy()
    keep = np.ones_like(logits, dtype=bool)
    keep[:, 5:] = groups[rows][:, None] != groups[sides[1][5:]][None, :]
    assert not keep[1, 5 + 2] and not keep[2, 5 + 2]  # row 11's drawn passage is row 10's: out for both
    forward = np.mean([np.log(np.exp(logits[i, keep[i]]).sum()) - logits[i, i] for i in range(5)])
    square = logits[:, :5].T
    backward = np.mean([np.log(np.exp(square[i]).sum()) - square[i, i] for i in range(5)])
    got = objective.loss([queries, passages], torch.as_tensor(rows))
    assert got.item() == pytest.approx((forward + backward) / 2, rel=1e-5)


def test_the_windowed_contrastive_loss_scores_a_passage_as_the_search_does():
    """Query i against passage j: (cos(q, p) + gamma max over j's windows of cos(q, w)) / (1 + gamma), in-batch
    InfoNCE both ways; with gamma 0 it is the plain contrastive loss."""
    torch.manual_seed(0)
    unit = torch.nn.functional.normalize
    queries, passages, windows = unit(torch.rand(4, 6), dim=-1), unit(torch.randn(4, 6), dim=-1), torch.randn(9, 6)
    owners = torch.tensor([0, 0, 1, 2, 2, 2, 3, 1, 3])  # windows need not come in their passages' order
    windows[6], windows[8] = 1.0, -1.0  # passage 3's: the queries' entries are positive, so 8 is no query's best
    gamma, tau = 0.5, 0.05
    scores = torch.tensor([[float(queries[i] @ passages[j] + gamma * max(
        queries[i] @ unit(windows[k], dim=0) for k in range(9) if owners[k] == j)) / (1 + gamma) / tau
        for j in range(4)] for i in range(4)])
    target = torch.arange(4)
    expected = (torch.nn.functional.cross_entropy(scores, target)
                + torch.nn.functional.cross_entropy(scores.T, target)) / 2
    got = windowed_contrastive_loss(queries, passages, windows, owners, gamma, tau)
    assert got.item() == pytest.approx(expected.item(), rel=1e-5)
    one_way = windowed_contrastive_loss(queries, passages, windows, owners, gamma, tau, "query")
    assert one_way.item() == pytest.approx(torch.nn.functional.cross_entropy(scores, target).item(), rel=1e-5)
    plain = windowed_contrastive_loss(queries, passages, windows, owners, 0.0, tau)
    assert plain.item() == pytest.approx(contrastive_loss(queries, passages, tau).item(), rel=1e-6)
    cosines = queries @ unit(windows, dim=-1).T
    best = {max((k for k in range(9) if owners[k] == j), key=lambda k: float(cosines[i, k]))
            for i in range(4) for j in range(4)}
    assert 8 not in best
    windows.requires_grad_()
    windowed_contrastive_loss(queries, passages, windows, owners, gamma, tau).backward()
    assert {k for k in range(9) if windows.grad[k].abs().sum() > 0} == best  # the max passes on to the best alone


def test_a_windowed_contrastive_objective_encodes_each_batch_passage_s_own_windows(tmp_path):
    """The objective's third texts are the batch's passages' windows, in order; training on it lowers its held-out
    loss beside KD, and a passage without a window is refused."""
    device = torch.device("cpu")
    table, (kd, _) = problem(device)
    rng = np.random.default_rng(4)
    left = random_texts(rng, 300, 30)
    right = TokenIds(left.ids + 30, left.lengths)
    counts = rng.integers(1, 4, size=300)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    windows = random_texts(rng, int(offsets[-1]), 60)
    objective = windowed_contrastive_objective(PackedRows(left, device), PackedRows(right, device),
                                               PackedRows(windows, device), offsets, gamma=0.5, tau=0.05,
                                               weight=1.0, name="windowed", n_held=48, batch_size=16)
    batch = np.array([7, 2, 250])
    sides = objective.sides(batch)
    np.testing.assert_array_equal(sides[0], batch)
    np.testing.assert_array_equal(sides[2], np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in batch]))
    _, history = train(table, [kd, objective], SETTINGS, device, tmp_path, 0.0)
    assert min(r["val_parts"]["windowed"] for r in history["rounds"]) < history["initial_parts"]["windowed"]
    counts[5] = 0
    with pytest.raises(ValueError, match="every passage needs at least one window"):
        windowed_contrastive_objective(PackedRows(left, device), PackedRows(right, device),
                                       PackedRows(windows, device), np.concatenate([[0], np.cumsum(counts)]),
                                       gamma=0.5, tau=0.05, weight=1.0, name="windowed", n_held=48, batch_size=16)


def test_query_kd_loss_matches_the_formula_and_is_minimal_at_the_teacher():
    """Each query's softmax over the batch's documents (its own included), the teacher's to the student's."""
    torch.manual_seed(0)
    unit = torch.nn.functional.normalize
    tq, td = unit(torch.randn(5, 8), dim=-1), unit(torch.randn(5, 8), dim=-1)
    sq, sd = unit(torch.randn(5, 3), dim=-1), unit(torch.randn(5, 3), dim=-1)
    tau = 0.05
    expected = sum(-(torch.softmax(tq[i] @ td.T / tau, 0) * torch.log_softmax(sq[i] @ sd.T / tau, 0)).sum()
                   for i in range(5)) / 5
    assert torch.isclose(query_kd_loss(sq, sd, tq, td, tau), expected, atol=1e-5)
    queries, documents = tq.clone().requires_grad_(True), td.clone().requires_grad_(True)
    query_kd_loss(queries, documents, tq, td, tau).backward()
    for grad, at in ((queries.grad, tq), (documents.grad, td)):  # no move along the sphere at the teacher
        assert (grad - (grad * at).sum(-1, keepdim=True) * at).abs().max() < 1e-4
    assert query_kd_loss(sq, sd, tq, td, tau) > query_kd_loss(tq, td, tq, td, tau)


def test_query_kd_trains_beside_sentence_kd_without_choosing_the_best_table(tmp_path):
    """The query objective lowers its own held-out loss, while early stopping and the best table read the
    sentence objective alone."""
    device = torch.device("cpu")
    table, (kd, _) = problem(device)
    rng = np.random.default_rng(3)
    unit = torch.nn.functional.normalize
    queries, documents = random_texts(rng, 300, 60), random_texts(rng, 300, 60)
    meaning = unit(torch.tensor(rng.normal(size=(60, 16)), dtype=torch.float32), dim=-1)

    def teacher(texts):
        rows = torch.repeat_interleave(torch.arange(len(texts.lengths)), torch.as_tensor(texts.lengths))
        return unit(torch.zeros(len(texts.lengths), 16).index_add_(0, rows, meaning[torch.as_tensor(texts.ids)]),
                    dim=-1)

    query = query_kd_objective(PackedRows(queries, device), PackedRows(documents, device), teacher(queries),
                               teacher(documents), tau=0.05, weight=1.0, name="query kd", n_held=48, batch_size=16,
                               rng=np.random.default_rng(1))
    assert not query.selects and len(query.train) == 300 - 30
    learned, history = train(table, [kd, query], SETTINGS, device, tmp_path, 0.0)
    first, rounds = history["initial_parts"], history["rounds"]
    assert history["initial_val_loss"] == pytest.approx(first["kd"])
    assert [r["val_loss"] for r in rounds] == pytest.approx([r["val_parts"]["kd"] for r in rounds])
    assert min(r["val_parts"]["query kd"] for r in rounds) < first["query kd"]


def test_row_adam_moves_rows_as_sparse_adam_does_and_resumes_from_its_state():
    rng = np.random.default_rng(0)
    start = torch.tensor(rng.normal(size=(50, 6)), dtype=torch.float32)
    reference = torch.nn.Parameter(start.clone())
    sparse_adam = torch.optim.SparseAdam([reference], lr=0.01)
    weight = start.clone()
    row_adam = RowAdam(weight, lr=0.01)
    bag = torch.nn.functional.embedding_bag
    for step in range(8):
        ids = torch.as_tensor(rng.integers(0, 20, size=12))  # rows 20.. never get a gradient
        offsets, goal = torch.tensor([0, 5]), torch.tensor(rng.normal(size=(2, 6)), dtype=torch.float32)
        sparse_adam.zero_grad()
        (bag(ids, reference, offsets, mode="sum", sparse=True) - goal).square().sum().backward()
        sparse_adam.step()
        rows, inverse = torch.unique(ids, return_inverse=True)
        copy = weight[rows].requires_grad_()
        (bag(inverse, copy, offsets, mode="sum") - goal).square().sum().backward()
        row_adam.step(rows, copy, copy.grad)
        torch.testing.assert_close(weight, reference.detach(), rtol=0, atol=1e-6)
        if step == 3:  # a checkpoint written by SparseAdam resumes in RowAdam
            row_adam = RowAdam(weight, lr=0.01)
            row_adam.load_state_dict(sparse_adam.state_dict())
    torch.testing.assert_close(weight[20:], start[20:], rtol=0, atol=0)


def random_texts(rng, n, vocab, weighted=False):
    lengths = rng.integers(1, 6, size=n)
    ids = rng.integers(0, vocab, size=lengths.sum())
    weights = rng.choice([1.0, 0.5], size=len(ids)).astype(np.float32) if weighted else None
    return TokenIds(ids, lengths, weights)


def problem(device, seed=0, cell_size=0):
    """A table, KD texts with random teacher targets and translation pairs over disjoint row ranges."""
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(60, 8)).astype(np.float32)
    kd = PackedRows(random_texts(rng, 400, 30, weighted=True), device)
    targets = torch.nn.functional.normalize(torch.tensor(rng.normal(size=(400, 16)), dtype=torch.float32), dim=-1)
    left = random_texts(rng, 300, 30)
    right = TokenIds(left.ids + 30, left.lengths)  # row i of the "other language" is row i + 30
    objectives = [
        kd_objective(kd, targets.to(device), tau=0.05, weight=1.0, name="kd", n_held=64, batch_size=16,
                     rng=np.random.default_rng(1), cell_size=cell_size),
        contrastive_objective(PackedRows(left, device), PackedRows(right, device), tau=0.05, weight=1.0,
                              name="contrastive", n_held=48, batch_size=16),
    ]
    return table, objectives


SETTINGS = LoopSettings(batch_size=16, lr=1e-2, max_steps=120, eval_every=20, patience=10, seed=0)


class Killed(Exception):
    pass


@pytest.mark.parametrize("cell_size", [0, 40], ids=["random-batches", "neighbour-batches"])
def test_a_killed_run_resumes_to_the_identical_table_for_both_objectives(tmp_path, cell_size):
    device = torch.device("cpu")
    table, objectives = problem(device, cell_size=cell_size)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    reference, history = train(table, objectives, SETTINGS, device, tmp_path / "a", 0.0)
    assert history["best_val_loss"] < history["initial_val_loss"]
    assert set(history["rounds"][-1]["val_parts"]) == {"kd", "contrastive"}

    def kill(rounds):
        if rounds == 2:
            raise Killed

    with pytest.raises(Killed):
        train(table, objectives, SETTINGS, device, tmp_path / "b", 0.0, kill)
    resumed, history = train(table, objectives, SETTINGS, device, tmp_path / "b", 0.0)
    assert len(history["rounds"]) == 6
    np.testing.assert_array_equal(resumed, reference)


def test_centred_targets_teach_the_structure_an_anisotropic_teacher_hides(tmp_path):
    """Teacher vectors = a large shared direction + a small meaningful part (as e5's): KD on them directly learns
    the meaningful similarities worse than KD on the centred vectors."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    texts = random_texts(rng, 400, 30)
    meaning = torch.nn.functional.normalize(torch.tensor(rng.normal(size=(30, 16)), dtype=torch.float32), dim=-1)
    words = torch.as_tensor(texts.ids)
    text_of_word = torch.repeat_interleave(torch.arange(400), torch.as_tensor(texts.lengths))
    sentence = torch.zeros(400, 16).index_add_(0, text_of_word, meaning[words])
    sentence = torch.nn.functional.normalize(sentence, dim=-1)
    shared = torch.nn.functional.normalize(torch.ones(16), dim=0)
    anisotropic = torch.nn.functional.normalize(sentence * 0.2 + shared, dim=-1)
    assert (anisotropic @ anisotropic.T).mean() > 0.9
    table = rng.normal(size=(30, 8)).astype(np.float32)
    truth = (sentence @ sentence.T)[np.triu_indices(400, 1)].numpy()
    agreement = {}
    for name, targets in (("raw", anisotropic), ("centred", centred(anisotropic))):
        packed = PackedRows(texts, torch.device("cpu"))
        objective = kd_objective(packed, targets, tau=0.05, weight=1.0, name="kd", n_held=64, batch_size=32,
                                 rng=np.random.default_rng(1))
        settings = LoopSettings(batch_size=32, lr=1e-2, max_steps=300, eval_every=50, patience=100, seed=0)
        (tmp_path / name).mkdir()
        learned, _ = train(table, [objective], settings, torch.device("cpu"), tmp_path / name, 1e9, quiet=True)
        vectors = np.stack([learned[texts.ids[s:e]].sum(0) for s, e in zip(np.r_[0, np.cumsum(texts.lengths)[:-1]],
                                                                             np.cumsum(texts.lengths))])
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        agreement[name] = spearmanr((vectors @ vectors.T)[np.triu_indices(400, 1)], truth).statistic
    assert agreement["centred"] > agreement["raw"] + 0.15, agreement  # 0.61 against 0.31


def planted_cells(rng, n_cells=4, per_cell=50, dim=16):
    """Unit vectors in tight groups around random centres, with each vector's group."""
    centres = rng.normal(size=(n_cells, dim))
    truth = np.repeat(np.arange(n_cells), per_cell)
    vectors = centres[truth] + 0.05 * rng.normal(size=(len(truth), dim))
    return torch.nn.functional.normalize(torch.tensor(vectors, dtype=torch.float32), dim=-1), truth


def test_spherical_kmeans_recovers_planted_cells_and_is_seeded():
    vectors, truth = planted_cells(np.random.default_rng(0))
    cells = spherical_kmeans(vectors, 4, seed=3, sample_per_cell=50)
    # one cell per planted group and one group per cell
    assert len({(t, c) for t, c in zip(truth, cells)}) == 4 == len(set(cells))
    np.testing.assert_array_equal(cells, spherical_kmeans(vectors, 4, seed=3, sample_per_cell=50))


def test_nearest_centroids_are_float64s_also_for_rows_that_float32_cannot_tell_apart():
    """The float32 screen keeps float64's answer where two centroids tie for a row (the first wins) or differ by less
    than float32 can see, and on rows that are not unit length."""
    rng = np.random.default_rng(0)
    centroids = rng.normal(size=(40, 24))
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    centroids[7] = centroids[3]  # an exact tie: 3 must win
    near = centroids[5] + 1e-9 * rng.normal(size=24)
    centroids[9] = near / np.linalg.norm(near)  # within float32's rounding of centroid 5
    rows = np.concatenate([rng.normal(size=(9000, 24)), centroids[[3, 5, 9]] * 3.0,
                           centroids[5] + 1e-7 * rng.normal(size=(50, 24))])
    found = nearest_centroids(rows, centroids)
    np.testing.assert_array_equal(found, (rows @ centroids.T).argmax(axis=1))
    assert found[9000] == 3 and not (rows.astype(np.float32) @ centroids.astype(np.float32).T).argmax(1).tolist() \
        == found.tolist()  # float32 alone would have answered otherwise somewhere


@pytest.mark.parametrize("hashed", [True, False], ids=["hashed", "sampled"])
def test_neighbour_batches_come_from_one_cell_and_small_cells_are_topped_up(hashed):
    cells = np.array([0] * 30 + [1] * 30 + [2] * 5)
    batches = CellBatches(cells, hashed)(np.random.default_rng(0), len(cells), 200, 10)
    assert batches.shape == (200, 10)
    full = [b for b in batches if cells[b[0]] != 2]
    assert all(len(set(b)) == 10 and len(set(cells[b])) == 1 for b in full)
    small = [b for b in batches if cells[b[0]] == 2]
    assert small and all(set(b[:5]) == set(range(60, 65)) for b in small)
    assert 0.02 < len(small) / 200 < 0.15  # cells drawn in proportion to their size (5/65)


def test_a_row_that_changes_cell_changes_only_the_batches_it_is_in():
    """Another CPU's rounding moves a few rows to a neighbouring cell (float32 k-means put 2 of 100k sentences
    elsewhere): with hashed draws every other batch stays as it was: 98.8% of them stay here (the sampled draws of
    the tables before 2026-12-06: 91%, as each cell's share and each member draw shift; the search recipe's rows
    moved 0.008 under another CPU's kernels, 8e-6 hashed)."""
    rng = np.random.default_rng(0)
    cells = rng.integers(0, 50, size=5000)
    moved = cells.copy()
    moved[[17, 4242]] = (cells[[17, 4242]] + 1) % 50
    same = [np.array_equal(a, b) for a, b in zip(CellBatches(cells)(np.random.default_rng(1), 5000, 2000, 16),
                                                 CellBatches(moved)(np.random.default_rng(1), 5000, 2000, 16))]
    assert 0.97 < np.mean(same) < 1.0  # the batches that held (or now hold) a moved row differ


def test_neighbour_held_out_batches_are_an_anchors_nearest_texts():
    rng = np.random.default_rng(0)
    vectors, truth = planted_cells(rng, n_cells=8, per_cell=50)
    texts = PackedRows(random_texts(rng, len(truth), 30), torch.device("cpu"))
    objective = kd_objective(texts, vectors, tau=0.05, weight=1.0, name="kd", n_held=40, batch_size=5,
                             rng=np.random.default_rng(1), cell_size=50)
    assert len(objective.held_out) == 8
    for batch in objective.held_out:  # 40 held-out texts, 5 per group on average: the 5 nearest share a group
        assert len(set(truth[batch])) <= 2
    assert isinstance(objective.batches, CellBatches)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_training_on_cuda_matches_the_cpu(tmp_path):
    cpu_table, cpu_history = train(*problem(torch.device("cpu")), SETTINGS, torch.device("cpu"), tmp_path, 1e9)
    (tmp_path / "gpu").mkdir()
    gpu_table, gpu_history = train(*problem(torch.device("cuda")), SETTINGS, torch.device("cuda"), tmp_path / "gpu",
                                   1e9)
    assert gpu_history["device"].startswith("cuda")
    np.testing.assert_allclose(gpu_table, cpu_table, atol=1e-3)


def test_lr_decay_takes_the_step_to_zero_at_max_steps():
    for decay, middle in (("linear", 0.5), ("cosine", 0.5)):
        settings = LoopSettings(batch_size=16, lr=2e-3, max_steps=100, eval_every=20, patience=10, seed=0,
                                lr_decay=decay)
        assert settings.lr_at(0) == pytest.approx(2e-3)
        assert settings.lr_at(50) == pytest.approx(2e-3 * middle)
        assert settings.lr_at(100) == pytest.approx(0.0, abs=1e-12)
        assert all(settings.lr_at(s) > settings.lr_at(s + 1) for s in range(99))
    assert settings.lr_at(25) == pytest.approx(2e-3 * 0.5 * (1 + np.cos(np.pi / 4)))  # cosine: 1.71e-3, linear 1.5e-3
    constant = LoopSettings(batch_size=16, lr=2e-3, max_steps=100, eval_every=20, patience=10, seed=0)
    assert {constant.lr_at(s) for s in range(0, 101, 10)} == {2e-3}


def test_a_decayed_run_differs_from_a_constant_one_and_resumes_on_its_schedule(tmp_path):
    """The schedule follows the optimiser's step count, which a checkpoint restores: a killed run resumes to the
    table of an unbroken one."""
    device = torch.device("cpu")
    table, objectives = problem(device, cell_size=0)
    decayed = LoopSettings(batch_size=16, lr=1e-2, max_steps=120, eval_every=20, patience=10, seed=0,
                           lr_decay="linear")
    for name in ("constant", "a", "b"):
        (tmp_path / name).mkdir()
    constant, _ = train(table, objectives, SETTINGS, device, tmp_path / "constant", 0.0, quiet=True)
    reference, history = train(table, objectives, decayed, device, tmp_path / "a", 0.0, quiet=True)
    assert history["best_val_loss"] < history["initial_val_loss"]
    assert not np.allclose(reference, constant)

    def kill(rounds):
        if rounds == 3:
            raise Killed

    with pytest.raises(Killed):
        train(table, objectives, decayed, device, tmp_path / "b", 0.0, kill, quiet=True)
    resumed, _ = train(table, objectives, decayed, device, tmp_path / "b", 0.0, quiet=True)
    np.testing.assert_array_equal(resumed, reference)


def test_lexical_sketches_put_pairs_that_share_rare_words_in_one_cell():
    """Eight topics, each a rare word id of its own among common ones: the k-means of the pairs' sketches (both
    sides summed) finds the topics, so a cell's batch holds one topic's pairs: hard negatives for each other."""
    rng = np.random.default_rng(0)
    topics = rng.integers(0, 8, 400)
    common = np.arange(100, 110)

    def side(topic: int, n: int) -> tuple[list[int], list[float]]:
        ids = [1000 + topic, *rng.choice(common, n, replace=False).tolist()]
        return ids, [1.0] * len(ids)

    left = PackedRows(TokenIds.from_lists([side(t, 3) for t in topics]), torch.device("cpu"))
    right = PackedRows(TokenIds.from_lists([side(t, 6) for t in topics]), torch.device("cpu"))
    rows = np.arange(400)[::-1]  # in the objective's (shuffled) order
    sketches = lexical_sketches([left, right], rows, seed=0)
    assert sketches.shape == (400, 128) and torch.allclose(sketches.norm(dim=1), torch.ones(400, dtype=torch.float64))
    assert torch.equal(sketches, lexical_sketches([left, right], rows, seed=0))
    cells = spherical_kmeans(sketches, 8, seed=0)
    same_topic = topics[rows][:, None] == topics[rows][None, :]
    assert ((cells[:, None] == cells[None, :]) == same_topic).all()
    batch = CellBatches(cells)(np.random.default_rng(1), 400, 5, 16)
    assert all(len(set(topics[rows][b])) == 1 for b in batch)



def test_an_objective_with_its_own_batch_size_steps_on_that_many_examples(tmp_path):
    """``[retrieval] batch_size``: the pair objective's batches (and its held-out ones) have its own size while the
    KD beside it keeps the loop's, and the larger contrastive batch trains a different table."""
    device = torch.device("cpu")
    table, (kd, pairs) = problem(device)
    wide = contrastive_objective(*pairs.texts, tau=0.05, weight=1.0, name="contrastive", n_held=48, batch_size=32)
    assert wide.batch_size == 32 and {len(batch) for batch in wide.held_out} == {32}
    seen: dict[str, set[int]] = {"kd": set(), "contrastive": set()}

    def counted(objective):
        def loss(vectors, batch):
            seen[objective.name].add(len(batch))
            return objective.loss(vectors, batch)
        return replace(objective, loss=loss)

    settings = replace(SETTINGS, max_steps=40, eval_every=20)
    (tmp_path / "wide").mkdir()
    wide_table, _ = train(table.copy(), [counted(kd), counted(wide)], settings, device, tmp_path / "wide", 1e9,
                          quiet=True)
    assert seen["contrastive"] == {32}  # its training and held-out batches alike
    assert 16 in seen["kd"] and 32 not in seen["kd"]  # the KD keeps the loop's 16 a step
    (tmp_path / "narrow").mkdir()
    narrow_table, _ = train(table.copy(), [kd, pairs], settings, device, tmp_path / "narrow", 1e9, quiet=True)
    assert not np.allclose(wide_table, narrow_table)
