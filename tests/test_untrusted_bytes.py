"""Bytes a work folder or a model folder holds are not trusted: a planted pickle is never run, a truncated or
corrupt checkpoint or cached stage is recomputed (one log line) instead of failing on every rerun, and every
export format refuses a table with NaN even when its size and modification time are unchanged."""
import logging
import os

import numpy as np
import pytest
import torch
from conftest import write_tiny_model
from test_train import SETTINGS, problem

from swembed.integrations.formats import export
from swembed.pipeline.stage import run_stage
from swembed.pipeline.train import train
from swembed.runtime.folder import ModelFolderError


def test_a_planted_pickle_is_never_run_and_the_training_restarts(tmp_path, caplog):
    device = torch.device("cpu")
    table, objectives = problem(device)
    (tmp_path / "a").mkdir()
    reference, _ = train(table, objectives, SETTINGS, device, tmp_path / "a", 1e9)
    flag = tmp_path / "pwned"

    class Planted:
        def __reduce__(self):
            return exec, (f"open({str(flag)!r}, 'w').write('ran')",)

    work = tmp_path / "b"
    work.mkdir()
    torch.save({"weight": Planted()}, work / "train_state.pt")
    with caplog.at_level(logging.WARNING):
        learned, history = train(table, objectives, SETTINGS, device, work, 1e9)
    assert not flag.exists(), "the pickle ran"
    assert "train_state.pt is unreadable" in caplog.text and "recomputing it" in caplog.text
    np.testing.assert_array_equal(learned, reference)


def test_a_truncated_training_checkpoint_is_recomputed(tmp_path, caplog):
    device = torch.device("cpu")
    table, objectives = problem(device)
    (tmp_path / "a").mkdir()
    reference, _ = train(table, objectives, SETTINGS, device, tmp_path / "a", 1e9)
    state = tmp_path / "a" / "train_state.pt"
    train(table, objectives, SETTINGS, device, tmp_path / "a", 0.0)  # checkpoints every round
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    for _ in range(2):  # every rerun works, not only the first
        with caplog.at_level(logging.WARNING):
            learned, history = train(table, objectives, SETTINGS, device, tmp_path / "a", 1e9)
        np.testing.assert_array_equal(learned, reference)
        assert history["rounds"][0]["step"] == SETTINGS.eval_every  # from the start: nothing resumed
        state.write_bytes(b"\x80\x02garbage")
    assert caplog.text.count("train_state.pt is unreadable") == 2


@pytest.mark.parametrize("damage", ["truncated", "manifest"])
def test_a_damaged_cached_stage_is_recomputed(tmp_path, caplog, damage):
    runs = []

    def compute(run):
        runs.append(1)
        np.save(run.out / "vectors.npy", np.arange(1000, dtype=np.float32))
        return {}

    first = run_stage("toy", tmp_path, {"a": 1}, [], compute)
    assert run_stage("toy", tmp_path, {"a": 1}, [], compute).cached and len(runs) == 1
    target = first.path / ("vectors.npy" if damage == "truncated" else "manifest.json")
    target.write_bytes(target.read_bytes()[:100])
    with caplog.at_level(logging.WARNING):
        again = run_stage("toy", tmp_path, {"a": 1}, [], compute)
    assert not again.cached and len(runs) == 2 and "is damaged" in caplog.text
    np.testing.assert_array_equal(np.load(again.path / "vectors.npy"), np.arange(1000, dtype=np.float32))
    assert run_stage("toy", tmp_path, {"a": 1}, [], compute).cached and len(runs) == 2


@pytest.mark.parametrize("fmt", ["npy", "st", "model2vec"])
def test_every_export_refuses_a_nan_table_whose_size_and_time_are_unchanged(tmp_path, fmt):
    model = write_tiny_model(tmp_path / "m")
    table_file = model / "embeddings.npy"
    stat = table_file.stat()
    table = np.load(table_file, mmap_mode="r+")
    table[3, 2] = np.nan
    table.flush()
    del table
    os.utime(table_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert table_file.stat().st_size == stat.st_size and table_file.stat().st_mtime_ns == stat.st_mtime_ns
    with pytest.raises(ModelFolderError, match="row 3 .* holds NaN or infinite values"):
        export(model, fmt, tmp_path / "out", "float32")
    assert not (tmp_path / "out").exists()
