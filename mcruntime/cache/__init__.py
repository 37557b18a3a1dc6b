"""Informers, a thread-safe store with indexers, and the per-cluster :class:`Cache`."""

from __future__ import annotations

from mcruntime.cache._store import Store, object_key, strip_managed_fields

__all__ = ["Store", "object_key", "strip_managed_fields"]
