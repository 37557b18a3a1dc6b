"""Finalizers: add, remove and test one, saying whether the object changed; deletion under way."""

from __future__ import annotations

from typing import Any

from mcruntime.client import ObjectLike
from mcruntime.controllerutil._objects import meta_field, metadata, set_field

__all__ = ["add_finalizer", "contains_finalizer", "is_being_deleted", "remove_finalizer"]


def _finalizers(obj: Any) -> list[str]:
    meta = metadata(obj)
    if meta is None:
        return []
    value = meta.get("finalizers") if isinstance(meta, dict) else getattr(meta, "finalizers", None)
    return list(value or ())


def contains_finalizer(obj: ObjectLike, finalizer: str) -> bool:
    """Whether ``metadata.finalizers`` of ``obj`` holds ``finalizer``."""
    return finalizer in _finalizers(obj)


def add_finalizer(obj: ObjectLike, finalizer: str) -> bool:
    """Append ``finalizer`` unless present; True if ``obj`` changed (then write it)."""
    current = _finalizers(obj)
    if finalizer in current:
        return False
    set_field(metadata(obj, create=True), "finalizers", [*current, finalizer])
    return True


def remove_finalizer(obj: ObjectLike, finalizer: str) -> bool:
    """Remove every occurrence of ``finalizer``; True if ``obj`` changed (then write it)."""
    current = _finalizers(obj)
    if finalizer not in current:
        return False
    kept = [f for f in current if f != finalizer]
    meta = metadata(obj)
    if isinstance(meta, dict) and not kept:
        del meta["finalizers"]
    else:
        set_field(meta, "finalizers", kept or None)
    return True


def is_being_deleted(obj: ObjectLike) -> bool:
    """Whether ``obj`` has a ``metadata.deletionTimestamp``: deleted, waiting on its finalizers."""
    return bool(meta_field(obj, "deletion_timestamp"))
