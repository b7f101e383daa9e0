"""What differs between the Python versions swembed supports (pyproject.toml's requires-python)."""
from __future__ import annotations

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as the tomli package (a dependency there)
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["tomllib"]
