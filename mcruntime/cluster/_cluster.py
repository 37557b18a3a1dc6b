"""``Cluster``: one cluster's config, REST access, RESTMapper, cache, client and lifetime."""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from kubernetes.client import ApiClient, Configuration

from mcruntime._kubeconfig import (
    in_cluster_config,
    load_config,
    new_api_client,
    swap_credentials,
)
from mcruntime._lifetime import on_end
from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime.client import (
    APIReader,
    AsyncClient,
    CallThreads,
    Client,
    GroupVersionKind,
    KindLike,
    RESTClient,
    RESTMapper,
    address_of,
    kind_of,
)

if TYPE_CHECKING:
    from mcruntime.cache import Cache, CacheOptions

__all__ = ["Cluster"]

log = logging.getLogger("mcruntime.cluster")


class _Options(TypedDict, total=False):
    """The keywords of `Cluster` that ``from_kubeconfig``, ``from_config`` and ``in_cluster``
    pass on (a misspelled one is an error to type checkers as to Python)."""

    cache_options: CacheOptions | None
    uncached: Iterable[KindLike]


#: the names each config was said unverified for: a clone (each engagement, each reader a
#: coordinator makes) shares its cluster's config and does not say it again
_unverified: weakref.WeakKeyDictionary[Configuration, set[str]] = weakref.WeakKeyDictionary()
_unverified_lock = threading.Lock()


def _first(config: Configuration, name: str) -> bool:
    """Whether a Cluster of ``config`` named ``name`` is made for the first time."""
    with _unverified_lock:
        names = _unverified.setdefault(config, set())
        if name in names:
            return False
        names.add(name)
        return True


class _ClusterReader:
    """Reads from the cluster's cache, except kinds configured as uncached (read from the API)."""

    def __init__(self, cluster: Cluster, uncached: frozenset[GroupVersionKind]) -> None:
        self._cluster = cluster
        self._uncached = uncached

    def _reader(self, kind: KindLike) -> Any:
        if self._uncached and kind_of(kind) in self._uncached:
            return self._cluster.api_reader
        return self._cluster.cache

    def get(
        self,
        kind: KindLike,
        name: str,
        namespace: str | None = None,
        *,
        metadata_only: bool = False,
    ) -> dict[str, Any]:
        obj: dict[str, Any] = self._reader(kind).get(
            kind, name, namespace, metadata_only=metadata_only
        )
        return obj

    def copy_reads(self, kind: KindLike) -> bool:
        """Whether `Client` copies the objects it reads of ``kind`` (see `Cache.copy_reads`)."""
        reader = self._reader(kind)
        return reader is not self._cluster.cache or reader.copy_reads(kind)

    #: `Client.list` hands ``limit`` over: a kind read from the API sends it as the list's
    #: ``limit`` (one short request, not the whole collection cut down here)
    takes_limit = True

    def list(
        self,
        kind: KindLike,
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
        limit: int | None = None,
        metadata_only: bool = False,
    ) -> list[dict[str, Any]]:
        reader = self._reader(kind)
        more: dict[str, Any] = {"limit": limit} if reader is self._cluster.api_reader else {}
        items: list[dict[str, Any]] = reader.list(
            kind,
            namespace,
            labels=labels,
            fields=fields,
            index=index,
            metadata_only=metadata_only,
            **more,
        )
        if limit is not None and limit > 0 and not more:
            items = items[:limit]
        return items


class Cluster:
    """One cluster: ``config``, ``rest``, ``rest_mapper``, ``cache``, ``client``, ``api_reader``.

    ``client`` reads from the cache (an informer per kind starts on its first
    read, as in controller-runtime; kinds listed in ``uncached`` are read from
    the API) and writes to the API. ``api_reader`` always reads the API;
    ``uncached_client`` reads and writes the API, as controller-runtime's
    ``client.New``: for scripts, tests and set-up before the cluster starts.
    [`start()`][mcruntime.cluster.Cluster.start] binds the cluster's lifetime, [`stop()`][mcruntime.cluster.Cluster.stop] ends it: every
    informer thread is joined and the sockets are closed.
    """

    #: the ``kubernetes`` API client of its configuration
    api_client: ApiClient
    #: its HTTP access: every request, with deadlines and retries
    rest: RESTClient
    #: kinds to resources, by discovery
    rest_mapper: RESTMapper
    #: reads from the API, never the cache
    api_reader: APIReader
    #: reads from the cache (kinds in ``uncached`` from the API), writes to the API
    client: Client

    def __init__(
        self,
        config: Configuration,
        *,
        name: str = "",
        cache_options: CacheOptions | None = None,
        uncached: Iterable[KindLike] = (),
    ) -> None:
        if not isinstance(config, Configuration):
            hint = (
                ": a kubeconfig (a path or a dict) is loaded by Cluster.from_kubeconfig(...)"
                if isinstance(config, str | dict | os.PathLike)
                else ""
            )
            raise TypeError(
                f"Cluster(config) takes a kubernetes.client.Configuration, not "
                f"{type(config).__name__}{hint}"
            )
        self.name = name
        self.config = config
        if not config.verify_ssl and str(config.host).startswith("https:") and _first(config, name):
            # said here, once per cluster and by its name (its clones, which share the
            # config, say nothing); urllib3's own warning (unnamed, outside logging) is not
            # given for mcruntime's connections
            log.warning(
                "cluster=%s: the API server's certificate is not verified "
                "(insecure-skip-tls-verify): whoever is on the path to %s can read and "
                "change this cluster's traffic",
                display_name(name),
                address_of(str(config.host)),
                extra=log_fields(cluster=name),
            )
        if cache_options is not None:  # its cache is made on first use: checked now
            from mcruntime.cache import check_options

            check_options(cache_options)
        self.cache_options = cache_options
        self.uncached: frozenset[GroupVersionKind] = frozenset(kind_of(k) for k in uncached)
        self._wire()
        self._lock = threading.RLock()
        self._cache: Cache | None = None
        self._started = False
        self._stopped = threading.Event()
        self._cancel_link: Callable[[], None] | None = None
        #: the REST clients, call threads and API clients of the names it had before a
        #: `rename`: what was obtained from it then still uses them, until it stops
        self._former: list[tuple[RESTClient, CallThreads, ApiClient]] = []

    def _wire(self) -> None:
        """Build what carries the cluster's name: its connections, clients and threads."""
        self.api_client = new_api_client(self.config)
        self.rest = RESTClient(self.api_client, cluster_name=self.name)
        self.rest_mapper = RESTMapper(self.rest)
        self.api_reader = APIReader(self.rest, self.rest_mapper)
        self.client = Client(
            self.rest,
            self.rest_mapper,
            reader=_ClusterReader(self, self.uncached),
            cluster_name=self.name,
        )
        self._aclient: AsyncClient | None = None
        #: the threads of ``aclient``'s calls, this cluster's own (ended by `stop`)
        self._call_threads = CallThreads(self.name)
        self._uncached_client: Client | None = None

    def rename(self, name: str) -> None:
        """Give this cluster, not started yet, the name it is engaged under.

        Its errors, log lines, metrics and threads say its name, and a request that
        failed on it waits for it by that name: a manager engaging a cluster under
        another name (added to a provider as ``m1`` without ``name=``, or engaged as
        ``b#m1`` by the ``multi`` provider) renames it first. Its field indexes are kept.
        A client obtained from it before (``client``, ``uncached_client``, ``api_reader``,
        ``aclient``) keeps working, under the old name in its errors, until the cluster
        stops (the health check of a manager does not cut its calls: take the client
        again after the rename); its ``cache`` of before is stopped.
        Raises `RuntimeError` once it was started.
        """
        with self._lock:
            if name == self.name:
                return
            if self._started or self._stopped.is_set():
                raise RuntimeError(
                    f"cluster {display_name(self.name)} cannot be renamed {display_name(name)}: "
                    "it was started"
                )
            self._former.append((self.rest, self._call_threads, self.api_client))
            cache, self._cache = self._cache, None
            self.name = name
            self._wire()
            _copy_field_indexes(cache, self)
        if cache is not None:
            cache.stop()

    # -- construction ---------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | os.PathLike[str] | dict[str, Any] | None = None,
        context: str | None = None,
        name: str = "",
        *,
        allow_exec: bool = True,
        allow_files: bool = True,
        **options: Unpack[_Options],
    ) -> Cluster:
        """From a kubeconfig file, a list of files, or its content as a dict (default: $KUBECONFIG,
        in-cluster, ``~/.kube/config``); ``context`` defaults to the current-context.

        A kubeconfig read from a place less trusted than this process (a Secret) should be
        loaded with ``allow_exec=False`` (no ``exec`` plugin or ``auth-provider`` runs in
        this process) and ``allow_files=False`` (no local file, such as the pod's service
        account token, is read and sent to the server it names); providers that read
        kubeconfigs from Secrets do so unless told otherwise. ``options`` are the
        ``cache_options`` and ``uncached`` of `Cluster`.
        """
        configuration = load_config(
            path=path, context=context, allow_exec=allow_exec, allow_files=allow_files
        )
        return cls(configuration, name=name, **options)

    @classmethod
    def from_config(
        cls, configuration: Configuration, name: str = "", **options: Unpack[_Options]
    ) -> Cluster:
        """From a ready ``kubernetes.client.Configuration`` (``options`` as for `from_kubeconfig`)."""
        return cls(configuration, name=name, **options)

    @classmethod
    def in_cluster(cls, name: str = "", **options: Unpack[_Options]) -> Cluster:
        """From the pod's service account (in-cluster config)."""
        return cls(in_cluster_config(), name=name, **options)

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else ("started" if self._started else "new")
        return f"Cluster(name={display_name(self.name)!r}, host={address_of(self.rest.host)!r}, {state})"

    @property
    def aclient(self) -> AsyncClient:
        """`client`'s calls as coroutines, for ``async def`` reconcilers (see `AsyncClient`)."""
        ac = self._aclient
        if ac is None or ac.client is not self.client:
            ac = self._aclient = AsyncClient(self.client, threads=self._call_threads)
        return ac

    @property
    def uncached_client(self) -> Client:
        """A `Client` that reads (and writes) the API, never the cache: it needs no started
        cluster, and each read is a request. A controller reads through ``client``."""
        uc = self._uncached_client
        if uc is None:
            uc = self._uncached_client = Client(self.rest, self.rest_mapper, cluster_name=self.name)
        return uc

    # -- cache ----------------------------------------------------------------------

    @property
    def cache(self) -> Cache:
        """The informer cache of this cluster (created on first use)."""
        cache = self._cache  # set once: every cache read comes here, without the lock
        if cache is not None:
            return cache
        with self._lock:
            if self._cache is None:
                from mcruntime.cache import Cache

                self._cache = Cache(
                    self.rest, self.rest_mapper, options=self.cache_options, cluster_name=self.name
                )
                if self._stopped.is_set():
                    self._cache.stop()  # reads of a cluster that left raise ClusterLeft
                elif self._started:
                    self._cache.start()
            return self._cache

    def clone(self) -> Cluster:
        """A new, unstarted Cluster with this one's configuration, options and field indexes.

        A Cluster whose engagement ended is stopped for good; a provider that
        engages the same cluster again engages a clone. A subclass's clone is of
        the subclass (built with these constructor arguments), so what it adds,
        such as a namespace provider's confinement, holds in its clones too.
        """
        fresh = type(self)(self.config, name=self.name, **self._clone_options())
        with self._lock:
            cache = self._cache
        _copy_field_indexes(cache, fresh)
        return fresh

    def _clone_options(self) -> dict[str, Any]:
        """The constructor's keyword arguments (but ``name``) a clone is built with; a
        subclass with arguments of its own adds them."""
        return {"cache_options": self.cache_options, "uncached": self.uncached}

    def update_credentials(self, new: Cluster | Configuration) -> list[str] | None:
        """Send ``new``'s credentials from now on, if they are all that differs from its own.

        For a cluster whose kubeconfig was rotated: ``new`` (a `Cluster` or a
        ``Configuration`` loaded from the changed kubeconfig) must reach the same cluster
        the same way (the same server, certificate authority, proxy, TLS server name,
        insecure flag and impersonation; a `Cluster`, the same class and options) and
        differ only in its user's credentials: its token or token file, client
        certificate and key, exec plugin, auth-provider, username and password. Then this
        cluster, its clones and the clients taken from it send them from their next
        request and watch on; connections that present an old client certificate are
        closed (those in use once released), so the next ones present the new one. An
        open watch streams on (the server does not authenticate it again); when it ends,
        the next one is opened with the new credentials, and an informer whose list or
        watch failed with the old ones (revoked: 401) tries again at once. Nothing
        restarts: informers, caches, queues and the cluster's engagement go on, so
        nothing is listed or reconciled again. One info line says which credentials
        changed, never their value.

        Returns what changed, in words (``["its token"]``); an empty list when nothing
        does; None when nothing was taken, because something else differs, because either
        was not loaded from a kubeconfig (a ``Configuration`` built in code, the
        in-cluster config: what it reaches cannot be told), or because this cluster was
        stopped: engage a new `Cluster` then. ``new`` itself is left as it is.
        [`Clusters.add()`][mcruntime.multicluster.Clusters.add] calls it, so every
        provider swaps a member's rotated credentials in place.
        """
        if isinstance(new, Cluster):
            if type(new) is not type(self) or new._clone_options() != self._clone_options():
                return None
            config = new.config
        elif isinstance(new, Configuration):
            config = new
        else:
            raise TypeError(
                "update_credentials() takes a Cluster or a kubernetes.client.Configuration, "
                f"not {type(new).__name__}"
            )
        with self._lock:
            if self._stopped.is_set():
                return None
            changes = swap_credentials(self.config, config)
            cache = self._cache if self._started else None
        if changes:
            if cache is not None:
                # an informer failing with the credentials before (revoked: 401) tries the
                # new ones now, not after its backoff; the watches that work stream on
                cache.retry_now(only_failing=True)
            log.info(
                "cluster=%s took new credentials in place (%s changed): it is not engaged "
                "again, its informers and caches go on",
                display_name(self.name),
                " and ".join(changes),
                extra=log_fields(cluster=self.name),
            )
        return changes

    def apply_default_cache_options(self, options: CacheOptions) -> bool:
        """Use ``options`` unless this cluster was built with its own (or its cache already runs informers).

        The manager calls this on engagement so one ``ManagerOptions.cache``
        reaches every provider cluster. Returns True when applied.
        """
        with self._lock:
            if self.cache_options is not None:
                return False
            if self._cache is not None and self._cache.all_informers():
                return False
            self.cache_options = options
            if self._cache is not None:
                self._cache.options = options
            return True

    def apply_default_field_manager(self, field_manager: str) -> bool:
        """Make ``client`` write as ``field_manager`` unless it has a field manager of its own.

        The manager calls this on engagement so one ``ManagerOptions.field_manager``
        reaches every cluster. Returns True when applied.
        """
        with self._lock:
            if self.client.field_manager:
                return False
            self.client.field_manager = field_manager
            return True

    # -- lifetime -------------------------------------------------------------------

    @property
    def stopped(self) -> bool:
        """True once [`stop()`][mcruntime.cluster.Cluster.stop] ran (or the lifetime given to [`start()`][mcruntime.cluster.Cluster.start] ended)."""
        return self._stopped.is_set()

    @property
    def started(self) -> bool:
        """True after [`start()`][mcruntime.cluster.Cluster.start], until [`stop()`][mcruntime.cluster.Cluster.stop]."""
        return self._started and not self._stopped.is_set()

    def start(self, stop: threading.Event | None = None) -> None:
        """Start the cache machinery (informers start as kinds are read); idempotent.

        With ``stop``, the cluster stops itself once that event is set.
        """
        with self._lock:
            if self._stopped.is_set():
                raise RuntimeError(
                    f"cluster {display_name(self.name)} was stopped; engage a new Cluster (Cluster.clone())"
                )
            if self._started:
                return
            self._started = True
            if self._cache is not None:
                self._cache.start()
            if stop is not None:
                # the stop is joined: after stop() no thread of the cluster remains
                self._cancel_link = on_end(stop, self.stop, name=self.name, join=True)

    def stop(self) -> None:
        """Stop every informer (threads joined) and close the sockets; idempotent."""
        with self._lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
            cache, cancel = self._cache, self._cancel_link
        if cancel is not None:
            cancel()
        # informers first told to stop, then every socket cut (calls blocked on a hung server
        # end now, with ClusterLeft), then the informer threads joined
        if cache is not None:
            cache.signal_stop()
        wirings = [*self._former, (self.rest, self._call_threads, self.api_client)]
        for rest, _, _ in wirings:
            rest.close()
        for _, threads, _ in wirings:
            threads.close()  # (their calls were just cut: the threads end)
        if cache is not None:
            try:
                cache.stop()
            except Exception:
                log.exception(
                    "cluster=%s stopping the cache failed",
                    display_name(self.name),
                    extra=log_fields(cluster=self.name),
                )
        for _, _, api_client in wirings:
            api_client.close()

    def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        """Wait until every informer created so far has its initial list; False on timeout/stop."""
        with self._lock:
            cache = self._cache
        if cache is None:
            return not self._stopped.is_set()
        return bool(cache.wait_for_cache_sync(timeout))


def _copy_field_indexes(source: Cache | None, to: Cluster) -> None:
    """Register ``source``'s field indexes (none: no cache yet) on ``to``'s cache."""
    if source is None:
        return
    for gvk, fields in source.field_indexes().items():
        for field_name, fn in fields.items():
            to.cache.index_field(gvk, field_name, fn)
