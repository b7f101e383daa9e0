"""The guard behind the ``teacher`` marker: a test without it cannot load a teacher, here or in a subprocess, even
through a name bound before the test began; a name that is no teacher still gives its own error."""
import subprocess
import sys

import pytest
from teacher_guard.sitecustomize import TeacherLoadForbidden

from swembed.teachers import TeacherError, load_teacher  # bound at import, before any test's guard


def test_an_unmarked_test_cannot_load_a_teacher_in_process():
    with pytest.raises(TeacherLoadForbidden, match="'minilm' but is not marked"):
        load_teacher("minilm", device="cpu")
    with pytest.raises(TeacherError, match="unknown teacher"):
        load_teacher("no-such-teacher", device="cpu")


def test_an_unmarked_test_cannot_load_a_teacher_in_a_subprocess():
    code = "from swembed.teachers import load_teacher; load_teacher('minilm', device='cpu')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode != 0 and "TeacherLoadForbidden" in result.stderr, result.stderr[-500:]
