"""RESTMapper: kind <-> resource from the cluster's discovery, fetched lazily per group-version."""

from __future__ import annotations

import contextlib
import difflib
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from mcruntime import _json
from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime.client._kinds import GroupVersionKind, KindLike, RESTMapping, kind_of
from mcruntime.client._metadata import METADATA_ACCEPT, METADATA_LIST_ACCEPT
from mcruntime.client._rest import RESTClient, WatchStream, call_cut, deadline
from mcruntime.errors import APIError, DeadlineExceeded, NoKindMatch, NotFound

__all__ = ["RESTMapper", "MIN_REFRESH_INTERVAL"]

#: a group-version (or the full discovery) is re-fetched on a miss at most this often (seconds)
MIN_REFRESH_INTERVAL = 1.0

log = logging.getLogger("mcruntime.client")

#: the CRDs of a cluster, watched (their metadata) while a kind it does not serve is waited for
_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#: the bound of that watch's list and opening (seconds)
_CRD_WATCH_OPEN = 5.0
#: the server ends that watch after this long at most (seconds); the next wait opens another
_CRD_WATCH_SECONDS = 600

#: the time the "did you mean" walk of a NoKindMatch may take (seconds): a hung group's
#: discovery does not hold the error for the caller's whole deadline
_SUGGEST_BUDGET = 2.0


class _Table:
    """The mappings of one group-version's discovery, by kind and by resource (immutable once
    built, shared by every cluster whose discovery of that group-version is the same)."""

    __slots__ = ("by_kind", "by_resource", "__weakref__")

    def __init__(self, resources: list[dict[str, Any]], group: str, version: str) -> None:
        subs: dict[str, set[str]] = {}
        for r in resources:
            name = str(r.get("name", ""))
            if "/" in name:
                base, _, sub = name.partition("/")
                subs.setdefault(base, set()).add(sub)
        self.by_kind: dict[str, RESTMapping] = {}
        self.by_resource: dict[str, RESTMapping] = {}
        for r in resources:
            name = str(r.get("name", ""))
            if not name or "/" in name or not r.get("kind"):
                continue
            m = RESTMapping(
                gvk=GroupVersionKind(
                    str(r.get("group") or group), str(r.get("version") or version), str(r["kind"])
                ),
                resource=name,
                namespaced=bool(r.get("namespaced")),
                verbs=frozenset(r.get("verbs") or ()),
                subresources=frozenset(subs.get(name, ())),
            )
            self.by_kind.setdefault(m.gvk.kind, m)
            self.by_resource[name] = m
            singular = r.get("singularName")
            if singular:
                self.by_resource.setdefault(str(singular), m)


# (group, version, the discovery's resources as JSON) -> its table, while some cluster uses it:
# a fleet of clusters serving the same API holds one table per group-version, not one each
_tables: weakref.WeakValueDictionary[tuple[str, str, bytes], _Table] = weakref.WeakValueDictionary()
_tables_lock = threading.Lock()


def _table(resources: list[dict[str, Any]], group: str, version: str) -> _Table:
    """The (shared) table of a discovery answer; equal answers give the same table."""
    key = (group, version, _json.dumps(resources))
    with _tables_lock:
        table = _tables.get(key)
    if table is None:
        built = _Table(resources, group, version)
        with _tables_lock:
            table = _tables.setdefault(key, built)
    return table


_EMPTY: dict[str, RESTMapping] = {}

_CRUD = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _core(plural: str, kind: str, *, namespaced: bool = True, **more: Any) -> dict[str, Any]:
    return {
        "name": plural,
        "singularName": plural[:-1],
        "namespaced": namespaced,
        "kind": kind,
        "verbs": _CRUD,
        **more,
    }


# The core/v1 kinds that every Kubernetes API server serves, generic control planes (kcp)
# included, as kube-apiserver's discovery describes them. They are mapped without asking the
# cluster, as client-go's typed clients do: engaging a cluster then needs no discovery round
# trip before its informers list (one request fewer per cluster in a fleet). Every other kind,
# and a lookup these miss, asks the cluster's discovery.
_WELL_KNOWN = _Table(
    [
        _core("configmaps", "ConfigMap"),
        _core("secrets", "Secret"),
        _core("serviceaccounts", "ServiceAccount"),
        {
            "name": "serviceaccounts/token",
            "namespaced": True,
            "kind": "TokenRequest",
            "verbs": ["create"],
        },
        _core("events", "Event"),
        _core("limitranges", "LimitRange"),
        _core("resourcequotas", "ResourceQuota"),
        {
            "name": "resourcequotas/status",
            "namespaced": True,
            "kind": "ResourceQuota",
            "verbs": ["get", "patch", "update"],
        },
        _core(
            "namespaces",
            "Namespace",
            namespaced=False,
            verbs=[v for v in _CRUD if v != "deletecollection"],
        ),
        {
            "name": "namespaces/status",
            "namespaced": False,
            "kind": "Namespace",
            "verbs": ["get", "patch", "update"],
        },
        {
            "name": "namespaces/finalize",
            "namespaced": False,
            "kind": "Namespace",
            "verbs": ["update"],
        },
    ],
    "",
    "v1",
)


class _GroupVersion:
    """Discovery of one group-version in one cluster: when it was fetched, and its mappings by
    kind and by resource (``by_kind`` None: not served)."""

    __slots__ = ("by_kind", "by_resource", "fetched", "_table")

    def __init__(self, resources: list[dict[str, Any]] | None, group: str, version: str) -> None:
        self.fetched = time.monotonic()
        self._table: _Table | None = None  # keeps the shared table alive
        self.by_kind: dict[str, RESTMapping] | None = None
        self.by_resource: dict[str, RESTMapping] = _EMPTY
        if resources is None:
            return
        table = self._table = _table(resources, group, version)
        self.by_kind = table.by_kind
        self.by_resource = table.by_resource


class _Flight:
    """One discovery request of a group-version in flight, and what it gave; each call
    waiting for it waits on an event of its own (set at its end, or by that call's cut)."""

    __slots__ = ("done", "waiters", "result", "error")

    def __init__(self) -> None:
        self.done = False
        self.waiters: list[threading.Event] = []
        self.result: _GroupVersion | None = None
        self.error: BaseException | None = None


class RESTMapper:
    """Maps kinds to REST resources using one cluster's discovery (thread-safe).

    The core/v1 kinds every Kubernetes API server serves (ConfigMap, Secret,
    ServiceAccount, Event, LimitRange, ResourceQuota, Namespace) are known
    without asking, as client-go's typed clients know them. Otherwise only the
    group-versions asked for are fetched (``/api/v1``,
    ``/apis/<group>/<version>``), so engaging many clusters stays cheap. A miss
    re-fetches that group-version (at most once per `MIN_REFRESH_INTERVAL`)
    so CRDs installed later are found; a final miss raises
    [`NoKindMatch`][mcruntime.errors.NoKindMatch] with close matches from the
    discovery of the group-versions that answer.

    One discovery request per group-version is in flight at a time; a lookup of a
    group-version another call is fetching waits for it within its own deadline (and
    cut), and lookups of other group-versions do not wait: a hung aggregated API holds
    back its own kinds only. A failing discovery names its group-version.
    """

    def __init__(self, rest: RESTClient) -> None:
        self.rest = rest
        #: guards the tables alone, never held through a discovery request
        self._lock = threading.Lock()
        self._gvs: dict[tuple[str, str], _GroupVersion] = {}
        #: the discovery request in flight per group-version: one at a time each, the other
        #: lookups of that group-version wait for it (those of other group-versions do not)
        self._flights: dict[tuple[str, str], _Flight] = {}
        self._all_fetched = 0.0
        self._all_gvs: list[tuple[str, str]] = []
        self._on_reset: list[Callable[[], None]] = []
        #: guards ``_on_reset`` alone: a cluster that leaves cancels its callback without
        #: waiting for a reset's callbacks
        self._callbacks_lock = threading.Lock()
        #: the watch of the cluster's CRDs (see `watch_crds`): how many wait on it, the stream
        self._crd_lock = threading.Lock()
        self._crd_waiters = 0
        self._crd_stream: WatchStream | None = None

    def __repr__(self) -> str:
        return f"RESTMapper(cluster={display_name(self.rest.cluster_name)!r})"

    def _fetch(self, group: str, version: str) -> _GroupVersion:
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            doc = self.rest.request("GET", path, expect_object=True)
        except NotFound:
            return _GroupVersion(None, group, version)
        except APIError as exc:  # name what failed: a 503 alone reads as the whole server down
            gv = f"{group}/{version}" if group else version
            raise type(exc)(
                f"couldn't get resource list for {gv} (GET {path}: {exc.status}): "
                f"{exc.message or exc.reason or f'HTTP {exc.status}'}"
                + (" (is its APIService available?)" if group and exc.status == 503 else ""),
                status=exc.status,
                reason=exc.reason,
                details=exc.details,
                cluster_name=exc.cluster_name,
            ) from exc
        resources = doc.get("resources") if isinstance(doc, dict) else None
        return _GroupVersion(list(resources or []), group, version)

    def _group_version(
        self, group: str, version: str, *, refresh: bool, force: bool = False
    ) -> _GroupVersion:
        key = (group, version)
        while True:
            with self._lock:
                gv = self._gvs.get(key)
                if (
                    gv is not None
                    and not force
                    and not (refresh and time.monotonic() - gv.fetched >= MIN_REFRESH_INTERVAL)
                ):
                    return gv
                flight = self._flights.get(key)
                leader = flight is None
                if flight is None:
                    flight = self._flights[key] = _Flight()
                else:
                    mine = threading.Event()
                    flight.waiters.append(mine)
            if leader:
                return self._lead(key, flight)
            done = self._wait(key, flight, mine)
            if done is not None:
                return done
            # the fetch it waited for ended by its own caller's deadline or cut: try again

    def _lead(self, key: tuple[str, str], flight: _Flight) -> _GroupVersion:
        try:
            gv = self._fetch(*key)
        except BaseException as exc:
            with self._lock:
                self._flights.pop(key, None)
                flight.error, flight.done = exc, True
            for w in flight.waiters:
                w.set()
            raise
        with self._lock:
            self._gvs[key] = gv
            self._flights.pop(key, None)
            flight.result, flight.done = gv, True
        for w in flight.waiters:
            w.set()
        return gv

    def _wait(
        self, key: tuple[str, str], flight: _Flight, mine: threading.Event
    ) -> _GroupVersion | None:
        """Wait for another call's fetch of ``key`` within this call's deadline (and cut);
        its result, its error, or None when it ended by its own caller's side."""
        group, version = key
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        end = self.rest._end(None)
        own = call_cut.get()
        wake = contextlib.nullcontext() if own is None else own.waking(mine)
        with wake:
            while not mine.is_set() or not flight.done:
                left = end - time.monotonic()
                if own is not None and own.cut:
                    raise self.rest._abandoned("GET", path, own, False)
                if left <= 0:
                    gv = f"{group}/{version}" if group else version
                    exc = DeadlineExceeded(
                        f"[cluster {display_name(self.rest.cluster_name)}] GET {path}: no "
                        f"discovery of {gv} within the deadline: another call's request for "
                        "it, still in flight, has had no answer",
                        cluster_name=self.rest.cluster_name,
                        address=self.rest.address,
                    )
                    exc.sent = False
                    raise exc
                mine.wait(left)
        if flight.result is not None:
            return flight.result
        err = flight.error
        if isinstance(err, DeadlineExceeded) and err.by_caller:
            return None
        assert err is not None
        raise err

    def mapping(self, kind: KindLike) -> RESTMapping:
        """The mapping of ``kind`` (see [`kind_of()`][mcruntime.client.kind_of]), or NoKindMatch."""
        gvk = kind_of(kind)
        if gvk.version == "v1" and not gvk.group:
            known = _WELL_KNOWN.by_kind.get(gvk.kind)
            if known is not None:
                return known
        for refresh in (False, True):
            gv = self._group_version(gvk.group, gvk.version, refresh=refresh)
            if gv.by_kind is not None and (m := gv.by_kind.get(gvk.kind)) is not None:
                return m
        raise NoKindMatch(
            str(gvk), suggestions=self._suggest(gvk), cluster_name=self.rest.cluster_name
        )

    def _check_served(self, mapping: RESTMapping, exc: NotFound) -> RESTMapping:
        """After ``exc``, a 404 of a request to ``mapping``'s path: when it names no object
        (kube-apiserver's answer for a resource path it does not serve, ``the server could
        not find the requested resource``), discover the group-version again and raise
        [`NoKindMatch`][mcruntime.errors.NoKindMatch] if it no longer serves the resource
        (a CRD's version no longer served, its CRD or APIService removed); else return the
        resource's mapping as discovery has it now (``mapping`` itself when not asked again)."""
        gvk = mapping.gvk
        if exc.name or _WELL_KNOWN.by_resource.get(mapping.resource) is mapping:
            return mapping
        gv = self._group_version(gvk.group, gvk.version, refresh=True, force=True)
        served = gv.by_resource.get(mapping.resource)
        if served is None:
            raise NoKindMatch(
                str(gvk), suggestions=self._suggest(gvk), cluster_name=self.rest.cluster_name
            ) from exc
        return served

    def discovering(self) -> list[str]:
        """The group-versions (``group/version``; ``v1`` for core) whose discovery request is in
        flight now, sorted: what a lookup that does not return waits for."""
        with self._lock:
            keys = sorted(self._flights)
        return [f"{g}/{v}" if g else v for g, v in keys]

    def mapping_for_resource(self, group: str, version: str, resource: str) -> RESTMapping:
        """The mapping of a resource (plural or singular name) in ``group``/``version``."""
        if version == "v1" and not group and (known := _WELL_KNOWN.by_resource.get(resource)):
            return known
        for refresh in (False, True):
            gv = self._group_version(group, version, refresh=refresh)
            if (m := gv.by_resource.get(resource)) is not None:
                return m
        api_version = f"{group}/{version}" if group else version
        raise NoKindMatch(
            f"{api_version}, resource={resource}", cluster_name=self.rest.cluster_name
        )

    def reset(self) -> None:
        """Forget all discovery; the next lookups fetch it again (`install_crds` does, once
        the kinds it installed are served), and tell those `on_reset` registered."""
        with self._lock:
            self._gvs.clear()
            self._all_gvs = []
            self._all_fetched = 0.0
        with self._callbacks_lock:
            callbacks = list(self._on_reset)
        for fn in callbacks:
            fn()

    def on_reset(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn()`` after each `reset` (the manager retries at once the controllers
        waiting for a kind the cluster did not serve); returns a function that cancels
        it. ``fn`` runs on the thread that resets and must not block."""
        with self._callbacks_lock:
            self._on_reset.append(fn)

        def cancel() -> None:
            with self._callbacks_lock, contextlib.suppress(ValueError):
                self._on_reset.remove(fn)

        return cancel

    def watch_crds(self) -> Callable[[], None]:
        """Watch the cluster's CustomResourceDefinitions while a kind it does not serve is
        waited for, and `reset` at each change (created, updated, deleted), which calls what
        `on_reset` registered: a CRD applied with `kubectl` or Helm is noticed at once, not at
        the end of a backoff. Returns a function that ends this caller's wait.

        One watch (of the CRDs' metadata, read by the thread shared by every watch) serves
        every caller of the cluster, and it ends with the last one's wait. It is opened, if
        not open, on the calling thread within a few seconds; one that cannot be had (no right
        to list or watch CRDs, a cluster that does not answer) is said at debug level and
        leaves the callers to their backoff, and one the server ended is opened again by
        the next call. Thread-safe.
        """
        with self._crd_lock:
            self._crd_waiters += 1
            stream = self._crd_stream
            opening = stream is None or stream.closed
            if opening:
                self._crd_stream = None
        if opening:
            stream = self._open_crd_watch()
            with self._crd_lock:
                if self._crd_waiters and self._crd_stream is None and stream is not None:
                    self._crd_stream, stream = stream, None
            if stream is not None:  # every wait ended meanwhile, or another opened one
                stream.close()
        done = threading.Event()

        def end() -> None:
            if done.is_set():
                return
            done.set()
            with self._crd_lock:
                self._crd_waiters -= 1
                if self._crd_waiters:
                    return
                stream, self._crd_stream = self._crd_stream, None
            if stream is not None:
                stream.close()

        return end

    def _open_crd_watch(self) -> WatchStream | None:
        """A watch of the cluster's CRDs that resets this mapper at each change; None when
        it cannot be had."""

        def changed(_event: dict[str, Any]) -> None:
            self.reset()

        try:
            with deadline(_CRD_WATCH_OPEN):
                # the list only says where the watch starts: one CRD's metadata at most
                listed = self.rest.request(
                    "GET", _CRDS, query={"limit": 1}, accept=METADATA_LIST_ACCEPT
                )
                stream = self.rest.watch(
                    _CRDS,
                    query={
                        "resourceVersion": (listed.get("metadata") or {}).get(
                            "resourceVersion", ""
                        ),
                        "timeoutSeconds": _CRD_WATCH_SECONDS,
                    },
                    accept=METADATA_ACCEPT,
                )
        except Exception as exc:
            log.debug(
                "cluster=%s: CRDs not watched while a kind is not served (%s); retrying with "
                "backoff only",
                display_name(self.rest.cluster_name),
                exc,
                extra=log_fields(cluster=self.rest.cluster_name),
            )
            return None
        if not stream.start(changed, lambda _error: None):
            stream.close()
            return None
        return stream

    # -- suggestions ----------------------------------------------------------------

    def _served_group_versions(self) -> list[tuple[str, str]]:
        with self._lock:
            if time.monotonic() - self._all_fetched < MIN_REFRESH_INTERVAL:
                return self._all_gvs
        gvs: list[tuple[str, str]] = []
        core = self.rest.request("GET", "/api", expect_object=True)
        gvs += [("", str(v)) for v in (core or {}).get("versions") or ()]
        groups = self.rest.request("GET", "/apis", expect_object=True)
        for g in (groups or {}).get("groups") or ():
            for v in g.get("versions") or ():
                gvs.append((str(g.get("name", "")), str(v.get("version", ""))))
        with self._lock:
            self._all_gvs, self._all_fetched = gvs, time.monotonic()
        return gvs

    def _suggest(self, gvk: GroupVersionKind) -> list[str]:
        # best effort, within a small budget: a group-version whose discovery fails or hangs
        # is skipped, the others still give their kinds (the NoKindMatch is what matters)
        known: list[GroupVersionKind] = []
        with deadline(_SUGGEST_BUDGET):
            try:
                served = self._served_group_versions()
            except Exception:
                return []
            for group, version in served:
                try:
                    gv = self._group_version(group, version, refresh=False)
                except Exception:
                    continue
                known += [m.gvk for m in (gv.by_kind or {}).values()]
        wanted = gvk.kind.lower()
        same = [str(k) for k in known if k.kind.lower() == wanted]
        if same:
            return same[:3]
        by_name: dict[str, list[str]] = {}
        for k in known:
            by_name.setdefault(k.kind.lower(), []).append(str(k))
        close = difflib.get_close_matches(wanted, list(by_name), n=3, cutoff=0.75)
        return [s for name in close for s in by_name[name]][:3]
