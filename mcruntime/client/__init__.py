"""REST access to one cluster: kinds, the RESTMapper, the RESTClient, typed views and the Client.

Objects are plain ``dict``s; typed views (pydantic [`Resource`][mcruntime.client.Resource] subclasses
and ``kubernetes`` model classes) are produced only when a caller names a kind
by such a class.
"""

from __future__ import annotations

from mcruntime._exports import publish
from mcruntime.client._async import (
    ASYNC_CALL_THREADS,
    AsyncAPIReader,
    AsyncClient,
    AsyncSubResourceClient,
    CallThreads,
)
from mcruntime.client._client import (
    APPLY_CONTENT_TYPE,
    PATCH_CONTENT_TYPES,
    APIReader,
    Client,
    ListPage,
    PatchType,
    Reader,
)
from mcruntime.client._kinds import GroupVersionKind, KindLike, RESTMapping, kind_of
from mcruntime.client._mapper import RESTMapper
from mcruntime.client._merge_from import merge_from
from mcruntime.client._metadata import (
    METADATA_ACCEPT,
    METADATA_LIST_ACCEPT,
    MetadataOnly,
    strip_to_metadata,
)
from mcruntime.client._resource import (
    Model,
    ObjectLike,
    ObjectMeta,
    OwnerReference,
    Resource,
    gvk_of_object,
    to_dict,
    to_typed,
)
from mcruntime.client._rest import (
    CONNECT_TIMEOUT,
    DEFAULT_TIMEOUT,
    WATCH_OPEN_TIMEOUT,
    RESTClient,
    WatchStream,
    address_of,
    cancelled_by,
    deadline,
    on_watch_thread,
    parse_warnings,
    remaining,
    retry_counts,
)
from mcruntime.client._retry import retry_on_conflict
from mcruntime.client._subresource import SubResourceClient

__all__ = [
    "CONNECT_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "METADATA_ACCEPT",
    "METADATA_LIST_ACCEPT",
    "WATCH_OPEN_TIMEOUT",
    "address_of",
    "cancelled_by",
    "deadline",
    "merge_from",
    "on_watch_thread",
    "parse_warnings",
    "remaining",
    "retry_counts",
    "retry_on_conflict",
    "APIReader",
    "ListPage",
    "ASYNC_CALL_THREADS",
    "AsyncAPIReader",
    "AsyncClient",
    "CallThreads",
    "AsyncSubResourceClient",
    "Client",
    "GroupVersionKind",
    "KindLike",
    "MetadataOnly",
    "Model",
    "ObjectLike",
    "ObjectMeta",
    "OwnerReference",
    "PATCH_CONTENT_TYPES",
    "APPLY_CONTENT_TYPE",
    "PatchType",
    "RESTClient",
    "RESTMapper",
    "RESTMapping",
    "Reader",
    "Resource",
    "SubResourceClient",
    "WatchStream",
    "gvk_of_object",
    "kind_of",
    "strip_to_metadata",
    "to_dict",
    "to_typed",
]

publish(__name__, globals(), __all__)
