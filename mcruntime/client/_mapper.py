"""RESTMapper: kind <-> resource from the cluster's discovery, fetched lazily per group-version."""

from __future__ import annotations

import contextlib
import difflib
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from mcruntime import _json
from mcruntime._local import display_name
from mcruntime.client._kinds import GroupVersionKind, KindLike, RESTMapping, kind_of
from mcruntime.client._rest import RESTClient
from mcruntime.errors import NoKindMatch, NotFound

__all__ = ["RESTMapper", "MIN_REFRESH_INTERVAL"]

#: a group-version (or the full discovery) is re-fetched on a miss at most this often (seconds)
MIN_REFRESH_INTERVAL = 1.0


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


class RESTMapper:
    """Maps kinds to REST resources using one cluster's discovery (thread-safe).

    The core/v1 kinds every Kubernetes API server serves (ConfigMap, Secret,
    ServiceAccount, Event, LimitRange, ResourceQuota, Namespace) are known
    without asking, as client-go's typed clients know them. Otherwise only the
    group-versions asked for are fetched (``/api/v1``,
    ``/apis/<group>/<version>``), so engaging many clusters stays cheap. A miss
    re-fetches that group-version (at most once per `MIN_REFRESH_INTERVAL`)
    so CRDs installed later are found; a final miss raises
    [`NoKindMatch`][mcruntime.errors.NoKindMatch] with close matches from the full
    discovery.
    """

    def __init__(self, rest: RESTClient) -> None:
        self.rest = rest
        self._lock = threading.RLock()
        self._gvs: dict[tuple[str, str], _GroupVersion] = {}
        self._all_fetched = 0.0
        self._all_gvs: list[tuple[str, str]] = []
        self._on_reset: list[Callable[[], None]] = []
        #: guards ``_on_reset`` alone: ``_lock`` is held through a discovery request, and a
        #: cluster that leaves cancels its callback without waiting for one
        self._callbacks_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RESTMapper(cluster={display_name(self.rest.cluster_name)!r})"

    def _fetch(self, group: str, version: str) -> _GroupVersion:
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            doc = self.rest.request("GET", path, expect_object=True)
        except NotFound:
            gv = _GroupVersion(None, group, version)
        else:
            resources = doc.get("resources") if isinstance(doc, dict) else None
            gv = _GroupVersion(list(resources or []), group, version)
        self._gvs[(group, version)] = gv
        return gv

    def _group_version(self, group: str, version: str, *, refresh: bool) -> _GroupVersion:
        with self._lock:
            gv = self._gvs.get((group, version))
            if gv is None or (refresh and time.monotonic() - gv.fetched >= MIN_REFRESH_INTERVAL):
                gv = self._fetch(group, version)
            return gv

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
            self._all_gvs, self._all_fetched = gvs, time.monotonic()
            return gvs

    def _suggest(self, gvk: GroupVersionKind) -> list[str]:
        try:
            served = self._served_group_versions()
            known: list[GroupVersionKind] = []
            for group, version in served:
                gv = self._group_version(group, version, refresh=False)
                known += [m.gvk for m in (gv.by_kind or {}).values()]
        except Exception:  # suggestions are best effort; the NoKindMatch is what matters
            return []
        wanted = gvk.kind.lower()
        same = [str(k) for k in known if k.kind.lower() == wanted]
        if same:
            return same[:3]
        by_name: dict[str, list[str]] = {}
        for k in known:
            by_name.setdefault(k.kind.lower(), []).append(str(k))
        close = difflib.get_close_matches(wanted, list(by_name), n=3, cutoff=0.75)
        return [s for name in close for s in by_name[name]][:3]
