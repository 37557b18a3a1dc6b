"""One way to read and write metadata fields of the three object flavours.

Objects are plain dicts (camelCase keys), pydantic [`Resource`][mcruntime.client.Resource]
views or ``kubernetes`` model objects (both with snake_case attributes). The
helpers of this package go through these functions so each works on all three.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from pydantic import BaseModel

from mcruntime.client import ObjectMeta, OwnerReference

_CAMEL = re.compile(r"_([a-z])")


def camel(snake: str) -> str:
    """``owner_references`` -> ``ownerReferences``."""
    return _CAMEL.sub(lambda m: m.group(1).upper(), snake)


def metadata(obj: Any, *, create: bool = False) -> Any:
    """``obj``'s metadata (a dict or an object); None when absent and not ``create``."""
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        if meta is None and create:
            meta = obj["metadata"] = {}
        return meta
    meta = getattr(obj, "metadata", None)
    if meta is None and create:
        from kubernetes.client import V1ObjectMeta

        meta = V1ObjectMeta()
        obj.metadata = meta
    return meta


def get_field(part: Any, snake: str) -> Any:
    """Field ``snake`` of a dict (by its camelCase key) or an object (by attribute)."""
    if part is None:
        return None
    if isinstance(part, dict):
        return part.get(camel(snake))
    return getattr(part, snake, None)


def set_field(part: Any, snake: str, value: Any) -> None:
    """Set field ``snake`` (assignment, so pydantic views record it as set)."""
    if isinstance(part, dict):
        part[camel(snake)] = value
    else:
        setattr(part, snake, value)


def meta_field(obj: Any, snake: str) -> Any:
    """A metadata field of ``obj`` (``name``, ``namespace``, ``uid``, ``finalizers`` ...)."""
    return get_field(metadata(obj), snake)


def owner_refs(obj: Any) -> list[dict[str, Any]]:
    """``metadata.ownerReferences`` of ``obj`` as camelCase dicts (copies)."""
    refs = meta_field(obj, "owner_references") or []
    out = []
    for ref in refs:
        if isinstance(ref, dict):
            out.append(dict(ref))
        elif isinstance(ref, BaseModel):
            out.append(ref.model_dump(by_alias=True, exclude_none=True))
        else:
            keys = ("api_version", "kind", "name", "uid", "controller", "block_owner_deletion")
            out.append(
                {camel(k): getattr(ref, k) for k in keys if getattr(ref, k, None) is not None}
            )
    return out


def set_owner_refs(obj: Any, refs: list[dict[str, Any]]) -> None:
    """Store camelCase ``refs`` as ``metadata.ownerReferences`` in ``obj``'s flavour."""
    meta = metadata(obj, create=True)
    value: list[Any]
    if isinstance(meta, dict):
        value = [dict(r) for r in refs]
    elif isinstance(meta, ObjectMeta):
        value = [OwnerReference.model_validate(r) for r in refs]
    else:
        from kubernetes.client import V1OwnerReference

        value = [
            V1OwnerReference(
                api_version=r["apiVersion"],
                kind=r["kind"],
                name=r["name"],
                uid=r["uid"],
                controller=r.get("controller"),
                block_owner_deletion=r.get("blockOwnerDeletion"),
            )
            for r in refs
        ]
    if isinstance(meta, dict) and not value:
        meta.pop("ownerReferences", None)
    else:
        set_field(meta, "owner_references", value or None)


def assign(target: Any, source: Any) -> None:
    """Make ``target`` hold ``source``'s content, in place (same flavour)."""
    if isinstance(target, dict):
        target.clear()
        target.update(source)
    elif isinstance(target, BaseModel):
        for attr in (
            "__dict__",
            "__pydantic_fields_set__",
            "__pydantic_extra__",
            "__pydantic_private__",
        ):
            object.__setattr__(target, attr, copy.deepcopy(getattr(source, attr)))
    else:
        target.__dict__.update(source.__dict__)
