"""CRD schema defaults without pruning, as kube-apiserver's defaulter of a custom resource
gives them (structural defaulting's ``Default``), also to a mutating webhook's patch."""

from __future__ import annotations

import pytest

from mcruntime.envtest._schema import apply_defaults, apply_schema

pytestmark = pytest.mark.timeout(30)


def _object(default: object = None, **props: object) -> dict:
    """An object schema with ``props`` (and ``default`` when given)."""
    schema: dict = {"type": "object", "properties": props}
    if default is not None:
        schema["default"] = default
    return schema


def _string(default: str, nullable: bool = False) -> dict:
    return {"type": "string", "default": default, "nullable": nullable}


SCHEMA = _object(
    spec=_object(
        extra=_object(mode=_string("auto"), note=_string("n", nullable=True)),
        ports={"type": "array", "items": _object(protocol=_string("TCP"))},
        env={"type": "object", "additionalProperties": _object(value=_string(""))},
        limits=_object({}, cpu=_string("1")),
    )
)


def _obj(**spec: object) -> dict:
    return {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"}, "spec": spec}


def test_defaults_fill_what_is_missing_and_leave_fields_the_schema_does_not_know() -> None:
    obj = _obj(extra={}, ports=[{}, {"protocol": "UDP"}], env={"A": {}}, junk={"mode": None})
    out = apply_defaults(obj, SCHEMA)
    assert out["spec"] == {
        "extra": {"mode": "auto", "note": "n"},
        "ports": [{"protocol": "TCP"}, {"protocol": "UDP"}],
        "env": {"A": {"value": ""}},
        "junk": {"mode": None},  # unknown: neither pruned nor descended into
        "limits": {"cpu": "1"},  # a default's fields are defaulted too
    }
    assert obj["spec"]["extra"] == {}  # a new object is returned
    assert out["metadata"] == {"name": "n"}


def test_a_null_is_defaulted_only_where_the_schema_does_not_allow_it() -> None:
    out = apply_defaults(_obj(extra={"mode": None, "note": None}), SCHEMA)
    assert out["spec"]["extra"] == {"mode": "auto", "note": None}


def test_a_request_object_is_pruned_then_defaulted() -> None:
    out, causes = apply_schema(_obj(extra={"mode": None, "x": 1}), SCHEMA)
    assert causes == []
    assert out["spec"] == {"extra": {"mode": "auto", "note": "n"}, "limits": {"cpu": "1"}}


def test_a_schema_without_defaults_leaves_the_object_as_it_is() -> None:
    obj = _obj(extra={})
    assert apply_defaults(obj, None) is obj
    assert apply_defaults(obj, {"type": "object"}) == obj
