"""One set of Events, two APIs: core/v1 ``events`` and ``events.k8s.io/v1`` ``events``.

As in kube-apiserver, both resources read and write the same stored objects
(kept in core/v1 form); ``events.k8s.io/v1`` is a view with its own field
names, converted field by field both ways (``involvedObject`` <->
``regarding``, ``message`` <-> ``note``, ``source`` <-> ``deprecatedSource``,
``firstTimestamp``/``lastTimestamp``/``count`` <-> their ``deprecated``
forms, ``reportingComponent`` <-> ``reportingController``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["to_events_v1", "to_core_event"]

# core/v1 field -> events.k8s.io/v1 field
_RENAMES = {
    "involvedObject": "regarding",
    "message": "note",
    "source": "deprecatedSource",
    "firstTimestamp": "deprecatedFirstTimestamp",
    "lastTimestamp": "deprecatedLastTimestamp",
    "count": "deprecatedCount",
    "reportingComponent": "reportingController",
}
_BACK = {v: k for k, v in _RENAMES.items()}
_V1 = "events.k8s.io/v1"


def to_events_v1(obj: dict[str, Any]) -> dict[str, Any]:
    """A stored (core/v1) Event as events.k8s.io/v1 shows it."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if k == "source" and not v:
            continue
        out[_RENAMES.get(k, k)] = v
    out["apiVersion"] = _V1
    return out


def to_core_event(obj: dict[str, Any]) -> dict[str, Any]:
    """An events.k8s.io/v1 Event in the stored (core/v1) form."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        out[_BACK.get(k, k)] = v
    out["apiVersion"] = "v1"
    return out
