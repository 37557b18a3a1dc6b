"""Informers, a thread-safe store with indexers, and the per-cluster :class:`Cache`.

An :class:`Informer` lists and watches one kind of one cluster into a
:class:`Store` and calls :class:`ResourceEventHandler`\\ s; a :class:`Cache`
creates one shared informer per kind on first use and serves reads from them.
Cached objects are plain dicts shared with every reader: treat them as read-only.
"""

from __future__ import annotations

from mcruntime.cache._cache import (
    Cache,
    CacheNotStarted,
    CacheStopped,
    CacheSyncTimeout,
    FieldIndexFunc,
)
from mcruntime.cache._informer import HandlerRegistration, Informer, ResourceEventHandler, Transform
from mcruntime.cache._options import ByKind, CacheOptions
from mcruntime.cache._store import IndexFunc, Store, object_key, strip_managed_fields

__all__ = [
    "ByKind",
    "Cache",
    "CacheNotStarted",
    "CacheStopped",
    "CacheOptions",
    "CacheSyncTimeout",
    "FieldIndexFunc",
    "HandlerRegistration",
    "IndexFunc",
    "Informer",
    "ResourceEventHandler",
    "Store",
    "Transform",
    "object_key",
    "strip_managed_fields",
]
