"""Optional dependencies, checked where they are first needed (model2vec's habit): a missing one is one line
naming the extra that installs it, never a traceback. Which extra provides a module is read from swembed's own
requirement metadata, so the message cannot drift from pyproject.toml."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from functools import lru_cache
from pathlib import Path

# Import names whose distribution is not the import name spelled as a distribution (most are: torch, scipy, ...).
DISTRIBUTION_OF = {"sklearn": "scikit-learn", "faiss": "faiss-cpu"}
# Extras that bundle others, not the one a feature needs.
BUNDLES = ("test", "all")
_CHECKOUT_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


class MissingExtraError(ImportError):
    """A feature's optional dependency is not installed."""


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_of(module: str) -> str:
    """The PyPI distribution that installs the top-level import ``module``."""
    top = module.split(".")[0]
    return _normalise(DISTRIBUTION_OF.get(top, top))


def _requirement_lines() -> list[str]:
    """swembed's requirements as metadata lines (``'scipy>=1.10; extra == "build"'``). From a source checkout the
    pyproject.toml beside the package is read instead, since an editable install's metadata is only as new as the
    last ``pip install -e``."""
    if _CHECKOUT_PYPROJECT.is_file():
        from swembed.runtime.compat import tomllib

        project = tomllib.loads(_CHECKOUT_PYPROJECT.read_text(encoding="utf-8")).get("project", {})
        if project.get("name") == "swembed":
            return [f'{req}; extra == "{extra}"'
                    for extra, reqs in project.get("optional-dependencies", {}).items() for req in reqs]
    try:
        return importlib.metadata.requires("swembed") or []
    except importlib.metadata.PackageNotFoundError:
        return []


def extras_by_distribution(lines: list[str]) -> dict[str, list[str]]:
    """Distribution -> the extras that list it, in metadata order (bundles such as ``all`` and ``test`` left out)."""
    found: dict[str, list[str]] = {}
    for line in lines:
        requirement, _, marker = line.partition(";")
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if extra and name and extra.group(1) not in BUNDLES:
            found.setdefault(_normalise(name.group(1)), []).append(extra.group(1))
    return found


@lru_cache(maxsize=1)
def _extras() -> dict[str, list[str]]:
    return extras_by_distribution(_requirement_lines())


def extra_for(module: str, preferred: str | None = None) -> str | None:
    """The extra that installs ``module``: ``preferred`` when it lists it, else the first that does (None: none)."""
    extras = _extras().get(distribution_of(module), [])
    return preferred if preferred in extras else (extras[0] if extras else None)


def require(feature: str, *modules: str) -> None:
    """Raise ``MissingExtraError`` when any of ``modules`` is missing, naming for each the extra that provides it
    (the ``feature`` extra when it does, e.g. ``pip install 'swembed[build]'``)."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return
    extras = list(dict.fromkeys(extra_for(m, feature) for m in missing))
    named = ",".join(e for e in extras if e)
    unlisted = [distribution_of(m) for m in missing if extra_for(m, feature) is None]
    install = " and ".join(([f"pip install 'swembed[{named}]' (from a checkout: pip install -e \".[{named}]\")"]
                            if named else []) + ([f"pip install {' '.join(unlisted)}"] if unlisted else []))
    raise MissingExtraError(f"this needs {', '.join(missing)}, which is not installed: {install}")
