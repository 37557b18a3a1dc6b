"""Each layer of mcruntime imports only from the layers below it (DESIGN.md, "Layers").

Imports under ``if TYPE_CHECKING:`` do not count: they create no runtime dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mcruntime

ROOT = Path(mcruntime.__file__).parent

# Bottom up. A module may import from its own layer and any lower one.
LAYERS: list[set[str]] = [
    {
        "_json",
        "_threads",
        "_backoff",
        "_selectors",
        "_patch",
        "_lifetime",
        "errors",
        "_kubeconfig",
        "_exports",
    },
    {"envtest"},  # a test API server: uses only the base helpers
    {"client"},
    {"crd"},  # CRDs from the client's typed resources, installed through a client
    {"cache"},
    {"workqueue", "reconcile", "event", "metrics", "healthz"},
    {"handler", "predicate"},
    {"source"},
    {"controller"},
    {"cluster"},
    {"multicluster"},
    {"webhook"},  # served by the manager's runnable; knows clusters, not the manager
    {"leaderelection"},
    {"recorder"},  # events per cluster; the manager builds recorders and tells them of clusters
    {"manager"},
    {"controllerutil"},  # helpers over the client; cross-cluster ownership may use the manager
    {"builder"},
    {"plugins"},
    {"providers"},
    {"cli", "examples", "__init__", "__main__"},
]
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _component(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "mcruntime":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _runtime_imports(tree: ast.Module) -> list[tuple[int, str]]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                skip.update(id(n) for n in ast.walk(sub))
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "mcruntime":  # from mcruntime import _json / __version__
                for a in node.names:
                    is_module = (ROOT / a.name).is_dir() or (ROOT / f"{a.name}.py").exists()
                    if a.name.startswith("__"):  # package metadata (__version__): no dependency
                        continue
                    found.append((node.lineno, f"mcruntime.{a.name}" if is_module else "mcruntime"))
            else:
                found.append((node.lineno, node.module))
    return found


def test_no_layer_imports_from_a_layer_above_it():
    violations = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        own = rel.parts[0].removesuffix(".py")
        assert own in LEVEL, f"{rel}: unknown component {own!r}; add it to LAYERS"
        for lineno, module in _runtime_imports(ast.parse(path.read_text())):
            target = _component(module)
            if target is None or target == own:
                continue
            assert target in LEVEL, f"{rel}:{lineno}: unknown component {target!r}"
            if LEVEL[target] > LEVEL[own]:
                violations.append(f"{rel}:{lineno} ({own}) imports {module} ({target})")
    assert not violations, "upward imports:\n" + "\n".join(violations)
