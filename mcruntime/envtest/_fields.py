"""The fields of the built-in kinds, as kube-apiserver's decoder knows them.

kube-apiserver decodes a built-in object into its Go type: a field the type does not
have is dropped (and reported, see `mcruntime.envtest._warnings`), so a controller that
writes ``spec.replicaz`` on a Deployment finds nothing there when it reads it back.
The fields come from the ``kubernetes`` package's model classes (``openapi_types`` and
``attribute_map``), the same source as envtest's OpenAPI documents; a kind without a
model class, and free-form values (``IntOrString``, ``Quantity``, ``RawExtension``,
``fieldsV1``), keep whatever they hold.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from mcruntime.envtest._openapi import model_class, models, split_generic

if TYPE_CHECKING:
    from mcruntime.envtest._registry import ServedResource

__all__ = ["drop_unknown_fields", "drop_unknown_metadata"]

#: a value's shape: None keeps anything; a dict maps an object's JSON field names to
#: their shapes; ("list", shape) and ("map", shape) describe the items and values
_Shape = Any
_SCALARS = frozenset({"str", "int", "bool", "float", "datetime", "date", "bytes", "object"})
_ABSENT = object()


def drop_unknown_fields(res: ServedResource, obj: dict[str, Any], dropped: list[str]) -> Any:
    """``obj`` without the fields its kind does not have (their paths appended to
    ``dropped``); ``obj`` itself when it has none."""
    return _drop(obj, _kind_shape(res), "", dropped)


def drop_unknown_metadata(obj: dict[str, Any], dropped: list[str]) -> dict[str, Any]:
    """``obj`` with a ``metadata`` that holds only ObjectMeta's fields (a custom resource's:
    its schema leaves ``metadata`` to the server, which decodes it as ObjectMeta)."""
    meta = obj.get("metadata")
    kept = _drop(meta, _object_meta(), "metadata", dropped)
    return obj if kept is meta else {**obj, "metadata": kept}


def _drop(value: Any, shape: _Shape, path: str, dropped: list[str]) -> Any:
    """``value`` pruned to ``shape`` (the dropped paths appended); ``value`` itself, not a
    copy, when nothing is dropped."""
    before = len(dropped)
    _find(value, shape, path, dropped)
    return value if len(dropped) == before else _pruned(value, shape)


@cache
def _object_meta() -> _Shape:
    return _model_shape("V1ObjectMeta", {})


@cache
def _kind_shape(res: ServedResource) -> _Shape:
    cls = model_class(res)
    return None if cls is None else _model_shape(cls.__name__, {})


def _model_shape(name: str, seen: dict[str, dict[str, Any]]) -> _Shape:
    if name in seen:  # recursive models (JSONSchemaProps) share one dict
        return seen[name]
    cls = getattr(models(), name, None)
    if not isinstance(cls, type) or not hasattr(cls, "openapi_types"):
        return None
    shape: dict[str, Any] = {}
    seen[name] = shape
    names: dict[str, str] = cls.attribute_map  # type: ignore[attr-defined]
    for attr, t in cls.openapi_types.items():  # type: ignore[attr-defined]
        shape[names.get(attr, attr)] = _type_shape(t.strip(), seen)
    return shape


def _type_shape(t: str, seen: dict[str, dict[str, Any]]) -> _Shape:
    if t in _SCALARS:
        return None
    generic = split_generic(t)
    if generic is not None:
        prefix, inner = generic
        sub = _type_shape(inner.strip(), seen)
        if sub is None:
            return None
        return ("list" if prefix == "List[" else "map", sub)
    return _model_shape(t, seen)


def _find(value: Any, shape: _Shape, path: str, dropped: list[str]) -> None:
    if shape is None:
        return
    if isinstance(shape, tuple):
        kind, sub = shape
        if kind == "list" and isinstance(value, list):
            for i, item in enumerate(value):
                _find(item, sub, f"{path}[{i}]", dropped)
        elif kind == "map" and isinstance(value, dict):
            for k, item in value.items():
                _find(item, sub, f"{path}.{k}" if path else k, dropped)
        return
    if not isinstance(value, dict):
        return
    for k, item in value.items():
        sub = shape.get(k, _ABSENT)
        where = f"{path}.{k}" if path else k
        if sub is _ABSENT:
            dropped.append(where)
        elif sub is not None:
            _find(item, sub, where, dropped)


def _pruned(value: Any, shape: _Shape) -> Any:
    if shape is None:
        return value
    if isinstance(shape, tuple):
        kind, sub = shape
        if kind == "list" and isinstance(value, list):
            return [_pruned(item, sub) for item in value]
        if kind == "map" and isinstance(value, dict):
            return {k: _pruned(item, sub) for k, item in value.items()}
        return value
    if not isinstance(value, dict):
        return value
    return {k: _pruned(v, shape[k]) for k, v in value.items() if k in shape}
