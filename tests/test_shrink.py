"""`swembed shrink`: kept words keep their rows, dropped words back off through pieces and grams, int4 and codebook
storage round-trip through the runtime, and the folder shrinks."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from swembed import load
from swembed.pipeline.shrink_table import ShrinkConfig, folder_bytes, shrink
from swembed.runtime.storage import quantize_int4, unpack_int4
from swembed.runtime.tokenizer import char_gram_buckets
from tests.conftest import run_cli

# Words in frequency order (their sentence counts below), then the teacher's pieces.
WORDS = ["the", "cat", "sat", "on", "mat", "good", "dog", "a", "goodness", "catnap", "dogs", "mats"]
CONTEXTS = [90, 80, 70, 60, 50, 40, 30, 20, 3, 2, 1, 1]
PIECES = ["good", "cat", "dog", "mat", "##ness", "##nap", "##s", "zebra"]
GRAM_BUCKETS = 64


def write_piece_model(folder: Path, dim: int = 16) -> Path:
    """A built-like folder: word rows, piece rows (a WordPiece tokenizer splits goodness into good + ##ness), gram
    rows and word_contexts.npy, with the pieces back-off."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from swembed.runtime.folder import write_model_folder

    vocab = {token: i for i, token in enumerate(["[UNK]", "the", "sat", "on", "a", *PIECES])}
    sub = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    sub.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    rows = len(WORDS) + len(PIECES) + GRAM_BUCKETS
    table = np.random.default_rng(0).normal(size=(rows, dim)).astype(np.float32)
    pieces = [len(WORDS), len(WORDS) + len(PIECES)]
    config = {"tokenization": {"oov_backoff": "pieces", "oov_weight": 2.0}, "pieces": {"rows": pieces},
              "grams": {"rows": [pieces[1], rows]}}
    labels = WORDS + PIECES + [f"<gram {i}>" for i in range(GRAM_BUCKETS)]
    return write_model_folder(folder, table, labels, config, sub.to_str(),
                              {"word_contexts": np.array(CONTEXTS, dtype=np.int64)})


@pytest.fixture
def piece_model(tmp_path: Path) -> Path:
    return write_piece_model(tmp_path / "source")


def test_kept_words_keep_their_rows_and_dropped_words_back_off(piece_model: Path, tmp_path: Path):
    out = tmp_path / "small"
    kept = shrink(piece_model, out, ShrinkConfig(words=8, gram_buckets=4096))
    source, small = load(piece_model), load(out)
    assert small.words == WORDS[:8] and kept["words"] == 8
    np.testing.assert_array_equal(small.encode(WORDS[:8]), source.encode(WORDS[:8]))
    assert "goodness" not in small.tokenizer.vocab
    rows, weights = small.tokenizer.rows("goodness")
    pieces, grams = small.config["pieces"]["rows"], small.config["grams"]["rows"]
    assert [small.labels[r] for r in rows if pieces[0] <= r < pieces[1]] == ["good", "##ness"]
    assert sum(grams[0] <= r < grams[1] for r in rows) == len(char_gram_buckets("goodness", 4096))
    assert sum(weights) == pytest.approx(2.0)
    # The gram rows were fitted to every source word, dropped ones included: their mean recalls the dropped word.
    table = small.float_rows()
    recalled = table[[grams[0] + b for b in char_gram_buckets("goodness", 4096)]].mean(axis=0)
    original = source.float_rows()[WORDS.index("goodness")]
    assert recalled @ original / np.linalg.norm(recalled) / np.linalg.norm(original) > 0.9


def test_piece_rows_kept_by_use_and_dim_by_projection(piece_model: Path, tmp_path: Path):
    out = tmp_path / "small"
    shrink(piece_model, out, ShrinkConfig(pieces=6, dim=5, gram_buckets=0))
    small = load(out)
    assert small.dim == 5 and "grams" not in small.config and small.tokenizer.gram_rows is None
    pieces = small.config["pieces"]["rows"]
    # "zebra" is in no word's back-off and "##nap" only in catnap's, among the least used: both go.
    assert sorted(small.labels[pieces[0]: pieces[1]]) == sorted(["good", "cat", "dog", "mat", "##ness", "##s"])
    source = load(piece_model)
    # A projection onto orthonormal directions: word rows shrink in norm, never grow.
    assert np.all(np.linalg.norm(small.float_rows()[:len(WORDS)], axis=1)
                  <= np.linalg.norm(source.float_rows()[:len(WORDS)], axis=1) + 1e-5)


@pytest.mark.parametrize("dim", [7, 8])
def test_int4_round_trip(dim: int):
    table = np.random.default_rng(1).normal(size=(50, dim)).astype(np.float32)
    table[3] = 0
    packed, scales = quantize_int4(table)
    assert packed.dtype == np.uint8 and packed.shape == (50, (dim + 1) // 2)
    values = unpack_int4(packed, dim)
    assert values.min() >= -7 and values.max() <= 7
    assert np.all(np.abs(values * scales[:, None] - table) <= scales[:, None] / 2 + 1e-6)


def test_int4_and_codebook_folders_load_and_encode(piece_model: Path, tmp_path: Path):
    source = load(piece_model)
    texts = ["the cat sat on the mat", "goodness dogs", "zebra"]
    shrink(piece_model, tmp_path / "int4", ShrinkConfig(storage="int4"))
    int4 = load(tmp_path / "int4")
    assert int4.config["storage"] == {"kind": "int4"} and int4.table.dtype == np.int8
    error = np.abs(int4.float_rows() - source.float_rows()).max(axis=1)
    assert np.all(error <= np.abs(source.float_rows()).max(axis=1) / 14 + 1e-6)
    cosines = (int4.encode(texts) * source.encode(texts)).sum(axis=1)
    assert cosines.min() > 0.98

    rows = source.rows
    shrink(piece_model, tmp_path / "book", ShrinkConfig(storage="codebook", centroids=rows))
    book = load(tmp_path / "book")
    assert book.config["storage"]["kind"] == "codebook" and book.rows == rows and len(book.table) == rows
    # As many shared rows as rows: every row is its own centroid (to float16 precision).
    np.testing.assert_allclose(book.float_rows(), source.float_rows(), atol=2e-2)
    small = shrink(piece_model, tmp_path / "book8", ShrinkConfig(storage="codebook", centroids=8))
    book8 = load(tmp_path / "book8")
    assert len(book8.table) == 8 and small["rows"] == rows
    expected = book8.float_rows()[book8.tokenizer.ids("the cat")].mean(axis=0)
    np.testing.assert_allclose(book8.encode("the cat")[0], expected / np.linalg.norm(expected), atol=1e-6)


def test_sizes_fall_with_each_lever(piece_model: Path, tmp_path: Path):
    sizes = {}
    for name, config in {"float32": ShrinkConfig(), "int8": ShrinkConfig(storage="int8"),
                         "int4": ShrinkConfig(storage="int4"),
                         "cut": ShrinkConfig(words=6, pieces=4, gram_buckets=16, storage="int4")}.items():
        shrink(piece_model, tmp_path / name, config)
        sizes[name] = (tmp_path / name / "embeddings.npy").stat().st_size
    assert sizes["float32"] > sizes["int8"] > sizes["int4"] > sizes["cut"]
    assert folder_bytes(tmp_path / "cut") < folder_bytes(tmp_path / "float32")


def test_cli_recipe_flags_and_bad_input(piece_model: Path, tmp_path: Path):
    recipe = tmp_path / "edge.toml"
    recipe.write_text(f'source = "{piece_model}"\nout = "{tmp_path / "edge"}"\nwords = 6\nstorage = "int8"\n')
    done = run_cli(["shrink", "--recipe", recipe, "--dim", "4"], same_process=True)
    assert done.returncode == 0, done.stderr
    config = json.loads((tmp_path / "edge" / "config.json").read_text())
    assert config["shrink"]["kept"]["words"] == 6 and config["dim"] == 4 and config["dtype"] == "int8"
    again = run_cli(["shrink", "--recipe", recipe], same_process=True)
    assert again.returncode == 2 and "already exists" in again.stderr
    recipe.write_text('source = "x"\nwordz = 6\n')
    bad = run_cli(["shrink", "--recipe", recipe, "--out", tmp_path / "x"], same_process=True)
    assert bad.returncode == 2 and "wordz" in bad.stderr and str(recipe) in bad.stderr
    for flag, value, message in (("--gram-buckets", "-1", "shrink gram_buckets must be at least 0 (leave it out for "
                                  "the source's gram rows; 0 drops them), got -1"),
                                 ("--oov-weight", "nan", "shrink oov_weight must be a finite number between 1e-06 "
                                  "and 1e+06 (leave it out for the source's weight), got nan")):
        bad = run_cli(["shrink", piece_model, "--out", tmp_path / "x", flag, value], same_process=True)
        assert bad.returncode == 2 and bad.stderr.strip().endswith(f"error: {message}"), bad.stderr
        assert not (tmp_path / "x").exists()


def test_residual_gram_target_makes_the_backoff_recall_dropped_words(piece_model: Path, tmp_path: Path):
    source = load(piece_model)
    dropped = ["goodness", "catnap", "dogs", "mats"]
    recall = {}
    for target in ("word", "residual"):
        shrink(piece_model, tmp_path / target, ShrinkConfig(words=8, gram_buckets=4096, gram_target=target,
                                                            oov_weight=1.0))
        small = load(tmp_path / target)
        assert small.tokenizer.rules.oov_weight == 1.0
        recall[target] = (small.encode(dropped) * source.encode(dropped)).sum(axis=1)
    assert recall["residual"].min() > 0.95 and recall["residual"].mean() > recall["word"].mean()


def test_broken_int4_and_codebook_folders_are_refused_in_one_line(piece_model: Path, tmp_path: Path):
    from swembed.runtime.folder import ModelFolderError

    shrink(piece_model, tmp_path / "int4", ShrinkConfig(storage="int4"))
    config_path = tmp_path / "int4" / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "dim": config["dim"] + 4}))
    with pytest.raises(ModelFolderError, match="int4 table"):
        load(tmp_path / "int4")
    shrink(piece_model, tmp_path / "book", ShrinkConfig(storage="codebook", centroids=8))
    np.save(tmp_path / "book" / "codes.npy", np.full(load(tmp_path / "book").rows, 8, dtype=np.uint16))
    with pytest.raises(ModelFolderError, match="codes.npy"):
        load(tmp_path / "book")
    (tmp_path / "book" / "codes.npy").unlink()
    with pytest.raises(ModelFolderError, match="needs codes.npy"):
        load(tmp_path / "book")


def test_the_committed_edge_recipes_load():
    from swembed.pipeline.shrink_table import load_shrink_recipe

    root = Path(__file__).resolve().parents[1]
    for name in ("edge-16mb", "edge-4mb"):
        recipe = load_shrink_recipe(root / "pipelines" / f"{name}.toml")
        assert recipe.source.endswith("minilm-256-shared") and recipe.out.endswith(name)
        search = load_shrink_recipe(root / "pipelines" / f"{name}-sci.toml")  # the same from the search table
        assert search.source.endswith("minilm-256-sci") and search.out.endswith(f"{name}-sci")
        assert search.config == recipe.config
