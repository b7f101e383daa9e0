"""The CLI's one error boundary: an error a user can cause is one line naming the input, rc 2; anything else is
one line saying it is a bug and where its traceback was written, rc 1."""
import re
from pathlib import Path

import pytest
from conftest import run_cli


def test_a_user_error_is_one_line_rc_2(tmp_path, tiny_model):
    result = run_cli(["encode", tiny_model, "--input", tmp_path / "missing.txt", "--output", tmp_path / "v.npy"])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "missing.txt" in result.stderr


def test_a_bug_is_one_line_naming_the_traceback_file_rc_1(tmp_path, tiny_model, monkeypatch):
    import swembed.runtime.textfile

    def broken(*args, **kwargs):
        return 1 / 0  # a bug inside a command, which no input explains

    monkeypatch.setattr(swembed.runtime.textfile, "encode_file", broken)
    (tmp_path / "in.txt").write_text("the cat\n")
    result = run_cli(["encode", tiny_model, "--input", tmp_path / "in.txt", "--output", tmp_path / "v.npy"],
                     same_process=True)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], result.stderr
    found = re.fullmatch(r"swembed encode: internal error \(a bug in swembed, please report it\): "
                         r"ZeroDivisionError: division by zero; traceback written to (.+)", lines[0])
    assert found, lines[0]
    written = Path(found.group(1)).read_text()
    assert written.startswith("swembed encode ") and "ZeroDivisionError" in written and "def broken" not in lines[0]
    assert "in broken" in written
    Path(found.group(1)).unlink()


SLOW_FORWARD = """
import hashlib, sys
from swembed.pipeline.extract import interruptible
from swembed.runtime.outputs import terminate_raises
with terminate_raises():  # as swembed.cli.main runs every command
    print("forward", flush=True)
    interruptible(hashlib.pbkdf2_hmac, "sha256", b"x", b"salt", 10**9)  # one C call of many minutes
"""


def test_sigterm_during_a_teacher_forward_ends_the_run_at_once():
    """Issue 58: a SIGTERM during extract took 70-160 s (the handler waited for the teacher's forward, one long C
    call). The extract loop waits for each forward interruptibly: the run ends within seconds, exit code 143."""
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-c", SLOW_FORWARD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline() == "forward\n"
    time.sleep(0.5)  # inside the C call
    start = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    finally:
        proc.kill()
    assert time.perf_counter() - start < 10 and proc.returncode == 128 + signal.SIGTERM, proc.stderr.read()


SLOW_START = """
import sys, threading, time
from swembed.pipeline.extract import interruptible
from swembed.runtime.outputs import terminate_raises
from swembed.teachers import load_teacher

teacher = load_teacher("minilm", device="cpu", precision="float32", runtime="onnx")
inputs = teacher.prepare(["a sentence of some length about nothing in particular " * 20] * 96)
start = threading.Thread.start


def slow_start(thread):  # the forward runs, and the caller is still in start() (as when the CPU is busy)
    start(thread)
    print("starting", flush=True)
    time.sleep(30)


threading.Thread.start = slow_start
with terminate_raises():
    interruptible(teacher.run, inputs)
"""


@pytest.mark.teacher
def test_sigterm_while_a_forward_thread_starts_never_aborts_the_process():
    """A SIGTERM that lands while the forward's thread is being started (Thread.start waits for it) unwinds the run
    with exit code 143: it used to skip the exit guard, so the interpreter tore down under a running ONNX Runtime
    forward and C++ aborted the process ("terminate called without an active exception", exit code -6)."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", SLOW_START], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline() == "starting\n"
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    finally:
        proc.kill()
    err = proc.stderr.read()
    assert proc.returncode == 128 + signal.SIGTERM and "terminate called" not in err, (proc.returncode, err)
