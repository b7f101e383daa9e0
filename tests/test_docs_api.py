"""docs/api.md's examples run as written (a build with the real MiniLM on a 400-line corpus, save and load, the
recipe object, refusals of bad settings), in a scratch folder."""
from __future__ import annotations

import doctest
from pathlib import Path

import pytest

pytestmark = pytest.mark.teacher
DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_the_api_page_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = doctest.testfile(str(DOC), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted >= 20 and result.failed == 0, result
    assert (tmp_path / "my-table" / "embeddings.npy").is_file()  # the page's save went where it says
