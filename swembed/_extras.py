"""Optional dependencies, checked where they are first needed (model2vec's habit): a missing one is one line
naming the extra that installs it, never a traceback."""
from __future__ import annotations

import importlib.util


class MissingExtraError(ImportError):
    """A feature's optional dependency is not installed."""


def require(extra: str, *modules: str) -> None:
    """Raise ``MissingExtraError`` naming ``pip install 'swembed[extra]'`` when any of ``modules`` is missing."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(f"this needs {', '.join(missing)}, which is not installed: "
                                f"pip install 'swembed[{extra}]' (from a checkout: pip install -e \".[{extra}]\")")
