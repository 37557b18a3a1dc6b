""".ci/check_snippets.py builds the modules it type-checks as the docs' pages have them.

The checker itself runs in CI (mypy --strict and strict pyright over the modules); here, what
it builds: each line of a module is the page's line it names in an error, and the names a
fragment uses without defining come typed from its context only where the page has not
defined them first.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def check_snippets() -> Iterator[ModuleType]:
    pytest.importorskip("mypy", reason="the checker runs mypy (the lint extra)")
    spec = importlib.util.spec_from_file_location(
        "check_snippets", REPO / ".ci" / "check_snippets.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def test_every_line_of_a_module_names_its_line_of_the_page(
    check_snippets: ModuleType, tmp_path: Path
) -> None:
    modules = check_snippets.modules(tmp_path)
    assert {m.page for m in modules} >= {"README.md", "docs/getting-started.md"}
    for module in modules:
        page = (REPO / module.page).read_text().splitlines()
        lines = module.path.read_text().splitlines()
        assert len(lines) == len(module.lines), module.path.name
        for line, page_line in zip(lines, module.lines, strict=True):
            if page_line:
                # the same text, but a `from __future__` import, which only a module's first line has
                assert line == page[page_line - 1] or page[page_line - 1].startswith(
                    "from __future__"
                ), (module.page, page_line)
        assert module.where(1) is None  # the context's import, no line of the page
        first_of_page = next(i for i, n in enumerate(module.lines) if n) + 1
        assert module.where(first_of_page) == f"{module.page}:{module.lines[first_of_page - 1]}"


def test_a_page_showing_a_package_a_file_at_a_time_is_a_module_per_file(
    check_snippets: ModuleType, tmp_path: Path
) -> None:
    # docs/writing-a-provider.md shows mcruntime_static/__init__.py, then plugin.py importing
    # from it: one module, its classes would be redefined by the import
    pages = [m.page for m in check_snippets.modules(tmp_path)]
    assert pages.count("docs/writing-a-provider.md") >= 2


def test_context_names_come_in_only_where_the_page_has_not_defined_them(
    check_snippets: ModuleType,
) -> None:
    source = (
        "mgr.start()\n"  # used, never defined: the context's Manager
        "def reconcile(req: Request) -> None:\n"  # a parameter: the function's own
        "    client = mgr.get_cluster(req.cluster_name).client\n"
        "    client.get('v1/ConfigMap', req.name, req.namespace)\n"
        "cluster = mcruntime.Cluster.from_kubeconfig()\n"  # defined before its use
        "cluster.client\n"
        "fleet.freeze('cluster-1')\n"  # used before the page's own binding
        "fleet = None\n"
    )
    imported = check_snippets._from_context(source)
    assert "mgr" in imported and "Request" in imported and "mcruntime" in imported
    assert "fleet" in imported
    assert "cluster" not in imported
    assert "not_in_context" not in check_snippets._from_context("not_in_context()\n")
