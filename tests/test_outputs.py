"""Outputs swembed owns: `--overwrite` replaces only a folder swembed wrote (its `.swembed-output.json` lists
everything in it) that holds no input of the command; files are written atomically; no temp is left behind
after an error, Ctrl-C or SIGTERM, and one left by a killed run is swept by the next."""
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli, small_build_args, snapshot, write_tiny_model

from swembed.runtime.outputs import MARKER_FILE, atomic_directory, atomic_file, temp_name
from swembed.runtime.testpoints import POINTS_ENV, WAIT_AT_ENV

RECORDS = "the cat sat\nthe cat sat\na dog\nthe dog sat on the mat\n"
HANG_S = 300  # a guard against a hang only: each wait below ends on an event (a line, a point, an exit) long before
KILLS = 2  # the points each command is killed at


def user_folder(path: Path) -> Path:
    """A folder of a user's own files, hidden and nested ones too."""
    (path / "sub").mkdir(parents=True)
    (path / "notes.txt").write_text("my notes\n")
    (path / ".hidden").write_bytes(b"\x00secret")
    (path / "sub" / "data.csv").write_text("a,b\n1,2\n")
    return path


def leftovers(root: Path) -> list[str]:
    """Temps, old copies and partial stages anywhere under ``root``."""
    marks = (".swembed-", ".tmp", ".old-", ".partial")
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*")
                  if p.name != MARKER_FILE and any(m in p.name for m in marks))


@contextmanager
def running(args: list, **kwargs) -> Iterator[subprocess.Popen]:
    """``args`` started with stdin, stdout and stderr piped (text); killed on the way out if still running."""
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def refused(result, command: str) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"swembed {command}: error: ")
    return lines[0]


@pytest.fixture
def records(tmp_path) -> Path:
    path = tmp_path / "records.txt"
    path.write_text(RECORDS)
    return path


def commands(tmp_path: Path, model: Path, records: Path, out: Path) -> dict[str, list]:
    """Each command that writes a folder, writing ``out``."""
    other = write_tiny_model(tmp_path / "other-model") if not (tmp_path / "other-model").exists() else \
        tmp_path / "other-model"
    return {"dedup": ["dedup", records, "--model", model, "--out", out, "--quiet"],
            "dedup-spark": ["dedup", records, "--model", model, "--out", out, "--quiet", "--engine", "spark"],
            "export": ["export", model, "--out", out],
            "ensemble": ["ensemble", model, other, "--out", out],
            "build": small_build_args(records, out)}


@pytest.mark.parametrize("command", ["dedup", pytest.param("dedup-spark", marks=pytest.mark.spark), "export",
                                     "ensemble", "build"])
def test_overwrite_never_replaces_a_folder_swembed_did_not_write(tmp_path, tiny_model, records, command):
    victim = user_folder(tmp_path / "victim")
    before = snapshot(victim)
    args = commands(tmp_path, tiny_model, records, victim)[command]
    line = refused(run_cli(args + ["--overwrite"]), args[0])
    assert f"{victim} exists and --overwrite will not replace it: it has no {MARKER_FILE}" in line
    assert snapshot(victim) == before and not leftovers(tmp_path)
    # the same folder with a marker that does not list the user's files: still refused
    (victim / MARKER_FILE).write_text(json.dumps({"kind": "dedup", "files": ["notes.txt"]}))
    line = refused(run_cli(args + ["--overwrite"]), args[0])
    assert "it holds 3 entries swembed did not write (e.g. .hidden)" in line
    assert snapshot(victim) == {**before, MARKER_FILE: (victim / MARKER_FILE).read_bytes()}


@pytest.mark.parametrize("command", ["dedup", "export"])
def test_overwrite_never_replaces_the_model(tmp_path, tiny_model, records, command):
    before = snapshot(tiny_model)
    args = commands(tmp_path, tiny_model, records, tiny_model)[command]
    line = refused(run_cli(args + ["--overwrite"]), command)
    assert f"it is {tiny_model}, an input of this command" in line
    assert snapshot(tiny_model) == before and not leftovers(tmp_path)


def test_overwrite_never_replaces_a_folder_holding_an_input(tmp_path, tiny_model, records):
    out = tmp_path / "out"
    args = ["dedup", records, "--model", tiny_model, "--out", out, "--quiet"]
    assert run_cli(args).returncode == 0
    for inside in (out / "mapping.tsv", out / "kept" / "records.txt"):  # files swembed wrote, now an input
        before = snapshot(out)
        line = refused(run_cli(["dedup", inside, "--model", tiny_model, "--out", out, "--overwrite", "--quiet"]),
                       "dedup")
        assert f"it holds {inside}, an input of this command" in line
        assert snapshot(out) == before
    line = refused(run_cli(["dedup", records.name, "--model", tiny_model, "--out", tmp_path, "--overwrite"],
                           cwd=tmp_path), "dedup")  # the working folder holds the input (and much else)
    assert "it holds records.txt, an input of this command" in line
    model_inside = write_tiny_model(out / "kept" / "model")  # a model the user put inside: not listed, and an input
    line = refused(run_cli(["dedup", records, "--model", model_inside, "--out", out, "--overwrite"]), "dedup")
    assert f"it holds {model_inside}, an input of this command" in line
    assert (model_inside / "embeddings.npy").is_file() and not leftovers(tmp_path)


def test_a_folder_output_never_replaces_a_file_or_a_link(tmp_path, tiny_model, records):
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "file").write_text("a user's file\n")
    (tmp_path / "link").symlink_to(target, target_is_directory=True)
    for out, reason in ((tmp_path / "file", "it is a file, and this command writes a folder"),
                        (tmp_path / "link", "it is a symbolic link")):
        before = snapshot(tmp_path)
        line = refused(run_cli(["dedup", records, "--model", tiny_model, "--out", out, "--overwrite"]), "dedup")
        assert reason in line and snapshot(tmp_path) == before and not leftovers(tmp_path)


def test_overwrite_replaces_what_swembed_wrote(tmp_path, tiny_model, records):
    out = tmp_path / "out"
    args = ["dedup", records, "--model", tiny_model, "--out", out, "--quiet"]
    assert run_cli(args).returncode == 0
    marker = json.loads((out / MARKER_FILE).read_text())
    assert marker["kind"] == "dedup" and set(marker["files"]) == {"kept", "kept/records.txt", "mapping.tsv",
                                                                  "summary.json", "state", "state/arrays.npz",
                                                                  "state/vectors.f32"}
    (out / "mapping.tsv").write_text("edited by hand\n")  # a file swembed wrote, edited: still its own
    assert run_cli(args + ["--overwrite", "--threshold", "0.5"]).returncode == 0
    assert json.loads((out / "summary.json").read_text())["threshold"] == 0.5
    assert (out / "mapping.tsv").read_text().startswith("record\t") and not leftovers(tmp_path)
    exported = tmp_path / "exported"
    for _ in range(2):  # a model folder swembed wrote is replaced by another export
        assert run_cli(["export", tiny_model, "--out", exported, "--overwrite"]).returncode == 0
    assert json.loads((exported / MARKER_FILE).read_text())["kind"] == "model" and not leftovers(tmp_path)


def test_file_outputs_are_refused_unless_overwrite_and_never_an_input_a_folder_or_a_link(tmp_path, tiny_model,
                                                                                         records):
    vectors = tmp_path / "vectors.npy"
    vectors.write_bytes(b"an earlier result")
    assert "already exists; pass --overwrite" in refused(
        run_cli(["encode", tiny_model, "--input", records, "--output", vectors]), "encode")
    assert vectors.read_bytes() == b"an earlier result"
    assert run_cli(["encode", tiny_model, "--input", records, "--output", vectors, "--overwrite"]).returncode == 0
    assert np.load(vectors).shape == (4, 8)
    folder = user_folder(tmp_path / "folder")
    link = tmp_path / "link.npy"
    link.symlink_to(records)
    for output, reason in ((folder, "it is a folder; give a file name"), (records, "an input of this command"),
                           (link, "it is a symbolic link")):
        before = snapshot(tmp_path)
        line = refused(run_cli(["encode", tiny_model, "--input", records, "--output", output, "--overwrite"]),
                       "encode")
        assert reason in line and snapshot(tmp_path) == before
    scores = tmp_path / "scores.json"
    scores.write_text("{}")
    line = refused(run_cli(["eval", tiny_model, "--json", scores, "--data", tmp_path / "nowhere"]), "eval")
    assert line.endswith(f"{scores} already exists; pass --overwrite to replace it") and scores.read_text() == "{}"
    assert not leftovers(tmp_path)


def test_atomic_writes_leave_nothing_on_error(tmp_path):
    out, target = tmp_path / "out", tmp_path / "scores.json"
    with pytest.raises(RuntimeError), atomic_directory(out) as tmp:
        (tmp / "part").write_text("half")
        raise RuntimeError("failed mid-way")
    with pytest.raises(RuntimeError), atomic_file(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("failed mid-way")
    assert not out.exists() and not target.exists() and not leftovers(tmp_path)
    with atomic_file(target) as tmp:
        tmp.write_text('{"a": 1}')
    assert target.read_text() == '{"a": 1}' and not leftovers(tmp_path)


KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
from swembed.runtime.outputs import atomic_directory, atomic_file
writer = atomic_directory if sys.argv[2] == "folder" else atomic_file
with writer(Path(sys.argv[1])) as tmp:
    (tmp / "part.bin" if sys.argv[2] == "folder" else tmp).write_bytes(b"x" * 1000)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_dead_runs_temps_are_swept_and_a_live_ones_kept(tmp_path, tiny_model, records):
    out = tmp_path / "out"
    for kind, target in (("folder", out), ("file", out)):  # temps that a SIGKILLed writer left beside out
        subprocess.run([sys.executable, "-c", KILLED_WRITER, str(target), kind], capture_output=True)
    stale = leftovers(tmp_path)
    assert len(stale) >= 2, stale
    live = temp_name(out)  # this test's own pid: alive
    live.mkdir()
    (live / ".vectors.f16").write_bytes(b"\x00" * 1024)
    assert run_cli(["dedup", records, "--model", tiny_model, "--out", out, "--quiet"]).returncode == 0
    assert live.exists() and not any((tmp_path / name).exists() for name in stale if "/" not in name)


def test_the_sweep_removes_only_temp_folders_swembed_made(tmp_path, tiny_model, records):
    """A dead pid's folder or file that merely matches the temp pattern (no temp marker naming it, no complete
    ownership marker) is a user's, and stays."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    out = tmp_path / "out"
    lookalike = Path(str(temp_name(out)).replace(f"-{os.getpid()}-", f"-{int(dead.stdout)}-"))
    user_folder(lookalike)
    forged = Path(str(lookalike) + "x")
    forged.mkdir()
    (forged / ".swembed-temp").write_text("another name")  # a marker that does not name its folder
    lookalike_file = Path(str(temp_name(out, ".npy")).replace(f"-{os.getpid()}-", f"-{int(dead.stdout)}-"))
    lookalike_file.write_bytes(b"a user's bytes")
    before = {path: snapshot(path) for path in (lookalike, forged, lookalike_file)}
    assert run_cli(["dedup", records, "--model", tiny_model, "--out", out, "--quiet"]).returncode == 0
    assert {path: snapshot(path) for path in before} == before


SLOW_WRITER = """
import signal, sys
from pathlib import Path
from swembed.runtime.outputs import atomic_directory, atomic_file
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job inherits SIGINT ignored
target = Path(sys.argv[1])
writer = atomic_directory if sys.argv[2] == "folder" else atomic_file
with writer(target) as tmp:
    (tmp / "part.bin" if sys.argv[2] == "folder" else tmp).write_bytes(b"x" * 1000)
    print("writing", flush=True)
    sys.stdin.read()  # until the test's signal (the test never writes to it; its end closes it)
"""


@pytest.mark.parametrize("kind", ["folder", "file"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_write_removes_the_temp(tmp_path, kind, sig):
    target = tmp_path / ("out" if kind == "folder" else "out.npy")
    with running([sys.executable, "-c", SLOW_WRITER, str(target), kind]) as proc:
        assert proc.stdout.readline() == "writing\n"
        assert leftovers(tmp_path)  # the temp is there while it writes
        proc.send_signal(sig)
        proc.wait(timeout=HANG_S)
    assert proc.returncode != 0 and not target.exists() and not leftovers(tmp_path)


SLOW_IMPORT = """
import signal, sys
from swembed.runtime.outputs import terminate_raises
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job inherits SIGINT ignored
sys.path.insert(0, sys.argv[1])
with terminate_raises():
    import slow_module  # a native module's import (onnxruntime's) cannot be cut in half
    signal.pause()  # until the held signal, sent again, ends the process
"""
SLOW_MODULE = """
import signal
print("importing", flush=True)
signal.pause()  # returns once a signal's handler has run: the signal landed inside this import
print("imported", flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_an_import_waits_for_the_import_to_finish(tmp_path, sig):
    """A signal that lands while a module is being imported ends the process once the import is done: an
    exception raised inside an import left onnxruntime half initialised ("ImportError: initialization failed",
    reported as an internal error, or a C++ abort)."""
    (tmp_path / "slow_module.py").write_text(SLOW_MODULE)
    with running([sys.executable, "-c", SLOW_IMPORT, str(tmp_path)]) as proc:
        assert proc.stdout.readline() == "importing\n"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=HANG_S)
    assert out == "imported\n"  # the import ran to its end, then the signal took effect
    assert proc.returncode == (128 + signal.SIGTERM if sig == signal.SIGTERM else -signal.SIGINT), err
    assert ("KeyboardInterrupt" in err) == (sig == signal.SIGINT) and "ImportError" not in err


def stopped_at(proc: subprocess.Popen, log: Path, n: int) -> str:
    """The name of the ``n``th point the run ``proc`` reached, once it waits there (``SWEMBED_TEST_WAIT_AT``)."""
    lines: list[str] = []
    end = time.monotonic() + HANG_S
    while proc.poll() is None and time.monotonic() < end:
        lines = log.read_text(encoding="utf-8").split("\n") if log.exists() else []
        if len(lines) > n:  # n whole lines
            return lines[n - 1]
        time.sleep(0.02)
    pytest.fail(f"the run did not stop at its point {n} (exit code {proc.poll()}); it reached {lines[:-1]}")


@pytest.mark.parametrize("command", ["dedup", "export", pytest.param("build", marks=pytest.mark.teacher)])
def test_sigterm_at_a_random_point_then_a_rerun_leaves_no_temp(tmp_path, tiny_model, tiny_corpus, command):
    """SIGTERM the command at random points of its run (drawn with a seeded generator from the named points a whole
    run passes, ``swembed.runtime.testpoints``), re-run it to the end each time: no temp file anywhere."""
    out, log = tmp_path / "out", tmp_path / "points.txt"
    args = {"dedup": ["dedup", tiny_corpus, "--model", tiny_model, "--out", out, "--quiet"],
            "export": ["export", tiny_model, "--out", out, "--dtype", "int8"],
            "build": small_build_args(tiny_corpus, out)}[command]
    args = [sys.executable, "-m", "swembed.cli", *map(str, args), "--overwrite"]
    again = args + (["--force"] if command == "build" else [])  # build: redo every stage
    recording = {**os.environ, POINTS_ENV: str(log)}
    assert subprocess.run(args, capture_output=True).returncode == 0  # the output (and a teacher's caches) made once
    assert subprocess.run(again, capture_output=True, env=recording).returncode == 0
    passed = log.read_text(encoding="utf-8").splitlines()  # the points of a whole run, in order
    for n in sorted(random.Random(command).sample(range(1, len(passed) + 1), KILLS)):
        log.unlink()
        with running(again, env={**recording, WAIT_AT_ENV: str(n)}) as proc:
            assert stopped_at(proc, log, n) == passed[n - 1]
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=HANG_S)
        assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err, (passed[n - 1], err)
        rerun = subprocess.run(args, capture_output=True, text=True)
        assert rerun.returncode == 0, (passed[n - 1], rerun.stderr)
        assert not leftovers(tmp_path), (passed[n - 1], leftovers(tmp_path))
