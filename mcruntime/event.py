"""Events a source delivers to predicates and handlers, each stamped with its cluster's name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CreateEvent", "UpdateEvent", "DeleteEvent", "GenericEvent", "Event"]

Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class CreateEvent:
    """An object appeared (or was listed when a watch started: ``is_initial_list``)."""

    object: Object
    cluster_name: str = ""
    is_initial_list: bool = False


@dataclass(frozen=True, slots=True)
class UpdateEvent:
    """An object changed from ``object_old`` to ``object_new``."""

    object_old: Object
    object_new: Object
    cluster_name: str = ""

    @property
    def object(self) -> Object:
        return self.object_new


@dataclass(frozen=True, slots=True)
class DeleteEvent:
    """An object is gone; ``object`` is its last known state.

    ``delete_state_unknown`` (controller-runtime's ``DeleteStateUnknown``) is True for a
    delete the watch missed, found by a relist (after a ``410 Gone``, say): ``object`` is
    then the last state the cache saw, not the object's final one.
    """

    object: Object
    cluster_name: str = ""
    delete_state_unknown: bool = False


@dataclass(frozen=True, slots=True)
class GenericEvent:
    """An event from outside the API server (a channel, a timer, another system)."""

    object: Object
    cluster_name: str = ""


Event = CreateEvent | UpdateEvent | DeleteEvent | GenericEvent


def meta(obj: Object) -> dict[str, Any]:
    """The object's metadata (empty dict when missing)."""
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}
