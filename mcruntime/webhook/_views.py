"""Typed views of admitted objects: a pydantic Resource class when the kind is one, else the dict."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcruntime.client import Resource

if TYPE_CHECKING:
    from mcruntime.client import KindLike

__all__ = ["ViewError", "to_view", "from_view"]


class ViewError(ValueError):
    """The object cannot be read as the handler's typed view."""


def typed_class(kind: KindLike) -> type[Resource] | None:
    """The pydantic Resource class ``kind`` names, if it is one."""
    return kind if isinstance(kind, type) and issubclass(kind, Resource) else None


def to_view(cls: type[Resource] | None, obj: dict[str, Any] | None) -> Any:
    """``obj`` as an instance of ``cls`` (a copy of the dict without one)."""
    if obj is None:
        return None
    if cls is None:
        from mcruntime._patch import copy_json

        return copy_json(obj)
    from mcruntime.client import to_typed

    try:
        return to_typed(obj, cls)
    except ValueError as exc:  # ObjectNotTyped: each field's problem, never its value
        raise ViewError(f"the object is not a valid {cls.__qualname__}: {exc}") from None


def from_view(view: Any) -> dict[str, Any]:
    """The dict of a typed view (or the dict itself)."""
    if isinstance(view, Resource):
        return view.to_dict()
    if isinstance(view, dict):
        return view
    raise TypeError(f"a defaulter returned a {type(view).__name__}; return the object or None")
