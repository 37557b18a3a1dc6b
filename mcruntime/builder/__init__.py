"""The fluent way to build a controller: ``controller_managed_by(mgr).for_(kind)...complete(fn)``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from typing_extensions import TypeIs

from mcruntime._streak import describe_error
from mcruntime.controller import Controller, ControllerOptions, EngageOptions
from mcruntime.handler import EventHandler, enqueue_request_for_object, enqueue_request_for_owner
from mcruntime.predicate import Predicate
from mcruntime.reconcile import Reconciler, ReconcilerFunc, Request
from mcruntime.source import Kind, Source

if TYPE_CHECKING:
    from mcruntime.client import KindLike
    from mcruntime.manager import Manager
    from mcruntime.webhook import AdmissionRequest, Defaulter, Spoke, Validator
    from mcruntime.workqueue import RateLimiter

__all__ = ["Builder", "WebhookBuilder", "controller_managed_by", "webhook_managed_by"]


def _kind_name(kind: KindLike) -> str:
    from mcruntime.client import kind_of

    return kind_of(kind).kind.lower()


def _is_source(kind_or_source: KindLike | Source) -> TypeIs[Source]:
    return hasattr(kind_or_source, "start") and hasattr(kind_or_source, "informers")


class Builder:
    """Collects what a controller watches and how it runs, then [`complete()`][mcruntime.builder.Builder.complete] builds it.

    ``for_(kind)`` reconciles objects of ``kind``; ``owns(kind)`` re-reconciles
    the owner when an owned object changes; ``watches(kind_or_source, handler)``
    adds any other event source. Options and engage options given in several
    calls merge. ``metadata_only=True`` on any of the three watches objects'
    metadata alone (controller-runtime's ``builder.OnlyMetadata``): the cache
    keeps no Secret data or Pod specs, and the reconciler reads the object with
    ``client.get(kind, name, namespace, metadata_only=True)`` (a read without it
    starts a whole-object informer of the kind beside the metadata-only one).
    """

    def __init__(self, mgr: Manager) -> None:
        self._mgr = mgr
        self._name: str | None = None
        self._for: tuple[Any, tuple[Predicate, ...], bool] | None = None
        self._owns: list[tuple[Any, tuple[Predicate, ...], bool, bool]] = []
        self._watches: list[Source] = []
        self._filters: list[Predicate] = []
        self._options = ControllerOptions()
        self._engage = EngageOptions()

    def named(self, name: str) -> Self:
        """Name the controller (logs, metrics, threads). Default: the ``for_`` kind, lowercased."""
        self._name = name
        return self

    def for_(self, kind: KindLike, *predicates: Predicate, metadata_only: bool = False) -> Self:
        """Reconcile objects of ``kind``: each event enqueues the object itself."""
        if self._for is not None:
            raise ValueError("for_() may be called only once per controller")
        self._for = (kind, predicates, metadata_only)
        return self

    def owns(
        self,
        kind: KindLike,
        *predicates: Predicate,
        only_controller: bool = True,
        metadata_only: bool = False,
    ) -> Self:
        """Watch ``kind`` and enqueue the ``for_`` object that controls it (ownerReferences)."""
        self._owns.append((kind, predicates, only_controller, metadata_only))
        return self

    def watches(
        self,
        kind_or_source: KindLike | Source,
        handler: EventHandler | None = None,
        *predicates: Predicate,
        cluster_filter: Callable[[str], bool] | None = None,
        metadata_only: bool = False,
    ) -> Self:
        """Watch a kind (or any [`Source`][mcruntime.source.Source]) with ``handler``."""
        if _is_source(kind_or_source):
            if handler is not None or predicates or metadata_only:
                raise ValueError(
                    "give a Source its handler, predicates and metadata_only when you build it"
                )
            self._watches.append(kind_or_source)
        else:
            self._watches.append(
                Kind(
                    kind_or_source,
                    handler,
                    predicates,
                    cluster_filter=cluster_filter,
                    metadata_only=metadata_only,
                )
            )
        return self

    def with_event_filter(self, *predicates: Predicate) -> Self:
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
        use_priority_queue: bool | None = None,
        failure_events: bool | None = None,
    ) -> Self:
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
                use_priority_queue=use_priority_queue,
                failure_events=failure_events,
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
    ) -> Self:
        """Which clusters to engage; merged with earlier calls."""
        if options is not None:
            self._engage = self._engage.merged(options)
        self._engage = self._engage.merged(
            EngageOptions(local_cluster, provider_clusters, cluster_filter)
        )
        return self

    def engage_with_local_cluster(self, yes: bool = True) -> Self:
        """Engage the manager's own cluster (default: only when there is no provider)."""
        return self.with_engage_options(local_cluster=yes)

    def engage_with_provider_clusters(self, yes: bool = True) -> Self:
        """Engage the provider's clusters (default: yes)."""
        return self.with_engage_options(provider_clusters=yes)

    def cluster_filter(self, fn: Callable[[str], bool]) -> Self:
        """Engage only provider clusters for which ``fn(name)`` is true."""
        return self.with_engage_options(cluster_filter=fn)

    def build(self, reconciler: Reconciler | ReconcilerFunc) -> Controller:
        """Build the controller, add it to the manager, and return it."""
        if self._for is None and not self._watches:
            raise ValueError("a controller needs for_() or watches() before complete()")
        if self._owns and self._for is None:
            raise ValueError("owns() needs for_(): it enqueues the owner of that kind")
        if self._options.failure_events and self._for is None:
            raise ValueError("failure_events needs for_(): its Events are about that kind's object")
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
            kind, preds, for_metadata = self._for
            if options.failure_events:
                ctrl.on_failure = _FailureEvents(self._mgr, name, kind, for_metadata)
            ctrl.watch(
                Kind(
                    kind,
                    enqueue_request_for_object(),
                    (*filters, *preds),
                    metadata_only=for_metadata,
                )
            )
            for owned, opreds, only_controller, owned_metadata in self._owns:
                ctrl.watch(
                    Kind(
                        owned,
                        enqueue_request_for_owner(kind, only_controller=only_controller),
                        (*filters, *opreds),
                        metadata_only=owned_metadata,
                    )
                )
        for src in self._watches:
            if isinstance(src, Kind) and filters:
                src = Kind(
                    src.kind,
                    src.handler,
                    (*filters, *src.predicates),
                    cluster_filter=src.cluster_filter,
                    metadata_only=src.metadata_only,
                )
            ctrl.watch(src)
        self._mgr.add(ctrl)
        return ctrl

    def complete(self, reconciler: Reconciler | ReconcilerFunc) -> Controller:
        """Same as [`build()`][mcruntime.builder.Builder.build]: build the controller and add it to the manager."""
        return self.build(reconciler)


#: the reason of the Events that ``failure_events`` posts
REASON_RECONCILE_ERROR = "ReconcileError"
#: how much of an error's text such an Event carries
_EVENT_MESSAGE_MAX = 1024


class _FailureEvents:
    """Posts a failed reconcile as a ``Warning`` Event about its ``for_`` object (the
    controller's ``on_failure`` with ``failure_events``)."""

    def __init__(self, mgr: Manager, name: str, kind: KindLike, metadata_only: bool) -> None:
        from mcruntime.client import kind_of

        self._mgr = mgr
        self._recorder = mgr.get_event_recorder_for(name)
        self._kind = kind
        self._gvk = kind_of(kind)
        self._metadata_only = metadata_only

    def __call__(self, req: Request, exc: BaseException) -> None:
        from mcruntime.client import to_dict
        from mcruntime.errors import ClusterNotFound, NotFound
        from mcruntime.recorder import WARNING

        try:
            client = self._mgr.get_cluster(req.cluster_name).client
            obj = client.get(
                self._kind, req.name, req.namespace or None, metadata_only=self._metadata_only
            )
        except (ClusterNotFound, NotFound):
            return  # gone: nobody to tell
        meta = to_dict(obj).get("metadata") or {}  # a for_() Resource class's object too
        about = {
            "apiVersion": self._gvk.api_version,
            "kind": self._gvk.kind,
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid") if meta.get(k)},
        }
        text = describe_error(exc)
        if len(text) > _EVENT_MESSAGE_MAX:
            text = text[: _EVENT_MESSAGE_MAX - 3] + "..."
        self._recorder.event(
            about, WARNING, REASON_RECONCILE_ERROR, text, cluster_name=req.cluster_name
        )


def controller_managed_by(mgr: Manager) -> Builder:
    """Start building a controller that ``mgr`` runs."""
    return Builder(mgr)


def _hook_path(prefix: str, gvk: Any) -> str:
    # controller-runtime's paths: a core kind's empty group leaves `--` (`/mutate--v1-pod`)
    group = gvk.group.replace(".", "-")
    return f"/{prefix}-{group}-{gvk.version}-{gvk.kind.lower()}"


class WebhookBuilder:
    """Collects the webhooks of one kind, then [`complete`][mcruntime.builder.WebhookBuilder.complete]
    registers them with the manager's webhook server.

    ``with_defaulter`` serves ``/mutate-<group>-<version>-<kind>``,
    ``with_validator`` ``/validate-<group>-<version>-<kind>`` and
    ``with_converter`` ``/convert-<group>-<kind>`` (each also under
    ``/clusters/<name>`` for every provider cluster). When the kind is a
    pydantic [`Resource`][mcruntime.client.Resource], handlers see typed views.
    """

    def __init__(self, mgr: Manager) -> None:
        self._mgr = mgr
        self._kind: Any = None
        self._defaulter: Any = None
        self._validator: Any = None
        self._converter: tuple[str, Any] | None = None
        self._failure_policy = "Fail"
        self._timeout_seconds = 10

    def for_(self, kind: KindLike) -> Self:
        """The kind the webhooks admit (a string, a Resource class or a kubernetes model class)."""
        if self._kind is not None:
            raise ValueError("for_() may be called only once per webhook builder")
        from mcruntime.client import kind_of

        kind_of(kind)  # a clear error now for a kind that names nothing
        self._kind = kind
        return self

    def with_defaulter(self, defaulter: Defaulter | Callable[[AdmissionRequest, Any], Any]) -> Self:
        """Set defaults on CREATE and UPDATE: a function ``(request, obj)`` or a
        [`Defaulter`][mcruntime.webhook.Defaulter]; changes are sent as a JSON patch."""
        self._defaulter = defaulter
        return self

    def with_validator(
        self, validator: Validator | Callable[[AdmissionRequest, Any], list[str] | None]
    ) -> Self:
        """Validate CREATE, UPDATE and DELETE with a [`Validator`][mcruntime.webhook.Validator],
        or CREATE and UPDATE with one function ``(request, obj)`` (``obj`` the new object),
        which returns warnings or None, or raises [`Denied`][mcruntime.webhook.Denied]."""
        self._validator = validator
        return self

    def with_converter(
        self,
        hub: str,
        spokes: Mapping[
            str,
            Spoke
            | tuple[
                Callable[[dict[str, Any]], dict[str, Any]],
                Callable[[dict[str, Any]], dict[str, Any]],
            ],
        ],
    ) -> Self:
        """Convert between versions through ``hub``: ``spokes`` maps each other version to a
        [`Spoke`][mcruntime.webhook.Spoke] or ``(to_hub, from_hub)`` functions."""
        self._converter = (hub, spokes)
        return self

    def with_failure_policy(self, policy: str) -> Self:
        """``"Fail"`` (default) or ``"Ignore"``: what the API server does when the webhook fails."""
        if policy not in ("Fail", "Ignore"):
            raise ValueError(f"failure policy must be 'Fail' or 'Ignore', got {policy!r}")
        self._failure_policy = policy
        return self

    def with_timeout_seconds(self, seconds: int) -> Self:
        """How long the API server waits for the webhook (1 to 30, default 10)."""
        if not 1 <= seconds <= 30:
            raise ValueError(f"timeoutSeconds must be within 1..30, got {seconds}")
        self._timeout_seconds = seconds
        return self

    def complete(self) -> list[str]:
        """Register the webhooks with the manager's server; returns their paths."""
        from mcruntime.client import kind_of
        from mcruntime.webhook import (
            Converter,
            DefaultingHandler,
            Hook,
            ValidatingHandler,
        )

        if self._kind is None:
            raise ValueError("a webhook needs for_(kind) before complete()")
        if self._defaulter is None and self._validator is None and self._converter is None:
            raise ValueError(
                "a webhook needs with_defaulter(), with_validator() or with_converter()"
            )
        gvk = kind_of(self._kind)
        server = self._mgr.get_webhook_server()
        common = {"failure_policy": self._failure_policy, "timeout_seconds": self._timeout_seconds}
        hooks = []
        if self._defaulter is not None:
            hooks.append(
                Hook(
                    _hook_path("mutate", gvk),
                    DefaultingHandler(self._kind, self._defaulter),
                    mutating=True,
                    kind=self._kind,
                    **common,  # type: ignore[arg-type]
                )
            )
        if self._validator is not None:
            validating = ValidatingHandler(self._kind, self._validator)
            hooks.append(
                Hook(
                    _hook_path("validate", gvk),
                    validating,
                    kind=self._kind,
                    operations=validating.operations,
                    **common,  # type: ignore[arg-type]
                )
            )
        if self._converter is not None:
            if not gvk.group:
                raise ValueError(f"conversion webhooks serve custom resources, not {gvk}")
            hub, spokes = self._converter
            group = gvk.group.replace(".", "-")
            hooks.append(
                Hook(
                    f"/convert-{group}-{gvk.kind.lower()}",
                    converter=Converter(gvk.group, gvk.kind, hub, spokes),
                )
            )
        for hook in hooks:
            server.register(hook.path, hook)
        return [h.path for h in hooks]


def webhook_managed_by(mgr: Manager) -> WebhookBuilder:
    """Start building the webhooks of a kind, served by ``mgr``'s webhook server."""
    return WebhookBuilder(mgr)
