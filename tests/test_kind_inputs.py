"""Bad query and document weights (issue 82): each test is a row of docs/what-happens-when.md (``@promise``, as in
test_bad_input.py): a table whose ``kind_weights`` (config.json) or ``query_weights.npy`` cannot be read is refused on
load and by ``swembed encode`` in one line naming the file, the folder unchanged and nothing written."""
from __future__ import annotations

import numpy as np
from conftest import TINY_WORDS
from test_bad_input import promise, promised, refused_encode, refused_load  # noqa: F401 - promised: a fixture

from swembed.runtime.folder import KIND_WEIGHTS, update_config


def with_weights(folder, weights, named=None):
    np.save(folder / "query_weights.npy", weights)
    update_config(folder, {KIND_WEIGHTS: {"query": "query_weights.npy"} if named is None else named})
    return folder


@promise("`kind_weights` in `config.json` naming another file (`{\"query\": \"../embeddings.npy\"}`), an unknown "
         "kind, not an object, or a file that is missing",
         "(issue 82) no such key: query weights did not exist",
         "refused on load and by every command naming the key, or the missing file; the folder unchanged",
         '<folder>/config.json: kind_weights must be an object of some of {"query": "query_weights.npy", '
         '"document": "document_weights.npy", "lexical": "lexical_weights.npy"}, got <value>',
         "<folder>: document_weights.npy is missing (kind_weights in config.json names it)")
def test_kind_weights_named_badly(tmp_path, tiny_model, promised):
    weights = np.ones(len(TINY_WORDS), dtype=np.float32)
    for named in ({"query": "../embeddings.npy"}, {"passage": "query_weights.npy"}, ["query"]):
        message = refused_load(with_weights(tiny_model, weights, named), promised)
        assert message.endswith(f"got {named}".replace("'", '"'))
    with_weights(tiny_model, weights, {"query": "query_weights.npy", "document": "document_weights.npy"})
    assert refused_encode(tmp_path, tiny_model, promised) == \
        f"{tiny_model}: document_weights.npy is missing (kind_weights in config.json names it)"


@promise("`query_weights.npy` with a weight of 0, NaN or above 1e6, one row short, or float64",
         "(issue 82) no such file: query weights did not exist",
         "refused on load and by every command, naming the file and the first bad row or the shape; the folder "
         "unchanged",
         "<folder>/query_weights.npy: row <n> has weight <w>, outside 1e-06 to 1e+06 (the first such row)",
         "<folder>/query_weights.npy: expected (<rows>,) float32, one weight per table row, got shape <shape> <dtype>")
def test_query_weights_out_of_range(tmp_path, tiny_model, promised):
    ones = np.ones(len(TINY_WORDS), dtype=np.float32)
    for row, value in ((7, 0.0), (0, np.nan), (3, 2e6)):
        bad = ones.copy()
        bad[row] = value
        message = refused_load(with_weights(tiny_model, bad), promised)
        assert f"row {row} has weight {np.float32(value)}" in message
    for bad in (ones[:-1], ones.astype(np.float64)):
        message = refused_encode(tmp_path, with_weights(tiny_model, bad), promised)
        assert message.endswith(f"got shape {bad.shape} {bad.dtype}")
