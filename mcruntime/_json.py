"""Fast JSON for the hot path (orjson), in one place."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel

JSONDecodeError = orjson.JSONDecodeError


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode JSON into plain dicts/lists (no model objects)."""
    return orjson.loads(data)


def _default(obj: Any) -> Any:
    """What orjson cannot encode itself: a typed part put into a dict body is written as the
    API spells it (a pydantic model by its aliases, a ``kubernetes`` model by its
    ``attribute_map``), so ``set_status_condition(d["status"]["conditions"], Condition(...))``
    on a dict sends a condition, not its ``repr``; anything else is stringified."""
    if isinstance(obj, BaseModel):
        if isinstance(getattr(type(obj), "api_version", None), str):  # a Resource: with its kind
            return obj.to_dict()  # type: ignore[attr-defined]
        return obj.model_dump(mode="json", by_alias=True, exclude_none=True)
    names = getattr(obj, "attribute_map", None)
    if isinstance(names, dict) and isinstance(getattr(obj, "openapi_types", None), dict):
        values = ((key, getattr(obj, attr, None)) for attr, key in names.items())
        return {key: value for key, value in values if value is not None}
    return str(obj)


def dumps(obj: Any) -> bytes:
    """Encode to compact JSON bytes; typed parts as the API spells them, other non-JSON
    types stringified."""
    return orjson.dumps(obj, default=_default)
