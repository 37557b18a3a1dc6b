"""Status conditions, as apimachinery's ``meta`` helpers handle ``[]metav1.Condition``.

``conditions`` is the list in an object's status: dicts (camelCase keys),
[`Condition`][mcruntime.controllerutil.Condition] models (or any pydantic model
with the same fields) or ``kubernetes.client.V1Condition`` objects. The helpers
change the list in place.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from mcruntime.client import Model
from mcruntime.controllerutil._objects import camel, get_field, set_field

__all__ = [
    "Condition",
    "find_status_condition",
    "is_status_condition_false",
    "is_status_condition_true",
    "remove_status_condition",
    "set_status_condition",
]


class Condition(Model):
    """One entry of ``status.conditions`` (``metav1.Condition``), for pydantic status models."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    observed_generation: int | None = None
    last_transition_time: str | None = None


#: how Kubernetes writes a ``metav1.Time``: RFC 3339, UTC, whole seconds
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def _time_as(like: Any, when: datetime) -> Any:
    """``when`` as condition ``like`` holds a time: a dict (what is sent) or a model whose
    ``last_transition_time`` is a string, the string Kubernetes writes (``metav1.Time``: UTC,
    seconds, ``Z``), not Python's ``isoformat`` with microseconds and an offset; a model of
    datetimes (``kubernetes.client.V1Condition``), the datetime."""
    if isinstance(like, BaseModel):
        info = type(like).model_fields.get("last_transition_time")
        if info is not None and "datetime" in repr(info.annotation).lower():
            return when
    elif not isinstance(like, dict):
        return when  # kubernetes models hold datetimes
    return when.astimezone(UTC).strftime(_TIME_FORMAT)


def _now(like: Any) -> Any:
    return _time_as(like, datetime.now(UTC).replace(microsecond=0))


def _time_for(target: Any, value: Any) -> Any:
    """``value`` (a given lastTransitionTime) as ``target`` holds a time."""
    return _time_as(target, value) if isinstance(value, datetime) else value


#: the fields a condition may leave out, with the value Go's ``metav1.Condition`` has then (its
#: zero value): ``message`` is required by the schema of ``[]metav1.Condition`` but may be empty
_ZERO: dict[str, Any] = {"reason": "", "message": "", "observed_generation": None}


def _given(condition: Any, field: str) -> Any:
    value = get_field(condition, field)
    return _ZERO[field] if value is None else value


def _set(target: Any, field: str, value: Any) -> None:
    """Set ``field`` of a condition; a dict leaves out an ``observedGeneration`` it has not
    (as Go omits a zero one) rather than sending ``null``."""
    if value is None and isinstance(target, dict):
        target.pop(camel(field), None)
    else:
        set_field(target, field, value)


def _as_element_of(conditions: list[Any], condition: Any) -> Any:
    """A copy of ``condition`` to append, as Go's ``meta.SetStatusCondition`` takes it by value
    (a template reused for many objects is neither stamped nor shared between their lists),
    stamped with the time now when it has none; a dict appended to a list of typed
    conditions becomes one of them."""
    condition = copy.deepcopy(condition)
    if not get_field(condition, "last_transition_time"):
        set_field(condition, "last_transition_time", _now(condition))
    if not isinstance(condition, dict):
        return condition
    for field in _ZERO:
        _set(condition, field, _given(condition, field))
    condition["lastTransitionTime"] = _time_for(condition, condition["lastTransitionTime"])
    kinds = {type(c) for c in conditions if isinstance(c, BaseModel)}
    return kinds.pop().model_validate(condition) if len(kinds) == 1 else condition


#: a condition as the list holds it: a dict, a `Condition` (or a model like it), a V1Condition
_C = TypeVar("_C")


def find_status_condition(conditions: Sequence[_C] | None, type: str) -> _C | None:
    """The condition of ``type`` in ``conditions`` (the list's own element), or None."""
    for c in conditions or ():
        if get_field(c, "type") == type:
            return c
    return None


def set_status_condition(conditions: list[_C], condition: _C) -> bool:
    """Add ``condition`` to ``conditions`` or update the one of its type; True if anything changed.

    ``lastTransitionTime`` changes only when the status changes (to the new
    condition's time when it has one, else now); reason, message and
    ``observedGeneration`` are taken from ``condition``. A field ``condition`` leaves
    out is Go's zero value, as ``meta.SetStatusCondition`` sees it: ``reason`` and
    ``message`` ``""`` (the schema of ``[]metav1.Condition`` requires a ``message``), no
    ``observedGeneration``. In a dict condition a ``datetime`` given as
    ``lastTransitionTime`` is written as Kubernetes writes times (``2026-01-02T03:04:05Z``).
    ``conditions`` is the list the object holds: an object without one (``None``) gets
    one first (``obj.status.conditions = []``).
    """
    if conditions is None:
        raise TypeError(
            "set_status_condition() changes the list it is given in place, and got None: "
            "give the object an empty list first (status.conditions = []) and pass that"
        )
    ctype = get_field(condition, "type")
    if not ctype:
        raise ValueError("a status condition needs a type")
    existing = find_status_condition(conditions, ctype)
    if existing is None:
        conditions.append(_as_element_of(conditions, condition))
        return True
    changed = False
    if get_field(existing, "status") != get_field(condition, "status"):
        set_field(existing, "status", get_field(condition, "status"))
        given = get_field(condition, "last_transition_time")
        set_field(
            existing,
            "last_transition_time",
            _time_for(existing, given) if given else _now(existing),
        )
        changed = True
    for field in ("reason", "message", "observed_generation"):
        value = _given(condition, field)
        if get_field(existing, field) != value:
            _set(existing, field, value)
            changed = True
    return changed


def remove_status_condition(conditions: list[Any] | None, type: str) -> bool:
    """Remove the conditions of ``type`` (every one, should the list hold it twice); True if
    there was one."""
    if not conditions:
        return False
    kept = [c for c in conditions if get_field(c, "type") != type]
    if len(kept) == len(conditions):
        return False
    conditions[:] = kept
    return True


def is_status_condition_true(conditions: list[Any] | None, type: str) -> bool:
    """Whether the condition of ``type`` is present with status ``"True"``."""
    c = find_status_condition(conditions, type)
    return c is not None and get_field(c, "status") == "True"


def is_status_condition_false(conditions: list[Any] | None, type: str) -> bool:
    """Whether the condition of ``type`` is present with status ``"False"``."""
    c = find_status_condition(conditions, type)
    return c is not None and get_field(c, "status") == "False"
