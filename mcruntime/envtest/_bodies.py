"""Bodies of the subresources that take another kind than their parent's (an Eviction, a Binding)."""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._status import StatusError

__all__ = ["typed_body"]


def typed_body(ns: str, body: Any, kind: str, api_versions: tuple[str, ...]) -> dict[str, Any]:
    """``body`` checked as kube-apiserver decodes a ``kind`` of ``api_versions`` (the first
    is the one it expects): 400 for another kind or version, or another namespace than the
    request's; its namespace is the request's."""
    if not isinstance(body, dict):
        raise StatusError.bad_request("the body of the request must be a JSON object")
    api_version, sent_kind = body.get("apiVersion") or "", body.get("kind") or ""
    if api_version and api_version not in api_versions:
        raise StatusError.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({api_versions[0]})"
        )
    if sent_kind and sent_kind != kind:
        version = api_version.rpartition("/")[2] or "v1"
        raise StatusError.bad_request(
            f'{sent_kind} in version "{version}" cannot be handled as a {kind}'
        )
    meta = body.get("metadata") or {}
    if not isinstance(meta, dict):
        raise StatusError.bad_request("metadata must be a JSON object")
    if meta.get("namespace") and meta["namespace"] != ns:
        raise StatusError.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    return {**body, "metadata": {**meta, "namespace": ns}}
