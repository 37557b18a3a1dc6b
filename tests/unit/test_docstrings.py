"""Docstrings are Markdown: no reST role (``:class:`X` ``) that the API reference would print as text."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = ["mcruntime", "providers", "examples", "tests", "docs"]


def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", REPO / ".ci" / "mkdocs_hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_rest_roles_in_sources_or_docs() -> None:
    role = _hooks().SOURCE_ROLE
    this = Path(__file__).resolve()
    found = []
    for base in SOURCES:
        for path in sorted((REPO / base).rglob("*")):
            if path.suffix not in (".py", ".md") or path == this or ".venv" in path.parts:
                continue
            for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if role.search(line):
                    found.append(f"{path.relative_to(REPO)}:{lineno}: {line.strip()}")
    assert not found, "reST roles; use [`Name`][mcruntime.pkg.Name] or `code`:\n" + "\n".join(found)


def test_docs_hook_refuses_a_page_with_a_literal_role() -> None:
    pytest.importorskip("mkdocs", reason="the docs extra (mkdocs) is not installed")
    hooks = _hooks()
    page = type("Page", (), {"file": type("File", (), {"src_uri": "reference/x.md"})()})()
    assert hooks.on_page_content("<p>See <code>Client</code>.</p>", page=page) == (
        "<p>See <code>Client</code>.</p>"
    )
    with pytest.raises(Exception, match=r"reference/x\.md: 1 literal reST role") as caught:
        hooks.on_page_content("<p>See :class:<code>Client</code>.</p>", page=page)
    assert type(caught.value).__name__ == "PluginError"
