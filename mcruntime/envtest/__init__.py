"""An embedded Kubernetes API server for tests and demos, and a fleet of them.

``APIServer`` serves the Kubernetes REST API over real HTTPS (plain HTTP on
request) on a loopback port, faithfully enough for controllers and kubectl
(CRUD, list/watch with resume and bookmarks, CRDs, status and scale
subresources, Table responses, finalizers, garbage collection, namespace
deletion, bearer-token and client-certificate auth), with fault injection for
tests. ``Fleet`` runs several, one per simulated cluster; ``Proxy`` puts a path
in front of one that can be frozen for a single client. Every server of a process
shares one event-loop thread. ``python -m mcruntime.envtest`` runs a fleet as
its own process. ``wait_for`` polls a condition with a deadline, for tests
that wait on controllers; ``wait_for_condition`` waits for an object's status condition,
``wait_for_event`` for an Event a controller recorded.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mcruntime._exports import publish

# name -> the module that defines it. Imported on first use: the pytest plugin of this
# package is loaded by every pytest run where mcruntime is installed, and the API server
# is too heavy to import for a suite that never starts one
_EXPORTS: dict[str, str] = {
    "APIServer": "mcruntime.envtest._server",
    "DEFAULT_WAIT_TIMEOUT": "mcruntime.envtest._wait",
    "Fleet": "mcruntime.envtest._fleet",
    "Proxy": "mcruntime.envtest._proxy",
    "Snapshot": "mcruntime.envtest._server",
    "WaitTimeout": "mcruntime.envtest._wait",
    "wait_for": "mcruntime.envtest._wait",
    "wait_for_condition": "mcruntime.envtest._wait",
    "wait_for_event": "mcruntime.envtest._wait",
}

__all__ = [
    "APIServer",
    "DEFAULT_WAIT_TIMEOUT",
    "Fleet",
    "Proxy",
    "Snapshot",
    "WaitTimeout",
    "wait_for",
    "wait_for_condition",
    "wait_for_event",
]

if TYPE_CHECKING:
    from mcruntime.envtest._fleet import Fleet as Fleet
    from mcruntime.envtest._proxy import Proxy as Proxy
    from mcruntime.envtest._server import APIServer as APIServer
    from mcruntime.envtest._server import Snapshot as Snapshot
    from mcruntime.envtest._wait import DEFAULT_WAIT_TIMEOUT as DEFAULT_WAIT_TIMEOUT
    from mcruntime.envtest._wait import WaitTimeout as WaitTimeout
    from mcruntime.envtest._wait import wait_for as wait_for
    from mcruntime.envtest._wait import wait_for_condition as wait_for_condition
    from mcruntime.envtest._wait import wait_for_event as wait_for_event


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mcruntime.envtest' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    publish(__name__, {name: value}, [name])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
