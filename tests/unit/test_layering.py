"""The layering of docs/architecture.md ("Layers") holds: each package imports only from its own
layer and the layers below it, no imports form a cycle between packages (TYPE_CHECKING-only ones
included), and the modules of one package import each other without a cycle.

The layer table is read from docs/architecture.md, between ``<!-- layers:begin -->`` and
``<!-- layers:end -->``; a package that is not in it is an error.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import mcruntime

ROOT = Path(mcruntime.__file__).parent
ARCHITECTURE = ROOT.parent / "docs" / "architecture.md"


def read_layers(text: str) -> list[set[str]]:
    """The layers of the table in ``text``, bottom up."""
    table = re.search(r"<!-- layers:begin -->(.*?)<!-- layers:end -->", text, re.S)
    assert table, "docs/architecture.md has no layer table between the layers:begin/end comments"
    layers: list[set[str]] = []
    for row in table.group(1).splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        assert int(cells[0]) == len(layers), f"layer rows out of order at {row!r}"
        layers.append(set(re.findall(r"`([^`]+)`", cells[1])))
    return layers


LAYERS = read_layers(ARCHITECTURE.read_text())
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}

# Package edges that still close a cycle, each with the change that removes it. The list may
# only shrink: a test fails once an edge is gone, so it is taken off here.
KNOWN_CYCLE_EDGES: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Import:
    lineno: int
    module: str  # absolute, resolved to a module where the name is one
    type_checking: bool  # under ``if TYPE_CHECKING:``
    top_level: bool  # at module level (not inside a function or class)


def _module_name(path: Path) -> str:
    parts = ["mcruntime", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    return (ROOT / rel).is_dir() or (ROOT / rel).with_suffix(".py").exists()


def imports_of(path: Path, this: str | None = None) -> list[Import]:
    """The imports of ``path`` (the module ``this``, by default from its place under ROOT)."""
    tree = ast.parse(path.read_text())
    this = this or _module_name(path)
    package = this if path.name == "__init__.py" else this.rsplit(".", 1)[0]
    type_checking: set[int] = set()
    top_level: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                type_checking.update(id(n) for n in ast.walk(sub))
    for node in tree.body:  # module level, including under if/try at module level
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            top_level.update(
                id(n)
                for n in ast.walk(node)
                if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            )
    found = []
    for node in ast.walk(tree):
        flags = (id(node) in type_checking, id(node) in top_level)
        if isinstance(node, ast.Import):
            found += [Import(node.lineno, a.name, *flags) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base = ".".join(base_parts[: len(base_parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for a in node.names:
                name = f"{source}.{a.name}"
                if a.name.startswith("__") and source == "mcruntime":
                    continue  # package metadata (__version__): no dependency
                target = name if source.startswith("mcruntime") and _is_module(name) else source
                found.append(Import(node.lineno, target, *flags))
    return found


def _component(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "mcruntime":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _sources() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (as a path a -> ... -> a), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_layer_table_names_every_package_once():
    names = [n for layer in LAYERS for n in layer]
    assert len(names) == len(set(names)), "a package is in two layers"
    for path in _sources():
        own = _component(_module_name(path))
        assert own in LEVEL, f"{path.relative_to(ROOT)}: {own!r} is not in docs/architecture.md"


def test_no_layer_imports_from_a_layer_above_it():
    violations = []
    for path in _sources():
        own = _component(_module_name(path))
        assert own is not None
        for imp in imports_of(path):
            target = _component(imp.module)
            if target is None or target == own or imp.type_checking:
                continue
            assert target in LEVEL, f"{path.relative_to(ROOT)}:{imp.lineno}: unknown {target!r}"
            if LEVEL[target] > LEVEL[own]:
                rel = path.relative_to(ROOT)
                violations.append(f"{rel}:{imp.lineno} ({own}) imports {imp.module} ({target})")
    assert not violations, "upward imports:\n" + "\n".join(violations)


def _package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in _sources():
        own = _component(_module_name(path))
        assert own is not None
        for imp in imports_of(path):
            target = _component(imp.module)
            if target is not None and target != own and own != "__init__":
                graph.setdefault(own, set()).add(target)
    return graph


def test_packages_import_each_other_without_cycles_even_for_type_checking():
    graph = _package_graph()
    for source, target in KNOWN_CYCLE_EDGES:
        assert target in graph.get(source, ()), (
            f"{source} -> {target} is gone: drop it from KNOWN_CYCLE_EDGES"
        )
        graph[source].discard(target)
    cycle = _cycle(graph)
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle or [])


def test_modules_of_a_package_import_each_other_without_cycles():
    graph: dict[str, set[str]] = {}
    for path in _sources():
        this = _module_name(path)
        for imp in imports_of(path):
            if (
                imp.top_level
                and not imp.type_checking
                and imp.module.startswith("mcruntime")
                and _component(imp.module) == _component(this)
                and imp.module != this
            ):
                graph.setdefault(this, set()).add(imp.module)
    # a package's __init__ importing its own modules is how a package is built; a module
    # importing its package's __init__ back (or a sibling that does) is a cycle
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_checks_see_relative_imports_and_cycles(tmp_path):
    sample = ROOT / "controller" / "_controller.py"
    resolved = {i.module for i in imports_of(sample)}
    assert "mcruntime.workqueue" in resolved
    rel = tmp_path / "rel.py"
    rel.write_text("from ..cache import Cache\nfrom . import _options\n")
    assert {i.module for i in imports_of(rel, "mcruntime.controller._probe")} == {
        "mcruntime.cache",
        "mcruntime.controller._options",
    }
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None
    assert read_layers(
        "<!-- layers:begin -->\n| 0 | `a`, `b` | x |\n| 1 | `c` | y |\n<!-- layers:end -->"
    ) == [
        {"a", "b"},
        {"c"},
    ]


def test_no_package_reaches_into_another_packages_private_modules():
    """Another package's ``_private`` modules are its own; the base helpers (``mcruntime._x``) are shared."""
    crossings = []
    for path in _sources():
        own = _component(_module_name(path))
        for imp in imports_of(path):
            parts = imp.module.split(".")
            target = _component(imp.module)
            if target is None or target == own or target.startswith("_"):
                continue
            if any(p.startswith("_") for p in parts[2:]):
                crossings.append(f"{path.relative_to(ROOT)}:{imp.lineno} imports {imp.module}")
    assert not crossings, "private modules of another package:\n" + "\n".join(crossings)
