"""mcruntime: Kubernetes controllers that reconcile across a dynamic fleet of clusters.

The public names are re-exported here; submodules hold the layers
(``mcruntime.client``, ``cache``, ``workqueue``, ``controller``, ``manager``,
``multicluster``, ``providers``, ``plugins``, ``envtest`` ...).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from typing import TYPE_CHECKING, Any

try:
    # one version source: the distribution's metadata (pyproject.toml)
    __version__ = importlib.metadata.version("mcruntime")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree not installed
    __version__ = "0+unknown"

# The one list of the top-level exports: name -> public package it comes from. They are
# imported on first use (``import mcruntime`` stays cheap); ``__all__`` is derived from it,
# and tests/unit/test_public_api.py checks that the TYPE_CHECKING imports below match it.
_EXPORTS: dict[str, str] = {
    "Request": "mcruntime.reconcile",
    "Result": "mcruntime.reconcile",
    "TerminalError": "mcruntime.reconcile",
    "RequeueAfter": "mcruntime.reconcile",
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

__all__ = [*_EXPORTS, "__version__"]

if TYPE_CHECKING:
    # for type checkers only; the ``X as X`` form marks an explicit re-export
    from mcruntime.builder import controller_managed_by as controller_managed_by
    from mcruntime.builder import webhook_managed_by as webhook_managed_by
    from mcruntime.client import Resource as Resource
    from mcruntime.cluster import Cluster as Cluster
    from mcruntime.controller import Controller as Controller
    from mcruntime.controller import ControllerOptions as ControllerOptions
    from mcruntime.controller import EngageOptions as EngageOptions
    from mcruntime.errors import ClusterNotFound as ClusterNotFound
    from mcruntime.errors import ignore_not_found as ignore_not_found
    from mcruntime.manager import Manager as Manager
    from mcruntime.manager import ManagerOptions as ManagerOptions
    from mcruntime.reconcile import Reconciler as Reconciler
    from mcruntime.reconcile import Request as Request
    from mcruntime.reconcile import RequeueAfter as RequeueAfter
    from mcruntime.reconcile import Result as Result
    from mcruntime.reconcile import TerminalError as TerminalError

if TYPE_CHECKING:
    # the public subpackages, attributes of ``mcruntime`` without an import (``__getattr__``
    # below): declared, so that ``mcruntime.errors.NotFound`` has its type
    from mcruntime import builder as builder
    from mcruntime import cache as cache
    from mcruntime import cli as cli
    from mcruntime import client as client
    from mcruntime import cluster as cluster
    from mcruntime import controller as controller
    from mcruntime import controllerutil as controllerutil
    from mcruntime import crd as crd
    from mcruntime import envtest as envtest
    from mcruntime import errors as errors
    from mcruntime import event as event
    from mcruntime import examples as examples
    from mcruntime import finalizer as finalizer
    from mcruntime import handler as handler
    from mcruntime import healthz as healthz
    from mcruntime import leaderelection as leaderelection
    from mcruntime import manager as manager
    from mcruntime import metrics as metrics
    from mcruntime import multicluster as multicluster
    from mcruntime import plugins as plugins
    from mcruntime import predicate as predicate
    from mcruntime import providers as providers
    from mcruntime import reconcile as reconcile
    from mcruntime import recorder as recorder
    from mcruntime import source as source
    from mcruntime import webhook as webhook
    from mcruntime import workqueue as workqueue


def _is_subpackage(name: str) -> bool:
    return not name.startswith("_") and importlib.util.find_spec(f"mcruntime.{name}") is not None


def _lazy_attribute(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    elif _is_subpackage(name):  # mcruntime.handler, mcruntime.errors ... without an import
        value = importlib.import_module(f"mcruntime.{name}")
    else:
        raise AttributeError(f"module 'mcruntime' has no attribute {name!r}")
    globals()[name] = value
    return value


if not TYPE_CHECKING:
    # hidden from type checkers: a module ``__getattr__`` typed ``-> Any`` would make every
    # name, ``mcruntime.Mangaer`` included, an ``Any`` to them instead of an error; the
    # names it serves are declared above
    __getattr__ = _lazy_attribute


def __dir__() -> list[str]:
    return __all__
