"""Informer: list then watch one kind of one cluster into a [`Store`][mcruntime.cache.Store], calling event handlers."""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from mcruntime._backoff import Backoff
from mcruntime._callables import takes_keyword
from mcruntime._listing import ListProgress, listing
from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime._streak import FailureStreaks, describe_error
from mcruntime._threads import interrupted, start_thread, thread_name, where
from mcruntime.cache._store import (
    NAMESPACE_INDEX,
    IndexFunc,
    Store,
    object_key,
    strip_managed_fields,
)
from mcruntime.client import METADATA_ACCEPT, METADATA_LIST_ACCEPT, remaining, strip_to_metadata
from mcruntime.errors import (
    APIError,
    ClusterLeft,
    CredentialError,
    DeadlineExceeded,
    Gone,
    NoKindMatch,
    NotFound,
    NotKubernetesAnswer,
    Unreachable,
)

if TYPE_CHECKING:
    from mcruntime.client import RESTClient, RESTMapper, RESTMapping

__all__ = [
    "Informer",
    "ResourceEventHandler",
    "HandlerRegistration",
    "Transform",
    "first_list_here",
]

log = logging.getLogger("mcruntime.cache")

Transform = Callable[[dict[str, Any]], dict[str, Any]]

#: objects per page of an informer's list unless its options set ``list_page_size``
LIST_PAGE_SIZE = 500
#: timeout of one list page request (seconds)
LIST_TIMEOUT = 60.0
#: the server ends each watch after a random time in this range (seconds), as client-go does
WATCH_TIMEOUT_RANGE = (300, 600)
#: extra silence allowed past the server-side watch timeout before the connection counts as dead
WATCH_READ_SLACK = 60.0
#: a watch that ends this fast without any event counts as a failure (backs off)
SHORT_WATCH = 1.0
_SYNC_POLL = 0.1
#: a call that timed out with less than this left of its caller's deadline ended with it
_DEADLINE_SLACK = 0.05
#: what a reflector's failure streak is about (logged as such)
_LIST_AND_WATCH = "listing and watching"
#: how far an informer's resync period is from ``resync``, either way (a fraction of it)
RESYNC_JITTER = 0.1

#: the streak of a transform's failures (one per informer)
_TRANSFORM = "transform"


class ResourceEventHandler(Protocol):
    """Receives an informer's events.

    Calls come one at a time, in registration order among handlers: from the
    informer's thread for a list, from the thread every watch of the process
    shares for watch events. Handlers must not block (enqueue and return): a
    blocked handler delays every cluster's events. They must
    treat the objects as read-only: they are the cached objects themselves.
    An exception is logged (naming the cluster, the kind and the object) and
    does not stop the informer; so is any `BaseException` (``sys.exit()`` in a
    predicate, a ``KeyboardInterrupt`` raised by a library): it fails that one
    call, never the thread every watch of the process shares.
    """

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        """``obj`` appeared; ``is_initial_list`` for objects of the initial list (or the replay)."""
        ...

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """``old`` changed into ``new`` (``old is new`` on a periodic resync)."""
        ...

    def on_delete(self, obj: dict[str, Any]) -> None:
        """``obj`` is gone; ``obj`` is its last known state.

        A handler whose ``on_delete`` also takes a keyword ``delete_state_unknown`` gets
        True there for a delete its watch missed, found by a relist (after a ``410 Gone``,
        say): ``obj`` is then the last state the cache saw, not the object's final one
        (client-go's ``DeletedFinalStateUnknown``); False for a deletion the watch told.
        """
        ...


_HANDLER_METHODS = ("on_add", "on_update", "on_delete")


class HandlerRegistration:
    """The handle [`Informer.add_event_handler()`][mcruntime.cache.Informer.add_event_handler] returns."""

    __slots__ = ("_informer", "handler", "_removed", "_tells_state_unknown")

    def __init__(self, informer: Informer, handler: ResourceEventHandler) -> None:
        self._informer = informer
        self.handler = handler
        self._removed = False
        #: its ``on_delete`` takes ``delete_state_unknown`` (see `ResourceEventHandler`)
        self._tells_state_unknown = takes_keyword(handler.on_delete, "delete_state_unknown")

    def remove(self) -> None:
        """Unregister; once this returns the handler gets no further calls. Idempotent.

        Safe to call from inside a handler (then no later call reaches it).
        """
        self._informer._remove_handler(self)

    def has_synced(self) -> bool:
        """True once this handler has been given every object of the informer's initial state."""
        return not self._removed and self._informer.has_synced()

    @property
    def removed(self) -> bool:
        """True after [`remove()`][mcruntime.cache.HandlerRegistration.remove]."""
        return self._removed


class _Stopped(Exception):
    pass


#: inside `first_list_here`: the reflector (and its thread's name) whose first list is left to it
_list_here: ContextVar[list[tuple[_Reflector, str]] | None] = ContextVar(
    "mcruntime_first_list_here", default=None
)


def check_page_size(size: object, what: str) -> None:
    """A list's page size is None (the default) or a whole number of objects, 1 or more:
    anything else raises ValueError naming ``what`` (0 would be no page at all, as kube-apiserver
    reads it: the whole collection in one answer)."""
    if size is None:
        return
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(
            f"{what}={size!r}: a list's page size is a whole number of objects, 1 or more "
            f"(None: {LIST_PAGE_SIZE})"
        )


@contextlib.contextmanager
def first_list_here() -> Iterator[None]:
    """The first informer started in this block makes its first list on this thread, as the block ends.

    For code that starts an informer and then waits for its sync (the manager
    engaging a cluster does): the objects reach the store without waiting for
    another thread's turn on the GIL, and the cluster's first request (its TLS
    handshake included) is made by the calling thread. On a thread that ends
    soon after, the C library's per-thread caches of that work end with it; on
    the informer's own thread they stay for the cluster's life (about 14 KiB
    per cluster in a fleet). The rest of the informer's life (its watch,
    relists, retries) runs on its own thread, started once the list is over.
    The list is bounded by the caller's [`deadline`][mcruntime.client.deadline]:
    when that ends it, the informer's thread goes on with the list from the
    last page it got (a big cluster's list may outlast the caller's wait),
    silently. A first list that fails otherwise is handed to that thread,
    which logs it and retries with backoff, as for any failed list. Other
    informers started in the block, and informers of several namespaces,
    start as usual.
    """
    pending: list[tuple[_Reflector, str]] = []
    token = _list_here.set(pending)
    try:
        yield
    finally:
        _list_here.reset(token)
        for reflector, name in pending:
            reflector.start_listing_here(name)


class _ShortWatch(Exception):
    pass


class _Reflector:
    """Lists and watches one namespace (or all) for an informer, on its own thread."""

    def __init__(self, informer: Informer, namespace: str | None) -> None:
        self.informer = informer
        self.namespace = namespace
        self.path = informer.mapping.path(namespace=namespace)
        self.resource_version = ""
        self.synced = False
        self.last_error: Exception | None = None
        self.thread: threading.Thread | None = None
        self._stream: Any = None
        self._stream_lock = threading.Lock()
        # one failure streak: the list and the watch that follows it; made at the first
        # failure (a fleet's thousand healthy informers keep none)
        self._streaks: FailureStreaks | None = None
        self._relists = 0
        self._relist_backoff = Backoff()
        self._listed = False
        # the pages so far and the query of the next page of a first list the caller's
        # deadline ended: where the next list goes on (see start_listing_here)
        self._resume: tuple[list[dict[str, Any]], dict[str, Any]] | None = None
        self._where = informer._describe(namespace)
        self._fields = informer._log_fields()
        # set to end a backoff wait early (stop, or the cluster answers again)
        self._wake = threading.Event()
        self._nudged = False
        self._restarting = False
        # events of the current watch, and the backoff its first event resets
        self._events = 0
        self._backoff = Backoff()

    # -- lifecycle --------------------------------------------------------------

    def start(self, name: str) -> None:
        self.thread = start_thread(self._run, name)

    def start_listing_here(self, name: str) -> None:
        """List on the calling thread, then start the reflector's thread (see `first_list_here`)."""
        inf = self.informer
        listed = False
        failure: Exception | None = None
        try:
            self._list(keep_progress=True)
            listed = True
        except Exception as exc:
            left = remaining()
            callers_time_up = isinstance(exc, DeadlineExceeded) and (
                left is not None and left < _DEADLINE_SLACK
            )
            if not callers_time_up:  # else the thread goes on with the list, from `_resume`
                failure = exc
                self._resume = None  # handed over as a failure: listed again from page one
        with inf._state:
            if inf._stop.is_set():
                return  # stopped meanwhile: its thread would only end at once
            self.thread = start_thread(self._run, name, listed, failure)

    def close_stream(self) -> None:
        with self._stream_lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

    def retry_now(self, *, only_failing: bool = False) -> None:
        """Skip the backoff wait and start a fresh watch from the last resourceVersion
        (``only_failing``: only while its list or watch fails; a watch that works streams on)."""
        if only_failing and self.last_error is None:
            return
        self._nudged = True
        with self._stream_lock:
            if self._stream is not None:
                self._restarting = True
        self._wake.set()
        self.close_stream()

    def _pause(self, delay: float) -> bool:
        """Wait ``delay`` seconds, less if woken; True when the informer stops meanwhile."""
        self._wake.wait(delay)
        self._wake.clear()
        return self.informer._stop.is_set()

    # -- loop -------------------------------------------------------------------

    def _run(self, listed: bool = False, failure: Exception | None = None) -> None:
        """List (unless ``listed`` already, or ``failure`` ended that first list) and watch, until stopped."""
        inf = self.informer
        stop = inf._stop
        backoff = Backoff()
        need_list = not listed
        if listed:
            self._recovered(backoff)
        while not stop.is_set():
            try:
                if failure is not None:
                    first: Exception = failure
                    failure = None
                    raise first
                if need_list:
                    self._list()
                    need_list = False
                    self._recovered(backoff)
                self._watch(backoff)
            except _Stopped:
                break
            except Gone as exc:
                if stop.is_set():
                    break
                need_list = True
                self._relists += 1
                self._expired(exc)
                if self._relists > 1 and self._pause(self._relist_backoff.next()):
                    break
            except _ShortWatch:
                log.debug(
                    "%s: watch ended at once; retrying after backoff",
                    self._where,
                    extra=self._fields,
                )
                if self._pause(backoff.next()):
                    break
            except ClusterLeft:
                # its client was closed (the cluster left, its owner stopped it): no call of
                # it will be answered again, so this is the end, not a failure to retry
                log.debug(
                    "%s: its cluster's client was closed; stopping", self._where, extra=self._fields
                )
                break
            except BaseException as exc:
                # any BaseException too (a SystemExit that reached the watch): the informer
                # retries as for any failure, never ends while its cluster is engaged
                if stop.is_set():
                    break
                self._failed(exc)
                with self._crds_watched(exc):
                    if self._pause(_retry_wait(exc, backoff)):
                        break
            if self._nudged:
                self._nudged = False
                backoff.reset()
        self.close_stream()
        log.debug("%s: stopped", self._where, extra=self._fields)

    @contextlib.contextmanager
    def _crds_watched(self, exc: BaseException) -> Iterator[None]:
        """While the kind is not served (``exc`` a NoKindMatch), a change of the cluster's CRDs
        ends the wait of this block (see `Informer`'s ``mapper``)."""
        mapper = self.informer.mapper
        if not isinstance(exc, NoKindMatch) or mapper is None:
            yield
            return
        cancel = mapper.on_reset(self.retry_now)
        end = mapper.watch_crds()
        try:
            yield
        finally:
            end()
            cancel()

    def _expired(self, exc: Gone) -> None:
        """Log a watch's 410: the first of a streak at info (a compaction ends a watch now and
        then; client-go's reflector says so at V(4)), the ones that follow a relist with no
        event between them at debug with their count: a server that expires every watch at
        once (a proxy, a broken watch cache) is relisted with backoff, not logged for ever."""
        if self._relists == 1:
            log.info(
                "%s: resourceVersion %s expired (%s); relisting",
                self._where,
                self.resource_version,
                exc.reason or "Gone",
                extra=self._fields,
            )
        elif log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s: resourceVersion %s expired again (%s), %d relists in a row; relisting "
                "after backoff",
                self._where,
                self.resource_version,
                exc.reason or "Gone",
                self._relists,
                extra=self._fields,
            )

    @property
    def _failures(self) -> int:
        streaks = self._streaks
        return 0 if streaks is None else streaks.failures(_LIST_AND_WATCH)

    def _failed(self, exc: BaseException) -> None:
        # not an Exception (a SystemExit from user code, a bug): logged with its traceback
        escaped = not isinstance(exc, Exception)
        error = exc if isinstance(exc, Exception) else _escaped(exc)
        self.last_error = error
        inf = self.informer
        inf.last_error = error
        if self._streaks is None:
            self._streaks = FailureStreaks(
                log, f"informer {inf._subject(self.namespace)}", log_fields(kind=str(inf.gvk))
            )
        self._streaks.failed(
            inf.cluster_name,
            _LIST_AND_WATCH,
            exc,
            retry="retrying with backoff",
            key=_LIST_AND_WATCH,
            traceback=exc if escaped else None,
        )

    def _recovered(self, backoff: Backoff) -> None:
        backoff.reset()
        if self._streaks is not None:
            self._streaks.recovered(
                self.informer.cluster_name, _LIST_AND_WATCH, key=_LIST_AND_WATCH
            )
        self.last_error = None
        self.informer._reflector_recovered()

    def _selectors(self, query: dict[str, Any]) -> dict[str, Any]:
        inf = self.informer
        if inf.label_selector:
            query["labelSelector"] = inf.label_selector
        if inf.field_selector:
            query["fieldSelector"] = inf.field_selector
        return query

    def _list(self, *, keep_progress: bool = False) -> None:
        """List into the store; ``keep_progress``: a failed list leaves `_resume` behind."""
        resume, self._resume = self._resume, None
        page_size = self.informer.list_page_size or LIST_PAGE_SIZE
        items, query = resume or ([], self._selectors({"limit": page_size}))
        # each page is bounded by LIST_TIMEOUT (a reflector's list of any size ends, as
        # client-go's, which bounds none), and the whole list by its caller's deadline, if any
        # (a wait for the cache to sync): a page that deadline cuts says how far the list got
        # and is no failure of the cluster
        left = remaining()
        progress = ListProgress(
            None if left is None else time.monotonic() + left,
            "its caller's deadline (a wait for the cache to sync)",
            True,
        )
        with listing(progress):
            self._pages(items, query, keep_progress, progress)

    def _pages(
        self,
        items: list[dict[str, Any]],
        query: dict[str, Any],
        keep_progress: bool,
        progress: ListProgress,
    ) -> None:
        """Follow the list's pages from ``query`` (``items``: those got already) into the store."""
        inf = self.informer
        rest = inf.rest
        resource_version = ""
        while True:
            if inf._stop.is_set():
                raise _Stopped
            try:
                page = rest.request(
                    "GET",
                    self.path,
                    query=query,
                    timeout=LIST_TIMEOUT,
                    accept=inf._list_accept,
                    expect_object=True,
                )
            except Gone:
                if "continue" not in query:
                    raise
                log.info(
                    "%s: list continuation expired; listing again in one page",
                    self._where,
                    extra=self._fields,
                )
                items.clear()
                query = self._selectors({})
                continue
            except NotFound as exc:
                raise self._not_served() from exc
            except Exception:
                if keep_progress and "continue" in query:
                    self._resume = (items, query)  # for start_listing_here to hand over
                raise
            got = page.get("items") or ()
            progress.page(len(got))
            items.extend(got)
            meta = page.get("metadata") or {}
            resource_version = meta.get("resourceVersion") or resource_version
            token = meta.get("continue")
            if not token:
                break
            query["continue"] = token
        if inf._stop.is_set():
            raise _Stopped
        prepare = inf._prepare
        objects = [prepare(o) for o in items]
        inf._apply_list(self.namespace, objects, initial=not self._listed)
        self._listed = True
        self.resource_version = resource_version
        inf.last_sync_resource_version = resource_version
        if not self.synced:
            self.synced = True
            inf._reflector_synced()

    def _watch(self, backoff: Backoff) -> None:
        inf = self.informer
        seconds = random.randint(*WATCH_TIMEOUT_RANGE)
        query = self._selectors(
            {
                "resourceVersion": self.resource_version,
                "allowWatchBookmarks": inf.bookmarks,
                "timeoutSeconds": seconds,
            }
        )
        started = time.monotonic()
        try:
            stream = inf.rest.watch(
                self.path, query=query, timeout=seconds + WATCH_READ_SLACK, accept=inf._accept
            )
        except NotFound as exc:
            raise self._not_served() from exc
        with self._stream_lock:
            self._stream = stream
        if inf._stop.is_set():
            self.close_stream()
            raise _Stopped
        self._events = 0
        self._backoff = backoff
        cut: Unreachable | None = None
        try:
            # events reach _on_event on the thread shared by every watch; this one waits
            stream.run(self._on_event)
        except Unreachable as exc:
            if not self._worked(exc, started):
                raise
            cut = exc
        finally:
            self.close_stream()
        if inf._stop.is_set():
            raise _Stopped
        if self._restarting:  # ended on purpose by retry_now(): watch again at once
            self._restarting = False
            return
        if cut is not None:
            # a watch that worked, then its connection broke: an API server replica restarting
            # in a rolling upgrade, a load balancer dropping it. As client-go's reflector, a
            # watch that ended: watched again at once from its resourceVersion, and only a
            # failure of that watch (or of a list) starts a failure streak, named by its own
            # error (the server refusing connections, say); a routine cut says nothing
            log.debug(
                "%s: watch cut after it worked (%s); watching again from resourceVersion %s",
                self._where,
                cut,
                self.resource_version,
                extra=self._fields,
            )
            return
        if self._events == 0 and time.monotonic() - started < SHORT_WATCH:
            raise _ShortWatch
        if self._failures:
            self._recovered(backoff)

    def _worked(self, exc: Unreachable, started: float) -> bool:
        """Whether the watch ``exc`` ended worked before its connection broke: it delivered an
        event or lasted `SHORT_WATCH`, and ``exc`` is the connection's (not a proxy's page in
        the stream, a credential, nor a stream silent past its bound: a server that hangs)."""
        if isinstance(exc, (NotKubernetesAnswer, CredentialError, DeadlineExceeded)):
            return False
        return self._events > 0 or time.monotonic() - started >= SHORT_WATCH

    def _not_served(self) -> NoKindMatch:
        """What a 404 on the collection means: the cluster serves the kind no more (its CRD
        was deleted, or its API server's APIService removed), or not yet."""
        inf = self.informer
        return NoKindMatch(str(inf.gvk), cluster_name=inf.cluster_name)

    def _on_event(self, event: dict[str, Any]) -> None:
        if self.informer._stop.is_set():
            raise _Stopped
        self._handle(event)
        self._events += 1
        if self._events == 1:
            if self._relists:
                if self._relists > 1:  # its streak was logged once: say it ended
                    log.info(
                        "%s: watching works again after %d relists in a row (each watch "
                        "expired at once)",
                        self._where,
                        self._relists,
                        extra=self._fields,
                    )
                self._relists = 0
                self._relist_backoff.reset()
            if self._failures:
                self._recovered(self._backoff)

    def _handle(self, event: dict[str, Any]) -> None:
        typ = event.get("type")
        obj = event.get("object") or {}
        if typ == "ERROR":
            raise APIError.from_status(obj)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if typ == "BOOKMARK":
            if rv:
                self.resource_version = rv
                self.informer.last_sync_resource_version = rv
            return
        inf = self.informer
        obj = inf._prepare(obj)
        if typ == "DELETED":
            inf._apply_delete(obj)
        elif typ in ("ADDED", "MODIFIED"):
            inf._apply_upsert(obj)
        else:
            log.debug("%s: ignoring watch event of type %r", self._where, typ, extra=self._fields)
        if rv:
            self.resource_version = rv
            inf.last_sync_resource_version = rv


class Informer:
    """Keeps a [`Store`][mcruntime.cache.Store] of one kind of one cluster up to date and tells handlers about changes.

    It lists (in pages), then watches from the list's resourceVersion (with
    bookmarks), re-watching from the last seen resourceVersion whenever a watch
    ends. When that version has expired (410 Gone) it lists again and delivers
    only the difference to what it had: adds, updates (resourceVersion changed)
    and deletes (with the last known state). Connection failures are retried
    with backoff, logging one warning per failure streak.

    ``namespace`` restricts it to one namespace, or several (one watch each,
    one store); None, or ``""`` among them, watches all namespaces. ``transform`` runs on each object
    before it is stored (default: drop managedFields). ``resync`` (seconds)
    periodically calls ``on_update(obj, obj)`` for every object, each informer at its own
    period within 10 % of it, as controller-runtime's ``SyncPeriod``.
    ``metadata_only`` lists and watches the objects' metadata alone (see
    [`strip_to_metadata()`][mcruntime.client.strip_to_metadata]): a Secret's data or a Pod's
    spec is neither sent nor kept. ``list_page_size`` is the number of objects per page of
    its list (client-go's ``WatchListPageSize``; None: ``LIST_PAGE_SIZE``, 500).
    ``mapper``, the cluster's [`RESTMapper`][mcruntime.client.RESTMapper] (a `Cache` gives
    its own): while the kind is not served (its CRD deleted), the informer waits for its
    backoff watching the cluster's CRDs too ([`watch_crds`][mcruntime.client.RESTMapper.watch_crds]),
    and lists again as soon as one changes, not at the end of a backoff of up to 30 s.
    """

    def __init__(
        self,
        rest: RESTClient,
        mapping: RESTMapping,
        *,
        namespace: str | Sequence[str] | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = strip_managed_fields,
        resync: float | None = None,
        cluster_name: str = "",
        bookmarks: bool = True,
        metadata_only: bool = False,
        list_page_size: int | None = None,
        mapper: RESTMapper | None = None,
    ) -> None:
        check_page_size(list_page_size, "list_page_size")
        self.rest = rest
        self.mapping = mapping
        self.mapper = mapper
        self.gvk = mapping.gvk
        self.cluster_name = cluster_name
        self.label_selector = label_selector or None
        self.field_selector = field_selector or None
        self.transform = transform
        self.resync = resync if resync and resync > 0 else None
        self.bookmarks = bookmarks
        if isinstance(namespace, str) or namespace is None:
            namespaces: list[str | None] = [namespace or None]
        else:
            # "" (client-go's NamespaceAll, controller-runtime's cache.AllNamespaces) among
            # others: every namespace, as controller-runtime's DefaultNamespaces reads it
            every = not namespace or any(not n for n in namespace)
            namespaces = [None] if every else list(dict.fromkeys(namespace))
        if not mapping.namespaced:
            namespaces = [None]
        self.namespaces: tuple[str | None, ...] = tuple(namespaces)
        self.metadata_only = metadata_only
        #: objects per page of its list (None: ``LIST_PAGE_SIZE``)
        self.list_page_size = list_page_size
        self.name = f"{display_name(cluster_name)}/{self.gvk}" + (
            " (metadata)" if metadata_only else ""
        )
        self._accept = METADATA_ACCEPT if metadata_only else "application/json"
        self._list_accept = METADATA_LIST_ACCEPT if metadata_only else "application/json"
        self.store = Store()
        self.store._owner = f"{self._describe(None)}: "
        self.last_sync_resource_version = ""
        self.last_error: Exception | None = None
        self._api_version = self.gvk.api_version
        self._kind = self.gvk.kind
        # a transform's failures: one streak (logged once) until it returns an object again
        self._transform_streaks = FailureStreaks(
            log, f"informer {self._subject(None)}", log_fields(kind=str(self.gvk))
        )
        #: the objects the transform failed for at their last change: its streak lasts while
        #: one is left (another object's success is no recovery of the one that fails)
        self._transform_failed: set[str] = set()
        self._transform_lock = threading.Lock()
        self._dispatch = threading.RLock()
        self._handlers: tuple[HandlerRegistration, ...] = ()
        self._state = threading.Lock()
        self._started = False
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._reflectors = [_Reflector(self, ns) for ns in self.namespaces]
        self._resync_thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"Informer({self.name})"

    def _subject(self, namespace: str | None) -> str:
        where = f" namespace={namespace}" if namespace else ""
        flavour = " metadata-only" if self.metadata_only else ""
        return f"kind={self.gvk}{flavour}{where}"

    def _describe(self, namespace: str | None) -> str:
        return f"cluster={display_name(self.cluster_name)} {self._subject(namespace)}"

    def _log_fields(self) -> dict[str, str]:
        """The fields of its lines (`log_fields`): its cluster and kind."""
        return log_fields(cluster=self.cluster_name, kind=str(self.gvk))

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> None:
        """Start listing and watching on its own thread(s); idempotent.

        Inside [`first_list_here()`][mcruntime.cache.first_list_here] the first
        list is made by the thread that ends the block. Raises RuntimeError
        after [`stop()`][mcruntime.cache.Informer.stop] (an informer runs once).
        """
        with self._state:
            if self._stop.is_set():
                raise RuntimeError(f"informer {self.name} was stopped; create a new one")
            if self._started:
                return
            self._started = True
            many = len(self._reflectors) > 1
            flavour = ("metadata",) if self.metadata_only else ()
            pending = None if many else _list_here.get()
            for r in self._reflectors:
                extra = (*flavour, r.namespace or "") if many else flavour
                name = thread_name("informer", self.cluster_name, self._kind, *extra)
                if pending is not None and not pending:
                    pending.append((r, name))  # listed by the thread that ends the block
                else:
                    r.start(name)
            if self.resync:
                self._resync_thread = start_thread(
                    self._resync_loop,
                    thread_name("informer", self.cluster_name, self._kind, *flavour, "resync"),
                )

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching and join the informer's threads (waiting at most ``timeout`` in total)."""
        self._signal_stop()
        with self._state:
            threads = [r.thread for r in self._reflectors]
            threads.append(self._resync_thread)
        deadline = time.monotonic() + timeout
        for t in threads:
            if t is None or t is threading.current_thread():
                continue
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                log.warning(
                    "%s: thread %s did not stop within %.1fs (at %s)",
                    self._describe(None),
                    t.name,
                    timeout,
                    where(t),
                    extra=self._log_fields(),
                )

    def _signal_stop(self) -> None:
        with self._state:
            self._stop.set()
        for r in self._reflectors:
            r._wake.set()
            r.close_stream()

    def retry_now(self, *, only_failing: bool = False) -> None:
        """The cluster answers again: end backoff waits and re-watch now (no relist needed).

        A watch on a connection that died silently would otherwise be noticed
        only after its read timeout, and a failing list or watch retries only
        after its backoff (up to 30 s). With ``only_failing``, only a list or watch
        that fails tries again now (the cluster's credentials were just rotated); a
        watch that works is left open.
        """
        if self._stop.is_set():
            return
        for r in self._reflectors:
            r.retry_now(only_failing=only_failing)

    @property
    def started(self) -> bool:
        """True once [`start()`][mcruntime.cache.Informer.start] was called."""
        return self._started

    @property
    def stopped(self) -> bool:
        """True once [`stop()`][mcruntime.cache.Informer.stop] was called."""
        return self._stop.is_set()

    def has_synced(self) -> bool:
        """True once the initial list (of every namespace) is in the store."""
        return self._synced.is_set()

    def wait_for_sync(
        self, timeout: float | None = None, stop: threading.Event | None = None
    ) -> bool:
        """Block until synced; False on timeout, when ``stop`` is set, or if the informer stops."""
        return self._wait_synced(timeout, stop)

    def _wait_synced(
        self,
        timeout: float | None,
        stop: threading.Event | None,
        refused: Callable[[], bool] | None = None,
    ) -> bool:
        """`wait_for_sync`, ended (False) too once ``refused()`` says so (a cache read: its
        cluster refused the informer's list)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._synced.is_set():
            if self._stop.is_set() or (stop is not None and stop.is_set()):
                return False
            if refused is not None and refused():
                return False
            wait = _SYNC_POLL
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                wait = min(wait, remaining)
            self._synced.wait(wait)
        return True

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indexes to the store (existing objects are indexed at once)."""
        self.store.add_indexers(indexers)

    # -- handlers ---------------------------------------------------------------

    def add_event_handler(self, handler: ResourceEventHandler) -> HandlerRegistration:
        """Register ``handler``; it first gets ``on_add(obj, True)`` for every object already stored.

        The replay runs on the calling thread while live events wait, so the
        handler sees no live event for an object before its replay. A handler
        without one of ``on_add``, ``on_update`` and ``on_delete`` is refused
        with TypeError (Go's ``ResourceEventHandlerFuncs`` may leave some out).
        """
        missing = [m for m in _HANDLER_METHODS if not callable(getattr(handler, m, None))]
        if missing:
            # every event would fail in the missing one, once per event
            raise TypeError(
                f"{handler!r} is not a ResourceEventHandler: it lacks {', '.join(missing)} "
                "(define each of on_add, on_update and on_delete; one may do nothing)"
            )
        reg = HandlerRegistration(self, handler)
        with self._dispatch:
            for obj in self.store.list():
                self._call(reg, "on_add", obj, True)
            self._handlers = (*self._handlers, reg)
        return reg

    def _remove_handler(self, reg: HandlerRegistration) -> None:
        with self._dispatch:
            reg._removed = True
            self._handlers = tuple(h for h in self._handlers if h is not reg)

    def _call(self, reg: HandlerRegistration, method: str, *args: Any, **kwargs: Any) -> None:
        if reg._removed:
            return
        try:
            getattr(reg.handler, method)(*args, **kwargs)
        except BaseException as exc:
            if interrupted(exc):
                raise
            self._handler_failed(reg, method, args)

    def _notify(self, method: str, *args: Any) -> None:
        for reg in self._handlers:  # _call, inlined: this runs once per handler per event
            if reg._removed:
                continue
            try:
                getattr(reg.handler, method)(*args)
            except BaseException as exc:
                # any BaseException: user code (a predicate, a map function) calling
                # sys.exit() or raising KeyboardInterrupt fails this one event, as any
                # exception does; let through, it would end the thread every watch shares.
                # A Ctrl-C (on the main thread, listing there) is the user's: it goes on
                if interrupted(exc):
                    raise
                self._handler_failed(reg, method, args)

    def _notify_missed_delete(self, obj: dict[str, Any]) -> None:
        """A delete the watch missed (a relist found ``obj`` gone): ``on_delete(obj)``, with
        ``delete_state_unknown=True`` for the handlers that take it."""
        for reg in self._handlers:
            if reg._tells_state_unknown:
                self._call(reg, "on_delete", obj, delete_state_unknown=True)
            else:
                self._call(reg, "on_delete", obj)

    def _handler_failed(self, reg: HandlerRegistration, method: str, args: tuple[Any, ...]) -> None:
        """Log (with its traceback) that ``reg``'s handler raised in ``method`` for the event's object."""
        obj = args[1] if method == "on_update" else args[0]
        log.exception(
            "%s: event handler %r failed in %s for %s",
            self._describe(None),
            reg.handler,
            method,
            object_key(obj),
            extra=self._log_fields(),
        )

    # -- applying changes (reflector threads) -----------------------------------

    def _prepare(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.metadata_only:
            obj = strip_to_metadata(obj, self.gvk)
        elif "kind" not in obj:
            obj["kind"] = self._kind
        if "apiVersion" not in obj:
            obj["apiVersion"] = self._api_version
        if self.transform is not None:
            obj = self._transformed(obj)
        return obj

    def _transformed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` through the transform; a transform that raises or returns something that is
        not the object (None after editing in place, the dict it popped) is logged once per
        streak, and the object is stored as the transform left it."""
        transform = self.transform
        assert transform is not None
        key = object_key(obj)
        failure: object
        try:
            out = transform(obj)
        except BaseException as exc:  # sys.exit() in it fails this object, not the watches
            if interrupted(exc):
                raise
            failure = exc
        else:
            if isinstance(out, dict) and self._transform_key(out) == key:
                if self._transform_failed:
                    self._transform_done(key)
                return out
            failure = (
                f"it returned a dict that is not the object {key!r} (its metadata names "
                "another object or none)"
                if isinstance(out, dict)
                else f"it returned {_type_name(out)}, not the object (a dict): return obj"
            )
        with self._transform_lock:
            self._transform_failed.add(key)
        self._transform_streaks.failed(
            self.cluster_name,
            self._transform_name(),
            failure,
            retry=f"storing {key} and later objects as the transform left them",
            key=_TRANSFORM,
            traceback=failure if isinstance(failure, BaseException) else None,
        )
        return obj

    def _transform_done(self, key: str) -> None:
        """The transform failed for ``key`` no more (it worked for it, or the object is gone):
        the streak ends once no object it failed for is left."""
        with self._transform_lock:
            if key not in self._transform_failed:
                return
            self._transform_failed.discard(key)
            if self._transform_failed:
                return
        self._transform_streaks.recovered(self.cluster_name, self._transform_name(), key=_TRANSFORM)

    @staticmethod
    def _transform_key(out: dict[str, Any]) -> str | None:
        meta = out.get("metadata")
        return object_key(out) if isinstance(meta, dict) and meta.get("name") else None

    def _transform_name(self) -> str:
        fn = self.transform
        name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        return f"transform {name}"

    def _apply_upsert(self, obj: dict[str, Any]) -> None:
        with self._dispatch:
            old = self.store.add(obj)
            if old is None:
                self._notify("on_add", obj, False)
            else:
                rv = _rv(obj)
                if _rv(old) != rv or not rv:
                    self._notify("on_update", old, obj)

    def _apply_delete(self, obj: dict[str, Any]) -> None:
        with self._dispatch:
            old = self.store.delete(obj)
            if old is not None:
                self._notify("on_delete", obj)
        if self._transform_failed:
            self._transform_done(object_key(obj))

    def _apply_list(
        self, namespace: str | None, objects: Iterable[dict[str, Any]], initial: bool
    ) -> None:
        store = self.store
        with self._dispatch:
            stale: set[str]
            if namespace is None:
                stale = set(store.keys())
            else:
                stale = set(store.index_keys(NAMESPACE_INDEX, namespace))
            for obj in objects:
                key = object_key(obj)
                stale.discard(key)
                old = store.get(key)
                if old is None:
                    store._put(key, obj)
                    self._notify("on_add", obj, initial)
                elif _rv(old) != _rv(obj):
                    store._put(key, obj)
                    self._notify("on_update", old, obj)
            for key in stale:
                gone = store.delete(key)
                if gone is not None:
                    self._notify_missed_delete(gone)
                if self._transform_failed:
                    self._transform_done(key)

    def _reflector_synced(self) -> None:
        if all(r.synced for r in self._reflectors):
            self._synced.set()

    def _reflector_recovered(self) -> None:
        if all(r.last_error is None for r in self._reflectors):
            self.last_error = None

    def _resync_loop(self) -> None:
        assert self.resync is not None
        # within 10 % of it, each informer its own (controller-runtime jitters its SyncPeriod
        # so): the informers of a fleet that joined together do not resync all at once
        period = self.resync * random.uniform(1 - RESYNC_JITTER, 1 + RESYNC_JITTER)
        while not self._stop.wait(period):
            if not self._synced.is_set():
                continue
            with self._dispatch:
                for obj in self.store.list():
                    self._notify("on_update", obj, obj)


def _escaped(exc: BaseException) -> Exception:
    """An error (for ``last_error`` and the failure log) saying that ``exc``, which is not an
    `Exception` (``SystemExit``, ``KeyboardInterrupt``), ended a list or a watch."""
    err = RuntimeError(f"{describe_error(exc)} was raised")
    err.__cause__ = exc
    return err


def _retry_wait(exc: BaseException, backoff: Backoff) -> float:
    """How long to wait after ``exc`` before listing or watching again: the backoff's next
    delay, or longer when the server said when to come back (a 429 of API Priority and
    Fairness whose Retry-After outlasted the call's retries), up to the backoff's maximum (a
    proxy's Retry-After of an hour does not stop the informer for an hour)."""
    delay = backoff.next()
    asked = exc.retry_after if isinstance(exc, APIError) else None
    if asked is None:
        return delay
    return max(delay, min(asked, backoff.maximum))


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _type_name(value: object) -> str:
    """What a value is, without its content: ``None``, ``a str``."""
    return "None" if value is None else f"a {type(value).__name__}"
