"""``multi``: several providers under name prefixes; cluster ``<prefix>#<name>``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, model_validator

from mcruntime._threads import start_thread, thread_name
from mcruntime.errors import ClusterNotFound
from mcruntime.multicluster import PROVIDER_API_VERSION, Aware, IndexFunc, ProviderRunnable
from mcruntime.multicluster import Provider as ProviderProtocol
from mcruntime.plugins import ProviderError, ProviderOptions, ProviderSpec, hookimpl

if TYPE_CHECKING:
    from mcruntime.client import KindLike
    from mcruntime.cluster import Cluster

__all__ = ["Provider", "Options"]

log = logging.getLogger("mcruntime.providers.multi")


class _Child(BaseModel):
    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class Options(ProviderOptions):
    """``providers``: prefix -> ``{"name": provider, "options": {...}}`` (JSON on the command line)."""

    providers: dict[str, _Child]
    separator: str = "#"

    @model_validator(mode="after")
    def _prefixes(self) -> Options:
        for prefix in self.providers:
            why = _prefix_problem(prefix, self.separator)
            if why:
                raise ValueError(f"option 'providers': {why}")
        return self


def _prefix_problem(prefix: str, separator: str) -> str:
    """Why ``prefix`` cannot name a child provider ("" when it can)."""
    if not prefix or separator in prefix:
        return f"bad prefix {prefix!r}: must be non-empty and not contain {separator!r}"
    return ""


#: how often `Provider.start` looks whether a child failed (seconds)
_FAILURE_CHECK = 0.2


class _Prefixed:
    def __init__(self, aware: Aware, prefix: str, separator: str) -> None:
        self.aware, self.prefix, self.separator = aware, prefix, separator

    def engage(self, cluster_name: str, cluster: Cluster, lifetime: threading.Event) -> None:
        self.aware.engage(f"{self.prefix}{self.separator}{cluster_name}", cluster, lifetime)


class Provider:
    """Composes providers: each keeps its own clusters, named ``<prefix><separator><name>``."""

    #: how the manager's log lines name this provider
    provider_name = "multi"

    def __init__(
        self, providers: Mapping[str, ProviderProtocol] | None = None, *, separator: str = "#"
    ) -> None:
        self.separator = separator
        self._lock = threading.Lock()
        self._providers: dict[str, ProviderProtocol] = {}
        self._indexes: list[tuple[Any, str, IndexFunc]] = []
        self._running: tuple[Aware, threading.Event] | None = None
        self._threads: list[threading.Thread] = []
        #: the error of the first child that failed while running
        self._failure: Exception | None = None
        for prefix, p in (providers or {}).items():
            self.add_provider(prefix, p)

    @classmethod
    def from_options(cls, options: Options) -> Provider:
        from mcruntime.plugins import load_provider

        children: dict[str, ProviderProtocol] = {}
        for prefix, child in options.providers.items():
            try:
                children[prefix] = load_provider(child.name, **child.options)
            except ProviderError as exc:  # which of the children, of which provider
                raise ProviderError(
                    f"provider 'multi': option 'providers': child {prefix!r}: {exc}"
                ) from exc.__cause__
        return cls(children, separator=options.separator)

    def add_provider(self, prefix: str, provider: ProviderProtocol) -> None:
        """Add a provider under ``prefix``; started at once if this provider runs."""
        why = _prefix_problem(prefix, self.separator)
        if why:
            raise ValueError(why)
        with self._lock:
            if prefix in self._providers:
                raise ValueError(f"prefix {prefix!r} is taken")
            self._providers[prefix] = provider
            for kind, field, fn in self._indexes:
                provider.index_field(kind, field, fn)
            running = self._running
        if running is not None:
            self._start_child(prefix, provider, *running)

    def _start_child(
        self, prefix: str, provider: ProviderProtocol, aware: Aware, stop: threading.Event
    ) -> None:
        if not isinstance(provider, ProviderRunnable):
            return

        def run() -> None:
            try:
                provider.start(_Prefixed(aware, prefix, self.separator), stop)
            except Exception as exc:
                if stop.is_set():
                    log.exception("provider under prefix %r failed while stopping", prefix)
                    return
                # its clusters are gone and no more come: this provider fails as a whole,
                # and so the manager stops, as for a provider of its own
                exc.add_note(f"(the provider under prefix {prefix!r} of the multi provider)")
                with self._lock:
                    if self._failure is None:
                        self._failure = exc
                stop.set()

        self._threads.append(start_thread(run, thread_name("provider", None, f"multi-{prefix}")))

    def get(self, cluster_name: str) -> Cluster:
        prefix, sep, inner = cluster_name.partition(self.separator)
        with self._lock:
            provider = self._providers.get(prefix) if sep else None
        if provider is None:
            raise ClusterNotFound(
                f"no provider for cluster {cluster_name!r} (expected '<prefix>{self.separator}<name>')"
            )
        return provider.get(inner)

    def index_field(self, kind: KindLike, field: str, fn: IndexFunc) -> None:
        with self._lock:
            self._indexes.append((kind, field, fn))
            providers = list(self._providers.values())
        for p in providers:
            p.index_field(kind, field, fn)

    @property
    def discovery_error(self) -> str | None:
        """The children's discovery errors, each after its prefix (None when none has one)."""
        with self._lock:
            children = list(self._providers.items())
        errors = [
            f"{prefix}: {error}"
            for prefix, p in children
            if (error := getattr(p, "discovery_error", None))
        ]
        return "; ".join(errors) or None

    def wait_for_initial_clusters(self, timeout: float | None = None) -> bool:
        """Block until every child provider that can tell has reported its initial clusters."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            children = list(self._providers.values())
        for p in children:
            wait = getattr(p, "wait_for_initial_clusters", None)
            if callable(wait) and not wait(
                None if end is None else max(0.0, end - time.monotonic())
            ):
                return False
        return True

    def start(self, aware: Aware, stop: threading.Event) -> None:
        """Run every child provider until ``stop``; one that fails stops the others, and its
        error is raised here."""
        children_stop = threading.Event()  # set by ``stop``, or by a child that failed
        with self._lock:
            self._failure = None
            self._running = (aware, children_stop)
            children = list(self._providers.items())
        for prefix, p in children:
            self._start_child(prefix, p, aware, children_stop)
        while not stop.wait(_FAILURE_CHECK) and not children_stop.is_set():
            pass
        children_stop.set()
        for t in self._threads:
            t.join(30)
        with self._lock:
            self._running = None
            self._threads = []
            failure, self._failure = self._failure, None
        if failure is not None and not stop.is_set():
            raise failure


@hookimpl
def mcruntime_providers() -> list[ProviderSpec]:
    return [
        ProviderSpec(
            "multi",
            Options,
            Provider.from_options,
            "several providers under prefixes",
            api_version=PROVIDER_API_VERSION,
        )
    ]
