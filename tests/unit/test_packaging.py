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
    ],
)
def test_distribution_ships_py_typed_so_type_checkers_read_its_annotations(project, package):
    assert (REPO / project / package / "py.typed").is_file()
    config = tomllib.loads((REPO / project / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"][package]
