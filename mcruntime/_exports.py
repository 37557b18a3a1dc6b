"""Public objects report their public package as ``__module__`` (as httpx does).

A class defined in ``mcruntime/manager/_manager.py`` and exported by
``mcruntime.manager`` shows in reprs, tracebacks of type errors, pickles and
documentation as ``mcruntime.manager.Manager``, not as the private module it
happens to live in. Each package ``__init__`` calls `publish()` once, after its
imports.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping

__all__ = ["publish"]


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def publish(package: str, namespace: Mapping[str, object], names: Iterable[str]) -> None:
    """Set ``__module__`` of the classes and functions ``package`` exports to ``package``.

    Only objects whose module is private (has a ``_`` part) change, so an object a
    package re-exports from another public package keeps that package's name.
    """
    for name in names:
        obj = namespace[name]
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if _private(obj.__module__) and not _private(package):
            obj.__module__ = package
