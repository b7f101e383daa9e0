"""README.md and docs/*.md name only repository paths and commands that exist; docs/cli.md is what the parser says;
every table in reports/ names the command that regenerates it."""
import importlib.util
import re
from pathlib import Path

import pytest

from lab import cli_docs, report
from swembed.cli import subcommands

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = ("swembed/", "lab/", "pipelines/", "reports/", "docs/", "tests/", "vocab/", "examples/", "scripts/")
COMMAND = re.compile(r"(?:^|&& |/bin/)swembed ([a-z][\w-]*)", re.M)  # a command line, not prose in a code block
PATH = re.compile(r"(?<![\w./~-])((?:%s)[\w./*{},-]*)" % "|".join(map(re.escape, TOP)))


def code_of(text: str) -> str:
    """Fenced blocks and inline code spans: where commands and paths are written."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.M | re.S)
    return "\n".join(blocks + re.findall(r"`([^`\n]+)`", prose))


def named_paths(text: str) -> set[str]:
    links = {t for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) if "://" not in t}
    return links | {m.rstrip(".,:;") for m in PATH.findall(code_of(text))}


def exists(doc: Path, name: str) -> bool:
    base = doc.parent if not name.startswith(TOP) else ROOT
    if "{" in name:  # a{b,c} -> a{b} and a{c}
        head, _, rest = name.partition("{")
        options, _, tail = rest.partition("}")
        return all(exists(doc, head + option + tail) for option in options.split(","))
    return bool(list(base.glob(name))) if "*" in name else (base / name).exists()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_and_command_named_exists(doc):
    text = doc.read_text(encoding="utf-8")
    assert "logs/" not in text, f"{doc.name} cites logs/, which is not in the repository"
    missing = sorted(name for name in named_paths(text) if not exists(doc, name))
    assert missing == [], f"{doc.name} names paths that do not exist: {missing}"
    code = code_of(text)
    commands = set(subcommands())
    unknown = sorted({c for c in COMMAND.findall(code) if c not in commands})
    assert unknown == [], f"{doc.name} names swembed commands that do not exist: {unknown}"
    modules = set(re.findall(r"python3? -m ([\w.]+)", code))
    assert not [m for m in modules if importlib.util.find_spec(m) is None], modules


def test_the_checks_find_what_is_missing(tmp_path):
    doc = tmp_path / "x.md"
    text = "See [a](missing.md) and `lab/nope.py`, `swembed nope --x`, `pipelines/*.toml`.\n"
    assert named_paths(text) == {"missing.md", "lab/nope.py", "pipelines/*.toml"}
    assert not exists(doc, "missing.md") and not exists(doc, "lab/nope.py") and exists(doc, "pipelines/*.toml")
    assert COMMAND.findall(code_of(text)) == ["nope"]


def test_the_readme_is_a_front_door():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


def test_cli_reference_is_what_the_parser_says():
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == cli_docs.render(), \
        "docs/cli.md is out of date: python -m lab.cli_docs"


def test_every_report_table_names_a_command_that_exists(capsys):
    assert report.check(ROOT / "reports") == 0, capsys.readouterr().out
    tables = report.report_tables(ROOT / "reports")
    assert len(tables) > 30 and all(t["command"] for t in tables)


def test_the_report_check_fails_without_a_marker_or_with_a_missing_module(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\n| x |\n|---|\n| 1 |\n\n<!-- generated: python -m lab.nope -->\n| y |\n|---|\n")
    assert report.check(tmp_path) == 2
    (tmp_path / "a.md").write_text("# A\n<!-- generated: swembed eval M -->\n\n| x |\n|---|\n| 1 |\n")
    assert report.check(tmp_path) == 0
