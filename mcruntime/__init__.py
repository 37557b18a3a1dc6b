"""mcruntime: Kubernetes controllers that reconcile across a dynamic fleet of clusters.

The public names are re-exported here; submodules hold the layers
(``mcruntime.client``, ``cache``, ``workqueue``, ``controller``, ``manager``,
``multicluster``, ``providers``, ``plugins``, ``envtest`` ...).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Request": "mcruntime.reconcile",
    "Result": "mcruntime.reconcile",
    "TerminalError": "mcruntime.reconcile",
    "Reconciler": "mcruntime.reconcile",
    "Cluster": "mcruntime.cluster",
    "Manager": "mcruntime.manager",
    "ManagerOptions": "mcruntime.manager",
    "Controller": "mcruntime.controller",
    "ControllerOptions": "mcruntime.controller",
    "EngageOptions": "mcruntime.controller",
    "controller_managed_by": "mcruntime.builder",
    "webhook_managed_by": "mcruntime.builder",
    "Resource": "mcruntime.client",
    "ClusterNotFound": "mcruntime.errors",
    "ignore_not_found": "mcruntime.errors",
}

__all__ = [
    "Cluster",
    "ClusterNotFound",
    "Controller",
    "ControllerOptions",
    "EngageOptions",
    "Manager",
    "ManagerOptions",
    "Reconciler",
    "Request",
    "Resource",
    "Result",
    "TerminalError",
    "__version__",
    "controller_managed_by",
    "ignore_not_found",
    "webhook_managed_by",
]

if TYPE_CHECKING:
    from mcruntime.builder import controller_managed_by, webhook_managed_by
    from mcruntime.client import Resource
    from mcruntime.cluster import Cluster
    from mcruntime.controller import Controller, ControllerOptions, EngageOptions
    from mcruntime.errors import ClusterNotFound, ignore_not_found
    from mcruntime.manager import Manager, ManagerOptions
    from mcruntime.reconcile import Reconciler, Request, Result, TerminalError


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        if name in {"plugins", "providers", "envtest", "errors", "cli", "metrics", "webhook"}:
            return importlib.import_module(f"mcruntime.{name}")
        raise AttributeError(f"module 'mcruntime' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
