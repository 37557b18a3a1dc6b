"""The response transforms a client asks for in ``Accept``: a Table, or metadata only.

``Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1``
asks for a list's items as ``PartialObjectMetadata`` (their ``metadata``
only), and ``as=PartialObjectMetadata`` for one object, a watch's events or a
write's answer: what client-go's metadata client and controller-runtime's
metadata-only caches send, and kube-apiserver's response transform answers
(``doTransformObject``). ``as=Table`` rows are made by ``_table``. The first
JSON media type ``Accept`` lists decides; when every one asks for a transform
the server does not make, the answer is 406 NotAcceptable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcruntime import _json
from mcruntime.envtest._status import StatusError

__all__ = [
    "PARTIAL",
    "PARTIAL_LIST",
    "TABLE",
    "Target",
    "as_partial",
    "negotiate",
    "transform_body",
]

TABLE = "Table"
PARTIAL = "PartialObjectMetadata"
PARTIAL_LIST = "PartialObjectMetadataList"
_KINDS = (TABLE, PARTIAL, PARTIAL_LIST)
_VERSIONS = ("v1", "v1beta1")
_JSON_MEDIA = ("application/json", "*/*", "application/*")  # what envtest answers in
_MEDIA_TYPES = "application/json, application/yaml, application/vnd.kubernetes.protobuf"


@dataclass(frozen=True, slots=True)
class Target:
    """The transform asked for: ``kind`` (Table, PartialObjectMetadata[List]) in ``api_version``."""

    kind: str
    api_version: str


def negotiate(accept: str) -> Target | None:
    """The transform the first JSON media type of ``accept`` asks for (None: the object as is).

    Raises 406 when each JSON media type listed asks for a transform that does
    not exist, as kube-apiserver's negotiation does. Media types envtest does
    not write (protobuf, YAML) are passed over: it answers those in JSON.
    """
    asked = False
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        if media not in _JSON_MEDIA:
            continue
        asked = True
        opts = dict(p.partition("=")[::2] for p in params if "=" in p)
        kind = opts.get("as")
        if kind is None:
            return None
        if kind in _KINDS and opts.get("g") == "meta.k8s.io" and opts.get("v") in _VERSIONS:
            return Target(kind, f"meta.k8s.io/{opts['v']}")
    if asked:
        raise _not_acceptable(f"only the following media types are accepted: {_MEDIA_TYPES}")
    return None


def as_partial(obj: dict[str, Any], api_version: str) -> dict[str, Any]:
    """``obj`` as a ``PartialObjectMetadata``: its metadata only."""
    return {"kind": PARTIAL, "apiVersion": api_version, "metadata": obj.get("metadata") or {}}


def transform(obj: dict[str, Any], target: Target, type_name: str) -> dict[str, Any]:
    """An answer ``obj`` (an object or a list) as ``target`` asks (PartialObjectMetadata[List]).

    A ``Status`` passes unchanged. ``type_name`` names the resource in the
    406 for a list asked as one object, or one object asked as a list.
    """
    if obj.get("kind") == "Status":
        return obj
    is_list = isinstance(obj.get("items"), list)
    if target.kind == PARTIAL:
        if is_list:
            raise _not_acceptable(
                f"you requested {PARTIAL}, but the requested object is a list ({type_name}List)"
            )
        return as_partial(obj, target.api_version)
    if not is_list:
        raise _not_acceptable(
            f"you requested {PARTIAL_LIST}, but the requested object is not a list ({type_name})"
        )
    meta = obj.get("metadata") or {}
    return {
        "kind": PARTIAL_LIST,
        "apiVersion": target.api_version,
        "metadata": {
            k: meta[k] for k in ("resourceVersion", "continue", "remainingItemCount") if k in meta
        },
        "items": [as_partial(item, target.api_version) for item in obj["items"]],
    }


def transform_body(body: bytes, target: Target, type_name: str) -> bytes:
    """`transform` of a JSON answer already encoded (a write's, or a converted read's)."""
    obj = _json.loads(body)
    if not isinstance(obj, dict):
        return body
    out = transform(obj, target, type_name)
    return body if out is obj else _json.dumps(out)


def _not_acceptable(message: str) -> StatusError:
    return StatusError(406, "NotAcceptable", message)
