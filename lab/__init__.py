"""The lab beside the package (not installed by ``pip install``): report generators, plots, analysis, stage
tables, peer baselines, benches and the out-of-domain experiments. Run its modules from the repository root,
e.g. ``python -m lab.report --check``."""
from __future__ import annotations

from pathlib import Path


def publish(text: str, out: Path | None) -> None:
    """Print a generated report and, with ``out``, write it there (atomically, replacing what was there)."""
    from swembed.runtime.outputs import atomic_file

    print(text)
    if out:
        with atomic_file(out, overwrite=True) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")
