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
    (tmp_path / "a.md").write_text("# A\n\n| x |\n|---|\n| 1 |\n\n"
                                   "<!-- generated: python -m lab.nope -->\n| y |\n|---|\n")
    assert report.check(tmp_path) == 2
    (tmp_path / "a.md").write_text("# A\n<!-- generated: swembed eval M -->\n\n| x |\n|---|\n| 1 |\n")
    assert report.check(tmp_path) == 0


FLAG = re.compile(r"(?<![\w-])(--[a-z][\w-]*[a-z0-9])(?![\w{-])")
SECTION_KEY = re.compile(r"(?<![\w\]<])\[([a-z_]+)\] ([a-z_]+)\b")
# flags of other programs that docs show beside swembed's (pip, pytest, npm, git, Spark, browsers)
OTHER_TOOLS_FLAGS = {"--index-url", "--extra-index-url", "--upgrade", "--no-deps", "--user", "--check", "--help",
                     "--version", "--verbose", "--durations", "--headless", "--master", "--conf", "--extra"}


def _parser_flags() -> dict[str, set[str]]:
    """Every option string of every swembed sub-command -> its defaults there (a flag of several commands has
    several)."""
    flags: dict[str, set[str]] = {}
    for parser in subcommands().values():
        for action in parser._actions:
            for flag in action.option_strings:
                flags.setdefault(flag, set()).add(str(action.default))
    return flags


def _lab_flags() -> set[str]:
    """Flags that lab modules and scripts define (docs name `python -m lab.x --flag` too)."""
    texts = [p.read_text(encoding="utf-8") for folder in ("lab", "scripts") for p in (ROOT / folder).rglob("*")
             if p.suffix in (".py", ".sh") and p.is_file()]
    return {flag for text in texts for flag in re.findall(r"""["'](--[a-z][\w-]*)["'=]""", text)}


def unknown_flags(text: str, known: set[str]) -> list[str]:
    """The ``--flags`` written in ``text``'s code that no parser (swembed's, lab's, another tool's) defines."""
    return sorted({flag for flag in FLAG.findall(code_of(text)) if flag not in known})


def unknown_section_keys(text: str, older: bool = False) -> list[str]:
    """The ``[section] key`` pairs in ``text``'s code that no recipe section has (with ``older``, the older keys,
    which still load with a warning, count as known)."""
    from swembed.pipeline.config import OLDER_KEYS, SECTIONS, BuildConfig

    config = BuildConfig()
    return sorted(f"[{section}] {key}" for section, key in SECTION_KEY.findall(code_of(text))
                  if not (section in SECTIONS and hasattr(getattr(config, section), key))
                  and not (older and (section, key) in OLDER_KEYS))


def wrong_flag_defaults(text: str, flags: dict[str, set[str]]) -> list[str]:
    """``--flag`` ... ``(default V)`` sentences whose V is not the flag's default in the code (BuildConfig for build
    flags, argparse's default for the others, where it has one); only plain values (a number or a word) are
    checked."""
    from swembed.cli import BUILD_FLAGS, flag_default

    build = {flag: flag_default(dest) for flag, dest, _ in BUILD_FLAGS}
    wrong = []
    for flag, value in re.findall(r"`(--[\w-]+)`[^.;(`]{0,30}\(default `?([\w.]+)`?\)", text):
        if flag in flags and re.fullmatch(r"-?\d+(\.\d+)?|[A-Za-z_]\w*", value):
            actual = {build[flag]} if flag in build else flags[flag] - {"None"}
            if actual and not any(a == value or _same_number(a, value) for a in actual):
                wrong.append(f"{flag} (default {value}; the code's: {', '.join(sorted(actual))})")
    return wrong


def _same_number(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_flag_section_key_and_default_named_exists_in_the_code(doc):
    text = doc.read_text(encoding="utf-8")
    flags = _parser_flags()
    assert unknown_flags(text, set(flags) | _lab_flags() | OTHER_TOOLS_FLAGS) == [], \
        f"{doc.name} names flags no parser has"
    older = doc.name == "CHANGELOG.md"  # history names the keys of its day; every other doc names today's
    assert unknown_section_keys(text, older) == [], f"{doc.name} names recipe keys no section has (or older ones)"
    assert wrong_flag_defaults(text, flags) == [], f"{doc.name} states defaults the code does not have"


def test_the_flag_section_and_default_checks_find_what_is_wrong():
    flags = _parser_flags()
    text = "Give `--dim 64` or `--dimm 64`, `[pca] dim = 8`, `[pca] dims = 8`, `[nope] k`.\n"
    assert unknown_flags(text, set(flags)) == ["--dimm"]
    assert unknown_section_keys(text) == ["[nope] k", "[pca] dims"]
    assert unknown_section_keys("`[distill] shrinkage = 1`") == ["[distill] shrinkage"]
    assert unknown_section_keys("`[distill] shrinkage = 1`", older=True) == []
    text = "`--threshold` (default 0.5) and `--dim` (default 256); `--min-words` (default 4), `--k` (default 16)\n"
    assert wrong_flag_defaults(text, flags) == ["--min-words (default 4; the code's: 3)"]


def test_the_build_flag_table_is_what_the_parser_says():
    text = (ROOT / "docs" / "build.md").read_text(encoding="utf-8")
    assert text == cli_docs.render_build_doc(text), "docs/build.md's flag table is out of date: python -m lab.cli_docs"
    assert "`--word-lists FILE [FILE ...]`" in text and "PCA__DIM" not in text
    assert "SUPPRESS" not in text and "`--shrinkage" not in text  # an older flag name is not offered


def test_docs_send_users_to_recipes_in_pipelines_not_lab():
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        commands = re.findall(r"swembed (?:build|shrink) [^\n`]*--recipe (\S+\.toml)", doc.read_text(encoding="utf-8"))
        assert [c for c in commands if not c.startswith("pipelines/")] == [], doc.name
