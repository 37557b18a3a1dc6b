"""Fast JSON for the hot path (orjson), in one place."""

from __future__ import annotations

from typing import Any

import orjson

JSONDecodeError = orjson.JSONDecodeError


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode JSON into plain dicts/lists (no model objects)."""
    return orjson.loads(data)


def dumps(obj: Any) -> bytes:
    """Encode to compact JSON bytes; non-JSON types (datetimes) are stringified."""
    return orjson.dumps(obj, default=str)
