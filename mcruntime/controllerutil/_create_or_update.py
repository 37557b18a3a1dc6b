"""``create_or_update`` and ``create_or_patch``: bring one object to a desired state, writing only on change."""

from __future__ import annotations

import copy
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

from mcruntime import _patch
from mcruntime.client import (
    AsyncClient,
    Client,
    MetadataOnly,
    deadline,
    gvk_of_object,
    merge_from,
    to_dict,
)
from mcruntime.controllerutil._finalizers import is_being_deleted
from mcruntime.controllerutil._objects import assign, get_field, meta_field, metadata, set_field
from mcruntime.errors import NotFound

__all__ = ["OperationResult", "create_or_patch", "create_or_update"]

T = TypeVar("T")


class OperationResult(StrEnum):
    """What [`create_or_update`][mcruntime.controllerutil.create_or_update] or
    [`create_or_patch`][mcruntime.controllerutil.create_or_patch] did."""

    UNCHANGED = "unchanged"
    """Nothing differed, so nothing was written; or the write stored nothing (what ``mutate``
    changed were defaults the server fills in again, or, for ``create_or_update``, the status:
    its resourceVersion did not move)."""
    CREATED = "created"
    """The object did not exist and was created."""
    UPDATED = "updated"
    """The object (not its status) was written; a write removing the last finalizer of an
    object being deleted too (the API server then deletes it, and answers with the
    resourceVersion read)."""
    UPDATED_STATUS = "updatedStatus"
    """``create_or_patch``: the object and its status subresource were patched."""
    UPDATED_STATUS_ONLY = "updatedStatusOnly"
    """``create_or_patch``: only the status subresource was patched."""


def _check_client(client: object, helper: str) -> None:
    """Refuse an `AsyncClient`: its calls are coroutines the helper would never await (a
    ``'coroutine' object is not iterable`` deep inside, nothing written)."""
    if isinstance(client, AsyncClient):
        raise TypeError(
            f"{helper}() takes a Client, not an AsyncClient: its calls block; from an async "
            f"def reconcile, run it off the event loop: await cluster.aclient.run_sync("
            f"{helper}, cluster.client, obj, mutate)"
        )


def _kind(obj: Any) -> Any:
    return str(gvk_of_object(obj)) if isinstance(obj, dict) else type(obj)


def _key(obj: Any) -> tuple[Any, Any]:
    return meta_field(obj, "namespace"), meta_field(obj, "name")


def _get_into(client: Client, obj: Any) -> bool:
    """Read ``obj``'s current state into it; False when it does not exist."""
    ns, name = _key(obj)
    if not name:
        raise ValueError(f"{gvk_of_object(obj)}: metadata.name is needed to look the object up")
    try:
        current = client.get(_kind(obj), name, ns, metadata_only=isinstance(obj, MetadataOnly))
    except NotFound:
        return False
    assign(obj, current)
    return True


def _version(obj: Any) -> Any:
    meta = to_dict(obj).get("metadata")
    return meta.get("resourceVersion") if isinstance(meta, dict) else None


def _stored(result: Any, version: Any) -> bool:
    """Whether a write answered with ``result`` stored something, the object read being at
    ``version``: its resourceVersion moved (a write that changes nothing, defaults the server
    fills in again, say, keeps it), or the write removed the last finalizer of an object being
    deleted, which kube-apiserver then deletes, answering the object written at the version
    read."""
    if _version(result) != version:
        return True
    return is_being_deleted(result) and not meta_field(result, "finalizers")


def _create(client: Client, obj: Any) -> None:
    """Create ``obj`` without the resourceVersion it may hold (an object read from another
    cluster, or one this helper wrote before and that was deleted since): kube-apiserver
    refuses to create an object that has one."""
    meta = metadata(obj)
    if get_field(meta, "resource_version") is not None:
        if isinstance(meta, dict):
            meta.pop("resourceVersion", None)
        else:
            set_field(meta, "resource_version", None)
    assign(obj, client.create(obj))


def _mutate(obj: Any, mutate: Callable[[Any], Any] | None, key: tuple[Any, Any]) -> None:
    if mutate is not None:
        mutate(obj)
    if _key(obj) != key:
        raise ValueError(
            f"mutate changed the name or namespace of {gvk_of_object(obj)} "
            f"{key[0] + '/' if key[0] else ''}{key[1]}: it must not"
        )


def create_or_update(
    client: Client,
    obj: T,
    mutate: Callable[[T], Any] | None = None,
    *,
    timeout: float | None = None,
) -> OperationResult:
    """Create ``obj`` or update it to what ``mutate`` makes of its current state.

    Reads the object named by ``obj``'s metadata (through ``client``: its cache
    when it has one) into ``obj``, calls ``mutate(obj)`` to set the desired
    state, and writes with an update (PUT, guarded by the resourceVersion read:
    a stale read raises [`Conflict`][mcruntime.errors.Conflict]) only if
    something differs. When the object does not exist, ``mutate`` runs on
    ``obj`` as given and it is created (without the resourceVersion it may hold:
    an object read from another cluster can be given as is). Afterwards ``obj`` holds what the API
    returned. Works on dicts, pydantic resources and ``kubernetes`` models. It writes no
    status, as Go's: the API server drops the status of a create and of an update of a kind
    with a status subresource (``unchanged`` when nothing else changed); write it with
    [`create_or_patch`][mcruntime.controllerutil.create_or_patch] or ``client.update_status``.
    Like Go's, it retries nothing: a ``Conflict`` (written since the read), an
    ``AlreadyExists`` (another creator won the race) or a ``NotFound`` (deleted since the
    read) is raised, for the reconcile to be retried on a fresh read.
    ``timeout`` bounds every call it makes together (inside a reconcile, the
    reconcile's deadline applies too). Its calls block: an ``async def`` reconcile awaits
    it off the event loop, ``await cluster.aclient.run_sync(create_or_update,
    cluster.client, obj, mutate)`` (an `AsyncClient` is refused with a `TypeError` saying so).
    """
    _check_client(client, "create_or_update")
    with deadline(timeout):
        return _create_or_update(client, obj, mutate)


def _create_or_update(
    client: Client, obj: Any, mutate: Callable[[Any], Any] | None
) -> OperationResult:
    key = _key(obj)
    if not _get_into(client, obj):
        _mutate(obj, mutate, key)
        _create(client, obj)
        return OperationResult.CREATED
    before = copy.deepcopy(to_dict(obj))
    _mutate(obj, mutate, key)
    if _patch.json_equal(before, to_dict(obj)):
        return OperationResult.UNCHANGED
    assign(obj, client.update(obj))
    return OperationResult.UPDATED if _stored(obj, _version(before)) else OperationResult.UNCHANGED


def create_or_patch(
    client: Client,
    obj: T,
    mutate: Callable[[T], Any] | None = None,
    *,
    optimistic_lock: bool = False,
    timeout: float | None = None,
) -> OperationResult:
    """Like [`create_or_update`][mcruntime.controllerutil.create_or_update], but writes merge patches.

    The change ``mutate`` made outside ``status`` goes out as one JSON merge
    patch of the object, a change of ``status`` as one merge patch of the
    status subresource; nothing is sent when nothing changed. A merge patch
    replaces a list whole: a list ``mutate`` changed (``metadata.finalizers``,
    ``ownerReferences``, ``status.conditions``) is written as ``obj`` holds it,
    over whatever another writer put in it since the read (a read from the cache
    may be behind by a while), as Go's ``CreateOrPatch`` does. With
    ``optimistic_lock=True`` (``client.MergeFromWithOptimisticLock``) each patch
    carries the resourceVersion read, so the server refuses it with
    [`Conflict`][mcruntime.errors.Conflict] when the object changed since: raise it
    and the reconcile is retried on a fresh read. Use it when ``mutate`` changes a
    list others write too (another controller's finalizer would be dropped otherwise).
    ``timeout`` bounds every call it makes together. A
    [`MetadataOnly`][mcruntime.client.MetadataOnly] object (a metadata-only
    read) is read and patched as metadata alone, so adding a finalizer to a
    Secret watched with ``metadata_only=True`` reads no data. The status ``mutate`` gives
    an object it creates is dropped by the API server, as in Go; the next call patches it.
    """
    _check_client(client, "create_or_patch")
    with deadline(timeout):
        return _create_or_patch(client, obj, mutate, optimistic_lock)


def _create_or_patch(
    client: Client, obj: Any, mutate: Callable[[Any], Any] | None, lock: bool
) -> OperationResult:
    key = _key(obj)
    if not _get_into(client, obj):
        _mutate(obj, mutate, key)
        _create(client, obj)
        return OperationResult.CREATED
    before = copy.deepcopy(to_dict(obj))
    version = _version(before)
    _mutate(obj, mutate, key)
    after = copy.deepcopy(to_dict(obj))
    status_before, status_after = before.pop("status", None), after.pop("status", None)
    if version is not None and isinstance(after.get("metadata"), dict):
        after["metadata"]["resourceVersion"] = version  # the version read, whatever mutate did
    ns, name = key
    kind = _kind(obj)
    patched = written = False
    if not _patch.json_equal(before, after):
        patch = merge_from(before, after, optimistic_lock=lock)
        result = client.patch(kind, name, patch, ns, metadata_only=isinstance(obj, MetadataOnly))
        patched = _stored(result, version)
        version, written = _version(result), True
    status_patched = False
    if not _patch.json_equal(status_before, status_after):
        meta = {"resourceVersion": version}
        patch = merge_from(
            {"metadata": meta, "status": status_before},
            {"metadata": meta, "status": status_after},
            optimistic_lock=lock,
        )
        result = client.patch_status(kind, name, patch, ns)
        status_patched = _stored(result, version)
        written = True
    if written:
        assign(obj, result if not isinstance(obj, dict) else to_dict(result))
    if not patched and not status_patched:
        return OperationResult.UNCHANGED
    if patched and status_patched:
        return OperationResult.UPDATED_STATUS
    return OperationResult.UPDATED if patched else OperationResult.UPDATED_STATUS_ONLY
