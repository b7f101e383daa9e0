"""`require` names the extra that really installs a module, read from swembed's requirement metadata; every
optional import the package checks for is listed in some extra."""
import ast
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from swembed import _extras
from swembed._extras import MissingExtraError, distribution_of, extra_for, extras_by_distribution, require

PACKAGE = Path(__file__).resolve().parents[1] / "swembed"


def require_calls() -> list[tuple[str, str, list[str]]]:
    """(file, feature, modules) of every ``require("feature", "module", ...)`` call in the package."""
    calls = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "require":
                args = [a.value for a in node.args if isinstance(a, ast.Constant)]
                calls.append((path.name, args[0], args[1:]))
    return calls


def test_every_checked_module_is_installed_by_an_extra():
    calls = require_calls()
    assert len(calls) >= 10
    unlisted = [(file, m) for file, _, modules in calls for m in modules if extra_for(m) is None]
    assert unlisted == []
    assert extra_for("sklearn", "build") == "llm"  # lens-clusters' KMeans: not in build, in llm
    assert extra_for("scipy", "eval") == "eval" and extra_for("scipy", "spark") == "build"


def test_import_names_map_to_the_distributions_installed_here():
    installed = importlib.metadata.packages_distributions()
    for module in ("sklearn", "faiss", "torch", "scipy", "tokenizers"):
        if module in installed:
            assert distribution_of(module) in {d.lower() for d in installed[module]}, module


def test_installed_metadata_lines_parse_to_extras():
    lines = ['scipy>=1.10; extra == "build"', "numpy>=1.24", 'faiss-cpu>=1.8; extra == "dedup"',
             'scipy>=1.10; extra == "eval"', 'swembed[build,eval]; extra == "all"', 'Faiss_CPU; extra == "test"']
    assert extras_by_distribution(lines) == {"scipy": ["build", "eval"], "faiss-cpu": ["dedup"]}
    assert "dedup" in extras_by_distribution(importlib.metadata.requires("swembed"))["faiss-cpu"]


def test_the_message_names_each_missing_module_s_extra(monkeypatch):
    monkeypatch.setattr(_extras.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingExtraError) as caught:
        require("llm", "torch", "sklearn")
    assert "torch, sklearn" in str(caught.value) and "pip install 'swembed[build,llm]'" in str(caught.value)
    with pytest.raises(MissingExtraError, match=r"pip install not-a-dependency"):
        require("build", "not_a_dependency")


def test_lens_clusters_without_scikit_learn_names_the_llm_extra(tmp_path):
    code = ("import sys; sys.modules['sklearn'] = None\n"
            "from swembed.cli import main; sys.exit(main(['lens-clusters', '--model', 'm', '--out', 'o.json']))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "sklearn" in result.stderr and "pip install 'swembed[llm]'" in result.stderr
