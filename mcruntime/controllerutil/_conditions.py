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
from mcruntime.controllerutil._objects import get_field, set_field

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


def _now(like: Any) -> Any:
    now = datetime.now(UTC).replace(microsecond=0)
    if isinstance(like, dict):
        return now.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(like, BaseModel):
        info = type(like).model_fields.get("last_transition_time")
        if info is not None and "datetime" in repr(info.annotation):
            return now
        return now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return now  # kubernetes models hold datetimes


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
    ``observedGeneration`` are taken from ``condition``.
    """
    ctype = get_field(condition, "type")
    if not ctype:
        raise ValueError("a status condition needs a type")
    existing = find_status_condition(conditions, ctype)
    if existing is None:
        # a copy, as Go's meta.SetStatusCondition takes the condition by value: a template
        # reused for many objects is neither stamped nor shared between their lists
        condition = copy.deepcopy(condition)
        if not get_field(condition, "last_transition_time"):
            set_field(condition, "last_transition_time", _now(condition))
        conditions.append(condition)
        return True
    changed = False
    if get_field(existing, "status") != get_field(condition, "status"):
        set_field(existing, "status", get_field(condition, "status"))
        set_field(
            existing,
            "last_transition_time",
            get_field(condition, "last_transition_time") or _now(existing),
        )
        changed = True
    for field in ("reason", "message", "observed_generation"):
        value = get_field(condition, field)
        if get_field(existing, field) != value:
            set_field(existing, field, value)
            changed = True
    return changed


def remove_status_condition(conditions: list[Any], type: str) -> bool:
    """Remove the condition of ``type``; True if there was one."""
    for i, c in enumerate(conditions):
        if get_field(c, "type") == type:
            del conditions[i]
            return True
    return False


def is_status_condition_true(conditions: list[Any] | None, type: str) -> bool:
    """Whether the condition of ``type`` is present with status ``"True"``."""
    c = find_status_condition(conditions, type)
    return c is not None and get_field(c, "status") == "True"


def is_status_condition_false(conditions: list[Any] | None, type: str) -> bool:
    """Whether the condition of ``type`` is present with status ``"False"``."""
    c = find_status_condition(conditions, type)
    return c is not None and get_field(c, "status") == "False"
