"""The ``Client`` reconcilers use: reads from a Reader (the cache) or the API, writes to the API."""

from __future__ import annotations

import builtins
import contextlib
import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, overload, runtime_checkable

from mcruntime import _json
from mcruntime._listing import ListProgress
from mcruntime._local import display_name
from mcruntime._selectors import FieldSelector, LabelSelector
from mcruntime.client._kinds import GroupVersionKind, KindLike, RESTMapping, kind_of
from mcruntime.client._mapper import RESTMapper
from mcruntime.client._metadata import (
    METADATA_ACCEPT,
    METADATA_LIST_ACCEPT,
    MetadataOnly,
    strip_to_metadata,
)
from mcruntime.client._resource import gvk_of_object, to_dict, to_typed
from mcruntime.client._rest import RESTClient, call_timeout, list_deadline
from mcruntime.errors import Gone, NotFound

if TYPE_CHECKING:
    from mcruntime.client._subresource import SubResourceClient

__all__ = [
    "Client",
    "Reader",
    "APIReader",
    "ListPage",
    "PatchType",
    "PATCH_CONTENT_TYPES",
    "APPLY_CONTENT_TYPE",
]

PatchType = Literal["merge", "json", "strategic"]

PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}

#: content type of a server-side apply (the body is JSON, which is YAML too)
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"

#: page size of APIReader.list when following ``continue``
DEFAULT_PAGE_SIZE = 500

#: a typed kind (a ``Resource`` subclass, a ``kubernetes`` model class) and its objects
_T = TypeVar("_T")


@runtime_checkable
class Reader(Protocol):
    """Reads objects of one cluster as plain dicts.

    Contract: thread-safe; ``get`` raises [`NotFound`][mcruntime.errors.NotFound]
    for a missing object and ``ValueError`` when a namespaced kind is read
    without a namespace. Returned dicts may be shared with a cache: callers
    must not mutate them ([`Client`][mcruntime.client.Client] hands out copies, except of
    kinds whose [`ByKind`][mcruntime.cache.ByKind] sets ``unsafe_disable_deep_copy``: a
    reader with a ``copy_reads(kind)`` method that returns False for a kind is handed on as is).
    ``metadata_only=True`` reads objects' metadata alone (see
    [`strip_to_metadata()`][mcruntime.client.strip_to_metadata]); a Client passes it only when asked.
    """

    def get(
        self, kind: KindLike, name: str, namespace: str | None = None, *, metadata_only: bool = ...
    ) -> dict[str, Any]:
        """The object ``name`` of ``kind`` (in ``namespace`` for namespaced kinds)."""
        ...

    def list(
        self,
        kind: KindLike,
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
        metadata_only: bool = ...,
    ) -> list[dict[str, Any]]:
        """Objects of ``kind``, in ``namespace`` (None: all), filtered by selectors."""
        ...


def _limit(limit: int | None) -> int | None:
    """A list's ``limit``: 0 or below is no limit, as in Kubernetes (``ListOptions.Limit``)."""
    return limit if limit is not None and limit > 0 else None


def _label_query(labels: str | Mapping[str, str] | LabelSelector | None) -> str | None:
    """The ``labelSelector`` of a request, checked as the cache checks it: a selector that does
    not parse, or a dict naming an invalid label key or value, raises `SelectorError` before
    anything is sent (a dict value ``"web,tier"`` joined unchecked read as two requirements)."""
    if labels is None:
        return None
    if isinstance(labels, LabelSelector):
        return str(labels) or None
    if isinstance(labels, str):
        LabelSelector.parse(labels)
        return labels or None
    LabelSelector.from_dict(labels)
    return ",".join(f"{k}={v}" for k, v in labels.items()) or None


def _field_query(fields: str | Mapping[str, str] | FieldSelector | None) -> str | None:
    """The ``fieldSelector`` of a request, checked as the cache checks it (`SelectorError`);
    a dict's values are escaped as apimachinery's ``fields.Set`` escapes them."""
    if fields is None:
        return None
    if isinstance(fields, str):
        FieldSelector.parse(fields)
        return fields or None
    if not isinstance(fields, FieldSelector):
        fields = FieldSelector.from_dict(fields)
    return str(fields) or None


@contextlib.contextmanager
def _served(
    mapper: RESTMapper,
    mapping: RESTMapping,
    subresource: str | None = None,
    namespace: str | None = None,
    name: str = "",
) -> Iterator[None]:
    """A 404 naming no object (the server does not serve the resource's path: a CRD's
    version no longer served, its CRD deleted) is a `NoKindMatch` once discovery agrees, not
    a `NotFound`: a reconciler that takes NotFound for a deleted object would clean up a
    live one, or take a delete that never happened for done. The same for reads and writes.

    A 404 of a ``subresource`` the cluster's discovery does not list for the resource says
    so: the server's own words (``the server could not find the requested resource``) read
    as if the object were gone."""
    try:
        yield
    except NotFound as exc:
        if exc.name:
            raise
        served = mapper._check_served(mapping, exc)
        if subresource is None or subresource in served.subresources:
            raise
        where = f"{namespace}/{name}" if namespace else name
        hint = (
            "; a CustomResourceDefinition serves it when its version declares "
            "subresources.status, else write status with update() or patch() of the object"
            if subresource == "status"
            else ""
        )
        raise NotFound(
            f"{mapping.gvk.kind} {where}: {mapping.resource} has no {subresource!r} "
            f"subresource (the server's discovery lists none){hint}",
            status=exc.status,
            reason=exc.reason,
            details=exc.details,
            cluster_name=exc.cluster_name,
        ) from None


def _namespace_for(mapping: RESTMapping, namespace: str | None, what: str) -> str | None:
    if not mapping.namespaced:
        return None
    if not namespace:
        raise ValueError(f"{mapping.gvk} is namespaced: {what} needs a namespace")
    return namespace


class APIReader:
    """A [`Reader`][mcruntime.client.Reader] that reads straight from the API server; ``list`` follows pagination."""

    def __init__(self, rest: RESTClient, mapper: RESTMapper) -> None:
        self.rest = rest
        self.mapper = mapper

    def __repr__(self) -> str:
        return f"APIReader(cluster={display_name(self.rest.cluster_name)!r})"

    def get(
        self,
        kind: KindLike,
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> dict[str, Any]:
        """GET one object from the API (``timeout``: the call's deadline, see `RESTClient.request`;
        ``metadata_only``: its metadata alone)."""
        with call_timeout(timeout):
            mapping = self.mapper.mapping(kind)
            ns = _namespace_for(mapping, namespace, f"get({name!r})")
            with _served(self.mapper, mapping):
                return self._get(mapping, ns, name, metadata_only)

    def _get(
        self, mapping: RESTMapping, ns: str | None, name: str, metadata_only: bool
    ) -> dict[str, Any]:
        if not metadata_only:
            obj: dict[str, Any] = self.rest.request(
                "GET", mapping.path(ns, name), expect_object=True
            )
            return obj
        partial = self.rest.request(
            "GET", mapping.path(ns, name), accept=METADATA_ACCEPT, expect_object=True
        )
        return strip_to_metadata(partial, mapping.gvk)

    def list(
        self,
        kind: KindLike,
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> list[dict[str, Any]]:
        """LIST from the API, page by page; ``limit`` caps the total returned (0 or
        below: no limit, as in Kubernetes).

        ``timeout`` bounds the whole list, every page included (default: the enclosing
        [`deadline`][mcruntime.client.deadline], else `DEFAULT_TIMEOUT` for the whole
        list; [`pages()`][mcruntime.client.APIReader.pages] bounds each page instead). A
        list that deadline cuts after a page came in raises
        [`DeadlineExceeded`][mcruntime.errors.DeadlineExceeded] saying how many pages and
        objects it got (``by_caller`` True when the deadline was the caller's), which is no
        failure of the cluster. ``metadata_only`` lists the objects' metadata alone.
        """
        limit = _limit(limit)
        if index is not None:
            raise ValueError(
                "list(index=...) needs the cache-backed reader (cluster.client); "
                "the API reader has no field indexes, use fields= instead"
            )
        with list_deadline(timeout) as progress:
            mapping, path, query = self._list_request(kind, namespace, labels, fields)
            with _served(self.mapper, mapping):
                return self._pages(path, query, mapping.gvk, limit, metadata_only, progress)

    def _list_request(
        self,
        kind: KindLike,
        namespace: str | None,
        labels: str | Mapping[str, str] | None,
        fields: str | Mapping[str, str] | None,
    ) -> tuple[RESTMapping, str, dict[str, Any]]:
        """The mapping, path and selector query of a LIST of ``kind`` (``namespace`` ignored
        for a cluster-scoped kind)."""
        query: dict[str, Any] = {
            "labelSelector": _label_query(labels),
            "fieldSelector": _field_query(fields),
        }
        mapping = self.mapper.mapping(kind)
        ns = namespace if mapping.namespaced and namespace else None
        return mapping, mapping.path(ns), query

    def pages(
        self,
        kind: KindLike,
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        continue_token: str | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> Iterator[ListPage]:
        """LIST from the API one page at a time: a collection too big to hold at once.

        Each page is one request of at most ``page_size`` objects, bounded by
        ``timeout`` (the call's deadline, see `RESTClient.request`), made when the
        iteration asks for it. Stop at any page; its
        [`continue_token`][mcruntime.client.ListPage] resumes the same list later, as
        `continue_token=` here. kube-apiserver keeps a list's pages consistent for about
        five minutes (its compaction interval): a page asked for later is a
        [`Gone`][mcruntime.errors.Gone] that says to list again from the start.

            for page in cluster.api_reader.pages("v1/Pod", page_size=200):
                for pod in page.items:
                    ...
        """
        if page_size < 1:
            raise ValueError(f"pages(page_size={page_size}): a page holds at least one object")
        with call_timeout(timeout):
            mapping, path, query = self._list_request(kind, namespace, labels, fields)
        query["limit"] = page_size
        query["continue"] = continue_token or None
        while True:
            try:
                with call_timeout(timeout), _served(self.mapper, mapping):
                    page = self._page(path, query, mapping.gvk, metadata_only)
            except Gone as exc:
                if not query["continue"]:
                    raise
                raise Gone(
                    f"the pages of this list of {mapping.gvk} expired (the server keeps them "
                    "consistent for about five minutes): list again from the start",
                    status=exc.status,
                    reason=exc.reason,
                    details=exc.details,
                    cluster_name=exc.cluster_name,
                ) from None
            yield page
            if page.continue_token is None:
                return
            query["continue"] = page.continue_token

    def _page(
        self, path: str, query: dict[str, Any], gvk: GroupVersionKind, metadata: bool
    ) -> ListPage:
        """One LIST request: its items (each with its kind) and list metadata."""
        accept = METADATA_LIST_ACCEPT if metadata else "application/json"
        page = self.rest.request("GET", path, query=query, accept=accept, expect_object=True)
        items: builtins.list[dict[str, Any]] = []
        item_kind = {"apiVersion": gvk.api_version, "kind": gvk.kind}
        for item in page.get("items") or ():
            if metadata:
                item = strip_to_metadata(item, gvk)
            elif "kind" not in item:
                item.update(item_kind)
            items.append(item)
        meta = page.get("metadata") or {}
        remaining = meta.get("remainingItemCount")
        return ListPage(
            items,
            meta.get("continue") or None,
            str(meta.get("resourceVersion") or ""),
            remaining if isinstance(remaining, int) else None,
        )

    def _pages(
        self,
        path: str,
        query: dict[str, Any],
        gvk: GroupVersionKind,
        limit: int | None,
        metadata: bool,
        progress: ListProgress,
    ) -> builtins.list[dict[str, Any]]:
        items: builtins.list[dict[str, Any]] = []
        paged = True
        while True:
            want = (
                DEFAULT_PAGE_SIZE if limit is None else min(DEFAULT_PAGE_SIZE, limit - len(items))
            )
            query["limit"] = want if paged or limit is not None else None
            try:
                page = self._page(path, query, gvk, metadata)
            except Gone:
                if not query.get("continue"):
                    raise
                # the pages expired (a list slower than the server's compaction): one whole
                # list instead, as client-go's pager does (FullListIfExpired)
                items.clear()
                query["continue"] = None
                paged = False
                continue
            progress.page(len(page.items))
            items.extend(page.items)
            if page.continue_token is None or (limit is not None and len(items) >= limit):
                break
            query["continue"] = page.continue_token
        return items if limit is None else items[:limit]


@dataclass(frozen=True)
class ListPage:
    """One page of a LIST ([`APIReader.pages`][mcruntime.client.APIReader.pages])."""

    #: the page's objects (dicts, each with its ``apiVersion`` and ``kind``)
    items: builtins.list[dict[str, Any]]
    #: resumes the list after this page (``pages(continue_token=...)``); None on the last page
    continue_token: str | None
    #: the resourceVersion the whole list is consistent with
    resource_version: str
    #: how many objects follow this page, when the server says (only unfiltered lists)
    remaining_item_count: int | None


def _copy(obj: Any) -> Any:
    return _json.loads(_json.dumps(obj))


def _typed(kind: KindLike, data: Any, cluster_name: str | None = None) -> Any:
    """``data`` in the flavour ``kind`` is named in (an instance for a class, else the dict)."""
    return to_typed(data, kind, cluster_name) if isinstance(kind, type) else data


def _address(obj: Any, namespace: str | None) -> tuple[GroupVersionKind, str, str | None]:
    """The kind, name and namespace of the object ``delete(obj)`` is given."""
    if isinstance(obj, str | type | GroupVersionKind):
        raise TypeError(
            f"delete({obj!r}) needs a name: delete(kind, name, namespace), or delete(obj) "
            "with the object itself"
        )
    gvk = gvk_of_object(obj)
    meta = to_dict(obj).get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise ValueError(f"delete of a {gvk} needs metadata.name")
    return gvk, name, namespace if namespace is not None else meta.get("namespace")


def _delete_options(
    propagation: str | None,
    preconditions: Mapping[str, Any] | None,
    grace_period_seconds: int | None,
) -> dict[str, Any]:
    opts: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if propagation is not None:
        opts["propagationPolicy"] = propagation
    if preconditions:
        opts["preconditions"] = dict(preconditions)
    if grace_period_seconds is not None:
        opts["gracePeriodSeconds"] = grace_period_seconds
    return opts


def _patch_body(patch: Any, patch_type: str) -> tuple[Any, str]:
    """``patch`` ready to send as ``patch_type`` and its content type (ValueError if it cannot be)."""
    content_type = PATCH_CONTENT_TYPES.get(patch_type)
    if content_type is None:
        raise ValueError(
            f"unknown patch type {patch_type!r}: use one of {', '.join(PATCH_CONTENT_TYPES)}"
        )
    if patch_type == "json" and not isinstance(patch, (list, bytes)):
        raise ValueError("a JSON patch is a list of operations ({'op': ..., 'path': ...})")
    if patch_type != "json" and isinstance(patch, list):
        raise ValueError(
            f'a list of operations is a JSON patch: pass type="json" (a {patch_type} patch '
            "is a dict, a Resource or a kubernetes model)"
        )
    if patch_type != "json" and not isinstance(patch, (dict, bytes)):
        # a typed patch holds what its author set (as an applied configuration): a model
        # default it sent would reset the value another writer stored
        patch = to_dict(patch, applied=True)
    return patch, content_type


class Client:
    """Reads and writes objects of one cluster.

    Reads go to ``reader`` (the cache-backed reader a [`Cluster`][mcruntime.cluster.Cluster]
    sets) when given, else to the API. Writes always go to the API. Objects
    come back in the flavour the kind was named by: dicts for strings and
    ``GroupVersionKind``, instances for ``Resource`` and ``kubernetes`` model
    classes (and for writes, the flavour of the object passed in).
    """

    def __init__(
        self,
        rest: RESTClient,
        mapper: RESTMapper,
        *,
        reader: Reader | None = None,
        cluster_name: str = "",
        field_manager: str | None = None,
    ) -> None:
        self.rest = rest
        self.mapper = mapper
        self.api_reader = APIReader(rest, mapper)
        self.reader: Reader = reader if reader is not None else self.api_reader
        self.cluster_name = cluster_name or rest.cluster_name
        #: the field manager of writes that name none (None: the server's default, from the
        #: User-Agent); see `with_field_manager`
        self.field_manager = field_manager
        self._copy_reads = reader is not None

    def __repr__(self) -> str:
        return f"Client(cluster={display_name(self.cluster_name)!r})"

    def with_field_manager(self, field_manager: str) -> Client:
        """This client, writing as ``field_manager`` when a call names none.

        The API server records who set each field (``metadata.managedFields``);
        without a name it uses the client's User-Agent, so every controller of
        a process looks alike there. As controller-runtime's
        ``client.WithFieldOwner``: the copy shares this client's connections,
        mapper and cache, and ``apply`` needs no ``field_manager=`` with it.
        """
        if not field_manager:
            raise ValueError("with_field_manager needs a non-empty field manager name")
        clone = copy.copy(self)
        clone.field_manager = field_manager
        return clone

    def subresource(self, subresource: str) -> SubResourceClient:
        """A client of the ``subresource`` of objects (``"scale"``, ``"eviction"``, ``"token"``,
        ``"status"`` ...), as controller-runtime's ``client.SubResource``.

        ```python
        scale = client.subresource("scale").get("apps/v1/Deployment", "web", "default")
        client.subresource("eviction").create(
            "v1/Pod", "web-0", {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": "web-0", "namespace": "default"}}, "default")
        ```
        """
        from mcruntime.client._subresource import SubResourceClient

        return SubResourceClient(self, subresource)

    def _write_query(
        self, dry_run: bool, field_manager: str | None = None, *, manager: bool = True
    ) -> dict[str, str] | None:
        """The query of a write: ``dryRun=All`` and the field manager (``manager=False``: none)."""
        query: dict[str, str] = {}
        if dry_run:
            query["dryRun"] = "All"
        name = (field_manager or self.field_manager) if manager else None
        if name:
            query["fieldManager"] = name
        return query or None

    # -- reads ----------------------------------------------------------------------

    def _copies(self, kind: KindLike) -> bool:
        """Whether reads of ``kind`` are copied: those of a cache-backed reader, unless it says
        the kind's reads are shared (``ByKind(unsafe_disable_deep_copy=True)``)."""
        if not self._copy_reads:
            return False
        copy_reads = getattr(self.reader, "copy_reads", None)
        return copy_reads is None or bool(copy_reads(kind))

    def _metadata(self, data: dict[str, Any], copies: bool) -> MetadataOnly:
        return MetadataOnly(_copy(data)) if copies else MetadataOnly(data)

    def _view(self, kind: KindLike, data: dict[str, Any], copies: bool) -> Any:
        return _typed(kind, _copy(data) if copies else data, self.cluster_name)

    @overload
    def get(
        self,
        kind: KindLike,
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
        metadata_only: Literal[True],
    ) -> MetadataOnly: ...
    @overload
    def get(
        self,
        kind: type[_T],
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
        metadata_only: Literal[False] = False,
    ) -> _T: ...
    @overload
    def get(
        self,
        kind: str | GroupVersionKind,
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> dict[str, Any]: ...
    @overload
    def get(
        self,
        kind: type[_T],
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> _T | MetadataOnly: ...
    def get(
        self,
        kind: KindLike,
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> Any:
        """The object ``name`` (in ``namespace`` for namespaced kinds); NotFound if missing.

        ``timeout`` bounds the read (an API call, or the wait for a new
        informer's initial list), as every ``timeout=`` of this class does.
        ``metadata_only`` reads the object's metadata alone, from a
        metadata-only informer of the kind (or the API for an uncached kind):
        a [`MetadataOnly`][mcruntime.client.MetadataOnly] dict with ``apiVersion``,
        ``kind`` and ``metadata``, whatever flavour the kind is named in, which
        the write methods refuse (patch it instead).
        """
        with call_timeout(timeout):
            if metadata_only:
                data = self.reader.get(kind, name, namespace, metadata_only=True)
                return self._metadata(data, self._copies(kind))
            return self._view(kind, self.reader.get(kind, name, namespace), self._copies(kind))

    @overload
    def list(
        self,
        kind: KindLike,
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        metadata_only: Literal[True],
    ) -> builtins.list[MetadataOnly]: ...
    @overload
    def list(
        self,
        kind: type[_T],
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        metadata_only: Literal[False] = False,
    ) -> builtins.list[_T]: ...
    @overload
    def list(
        self,
        kind: str | GroupVersionKind,
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> builtins.list[dict[str, Any]]: ...
    @overload
    def list(
        self,
        kind: type[_T],
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> builtins.list[_T | MetadataOnly]: ...
    def list(
        self,
        kind: KindLike,
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> builtins.list[Any]:
        """Objects of ``kind`` in ``namespace`` (None: all namespaces).

        ``labels``/``fields`` are selectors (``"app=web"`` or ``{"app": "web"}``);
        ``index=(field, value)`` uses a field index of the cache (only with the
        cache-backed reader); ``limit`` caps the number returned (0 or below: no limit,
        as in Kubernetes and controller-runtime; read from the API, it is sent as the
        list's ``limit``);
        ``metadata_only`` lists metadata alone, as [`get()`][mcruntime.client.Client.get] reads it.
        """
        limit = _limit(limit)
        meta = {"metadata_only": True} if metadata_only else {}
        with call_timeout(timeout):
            if isinstance(self.reader, APIReader) or getattr(self.reader, "takes_limit", False):
                # the API reader, or a cluster's reader that hands it on to its uncached kinds
                reader: Any = self.reader
                items = reader.list(
                    kind, namespace, labels=labels, fields=fields, index=index, limit=limit, **meta
                )
            else:
                items = self.reader.list(
                    kind, namespace, labels=labels, fields=fields, index=index, **meta
                )
                if limit is not None:
                    items = items[:limit]
        copies = self._copies(kind)
        if metadata_only:
            return [self._metadata(item, copies) for item in items]
        return [self._view(kind, item, copies) for item in items]

    # -- writes ---------------------------------------------------------------------

    def _target(
        self, obj: Any, what: str, *, applied: bool = False
    ) -> tuple[dict[str, Any], RESTMapping, str | None, str]:
        body = to_dict(obj, applied=applied)
        gvk = gvk_of_object(obj)
        meta = body.get("metadata") or {}
        name = meta.get("name") or ""
        if isinstance(obj, MetadataOnly):
            raise TypeError(
                f"cannot {what} {gvk} {name!r} from a metadata-only read: written whole it would "
                "drop every field but its metadata; patch its metadata instead, as in "
                "client.patch(kind, name, {'metadata': {...}}, namespace, metadata_only=True)"
            )
        mapping = self.mapper.mapping(gvk)
        ns = _namespace_for(mapping, meta.get("namespace"), f"{what} of {name or 'an object'!r}")
        if "apiVersion" not in body or "kind" not in body:
            body = {"apiVersion": gvk.api_version, "kind": gvk.kind, **body}
        return body, mapping, ns, name

    def _result(self, like: Any, data: dict[str, Any]) -> Any:
        if isinstance(like, dict):
            return data
        return to_typed(data, type(like), self.cluster_name)

    @overload
    def create(
        self,
        obj: dict[str, Any],
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    def create(
        self,
        obj: _T,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> _T: ...
    def create(
        self,
        obj: Any,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Create ``obj``; returns the created object (same flavour as ``obj``).

        ``dry_run`` has the server validate, admit and default the write and
        answer with the result, storing nothing (``dryRun=All``);
        ``field_manager`` names the writer in ``managedFields`` (default: this
        client's [`field_manager`][mcruntime.client.Client.with_field_manager]),
        as on every write of this class. ``timeout`` bounds the whole call
        (discovery of the kind included), as every ``timeout=`` of this class
        does; default: the enclosing [`deadline`][mcruntime.client.deadline],
        else `DEFAULT_TIMEOUT`.
        """
        with call_timeout(timeout):
            body, mapping, ns, _ = self._target(obj, "create")
            query = self._write_query(dry_run, field_manager)
            with _served(self.mapper, mapping):
                data = self.rest.request(
                    "POST", mapping.path(ns), query=query, body=body, expect_object=True
                )
            return self._result(obj, data)

    @overload
    def update(
        self,
        obj: dict[str, Any],
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    def update(
        self,
        obj: _T,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> _T: ...
    def update(
        self,
        obj: Any,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Replace ``obj`` (PUT); Conflict if its resourceVersion is stale."""
        return self._update(obj, None, dry_run, field_manager, timeout)

    @overload
    def update_status(
        self,
        obj: dict[str, Any],
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    def update_status(
        self,
        obj: _T,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> _T: ...
    def update_status(
        self,
        obj: Any,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Replace the status subresource of ``obj``."""
        return self._update(obj, "status", dry_run, field_manager, timeout)

    def _update(
        self,
        obj: Any,
        subresource: str | None,
        dry_run: bool,
        field_manager: str | None,
        timeout: float | None,
    ) -> Any:
        what = "update_status" if subresource else "update"
        with call_timeout(timeout):
            # a full replace: an object built in Python is written with its defaults (as
            # create() writes them), one read from the API only with what it was read with
            body, mapping, ns, name = self._target(obj, what)
            if not name:
                raise ValueError(f"{what} of a {mapping.gvk} needs metadata.name")
            query = self._write_query(dry_run, field_manager)
            data = self._request_at(
                mapping, ns, name, subresource, "PUT", query=query, body=body, expect_object=True
            )
            return self._result(obj, data)

    def delete(
        self,
        kind: KindLike | Any,
        name: str | None = None,
        namespace: str | None = None,
        *,
        propagation: Literal["Foreground", "Background", "Orphan"] | str | None = None,
        preconditions: Mapping[str, Any] | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Delete ``name``; NotFound if it is gone (wrap in ``ignore_not_found()`` to ignore).

        ``delete(obj)`` deletes the object ``obj`` names (a dict, a typed resource or a
        ``kubernetes`` model: its kind, ``metadata.name`` and ``metadata.namespace``), as
        controller-runtime's ``Delete(ctx, obj)``.
        ``propagation`` is the propagationPolicy for dependents;
        ``preconditions`` e.g. ``{"uid": ..., "resourceVersion": ...}``;
        ``dry_run`` checks the delete (admission and finalizers included) and
        deletes nothing.
        """
        if name is None:
            kind, name, namespace = _address(kind, namespace)
        opts = _delete_options(propagation, preconditions, grace_period_seconds)
        with call_timeout(timeout):
            mapping = self.mapper.mapping(kind)
            ns = _namespace_for(mapping, namespace, f"delete({name!r})")
            query = self._write_query(dry_run, manager=False)
            with _served(self.mapper, mapping):
                self.rest.request("DELETE", mapping.path(ns, name), query=query, body=opts)

    def delete_all_of(
        self,
        kind: KindLike,
        namespace: str | None = None,
        *,
        labels: str | Mapping[str, str] | None = None,
        fields: str | Mapping[str, str] | None = None,
        propagation: Literal["Foreground", "Background", "Orphan"] | str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Delete every object of ``kind`` in ``namespace`` that the selectors match, in one
        request (``deletecollection``), as controller-runtime's ``DeleteAllOf``.

        A namespaced kind needs a namespace: kube-apiserver deletes a collection
        one namespace at a time. No selector deletes every object of the kind
        there. Objects with finalizers stay until their finalizers are removed;
        ``dry_run`` deletes nothing.
        """
        opts = _delete_options(propagation, None, grace_period_seconds)
        selectors = {"labelSelector": _label_query(labels), "fieldSelector": _field_query(fields)}
        with call_timeout(timeout):
            mapping = self.mapper.mapping(kind)
            ns = _namespace_for(mapping, namespace, "delete_all_of")
            query: dict[str, Any] = {
                **selectors,
                **(self._write_query(dry_run, manager=False) or {}),
            }
            with _served(self.mapper, mapping):
                self.rest.request("DELETE", mapping.path(ns), query=query, body=opts)

    @overload
    def patch(
        self,
        kind: KindLike,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
        metadata_only: Literal[True],
    ) -> MetadataOnly: ...
    @overload
    def patch(
        self,
        kind: type[_T],
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
        metadata_only: Literal[False] = False,
    ) -> _T: ...
    @overload
    def patch(
        self,
        kind: str | GroupVersionKind,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> dict[str, Any]: ...
    @overload
    def patch(
        self,
        kind: type[_T],
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> _T | MetadataOnly: ...
    def patch(
        self,
        kind: KindLike,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> Any:
        """Patch ``name`` with a merge patch (dict), JSON patch (list of ops) or strategic merge patch.

        A pydantic [`Resource`][mcruntime.client.Resource] given as a merge or strategic
        patch sends only the fields set (assigned, or read from the API), as
        [`apply`][mcruntime.client.Client.apply] does: model defaults of fields left
        unset are not sent, so they do not reset what another writer stored.

        ``metadata_only`` answers with the patched object's metadata alone (a
        [`MetadataOnly`][mcruntime.client.MetadataOnly]), as the way to write
        what a metadata-only read returned: a finalizer or a label, say.
        """
        with call_timeout(timeout):
            data = self._patch(
                kind,
                name,
                patch,
                namespace,
                patch_type=type,
                subresource=None,
                query=self._write_query(dry_run, field_manager),
                metadata=metadata_only,
            )
        return data if metadata_only else _typed(kind, data, self.cluster_name)

    @overload
    def patch_status(
        self,
        kind: type[_T],
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> _T: ...
    @overload
    def patch_status(
        self,
        kind: str | GroupVersionKind,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    def patch_status(
        self,
        kind: KindLike,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        type: PatchType = "merge",
        dry_run: bool = False,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Patch the status subresource of ``name``."""
        with call_timeout(timeout):
            data = self._patch(
                kind,
                name,
                patch,
                namespace,
                patch_type=type,
                subresource="status",
                query=self._write_query(dry_run, field_manager),
            )
        return _typed(kind, data, self.cluster_name)

    def _patch(
        self,
        kind: KindLike,
        name: str,
        patch: Any,
        namespace: str | None,
        *,
        patch_type: str,
        subresource: str | None,
        query: Mapping[str, str] | None,
        metadata: bool = False,
        what: str = "patch",
    ) -> Any:
        """PATCH ``name`` (its ``subresource``); the answer as decoded (its metadata alone with
        ``metadata``): the callers give it the flavour they promise."""
        if isinstance(patch, str) or not isinstance(namespace, str | None):
            # get and delete take the namespace third; patch takes the patch third
            raise TypeError(
                f"{what} of {name!r}: the patch comes before the namespace, as in "
                f"patch(kind, name, patch, namespace); got a {type(patch).__name__} patch "
                f"and a {type(namespace).__name__} namespace"
            )
        body, content_type = _patch_body(patch, patch_type)
        mapping = self.mapper.mapping(kind)
        ns = _namespace_for(mapping, namespace, f"{what}({name!r})")
        data = self._request_at(
            mapping,
            ns,
            name,
            subresource,
            "PATCH",
            query=query,
            body=body,
            content_type=content_type,
            accept=METADATA_ACCEPT if metadata else "application/json",
            expect_object=True,
        )
        return strip_to_metadata(data, mapping.gvk) if metadata else data

    @overload
    def apply(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    def apply(
        self,
        obj: _T,
        *,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> _T: ...
    def apply(
        self,
        obj: Any,
        *,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """Server-side apply ``obj`` as ``field_manager``; returns the object as stored.

        ``obj`` is the applied configuration: only the fields this manager wants
        to own (a dict with ``apiVersion``/``kind``, a [`Resource`][mcruntime.client.Resource]
        or a ``kubernetes`` model; a Resource sends the fields set, not its model
        defaults), sent as JSON with
        ``Content-Type: application/apply-patch+yaml``. The object is created
        when absent; fields this manager applied before and leaves out now are
        removed. A field another manager owns with a different value raises
        [`Conflict`][mcruntime.errors.Conflict] (its ``field_conflicts`` name each
        field and manager) unless ``force`` takes the fields over. A field the
        kind does not declare fails the apply: kube-apiserver answers 500
        ``... .spec.replicaz: field not declared in schema`` (an
        [`APIError`][mcruntime.errors.APIError], not retried). ``timeout``
        bounds the whole call (discovery of the kind included), as every
        ``timeout=`` of this class does. ``field_manager`` may be left out on a
        client [`with_field_manager()`][mcruntime.client.Client.with_field_manager];
        ``dry_run`` answers with what the apply would store.
        """
        return self._apply(obj, field_manager, force, dry_run, None, timeout)

    @overload
    def apply_status(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    @overload
    def apply_status(
        self,
        obj: _T,
        *,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> _T: ...
    def apply_status(
        self,
        obj: Any,
        *,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """Server-side apply the ``status`` of ``obj`` (the status subresource), as
        [`apply`][mcruntime.client.Client.apply] does for the object."""
        return self._apply(obj, field_manager, force, dry_run, "status", timeout)

    def _apply(
        self,
        obj: Any,
        field_manager: str | None,
        force: bool,
        dry_run: bool,
        subresource: str | None,
        timeout: float | None,
    ) -> Any:
        what = "apply_status" if subresource else "apply"
        query = self._write_query(dry_run, field_manager)
        if not query or "fieldManager" not in query:
            raise ValueError(
                f"{what} needs a field_manager (who owns the applied fields): pass "
                "field_manager= or use client.with_field_manager(...)"
            )
        with call_timeout(timeout):
            body, mapping, ns, name = self._target(obj, what, applied=True)
            if not name:
                raise ValueError(f"{what} of a {mapping.gvk} needs metadata.name")
            meta = body.get("metadata")
            if isinstance(meta, dict) and "managedFields" in meta:
                # the server refuses an applied configuration that carries managedFields
                meta = {k: v for k, v in meta.items() if k != "managedFields"}
                body = {**body, "metadata": meta}
            if force:
                query["force"] = "true"
            data = self._request_at(
                mapping,
                ns,
                name,
                subresource,
                "PATCH",
                query=query,
                body=body,
                content_type=APPLY_CONTENT_TYPE,
                expect_object=True,
            )
            return self._result(obj, data)

    # -- helpers --------------------------------------------------------------------

    def _request_at(
        self,
        mapping: RESTMapping,
        ns: str | None,
        name: str,
        subresource: str | None,
        method: str,
        **options: Any,
    ) -> Any:
        """``method`` on the object ``name`` (its ``subresource``); a kind no longer served,
        or a subresource the resource does not have, is named as such (see `_served`)."""
        with _served(self.mapper, mapping, subresource, ns, name):
            return self.rest.request(method, mapping.path(ns, name, subresource), **options)

    def mapping(self, kind: KindLike) -> RESTMapping:
        """The REST mapping of ``kind`` in this cluster."""
        return self.mapper.mapping(kind)

    @staticmethod
    def kind_of(kind: KindLike) -> GroupVersionKind:
        """Shortcut for [`kind_of()`][mcruntime.client.kind_of]."""
        return kind_of(kind)
