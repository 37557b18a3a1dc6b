"""The per-cluster Cache: one shared informer per kind, created on first use, and reads from it."""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from mcruntime import _held_back as held_back
from mcruntime._callables import refuse_coroutine_function
from mcruntime._forked import in_a_forked_child
from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime._selectors import (
    FieldSelector,
    LabelSelector,
    field_label_view,
    with_field_labels_converted,
)
from mcruntime._streak import describe_error
from mcruntime._threads import interrupted, start_thread, thread_name
from mcruntime.cache._informer import Informer, check_page_size
from mcruntime.cache._options import ByKind, CacheOptions
from mcruntime.cache._store import IndexFunc, object_key
from mcruntime.client import deadline, kind_of, remaining
from mcruntime.errors import (
    BadRequest,
    ClusterLeft,
    ClusterNotAnswering,
    DeadlineExceeded,
    Forbidden,
    MCRuntimeError,
    MethodNotSupported,
    NotFound,
    SelectorError,
    Unauthorized,
)

if TYPE_CHECKING:
    from mcruntime.client import GroupVersionKind, KindLike, RESTClient, RESTMapper, RESTMapping

__all__ = [
    "Cache",
    "check_options",
    "CacheNotStarted",
    "CacheStopped",
    "CacheSyncTimeout",
    "FieldIndexFunc",
    "FieldIndexer",
    "ResourceNotCached",
]

log = logging.getLogger("mcruntime.cache")

FieldIndexFunc = IndexFunc


class FieldIndexer(Protocol):
    """Registers field indexes (controller-runtime's `FieldIndexer`).

    [`Cache`][mcruntime.cache.Cache] is one (for its own cluster); the manager's
    [`get_field_indexer()`][mcruntime.manager.Manager.get_field_indexer] returns one
    that indexes every cluster, present and future.
    """

    def index_field(self, kind: KindLike, field: str, fn: FieldIndexFunc) -> None:
        """Index ``field`` of ``kind`` by the values ``fn`` returns for each object (a dict,
        whatever names the kind)."""
        ...


"""Maps an object to the values of an indexed field (several, one str, or None)."""

_ALL_NAMESPACES = "__all_namespaces"
_WATCH_POLL = 0.2


class CacheNotStarted(MCRuntimeError):
    """A read reached a cache that was not started (or was stopped)."""


class CacheStopped(ClusterLeft, CacheNotStarted):
    """A read reached the cache of a cluster that was stopped (it left, or its manager stopped)."""


class ResourceNotCached(MCRuntimeError):
    """A read of a kind that has no informer, by a cache whose options set
    ``reader_fail_on_missing_informer`` (controller-runtime's ``ErrResourceNotCached``): not a
    `NotFound`, the object may well exist. ``cluster_name`` and ``kind`` say which."""

    def __init__(self, message: str, *, cluster_name: str, kind: GroupVersionKind) -> None:
        super().__init__(message)
        self.cluster_name = cluster_name
        self.kind = kind


class CacheSyncTimeout(DeadlineExceeded, TimeoutError):
    """A read waited ``sync_timeout`` for an informer's initial list in vain: a
    `DeadlineExceeded` of its cluster (``cluster_name``), with the informer's last error."""


def _refused_list(inf: Informer) -> Forbidden | Unauthorized | BadRequest | None:
    """The 403, 401 or 400 the cluster answered ``inf``'s last list or watch with, if it did
    (a 400: the server refuses the informer's selectors, e.g. a field it cannot select on)."""
    error = inf.last_error
    return error if isinstance(error, (Forbidden, Unauthorized, BadRequest)) else None


def _index_name(field: str) -> str:
    return "field:" + field


class _NotIndexValues(TypeError):
    """An index function returned something that is no index values (an int, a list of ints)."""


def _a(value: object) -> str:
    """What ``value`` is, without its content: ``a list``, ``an int``."""
    name = type(value).__name__
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


def _field_values(fn: FieldIndexFunc, obj: dict[str, Any]) -> tuple[str, ...]:
    out = fn(obj)
    if out is None:
        return ()
    if isinstance(out, str):
        return (out,)
    values = tuple(out) if isinstance(out, Iterable) and not isinstance(out, Mapping) else None
    if values is None or not all(isinstance(v, str) for v in values):
        # a value that is no str would be found by index= (as its text) but never by fields=
        what = _a(out)
        if values is not None:
            what += f" holding {_a(next(v for v in values if not isinstance(v, str)))}"
        raise _NotIndexValues(
            f"it returned {what}, not a str, a list of str, or None (return str(value) to "
            "index a value)"
        )
    return values


class _IndexFailures:
    """Failures of one cache's field index functions, logged once per index.

    A function that raises is the caller's bug, met by object after object of its
    kind: the first failure of an index is one error line (with the traceback)
    naming the cluster, the kind, the field and the object; the later ones are at
    debug level with their count. The object is left out of the index.
    """

    def __init__(self, cluster_name: str) -> None:
        self.cluster_name = cluster_name
        self._lock = threading.Lock()
        self._counts: dict[tuple[GroupVersionKind, str], int] = {}

    def failed(
        self, gvk: GroupVersionKind, field: str, obj: dict[str, Any], error: BaseException
    ) -> None:
        with self._lock:
            n = self._counts[gvk, field] = self._counts.get((gvk, field), 0) + 1
        who = f"cluster={display_name(self.cluster_name)} cache: index {field!r} of {gvk}"
        if n > 1:
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "%s still failing (%d): %s: %s",
                    who,
                    n,
                    object_key(obj),
                    describe_error(error),
                )
            return
        hint = ""
        returned = isinstance(error, _NotIndexValues)
        if isinstance(error, AttributeError | TypeError) and not returned and isinstance(obj, dict):
            # the likely cause: the function was written for a typed view
            hint = (
                " (index functions get the object as a dict, for a kind named by a typed "
                "class too: read obj['spec'], or make a typed view with Kind.from_dict(obj))"
            )
        log.error(
            "%s: the index function failed for %s: %s%s; the object is left out of the "
            "index, so a list by %r misses it; further failures of this index are logged "
            "at debug level",
            who,
            object_key(obj),
            str(error) if returned else describe_error(error),
            hint,
            field,
            exc_info=None if returned else error,  # what it returned: no trace of the function
        )


def _namespaced_indexer(
    fn: FieldIndexFunc, gvk: GroupVersionKind, field: str, failures: _IndexFailures
) -> Callable[[dict[str, Any]], list[str]]:
    """Index values ``<ns>/<v>`` and ``__all_namespaces/<v>``, so both scopes are one lookup;
    a failing ``fn`` leaves the object out, said by ``failures``."""

    def index(obj: dict[str, Any]) -> list[str]:
        try:
            values = _field_values(fn, obj)
        except BaseException as exc:  # sys.exit() in it: this object, not the watches
            if interrupted(exc):
                raise
            failures.failed(gvk, field, obj, exc)
            return []
        if not values:
            return []
        ns = (obj.get("metadata") or {}).get("namespace")
        out = [f"{_ALL_NAMESPACES}/{v}" for v in values]
        if ns:
            out.extend(f"{ns}/{v}" for v in values)
        return out

    return index


#: every `Cache` of the process, for `_stop_reading_the_parents_caches`
_caches: weakref.WeakSet[Cache] = weakref.WeakSet()


def _stop_reading_the_parents_caches() -> None:
    """In a child just forked: a cache started in the parent has none of its informers here
    (threads of the parent's): its objects would never change again. Its reads raise
    `CacheNotStarted` saying so, instead of answering the parent's objects of the fork's
    moment for ever."""
    parent = os.getppid()
    for cache in list(_caches):
        if cache._live:
            cache._live = False
            cache._forked_from = parent


in_a_forked_child(_stop_reading_the_parents_caches)


class Cache:
    """Reads of one cluster served from informers: one shared informer per kind, made on first use.

    Objects returned are the cached dicts themselves: treat them as read-only.
    Reads before [`start()`][mcruntime.cache.Cache.start] raise [`CacheNotStarted`][mcruntime.cache.CacheNotStarted]; a read of a kind
    whose informer has not synced waits up to ``options.sync_timeout``, or fails at once with
    [`ClusterNotAnswering`][mcruntime.errors.ClusterNotAnswering] while the cluster's calls
    are refused (`RESTClient.refuse_calls`: its manager found it not answering).
    """

    def __init__(
        self,
        rest: RESTClient,
        mapper: RESTMapper,
        *,
        options: CacheOptions | None = None,
        cluster_name: str = "",
    ) -> None:
        self.rest = rest
        self.mapper = mapper
        self.options = options or CacheOptions()  # checked (see the setter)
        self.cluster_name = cluster_name
        self._lock = threading.RLock()
        self._informers: dict[GroupVersionKind, Informer] = {}
        self._metadata_informers: dict[GroupVersionKind, Informer] = {}
        self._mappings: dict[Any, RESTMapping] = {}
        self._field_indexes: dict[GroupVersionKind, dict[str, FieldIndexFunc]] = {}
        self._index_failures = _IndexFailures(cluster_name)
        self._started = False
        self._halt = threading.Event()
        #: started and not halted: read on every cache read, where an Event's is_set() costs
        self._live = False
        #: synced informers by the kind as a read names it: a read's only lookup once synced
        self._ready: dict[Any, Informer] = {}
        self._ready_metadata: dict[Any, Informer] = {}
        self._no_waits = threading.Event()
        self._watcher: threading.Thread | None = None
        #: the process it was started in, when this one was forked from it (its reads fail)
        self._forked_from: int | None = None
        _caches.add(self)

    @property
    def options(self) -> CacheOptions:
        """What this cache watches; set (before its informers are made) to other options, they
        are checked as when the cache is made."""
        return self._options

    @options.setter
    def options(self, options: CacheOptions) -> None:
        self._by_kind = check_options(options)
        self._options = options
        #: kinds whose client reads are the cached objects themselves (``unsafe_disable_deep_copy``)
        self._shared_kinds = frozenset(
            gvk for gvk, by in self._by_kind.items() if by.unsafe_disable_deep_copy
        )

    def __repr__(self) -> str:
        kinds = len(self._informers) + len(self._metadata_informers)
        return f"Cache(cluster={display_name(self.cluster_name)!r}, kinds={kinds})"

    # -- informers --------------------------------------------------------------

    def _mapping(self, kind: KindLike) -> RESTMapping:
        try:
            cached = self._mappings.get(kind)
        except TypeError:
            return self.mapper.mapping(kind)
        if cached is None:
            cached = self.mapper.mapping(kind)
            self._mappings[kind] = cached
        return cached

    def _options_for(self, gvk: GroupVersionKind) -> ByKind | None:
        return self._by_kind.get(gvk)

    def copy_reads(self, kind: KindLike) -> bool:
        """Whether a [`Client`][mcruntime.client.Client] reading ``kind`` from this cache copies
        each object it returns: True unless the kind's
        [`ByKind`][mcruntime.cache.ByKind] sets ``unsafe_disable_deep_copy``."""
        if not self._shared_kinds:
            return True
        return self._mapping(kind).gvk not in self._shared_kinds

    def _new_informer(self, mapping: RESTMapping, metadata_only: bool) -> Informer:
        opts = self.options
        by = self._options_for(mapping.gvk) or ByKind()
        if by.namespaces and all(by.namespaces) and not mapping.namespaced:
            # as controller-runtime refuses it: the namespaces would restrict nothing
            raise ValueError(
                f"CacheOptions.by_kind[{str(mapping.gvk)!r}].namespaces={by.namespaces!r}: "
                f"{mapping.gvk} is cluster-scoped in cluster {display_name(self.cluster_name)}, "
                "so no namespace restricts its cache: leave its namespaces unset"
            )
        namespaces = by.namespaces if by.namespaces is not None else opts.default_namespaces
        label_selector = (
            by.label_selector if by.label_selector is not None else opts.default_label_selector
        )
        transform = by.transform if by.transform is not None else opts.default_transform
        inf = Informer(
            self.rest,
            mapping,
            namespace=list(namespaces) if namespaces else None,
            label_selector=label_selector,
            field_selector=by.field_selector,
            transform=transform,
            resync=opts.resync,
            cluster_name=self.cluster_name,
            metadata_only=metadata_only,
            mapper=self.mapper,
            list_page_size=(
                by.list_page_size if by.list_page_size is not None else opts.list_page_size
            ),
        )
        indexes = None if metadata_only else self._field_indexes.get(mapping.gvk)
        if indexes:
            inf.add_indexers(
                {
                    _index_name(f): _namespaced_indexer(fn, mapping.gvk, f, self._index_failures)
                    for f, fn in indexes.items()
                }
            )
        return inf

    def get_informer(
        self, kind: KindLike, *, start: bool = True, metadata_only: bool = False
    ) -> Informer:
        """The shared informer of ``kind``, created once; started now if the cache is (and ``start``).

        ``metadata_only`` names the kind's metadata-only informer, a separate
        one (it stores objects' metadata alone; see [`Informer`][mcruntime.cache.Informer]).
        Raises [`NoKindMatch`][mcruntime.errors.NoKindMatch] when the cluster does not serve
        ``kind``, and [`MethodNotSupported`][mcruntime.errors.MethodNotSupported] at once when
        its discovery says the kind cannot be listed and watched (an aggregated API such as
        metrics.k8s.io's, a review kind): no informer could ever sync.
        """
        mapping = self._mapping(kind)
        table = self._metadata_informers if metadata_only else self._informers
        # every cache read comes here: a started informer needs nothing done, and a dict read
        # is atomic, so the table is read without the lock (one remove_informer stopped is
        # looked up again under it, where it is gone)
        inf = table.get(mapping.gvk)
        if inf is not None and inf.started and not inf.stopped:
            return inf
        with self._lock:
            inf = table.get(mapping.gvk)
            if inf is None:
                self._check_watchable(mapping)
                inf = self._new_informer(mapping, metadata_only)
                table[mapping.gvk] = inf
                log.debug(
                    "cluster=%s kind=%s informer created%s",
                    display_name(self.cluster_name),
                    mapping.gvk,
                    " (metadata only)" if metadata_only else "",
                    extra=log_fields(cluster=self.cluster_name, kind=str(mapping.gvk)),
                )
            if start and self._live and not inf.started:
                inf.start()
        return inf

    def _check_watchable(self, mapping: RESTMapping) -> None:
        """Refuse a kind whose discovery lists verbs without ``list`` and ``watch``: its
        informer would retry for ever, and a read of it wait ``sync_timeout`` in vain."""
        missing = [v for v in ("list", "watch") if v not in mapping.verbs]
        if not mapping.verbs or not missing:
            return
        raise MethodNotSupported(
            f"{mapping.gvk} cannot be cached or watched: its API allows "
            f"{', '.join(sorted(mapping.verbs))}, not {' and '.join(missing)}; read it with "
            "the API reader (cluster.api_reader)"
            + (", or poll it" if "list" in mapping.verbs else ""),
            reason="MethodNotAllowed",
            cluster_name=self.cluster_name,
        )

    def remove_informer(self, kind: KindLike, *, metadata_only: bool = False) -> bool:
        """Stop and forget the informer of ``kind`` (controller-runtime's ``RemoveInformer``):
        its threads end and its objects are dropped before this returns; its handlers (a
        controller's watch of the kind among them) get no further events. A later read or
        [`get_informer()`][mcruntime.cache.Cache.get_informer] of the kind makes a new one, which
        lists it again. ``metadata_only`` names the kind's metadata-only informer. Returns
        whether there was one; needs no reachable server."""
        gvk = kind_of(kind)  # no discovery: the table is by the kind a name gives
        with self._lock:
            table = self._metadata_informers if metadata_only else self._informers
            inf = table.pop(gvk, None)
            if inf is None:
                return False
            ready = self._ready_metadata if metadata_only else self._ready
            for named in [k for k, v in ready.items() if v is inf]:
                del ready[named]
        inf.stop()
        log.debug(
            "cluster=%s kind=%s informer removed%s",
            display_name(self.cluster_name),
            gvk,
            " (metadata only)" if metadata_only else "",
            extra=log_fields(cluster=self.cluster_name, kind=str(gvk)),
        )
        return True

    def informer_if_exists(self, kind: KindLike, *, metadata_only: bool = False) -> Informer | None:
        """The informer of ``kind`` if one was created, else None (creates nothing)."""
        mapping = self._mapping(kind)
        with self._lock:
            table = self._metadata_informers if metadata_only else self._informers
            return table.get(mapping.gvk)

    def informers(self, *, metadata_only: bool = False) -> dict[GroupVersionKind, Informer]:
        """A snapshot of the informers by kind (``metadata_only``: of the metadata-only ones)."""
        with self._lock:
            return dict(self._metadata_informers if metadata_only else self._informers)

    def all_informers(self) -> builtins.list[Informer]:
        """Every informer of the cache, whole-object and metadata-only."""
        with self._lock:
            return [*self._informers.values(), *self._metadata_informers.values()]

    def field_indexes(self) -> dict[GroupVersionKind, dict[str, FieldIndexFunc]]:
        """Every registered field index by kind (a copy), e.g. to carry them over to a new cache."""
        with self._lock:
            return {gvk: dict(fields) for gvk, fields in self._field_indexes.items()}

    def index_field(self, kind: KindLike, field: str, fn: FieldIndexFunc) -> None:
        """Index objects of ``kind`` by ``field`` with ``fn`` (like controller-runtime's FieldIndexer).

        Applies to the (whole-object) informer of that kind now or when it is
        created; serves ``list(..., index=(field, value))`` and
        ``list(..., fields={field: value})``. ``fn`` gets the cached object as a
        dict, also for a kind named by a typed class (``Kind.from_dict(obj)`` makes
        a typed view); an object it raises for is left out of the index (the first
        failure of the index is logged as an error, naming the cluster, kind and field).
        Registering a different function under the same field is a ValueError.
        """
        if not field:
            raise ValueError("index_field needs a field name")
        refuse_coroutine_function(
            fn,
            f"the index function of field {field!r}",
            "it is called for each cached object as it changes: pass a plain function "
            "returning the object's values",
        )
        gvk = kind_of(kind)  # no discovery: registering an index needs no reachable server
        with self._lock:
            fields = self._field_indexes.setdefault(gvk, {})
            if field in fields:
                if fields[field] is fn:
                    return
                raise ValueError(f"field {field!r} of {gvk} is already indexed")
            fields[field] = fn
            inf = self._informers.get(gvk)
            if inf is not None:
                indexer = _namespaced_indexer(fn, gvk, field, self._index_failures)
                inf.add_indexers({_index_name(field): indexer})

    # -- lifecycle --------------------------------------------------------------

    @property
    def started(self) -> bool:
        """True after [`start()`][mcruntime.cache.Cache.start] (until [`stop()`][mcruntime.cache.Cache.stop])."""
        return self._live

    def start(self, stop: threading.Event | None = None) -> None:
        """Start every informer created so far (later ones start on creation); idempotent.

        With ``stop``, the cache stops itself once that event is set.
        """
        with self._lock:
            if self._halt.is_set():
                raise self._stopped_error()
            if self._started:
                return
            self._started = True
            self._live = True
            informers = self.all_informers()
            if stop is not None:
                self._watcher = start_thread(
                    self._watch_stop, thread_name("cache", self.cluster_name), stop
                )
        for inf in informers:
            inf.start()

    def _watch_stop(self, stop: threading.Event) -> None:
        while not self._halt.is_set():
            if stop.wait(_WATCH_POLL):
                self.stop()
                return

    def cancel_sync_waits(self) -> None:
        """Make reads waiting for an informer's initial list give up now, and later ones at once.

        Reads of synced informers keep working. Called when shutdown begins, so an
        in-flight reconcile reading a kind that cannot sync does not hold it up
        (as a cancelled context does in controller-runtime).
        """
        self._no_waits.set()

    def retry_now(self, *, only_failing: bool = False) -> None:
        """The cluster answers again: every informer skips its backoff and re-watches now
        (``only_failing``: only those whose list or watch fails; working watches stay open)."""
        for inf in self.all_informers():
            inf.retry_now(only_failing=only_failing)

    def signal_stop(self) -> None:
        """Tell every informer to stop, without waiting for their threads (`stop` joins them)."""
        with self._lock:
            self._live = False
            self._halt.set()
            self._no_waits.set()
        for inf in self.all_informers():
            inf._signal_stop()

    def stop(self) -> None:
        """Stop every informer and join their threads; idempotent."""
        self.signal_stop()
        with self._lock:
            informers = self.all_informers()
            watcher = self._watcher
        for inf in informers:
            inf.stop()
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join()

    def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        """Wait until every informer created so far has synced; False on timeout or stop."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for inf in self.all_informers():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not inf.wait_for_sync(left, stop=self._halt):
                return False
        return True

    # -- reads ------------------------------------------------------------------

    def _stopped_error(self) -> CacheStopped:
        return CacheStopped(
            f"[cluster {display_name(self.cluster_name)}] the cluster left: its cache was stopped",
            name=self.cluster_name,
        )

    def _synced_informer(self, kind: KindLike, metadata_only: bool = False) -> Informer:
        # every cache read starts here: once a kind's informer synced, one dict read
        # (an informer stays synced, and the table's entries stay until the cache stops or
        # remove_informer drops one: a read racing that removal reads its last objects)
        if self._live:
            ready = self._ready_metadata if metadata_only else self._ready
            try:
                inf = ready.get(kind)
            except TypeError:  # an unhashable kind: found the long way
                inf = None
            if inf is not None:
                return inf
        inf = self._sync_informer(kind, metadata_only)
        with contextlib.suppress(TypeError):  # an unhashable kind is not remembered
            (self._ready_metadata if metadata_only else self._ready)[kind] = inf
        return inf

    def _sync_informer(self, kind: KindLike, metadata_only: bool) -> Informer:
        if not self._live:
            if self._forked_from is not None:
                raise CacheNotStarted(
                    f"cache of cluster {display_name(self.cluster_name)} was started in process "
                    f"{self._forked_from}, which this process was forked from: its informers "
                    "did not come along, so its objects would never change here; make and "
                    "start a Cluster (or Manager) in this process, after the fork, or read with "
                    "cluster.uncached_client"
                )
            if self._halt.is_set():
                raise self._stopped_error()
            raise CacheNotStarted(
                f"cache of cluster {display_name(self.cluster_name)} is not started: a "
                "cluster's client reads from its cache once the cluster is started (by its "
                "manager, or cluster.start()); cluster.uncached_client reads the API instead"
            )
        if self.options.reader_fail_on_missing_informer:
            self._refuse_missing_informer(kind, metadata_only)
        started = time.monotonic()
        inf = self._discovered_informer(kind, metadata_only)
        if inf.has_synced():
            return inf
        refusing = self.rest.refusing
        if refusing:  # its list cannot be answered before the cluster is: no wait in vain
            held_back.failed(self.cluster_name)  # its reconcile runs again at the answer
            raise ClusterNotAnswering(
                f"[cluster {display_name(self.cluster_name)}] informer for {inf.gvk} not "
                f"synced, and reads of it fail at once until the cluster answers again: "
                f"{refusing}",
                cluster_name=self.cluster_name,
                address=self.rest.address,
            )
        self._raise_refusal(inf)  # refused before: no wait for its next attempt either
        timeout = self.options.sync_timeout
        left = remaining()
        by_deadline = left is not None and (timeout is None or left < timeout)
        if by_deadline:
            timeout = max(0.0, left or 0.0)
        wait = timeout
        if wait is not None and not by_deadline:  # its discovery's time counts too
            wait = max(0.0, wait - (time.monotonic() - started))
        if not inf._wait_synced(wait, self._no_waits, lambda: _refused_list(inf) is not None):
            if self._no_waits.is_set():
                if self._halt.is_set():
                    raise self._stopped_error()
                raise CacheNotStarted(
                    f"cache of cluster {display_name(self.cluster_name)} is stopping"
                )
            self._raise_refusal(inf)
            # no error yet: its list is still waiting for an answer (a hung server)
            reason = f": {inf.last_error}" if inf.last_error else ": its list is not answered yet"
            if by_deadline:
                raise DeadlineExceeded(
                    f"[cluster {display_name(self.cluster_name)}] informer for {inf.gvk} not synced "
                    f"before the deadline{reason}",
                    cluster_name=self.cluster_name,
                    address=self.rest.address,
                )
            raise CacheSyncTimeout(
                f"[cluster {display_name(self.cluster_name)}] informer for {inf.gvk} "
                f"not synced after {timeout:g}s{reason}",
                cluster_name=self.cluster_name,
                address=self.rest.address,
            )
        return inf

    def _refuse_missing_informer(self, kind: KindLike, metadata_only: bool) -> None:
        gvk = kind_of(kind)  # the table is by the kind a name gives: no discovery
        table = self._metadata_informers if metadata_only else self._informers
        if gvk in table:
            return
        flavour = "metadata-only " if metadata_only else ""
        raise ResourceNotCached(
            f"[cluster {display_name(self.cluster_name)}] {gvk} is not cached: no {flavour}"
            "informer of it exists, and the cache's reader_fail_on_missing_informer is set "
            "(watch the kind, start its informer with cache.get_informer, or read it through "
            "the cluster's api_reader)",
            cluster_name=self.cluster_name,
            kind=gvk,
        )

    def _raise_refusal(self, inf: Informer) -> None:
        """Raise the cluster's refusal of ``inf``'s list (403, 401, 400), if its last attempt
        was refused: a read fails at once, as the cluster's own error, instead of holding its
        caller (a reconcile worker every cluster shares) for ``sync_timeout`` at every try."""
        refusal = _refused_list(inf)
        if refusal is None:
            return
        if isinstance(refusal, BadRequest):
            selectors = ", ".join(
                f"{name}={value!r}"
                for name, value in (
                    ("label_selector", inf.label_selector),
                    ("field_selector", inf.field_selector),
                )
                if value
            )
            hint = (
                f"the server refuses the list the cache makes of the kind ({selectors or 'no selector'}): "
                "fix the kind's selectors in CacheOptions, or read through the cluster's api_reader"
            )
        else:
            hint = (
                "a cache read lists and watches its kind: grant list and watch, restrict the "
                "cache to what is granted with CacheOptions, or read through the cluster's "
                "api_reader"
            )
        raise type(refusal)(
            f"informer for {inf.gvk} not synced, and reads of it fail at once until its list "
            f"is allowed (retried with backoff): {refusal.message or refusal.reason} ({hint})",
            status=refusal.status,
            reason=refusal.reason,
            details=refusal.details,
            cluster_name=self.cluster_name,
        ) from refusal

    def _discovered_informer(self, kind: KindLike, metadata_only: bool) -> Informer:
        """The informer of ``kind``; the discovery its first read may need is bounded by
        ``sync_timeout`` too (unless an enclosing deadline ends sooner): a hung server fails
        the read with `CacheSyncTimeout` after it, not after the discovery's own timeout."""
        timeout = self.options.sync_timeout
        left = remaining()
        if timeout is None or (left is not None and left <= timeout):
            return self.get_informer(kind, metadata_only=metadata_only)
        end = time.monotonic() + timeout
        try:
            with deadline(timeout):
                return self.get_informer(kind, metadata_only=metadata_only)
        except DeadlineExceeded as exc:
            if isinstance(exc, ClusterNotAnswering) or time.monotonic() < end:
                raise  # not this bound's doing
            raise CacheSyncTimeout(
                f"[cluster {display_name(self.cluster_name)}] informer for {kind} not synced "
                f"after {timeout:g}s: the discovery of its kind was not answered: "
                f"{describe_error(exc)}",
                cluster_name=self.cluster_name,
                address=self.rest.address,
            ) from exc

    def _check_namespace(self, inf: Informer, namespace: str | None) -> None:
        if namespace and inf.namespaces != (None,) and namespace not in inf.namespaces:
            raise ValueError(
                f"namespace {namespace!r} is not cached for {inf.gvk} in cluster "
                f"{display_name(self.cluster_name)} (cached: {', '.join(str(n) for n in inf.namespaces)})"
            )

    def get(
        self,
        kind: KindLike,
        name: str,
        namespace: str | None = None,
        *,
        metadata_only: bool = False,
    ) -> dict[str, Any]:
        """The cached object ``name`` (in ``namespace`` for namespaced kinds).

        ``metadata_only`` reads the kind's metadata-only informer (started on
        first use, as any informer). Raises [`NotFound`][mcruntime.errors.NotFound]
        when the object is not in the cache.
        """
        inf = self._synced_informer(kind, metadata_only)
        mapping = inf.mapping
        if mapping.namespaced:
            if not namespace:
                raise ValueError(f"{mapping.gvk} is namespaced: get({name!r}) needs a namespace")
            self._check_namespace(inf, namespace)
            key = f"{namespace}/{name}"
        else:
            key = name
        obj = inf.store.get(key)
        if obj is None:
            resource = (
                f"{mapping.resource}.{mapping.gvk.group}" if mapping.gvk.group else mapping.resource
            )
            raise NotFound(
                f'{resource} "{name}" not found',
                reason="NotFound",
                details={"name": name, "group": mapping.gvk.group, "kind": mapping.resource},
                cluster_name=self.cluster_name,
            )
        return obj

    def list(
        self,
        kind: KindLike,
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | LabelSelector | None = None,
        fields: str | Mapping[str, str] | FieldSelector | None = None,
        index: tuple[str, str] | None = None,
        metadata_only: bool = False,
    ) -> builtins.list[dict[str, Any]]:
        """Cached objects of ``kind``, optionally in one ``namespace`` and filtered.

        ``labels``/``fields`` are selectors (text, ``{key: value}`` or parsed);
        ``index=(field, value)`` looks up a field registered with [`index_field()`][mcruntime.cache.Cache.index_field],
        and a ``fields`` term on an indexed field is served by its index too
        (field indexes serve whole-object informers only). ``metadata_only``
        lists from the kind's metadata-only informer.
        """
        inf = self._synced_informer(kind, metadata_only)
        namespaced = inf.mapping.namespaced
        ns = namespace if namespaced and namespace else None
        if ns:
            self._check_namespace(inf, ns)
        label_sel = _label_selector(labels)
        field_sel = _field_selector(fields)
        if field_sel is not None:  # the labels the server renames (a Pod's spec.host)
            field_sel = with_field_labels_converted(inf.gvk.group, inf.gvk.kind, field_sel)
        indexed = {} if metadata_only else self._field_indexes.get(inf.gvk, {})
        store = inf.store

        lookup: tuple[str, str] | None = None
        if index is not None:
            field, value = index
            if metadata_only:
                raise ValueError(
                    f"list(index=...) of {inf.gvk}: field indexes serve whole-object informers "
                    "only; select metadata-only objects with labels= or fields= on metadata.* fields"
                )
            if field not in indexed:
                raise ValueError(
                    f"no index for field {field!r} of {inf.gvk}; register it with index_field first"
                )
            lookup = (field, value)
        elif field_sel is not None:
            if metadata_only:
                _refuse_fields_beyond_metadata(field_sel, inf.gvk, self._field_indexes.get(inf.gvk))
            for field, _op, _value in field_sel.requirements:
                if field.startswith(".") and field not in indexed:
                    # Go's index names (".metadata.controller"); a field path has no leading dot
                    raise ValueError(
                        f"no index for field {field!r} of {inf.gvk}; register it with "
                        "index_field first (a field path to select on starts without a '.')"
                    )
            for field in indexed:
                exact = field_sel.exact_value(field)
                if exact is not None:
                    lookup = (field, exact)
                    break

        if lookup is not None:
            objs = store.by_index(_index_name(lookup[0]), f"{ns or _ALL_NAMESPACES}/{lookup[1]}")
        elif ns:
            objs = store.by_index("namespace", ns)
        else:
            objs = store.list()

        if label_sel is not None:
            objs = [o for o in objs if label_sel.matches((o.get("metadata") or {}).get("labels"))]
        if field_sel is not None:
            keep = _FieldFilter(field_sel, indexed, inf.gvk, self._index_failures)
            objs = [o for o in objs if keep(o)]
        return objs


def _refuse_fields_beyond_metadata(
    sel: FieldSelector, gvk: GroupVersionKind, indexes: Mapping[str, FieldIndexFunc] | None
) -> None:
    """A metadata-only object holds its ``metadata`` alone: a field selector term on any other
    field (a Pod's ``spec.nodeName``, a field index) cannot be answered from it. Raise ValueError
    naming the field, instead of matching nothing (``=``) or everything (``!=``)."""
    for field, _op, _value in sel.requirements:
        if field.startswith("metadata."):
            continue
        if indexes and field in indexes:
            why = (
                "field indexes serve whole-object informers only, and a metadata-only object "
                "holds its metadata alone"
            )
        else:
            why = "a metadata-only object holds its metadata alone (select on metadata.* fields)"
        raise ValueError(
            f"list(fields=...) of {gvk} with metadata_only: field {field!r} cannot be answered "
            f"from the cache: {why}; list whole objects (metadata_only=False), or read through "
            "the cluster's api_reader, whose server selects on the whole objects"
        )


def check_options(options: CacheOptions) -> dict[GroupVersionKind, ByKind]:
    """Check ``options`` as a [`Cache`][mcruntime.cache.Cache] made with them checks them (a
    `Cluster` does when it is made): each ``by_kind`` key must name a kind (ValueError naming
    it), each transform be a plain callable (TypeError), each ``list_page_size`` None or a
    whole number of objects, 1 or more (ValueError), each selector parse (`SelectorError`
    naming the option). Returns ``by_kind`` by the kind each key names."""
    by_kind = _resolved_by_kind(options.by_kind)
    _check_transform(options.default_transform, "CacheOptions.default_transform")
    check_page_size(options.list_page_size, "CacheOptions.list_page_size")
    _check_selector(
        LabelSelector, options.default_label_selector, "CacheOptions.default_label_selector"
    )
    for key, by in options.by_kind.items():
        what = f"CacheOptions.by_kind[{key!r}]"
        _check_transform(by.transform, f"{what}.transform")
        check_page_size(by.list_page_size, f"{what}.list_page_size")
        _check_selector(LabelSelector, by.label_selector, f"{what}.label_selector")
        _check_selector(FieldSelector, by.field_selector, f"{what}.field_selector")
    return by_kind


def _check_selector(
    parser: type[LabelSelector] | type[FieldSelector], text: object, what: str
) -> None:
    """A selector of the options is refused when the cache is made if it does not parse
    (`SelectorError` naming the option), not at every read of its kind after ``sync_timeout``
    (the server refuses its informer's list)."""
    if text is None:
        return
    if not isinstance(text, str):
        raise TypeError(f"{what} is a {type(text).__name__}, not a selector's text")
    try:
        parser.parse(text)
    except SelectorError as exc:
        raise SelectorError(f"{what}: {exc}", exc.kube) from None


def _resolved_by_kind(by_kind: Mapping[Any, ByKind]) -> dict[GroupVersionKind, ByKind]:
    """``CacheOptions.by_kind`` by the kind each key names, checked when the cache is made (as
    controller-runtime checks ``ByObject``): a key that names no kind raises ValueError naming
    it, instead of failing every read of every kind."""
    out: dict[GroupVersionKind, ByKind] = {}
    for key, value in by_kind.items():
        try:
            gvk = kind_of(key)
        except ValueError as exc:
            raise ValueError(f"CacheOptions.by_kind key {key!r} names no kind: {exc}") from None
        if not isinstance(value, ByKind):
            raise TypeError(
                f"CacheOptions.by_kind[{key!r}] is a {type(value).__name__}, not a ByKind"
            )
        if gvk in out:
            raise ValueError(f"CacheOptions.by_kind names {gvk} twice (key {key!r})")
        out[gvk] = value
    return out


def _check_transform(transform: object, what: str) -> None:
    """A transform is refused when the cache is made if it cannot be one: not callable, or a
    coroutine function (its coroutine is no object; what it returns is checked per object)."""
    if transform is None:
        return
    if not callable(transform):
        raise TypeError(f"{what} is a {type(transform).__name__}, not a function of the object")
    refuse_coroutine_function(
        transform, what, "pass a plain function that returns the object (edited or new)"
    )


def _label_selector(labels: str | Mapping[str, str] | LabelSelector | None) -> LabelSelector | None:
    if labels is None:
        return None
    if isinstance(labels, LabelSelector):
        sel = labels
    elif isinstance(labels, str):
        sel = LabelSelector.parse(labels)
    else:
        sel = LabelSelector.from_dict(labels)
    return None if sel.empty() else sel


def _field_selector(fields: str | Mapping[str, str] | FieldSelector | None) -> FieldSelector | None:
    if fields is None:
        return None
    if isinstance(fields, FieldSelector):
        sel = fields
    elif isinstance(fields, str):
        sel = FieldSelector.parse(fields)
    else:
        sel = FieldSelector.from_dict(fields)
    return None if sel.empty() else sel


class _FieldFilter:
    """A field selector split into terms on indexed fields (checked via the index function) and the rest."""

    def __init__(
        self,
        sel: FieldSelector,
        indexed: Mapping[str, FieldIndexFunc],
        gvk: GroupVersionKind,
        failures: _IndexFailures,
    ) -> None:
        self.indexed = [
            (f, fn, op == "=", v) for f, op, v in sel.requirements if (fn := indexed.get(f))
        ]
        plain = [(f, op, v) for f, op, v in sel.requirements if f not in indexed]
        self.plain = FieldSelector(plain) if plain else None
        self.gvk = gvk
        self.failures = failures
        #: a kind whose field labels its registry computes (core Pods and Events)
        self.computed = gvk.group == "" and gvk.kind in ("Pod", "Event")

    def __call__(self, obj: dict[str, Any]) -> bool:
        for field, fn, equal, value in self.indexed:
            try:
                values = _field_values(fn, obj)
            except BaseException as exc:  # as in _namespaced_indexer
                if interrupted(exc):
                    raise
                self.failures.failed(self.gvk, field, obj, exc)
                return False
            if (value in values) is not equal:
                return False
        if self.plain is None:
            return True
        if self.computed:  # the values the kind's registry computes, as the server reads them
            return self.plain.matches(field_label_view(self.gvk.group, self.gvk.kind, obj))
        return self.plain.matches(obj)
