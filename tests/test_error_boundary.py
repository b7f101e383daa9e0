"""The CLI's one error boundary: an error a user can cause is one line naming the input, rc 2; anything else is
one line saying it is a bug and where its traceback was written, rc 1."""
import re
from pathlib import Path

import pytest
from conftest import run_cli

HANG_S = 300  # a guard against a hang only: each wait below ends on an event (a line, an exit) long before


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
import ctypes
from swembed.pipeline.extract import interruptible
from swembed.runtime.outputs import terminate_raises


def forward():  # one C call that no signal ends: C's system() waits for its shell, which says so, then waits for stdin
    return ctypes.CDLL(None).system(b"echo forward; exec cat >/dev/null 2>&1")


with terminate_raises():  # as swembed.cli.main runs every command
    interruptible(forward)
"""


def test_sigterm_during_a_teacher_forward_ends_the_run_at_once():
    """Issue 58: a SIGTERM during extract took 70-160 s (the handler waited for the teacher's forward, one long C
    call). The extract loop waits for each forward interruptibly: the run ends with exit code 143 while the forward
    (a C call that never returns while the test runs) is still under way."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", SLOW_FORWARD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "forward\n"  # written from inside the C call
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=HANG_S)  # a run that waited for the forward would wait here until the test ends
    finally:
        proc.kill()
        _, err = proc.communicate()  # closes stdin: the forward's shell ends
    assert proc.returncode == 128 + signal.SIGTERM, err


SIGNAL_ON_THE_FORWARD = """
import ctypes, signal, threading, time
from swembed.pipeline.extract import interruptible
from swembed.runtime.outputs import terminate_raises


def forward():  # the kernel hands a process's signal to any thread that takes it: here, the forward's own
    time.sleep(0.5)  # the main thread is waiting by now
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
    return ctypes.CDLL(None).system(b"exec cat >/dev/null 2>&1")  # a C call that never returns while the test runs


with terminate_raises():
    interruptible(forward)
"""


def test_a_signal_caught_by_the_forward_thread_still_ends_the_run():
    """CI, 2026-12-06: the test above hung once: the SIGTERM landed on another thread than the main one, whose wait
    no signal then interrupted. The wait returns every SIGNAL_POLL_S, so the main thread runs the handler whichever
    thread caught the signal."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", SIGNAL_ON_THE_FORWARD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.wait(timeout=60)  # a main thread that never learns of the signal waits here for the whole minute
    except subprocess.TimeoutExpired:
        pass
    finally:
        proc.kill()
        _, err = proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, (proc.returncode, err)


SLOW_START = """
import signal, threading
from swembed.pipeline.extract import interruptible
from swembed.runtime.outputs import terminate_raises
from swembed.teachers import load_teacher

teacher = load_teacher("minilm", device="cpu", precision="float32", runtime="onnx")
inputs = teacher.prepare(["a sentence of some length about nothing in particular " * 20] * 96)
start = threading.Thread.start


def slow_start(thread):  # the forward runs, and the caller is still in start() (as when the CPU is busy)
    start(thread)
    print("starting", flush=True)
    signal.pause()  # until the test's signal


def forward():  # forwards until the process ends: one is under way whenever the signal lands
    while True:
        teacher.run(inputs)


threading.Thread.start = slow_start
with terminate_raises():
    interruptible(forward)
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
    try:
        assert proc.stdout.readline() == "starting\n"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=HANG_S)
    finally:
        proc.kill()
    err = proc.stderr.read()
    assert proc.returncode == 128 + signal.SIGTERM and "terminate called" not in err, (proc.returncode, err)
