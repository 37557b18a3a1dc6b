"""``namespace``: each namespace of one cluster is a virtual cluster named after it.

A virtual cluster's cache holds only its namespace, and its client refuses
other namespaces. Namespaces appear and disappear while running; a
terminating namespace stays engaged until it is gone, so controllers can
remove their finalizers from its objects.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pydantic import field_validator

from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime._selectors import SelectorError, parse_label_selector
from mcruntime._streak import FailureStreaks, describe_error
from mcruntime.cluster import Cluster
from mcruntime.multicluster import PROVIDER_API_VERSION, Clusters
from mcruntime.plugins import ProviderError, ProviderOptions, ProviderSpec, hookimpl

#: longest wait for the host's first list of namespaces before the initial clusters count as reported
INITIAL_LIST_TIMEOUT = 30.0
#: how long the host may leave the first list of namespaces unanswered before that is a failure
#: to reach it (logged, and the provider's `discovery_error`)
NO_ANSWER_AFTER = 10.0
#: how often the provider looks at its list of namespaces for a failure (seconds)
_CHECK_EVERY = 0.5
#: what fails when the host does not answer (the failure streak's words)
_LISTING = "listing the namespaces"

if TYPE_CHECKING:
    from kubernetes.client import Configuration

    from mcruntime.cache import CacheOptions, Informer
    from mcruntime.client import Client, KindLike

__all__ = ["Provider", "Options", "NamespacedClient", "NamespacedReader"]

log = logging.getLogger("mcruntime.providers.namespace")


class Options(ProviderOptions):
    """The host cluster (``kubeconfig``/``context``, default kubeconfig) and which namespaces count."""

    kubeconfig: str | None = None
    context: str | None = None
    label_selector: str | None = None

    @field_validator("label_selector")
    @classmethod
    def _parses(cls, value: str | None) -> str | None:
        parse_label_selector(value)  # a SelectorError (a ValueError) says what is wrong
        return value


class _Confined:
    """Confinement to one namespace: namespaced kinds default to it and refuse the others."""

    def __init__(self, inner: Any, namespace: str, mapper: Any) -> None:
        self._inner, self.namespace, self._mapper = inner, namespace, mapper

    def _ns(self, kind: KindLike, namespace: str | None) -> str | None:
        if not self._mapper.mapping(kind).namespaced:
            return namespace
        if namespace not in (None, "", self.namespace):
            raise PermissionError(
                f"virtual cluster {self.namespace!r} cannot reach namespace {namespace!r}"
            )
        return self.namespace

    def __getattr__(self, name: str) -> Any:
        """Everything not confined here (``mapping``, ``kind_of``, ``cluster_name`` ...) is the inner one's."""
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)


class NamespacedReader(_Confined):
    """A reader (an `APIReader`, a cache-backed reader) confined to one namespace, as
    `NamespacedClient` confines its reads."""

    def get(self, kind: KindLike, name: str, namespace: str | None = None, **kw: Any) -> Any:
        return self._inner.get(kind, name, self._ns(kind, namespace), **kw)

    def list(self, kind: KindLike, namespace: str | None = None, **kw: Any) -> Any:
        return self._inner.list(kind, self._ns(kind, namespace), **kw)

    def pages(self, kind: KindLike, namespace: str | None = None, **kw: Any) -> Any:
        return self._inner.pages(kind, self._ns(kind, namespace), **kw)


class NamespacedClient(_Confined):
    """A client confined to one namespace: namespaced calls default to it and refuse others.

    Its ``api_reader`` and ``reader`` are confined as well.
    """

    @property
    def api_reader(self) -> NamespacedReader:
        """The inner client's API reader, confined to the namespace."""
        return NamespacedReader(self._inner.api_reader, self.namespace, self._mapper)

    @property
    def reader(self) -> NamespacedReader:
        """The inner client's reader (cache-backed for a cluster's ``client``), confined."""
        return NamespacedReader(self._inner.reader, self.namespace, self._mapper)

    def _obj(self, obj: Any) -> dict[str, Any]:
        """``obj`` as a dict confined to the namespace (typed objects are converted, never passed through)."""
        from mcruntime.client import gvk_of_object, to_dict

        body = obj if isinstance(obj, dict) else to_dict(obj)
        meta = body.setdefault("metadata", {})
        namespace = self._ns(gvk_of_object(obj), meta.get("namespace"))
        if namespace is None:
            meta.pop("namespace", None)
        else:
            meta["namespace"] = namespace
        if not isinstance(obj, dict):
            gvk = gvk_of_object(obj)
            body.setdefault("apiVersion", gvk.api_version)
            body.setdefault("kind", gvk.kind)
        return body

    def _write(self, method: Callable[..., Any], obj: Any, **kw: Any) -> Any:
        from mcruntime.client import to_typed

        result = method(self._obj(obj), **kw)
        return result if isinstance(obj, dict) else to_typed(result, type(obj))

    @property
    def field_manager(self) -> str | None:
        """The inner client's default field manager (set through to it)."""
        value: str | None = self._inner.field_manager
        return value

    @field_manager.setter
    def field_manager(self, value: str | None) -> None:
        self._inner.field_manager = value

    def with_field_manager(self, field_manager: str) -> NamespacedClient:
        return NamespacedClient(
            self._inner.with_field_manager(field_manager), self.namespace, self._mapper
        )

    def subresource(self, subresource: str) -> _NamespacedSubResource:
        return _NamespacedSubResource(self, self._inner.subresource(subresource))

    def get(self, kind: KindLike, name: str, namespace: str | None = None, **kw: Any) -> Any:
        return self._inner.get(kind, name, self._ns(kind, namespace), **kw)

    def list(self, kind: KindLike, namespace: str | None = None, **kw: Any) -> Any:
        return self._inner.list(kind, self._ns(kind, namespace), **kw)

    def create(self, obj: Any, **kw: Any) -> Any:
        return self._write(self._inner.create, obj, **kw)

    def update(self, obj: Any, **kw: Any) -> Any:
        return self._write(self._inner.update, obj, **kw)

    def update_status(self, obj: Any, **kw: Any) -> Any:
        return self._write(self._inner.update_status, obj, **kw)

    def apply(self, obj: Any, **kw: Any) -> Any:
        return self._write(self._inner.apply, obj, **kw)

    def apply_status(self, obj: Any, **kw: Any) -> Any:
        return self._write(self._inner.apply_status, obj, **kw)

    def delete(
        self, kind: KindLike | Any, name: str | None = None, namespace: str | None = None, **kw: Any
    ) -> Any:
        from mcruntime.client import GroupVersionKind, gvk_of_object

        if name is None and not isinstance(kind, str | type | GroupVersionKind):  # delete(obj)
            if namespace is not None:  # it overrides the object's: confined as well
                namespace = self._ns(gvk_of_object(kind), namespace)
            return self._inner.delete(self._obj(kind), None, namespace, **kw)
        return self._inner.delete(kind, name, self._ns(kind, namespace), **kw)

    def delete_all_of(self, kind: KindLike, namespace: str | None = None, **kw: Any) -> Any:
        return self._inner.delete_all_of(kind, self._ns(kind, namespace), **kw)

    def patch(
        self, kind: KindLike, name: str, patch: Any, namespace: str | None = None, **kw: Any
    ) -> Any:
        return self._inner.patch(kind, name, patch, self._ns(kind, namespace), **kw)

    def patch_status(
        self, kind: KindLike, name: str, patch: Any, namespace: str | None = None, **kw: Any
    ) -> Any:
        return self._inner.patch_status(kind, name, patch, self._ns(kind, namespace), **kw)


class _NamespacedSubResource:
    """A subresource client confined to the namespace of its `NamespacedClient`."""

    def __init__(self, confined: NamespacedClient, inner: Any) -> None:
        self._confined, self._inner = confined, inner

    def get(self, kind: KindLike, name: str, namespace: str | None = None, **kw: Any) -> Any:
        return self._inner.get(kind, name, self._confined._ns(kind, namespace), **kw)

    def create(
        self, kind: KindLike, name: str, body: Any, namespace: str | None = None, **kw: Any
    ) -> Any:
        return self._inner.create(kind, name, body, self._confined._ns(kind, namespace), **kw)

    def update(
        self, kind: KindLike, name: str, body: Any, namespace: str | None = None, **kw: Any
    ) -> Any:
        return self._inner.update(kind, name, body, self._confined._ns(kind, namespace), **kw)

    def patch(
        self, kind: KindLike, name: str, patch: Any, namespace: str | None = None, **kw: Any
    ) -> Any:
        return self._inner.patch(kind, name, patch, self._confined._ns(kind, namespace), **kw)


class _NamespaceCluster(Cluster):
    """A cluster confined to the namespace it is named after.

    Its cache holds only the namespace; ``client``, ``api_reader``, ``uncached_client``
    (and ``aclient``, the client's calls as coroutines) refuse other namespaces with
    `PermissionError`. Its clones are confined alike.
    """

    def __init__(
        self,
        config: Configuration,
        *,
        name: str = "",
        cache_options: CacheOptions | None = None,
        uncached: Iterable[KindLike] = (),
        namespace: str | None = None,
    ) -> None:
        from mcruntime.cache import CacheOptions

        #: the namespace it is confined to (its name, unless engaged under another)
        self.namespace = name if namespace is None else namespace
        super().__init__(
            config,
            name=name,
            cache_options=cache_options or CacheOptions(default_namespaces=[self.namespace]),
            uncached=uncached,
        )

    def _wire(self) -> None:
        super()._wire()
        ns = self.namespace
        self.client = NamespacedClient(self.client, ns, self.rest_mapper)  # type: ignore[assignment]
        self.api_reader = NamespacedReader(self.api_reader, ns, self.rest_mapper)  # type: ignore[assignment]
        self._confined_uncached: NamespacedClient | None = None

    def _clone_options(self) -> dict[str, Any]:
        return {**super()._clone_options(), "namespace": self.namespace}

    @property
    def uncached_client(self) -> Client:
        """The cluster's uncached client, confined to the namespace."""
        confined = self._confined_uncached
        if confined is None:
            confined = NamespacedClient(super().uncached_client, self.namespace, self.rest_mapper)
            self._confined_uncached = confined
        return confined  # type: ignore[return-value]


class _Handler:
    """Engages each namespace the host's informer has, and disengages it once it is gone.

    A terminating namespace stays engaged until it is deleted (or no longer
    matches the selector), as multicluster-runtime's: a controller must see
    its objects' ``deletionTimestamp`` to remove its finalizers, or the
    namespace never finishes terminating.
    """

    def __init__(self, provider: Provider) -> None:
        self.p = provider

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        self.on_update(obj, obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        name = new["metadata"]["name"]
        if name not in self.p:
            self.p.add(name, self.p.virtual_cluster(name))

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.p.remove(obj["metadata"]["name"])


class Provider(Clusters):
    """Engages every namespace of ``host`` as a cluster."""

    def __init__(self, host: Cluster, *, label_selector: str | None = None) -> None:
        """Raises `ProviderError` naming the option when ``label_selector`` does not parse."""
        try:
            parse_label_selector(label_selector)
        except SelectorError as exc:
            raise ProviderError(f"provider 'namespace': option 'label_selector': {exc}") from None
        super().__init__("namespace")
        self.host = host
        self.label_selector = label_selector

    @classmethod
    def from_options(cls, options: Options) -> Provider:
        host = Cluster.from_kubeconfig(
            options.kubeconfig, context=options.context, name="namespace-host"
        )
        return cls(host, label_selector=options.label_selector)

    def virtual_cluster(self, namespace: str) -> Cluster:
        """A cluster confined to ``namespace`` that shares the host's configuration.

        Every client it exposes (``client``, ``api_reader``, ``uncached_client``,
        ``aclient``) refuses other namespaces, and so do its clones.
        """
        return _NamespaceCluster(self.host.config, name=namespace)

    reports_initial_clusters = True

    def run(self, stop: threading.Event) -> None:
        from mcruntime.cache import Informer

        mapping = self.host.rest_mapper.mapping("v1/Namespace")
        informer = Informer(
            self.host.rest,
            mapping,
            label_selector=self.label_selector,
            cluster_name=self._host_name,
        )
        informer.add_event_handler(_Handler(self))
        informer.start()
        try:
            # the first list's namespaces are added by the handler before the informer syncs
            self._follow(informer, stop)
        finally:
            informer.stop()
            self.host.stop()

    @property
    def _host_name(self) -> str:
        return self.host.name or "namespace-host"

    def _follow(self, informer: Informer, stop: threading.Event) -> None:
        """Report the initial clusters once the first list is in (or after
        `INITIAL_LIST_TIMEOUT`), and keep `discovery_error` current, until ``stop``.

        The informer logs its failures once per streak, by the host's name; a host that
        does not answer at all is logged here, after `NO_ANSWER_AFTER`.
        """
        streaks = FailureStreaks(
            log, f"provider={self.provider_name}", log_fields(provider=self.provider_name)
        )
        started = time.monotonic()
        synced = reported = False
        while not stop.is_set():
            if not synced:
                synced = informer.wait_for_sync(_CHECK_EVERY, stop=stop)
            elif stop.wait(_CHECK_EVERY):
                return
            waited = time.monotonic() - started
            error = informer.last_error
            if error is not None:
                self.discovery_error = (
                    f"host cluster {display_name(self._host_name)}: {describe_error(error)}"
                )
            elif not synced and waited >= NO_ANSWER_AFTER:
                self.discovery_error = (
                    f"host cluster {display_name(self._host_name)} ({self.host.rest.address}) "
                    f"has not answered the list of namespaces in {waited:.0f}s"
                )
                if not streaks.failures(_LISTING):
                    streaks.failed(
                        self._host_name,
                        _LISTING,
                        f"no answer from {self.host.rest.address} in {NO_ANSWER_AFTER:g}s",
                        retry="still waiting",
                        key=_LISTING,
                    )
            else:
                self.discovery_error = None
            if synced:
                streaks.recovered(self._host_name, _LISTING, key=_LISTING)
            if not reported and (synced or waited >= INITIAL_LIST_TIMEOUT):
                self.initial_clusters_reported()
                reported = True


@hookimpl
def mcruntime_providers() -> list[ProviderSpec]:
    return [
        ProviderSpec(
            "namespace",
            Options,
            Provider.from_options,
            "each namespace as a cluster",
            api_version=PROVIDER_API_VERSION,
        )
    ]
