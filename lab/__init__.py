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


def lever_section(title: str, command: str, intro: str, table: list[str], verdict: str) -> str:
    """A no-rebuild search lever's generated subsection: its title, the command that made it, what it measures, its
    table and its verdict."""
    return "\n".join([title, "", f"<!-- generated: {command} -->", "", intro, "", *table, "", verdict, ""])


def table_lever_main(module: str, doc: str, measure, report, argv: list[str] | None = None,
                     several: bool = False) -> int:
    """The command line of a no-rebuild search lever on one table (``python -m lab.MODULE TABLE [--dev FOLDER]
    [--scifact FOLDER] [--json FILE] [--out FILE]``): ``measure(model, dev, scifact)`` saved as JSON, then
    ``report(found, table, command)`` published. ``several``: ``TABLE...``, and ``measure`` and ``report`` get the
    list of their paths instead."""
    import argparse

    import swembed

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("tables", nargs="+" if several else 1, metavar="TABLE")
    parser.add_argument("--dev", type=Path, default=Path("models/corpora/sci"))
    parser.add_argument("--scifact", type=Path, default=Path("../shared/data/eval-mteb/SciFact"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    tables = args.tables if several else args.tables[0]
    found = measure(tables if several else swembed.load(tables), args.dev, args.scifact)
    if args.json:
        save_json(found, args.json)
    command = command_line(module, *args.tables, json=args.json, out=args.out)
    publish(report(found, tables, command), args.out)
    return 0
