"""The public surface: the top-level exports agree with each other, subpackages are attributes,
and public objects report their public package as ``__module__``."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import mcruntime

INIT = Path(mcruntime.__file__)


def _public_modules() -> list[str]:
    names = ["mcruntime"]
    for info in pkgutil.walk_packages(mcruntime.__path__, "mcruntime."):
        parts = info.name.split(".")
        if not any(p.startswith("_") for p in parts) and parts[1] not in ("examples",):
            names.append(info.name)
    return names


def _type_checking_imports() -> dict[str, str]:
    """name -> module of the ``if TYPE_CHECKING:`` imports of ``mcruntime/__init__.py``
    (a subpackage imported ``from mcruntime import x as x`` maps to ``mcruntime``)."""
    tree = ast.parse(INIT.read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for sub in node.body:
                assert isinstance(sub, ast.ImportFrom) and sub.module, ast.unparse(sub)
                for alias in sub.names:
                    assert alias.asname == alias.name, f"{alias.name}: use 'X as X' (re-export)"
                    found[alias.name] = sub.module
    return found


def test_top_level_exports_all_and_type_checking_imports_agree():
    exports = mcruntime._EXPORTS
    declared = _type_checking_imports()
    assert {k: v for k, v in declared.items() if v != "mcruntime"} == exports
    assert sorted(mcruntime.__all__) == sorted([*exports, "__version__"])
    for name, package in exports.items():
        assert getattr(mcruntime, name) is getattr(importlib.import_module(package), name)
        assert name in importlib.import_module(package).__all__, f"{package} does not export {name}"


def test_every_public_subpackage_is_an_attribute_without_importing_it():
    subpackages = sorted({name.split(".")[1] for name in _public_modules() if name != "mcruntime"})
    code = (
        "import mcruntime\n"
        f"for name in {subpackages!r}:\n"
        "    assert getattr(mcruntime, name).__name__ == 'mcruntime.' + name, name\n"
        "try:\n"
        "    mcruntime.no_such_thing\n"
        "except AttributeError as exc:\n"
        "    assert 'no_such_thing' in str(exc)\n"
        "else:\n"
        "    raise SystemExit('no AttributeError for an unknown name')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert "handler" in subpackages and "errors" in subpackages


def test_type_checkers_see_every_public_subpackage_and_no_module_getattr():
    # a module __getattr__ seen by type checkers makes ``mcruntime.<anything>`` Any to them
    # (a typo passes mypy --strict and pyright --strict); the lazily imported subpackages are
    # declared to them instead, each as an explicit re-export
    subpackages = {name.split(".")[1] for name in _public_modules() if name != "mcruntime"}
    declared = {k for k, v in _type_checking_imports().items() if v == "mcruntime"}
    assert declared == subpackages | {"examples"}
    tree = ast.parse(INIT.read_text())
    visible = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
    ]
    assert not visible, "define __getattr__ under `if not TYPE_CHECKING:` only"
    assert callable(mcruntime.__getattr__)  # still there at run time


def test_public_objects_report_their_public_package_as_module():
    wrong = []
    for package in _public_modules():
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            home = obj.__module__
            if any(p.startswith("_") for p in home.split(".")):
                wrong.append(f"{package}.{name}: __module__ is {home}")
            elif getattr(importlib.import_module(home), obj.__name__, None) is not obj:
                wrong.append(f"{package}.{name}: {home}.{obj.__name__} is another object")
    assert not wrong, "\n".join(wrong)
    assert mcruntime.Manager.__module__ == "mcruntime.manager"


def test_version_comes_from_the_distribution_metadata():
    assert mcruntime.__version__ == importlib.metadata.version("mcruntime")
