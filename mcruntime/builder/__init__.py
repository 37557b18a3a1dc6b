"""The fluent way to build a controller: ``controller_managed_by(mgr).for_(kind)...complete(fn)``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from mcruntime.controller import Controller, ControllerOptions, EngageOptions
from mcruntime.handler import EventHandler, enqueue_request_for_object, enqueue_request_for_owner
from mcruntime.predicate import Predicate
from mcruntime.reconcile import Request
from mcruntime.source import Kind, Source

if TYPE_CHECKING:
    from mcruntime.manager import Manager
    from mcruntime.workqueue import RateLimiter

__all__ = ["Builder", "controller_managed_by"]


def _kind_name(kind: Any) -> str:
    from mcruntime.client import kind_of

    return kind_of(kind).kind.lower()


class Builder:
    """Collects what a controller watches and how it runs, then :meth:`complete` builds it.

    ``for_(kind)`` reconciles objects of ``kind``; ``owns(kind)`` re-reconciles
    the owner when an owned object changes; ``watches(kind_or_source, handler)``
    adds any other event source. Options and engage options given in several
    calls merge.
    """

    def __init__(self, mgr: Manager) -> None:
        self._mgr = mgr
        self._name: str | None = None
        self._for: tuple[Any, tuple[Predicate, ...]] | None = None
        self._owns: list[tuple[Any, tuple[Predicate, ...], bool]] = []
        self._watches: list[Source] = []
        self._filters: list[Predicate] = []
        self._options = ControllerOptions()
        self._engage = EngageOptions()

    def named(self, name: str) -> Builder:
        """Name the controller (logs, metrics, threads). Default: the ``for_`` kind, lowercased."""
        self._name = name
        return self

    def for_(self, kind: Any, *predicates: Predicate) -> Builder:
        """Reconcile objects of ``kind``: each event enqueues the object itself."""
        if self._for is not None:
            raise ValueError("for_() may be called only once per controller")
        self._for = (kind, predicates)
        return self

    def owns(self, kind: Any, *predicates: Predicate, only_controller: bool = True) -> Builder:
        """Watch ``kind`` and enqueue the ``for_`` object that controls it (ownerReferences)."""
        self._owns.append((kind, predicates, only_controller))
        return self

    def watches(
        self,
        kind_or_source: Any,
        handler: EventHandler | None = None,
        *predicates: Predicate,
        cluster_filter: Callable[[str], bool] | None = None,
    ) -> Builder:
        """Watch a kind (or any :class:`~mcruntime.source.Source`) with ``handler``."""
        if hasattr(kind_or_source, "start") and hasattr(kind_or_source, "informers"):
            if handler is not None or predicates:
                raise ValueError("give a Source its handler and predicates when you build it")
            self._watches.append(kind_or_source)
        else:
            self._watches.append(
                Kind(kind_or_source, handler, predicates, cluster_filter=cluster_filter)
            )
        return self

    def with_event_filter(self, *predicates: Predicate) -> Builder:
        """Predicates applied to every watched kind's events."""
        self._filters.extend(predicates)
        return self

    def with_options(
        self,
        options: ControllerOptions | None = None,
        *,
        max_concurrent_reconciles: int | None = None,
        max_concurrent_reconciles_per_cluster: int | None = None,
        reconcile_timeout: float | None = None,
        rate_limiter: RateLimiter | None = None,
        cache_sync_timeout: float | None = None,
        recover_panic: bool | None = None,
        need_leader_election: bool | None = None,
    ) -> Builder:
        """Controller options; merged with earlier calls, then with the manager's defaults."""
        if options is not None:
            self._options = self._options.merged(options)
        self._options = self._options.merged(
            ControllerOptions(
                max_concurrent_reconciles=max_concurrent_reconciles,
                max_concurrent_reconciles_per_cluster=max_concurrent_reconciles_per_cluster,
                reconcile_timeout=reconcile_timeout,
                rate_limiter=rate_limiter,
                cache_sync_timeout=cache_sync_timeout,
                recover_panic=recover_panic,
                need_leader_election=need_leader_election,
            )
        )
        return self

    def with_engage_options(
        self,
        options: EngageOptions | None = None,
        *,
        local_cluster: bool | None = None,
        provider_clusters: bool | None = None,
        cluster_filter: Callable[[str], bool] | None = None,
    ) -> Builder:
        """Which clusters to engage; merged with earlier calls."""
        if options is not None:
            self._engage = self._engage.merged(options)
        self._engage = self._engage.merged(
            EngageOptions(local_cluster, provider_clusters, cluster_filter)
        )
        return self

    def engage_with_local_cluster(self, yes: bool = True) -> Builder:
        """Engage the manager's own cluster (default: only when there is no provider)."""
        return self.with_engage_options(local_cluster=yes)

    def engage_with_provider_clusters(self, yes: bool = True) -> Builder:
        """Engage the provider's clusters (default: yes)."""
        return self.with_engage_options(provider_clusters=yes)

    def cluster_filter(self, fn: Callable[[str], bool]) -> Builder:
        """Engage only provider clusters for which ``fn(name)`` is true."""
        return self.with_engage_options(cluster_filter=fn)

    def build(self, reconciler: Callable[[Request], Any]) -> Controller:
        """Build the controller, add it to the manager, and return it."""
        if self._for is None and not self._watches:
            raise ValueError("a controller needs for_() or watches() before complete()")
        if self._owns and self._for is None:
            raise ValueError("owns() needs for_(): it enqueues the owner of that kind")
        name = self._name or (_kind_name(self._for[0]) if self._for else "")
        if not name:
            raise ValueError("name the controller with named() when it has no for_() kind")
        if any(c.name == name for c in self._mgr.controllers):
            raise ValueError(
                f"a controller named {name!r} exists already; name this one with named()"
            )
        options = self._mgr.options.controller.merged(self._options)
        ctrl = Controller(
            name,
            reconciler,
            options=options,
            engage_options=self._engage,
            metrics=self._mgr.metrics,
        )
        filters: Sequence[Predicate] = tuple(self._filters)
        if self._for is not None:
            kind, preds = self._for
            ctrl.watch(Kind(kind, enqueue_request_for_object(), (*filters, *preds)))
            for owned, opreds, only_controller in self._owns:
                ctrl.watch(
                    Kind(
                        owned,
                        enqueue_request_for_owner(kind, only_controller=only_controller),
                        (*filters, *opreds),
                    )
                )
        for src in self._watches:
            if isinstance(src, Kind) and filters:
                src = Kind(
                    src.kind,
                    src.handler,
                    (*filters, *src.predicates),
                    cluster_filter=src.cluster_filter,
                )
            ctrl.watch(src)
        self._mgr.add(ctrl)
        return ctrl

    def complete(self, reconciler: Callable[[Request], Any]) -> Controller:
        """Same as :meth:`build`: build the controller and add it to the manager."""
        return self.build(reconciler)


def controller_managed_by(mgr: Manager) -> Builder:
    """Start building a controller that ``mgr`` runs."""
    return Builder(mgr)
