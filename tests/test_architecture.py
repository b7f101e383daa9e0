"""The package's import graph has no cycle, and data flows one way: each layer imports only its own and lower layers
(the runtime nothing of the build side); the lab beside the package is neither imported nor installed."""
from __future__ import annotations

import ast
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "swembed"
# Lowest first; a module belongs to the layer of its longest matching prefix.
LAYERS = [
    ("swembed._extras", "swembed._version", "swembed.wheels", "swembed.runtime"),
    ("swembed.teachers", "swembed.integrations"),
    ("swembed.pipeline", "swembed.dedup"),
    ("swembed.eval",),
    ("swembed.cli", "swembed"),
]

def package_modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Each module of the package by its dotted name (a package by its own name), its file."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def module_imports(name: str, source: str, modules: set[str], is_package: bool = False) -> set[str]:
    """The package's modules that module ``name`` (its ``source``) imports anywhere: at the top, inside functions,
    under ``if TYPE_CHECKING``, or by ``__import__("...")``. An import of one of its own parent packages is not an
    edge (their ``__init__`` re-exports), except the top package's: ``from swembed import load`` goes through the
    front door, ``swembed/__init__``, which sits on the top floor."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__"
              and node.args and isinstance(node.args[0], ast.Constant)):
            targets = [str(node.args[0].value)]
        else:
            continue
        for target in targets:
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            own_parent = name.startswith(target + ".") and "." in target
            if target in modules and target != name and not own_parent:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> swembed modules it imports (``module_imports``)."""
    modules = package_modules()
    return {name: module_imports(name, path.read_text(encoding="utf-8"), set(modules), path.name == "__init__.py")
            for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:  # node roots a component: it and everything above it on the stack
            cut = stack.index(node)
            component, stack[cut:] = stack[cut:], []
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 40 and "swembed.pipeline.build" in graph["swembed.cli"]
    assert cycles(graph) == []
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]  # the checker itself finds one


def test_runtime_depends_on_nothing_of_the_build_side():
    graph = import_graph()
    runtime = [name for name in graph if name.startswith("swembed.runtime")]
    reached = {target for name in runtime for target in graph[name]}
    assert reached <= set(runtime) | {"swembed._extras", "swembed._version"}, sorted(reached - set(runtime))


def layer_of(module: str) -> int:
    prefixes = [(len(prefix), rank) for rank, layer in enumerate(LAYERS) for prefix in layer
                if module == prefix or module.startswith(prefix + ".")]
    assert prefixes, f"{module} is in no layer: add it to LAYERS"
    return max(prefixes)[1]


# the modules that may sit at the package root, beside the floors' folders
ROOT_MODULES = {"swembed", "swembed._extras", "swembed._version", "swembed.wheels", "swembed.cli"}


def floors_of_folders(modules: list[str]) -> dict[str, set[int]]:
    """Each folder of the package (``swembed.<folder>``) -> the floors its modules sit on."""
    floors: dict[str, set[int]] = {}
    for module in modules:
        if module not in ROOT_MODULES:
            floors.setdefault(".".join(module.split(".")[:2]), set()).add(layer_of(module))
    return floors


def test_every_folder_sits_on_one_floor_and_no_other_module_at_the_root():
    modules = list(package_modules())
    folders = {name for name, path in package_modules().items() if path.name == "__init__.py"}
    loose = [m for m in modules if m not in ROOT_MODULES and ".".join(m.split(".")[:2]) not in folders]
    assert loose == [], f"modules at the package root: move each into the folder of its floor: {loose}"
    assert {folder: floors for folder, floors in floors_of_folders(modules).items() if len(floors) > 1} == {}
    assert LAYERS == [layer for layer in LAYERS if all(prefix.count(".") <= 1 for prefix in layer)], \
        "a layer names a sub-folder: a folder spans two floors"
    assert floors_of_folders(["swembed.integrations.formats", "swembed.integrations.spark.job"]) == {
        "swembed.integrations": {1}}  # the checker itself sees a folder's modules


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(name, target) for name, targets in graph.items() for target in targets
            if layer_of(target) > layer_of(name)}


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    assert upward_imports(import_graph()) == set()
    assert upward_imports({"swembed.runtime.folder": {"swembed.pipeline.build"}, "swembed.pipeline.build": set()}) \
        == {("swembed.runtime.folder", "swembed.pipeline.build")}  # the checker itself finds one


def test_imports_inside_functions_and_through_the_front_door_are_edges():
    """The checker reads an import wherever it is: inside a function, under TYPE_CHECKING, ``__import__``; an
    import of ``swembed`` itself (``from swembed import load``) is one of the top floor, from any module."""
    modules = set(package_modules())
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from swembed.eval import sts\n"
              "def f():\n    from swembed import load\n    from swembed.pipeline.build import build\n"
              "    from swembed.runtime import embedder\n    from . import tokenizer\n"
              "    return __import__('swembed.cli').__version__\n")
    found = module_imports("swembed.runtime.folder", source, modules)
    assert found == {"swembed.eval.sts", "swembed", "swembed.pipeline.build", "swembed.runtime.embedder",
                     "swembed.runtime.tokenizer", "swembed.cli"}
    assert upward_imports({"swembed.runtime.folder": found}) == {("swembed.runtime.folder", target)
                                                                for target in found - {"swembed.runtime.embedder",
                                                                                       "swembed.runtime.tokenizer"}}
    assert module_imports("swembed.runtime.folder", "from swembed.runtime import StaticEmbedder\n", modules) == set()


def test_the_lab_stays_out_of_the_package():
    from setuptools import find_packages

    assert not any(part in path.stem for path in PACKAGE.rglob("*.py") for part in ("bench", "report", "plot"))
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            assert not any(n == "lab" or n.startswith("lab.") for n in names), path
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    shipped = find_packages(str(ROOT), include=found["include"], exclude=found.get("exclude", ()))
    assert "swembed" in shipped and (ROOT / "lab" / "report.py").is_file()
    assert not [name for name in shipped if not name.startswith("swembed")]
