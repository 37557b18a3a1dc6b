"""Metadata-only reads: objects' ``metadata`` alone, as controller-runtime's ``PartialObjectMetadata``.

The API server sends only ``metadata`` when asked with these ``Accept``
headers (client-go's metadata client sends the same); plain JSON stays
listed last, so a server without the transform answers with whole objects,
which [`strip_to_metadata()`][mcruntime.client.strip_to_metadata] then cuts down.
"""

from __future__ import annotations

from typing import Any

from mcruntime.client._kinds import GroupVersionKind

__all__ = ["METADATA_ACCEPT", "METADATA_LIST_ACCEPT", "MetadataOnly", "strip_to_metadata"]

#: ``Accept`` of a metadata-only get, watch or write
METADATA_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
#: ``Accept`` of a metadata-only list
METADATA_LIST_ACCEPT = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)


class MetadataOnly(dict[str, Any]):
    """An object as a metadata-only read returns it: a dict of ``apiVersion``, ``kind`` and
    ``metadata``, and nothing else of the object.

    [`Client`][mcruntime.client.Client] refuses to create, update or apply one,
    as controller-runtime refuses a ``PartialObjectMetadata``: written whole it
    would drop the object's data or spec. Patch its metadata instead.
    """

    __slots__ = ()


def strip_to_metadata(obj: dict[str, Any], gvk: GroupVersionKind) -> MetadataOnly:
    """``obj`` (a ``PartialObjectMetadata`` or a whole object) as a metadata-only object of ``gvk``.

    The result carries the kind's own ``apiVersion`` and ``kind`` (as
    controller-runtime's metadata informers set them), so handlers, predicates
    and owner lookups see which kind it is.
    """
    return MetadataOnly(
        apiVersion=gvk.api_version, kind=gvk.kind, metadata=obj.get("metadata") or {}
    )
