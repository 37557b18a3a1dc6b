"""One set of Events, two APIs: core/v1 ``events`` and ``events.k8s.io/v1`` ``events``.

As in kube-apiserver, both resources read and write the same stored objects
(kept in core/v1 form); ``events.k8s.io/v1`` is a view with its own field
names, converted field by field both ways (``involvedObject`` <->
``regarding``, ``message`` <-> ``note``, ``source`` <-> ``deprecatedSource``,
``firstTimestamp``/``lastTimestamp``/``count`` <-> their ``deprecated``
forms, ``reportingComponent`` <-> ``reportingController``).

Both are validated as kube-apiserver does (``pkg/apis/core/validation/events.go``):
every write by the old rules (`legacy_causes`: an Event without ``eventTime`` is
in its object's namespace; one with it names its reporting controller and
instance, an action and a reason, and says at most 1,024 bytes), and what
``events.k8s.io/v1`` creates and updates by its strict ones as well
(`check_events_v1`: an ``eventTime``, a DNS subdomain name, no deprecated field
set, a series of 2 or more; once written, what it says is fixed).
"""

from __future__ import annotations

from typing import Any

from mcruntime._selectors import qualified_name_problems, subdomain_problems
from mcruntime.envtest._gofmt import go_string, go_value
from mcruntime.envtest._status import Causes

__all__ = ["check_events_v1", "legacy_causes", "to_core_event", "to_events_v1"]

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


#: kube-apiserver's ReportingInstanceLengthLimit, ActionLengthLimit, ReasonLengthLimit
_NAME_MAX = 128
#: its NoteLengthLimit
NOTE_MAX = 1024
#: what an update through events.k8s.io/v1 may not change (ValidateEventUpdate's order,
#: ``reason`` twice as there), by their stored (core/v1) names
_FIXED = (
    "involvedObject",
    "reason",
    "message",
    "source",
    "firstTimestamp",
    "lastTimestamp",
    "count",
    "reason",
    "type",
    "eventTime",
    "action",
    "related",
    "reportingComponent",
    "reportingInstance",
)
#: the field paths kube-apiserver names (its internal type's)
_PATHS = {"reportingComponent": "reportingController"}


def _size(text: str) -> int:
    return len(text.encode())


def _field(event: dict[str, Any], field: str) -> dict[str, Any]:
    value = event.get(field)
    return value if isinstance(value, dict) else {}


def _text(event: dict[str, Any], field: str) -> str:
    value = event.get(field)
    return value if isinstance(value, str) else ""


def legacy_causes(event: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``legacyValidateEvent`` of a stored (core/v1) Event: what every write of one must pass."""
    c = Causes()
    ns = _text(_field(event, "metadata"), "namespace")
    ref_ns = _text(_field(event, "involvedObject"), "namespace")
    mismatch = ("involvedObject.namespace", go_string(ref_ns), "does not match event.namespace")
    if not event.get("eventTime"):  # an old Event: in the namespace of its object
        if (ref_ns and ns != ref_ns) or (not ref_ns and ns not in ("", "default")):
            c.invalid(*mismatch)
        return c.items
    if not ref_ns and ns not in ("default", "kube-system"):
        c.invalid(*mismatch)
    controller = _text(event, "reportingComponent")
    if not controller:
        c.required("reportingController")
    for problem in qualified_name_problems(controller):
        c.invalid("reportingController", go_string(controller), problem)
    for field in ("reportingInstance", "action", "reason"):
        value = _text(event, field)
        if not value:
            c.required(field)
        if _size(value) > _NAME_MAX:
            c.invalid(field, '""', f"can have at most {_NAME_MAX} characters")
    if _size(_text(event, "message")) > NOTE_MAX:
        c.invalid("message", '""', f"can have at most {NOTE_MAX} characters")
    return c.items


def _series_causes(event: dict[str, Any], c: Causes) -> None:
    """``validateV1EventSeries``."""
    series = event.get("series")
    if isinstance(series, dict):
        count = series.get("count")
        if not isinstance(count, int) or count < 2:
            c.invalid("series.count", '""', "should be at least 2")
        if not series.get("lastObservedTime"):
            c.required("series.lastObservedTime")


def check_events_v1(event: dict[str, Any], old: dict[str, Any] | None) -> None:
    """Refuse (422) the stored form of an Event created (``old`` None) or updated through
    ``events.k8s.io/v1`` where its strict rules do (``ValidateEventCreate``,
    ``ValidateEventUpdate``; the old rules are checked for every write already)."""
    c = Causes()
    name = _text(_field(event, "metadata"), "name")
    if old is None:
        for problem in subdomain_problems(name):
            c.invalid("metadata.name", go_string(name), problem)
        _series_causes(event, c)
        if not event.get("eventTime"):
            c.required("eventTime")
        if event.get("type") not in ("Normal", "Warning"):
            c.invalid("type", '""', f"has invalid value: {_text(event, 'type')}")
        for field in ("firstTimestamp", "lastTimestamp"):
            if event.get(field):
                c.invalid(field, '""', "needs to be unset")
        if event.get("count"):
            c.invalid("count", '""', "needs to be unset")
        source = _field(event, "source")
        if source.get("component") or source.get("host"):
            c.invalid("source", '""', "needs to be unset")
    else:
        if event.get("series") != old.get("series"):
            _series_causes(event, c)
        for field in _FIXED:
            # compared as Go compares the decoded structs: an empty value is an unset one
            value = event.get(field) or None
            if value != (old.get(field) or None):
                c.invalid(_PATHS.get(field, field), go_value(value), "field is immutable")
    c.raise_if_any("Event", name, "events.k8s.io")
