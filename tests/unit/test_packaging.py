"""What the distributions ship for their users' tools."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("project", "package"),
    [
        (".", "mcruntime"),
        ("providers/kubeconfig", "mcruntime_kubeconfig"),
        ("providers/cluster-api", "mcruntime_cluster_api"),
        ("providers/kind", "mcruntime_kind"),
        ("providers/cluster-inventory", "mcruntime_cluster_inventory"),
        # the template third-party providers copy
        ("examples/third-party-provider", "mcruntime_static"),
    ],
)
def test_distribution_ships_py_typed_so_type_checkers_read_its_annotations(project, package):
    assert (REPO / project / package / "py.typed").is_file()
    config = tomllib.loads((REPO / project / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"][package]


@pytest.mark.parametrize(
    "project", sorted(p.parent.name for p in REPO.glob("providers/*/pyproject.toml"))
)
def test_provider_distribution_bounds_mcruntime_below_the_next_minor_version(project):
    """A provider built against the 0.1 API must not install beside an incompatible mcruntime."""
    from packaging.requirements import Requirement

    import mcruntime

    config = tomllib.loads((REPO / "providers" / project / "pyproject.toml").read_text())
    (req,) = [
        Requirement(d) for d in config["project"]["dependencies"] if d.startswith("mcruntime")
    ]
    major, minor = (int(x) for x in mcruntime.__version__.split(".")[:2])
    assert mcruntime.__version__ in req.specifier
    assert f"{major}.{minor + 1}.0" not in req.specifier, str(req)
