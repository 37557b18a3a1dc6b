"""Owner and controller references (``metadata.ownerReferences``) within one cluster.

An owner reference names an object of the same cluster (and, for a namespaced
owner, the same namespace): the garbage collector of that cluster deletes the
dependent when its owner goes. Across clusters there is no such reference.
"""

from __future__ import annotations

from typing import Any

from mcruntime.client import GroupVersionKind, ObjectLike, gvk_of_object
from mcruntime.controllerutil._objects import meta_field, owner_refs, set_owner_refs

__all__ = [
    "AlreadyOwnedError",
    "get_controller_of",
    "has_controller_reference",
    "has_owner_reference",
    "remove_controller_reference",
    "remove_owner_reference",
    "set_controller_reference",
    "set_owner_reference",
]


class AlreadyOwnedError(ValueError):
    """``set_controller_reference`` found another controller owning the object."""

    def __init__(self, obj: str, owner: dict[str, Any]) -> None:
        self.owner = owner
        super().__init__(
            f"{obj} is already owned by another {owner.get('kind')} controller "
            f"{owner.get('name')!r} (apiVersion {owner.get('apiVersion')}, uid {owner.get('uid')})"
        )


def _describe(obj: Any) -> str:
    ns, name = meta_field(obj, "namespace"), meta_field(obj, "name")
    try:
        kind = gvk_of_object(obj).kind
    except ValueError:
        kind = type(obj).__name__
    return f"{kind} {ns + '/' if ns else ''}{name}"


def _reference(owner: Any, obj: Any) -> dict[str, Any]:
    gvk = gvk_of_object(owner)
    name, uid = meta_field(owner, "name"), meta_field(owner, "uid")
    if not name or not uid:
        raise ValueError(
            f"owner {_describe(owner)} has no name or uid: create it (and use the object "
            "the API returned) before referencing it"
        )
    owner_ns, obj_ns = meta_field(owner, "namespace"), meta_field(obj, "namespace")
    if owner_ns:
        if not obj_ns:
            # the kind is not known here: a ConfigMap built without a namespace (kopf.adopt
            # fills it in) is as likely as a cluster-scoped object
            raise ValueError(
                f"{_describe(obj)} has no metadata.namespace: a namespaced object must be in "
                f"its owner's namespace ({owner_ns!r}; set it before the reference), and a "
                f"cluster-scoped one must not have a namespace-scoped owner ({_describe(owner)})"
            )
        if owner_ns != obj_ns:
            raise ValueError(
                f"cross-namespace owner references are disallowed: owner {_describe(owner)}, "
                f"object {_describe(obj)}"
            )
    return {"apiVersion": gvk.api_version, "kind": gvk.kind, "name": name, "uid": uid}


def _same_object(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same group, kind and name (the version may differ), as controller-runtime compares."""
    ga = GroupVersionKind.from_api_version(a.get("apiVersion", ""), a.get("kind", "")).group
    gb = GroupVersionKind.from_api_version(b.get("apiVersion", ""), b.get("kind", "")).group
    return ga == gb and a.get("kind") == b.get("kind") and a.get("name") == b.get("name")


def _upsert(refs: list[dict[str, Any]], ref: dict[str, Any]) -> list[dict[str, Any]]:
    for i, existing in enumerate(refs):
        if _same_object(existing, ref):
            return [*refs[:i], ref, *refs[i + 1 :]]
    return [*refs, ref]


def set_owner_reference(
    owner: ObjectLike, obj: ObjectLike, *, block_owner_deletion: bool | None = None
) -> bool:
    """Add (or update) an owner reference to ``owner`` in ``obj``; True if ``obj`` changed.

    An existing reference to the same owner keeps its ``controller`` and
    ``blockOwnerDeletion`` flags (Go's ``SetOwnerReference`` replaces the reference,
    dropping the ``controller: true`` a ``SetControllerReference`` gave it).
    ``block_owner_deletion`` sets ``blockOwnerDeletion`` (Go's ``WithBlockOwnerDeletion``
    option): with ``True``, a foreground deletion of the owner waits for ``obj`` to go.
    Raises ``ValueError`` for an owner without a uid or in another namespace (a
    cluster-scoped object cannot have a namespaced owner).
    """
    ref = _reference(owner, obj)
    refs = owner_refs(obj)
    for existing in refs:
        if _same_object(existing, ref):
            for flag in ("controller", "blockOwnerDeletion"):
                if flag in existing:
                    ref[flag] = existing[flag]
    if block_owner_deletion is not None:
        ref["blockOwnerDeletion"] = block_owner_deletion
    new = _upsert(refs, ref)
    if new == refs:
        return False
    set_owner_refs(obj, new)
    return True


def set_controller_reference(
    owner: ObjectLike, obj: ObjectLike, *, block_owner_deletion: bool = True
) -> bool:
    """Make ``owner`` the controller of ``obj``; True if ``obj`` changed.

    Raises [`AlreadyOwnedError`][mcruntime.controllerutil.AlreadyOwnedError]
    naming the other controller when ``obj`` already has a controller reference
    to another object; ``ValueError`` as [`set_owner_reference`][mcruntime.controllerutil.set_owner_reference].
    """
    ref = _reference(owner, obj)
    ref["controller"] = True
    ref["blockOwnerDeletion"] = block_owner_deletion
    refs = owner_refs(obj)
    for existing in refs:
        if existing.get("controller") and not _same_object(existing, ref):
            raise AlreadyOwnedError(_describe(obj), existing)
    new = _upsert(refs, ref)
    if new == refs:
        return False
    set_owner_refs(obj, new)
    return True


def _target(owner: Any) -> dict[str, Any]:
    gvk = gvk_of_object(owner)
    return {"apiVersion": gvk.api_version, "kind": gvk.kind, "name": meta_field(owner, "name")}


def remove_owner_reference(owner: ObjectLike, obj: ObjectLike) -> bool:
    """Remove the owner reference to ``owner`` from ``obj``; True if there was one."""
    target = _target(owner)
    refs = owner_refs(obj)
    kept = [r for r in refs if not _same_object(r, target)]
    if len(kept) == len(refs):
        return False
    set_owner_refs(obj, kept)
    return True


def remove_controller_reference(owner: ObjectLike, obj: ObjectLike) -> bool:
    """Remove ``owner``'s controller reference from ``obj`` (releasing it); True if ``obj``
    changed.

    Only a reference with ``controller: true`` goes: ``obj`` unchanged (False) when
    ``owner`` is not its controller, a plain owner reference to ``owner`` included, so a
    reconciler that releases what it no longer selects can call it again safely.
    """
    target = _target(owner)
    refs = owner_refs(obj)
    kept = [r for r in refs if not (r.get("controller") and _same_object(r, target))]
    if len(kept) == len(refs):
        return False
    set_owner_refs(obj, kept)
    return True


def has_owner_reference(owner: ObjectLike, obj: ObjectLike) -> bool:
    """Whether ``obj`` has an owner reference to ``owner`` (a controller one or not)."""
    target = _target(owner)
    return any(_same_object(r, target) for r in owner_refs(obj))


def has_controller_reference(obj: ObjectLike) -> bool:
    """Whether ``obj`` has an owner reference with ``controller: true``."""
    return get_controller_of(obj) is not None


def get_controller_of(obj: ObjectLike) -> dict[str, Any] | None:
    """The owner reference of ``obj`` with ``controller: true``, or None.

    A camelCase dict (``apiVersion``, ``kind``, ``name``, ``uid``, ...) whatever
    flavour ``obj`` is, as apimachinery's ``metav1.GetControllerOf`` gives it; what
    an index function of the owners (``.metadata.controller``) or a map function
    looks up.
    """
    for ref in owner_refs(obj):
        if ref.get("controller"):
            return ref
    return None
