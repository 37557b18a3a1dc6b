"""etcd's request size limit, as kube-apiserver meets it on a write.

etcd refuses a request over its ``--max-request-bytes`` (1.5 MiB by default,
``embed.DefaultMaxRequestBytes``; https://etcd.io/docs/latest/dev-guide/limit/) with
``rpctypes.ErrRequestTooLarge``, "etcdserver: request is too large". kube-apiserver's etcd3
store returns that error as it is, the registry's ``InterpretCreateError`` /
``InterpretUpdateError`` pass on what is no storage error, and ``ErrorToAPIStatus`` makes
of an error that is no ``APIStatus`` a 500 ``Status`` with no reason and no details, its
message the error's (logging "apiserver received an error that is not an
metav1.Status: rpctypes.EtcdError{code:0x3, desc:\\"etcdserver: request is too large\\"}"):
kubernetes/kubernetes#74600 shows the body,
``{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"etcdserver:
request is too large","code":500}``, and #112152 (open) asks for a better code still.

So an object may pass kube-apiserver's 3 MiB request body limit and still not be stored.
What etcd measures is the encoded object with its key: custom resources are stored as
JSON, built-in kinds as protobuf, which envtest does not encode; their size is estimated
from below (the UTF-8 bytes of their strings, a Secret's ``data`` and a ConfigMap's
``binaryData`` decoded from base64), so envtest never refuses a built-in object a cluster
would store.
"""

from __future__ import annotations

from typing import Any

from mcruntime import _json
from mcruntime.envtest._status import StatusError

__all__ = ["MAX_REQUEST_BYTES", "check_request_size"]

#: etcd's ``--max-request-bytes`` default: the most a write of one object may carry
MAX_REQUEST_BYTES = 1536 * 1024
_TOO_LARGE = "etcdserver: request is too large"


def _strings_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, dict):
        return sum(len(k.encode()) + _strings_size(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_strings_size(v) for v in value)
    return 0


def _bytes_fields_size(obj: dict[str, Any], field: str) -> int:
    """The decoded bytes of map ``field`` of base64 values, with its keys."""
    data = obj.get(field)
    if not isinstance(data, dict):
        return 0
    return sum(
        len(k.encode()) + (len(v) * 3 // 4 if isinstance(v, str) else 0) for k, v in data.items()
    )


def _builtin_size(resource: str, obj: dict[str, Any]) -> int:
    bytes_field = {"secrets": "data", "configmaps": "binaryData"}.get(resource)
    if bytes_field is None:
        return _strings_size(obj)
    rest = {k: v for k, v in obj.items() if k != bytes_field}
    return _strings_size(rest) + _bytes_fields_size(obj, bytes_field)


def check_request_size(
    key: str, obj: dict[str, Any], *, custom: bool, resource: str, limit: int
) -> None:
    """Refuse, as kube-apiserver passes on etcd's refusal, the write of ``obj`` under etcd
    key ``key`` when it is over ``limit`` bytes (see the module's docstring)."""
    size = len(key) + (len(_json.dumps(obj)) if custom else _builtin_size(resource, obj))
    if size > limit:
        raise StatusError(500, "", _TOO_LARGE)
