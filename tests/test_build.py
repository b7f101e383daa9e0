"""`swembed build` end to end on a tiny corpus with the real MiniLM teacher: output, resume, bad input."""
import gzip
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import run_cli, small_build_args

import swembed
from swembed.pipeline import files


@pytest.fixture(scope="module")
def reference_build(tmp_path_factory):
    from conftest import make_sentences

    root = tmp_path_factory.mktemp("ref")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(make_sentences(400)) + "\n")
    out = root / "model"
    result = run_cli(small_build_args(corpus, out) + ["--work-dir", str(root / "work")])
    assert result.returncode == 0, result.stderr
    return corpus, out, result


def build_with_recipe(corpus, tmp_path, recipe_text: str, work=None):
    """The small build of ``corpus`` with a recipe holding ``recipe_text``, in this process; (result, out, work).
    ``work``: another build's work folder, whose stages this one reuses where their settings agree."""
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(recipe_text)
    out, work = tmp_path / "model", work or tmp_path / "work"
    result = run_cli(["build", "--recipe", str(recipe), *small_build_args(corpus, out)[1:], "--work-dir", str(work)],
                     same_process=True)
    assert result.returncode == 0, result.stderr
    return result, out, work


@pytest.mark.teacher
def test_build_writes_a_loadable_model_with_stage_costs(reference_build):
    _, out, result = reference_build
    model = swembed.load(out)
    vectors = model.encode(["the small cat sees the dog", "a dog ran", "?!"])
    assert vectors.shape == (3, 32) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors[:2], axis=1), 1.0, rtol=1e-5)
    assert (vectors[2] == 0).all()
    config = json.loads((out / "config.json").read_text())
    stages = config["build"]["stages"]
    assert set(stages) >= {"corpus", "vocab", "extract", "pca", "distill", "export"}
    assert all(stages[s]["wall_s"] is not None and stages[s]["peak_rss_mb"] > 0 for s in ("extract", "distill"))
    assert config["teacher"]["name"] == "minilm" and config["abtt_dropped"] == 3
    assert "peak MB" in result.stdout
    assert "plan (cpu, teacher minilm" in result.stderr and "sentences through the teacher" in result.stderr
    assert config["build"]["plan"]["en"]["sentences_to_encode"] == 400 and config["build"]["device"]["type"] == "cpu"
    # Similar sentences are closer than unrelated ones (the table carries meaning).
    a, b, c = model.encode(["the happy dog visits the river", "the happy dog visits the river number 3",
                            "strange engine letter"])
    assert a @ b > a @ c


def _folder_bytes(folder) -> dict:
    """Each file of a model folder by name (hidden files, such as an output marker, apart), its bytes."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if not p.name.startswith(".")}


@pytest.mark.teacher
def test_swembed_build_writes_the_cli_table_and_save_round_trips_byte_for_byte(reference_build, tmp_path):
    """``swembed.build`` with the settings of ``small_build_args``, in its own work folder, writes the files the CLI
    wrote, byte for byte, except config.json, whose build record differs only in the output and work paths and in
    times, memory and cache states; ``load(p).save(q)`` writes p's files to q, byte for byte."""
    from swembed.runtime.outputs import OutputExistsError

    corpus, ref_out, _ = reference_build
    out = tmp_path / "api"
    model = swembed.build(teacher="minilm", corpus=corpus, dim=32, out=out, checkpoint_seconds=0,
                          pca={"sentences": 300}, distill={"max_steps": 60, "eval_every": 20},
                          extract={"batch_tokens": 512, "unit_sentences": 64}, vocab={"teacher_words": False})
    assert isinstance(model, swembed.StaticEmbedder) and model.dim == 32
    api, cli = _folder_bytes(out), _folder_bytes(ref_out)
    assert set(api) == set(cli) and {name for name in api if api[name] != cli[name]} == {"config.json"}
    api_config, cli_config = (json.loads(files["config.json"]) for files in (api, cli))
    for config in (api_config, cli_config):
        assert config.pop("created") and config["build"]["stages"]
        for volatile in ("stages", "device", "total_wall_s"):
            config["build"].pop(volatile)
        for path in ("out", "work_dir"):
            config["build"]["config"].pop(path)
        for numbers in config["build"]["plan"].values():
            if isinstance(numbers, dict):
                numbers.pop("estimated_extract_s")
        [config["build"]["plan"].pop(key) for key in ("estimated_extract_s", "estimated_peak_mb")]
    assert api_config == cli_config
    np.testing.assert_array_equal(model.encode(["the small cat sees the dog"]),
                                  swembed.load(ref_out).encode(["the small cat sees the dog"]))

    for source in (ref_out, out):
        copy = tmp_path / f"copy-of-{source.name}"
        assert swembed.load(source).save(copy) == copy
        assert _folder_bytes(copy) == _folder_bytes(source)
    with pytest.raises(OutputExistsError):
        model.save(tmp_path / "copy-of-api")


@pytest.mark.parametrize("stage", ["extract", "distill"])
@pytest.mark.teacher
def test_killed_build_resumes_to_the_same_table(reference_build, tmp_path, stage):
    corpus, ref_out, _ = reference_build
    out, work = tmp_path / "model", tmp_path / "work"
    args = small_build_args(corpus, out) + ["--work-dir", str(work)]
    # The test builds use small units (64 sentences, 20-step rounds) so the crash lands mid-stage.
    crashed = run_cli(args, {"SWEMBED_CRASH_AFTER_UNITS": f"{stage}:1"})
    assert crashed.returncode == 75, crashed.stderr
    assert not out.exists()
    assert list(work.glob(f"{stage}-*.partial/*"))
    assert list(work.glob(f".{stage}.tmp-*"))  # the killed run's temporary folder
    resumed = run_cli(args, same_process=True)
    assert resumed.returncode == 0, resumed.stderr
    assert not list(work.glob(".*.tmp-*"))  # removed by the resumed run, not left to pile up
    if stage == "extract":
        manifest = json.loads(next(work.glob(f"{stage}-*/manifest.json")).read_text())
        assert manifest["stats"]["resumed_after_unit"] == 1
    np.testing.assert_array_equal(np.load(out / "embeddings.npy"), np.load(ref_out / "embeddings.npy"))


@pytest.mark.teacher
def test_rare_word_pieces_train_the_piece_rows_on_exactly_the_sentences_holding_rare_words(reference_build, tmp_path):
    """Every corpus word has a row, so plain KD never moves a piece row (the reference build); with
    ``rare_word_pieces = 1`` the sentences holding a word seen once are also distilled with it written through
    its pieces, and those pieces' rows move."""
    from collections import Counter

    from conftest import make_sentences

    def piece_rows_moved(out, work):
        final, start = np.load(out / "embeddings.npy"), swembed.load(out).config["pieces"]["rows"][0]
        before = np.load(next(work.glob("pca-*/table.npy")))
        return np.flatnonzero(np.abs(final[start:] - before[start:]).max(axis=1) > 0) + start

    _, ref_out, _ = reference_build
    assert len(piece_rows_moved(ref_out, ref_out.parent / "work")) == 0
    # the first 200 sentences keep a number seen once; the rest end without one
    lines = [s if i < 200 else s[: s.index(" number")] + "." for i, s in enumerate(make_sentences(400))]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n")
    _, out, work = build_with_recipe(corpus, tmp_path, "[distill]\nrare_word_pieces = 1\n")
    seen = Counter(w for line in lines for w in set(line.lower().rstrip(".").split()))
    holding = sum(any(seen[w] <= 1 for w in line.lower().rstrip(".").split()) for line in lines)
    stats = json.loads(next(work.glob("distill-*/manifest.json")).read_text())["stats"]
    assert holding == 200 and stats["rare-word sentences en"] == holding
    model = swembed.load(out)
    moved = set(piece_rows_moved(out, work))
    number_pieces = {model.tokenizer.piece_rows[i] for n in range(200) for i in model.tokenizer.word_pieces(str(n))}
    assert moved and moved <= number_pieces


@pytest.mark.teacher
def test_pca_and_distillation_can_read_only_some_corpus_sources(tmp_path):
    """``[pca] sources`` and ``[distill] sources``: every source gives the words their contexts, but PCA fits on and
    KD trains on the encoded sentences of the named sources only; a source the corpus lacks is refused up front."""
    from conftest import make_sentences

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "general.txt").write_text("\n".join(make_sentences(280)) + "\n")
    (corpus / "domain.txt").write_text("\n".join(s.replace("The", "A domain") for s in make_sentences(200, 1)) + "\n")
    named = f"sources = ['{corpus / 'general.txt'}']\n"
    result, out, work = build_with_recipe(corpus, tmp_path, f"[pca]\n{named}[distill]\n{named}")
    stages = json.loads((out / "config.json").read_text())["build"]["stages"]
    per_source = stages["corpus"]["stats"]["per_source"]
    assert per_source == {str(corpus / "domain.txt"): 200, str(corpus / "general.txt"): 280}
    assert stages["pca"]["stats"]["fit_rows"] == 280  # of 480 encoded, under --pca-sentences 300
    assert stages["distill"]["stats"]["kd sentences en"] == 280
    assert "domain" in swembed.load(out).words  # the other source still gives words their rows

    recipe = tmp_path / "elsewhere.toml"
    recipe.write_text(f"[distill]\nsources = ['{tmp_path / 'elsewhere.txt'}']\n")
    (tmp_path / "elsewhere.txt").write_text("A sentence that is not in the corpus.\n")
    refused = run_cli(["build", "--recipe", recipe, *small_build_args(corpus, tmp_path / "other")[1:]])
    assert refused.returncode != 0 and not (tmp_path / "other").exists()
    assert refused.stderr.strip().splitlines()[-1].endswith(f"[distill] sources: '{tmp_path / 'elsewhere.txt'}' names "
                                                            "no corpus source")


@pytest.mark.teacher
def test_a_cover_can_be_filled_from_some_corpus_sources_only(tmp_path):
    """``[extract] fill_sources``: the cover gives every word its context from any source; the fill to
    ``max_sentences`` takes only the named sources' sentences (here all of them, as the budget allows)."""
    from conftest import make_sentences

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    general = [s.split(" number")[0] + "." for s in make_sentences(280)]
    domain = [s.replace("The", "A domain") for s in general[:200]]
    (corpus / "general.txt").write_text("\n".join(general) + "\n")
    (corpus / "domain.txt").write_text("\n".join(domain) + "\n")
    recipe = (f"[extract]\nsentences = 'cover'\nsentences_per_word = 1\nmax_sentences = 400\n"
              f"fill_sources = ['{corpus / 'general.txt'}']\n")
    _, out, work = build_with_recipe(corpus, tmp_path, recipe)
    encoded = set(files.read_lines(next(work.glob("extract-*")) / files.TARGET_SENTENCES))
    kept = json.loads((out / "config.json").read_text())["build"]["stages"]["corpus"]["stats"]["per_source"]
    assert sum(kept.values()) > 400 and set(general) <= encoded
    assert 0 < len(encoded & set(domain)) < 40  # the cover's few; a random fill would take about half of them


@pytest.mark.teacher
def test_random_batch_companions_and_shrinkage_after_training(reference_build, tmp_path):
    """``random_batch_weight``: each neighbour-batch KD objective gets a companion on random batches, in the loss
    and in the held-out loss; ``[distill] shrinkage``: every word row with contexts is pulled to its pieces;
    ``alone_shrinkage``: the alone stage holds the teacher's own vector of each word row's word, and every word
    row is pulled towards it; ``[vocab] word_lists``: words the corpus lacks join the vocabulary after its words
    (lower-cased, once, entries of two words left out) with no context; ``gram_buckets``: gram rows fitted to the
    finished word rows (the normal equations of the ridge fit hold) follow every other row, and an unknown word
    backs off to its pieces' half and its grams' half."""
    from swembed.teachers import load_teacher

    corpus, _, _ = reference_build
    words_file = tmp_path / "words.txt.gz"
    words_file.write_bytes(gzip.compress("Ocelot\nthe\nocelot\ntwo words\nwombat\t120\n".encode()))
    result, out, work = build_with_recipe(corpus, tmp_path, f"[vocab]\nword_lists = ['{words_file}']\n[distill]\n"
                                          "cell_size = 40\nrandom_batch_weight = 0.5\nshrinkage = 2.0\n"
                                          "alone_shrinkage = 4.0\ngram_buckets = 32\n")
    assert "then every word row read alone through the teacher" in result.stderr  # the plan says so
    stage = next(work.glob("distill-*"))
    history = json.loads((stage / "history.json").read_text())
    assert set(history["initial_parts"]) == {"kd en", "kd en random batches"}
    parts = history["initial_parts"]
    assert history["initial_val_loss"] == pytest.approx(parts["kd en"] + 0.5 * parts["kd en random batches"])
    contexts = np.load(out / "word_contexts.npy")
    stats = json.loads((stage / "manifest.json").read_text())["stats"]
    assert stats["shrunk words"] == int((contexts > 0).sum()) > 0
    assert stats["words pulled to alone"] == len(contexts)
    words = (out / "vocab.txt").read_text(encoding="utf-8").split("\n")[: len(contexts)]
    assert words[-2:] == ["ocelot", "wombat"] and list(contexts[-2:]) == [0, 0] and contexts[:-2].min() > 0
    assert swembed.load(out).tokenizer.rows("ocelot") == ([len(contexts) - 2], [1.0])
    np.testing.assert_allclose(np.load(next(work.glob("alone-*/alone.npy"))),
                               load_teacher("minilm", device="cpu").encode(words), atol=1e-5)
    config = json.loads((out / "config.json").read_text())
    assert config["build"]["stages"]["alone"]["cached"] is False
    model = swembed.load(out)
    start, end = config["grams"]["rows"]
    assert (start, end) == (config["pieces"]["rows"][1], model.table.shape[0]) and end - start == 32
    rows, weights = model.tokenizer.rows(words[0] + "zq")  # unknown; its first piece is a corpus word
    pieces = [r for r in rows if r < start]
    assert pieces and all(config["pieces"]["rows"][0] <= r for r in pieces) and len(rows) > len(pieces)
    oov = model.tokenizer.rules.oov_weight  # an unknown word's weight (2 by default), half to its pieces
    assert sum(weights[: len(pieces)]) == pytest.approx(oov / 2) and sum(weights) == pytest.approx(oov)
    from swembed.pipeline.grams import RIDGE, gram_matrix

    a = gram_matrix(words, 32).toarray().astype(np.float64)
    grams, targets = np.asarray(model.table[start:end], np.float64), np.load(stage / "table.npy")[: len(words)]
    np.testing.assert_allclose(a.T @ a @ grams + RIDGE * grams, a.T @ targets, atol=2e-3)


@pytest.mark.teacher
def test_paragraphs_are_runs_of_corpus_sentences_read_by_the_teacher_and_a_weighted_kd_objective(reference_build,
                                                                                                   tmp_path):
    """``[paragraphs]``: the paragraphs stage holds ``count`` runs of ``sentences`` consecutive corpus lines and the
    teacher's vectors of them, the queries stage the line before each run and its vector; KD adds an objective on
    the paragraphs at ``weight`` and one of the queries against them at ``query_weight``, neither of which
    decides early stopping."""
    from swembed.teachers import load_teacher

    corpus, _, _ = reference_build
    lines = corpus.read_text().split("\n")[:-1]
    result, _, work = build_with_recipe(corpus, tmp_path, "[paragraphs]\ncount = 150\nsentences = 2\nweight = 0.25\n"
                                                          "query_weight = 0.5\n")
    assert "150 paragraphs of 2 corpus sentences and the line before each through the teacher" in result.stderr
    stage = next(work.glob("paragraphs-*"))
    paragraphs = (stage / "target_sentences.txt").read_text().split("\n")[:-1]
    runs = {" ".join(lines[i : i + 2]): i for i in range(0, len(lines) - 1, 2)}
    assert len(paragraphs) == len(set(paragraphs)) == 150 and set(paragraphs) <= set(runs)
    teacher = load_teacher("minilm", device="cpu")
    np.testing.assert_allclose(np.load(stage / "targets.npy"), teacher.encode(paragraphs), atol=1e-5)
    queries_stage = next(work.glob("queries-*"))
    queries = (queries_stage / "target_sentences.txt").read_text().split("\n")[:-1]
    assert queries == [lines[runs[p] - 1] if runs[p] else lines[2] for p in paragraphs]
    np.testing.assert_allclose(np.load(queries_stage / "targets.npy"), teacher.encode(queries), atol=1e-5)
    history = json.loads((next(work.glob("distill-*")) / "history.json").read_text())
    parts = history["initial_parts"]
    assert set(parts) == {"kd en", "kd en paragraphs", "query kd en"}
    assert history["initial_val_loss"] == pytest.approx(parts["kd en"])
    assert history["train_examples"]["kd en paragraphs"] == history["train_examples"]["query kd en"] == 150 - 15


@pytest.mark.teacher
def test_paragraph_files_are_whole_documents_read_by_the_teacher_and_a_kd_objective(reference_build, tmp_path):
    """``[paragraphs] files``: the paragraphs stage holds ``count`` documents drawn from the files (blank lines and
    documents repeating an excluded text skipped), in file order, with the teacher's vectors of them; KD adds an
    objective on them that does not decide early stopping."""
    from swembed.teachers import load_teacher

    corpus, _, _ = reference_build
    lines = corpus.read_text().split("\n")[:-1]
    documents = [" ".join(lines[i : i + 2]) for i in range(0, 396, 2)]
    held_out = tmp_path / "held_out.txt"
    held_out.write_text(documents[3] + "\n")
    (tmp_path / "documents.txt").write_text("\n".join(documents[:30] + [""] + documents[30:]) + "\n")
    result, _, work = build_with_recipe(corpus, tmp_path, f'exclude = ["{held_out}"]\n[paragraphs]\ncount = 150\n'
                                                          f'files = ["{tmp_path / "documents.txt"}"]\n')
    assert "150 documents of 1 file(s) through the teacher" in result.stderr
    stage = next(work.glob("paragraphs-*"))
    kept = (stage / "target_sentences.txt").read_text().split("\n")[:-1]
    assert len(kept) == len(set(kept)) == 150 and documents[3] not in kept and set(kept) <= set(documents)
    assert kept == sorted(kept, key=documents.index)
    np.testing.assert_allclose(np.load(stage / "targets.npy"), load_teacher("minilm", device="cpu").encode(kept),
                               atol=1e-5)
    history = json.loads((next(work.glob("distill-*")) / "history.json").read_text())
    assert set(history["initial_parts"]) == {"kd en", "kd en paragraphs"}
    assert history["initial_val_loss"] == pytest.approx(history["initial_parts"]["kd en"])


@pytest.mark.teacher
def test_retrieval_pairs_train_beside_the_sentence_kd_read_by_the_teacher_for_kd_only(reference_build, tmp_path):
    """``[retrieval]``: the retrieval stage keeps each query<TAB>document pair once (repeats and pairs holding an
    excluded text dropped) with the teacher's vectors of both sides; distillation adds one objective on them
    (``loss`` picks which; ``windows``: the contrastive score of a passage with windows, another table from the
    same stages, and its batches drawn from lexical cells with ``cell_size`` as the plain score's are;
    ``hard_negatives``: each query also scores a passage mined with the starting table) that does not decide early
    stopping."""
    from swembed.teachers import load_teacher

    corpus, _, _ = reference_build
    lines = corpus.read_text().split("\n")[:-1]
    pairs = [f"{lines[i]}\t{' '.join(lines[i + 1 : i + 4])}" for i in range(0, 396, 2)]
    held_out = tmp_path / "held_out.txt"
    held_out.write_text(lines[0] + "\n")
    (tmp_path / "pairs.tsv").write_text("\n".join(pairs + pairs[:5]) + "\n")
    work = tmp_path / "work"  # one work folder: the second build reads the first one's extract
    tables = {}
    for name, loss, objective, extra in (("kd", "kd", "retrieval kd", ""),
                                         ("contrastive", "contrastive", "retrieval contrastive", ""),
                                         ("windows", "contrastive", "retrieval contrastive", "windows = 4\n"),
                                         ("windows-cells", "contrastive", "retrieval contrastive",
                                          "windows = 4\ncell_size = 32\n"),
                                         ("hard", "contrastive", "retrieval contrastive", "hard_negatives = 4\n")):
        root = tmp_path / name
        root.mkdir()
        result, out, _ = build_with_recipe(corpus, root, f'exclude = ["{held_out}"]\n[retrieval]\nfiles = '
                                                          f'["{tmp_path / "pairs.tsv"}"]\nloss = "{loss}"\n{extra}',
                                           work)
        tables[root.name] = np.load(out / "embeddings.npy")
        stages = {name: work / entry["artifact"]  # this build's stages (the work folder holds both builds')
                  for name, entry in json.loads((out / "config.json").read_text())["build"]["stages"].items()
                  if "artifact" in entry}  # not the export, written into the model folder
        stage = next(path for name, path in stages.items() if name.startswith("retrieval"))
        kept = (stage / "pairs.tsv").read_text().split("\n")[:-1]
        assert kept == pairs[1:]  # the first pair's query is the excluded line; the repeats are gone
        if loss == "kd":
            assert "the query-document pairs of 1 file(s) through the teacher" in result.stderr
            teacher = load_teacher("minilm", device="cpu")
            np.testing.assert_allclose(np.load(stage / "query_targets.npy"),
                                       teacher.encode([p.split("\t")[0] for p in kept]), atol=1e-5)
            np.testing.assert_allclose(np.load(stage / "document_targets.npy"),
                                       teacher.encode([p.split("\t")[1] for p in kept]), atol=1e-5)
        else:  # the contrastive loss's labels are the pairs themselves: no teacher time
            assert "contrastive: no teacher time" in result.stderr
            assert not list(stage.glob("*_targets.npy"))
            mined = json.loads((stages["distill"] / "manifest.json").read_text())["stats"].get(
                "retrieval hard negatives")
            assert mined == ({"a pair": 4, "distinct passages": mined["distinct passages"]} if name == "hard" else None)
            assert name != "hard" or 4 <= mined["distinct passages"] < len(kept)
        history = json.loads((stages["distill"] / "history.json").read_text())
        assert set(history["initial_parts"]) == {"kd en", objective}
        assert history["initial_val_loss"] == pytest.approx(history["initial_parts"]["kd en"])
        assert 0 < history["train_examples"][objective] < len(kept)
    assert tables["contrastive"].shape == tables["windows"].shape == tables["windows-cells"].shape
    assert not np.array_equal(tables["contrastive"], tables["windows"])
    assert not np.array_equal(tables["windows"], tables["windows-cells"])  # the cells draw a windowed score's batches
    assert not np.array_equal(tables["contrastive"], tables["hard"])  # each query also scores a mined passage


@pytest.mark.teacher
def test_a_co_teacher_encodes_the_extract_sentences_in_order_and_kd_aims_at_the_weighted_cosines(reference_build,
                                                                                                  tmp_path):
    """``[distill] co_teacher``: a coteacher stage holds another teacher's vectors of the extract's sentences in
    their order, and KD's targets give cosines (1 - sum w) cos_teacher + sum_k w_k cos_k. With the teacher as its own
    co-teachers the targets' cosines are the teacher's, so KD starts from the reference build's held-out loss."""
    from swembed.pipeline.coteacher import joint_targets

    def unit(x):
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    rng = np.random.default_rng(0)
    own = unit(rng.normal(size=(300, 7)))
    joint = joint_targets(own, [own, own], [0.2, 0.1])
    np.testing.assert_allclose(joint @ joint.T, own @ own.T, atol=1e-5)
    co = unit(rng.normal(size=(300, 5)) + 2.0)  # an anisotropic co-teacher: its cosines span less
    joint = joint_targets(own, [co], [0.3])
    off = ~np.eye(len(own), dtype=bool)
    scale = np.linalg.lstsq((co @ co.T)[off][:, None], (joint @ joint.T - 0.7 * own @ own.T)[off], rcond=None)[0][0]
    assert scale / 0.3 == pytest.approx((own @ own.T)[off].std() / (co @ co.T)[off].std(), rel=0.1)
    corpus, _, _ = reference_build
    recipe = tmp_path / "co.toml"
    from swembed.teachers import resolve_teacher

    folder = resolve_teacher("minilm")[0]  # the same weights under another name: a second co-teacher stage
    recipe.write_text(f"[distill]\nco_teacher = ['minilm', '{folder}']\nco_teacher_weight = [0.2, 0.1]\n")
    out, work = tmp_path / "model", reference_build[1].parent / "work"
    result = run_cli(["build", "--recipe", str(recipe), *small_build_args(corpus, out)[1:], "--work-dir", str(work)],
                     same_process=True)
    assert result.returncode == 0, result.stderr
    assert "through the co-teacher minilm" in result.stderr  # the plan says so
    stages = json.loads((out / "config.json").read_text())["build"]["stages"]
    assert not stages["coteacher minilm (en)"]["cached"] and not stages[f"coteacher {folder} (en)"]["cached"]
    assert stages["extract"]["cached"] is True
    extract, coteacher, other = (work / stages[name]["artifact"]
                                 for name in ("extract", "coteacher minilm (en)", f"coteacher {folder} (en)"))
    for stage in (coteacher, other):
        np.testing.assert_allclose(np.load(stage / "targets.npy"), np.load(extract / "targets.npy"), atol=1e-5)
    assert coteacher != other
    for stage in (coteacher, other):  # each stage timed its teacher when it started
        assert json.loads((stage / "manifest.json").read_text())["stats"]["estimated_s"] > 0
    manifest = json.loads((work / stages["distill"]["artifact"] / "manifest.json").read_text())
    read = [f"coteacher-{manifest['inputs'][name][:16]}" for name in ("coteacher", "coteacher #2")]
    assert read == [coteacher.name, other.name]  # KD read both co-teachers
    reference = json.loads((reference_build[1] / "config.json").read_text())["build"]["stages"]
    first_loss = [json.loads((work / s["distill"]["artifact"] / "history.json").read_text())["initial_val_loss"]
                  for s in (stages, reference)]
    assert first_loss[0] == pytest.approx(first_loss[1], rel=1e-4)


@pytest.mark.teacher
def test_a_killed_coteacher_stage_resumes_after_its_last_unit(reference_build, tmp_path):
    """The coteacher stage checkpoints each unit of sentences: killed after its second, a rerun reads those two back
    and encodes the rest, to the vectors of a run never killed (MiniLM as its own co-teacher: the extract's
    targets). A rerun with another unit size is refused, naming the partial folder."""
    from swembed.pipeline.config import BuildError
    from swembed.pipeline.coteacher import run_coteacher
    from swembed.pipeline.stage import CRASH_ENV, StageContext, StageResult
    from swembed.teachers import load_teacher

    _, out, _ = reference_build
    extract = out.parent / "work" / json.loads((out / "config.json").read_text())["build"]["stages"]["extract"][
        "artifact"]
    manifest = json.loads((extract / "manifest.json").read_text())
    stage = StageResult("extract", manifest["key"], extract, manifest)
    script = ("import json, sys\nfrom pathlib import Path\nfrom swembed.pipeline.coteacher import run_coteacher\n"
              "from swembed.pipeline.stage import StageContext, StageResult\n"
              "from swembed.teachers import load_teacher\n"
              "extract = Path(sys.argv[1])\nmanifest = json.loads((extract / 'manifest.json').read_text())\n"
              "stage = StageResult('extract', manifest['key'], extract, manifest)\n"
              "run_coteacher(StageContext(Path(sys.argv[2]), quiet=True), stage, load_teacher('minilm'), unit=64)\n")
    killed = subprocess.run([sys.executable, "-c", script, str(extract), str(tmp_path)], capture_output=True,
                            text=True, env={**os.environ, CRASH_ENV: "coteacher:2"})
    assert killed.returncode == 75, killed.stderr
    assert sorted(p.name for p in tmp_path.glob("coteacher-*.partial/*")) == ["unit-00000.npy", "unit-00001.npy"]
    teacher = load_teacher("minilm")
    with pytest.raises(BuildError, match="unit-00000.npy: 64 rows where the unit holds 100 sentences"):
        run_coteacher(StageContext(tmp_path, quiet=True), stage, teacher, unit=100)
    resumed = run_coteacher(StageContext(tmp_path, quiet=True), stage, teacher, unit=64)
    assert resumed.stats["resumed_units"] == 2 and resumed.stats["sentences"] == 400
    assert resumed.stats["estimated_s"] > 0  # timed on the four units left
    np.testing.assert_allclose(np.load(resumed.path / "targets.npy"), np.load(extract / "targets.npy"), atol=1e-5)


@pytest.mark.teacher
def test_plan_states_the_quota_choice_that_extraction_encodes(tmp_path):
    rng = np.random.default_rng(0)
    words = "cat dog bird river stone tree house road lamp chair table cloud rain wind fire snow".split()
    lines = {" ".join(rng.choice(words, 6)) for _ in range(600)}
    corpus, out = tmp_path / "corpus.txt", tmp_path / "model"
    corpus.write_text("\n".join(sorted(lines)[:400]) + "\n")
    result = run_cli(small_build_args(corpus, out) + ["--work-dir", str(tmp_path / "work"), "--no-distill",
                                                       "--sentences", "quota", "--sentences-per-word", "20"],
                     same_process=True)
    assert result.returncode == 0, result.stderr
    build = json.loads((out / "config.json").read_text())["build"]
    planned = build["plan"]["en"]["sentences_to_encode"]
    encoded = json.loads(next((tmp_path / "work").glob("extract-*/manifest.json")).read_text())["stats"]
    assert planned == encoded["encoded_sentences"] < 400 and encoded["mode"] == "quota"
    assert f"{planned:,} of 400 sentences through the teacher" in result.stderr


@pytest.mark.teacher
def test_the_plan_times_the_teacher_on_a_large_selection_and_not_on_a_few_seconds_of_it():
    """The plan's extract estimate comes from timing the teacher on slices of the selection's own batches; a
    selection of fewer than ``UNTIMED_TOKENS`` padded tokens is not timed (the probe would cost a good part of
    its extraction) and says so."""
    from conftest import make_sentences

    from swembed.pipeline.config import BuildConfig
    from swembed.pipeline.extract import Selection
    from swembed.pipeline.plan import UNTIMED_TOKENS, build_plan
    from swembed.teachers import load_teacher
    from swembed.teachers.base import token_budget_batches

    teacher = load_teacher("minilm", device="cpu")

    def plan(texts):
        lengths = teacher.token_lengths(texts) + 2
        selection = Selection(texts, None, lengths, token_budget_batches(lengths, teacher.batch_tokens), 5000, 0.0)
        return selection.padded_tokens, build_plan(BuildConfig(), teacher, {"en": selection}, {"en": 900})

    tokens, large = plan(make_sentences(3000))
    timed = large["numbers"]["en"]["estimated_extract_s"]  # whole seconds: 0 on a fast device
    assert tokens >= UNTIMED_TOKENS and timed is not None and timed >= 0
    assert large["numbers"]["estimated_extract_s"] == large["numbers"]["en"]["estimated_extract_s"]
    assert "3,000 of 5,000 sentences through the teacher" in large["text"] and "rate measured here" in large["text"]
    tokens, small = plan(make_sentences(100))
    assert tokens < UNTIMED_TOKENS and small["numbers"]["en"]["estimated_extract_s"] is None
    assert small["numbers"]["estimated_extract_s"] == 0
    assert f"100 of 5,000 sentences through the teacher ({tokens:,} padded tokens, too few to time)" in small["text"]


def _rare_word_corpus(seed: int):
    """300 sentences of four common words plus one or two of 40 rare ones: (sentences, words, counts, index,
    splitter), as the extract stage's sentence choice reads them."""
    from swembed.runtime.tokenizer import TokenizationRules, word_splitter

    rng = np.random.default_rng(seed)
    common, rare = ["the", "a", "cat", "dog"], [f"word{i}" for i in range(40)]
    sentences = [" ".join([*rng.choice(common, 4), *rng.choice(rare, 1 + i % 2)]) for i in range(300)]
    words = sorted({w for s in sentences for w in s.split()})
    counts = [sum(s.split().count(w) for s in sentences) for w in words]
    return sentences, words, counts, {w: i for i, w in enumerate(words)}, word_splitter(TokenizationRules(), None)


def test_cover_encodes_the_quota_sentences_and_credits_every_word_in_them():
    """``sentences = "cover"``: the sentences of the quota's choice, in corpus order, with no credits (every word
    of a chosen sentence counts, as in ``all``), so a frequent word gets more than its quota of contexts."""
    from swembed.pipeline.config import ExtractConfig
    from swembed.pipeline.extract import select_sentences

    sentences, words, counts, index, splitter = _rare_word_corpus(seed=1)
    quota, credits, _ = select_sentences(ExtractConfig(sentences="quota", sentences_per_word=3), sentences, index,
                                         counts, splitter, seed=0)
    cover, none, _ = select_sentences(ExtractConfig(sentences="cover", sentences_per_word=3), sentences, index,
                                      counts, splitter, seed=0)
    assert none is None and credits is not None
    assert cover.tolist() == sorted(quota.tolist()) and len(cover) < len(sentences)
    chosen = [sentences[i] for i in cover]
    assert all(sum(w in s.split() for s in chosen) >= min(3, c) for w, c in zip(words, counts))
    assert sum("the" in s.split() for s in chosen) > 3  # credited everywhere, not only up to the quota


def test_a_context_window_reads_around_the_words_a_sentence_was_chosen_for_and_leaves_the_fill_whole():
    """``[extract] window``: each sentence the quota chose is read from ``window`` words before the first word it
    was chosen for to as many after the last (the whole sentence when that reaches both ends); the random fill and
    a build without the setting read whole sentences."""
    from swembed.pipeline.config import ExtractConfig
    from swembed.pipeline.extract import select_sentences

    rng = np.random.default_rng(3)
    common, rare = ["the", "a", "cat", "dog", "sat", "on", "mat"], [f"rare{i}" for i in range(30)]
    sentences = [" ".join([*rng.choice(common, 6), rare[i], *rng.choice(common, 6)]) for i in range(30)]
    sentences += [" ".join(rng.choice(common, 4)) for _ in range(40)]  # fill: short sentences of common words
    words = sorted({w for s in sentences for w in s.split()})
    counts = [sum(s.split().count(w) for s in sentences) for w in words]
    index = {w: i for i, w in enumerate(words)}
    from swembed.runtime.tokenizer import TokenizationRules, word_splitter

    splitter = word_splitter(TokenizationRules(), None)

    def select(window: int | None):
        config = ExtractConfig(sentences="cover", sentences_per_word=1, max_sentences=45, window=window)
        return select_sentences(config, sentences, index, counts, splitter, seed=0)

    rows, _, windows = select(2)
    assert rows.tolist() == select(None).rows.tolist() and select(None).windows == {}
    chosen = [r for r in rows if r < 30]
    assert len(chosen) == 30 and set(windows) == set(chosen)  # every rare word's sentence, no fill row
    for row in chosen:
        text, words_of = windows[row], sentences[row].split()
        assert text in sentences[row] and f"rare{row}" in text.split()
        assert " ".join(words_of[4:9]) in text  # rare{row} is word 6, two words either side
    # a common word is credited to the first sentences that hold it, later ones to their rare word alone
    assert sum(windows[r].split() == sentences[r].split()[4:9] for r in chosen) >= 20
    assert all(text == sentences[r] for r, text in select(20).windows.items())


def test_cover_with_a_budget_keeps_its_rarest_first_sentences_or_fills_at_random():
    """``cover`` with ``max_sentences``: a budget under the cover keeps the sentences the quota visits first (the
    rarest words' contexts); a budget over it adds a seeded random sample of the other sentences."""
    from swembed.pipeline.config import ExtractConfig
    from swembed.pipeline.extract import choose_sentences, select_sentences

    sentences, _, counts, index, splitter = _rare_word_corpus(seed=2)
    order, _ = choose_sentences(sentences, index, counts, 3, splitter, seed=0)

    def cover(budget: int | None, seed: int = 0, max_words: int | None = None, fill_from=None) -> list[int]:
        config = ExtractConfig(sentences="cover", sentences_per_word=3, max_sentences=budget, fill_max_words=max_words)
        return select_sentences(config, sentences, index, counts, splitter, seed, fill_from)[0].tolist()

    assert cover(10) == sorted(order[:10].tolist())
    filled = cover(len(order) + 50)
    assert len(filled) == len(set(filled)) == len(order) + 50 and set(order.tolist()) <= set(filled)
    assert filled == cover(len(order) + 50) != cover(len(order) + 50, seed=1)
    assert cover(10_000) == list(range(len(sentences)))
    # fill_max_words: the fill takes only sentences that short (here those of five words, not six)
    short = set(cover(len(order) + 50, max_words=5)) - set(order.tolist())
    assert len(short) == 50 and all(len(sentences[i].split()) == 5 for i in short)
    assert cover(10_000, max_words=5) == sorted({*order.tolist(), *(i for i, s in enumerate(sentences)
                                                                   if len(s.split()) == 5)})
    # fill_from (fill_sources' rows): the fill takes only those rows, and all of them when the budget allows
    rows = np.arange(0, len(sentences), 2)
    from_rows = set(cover(len(order) + 20, fill_from=rows)) - set(order.tolist())
    assert len(from_rows) == 20 and from_rows <= set(rows.tolist())
    assert cover(10_000, fill_from=rows) == sorted({*order.tolist(), *rows.tolist()})


@pytest.mark.teacher
def test_rerun_reuses_cached_stages_and_overwrites_only_when_asked(reference_build, tmp_path):
    corpus, out, _ = reference_build
    before = (out / "embeddings.npy").stat().st_mtime_ns
    args = small_build_args(corpus, out) + ["--work-dir", str(out.parent / "work")]
    refused = run_cli(args, same_process=True)
    assert refused.returncode == 2 and "already exists; pass --overwrite" in refused.stderr
    assert (out / "embeddings.npy").stat().st_mtime_ns == before  # nothing written
    result = run_cli(args + ["--overwrite"], same_process=True)
    assert result.returncode == 0, result.stderr
    stages = json.loads((out / "config.json").read_text())["build"]["stages"]
    assert all(stages[s]["cached"] for s in ("corpus", "vocab", "extract", "pca", "distill"))
    plan = json.loads((out / "config.json").read_text())["build"]["plan"]
    assert plan["en"]["extract"] == "cached" and plan["estimated_extract_s"] == 0  # no selection, no probe
    assert "en: extract cached" in result.stderr


@pytest.mark.teacher
def test_a_new_seed_reuses_an_extract_of_every_sentence_but_not_a_quota(reference_build, tmp_path):
    """The seed cannot change an extract of every sentence, so a seed study re-runs only PCA and distillation;
    the quota's choice depends on the seed, so its extract is not shared."""
    import shutil

    corpus, _, _ = reference_build
    work = tmp_path / "work"
    shutil.copytree(corpus.parent / "work", work)

    def stages(out, seed, *flags):
        args = small_build_args(corpus, tmp_path / out) + ["--work-dir", str(work), "--seed", seed, *flags]
        result = run_cli(args, same_process=True)
        assert result.returncode == 0, result.stderr
        return json.loads((tmp_path / out / "config.json").read_text())["build"]["stages"]

    every = stages("every", "1", "--no-distill")
    assert every["extract"]["cached"] and not every["pca"]["cached"]
    quota = ["--sentences", "quota", "--no-distill"]
    assert not stages("quota0", "0", *quota)["extract"]["cached"]
    assert stages("quota0-again", "0", *quota)["extract"]["cached"]
    assert not stages("quota1", "1", *quota)["extract"]["cached"]


@pytest.mark.teacher
def test_bad_input_fails_clearly_and_leaves_nothing(tmp_path, tiny_corpus):
    """More in test_bad_input.py (a missing or empty corpus, an unknown teacher, --dim 0, ...)."""
    out = tmp_path / "model"
    broken = tmp_path / "broken.txt.gz"
    broken.write_bytes(b"this is not gzip")
    few = tmp_path / "few.txt"
    few.write_text("The cat sat on the mat.\nA dog ran far away.\n")
    cases = [
        (["--corpus", str(broken)], "cannot read corpus file"),
        (["--corpus", str(few)], "needs at least"),
        (["--corpus", str(tiny_corpus), "--dim", "384"], "too large"),
    ]
    for extra, message in cases:
        args = small_build_args(tiny_corpus, out) + ["--work-dir", str(tmp_path / "w")] + extra
        result = run_cli(args, same_process=True)
        assert result.returncode == 2, (extra, result.stderr)
        assert message in result.stderr, (extra, result.stderr)
        assert not out.exists()


@pytest.mark.teacher
def test_cased_recipe_keeps_capitalised_words_and_their_contexts(tmp_path):
    """One rule set: a case-sensitive recipe gives cased vocabulary words that are credited in extraction (not
    encoded alone) and a model that reads case."""
    from conftest import make_sentences

    corpus = tmp_path / "corpus.txt"
    cities = ["Paris", "London", "Berlin", "Madrid"]
    lines = [f"{s[:-1]} in {cities[i % 4]}." for i, s in enumerate(make_sentences(400))]
    corpus.write_text("\n".join(lines) + "\n")
    recipe = tmp_path / "cased.toml"
    recipe.write_text(f"""
teacher = "minilm"
out = "{tmp_path / 'model'}"
[corpus]
sources = ["{corpus}"]
[tokenization]
lowercase = false
[vocab]
teacher_words = false
[pca]
dim = 32
sentences = 300
[distill]
max_steps = 40
eval_every = 20
""")
    result = run_cli(["build", "--recipe", str(recipe), "--batch-tokens", "512", "--quiet"], same_process=True)
    assert result.returncode == 0, result.stderr
    model = swembed.load(tmp_path / "model")
    assert model.config["tokenization"]["lowercase"] is False
    contexts = dict(zip(model.words, np.load(tmp_path / "model" / "word_contexts.npy")))
    assert all(contexts[c] == 100 for c in cities)  # every sentence naming the city credited it
    assert "paris" not in contexts and "The" in contexts
    assert not np.allclose(model.encode("Paris"), model.encode("paris"))


def test_a_recipe_starts_from_its_base_and_replaces_only_the_keys_it_sets(tmp_path):
    from dataclasses import asdict
    from pathlib import Path

    from swembed.pipeline.config import load_recipe

    (tmp_path / "base.toml").write_text('teacher = "minilm"\nout = "a"\n[pca]\ndim = 32\n'
                                        '[distill]\ntau = 0.1\nlr = 0.5\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "child.toml").write_text('base = "../base.toml"\nout = "b"\n[distill]\ntau = 0.2\n')
    child = load_recipe(tmp_path / "sub" / "child.toml")
    settings = (child.teacher, child.out, child.pca.dim, child.distill.tau, child.distill.lr)
    assert settings == ("minilm", "b", 32, 0.2, 0.5)
    root = Path(__file__).resolve().parents[1]
    menu = {path.stem for path in (root / "pipelines").glob("*.toml")}
    # `swembed shrink --recipe` recipes name a source table (tests/test_shrink.py loads them)
    shrink_recipes = {*root.glob("pipelines/edge-*.toml"), *root.glob("lab/pipelines/edge-*.toml")}
    configs = {path.stem: load_recipe(path) for folder in ("pipelines", "lab/pipelines")
               for path in (root / folder).glob("*.toml") if path not in shrink_recipes}
    for config in configs.values():
        config.validate()  # every recipe, the menu's and the lab's, loads and is consistent
    recipes = {name: asdict(config) for name, config in configs.items()}
    assert len(recipes) >= 14 and {"default", "minilm-256-shared", "mpnet-me5-256", "me5-multi"} <= menu
    assert configs["mpnet-gemma-256"].coteacher.pairs() == [("me5-small", 0.33), ("embeddinggemma", 0.33)]
    plain, co = recipes["mpnet-256-all"], recipes["mpnet-me5-256"]
    assert {k for k in plain if plain[k] != co[k]} == {"out", "coteacher"}  # its [distill] co_teacher
    assert {k for k in plain["coteacher"] if plain["coteacher"][k] != co["coteacher"][k]} == {"teachers"}


def test_every_build_flag_is_applied_or_rejected_on_single_and_multi_language_builds(tmp_path):
    from swembed.cli import BUILD_FLAGS, _parser, build_config
    from swembed.pipeline.config import BuildError

    values = {int: "7", float: "2.5"}
    for langs in ([], ["--langs", "en,zh", "--corpus", "en=a.txt", "zh=b.txt"]):
        for flag, dest, options in BUILD_FLAGS:
            if "action" in options:
                extra = [flag]
            elif "choices" in options:
                extra = [flag, options["choices"][-1]]
            elif options.get("nargs") == "+":
                extra = [flag, str(tmp_path / "x.tsv")]
            else:
                extra = [flag, values.get(options.get("type"), "v")]
            args = _parser().parse_args(["build", *langs, *extra])
            try:
                config = build_config(args)  # validated
            except BuildError as exc:  # rejected: one line naming the flag
                assert "\n" not in str(exc) and flag in str(exc), (flag, langs, str(exc))
                continue
            assert flag != "--parallel" or langs, flag  # pairs need two languages
            section, _, name = dest.rpartition(".")
            holder = getattr(config, section) if section else config
            expected = getattr(args, dest.replace(".", "__"))
            assert getattr(holder, name) == expected, (flag, langs)


def test_loss_weights_and_script_variants_are_checked_before_any_work(tmp_path):
    from swembed.pipeline.config import BuildConfig, BuildError, apply_settings

    settings = {"langs": ["en", "zh"], "corpora": {"en": ["a.txt"], "zh": ["b.txt"]}}
    apply_settings(BuildConfig(), settings, "r.toml").validate()  # zh reads traditional script by default
    for extra, message in (({"distill": {"contrastive_weight": -1.0}},
                            "r.toml: [distill] contrastive_weight must be at least 0, got -1.0"),
                           ({"distill": {"random_batch_weight": -1.0}},
                            "r.toml: [distill] random_batch_weight must be at least 0, got -1.0"),
                           ({"distill": {"random_batch_weight": 1.0}}, "random_batch_weight needs cell_size"),
                           ({"extract": {"window": 5}}, '[extract] window is for the sentences a quota chooses'),
                           ({"extract": {"sentences": "cover", "window": 5}, "distill": {"sources": ["a.txt"]}},
                            "[extract] window reads parts of sentences, which [distill] sources cannot trace"),
                           ({"extract": {"sentences": "quota", "window": 5}, "pca": {"sources": ["a.txt"]}},
                            "[extract] window reads parts of sentences, which [pca] sources cannot trace"),
                           ({"extract": {"window": 0}},
                            "r.toml: [extract] window must be at least 1 (leave it out for whole sentences), got 0"),
                           ({"distill": {"shrinkage": -1.0}}, "r.toml: [distill] shrinkage must be at least 0, got"),
                           ({"shrinkage": {"k": -1.0}}, "r.toml: [shrinkage] k must be at least 0, got -1.0"),
                           ({"distill": {"alone_shrinkage": -1.0}}, "[distill] alone_shrinkage must be at least 0"),
                           ({"distill": {"gram_buckets": -8}}, "r.toml: [distill] gram_buckets must be at least 0"),
                           ({"distill": {"co_teacher": "me5-small", "co_teacher_weight": 1.0}},
                            "[coteacher] weights must be above 0 and sum to below 1"),
                           ({"distill": {"co_teacher": ["me5-small", "mpnet"], "co_teacher_weight": [0.6, 0.5]}},
                            "[coteacher] weights must be above 0 and sum to below 1"),
                           ({"distill": {"co_teacher": ["me5-small", "mpnet"], "co_teacher_weight": 0.3}},
                            "one weight per co-teacher: 2 names, 1 weights"),
                           ({"vocab": {"word_lists": ["w.txt"]}}, "is for one-language builds"),
                           ({"retrieval": {"files": ["p.tsv"]}}, "[retrieval] files are for one-language builds"),
                           ({"distill": {"lr_decay": "step"}},
                            "[distill] lr_decay must be one of none, linear, cosine, got 'step'"),
                           ({"retrieval": {"loss": "mse"}},
                            "[retrieval] loss must be one of kd, contrastive, got 'mse'"),
                           ({"retrieval": {"weight": -1.0}}, "r.toml: [retrieval] weight must be at least 0"),
                           ({"retrieval": {"batch_size": 1}}, "r.toml: [retrieval] batch_size must be at least 2"),
                           ({"retrieval": {"tau": 0.0}}, "r.toml: [retrieval] tau must be above 0 and at most 10"),
                           ({"retrieval": {"directions": "passage"}},
                            "[retrieval] directions must be one of both, query, got 'passage'"),
                           ({"paragraphs": {"files": ["d.txt"]}}, "[paragraphs] files are for one-language builds"),
                           ({"extract": {"sentences": "some"}},
                            "[extract] sentences must be one of all, quota, cover, got 'some'"),
                           ({"script_variants": {"zh": "s2hk"}}, "script_variants: zh = 's2hk' is not one of")):
        with pytest.raises(BuildError, match=re.escape(message)):
            apply_settings(BuildConfig(), {**settings, **extra}, "r.toml").validate()
    pairs = {"files": ["p.tsv"], "cell_size": 512}
    with pytest.raises(BuildError, match=re.escape('[retrieval] cell_size is for loss = "contrastive"')):
        apply_settings(BuildConfig(), {"retrieval": pairs}, "r.toml").validate()
    apply_settings(BuildConfig(), {"retrieval": {**pairs, "loss": "contrastive"}}, "r.toml").validate()
    with pytest.raises(BuildError, match=re.escape('[retrieval] windows is for loss = "contrastive"')):
        apply_settings(BuildConfig(), {"retrieval": {"files": ["p.tsv"], "windows": 8}}, "r.toml").validate()
    with pytest.raises(BuildError, match=re.escape('[retrieval] directions is for loss = "contrastive"')):
        apply_settings(BuildConfig(), {"retrieval": {"files": ["p.tsv"], "directions": "query"}}, "r.toml").validate()
    with pytest.raises(BuildError, match=re.escape('[retrieval] mask_siblings is for loss = "contrastive"')):
        apply_settings(BuildConfig(), {"retrieval": {"files": ["p.tsv"], "mask_siblings": True}}, "r.toml").validate()
    for hard in ({"hard_negatives": 8}, {"hard_negatives": 8, "loss": "contrastive", "windows": 8}):
        with pytest.raises(BuildError, match=re.escape('[retrieval] hard_negatives is for loss = "contrastive" on '
                                                       'whole passages')):
            apply_settings(BuildConfig(), {"retrieval": {"files": ["p.tsv"], **hard}}, "r.toml").validate()
    apply_settings(BuildConfig(), {"retrieval": {**pairs, "loss": "contrastive", "directions": "query", "tau": 0.02,
                                                 "mask_siblings": True}}, "r.toml").validate()
    with pytest.raises(BuildError, match=re.escape("r.toml: [retrieval] windows must be at least 2")):
        apply_settings(BuildConfig(), {"retrieval": {"files": ["p.tsv"], "windows": 1}}, "r.toml").validate()
    apply_settings(BuildConfig(), {"extract": {"sentences": "cover", "window": 5}}, "r.toml").validate()
    for section, _, _ in BuildConfig().pair_sections():  # each file-reading section refuses an empty path alike
        with pytest.raises(BuildError, match=re.escape(f"[{section}] files: an empty path would read the current")):
            apply_settings(BuildConfig(), {section: {"files": ["p.tsv", " "]}}, "r.toml").validate()


@pytest.mark.parametrize("command,hidden,extra", [  # build without torch: test_bad_input.py
    (["dedup", "in.txt", "--model", "m", "--out", "o", "--search", "ann"], "faiss", "dedup"),
    (["eval", "m", "--data", "."], "scipy", "eval"),
])
def test_missing_extras_give_one_line_naming_the_extra(tmp_path, command, hidden, extra):
    code = (f"import sys; sys.modules[{hidden!r}] = None\n"
            f"from swembed.cli import main; sys.exit(main({command!r}))")
    (tmp_path / "in.txt").write_text("a line\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"pip install 'swembed[{extra}]'" in result.stderr and hidden in result.stderr


needs_cuda = pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no CUDA device here")


@needs_cuda
def test_device_monitor_tells_a_busy_gpu_from_an_idle_one():
    """Each phase lasts until the monitor has taken 60 readings in it, not a number of seconds: a loaded CPU that
    samples late still gives each phase its readings, and NVML's reading (which trails by up to a second) is the
    last phase's in at most a third of them."""
    import time

    import torch

    from swembed.pipeline.plan import DeviceMonitor

    def readings(monitor: DeviceMonitor) -> int:
        with monitor._lock:
            return len(monitor._samples)

    with DeviceMonitor(torch.device("cuda"), every=0.05) as monitor:
        x = torch.randn(4096, 4096, device="cuda")
        while readings(monitor) < 60:
            for _ in range(20):  # queued kernels: the GPU stays busy while this thread waits for a core
                x = torch.tanh(x @ x)
            torch.cuda.synchronize()
        monitor.phase("busy")
        while readings(monitor) < 60:
            time.sleep(0.05)
        monitor.phase("idle")
    assert not monitor._thread.is_alive()
    report = monitor.report()
    assert report["type"] == "cuda" and report["peak_allocated_mb"] > 0
    assert report["utilisation_pct"]["busy"] > 50 > report["utilisation_pct"]["idle"]


@needs_cuda
@pytest.mark.teacher
def test_a_cuda_build_trains_on_the_gpu_and_reports_its_utilisation(tmp_path):
    from conftest import make_sentences

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(make_sentences(400)) + "\n")
    out = tmp_path / "model"
    result = run_cli(small_build_args(corpus, out) + ["--device", "cuda", "--work-dir", str(tmp_path / "work")])
    assert result.returncode == 0, result.stderr
    config = json.loads((out / "config.json").read_text())
    device = config["build"]["device"]
    assert "plan (cuda, teacher minilm" in result.stderr and device["type"] == "cuda"
    assert device["utilisation_pct"] and all(0 <= pct <= 100 for pct in device["utilisation_pct"].values())
    assert "utilisation (time a kernel ran)" in result.stdout
    assert config["build"]["stages"]["distill"]["stats"]["device"].startswith("cuda")
    assert swembed.load(out).encode(["the small cat sees the dog"]).shape == (1, 32)
