"""Named points of a run, for tests that must act at an exact point of it (a signal while a stage runs, while an
output is half written) without timing it. A test-only hook, off unless its environment variable is set:

* ``SWEMBED_TEST_POINTS=FILE``: the run appends the name of each point it reaches to FILE, one a line
  (``stage extract: unit 1``, ``out: temp folder made``, ``out: written``, ...);
* ``SWEMBED_TEST_WAIT_AT=N`` beside it: at the Nth point reached (its line written), the run waits until a signal
  ends it (``WAIT_S`` at most, then it goes on), so the test sends its signal exactly there.

Only the main thread's points are written and counted, so a run passes the same points in the same order each time.
Unset (as for every user), ``reached`` costs one environment lookup.
"""
from __future__ import annotations

import os
import threading
import time

POINTS_ENV = "SWEMBED_TEST_POINTS"
WAIT_AT_ENV = "SWEMBED_TEST_WAIT_AT"
WAIT_S = 600.0  # the longest a run waits at its point (a guard against a test that never signals)
_reached = 0  # points this process has reached on its main thread


def reached(name: str) -> None:
    """Record that the run is at the point ``name`` and, where ``SWEMBED_TEST_WAIT_AT`` says so, wait there."""
    global _reached
    path = os.environ.get(POINTS_ENV)
    if not path or threading.current_thread() is not threading.main_thread():
        return
    _reached += 1
    handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(handle, (name.replace("\n", " ") + "\n").encode("utf-8"))
    finally:
        os.close(handle)
    if os.environ.get(WAIT_AT_ENV) == str(_reached):
        time.sleep(WAIT_S)  # a signal's handler runs inside the sleep (SIGTERM raises SystemExit there)
