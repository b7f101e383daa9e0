"""Write docs/cli.md from the `swembed` argparse parser, so the CLI reference cannot drift from the code.

Run: ``python -m lab.cli_docs`` (``--check``: exit 1 when docs/cli.md differs from what it would write).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
WIDTH = 110


def render() -> str:
    """docs/cli.md: each sub-command's one-line help, then its full ``--help`` at a fixed width."""
    from swembed.cli import _parser, subcommands

    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {action.dest: action.help for action in commands._choices_actions}
    lines = ["# Command-line reference", "", "<!-- generated: python -m lab.cli_docs -->",
             "Generated from the argparse parser by `python -m lab.cli_docs`; do not edit by hand. Every command "
             "takes `-v/--verbose` before the sub-command (`swembed -v build ...`).", ""]
    lines += [f"- [`swembed {name}`](#swembed-{name}): {helps.get(name, '')}" for name in subcommands()]
    for name, parser in subcommands().items():
        parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)
        lines += ["", f"## swembed {name}", "", helps.get(name, ""), "", "```text",
                  parser.format_help().rstrip(), "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    text = render()
    if check:
        current = DOC.read_text(encoding="utf-8") if DOC.is_file() else ""
        if current != text:
            print(f"{DOC} is out of date: run python -m lab.cli_docs", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
