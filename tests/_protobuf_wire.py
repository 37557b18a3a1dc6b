"""A few lines of protobuf encoding, to send the bodies Go clients send (tests only).

Messages are lists of ``(field number, value)``: an int is a varint, ``bytes``
or ``str`` a length-delimited field, a list a nested message.
"""

from __future__ import annotations

from typing import Any

from mcruntime.envtest._protobuf import varint

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"


def message(fields: list[tuple[int, Any]]) -> bytes:
    """The encoding of ``fields``, in order (repeat a number for a repeated field or a map entry)."""
    out = bytearray()
    for number, value in fields:
        if isinstance(value, bool | int):
            out += varint(number << 3) + varint(int(value))
            continue
        if isinstance(value, list):
            value = message(value)
        elif isinstance(value, str):
            value = value.encode()
        out += varint(number << 3 | 2) + varint(len(value)) + value
    return bytes(out)


def entry(key: str, value: Any) -> list[tuple[int, Any]]:
    """One entry of a ``map<string, ...>`` field."""
    return [(1, key), (2, value)]


def body(api_version: str, kind: str, obj: list[tuple[int, Any]]) -> bytes:
    """A request body as client-go sends it: ``k8s\\x00`` and a ``runtime.Unknown``."""
    type_meta = [(1, api_version), (2, kind)]
    return b"k8s\x00" + message([(1, type_meta), (2, message(obj)), (3, ""), (4, "")])
