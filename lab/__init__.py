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


def save_json(data: object, path: Path) -> None:
    """Write ``data`` to ``path`` as indented JSON (atomically, replacing what was there)."""
    import json

    from swembed.runtime.outputs import atomic_file

    with atomic_file(path, overwrite=True) as tmp:
        Path(tmp).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def command_line(module: str, *arguments: object, json: Path | None = None, out: Path | None = None) -> str:
    """``python -m lab.MODULE ARGUMENTS [--json FILE] [--out FILE]``: the command a generated report names."""
    return " ".join([f"python -m lab.{module}", *map(str, arguments)] + ([f"--json {json}"] if json else [])
                    + ([f"--out {out}"] if out else []))
