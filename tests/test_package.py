"""The wheel: built from the source, installed into a clean virtual environment (no system site packages) with
only the runtime dependencies, its `swembed encode` console script works and never imports torch. Needs PyPI or
a warm pip cache (CI has both); about 30 s with a warm cache."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import write_tiny_model

import swembed

ROOT = Path(__file__).resolve().parents[1]
# setuptools' deprecation banners ("!!" ... "SetuptoolsDeprecationWarning: ...") and pip's "DEPRECATION:" notes
BANNER = re.compile(r"DeprecationWarning|DEPRECATION|^\s*!!\s*$", re.MULTILINE)
HEAVY = ("torch", "transformers", "sentence_transformers", "blingfire")


def run(args, env, cwd) -> str:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=cwd)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


def lowest_python() -> str | None:
    """An interpreter of the lowest Python version pyproject.toml states (requires-python), if this machine has one."""
    from swembed.runtime.compat import tomllib

    lowest = re.search(r">=\s*(\d+\.\d+)", tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
                       ["requires-python"]).group(1)
    candidates = [shutil.which(f"python{lowest}"), *sorted(Path.home().glob(f".pyenv/versions/{lowest}.*/bin/python"))]
    for candidate in (str(c) for c in candidates if c):  # a pyenv shim of another version fails this check
        if subprocess.run([candidate, "-c", "import venv"], capture_output=True).returncode == 0:
            return candidate
    return None


LOWEST = lowest_python()


@pytest.mark.package
@pytest.mark.parametrize("interpreter", [sys.executable, pytest.param(LOWEST, marks=pytest.mark.skipif(
    LOWEST is None, reason="no interpreter of the lowest supported Python on this machine"))],
    ids=["this-python", "lowest-python"])
def test_wheel_installs_into_a_clean_venv_and_encodes_without_torch(tmp_path, interpreter):
    # Build from a copy, so that the checkout gets no build/ or *.egg-info.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "swembed", source / "swembed", ignore=shutil.ignore_patterns("__pycache__"))
    quiet_pip = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    dist = tmp_path / "dist"
    if importlib.util.find_spec("build"):
        build = [sys.executable, "-m", "build", "--wheel", "--outdir", dist, source]
    else:  # -v: show the build backend's output, where setuptools prints its banners
        build = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--wheel-dir", dist, source]
    built = run(build, {**os.environ, **quiet_pip}, tmp_path)
    # From here on nothing of this checkout or its environment: the venv alone.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")} | quiet_pip
    (wheel,) = dist.glob("swembed-*.whl")
    # no system site packages; no pip of its own: this pip installs into it
    run([interpreter, "-m", "venv", "--without-pip", tmp_path / "venv"], env, tmp_path)
    python, script = tmp_path / "venv" / "bin" / "python", tmp_path / "venv" / "bin" / "swembed"
    # --no-compile: no .pyc files written for the ~20 packages (half the install's time); Python compiles what
    # the console script imports when it runs, so the check below is the same
    installed = run([sys.executable, "-m", "pip", "--python", python, "install", "--no-compile", wheel], env, tmp_path)
    for output in (built, installed):
        assert not BANNER.search(output), BANNER.search(output).group()
    probe = f"import importlib.util as u, swembed; print(swembed.__file__, [m for m in {HEAVY!r} if u.find_spec(m)])"
    where = run([python, "-c", probe], env, tmp_path)
    assert where.split()[0].startswith(str(tmp_path / "venv")) and where.split(maxsplit=1)[1].strip() == "[]"

    model = write_tiny_model(tmp_path / "model")
    texts = ["the cat sat on the mat", "goodness", "zebra", "a dog"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    # PYTHONPROFILEIMPORTTIME lists every module the console script imports, on stderr.
    log = run([script, "encode", model, "--input", "in.txt", "--output", "out.npy"],
              {**env, "PYTHONPROFILEIMPORTTIME": "1"}, tmp_path)
    imported = {line.split("|")[-1].strip() for line in log.splitlines() if line.startswith("import time:")}
    assert "swembed.runtime.embedder" in imported and "numpy" in imported
    assert not [m for m in imported if m.split(".")[0] in HEAVY]
    assert "4 texts -> out.npy (4, 8)" in log
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), swembed.load(model).encode(texts), atol=1e-6)
    # every command parses its flags and reads a recipe (TOML) on this Python too
    assert run([script, "--version"], env, tmp_path).strip() == f"swembed {swembed.__version__}"
    listed = run([script, "data", "sources", "--recipe", ROOT / "pipelines" / "default.toml"], env, tmp_path)
    assert "builtin:wikitext2" in listed
