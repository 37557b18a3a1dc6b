"""What the distributions ship for their users' tools."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]


_PLUGIN_DISTRIBUTIONS = [
    ("providers/kubeconfig", "mcruntime_kubeconfig"),
    ("providers/cluster-api", "mcruntime_cluster_api"),
    ("providers/kind", "mcruntime_kind"),
    ("providers/cluster-inventory", "mcruntime_cluster_inventory"),
    # the template third-party providers copy
    ("examples/third-party-provider", "mcruntime_static"),
]


@pytest.mark.parametrize(("project", "package"), [(".", "mcruntime"), *_PLUGIN_DISTRIBUTIONS])
def test_distribution_ships_py_typed_so_type_checkers_read_its_annotations(project, package):
    assert (REPO / project / package / "py.typed").is_file()
    config = tomllib.loads((REPO / project / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"][package]


@pytest.mark.parametrize(
    "project", sorted(p.parent.name for p in REPO.glob("providers/*/pyproject.toml"))
)
def test_provider_distribution_bounds_mcruntime_below_the_next_minor_version(project):
    """A provider built against the 0.1 API must not install beside an incompatible mcruntime."""
    import mcruntime

    config = tomllib.loads((REPO / "providers" / project / "pyproject.toml").read_text())
    (req,) = [
        Requirement(d) for d in config["project"]["dependencies"] if d.startswith("mcruntime")
    ]
    major, minor = (int(x) for x in mcruntime.__version__.split(".")[:2])
    assert mcruntime.__version__ in req.specifier
    assert f"{major}.{minor + 1}.0" not in req.specifier, str(req)


# distributions mcruntime imports that another of its requirements brings, by the API it is of
_PART_OF: dict[str, str] = {
    "pydantic-core": "pydantic",  # pydantic's core schemas are pydantic's API (custom types)
    "docker": "testcontainers",  # the pytest plugin pings the engine testcontainers drives
}


def _imported_distributions(package: Path) -> dict[str, str]:
    """The distributions the modules under ``package`` import at run time (not under
    ``TYPE_CHECKING``), each with one place that imports it."""
    providing = importlib.metadata.packages_distributions()
    found: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        typing_only = {
            id(node)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for stmt in block.body
            for node in ast.walk(stmt)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == package.name:
                    continue
                where = f"{path.relative_to(REPO)}:{node.lineno}"
                assert top in providing, (
                    f"{where}: no installed distribution provides {top!r} (the test extra "
                    "installs every optional one: pip install -e '.[test]')"
                )
                for dist in providing[top]:
                    found.setdefault(canonicalize_name(dist), where)
    return found


def test_every_distribution_mcruntime_imports_is_declared_in_its_dependencies_or_extras() -> None:
    """A distribution used only through another's requirements (PyYAML and urllib3 came with
    kubernetes) is missing from what users vet and pin, and goes when that other drops it."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = [
        *config["dependencies"],
        *(r for e in config["optional-dependencies"].values() for r in e),
    ]
    declared = {canonicalize_name(Requirement(line).name) for line in lines}
    missing = {
        dist: where
        for dist, where in _imported_distributions(REPO / "mcruntime").items()
        if dist not in declared and _PART_OF.get(dist) not in declared
    }
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


@pytest.mark.parametrize(("project", "package"), _PLUGIN_DISTRIBUTIONS)
def test_every_distribution_a_provider_imports_is_declared_in_its_own_dependencies(
    project: str, package: str
) -> None:
    """A provider importing pydantic only through mcruntime's requirements breaks the day
    mcruntime drops or re-bounds it, and its users cannot see what it needs."""
    config = tomllib.loads((REPO / project / "pyproject.toml").read_text())["project"]
    declared = {canonicalize_name(Requirement(line).name) for line in config["dependencies"]}
    missing = {
        dist: where
        for dist, where in _imported_distributions(REPO / project / package).items()
        if dist not in declared and _PART_OF.get(dist) not in declared
    }
    assert not missing, f"imported but not declared in {project}/pyproject.toml: {missing}"
