"""Cache options: what each kind's informer watches and how it stores objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcruntime.cache._informer import Transform
from mcruntime.cache._store import strip_managed_fields

__all__ = ["ByKind", "CacheOptions", "DEFAULT_SYNC_TIMEOUT"]

#: how long a cache read waits for its informer's initial list (seconds)
DEFAULT_SYNC_TIMEOUT = 30.0


@dataclass
class ByKind:
    """Per-kind overrides of [`CacheOptions`][mcruntime.cache.CacheOptions]; None fields fall back to the defaults."""

    #: namespaces to watch (one watch each, one store); None: the cache default
    namespaces: list[str] | None = None
    #: label selector applied by the server to the informer's list and watch
    label_selector: str | None = None
    #: field selector applied by the server to the informer's list and watch
    field_selector: str | None = None
    #: transform applied before storing; None: the cache's ``default_transform``
    #: (pass ``lambda obj: obj`` to keep objects unchanged); it returns the object (edited
    #: in place or a new dict of the same name): one that raises or returns anything else is
    #: logged once per streak and the object is stored as the transform left it
    transform: Transform | None = None
    #: as controller-runtime's ``UnsafeDisableDeepCopy``: the cache-backed client's ``get``
    #: and ``list`` of this kind return the cache's own objects instead of copies (no copy
    #: per object read); they are read-only: a change to one corrupts the cache
    #: (a reconcile or handler reads the changed object as if the server held it)
    unsafe_disable_deep_copy: bool = False
    #: objects per page of the informer's list (client-go's ``WatchListPageSize``); None:
    #: the cache's ``list_page_size``
    list_page_size: int | None = None


@dataclass
class CacheOptions:
    """What a [`Cache`][mcruntime.cache.Cache] watches; kinds without a [`ByKind`][mcruntime.cache.ByKind] use the defaults.

    ``by_kind`` keys name kinds as everywhere else (``"v1/ConfigMap"``, a
    model or Resource class, a ``GroupVersionKind``).
    """

    by_kind: dict[Any, ByKind] = field(default_factory=dict)
    #: namespaces every namespaced kind is restricted to; None: all namespaces
    default_namespaces: list[str] | None = None
    #: label selector for every kind without its own
    default_label_selector: str | None = None
    #: transform for every kind without its own (default: drop managedFields); None: keep as is
    default_transform: Transform | None = strip_managed_fields
    #: period (seconds) of ``on_update(obj, obj)`` for every cached object, each informer's
    #: within 10 % of it (jittered as controller-runtime's ``SyncPeriod``); None: never
    #: (``SyncPeriod`` defaults to 10 hours; a resync here runs a thread per informer, so
    #: none unless asked)
    resync: float | None = None
    #: how long reads wait for an informer's initial list before failing
    sync_timeout: float = DEFAULT_SYNC_TIMEOUT
    #: objects per page of every informer's list without its own (client-go's
    #: ``WatchListPageSize``); None: ``LIST_PAGE_SIZE`` (500). The client's memory peaks at
    #: about 3x one page's JSON while a page is read: lower it for kinds of big objects
    list_page_size: int | None = None
    #: as controller-runtime's ``ReaderFailOnMissingInformer``: a ``get`` or ``list`` of a kind
    #: without an informer raises ``ResourceNotCached`` instead of starting one (informers are
    #: made by ``get_informer`` and the controllers' watches alone); False: made on first read
    reader_fail_on_missing_informer: bool = False
