"""Informers, a thread-safe store with indexers, and the per-cluster [`Cache`][mcruntime.cache.Cache].

An [`Informer`][mcruntime.cache.Informer] lists and watches one kind of one cluster into a
[`Store`][mcruntime.cache.Store] and calls [`ResourceEventHandler`][mcruntime.cache.ResourceEventHandler]\\ s; a [`Cache`][mcruntime.cache.Cache]
creates one shared informer per kind on first use and serves reads from them.
Cached objects are plain dicts shared with every reader: treat them as read-only.
"""

from __future__ import annotations

from mcruntime._exports import publish
from mcruntime.cache._cache import (
    Cache,
    CacheNotStarted,
    CacheStopped,
    CacheSyncTimeout,
    FieldIndexer,
    FieldIndexFunc,
    ResourceNotCached,
    check_options,
)
from mcruntime.cache._informer import (
    HandlerRegistration,
    Informer,
    ResourceEventHandler,
    Transform,
    first_list_here,
)
from mcruntime.cache._options import ByKind, CacheOptions
from mcruntime.cache._store import IndexFunc, Store, object_key, strip_managed_fields

__all__ = [
    "ByKind",
    "Cache",
    "check_options",
    "CacheNotStarted",
    "CacheStopped",
    "CacheOptions",
    "CacheSyncTimeout",
    "FieldIndexFunc",
    "FieldIndexer",
    "HandlerRegistration",
    "IndexFunc",
    "Informer",
    "ResourceEventHandler",
    "ResourceNotCached",
    "Store",
    "Transform",
    "first_list_here",
    "object_key",
    "strip_managed_fields",
]

publish(__name__, globals(), __all__)
