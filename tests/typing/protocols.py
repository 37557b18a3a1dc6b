"""What a user's type checker sees of mcruntime's protocols, implemented with the user's own
parameter names: checked by ``mypy`` and ``pyright`` (strict; see pyproject.toml), never run.

mcruntime calls a provider, a validator, a defaulter, a spoke, an admission handler, a
source, a runnable, a coordinator or a handler's queue's methods with positional arguments, so its protocols
take them positionally: pyright matched keyword-capable parameters by name, and refused an
implementation whose names differed (``def get(self, name)`` for ``get(self, cluster_name)``).
A missing method is still an error: each ``# type: ignore[...]`` fails as unused if it is not.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import mcruntime
from mcruntime import Request
from mcruntime.cache import Informer
from mcruntime.client import KindLike
from mcruntime.cluster import Cluster
from mcruntime.event import CreateEvent
from mcruntime.handler import EventHandler, RequestQueue
from mcruntime.manager import Runnable
from mcruntime.multicluster import Aware, IndexFunc, Provider, ProviderRunnable
from mcruntime.source import Source, SourceHandle
from mcruntime.webhook import (
    AdmissionHandler,
    AdmissionRequest,
    AdmissionResponse,
    Defaulter,
    Spoke,
    Validator,
    allowed,
)
from tests.typing.client_returns import Widget


class Fleet:
    def __init__(self) -> None:
        self.members: dict[str, Cluster] = {}

    def get(self, name: str) -> Cluster:
        return self.members[name]

    def index_field(self, k: KindLike, path: str, extract: IndexFunc) -> None: ...

    def start(self, manager: Aware, done: threading.Event) -> None:
        for name, c in self.members.items():
            manager.engage(name, c, done)


class Engager:
    def engage(self, name: str, c: Cluster, until: threading.Event) -> None: ...


class WidgetValidator:
    def validate_create(self, req: AdmissionRequest, widget: Widget) -> list[str] | None:
        return None

    def validate_update(
        self, req: AdmissionRequest, before: Widget, after: Widget
    ) -> list[str] | None:
        return None

    def validate_delete(self, req: AdmissionRequest, widget: Widget) -> list[str] | None:
        return None


class WidgetDefaulter:
    def default(self, req: AdmissionRequest, widget: Widget) -> None: ...


class V1beta1:
    def to_hub(self, o: dict[str, Any]) -> dict[str, Any]:
        return o

    def from_hub(self, o: dict[str, Any]) -> dict[str, Any]:
        return o


class PodMutator:
    def handle(self, req: AdmissionRequest) -> AdmissionResponse:
        return allowed()


class Ticker:
    def start(self, done: threading.Event) -> None:
        done.wait()


class Timer:
    def start(self, name: str, c: Cluster | None, q: RequestQueue) -> SourceHandle:
        raise NotImplementedError

    def informers(self, c: Cluster | None) -> Sequence[Informer]:
        return []

    def accepts(self, name: str) -> bool:
        return True


def implementations(mgr: mcruntime.Manager) -> None:
    provider: Provider = Fleet()
    runnable: ProviderRunnable = Fleet()
    aware: Aware = Engager()
    validator: Validator = WidgetValidator()
    defaulter: Defaulter = WidgetDefaulter()
    spoke: Spoke = V1beta1()
    handler: AdmissionHandler = PodMutator()
    ticker: Runnable = Ticker()
    source: Source = Timer()
    print(provider, runnable, aware, validator, defaulter, spoke, handler, ticker, source)
    mcruntime.Manager(provider=Fleet())
    hooks = mcruntime.webhook_managed_by(mgr).for_(Widget)
    hooks.with_validator(WidgetValidator()).with_defaulter(WidgetDefaulter())
    mcruntime.controller_managed_by(mgr).watches(Timer())
    mgr.add(Ticker())


class Nameless:
    def get(self, name: str) -> Cluster:
        raise KeyError(name)


def missing(mgr: mcruntime.Manager) -> None:
    mcruntime.Manager(provider=Nameless())  # type: ignore[arg-type]
    mcruntime.webhook_managed_by(mgr).with_validator(WidgetDefaulter())  # type: ignore[arg-type]


class RecordingQueue:
    """A test's fake queue for a user's own event handler."""

    def __init__(self) -> None:
        self.requests: list[Request] = []

    def add(self, req: Request, *, priority: int | None = None) -> None:
        self.requests.append(req)

    def add_after(self, req: Request, delay: float, *, priority: int | None = None) -> None:
        self.requests.append(req)

    def add_rate_limited(self, req: Request, *, priority: int | None = None) -> None:
        self.requests.append(req)


def handler_test(handler: EventHandler, event: CreateEvent) -> None:
    queue = RecordingQueue()
    handler.create(event, queue)
