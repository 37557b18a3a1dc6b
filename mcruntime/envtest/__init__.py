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

from mcruntime._exports import publish
from mcruntime.envtest._fleet import Fleet
from mcruntime.envtest._proxy import Proxy
from mcruntime.envtest._server import APIServer
from mcruntime.envtest._wait import (
    DEFAULT_WAIT_TIMEOUT,
    WaitTimeout,
    wait_for,
    wait_for_condition,
    wait_for_event,
)

__all__ = [
    "APIServer",
    "DEFAULT_WAIT_TIMEOUT",
    "Fleet",
    "Proxy",
    "WaitTimeout",
    "wait_for",
    "wait_for_condition",
    "wait_for_event",
]

publish(__name__, globals(), __all__)
